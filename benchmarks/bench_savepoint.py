"""Savepoint figures: how long reading a large Flink ``_metadata`` file takes.

``python benchmarks/run.py savepoint`` (or ``python benchmarks/bench_savepoint.py [states]``).

A ``_metadata`` file of 10,000 operator states is written here byte by byte in Flink 2.3's
format (metadata version 6), shaped like a big job's: parallelism 1 to 8 of max parallelism
128, a name and uid on each, keyed state in key-groups handles with an offset per key group
(inline bytes or a file), operator state with named partitions, RocksDB incremental handles
with shared and private files, sources with coordinator state, in-flight channel state on some,
stateless operators with empty subtask states, and the Java-serialized checkpoint properties at
the end. Reading it is timed (best and median of several runs, file already in memory, and once
from disk); peak memory is measured in a separate pass with tracemalloc. The 80 real Flink 2.3.0
savepoints of ``tests/data/flink-restore`` are timed too, where they are present.
"""

from __future__ import annotations

import gc
import gzip
import json
import random
import statistics
import struct
import sys
import tarfile
import tempfile
import time
import tracemalloc
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from pytest_opid.flink.savepoint import parse_metadata, read_savepoint  # noqa: E402

RESTORE_DATA = HERE.parent / "tests" / "data" / "flink-restore"
STATES = 10_000
RUNS = 7


class MetadataWriter:
    """Just enough of java.io.DataOutputStream to write a ``_metadata`` (shared with
    bench_restore.py)."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def u8(self, value: int) -> None:
        self.parts.append(struct.pack(">B", value))

    def i32(self, value: int) -> None:
        self.parts.append(struct.pack(">i", value))

    def i64(self, value: int) -> None:
        self.parts.append(struct.pack(">q", value))

    def utf(self, text: str) -> None:
        data = text.encode("utf-8")  # Java's modified UTF-8, for the text we write
        self.parts.append(struct.pack(">H", len(data)) + data)

    def raw(self, data: bytes) -> None:
        self.parts.append(data)

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


def _inline(out: MetadataWriter, rng: random.Random, name: str) -> None:
    size = rng.randrange(50, 400)
    out.u8(1)  # BYTE_STREAM_HANDLE
    out.utf(f"file:/flink/savepoints/savepoint-1a2b3c-4d5e6f7a8b9c/{name}")
    out.i32(size)
    out.raw(bytes(size))


def _relative(out: MetadataWriter, rng: random.Random) -> None:
    out.u8(6)  # RELATIVE_STREAM_HANDLE
    out.utf(f"{rng.getrandbits(128):032x}")
    out.i64(rng.randrange(20_000, 5_000_000))


def _stream(out: MetadataWriter, rng: random.Random, name: str) -> None:
    if rng.random() < 0.8:
        _inline(out, rng, name)
    else:
        _relative(out, rng)


def _subtask(
    out: MetadataWriter, rng: random.Random, kind: str, subtask: int, parallelism: int
) -> None:
    # Managed operator state.
    if kind == "operator":
        out.i32(1)
        out.u8(4)  # PARTITIONABLE_OPERATOR_STATE_HANDLE
        states = rng.randrange(1, 3)
        out.i32(states)
        for i in range(states):
            out.utf(f"state-{i}")
            out.u8(i % 2)
            out.i32(2)
            out.i64(0)
            out.i64(64)
        _stream(out, rng, f"op-{subtask}")
    else:
        out.i32(0)
    out.i32(0)  # no raw operator state
    # Managed keyed state.
    groups = 128 // parallelism
    start = subtask * groups
    if kind == "keyed":
        out.u8(12)  # KEY_GROUPS_HANDLE_V2
        out.i32(start)
        out.i32(groups)
        out.raw(b"".join(struct.pack(">q", 16 * g) for g in range(groups)))
        _stream(out, rng, f"keyed-{subtask}")
        out.utf(f"{rng.getrandbits(128):032x}")
    elif kind == "rocksdb":
        out.u8(11)  # INCREMENTAL_KEY_GROUPS_HANDLE_V2
        out.i64(17)
        out.utf("8d3bfa76-52d1-4f0c-9b8e-0d6f1f7c2a11")
        out.i32(start)
        out.i32(groups)
        out.i64(123_456)
        _inline(out, rng, "meta")
        for files in (3, 2):
            out.i32(files)
            for i in range(files):
                out.utf(f"{i:06d}.sst")
                out.u8(2)  # FILE_STREAM_HANDLE
                out.i64(rng.randrange(1_000, 1_000_000))
                out.utf(f"file:/flink/checkpoints/job/shared/{rng.getrandbits(128):032x}")
        out.utf(f"{rng.getrandbits(128):032x}")
    else:
        out.u8(0)
    out.u8(0)  # no raw keyed state
    # In-flight data of unaligned checkpoints: none, or one merged output handle.
    out.i32(0)
    if kind == "keyed" and rng.random() < 0.1:
        out.i32(1)
        out.u8(4)  # MERGED_RESULT_SUBPARTITION_STATE_HANDLE
        out.i32(subtask)
        out.i64(4096)
        _inline(out, rng, f"channel-{subtask}")
        out.i32(8)
        out.raw(bytes(8))
    else:
        out.i32(0)


def checkpoint_properties() -> bytes:
    """A small Java-serialized object where CheckpointProperties would be."""
    out = MetadataWriter()
    out.raw(b"\xac\xed\x00\x05")
    out.u8(0x73)  # TC_OBJECT
    out.u8(0x72)  # TC_CLASSDESC
    out.utf("org.apache.flink.runtime.checkpoint.CheckpointProperties")
    out.i64(2)
    out.u8(0x02)  # SC_SERIALIZABLE
    out.raw(struct.pack(">h", 2))
    out.u8(ord("Z"))
    out.utf("forced")
    out.u8(ord("L"))
    out.utf("checkpointType")
    out.u8(0x74)
    out.utf("Lorg/apache/flink/runtime/checkpoint/SnapshotType;")
    out.u8(0x78)  # TC_ENDBLOCKDATA
    out.u8(0x70)  # no superclass
    out.u8(0)  # forced = false
    out.u8(0x74)
    out.utf("Checkpoint")
    return out.getvalue()


def build_metadata(states: int, seed: int = 1) -> bytes:
    """A version 6 ``_metadata`` of ``states`` operator states."""
    rng = random.Random(seed)
    out = MetadataWriter()
    out.raw(struct.pack(">iiq", 0x4960672D, 6, 1234))
    out.i32(0)  # no master states
    out.i32(states)
    for index in range(states):
        parallelism = rng.choice((1, 2, 4, 4, 8))
        kind = rng.choices(("keyed", "operator", "rocksdb", "none"), (40, 30, 10, 20))[0]
        out.utf(f"Operator #{index} -> Map")
        out.utf(f"uid-{index}")
        out.raw(rng.getrandbits(128).to_bytes(16, "big"))
        out.i32(parallelism)
        out.i32(128)
        if rng.random() < 0.05:
            _inline(out, rng, "coordinator")
        else:
            out.u8(0)
        out.i32(parallelism)
        for subtask in range(parallelism):
            out.i32(subtask)
            _subtask(out, rng, kind, subtask, parallelism)
    out.raw(checkpoint_properties())
    return out.getvalue()


def _time(action: object, runs: int) -> list[float]:
    assert callable(action)
    times = []
    for _ in range(runs):
        gc.collect()
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return times


def _peak_bytes(action: object) -> int:
    assert callable(action)
    gc.collect()
    tracemalloc.start()
    try:
        action()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _real_savepoints() -> None:
    cases_file = RESTORE_DATA / "cases.jsonl.gz"
    if not cases_file.is_file():
        print("real savepoints: tests/data/flink-restore not found, skipped")
        return
    with gzip.open(cases_file, "rt", encoding="utf-8") as f:
        cases = [json.loads(line) for line in f]
    with tempfile.TemporaryDirectory() as tmp:
        roots = []
        for case in cases:
            target = Path(tmp) / str(case["case"]["seed"])
            with tarfile.open(RESTORE_DATA / case["savepoint"], "r:gz") as tar:
                tar.extractall(target, filter="data")
            roots.append(target / case["savepoint_root"])
        total_bytes = sum((root / "_metadata").stat().st_size for root in roots)
        times = _time(lambda: [read_savepoint(root) for root in roots], RUNS)
    states = sum(len(case["metadata"]) for case in cases)
    print(
        f"real Flink 2.3.0 savepoints: {len(roots)} files, {states} operator states, "
        f"{total_bytes / 1e6:.2f} MB in all: {min(times) * 1e3:.1f} ms for all of them "
        f"(median {statistics.median(times) * 1e3:.1f} ms), "
        f"{min(times) / len(roots) * 1e3:.2f} ms a file"
    )


def main(states: int = STATES) -> None:
    start = time.perf_counter()
    data = build_metadata(states)
    built = time.perf_counter() - start
    savepoint = parse_metadata(data, "<built>")
    assert len(savepoint.operators) == states
    stateful = sum(op.has_state for op in savepoint.operators)
    subtasks = sum(op.subtask_states for op in savepoint.operators)
    print(
        f"built a version 6 _metadata of {states:,} operator states ({subtasks:,} subtask "
        f"states, {stateful:,} with state): {len(data) / 1e6:.2f} MB in {built:.2f} s"
    )
    times = _time(lambda: parse_metadata(data, "<built>"), RUNS)
    best = min(times)
    print(
        f"parse_metadata: best {best * 1e3:.0f} ms, median {statistics.median(times) * 1e3:.0f}"
        f" ms of {RUNS} runs; {best / states * 1e6:.1f} us an operator state, "
        f"{len(data) / best / 1e6:.0f} MB/s"
    )
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "savepoint-1a2b3c-4d5e6f7a8b9c"
        directory.mkdir()
        (directory / "_metadata").write_bytes(data)
        disk = _time(lambda: read_savepoint(directory), 3)
    print(f"read_savepoint (from disk): best {min(disk) * 1e3:.0f} ms")
    peak = _peak_bytes(lambda: parse_metadata(data, "<built>"))
    print(f"peak memory while parsing (tracemalloc): {peak / 1e6:.1f} MB")
    _real_savepoints()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else STATES)
