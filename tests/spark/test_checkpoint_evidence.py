"""Fewer "meaning not verified" from a checkpoint (issue 38, item 4), on real checkpoints.

A checkpoint keeps no plan, but its state rows keep each window's bounds: read with Spark's
state reader (``spark.read.format("statestore")``), they decide a window change that the
schema files cannot show. And the running query's fingerprint, recorded in its checkpoint at
deploy (``record_deploy`` / ``opid record-deploy``), is used by ``check_restore`` by itself;
Spark ignores the file (a real restart on a checkpoint holding it runs its batch).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import pytest_opid
from pytest_opid.cli import main
from pytest_opid.result import RestoreCheck
from pytest_opid.spark import record_deploy
from pytest_opid.spark.checkpoint.files import RECORD_NAME

pytestmark = pytest.mark.spark_line(
    "4.3", reason="real checkpoints and Spark 4.3's state reader; small, one line's CI time"
)

SCHEMA = "user STRING, v LONG, ts TIMESTAMP"


def _events(folder: Path, name: str, minutes: range) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / name).open("w", encoding="utf-8") as f:
        for i, minute in enumerate(minutes):
            ts = f"2024-01-01T00:{minute:02d}:{(7 * i) % 60:02d}"
            f.write(json.dumps({"user": f"u{i % 3}", "v": i, "ts": ts}) + "\n")


def windowed(window: str, slide: str | None = None) -> Callable[[Any, str], Any]:
    def build(spark: Any, path: str) -> Any:
        from pyspark.sql import functions as F

        events = spark.readStream.schema(SCHEMA).json(path).withWatermark("ts", "30 minutes")
        bucket = F.window("ts", window, slide) if slide else F.window("ts", window)
        return events.groupBy(bucket, "user").agg(F.count("*").alias("n"))

    return build


def sessions(gap: str) -> Callable[[Any, str], Any]:
    def build(spark: Any, path: str) -> Any:
        from pyspark.sql import functions as F

        events = spark.readStream.schema(SCHEMA).json(path).withWatermark("ts", "30 minutes")
        return events.groupBy(F.session_window("ts", gap), "user").agg(F.count("*").alias("n"))

    return build


def _run(df: Any, checkpoint: Path) -> Any:
    query = (
        df.writeStream.format("noop")
        .outputMode("append")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(600)  # a loaded machine: the checkpoint must be complete
    finally:
        query.stop()
    return query


@pytest.fixture(scope="module")
def ran(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """Two real checkpoints (inputs, checkpoint): a 5-minute tumbling window, 3-minute
    sessions, each after one batch."""
    root = tmp_path_factory.mktemp("evidence")
    out = {}
    for name, build in (("window", windowed("5 minutes")), ("session", sessions("3 minutes"))):
        inputs = root / name / "in"
        _events(inputs, "batch1.json", range(0, 40, 4))  # one event every 4 minutes
        checkpoint = root / name / "checkpoint"
        _run(build(spark.newSession(), str(inputs)), checkpoint)
        out[name] = (inputs, checkpoint)
    return out


def _check(spark: Any, ran: dict[str, tuple[Path, Path]], which: str, build: Any) -> RestoreCheck:
    inputs, checkpoint = ran[which]
    return pytest_opid.check_restore(checkpoint, build(spark.newSession(), str(inputs)))


def test_the_same_window_is_matched_by_the_state_rows(spark: Any, ran: Any) -> None:
    """The rows show the window's duration and slide; the column its time comes from is in no
    row, and stays the one thing not verified."""
    check = _check(spark, ran, "window", windowed("5 minutes"))
    assert check.restorable and check.safe is None, check.to_dict()
    (unverified,) = check.unverified
    assert "not verified: the time column of the window (now tumbling window(ts, 5 minutes); " in (
        unverified.message
    )
    assert "the window's duration" not in unverified.message
    # the same query checked from its fingerprint alone: no session, no rows read
    inputs, checkpoint = ran["window"]
    fp = pytest_opid.fingerprint(windowed("5 minutes")(spark.newSession(), str(inputs)))
    alone = pytest_opid.check_restore(checkpoint, fp)
    assert not alone.meaning_verified
    assert "were not read: no SparkSession at hand" in alone.unverified[0].message


@pytest.mark.parametrize(
    ("window", "slide", "shown"),
    [
        ("10 minutes", None, "the state's windows are 5 minutes long"),
        ("5 minutes", "1 minute", "no two of the state's windows start 1 minute apart"),
    ],
)
def test_another_window_is_reinterpreted(
    spark: Any, ran: Any, window: str, slide: str | None, shown: str
) -> None:
    """Spark restarts both (the key is a window struct either way) and would emit the old
    windows' counts next to the new ones."""
    check = _check(spark, ran, "window", windowed(window, slide))
    assert check.restorable and not check.safe, check.to_dict()
    (change,) = check.reinterpreted
    assert change.kind == "window_meaning" and shown in change.message


def test_session_gaps_from_the_state_rows(spark: Any, ran: Any) -> None:
    same = _check(spark, ran, "session", sessions("3 minutes"))
    assert same.restorable and not same.reinterpreted, same.to_dict()
    assert "the time column of the window" in same.unverified[0].message
    # the checkpoint's sessions of one event span 3 minutes: an 8-minute gap cannot have
    # written them
    longer = _check(spark, ran, "session", sessions("8 minutes"))
    assert longer.restorable and not longer.safe
    assert "span as little as 3 minutes" in longer.reinterpreted[0].message
    # a shorter gap: sessions 3 minutes long or more fit a 2-minute gap too; not verified
    shorter = _check(spark, ran, "session", sessions("2 minutes"))
    assert shorter.restorable and not shorter.meaning_verified


def test_the_state_rows_are_what_spark_reads(spark: Any, ran: Any) -> None:
    """The evidence is Spark's own: every window in the state is 5 minutes long."""
    _, checkpoint = ran["window"]
    rows = (
        spark.read.format("statestore")
        .option("path", str(checkpoint))
        .option("operatorId", 0)
        .load()
        .selectExpr("key.window.end - key.window.start AS span")
        .distinct()
        .collect()
    )
    assert [str(r.span) for r in rows] == ["0:05:00"]


def test_a_recorded_fingerprint_is_used_and_spark_ignores_it(
    spark: Any, ran: Any, tmp_path: Path
) -> None:
    inputs, kept = ran["session"]
    checkpoint = tmp_path / "checkpoint"
    shutil.copytree(kept, checkpoint)
    deployed = sessions("3 minutes")(spark.newSession(), str(inputs))
    path = record_deploy(checkpoint, deployed)
    assert path == checkpoint / RECORD_NAME
    # judged from fingerprints alone (no rows read): the record decides
    fp = pytest_opid.fingerprint
    same = pytest_opid.check_restore(checkpoint, fp(deployed))
    assert same.safe and same.meaning_verified, same.to_dict()
    assert f"state meaning (from the fingerprint recorded at deploy, {RECORD_NAME})" in (
        same.verified
    )
    other = sessions("2 minutes")(spark.newSession(), str(inputs))
    changed = pytest_opid.check_restore(checkpoint, fp(other))
    assert changed.restorable and not changed.safe
    assert "gap 3 minutes" in changed.reinterpreted[0].message
    # Spark restarts the recorded query on the checkpoint holding the record, and runs a batch
    _events(inputs, "batch2.json", range(40, 60, 4))
    query = _run(sessions("3 minutes")(spark.newSession(), str(inputs)), checkpoint)
    assert query.exception() is None
    assert sum(p["numInputRows"] for p in query.recentProgress) == 5
    assert (checkpoint / RECORD_NAME).is_file() and (checkpoint / "commits" / "1").is_file()
    (inputs / "batch2.json").unlink()
    # a fresh query on a folder where the record was written first starts as on an empty one
    fresh = tmp_path / "fresh"
    record_deploy(fresh, fp(deployed))
    started = _run(sessions("3 minutes")(spark.newSession(), str(inputs)), fresh)
    assert started.exception() is None and (fresh / "commits" / "0").is_file()


def test_a_record_of_another_query_is_set_aside(spark: Any, ran: Any, tmp_path: Path) -> None:
    inputs, kept = ran["window"]
    checkpoint = tmp_path / "checkpoint"
    shutil.copytree(kept, checkpoint)
    record_deploy(checkpoint, pytest_opid.fingerprint(sessions("3 minutes")(spark, str(inputs))))
    fp = pytest_opid.fingerprint(windowed("5 minutes")(spark.newSession(), str(inputs)))
    check = pytest_opid.check_restore(checkpoint, fp)
    assert not check.meaning_verified
    (note,) = [w for w in check.warnings if w.kind == "recorded_fingerprint"]
    assert note.message.startswith(f"{RECORD_NAME} in the checkpoint: state/0 is ")
    assert "sessionWindowStateStoreSaveExec there, stateStoreSave in the checkpoint" in (
        note.message
    )
    assert "not the query that wrote it. It was not used" in note.message


def test_record_deploy_from_the_shell(
    spark: Any, ran: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs, kept = ran["window"]
    checkpoint = tmp_path / "checkpoint"
    shutil.copytree(kept, checkpoint)
    saved = tmp_path / "a.json"
    fp = pytest_opid.fingerprint(windowed("5 minutes")(spark.newSession(), str(inputs)))
    saved.write_text(json.dumps(fp.to_dict()), encoding="utf-8")
    assert main(["check-restore", str(checkpoint), str(saved)]) == 3
    assert "were not read: no SparkSession at hand" in capsys.readouterr().out
    assert main(["record-deploy", str(checkpoint), str(saved)]) == 0
    assert capsys.readouterr().out.startswith("recorded: ")
    assert main(["check-restore", str(checkpoint), str(saved)]) == 0
    assert main(["record-deploy", str(checkpoint)]) == 2  # no query given: one line
    assert "give the deployed query" in capsys.readouterr().err
    # the slim copy keeps the record, and judges the same
    slim = tmp_path / "slim"
    assert main(["checkpoint", "--slim", str(checkpoint), str(slim)]) == 0
    assert (slim / RECORD_NAME).is_file()
    assert main(["check-restore", str(slim), str(saved)]) == 0
