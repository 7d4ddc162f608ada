"""A ``DataStreamWriter`` (``df.writeStream...`` before ``start()``) is fingerprinted with its
sink and its sources' options, read from Spark's own objects without starting it: the values
are the ones the test hands Spark, and Spark's own ``start()`` afterwards still works."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import pytest_opid
from pytest_opid.io.endpoint_values import digest


def facts(fp: Any, endpoint: str) -> dict[str, str]:
    return {fact: value for e, fact, value in fp.endpoints if e == endpoint}


@pytest.fixture
def source(spark: Any, tmp_path: Path) -> Any:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "part-0.json").write_text(json.dumps({"id": 1, "name": "a"}) + "\n")
    return (
        spark.readStream.schema("id INT, name STRING")
        .option("maxFileAge", "7d")
        .option("latestFirst", "true")
        .json(str(folder))
    )


def test_a_file_sink_and_its_source(source: Any, tmp_path: Path) -> None:
    writer = (
        source.writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .partitionBy("name")
        .outputMode("append")
        .trigger(processingTime="5 seconds")
        .queryName("totals")
        .option("fs.secret.key", "hunter2")
    )
    fp = pytest_opid.fingerprint(writer)
    assert facts(fp, "sink") == {
        "kind": "file",
        "format": "parquet",
        "path": str(tmp_path / "out"),
        "partitionBy": "name",
        "outputMode": "append",
        "trigger": "ProcessingTimeTrigger(5000)",
        "queryName": "totals",
        "checkpointLocation": str(tmp_path / "ckpt"),
        "option fs.secret.key": digest("fs.secret.key", "hunter2"),
    }
    assert facts(fp, "source 0") == {
        "format": "json",
        "path": str(tmp_path / "in"),
        "schema": "struct<id:int,name:string>",
        "option latestFirst": "true",
        "option maxFileAge": "7d",
    }
    # the DataFrame alone: the same plan, no sink (nothing recorded it could not see)
    alone = pytest_opid.fingerprint(source)
    assert alone.endpoints is None
    assert alone.operators == fp.operators


def test_foreach_batch_is_recorded_by_its_code(source: Any) -> None:
    def append(frame: Any, batch_id: int) -> None:
        frame.write.mode("append").parquet("/tmp/never")

    def overwrite(frame: Any, batch_id: int) -> None:
        frame.write.mode("overwrite").parquet(f"/tmp/never/{batch_id}")

    first = facts(pytest_opid.fingerprint(source.writeStream.foreachBatch(append)), "sink")
    again = facts(pytest_opid.fingerprint(source.writeStream.foreachBatch(append)), "sink")
    other = facts(pytest_opid.fingerprint(source.writeStream.foreachBatch(overwrite)), "sink")
    assert first["kind"] == "foreachBatch"
    assert first["function"].endswith("(source)")
    assert first == again
    assert first["function"] != other["function"]


def test_foreach_writers_are_recorded_by_the_users_code(source: Any) -> None:
    """Not by PySpark's wrapper (``func_without_process`` / ``func_with_open_process_close``),
    which is the same for every writer: a changed function or writer object changes the
    digest, the same one keeps it."""

    def keep(row: Any) -> None:
        print(row.id)

    def changed(row: Any) -> None:
        print(row.id + 1)

    class Writer:
        def open(self, partition_id: int, epoch_id: int) -> bool:
            return True

        def process(self, row: Any) -> None:
            print(row.id)

    class Skipping(Writer):
        def process(self, row: Any) -> None:
            if row.id % 2:
                print(row.id)

    def digest(writer: Any) -> str:
        fp = pytest_opid.fingerprint(source.writeStream.foreach(writer))
        sink = facts(fp, "sink")
        assert sink["kind"] == "foreach"
        assert sink["function"].endswith("(source)"), sink
        return sink["function"]

    assert digest(keep) == digest(keep)
    assert digest(Writer()) == digest(Writer())
    assert len({digest(keep), digest(changed), digest(Writer()), digest(Skipping())}) == 4


def test_a_stateful_writer_is_planned_in_its_output_mode(spark: Any) -> None:
    counts = spark.readStream.format("rate").option("rowsPerSecond", 5).load()
    counts = counts.groupBy((counts.value % 3).alias("k")).count()
    complete = pytest_opid.fingerprint(
        counts.writeStream.format("memory").queryName("c").outputMode("complete")
    )
    assert facts(complete, "sink")["outputMode"] == "complete"
    assert facts(complete, "sink")["kind"] == "memory"
    assert facts(complete, "source 0")["option rowsPerSecond"] == "5"
    assert complete.state_operators and complete.state_operators[0].kind == "stateStoreSave"


def test_the_writer_still_starts(source: Any, tmp_path: Path) -> None:
    writer = (
        source.writeStream.format("json")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
    )
    pytest_opid.fingerprint(writer)
    query = writer.start()
    query.awaitTermination(60)
    assert (tmp_path / "out" / "_spark_metadata" / "0").is_file()


@pytest.mark.spark_line("4.3", reason="one line is enough for the plugin's path")
def test_opid_record_takes_a_writer_and_a_moved_sink_fails(
    pytester: pytest.Pytester, spark: Any
) -> None:
    """``opid.record(writer)`` snapshots the sink; moving the file sink's path on the same
    checkpoint (the guide: not allowed) fails the marked test, in one changed snapshot line."""
    module = """
import pytest

OUT = "{out}"

@pytest.mark.stable_topology
def test_job(opid, spark, tmp_path):
    (tmp_path / "in").mkdir()
    frame = spark.readStream.schema("id INT").json(str(tmp_path / "in"))
    opid.record(frame.writeStream.format("parquet").option("path", str(tmp_path / OUT))
                .option("checkpointLocation", str(tmp_path / "ckpt")))
"""
    pytester.makepyfile(test_sink=module.format(out="out"))
    pytester.runpytest_inprocess("-p", "no:cacheprovider", "--snapshot-update")
    snapshot = next(pytester.path.rglob("*.opid"))
    before = snapshot.read_text(encoding="utf-8")
    assert '"…/out"' in before and "[sinks and sources]" in before
    pytester.makepyfile(test_sink=module.format(out="out2"))
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    assert "path changed" in result.stdout.str()
