"""A marked streaming test fails where Spark restarts but reads the old state as something else
(issue 18), says so in Spark's words, and can accept it knowingly; ``opid check-restore`` and
``opid diff`` exit by the same verdict."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import pytest_opid
from pytest_opid.cli import main

SCHEMA = "id LONG, user STRING, k INT, cat STRING, v LONG, amount DOUBLE, ts TIMESTAMP"

TEST = """
import pytest
from pyspark.sql import functions as F

SCHEMA = {schema!r}


@pytest.mark.stable_topology{marker}
def test_orders_per_key(spark, opid):
    events = spark.readStream.schema(SCHEMA).json({folder!r})
    opid.record(events.groupBy({key}).agg(F.sum("v").alias("total")))
"""


def _write(pytester: pytest.Pytester, folder: Path, key: str, marker: str = "") -> None:
    pytester.makepyfile(
        test_job=TEST.format(schema=SCHEMA, folder=str(folder), key=key, marker=marker)
    )


@pytest.fixture
def project(pytester: pytest.Pytester, spark: Any, tmp_path: Path) -> pytest.Pytester:
    """A project whose marked test's snapshot records ``groupBy("cat")``."""
    folder = tmp_path / "events"
    folder.mkdir()
    _write(pytester, folder, '"cat"')
    pytester.runpytest_inprocess("-p", "no:cacheprovider", "--snapshot-update").assert_outcomes(
        passed=1
    )
    snapshot = next(pytester.path.rglob("*.opid")).read_text(encoding="utf-8")
    assert "[state meaning]" in snapshot
    assert re.search(r'\n0 +"key 1" +"cat: string"\n', snapshot)
    pytester.folder = folder  # type: ignore[attr-defined]
    return pytester


def test_a_same_typed_key_change_fails_with_spark_words(project: pytest.Pytester) -> None:
    _write(project, project.folder, '"user"')  # type: ignore[attr-defined]
    result = project.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert "Spark restarts, but the results are wrong:" in text
    assert "key 1 was cat: string, is now user: string" in text
    assert "new checkpoint location" in text
    assert "savepoint" not in text.lower() and "uid(" not in text


def test_the_marker_accepts_it_knowingly_and_still_says_it(project: pytest.Pytester) -> None:
    _write(
        project,
        project.folder,  # type: ignore[attr-defined]
        '"user"',
        marker="(allow_reinterpreted_state=True)",
    )
    result = project.runpytest_inprocess("-p", "no:cacheprovider", "-W", "always")
    result.assert_outcomes(passed=1)
    assert "OpidRestoreWarning" in result.stdout.str()
    assert "key 1 was cat: string, is now user: string" in result.stdout.str()


def test_the_option_accepts_it_for_the_session(project: pytest.Pytester) -> None:
    _write(project, project.folder, '"user"')  # type: ignore[attr-defined]
    result = project.runpytest_inprocess(
        "-p", "no:cacheprovider", "--opid-allow-reinterpreted-state"
    )
    result.assert_outcomes(passed=1)


def test_a_rename_of_the_same_column_passes(project: pytest.Pytester) -> None:
    _write(project, project.folder, 'F.col("cat").alias("category")')  # type: ignore[attr-defined]
    result = project.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)  # Spark keys the state by the column: nothing changed


# -- the CLI ------------------------------------------------------------------------------------


def _fingerprints(spark: Any, tmp_path: Path, key_b: Any) -> tuple[Path, Path]:
    from pyspark.sql import functions as F

    folder = tmp_path / "in"
    folder.mkdir(exist_ok=True)
    events = spark.readStream.schema(SCHEMA).json(str(folder))
    a = pytest_opid.fingerprint(events.groupBy("cat").agg(F.sum("v").alias("total")))
    b = pytest_opid.fingerprint(events.groupBy(key_b).agg(F.sum("v").alias("total")))
    paths = tmp_path / "a.json", tmp_path / "b.json"
    for path, fp in zip(paths, (a, b), strict=True):
        path.write_text(fp.to_json(), encoding="utf-8")
    return paths


def test_check_restore_exits_1_when_not_safe(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = _fingerprints(spark, tmp_path, "user")
    assert main(["check-restore", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("Restorable, but not safe: 1 stateful operator reads the previous state")
    assert main(["check-restore", "--allow-reinterpreted-state", str(a), str(b)]) == 0
    capsys.readouterr()
    assert main(["check-restore", "--json", str(a), str(b)]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["restorable"] is True and data["safe"] is False
    assert data["reinterpreted"][0]["kind"] == "key_meaning"
    assert data["reinterpreted"][0]["state_id"] == "0"
    assert main(["diff", str(a), str(b)]) == 1
    assert "Spark restarts, but the results are wrong" in capsys.readouterr().out
    assert main(["diff", "--allow-reinterpreted-state", str(a), str(b)]) == 0


def test_check_restore_exits_0_when_safe(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pyspark.sql import functions as F

    a, b = _fingerprints(spark, tmp_path, F.col("cat").alias("c"))
    assert main(["check-restore", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Restarts from the checkpoint: Spark "), out
    assert "restarts the new query from the previous query's checkpoint" in out.splitlines()[0]


@pytest.mark.spark_line(
    "4.0", reason="asserts Spark 4.x's error classes (3.5's words: tests/data/spark-restart-35)"
)
def test_a_restart_that_passes_only_without_the_schema_check_is_not_safe(
    spark: Any, tmp_path: Path
) -> None:
    from pyspark.sql import functions as F

    folder = tmp_path / "in"
    folder.mkdir()
    a_session, b_session = spark.newSession(), spark.newSession()
    b_session.conf.set("spark.sql.streaming.stateStore.stateSchemaCheck", "false")

    def query(session: Any, *aggregates: Any) -> Any:
        events = session.readStream.schema(SCHEMA).json(str(folder))
        return events.groupBy("user").agg(*aggregates)

    a = pytest_opid.fingerprint(query(a_session, F.sum("v").alias("total")))
    # sum(v) (a long) -> sum(amount) (a double): one field either way. Spark restarts with the
    # check off and reads the long's bits as a double (tests/data/meaning-restart,
    # aggregate_type_change_schema_check_off).
    b = query(b_session, F.sum("amount").alias("total"))
    checked = pytest_opid.check_restore(a, query(a_session, F.sum("amount").alias("total")))
    assert not checked.restorable  # with the check: STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE
    unchecked = pytest_opid.check_restore(a, b)
    assert unchecked.restorable and not unchecked.safe
    finding = unchecked.reinterpreted[0]  # then the aggregate's input: sum(v) -> sum(amount)
    assert "stateSchemaCheck=false" in finding.message
    assert "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE" in finding.message
    assert ("state schema check", "off") in pytest_opid.fingerprint(b).state_operators[0].meaning
    # A value that gains a field still fails Spark's row format validation (same data set:
    # added_aggregate_schema_check_off).
    wider = pytest_opid.check_restore(a, query(b_session, F.sum("v"), F.count("*")))
    assert not wider.restorable
    assert "VALUE_ROW_FORMAT_VALIDATION_FAILURE" in wider.problems[0].message


def test_the_same_operator_with_another_key_type_is_a_key_change(
    spark: Any, tmp_path: Path
) -> None:
    """groupBy("cat") -> groupBy("k") (string -> int): the same aggregation at state/0 with
    another key, which Spark refuses; not 'another operator would read it' (issue 28 item 5)."""
    from pytest_opid.comparison import compare
    from pytest_opid.engine_rules import Check

    a, b = _fingerprints(spark, tmp_path, "k")
    comparison = compare(str(a), str(b))
    text = comparison.rules.explain(comparison, Check.IDS, "pytest --snapshot-update")
    assert "keeps its position with another key" in text, text
    assert "the wrong operator would read it" not in text, text
    assert "read by another operator" not in text, text
    assert "state/0  stateStoreSave: its key was (string), is now (integer)" in text, text
