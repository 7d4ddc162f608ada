"""``opid fingerprint --spark MODULE:FUNCTION -- ARGS`` (issue 20): the fingerprint of the query
a team's own function returns, under the session settings given with ``--conf``; bad input is
one line and exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_opid
from pytest_opid.cli import main

HERE = Path(__file__).resolve().parents[1]


@pytest.fixture
def programs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["fingerprint", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_function_s_query_is_fingerprinted_under_the_given_settings(
    spark, programs, tmp_path, capsys
):
    from spark_programs import counts  # type: ignore[import-not-found]

    before = spark.conf.get("spark.sql.shuffle.partitions")
    code, out, err = _run(
        capsys,
        "--spark",
        "spark_programs:counts",
        "--conf",
        "spark.sql.shuffle.partitions=7",
        "--json",
        "--",
        str(tmp_path),
    )
    assert (code, err) == (0, "")
    assert spark.conf.get("spark.sql.shuffle.partitions") == before  # put back
    spark.conf.set("spark.sql.shuffle.partitions", "7")
    try:
        expected = pytest_opid.fingerprint(counts(spark, str(tmp_path)))
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)
    got = pytest_opid.fingerprint(json.loads(out))
    assert got.to_dict() == expected.to_dict()
    assert 7 in {op.parallelism for op in got.operators}
    # another setting, another fingerprint: the settings reach the plan
    code, out, _ = _run(capsys, "--spark", "spark_programs:counts", "--json", "--", str(tmp_path))
    assert code == 0
    assert 7 not in {op.parallelism for op in pytest_opid.fingerprint(json.loads(out)).operators}


def test_the_table_is_printed_without_json(spark, programs, tmp_path, capsys):
    code, out, err = _run(capsys, "--spark", "spark_programs:counts", "--", str(tmp_path))
    assert (code, err) == (0, "")
    assert "StateStoreSave" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--spark", "spark_programs"], "--spark 'spark_programs': expected MODULE:FUNCTION"),
        (["--spark", "no_such_module_x:f"], "--spark no_such_module_x:f: cannot import"),
        (["--spark", "spark_programs:nope"], "--spark spark_programs:nope: spark_programs has no"),
        (["--spark", "spark_programs:NOT_CALLABLE"], "--spark spark_programs:NOT_CALLABLE: NOT_"),
        (
            ["--spark", "spark_programs:broken", "--", "in/"],
            "--spark spark_programs:broken: the function failed: ValueError: no input at in/\n",
        ),
        (
            ["--spark", "spark_programs:not_a_query"],
            "--spark spark_programs:not_a_query: the function's result: pytest_opid.fingerprint",
        ),
        (["--spark", "spark_programs:counts", "--conf", "novalue"], "--conf 'novalue': expected"),
        (["--conf", "a=b", "x.json"], "--conf is for --spark"),
        ([], "the following arguments are required: FILE (or --spark MODULE:FUNCTION)"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(spark, programs, capsys, argv, message):
    code, out, err = _run(capsys, *argv)
    assert (code, out) == (2, "")
    assert err.startswith("error: " + message) and err.count("\n") == 1
    assert "Traceback" not in err


def test_the_command_and_the_fixture_have_one_shuffle_partitions_default(spark, tmp_path):
    """Issue 32: a fingerprint from the shell (a new process, its own session) compares with
    a test's snapshot without a changed-setting note, unless production's number is given with
    --conf."""
    from spark_programs import totals  # type: ignore[import-not-found]

    from pytest_opid.plugin.spark import SPARK_CONF
    from pytest_opid.spark.query.program import BASE_CONF

    key = "spark.sql.shuffle.partitions"
    assert BASE_CONF[key] == SPARK_CONF[key] == spark.conf.get(key)
    (tmp_path / "in").mkdir()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_opid",
            "fingerprint",
            "--spark",
            "spark_programs:totals",
            "--json",
            "--",
            str(tmp_path / "in"),
        ],
        cwd=HERE,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, ""), done.stderr[-2000:]
    from_shell = pytest_opid.fingerprint(json.loads(done.stdout))
    assert from_shell.settings == ((key, SPARK_CONF[key]),)
    in_a_test = pytest_opid.fingerprint(totals(spark, str(tmp_path / "in")))
    assert from_shell.to_dict() == in_a_test.to_dict()
