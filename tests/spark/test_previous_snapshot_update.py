"""Issue 48, item 5: ``previous=`` under ``pytest --snapshot-update`` loses nothing and can
start.

The checkpoint is examples/spark/checkpoints/page_view_stats, a real one of the example query;
its next version adds ``F.max("event_time")`` to the windowed aggregation, which Spark refuses
to restart on it (the aggregation's value schema). Recorded as a DataFrame, that change failed
``--snapshot-update`` against ``previous=`` and kept the old snapshot; recorded as its
``DataStreamWriter`` (a memory sink in complete mode, the test's own ``checkpointLocation``),
it was judged as a start on a new checkpoint location, passed and overwrote it.
A new test with ``previous=`` could never write its first snapshot (its restart is "not
verified" without the query that wrote the checkpoint), and the message asked for that
snapshot.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark_line("4.3", reason="the example checkpoint is judged by 4.3")

ROOT = Path(__file__).resolve().parents[2]
CHECKPOINT = ROOT / "examples" / "spark" / "checkpoints" / "page_view_stats"

TEST = """
import pytest
from pyspark.sql import functions as F

SCHEMA = "event_id string, user_id long, page string, event_time timestamp"
EVENTS = {events!r}
CHECKPOINT = {own_checkpoint!r}


def query(spark):
    session = spark.newSession()
    session.conf.set("spark.sql.shuffle.partitions", "8")  # production's: the checkpoint's
    events = session.readStream.schema(SCHEMA).json(EVENTS)
    aggregates = [F.count("*").alias("views"), F.approx_count_distinct("user_id").alias("visitors")]
    if {last_view!r}:
        aggregates.append(F.max("event_time").alias("last_view"))
    return (
        events.withWatermark("event_time", "10 minutes")
        .dropDuplicates(["event_id", "event_time"])
        .groupBy(F.window("event_time", "5 minutes"), "page")
        .agg(*aggregates)
    )


@pytest.mark.stable_topology{marker}
def test_page_view_stats(spark, opid):
    df = query(spark)
    if {writer!r}:
        df = (
            df.writeStream.format("memory")
            .queryName("page_view_stats")
            .outputMode("complete")
            .option("checkpointLocation", CHECKPOINT)
        )
    opid.record(df)
"""


def _write(pytester: pytest.Pytester, *, writer: bool, last_view: bool, marker: str = "") -> None:
    events = pytester.path / "events"
    events.mkdir(exist_ok=True)
    pytester.makepyfile(
        test_job=TEST.format(
            events=str(events),
            own_checkpoint=str(pytester.path / "test-checkpoint"),
            last_view=last_view,
            writer=writer,
            marker=marker,
        )
    )


def _run(pytester: pytest.Pytester, *args: str) -> Any:
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", *args)


def _project(pytester: pytest.Pytester) -> Path:
    copy = pytester.path / "checkpoints" / "q"
    shutil.copytree(CHECKPOINT, copy)
    # the deployed version read the test's own events folder: its source log names the files
    # there (the example's log names the folder it was recorded from, another path)
    events = pytester.path / "events"
    for log in (copy / "sources" / "0").iterdir():
        lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
        for i, line in enumerate(lines):
            if line.startswith("{"):
                entry = json.loads(line)
                entry["path"] = (events / Path(entry["path"]).name).as_uri()
                lines[i] = json.dumps(entry, separators=(",", ":")) + "\n"
        log.write_text("".join(lines), encoding="utf-8")
    return pytester.path / "__snapshots__" / "test_job" / "test_page_view_stats.opid"


@pytest.mark.parametrize("writer", [False, True], ids=["dataframe", "writer"])
def test_an_incompatible_change_fails_and_keeps_the_snapshot(
    spark: Any, pytester: pytest.Pytester, writer: bool
) -> None:
    snapshot = _project(pytester)
    _write(pytester, writer=writer, last_view=False)
    _run(pytester, "--snapshot-update").assert_outcomes(passed=1)
    before = snapshot.read_bytes()
    _write(pytester, writer=writer, last_view=True, marker='(previous="checkpoints/q")')
    result = _run(pytester, "--snapshot-update")
    result.assert_outcomes(failed=1)
    assert "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE" in result.stdout.str()
    assert snapshot.read_bytes() == before


@pytest.mark.parametrize("writer", [False, True], ids=["dataframe", "writer"])
def test_the_first_snapshot_is_the_deployed_versions(
    spark: Any, pytester: pytest.Pytester, writer: bool
) -> None:
    snapshot = _project(pytester)
    marker = '(previous="checkpoints/q")'
    _write(pytester, writer=writer, last_view=False, marker=marker)
    result = _run(pytester, "--snapshot-update")
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert "this test has no snapshot yet" in text
    assert "pytest --snapshot-update --opid-deployed test_job.py::test_page_view_stats" in text
    assert not snapshot.exists()
    # as the message says, on the deployed version: the snapshot is written, the restart
    # against the checkpoint checked (verified: the snapshot is the query that wrote it)
    result = _run(pytester, "--snapshot-update", "--opid-deployed")
    result.assert_outcomes(passed=1)
    assert snapshot.exists()
    _run(pytester).assert_outcomes(passed=1)
    # the next version is judged against it
    _write(pytester, writer=writer, last_view=True, marker=marker)
    result = _run(pytester, "--snapshot-update")
    result.assert_outcomes(failed=1)
    assert "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE" in result.stdout.str()


def test_opid_deployed_goes_with_snapshot_update(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_nothing="def test_nothing():\n    pass\n")
    result = _run(pytester, "--opid-deployed")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--opid-deployed records the deployed version's snapshots" in result.stderr.str()


def test_a_version_that_did_not_write_the_checkpoint_is_refused_as_deployed(
    spark: Any, pytester: pytest.Pytester
) -> None:
    """--opid-deployed on the wrong checkout: a query the checkpoint shows did not write it
    fails, and no snapshot is written."""
    snapshot = _project(pytester)
    _write(pytester, writer=False, last_view=True, marker='(previous="checkpoints/q")')
    result = _run(pytester, "--snapshot-update", "--opid-deployed")
    result.assert_outcomes(failed=1)
    assert not snapshot.exists()
