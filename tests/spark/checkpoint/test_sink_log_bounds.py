"""Issue 48, item 4: a long-running file sink's compacted ``_spark_metadata`` log is read to
the end, and one beyond any bound leaves the sink "not verified", never an error.

A compaction (``CompactibleFileStreamLog``: ``<id>.compact``, a ``v1`` line then one
``SinkFileStatus`` JSON per line, every file the sink ever wrote) of about 300,000 entries is
72 MiB after months (330,000 here: 70 MiB): it was read with the 64 MiB cap meant for
checkpoint metadata, and every check on the query exited 2 with no verdict. The log is
generated once per session in Spark's format, for the real checkpoint and sink of
tests/data/sources-sinks' ``fs_csv_control`` (A ran batches 0 and 1 into a csv file sink), as
if the sink had been compacted at batch 1 (``spark.sql.streaming.fileSink.log.compactInterval``
2): its two real data files, and 329,998 older ones that are gone from the folder, which the
verdict counts.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_opid.spark.checkpoint import sink_log
from pytest_opid.spark.checkpoint.sink_log import read_sink_log

DATA = Path(__file__).resolve().parents[2] / "data" / "sources-sinks"
CASE = next(
    c
    for c in map(json.loads, (DATA / "cases.jsonl").open(encoding="utf-8"))
    if c["id"] == "fs_csv_control"
)
FOLDER = Path(CASE["unpack_at"]) / CASE["id"]
OUT = FOLDER / "out"
LOCK = Path("/srv/spark/.pytest-opid-corpus.lock")
ENTRIES = 330_000  # 222 bytes each here (a short sink path): 70 MiB
#: The two data files A wrote (batches 0 and 1), as its log lists them.
REAL = 2


def _status(path: str, size: int, modified: int) -> str:
    """One ``SinkFileStatus`` as Spark's json4s writes it (field order of the case class)."""
    return json.dumps(
        {
            "path": path,
            "size": size,
            "isDir": False,
            "modificationTime": modified,
            "blockReplication": 1,
            "blockSize": 33554432,
            "action": "add",
        },
        separators=(",", ":"),
    )


@pytest.fixture(scope="session")
def compaction(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``1.compact`` for the case's sink folder: the gone files first (oldest), then the two
    of A's log files 0 and 1, ``ENTRIES`` in all; more than 64 MiB."""
    with tarfile.open(DATA / CASE["data"]) as tar:
        logged = [
            tar.extractfile(f"{CASE['id']}/out/_spark_metadata/{n}").read().decode()  # type: ignore[union-attr]
            for n in ("0", "1")
        ]
    real = [text.splitlines()[1] for text in logged]
    path = tmp_path_factory.mktemp("sink-log") / "1.compact"
    with path.open("w", encoding="utf-8") as stream:
        stream.write("v1\n")
        for i in range(ENTRIES - REAL):
            name = f"part-{i % 4:05d}-{i:08x}-0000-4000-8000-{i:012x}-c000.csv"
            stream.write(_status(f"file://{OUT}/{name}", 31, 1795700000000 + i) + "\n")
        for line in real:
            stream.write(line + "\n")
    assert path.stat().st_size > 64 << 20
    return path


@pytest.fixture
def sink_folder(compaction: Path) -> Iterator[Path]:
    """The case unpacked where Spark wrote it (its logs hold absolute paths), its sink log
    replaced by batch 0's file and the compaction at batch 1; removed afterwards."""
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with LOCK.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        shutil.rmtree(FOLDER, ignore_errors=True)
        with tarfile.open(DATA / CASE["data"]) as tar:
            tar.extractall(FOLDER.parent, filter="data")
        try:
            os.remove(OUT / "_spark_metadata" / "1")
            os.link(compaction, OUT / "_spark_metadata" / "1.compact")
            yield OUT
        finally:
            shutil.rmtree(FOLDER, ignore_errors=True)


def test_the_whole_compaction_is_read(sink_folder: Path) -> None:
    log = read_sink_log(str(sink_folder))
    assert log is not None and log.unread == ""
    assert (log.latest, log.batches) == (1, (0, 1))
    assert log.files == ENTRIES
    assert log.missing == ENTRIES - REAL
    assert log.formats == {"csv"} and log.partitions == ()


def _check(spark: Any) -> Any:
    import pytest_opid

    paths = {key: str(FOLDER / key) for key in ("in", "out", "ckpt")}
    scope: dict[str, Any] = {}
    exec(compile(CASE["b_code"], "<b_code>", "exec"), scope)
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    try:
        return pytest_opid.check_restore(paths["ckpt"], scope["build"](spark, paths))
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)


@pytest.mark.spark_line("4.3", reason="the case's checkpoint is judged by 4.3")
def test_a_restart_on_a_long_running_sink_gets_a_verdict(spark: Any, sink_folder: Path) -> None:
    """The verdict names the gone files the compaction lists (exit 2 with no verdict before)."""
    check = _check(spark)
    assert check.restorable
    said = [p.message for p in check.reinterpreted]
    assert any(f"{ENTRIES - REAL} data files the log" in m for m in said), said
    assert "the file sink's _spark_metadata log" in check.verified


@pytest.mark.spark_line("4.3", reason="the case's checkpoint is judged by 4.3")
def test_a_log_beyond_the_bound_leaves_the_sink_not_verified(
    spark: Any, sink_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sink_log, "MAX_LOG_BYTES", 1 << 20)
    check = _check(spark)
    assert check.restorable and check.safe is None
    (sink,) = [p for p in check.unverified if p.kind == "sink"]
    assert "1.compact is" in sink.message and f"more than the {1 << 20} read" in sink.message
    assert "the file sink's _spark_metadata log" not in check.verified
    assert not check.reinterpreted  # the gone files were not read: nothing said of them
