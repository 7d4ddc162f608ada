"""A file sink's ``_spark_metadata`` read as Spark acts on it, checked against what real Spark
4.3 runs left (tests/data/sources-sinks): the batch ids A committed to the folder (its
``a_batches``), the format it wrote, and a folder whose log was deleted or cleared."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from pytest_opid.errors import DocumentError
from pytest_opid.spark.checkpoint.sink_log import format_of, local_path, read_sink_log

DATA = Path(__file__).resolve().parents[2] / "data" / "sources-sinks"
CASES = [json.loads(line) for line in (DATA / "cases.jsonl").open(encoding="utf-8")]
FILE_SINKS = [c for c in CASES if c["sink_a"]["kind"] == "file"]


def unpacked(case: dict[str, Any], into: Path) -> Path:
    with tarfile.open(DATA / case["data"]) as tar:
        tar.extractall(into, filter="data")
    return into / case["id"]


@pytest.mark.parametrize("case", FILE_SINKS, ids=[c["id"] for c in FILE_SINKS])
def test_the_log_holds_the_batches_a_committed(case: dict[str, Any], tmp_path: Path) -> None:
    folder = unpacked(case, tmp_path) / case["sink_a"]["path"]
    log = read_sink_log(str(folder))
    assert log is not None
    removed = {step.partition(":")[2] for step in case["between_runs"]}
    sink = case["sink_a"]["path"]
    if f"{sink}/_spark_metadata" in removed or sink in removed:
        assert log.latest is None
        assert log.logged is (sink not in removed and f"{sink}/_spark_metadata" not in removed)
        return
    committed = [b["batchId"] for b in case["a_batches"]]
    assert log.batches == tuple(committed)
    assert log.latest == committed[-1]
    assert log.formats == {case["sink_a"]["fmt"]}
    assert log.partitions == ()


def test_a_missing_folder_and_a_remote_one(tmp_path: Path) -> None:
    missing = read_sink_log(str(tmp_path / "nowhere"))
    assert missing is not None and not missing.exists and missing.latest is None
    assert read_sink_log("s3a://bucket/out") is None
    assert local_path("file:///data/out/") == "/data/out"
    assert local_path("file:/data/../out") == "/out"


def test_partition_folders_and_formats(tmp_path: Path) -> None:
    log_dir = tmp_path / "out" / "_spark_metadata"
    log_dir.mkdir(parents=True)
    entry = {
        "path": f"file:{tmp_path}/out/name=a/day=1/part-00000-x.c000.snappy.parquet",
        "size": 1,
        "isDir": False,
        "modificationTime": 1,
        "blockReplication": 1,
        "blockSize": 1,
        "action": "add",
    }
    (log_dir / "9.compact").write_text("v1\n" + json.dumps(entry) + "\n")
    (log_dir / "10").write_text("v1\n" + json.dumps(entry) + "\n")
    log = read_sink_log(str(tmp_path / "out"))
    assert log is not None
    assert log.batches == tuple(range(11))
    assert log.partitions == ("name", "day")
    assert log.formats == {"parquet"}
    assert format_of("part-0.c000.csv.gz") == "csv"


def test_a_malformed_log_file_is_one_line_naming_it(tmp_path: Path) -> None:
    log_dir = tmp_path / "out" / "_spark_metadata"
    log_dir.mkdir(parents=True)
    (log_dir / "0").write_text("v1\n{not json\n")
    with pytest.raises(DocumentError) as caught:
        read_sink_log(str(tmp_path / "out"))
    assert "_spark_metadata/0" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_logged_files_gone_from_the_folder_are_counted(tmp_path: Path) -> None:
    log_dir = tmp_path / "out" / "_spark_metadata"
    log_dir.mkdir(parents=True)
    kept = tmp_path / "out" / "part-0.c000.json"
    kept.write_text("{}\n")
    entries = [
        {"path": f"file:{path}", "size": 3, "isDir": False, "modificationTime": 1,
         "blockReplication": 1, "blockSize": 1, "action": "add"}
        for path in (kept, tmp_path / "out" / "part-1.c000.json")
    ]  # fmt: skip
    (log_dir / "0").write_text("v1\n" + "\n".join(map(json.dumps, entries)) + "\n")
    log = read_sink_log(str(tmp_path / "out"))
    assert log is not None and log.missing == 1 and log.latest == 0
