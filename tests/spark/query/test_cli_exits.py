"""Issue 48, item 3: every ``--spark`` command's exit status means what docs/cli.md says.

A function that exits (``sys.exit(0)``, or argparse's ``--help`` in it) returns no query: it was
opid's exit 0 with no verdict (check-restore), no record (record-deploy) or "same" having run
nothing (demonstrate). A ``--conf`` value Spark refuses was a traceback and exit 1 ("not
restorable"). A missing optional dependency was a traceback. Each is now one ``error:`` line,
nothing on stdout, exit 2.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_opid.cli import main

HERE = Path(__file__).resolve().parents[1]
COMMANDS = ["fingerprint", "check-restore", "record-deploy", "demonstrate"]


@pytest.fixture
def programs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))


def _commands(tmp_path: Path, target: str, *tail: str) -> dict[str, list[str]]:
    checkpoint = str(tmp_path / "checkpoint")
    return {
        "fingerprint": ["fingerprint", "--spark", target, *tail],
        "check-restore": ["check-restore", checkpoint, "--spark", target, *tail],
        "record-deploy": ["record-deploy", checkpoint, "--spark", target, *tail],
        "demonstrate": ["demonstrate", "--spark", target, "--spark", target, *tail],
    }


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(
    "target, args, said",
    [
        ("spark_programs:exits", ["in/"], "it exited (SystemExit: 0) instead of returning a query"),
        ("spark_programs:parses", ["--help"], "it exited (SystemExit: 0)"),
        ("spark_programs:parses", [], "it exited (SystemExit: 2)"),
    ],
)
def test_a_function_that_exits_is_one_error_line_and_exit_2(
    spark: Any,
    programs: None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: str,
    target: str,
    args: list[str],
    said: str,
) -> None:
    (tmp_path / "checkpoint").mkdir()
    argv = _commands(tmp_path, target, "--", *args)[command]
    code = main(argv)
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    last = err.splitlines()[-1]  # argparse's own usage text comes before, on stderr
    assert last.startswith(f"error: --spark {target}: the function failed: {said}"), err
    assert "Traceback" not in err
    assert list((tmp_path / "checkpoint").iterdir()) == []  # record-deploy recorded nothing


@pytest.mark.parametrize("command", COMMANDS)
def test_a_conf_value_spark_refuses_is_one_line_and_exit_2(
    spark: Any,
    programs: None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: str,
) -> None:
    (tmp_path / "checkpoint").mkdir()
    before = spark.conf.get("spark.sql.shuffle.partitions")
    conf = ("--conf", "spark.sql.shuffle.partitions=abc")
    argv = _commands(tmp_path, "spark_programs:counts", *conf, "--", str(tmp_path))[command]
    code = main(argv)
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err.startswith("error: --conf spark.sql.shuffle.partitions=abc: Spark refuses it:")
    # Spark 4.x quotes the value ('abc'), 3.5 says "should be int, but was abc"
    assert "abc" in err and err.count("\n") == 1
    assert spark.conf.get("spark.sql.shuffle.partitions") == before


def test_a_conf_value_spark_refuses_in_a_new_session_is_one_line(tmp_path: Path) -> None:
    """In a process of its own the session is built with the value, and refuses its first
    settings access (a traceback and exit 1 before)."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_opid",
            "fingerprint",
            "--spark",
            "spark_programs:counts",
            "--conf",
            "spark.sql.shuffle.partitions=abc",
            "--",
            str(tmp_path),
        ],
        cwd=HERE,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert (done.returncode, done.stdout) == (2, ""), done.stderr[-2000:]
    # the session starts without it and the setting is refused when set, naming it
    assert done.stderr.startswith("error: --conf spark.sql.shuffle.partitions=abc: "), done.stderr
    assert "spark.sql.shuffle.partitions" in done.stderr and done.stderr.count("\n") == 1


def test_demonstrate_without_hypothesis_is_one_line_naming_the_extra(
    programs: None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A PySpark installed without the ``spark`` extra's Hypothesis (a traceback
    ``No module named 'hypothesis'`` and exit 1, "differs or refused", before)."""
    monkeypatch.setitem(sys.modules, "hypothesis", None)  # import hypothesis: ImportError
    argv = _commands(tmp_path, "spark_programs:counts", "--", str(tmp_path))["demonstrate"]
    code = main(argv)
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err == (
        "error: opid demonstrate needs Hypothesis, which is not installed: "
        "pip install -e '.[spark]' in the clone (or pytest-opid[spark])\n"
    )


def test_every_spark_extra_brings_hypothesis() -> None:
    """``demonstrate`` draws its rows with Hypothesis: the README's ``.[pytest,spark]`` (and
    each line's extra) installs it, in the ``hypothesis`` extra's range."""
    import tomllib
    from packaging.requirements import Requirement

    pyproject = tomllib.loads((HERE.parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    extras = pyproject["project"]["optional-dependencies"]
    (wanted,) = (Requirement(text) for text in extras["hypothesis"])
    spark_extras = [name for name in extras if name.startswith("spark")]
    assert spark_extras == ["spark", "spark35", "spark40", "spark41", "spark42", "spark43"]
    for name in spark_extras:
        found = [Requirement(t) for t in extras[name] if Requirement(t).name == "hypothesis"]
        assert [str(r.specifier) for r in found] == [str(wanted.specifier)], name
