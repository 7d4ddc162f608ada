"""``opid check-restore CHECKPOINT --spark MODULE:FUNCTION --conf ... -- ARGS`` (issue 38): the
command-line route plans the new query from the team's own code with the settings the
checkpoint pins, through the same restore entrance as the Python API, on real restarts.

For every pair of the real restart sets, B's code is written to a module and checked by the CLI;
its exit code must be what Spark did (1: Spark refused; 0 or 3: restarted with the same
meaning; 1 or 3: restarted under another meaning, wrong results) and equal to the code the API's
verdict on the same live query maps to.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import pytest_opid
from pytest_opid.cli import main
from pytest_opid.result import RestoreCheck
from pytest_opid.spark.versions import installed_line, judged_for, parse_line
from tests.spark.restart.test_restart_data import MEANING_CHANGES
from tests.spark.restart_cases import extract, load_cases, paths

DATA = Path(__file__).resolve().parents[2] / "data"
SETS = {
    "4.3": load_cases(DATA / "spark-restart"),
    "3.5": load_cases(DATA / "spark-restart-35"),
}
UPGRADES = {
    rec["id"]: rec
    for rec in map(
        json.loads, (DATA / "upgrade-restart" / "cases.jsonl").read_text("utf-8").splitlines()
    )
    if rec["spark_version_a"] != rec["spark_version_b"]
}


def _code(check: RestoreCheck) -> int:
    """The exit code ``opid check-restore`` gives a verdict (docs/cli.md)."""
    if check.safe is True:
        return 0
    return 3 if check.safe is None else 1


@pytest.fixture
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = tmp_path / "jobs"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    yield folder


def _write_job(folder: Path, name: str, code: str) -> str:
    """B's code as a module a team would have: ``job(spark, root)`` returns its query."""
    (folder / f"{name}.py").write_text(
        code
        + textwrap.dedent(
            f"""

            def job(spark, root):
                return build(spark, {{key: root + "/" + key for key in {list(paths(Path("x")))!r}}})
            """
        ),
        encoding="utf-8",
    )
    return f"{name}:job"


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(["check-restore", "--json", *argv])
    out, err = capsys.readouterr()
    assert err == "", err
    return code, json.loads(out)


def _findings(verdict: dict[str, Any]) -> dict[str, Any]:
    keys = ("problems", "reinterpreted", "unverified", "warnings")
    found = {key: [(f["kind"], f.get("state_id")) for f in verdict[key]] for key in keys}
    return {**found, "restorable": verdict["restorable"], "safe": verdict["safe"]}


def _conf(settings: dict[str, str]) -> list[str]:
    return [arg for key, value in settings.items() for arg in ("--conf", f"{key}={value}")]


def _expected(restarted: bool, meaning_changed: bool) -> set[int]:
    if not restarted:
        return {1}
    return {1, 3} if meaning_changed else {0, 3}


def _line_cases() -> list[tuple[str, str]]:
    have = installed_line()
    return [
        (line, case_id)
        for line, cases in SETS.items()
        if parse_line(line) == have or (line == "4.3" and have > parse_line(line))
        for case_id in sorted(cases)
    ]


@pytest.mark.parametrize(("line", "case_id"), _line_cases())
def test_the_program_route_says_what_spark_did(
    spark: Any,
    tmp_path: Path,
    modules: Path,
    capsys: pytest.CaptureFixture[str],
    line: str,
    case_id: str,
) -> None:
    rec = SETS[line][case_id]
    data = DATA / ("spark-restart" if line == "4.3" else "spark-restart-35")
    folder = extract(rec, tmp_path, data)
    target = _write_job(modules, f"job_{abs(hash(case_id))}", rec["after_code"])
    conf = rec["session_conf_after"]
    with judged_for(line):
        code, said = _cli(
            capsys,
            str(folder / "checkpoint"),
            "--spark",
            target,
            *_conf(conf),
            "--",
            str(folder),
        )
    meaning = rec["case"]["refactor_kind"] in MEANING_CHANGES
    assert code in _expected(rec["spark"]["restarted"], meaning), said
    # the API on the same live query, in the same settings: the same verdict
    namespace: dict[str, Any] = {}
    exec(rec["after_code"], namespace)
    session = spark.newSession()
    for key, value in conf.items():
        session.conf.set(key, value)
    with judged_for(line):
        api = pytest_opid.check_restore(
            folder / "checkpoint", namespace["build"](session, paths(folder))
        )
    assert _code(api) == code
    # the same findings (a state function's message may name the module it was defined in)
    assert _findings(api.to_dict()) == _findings(said)


@pytest.mark.spark_line("4.3", reason="B is planned by 4.3; the upgrade's target line is judged")
@pytest.mark.parametrize("case_id", sorted(UPGRADES)[::3])  # a third: the API's are all judged
def test_the_upgrade_check_from_the_program(
    tmp_path: Path, modules: Path, capsys: pytest.CaptureFixture[str], case_id: str
) -> None:
    from tests.spark.restart.test_upgrade_restarts import _extract

    rec = UPGRADES[case_id]
    folder = _extract(rec, tmp_path)
    target = _write_job(modules, f"upgrade_{abs(hash(case_id))}", rec["after_code"])
    line = rec["spark_version_b"].rsplit(".", 1)[0]
    code, said = _cli(
        capsys,
        str(folder / "checkpoint"),
        "--spark",
        target,
        *_conf(rec["session_conf_after"]),
        "--spark-version",
        line,
        "--",
        str(folder),
    )
    wrong = rec["results_match"] is False and not rec["by_design_reason"]
    assert code in _expected(rec["restarted"], wrong), said


@pytest.mark.spark_line("4.3", reason="the CLI's own settings, the same on every line")
def test_without_conf_the_program_gets_the_shuffle_partitions_the_checkpoint_pins(
    tmp_path: Path, modules: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Spark restores the shuffle partitions from the offset log whatever the restarted query
    # asks for: without --conf the check plans with the checkpoint's (2 here), and says
    # nothing of a setting the user never gave; with --conf it says Spark ignores theirs.
    rec = SETS["4.3"]["agg_cat_complete__no_change__100006"]
    assert rec["session_conf_before"]["spark.sql.shuffle.partitions"] == "2"
    folder = extract(rec, tmp_path, DATA / "spark-restart")
    target = _write_job(modules, "job_pinned_partitions", rec["after_code"])
    checkpoint = str(folder / "checkpoint")

    code, said = _cli(capsys, checkpoint, "--spark", target, "--", str(folder))
    assert code in (0, 3), said
    assert not [w for w in said["warnings"] if "asks for" in w["message"]], said["warnings"]

    code, said = _cli(
        capsys, checkpoint, "--spark", target, "--conf", "spark.sql.shuffle.partitions=8",
        "--", str(folder),
    )  # fmt: skip
    assert code in (0, 3), said
    assert any("asks for 8, which Spark ignores" in w["message"] for w in said["warnings"])
