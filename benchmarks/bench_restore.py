"""Restore check figures: Flink's verdict on a 10,000-operator job against a savepoint of 10,000
operator states.

``python benchmarks/bench_restore.py [operators]``

The job is built with the builder: 20 sources, each feeding a pipeline of maps, keyed processes
and windows behind key_by shuffles (some with a uid), into a sink; 10,000 operators in all. Its
savepoint is a ``_metadata`` file written here byte by byte in Flink 2.3's format (version 6,
one entry per operator: keyed or operator state inline, the sources with coordinator state,
the stateless operators with empty subtask states). Timed, best and median of several runs:

* ``check_savepoint`` of the unchanged job (every state maps), and of the job after a map was
  inserted behind every source (most generated IDs change: thousands of problems, each with
  its message and fix);
* ``check_restore`` end to end from the savepoint directory (reading ``_metadata`` included);
* ``check_fingerprint`` from the old job's fingerprint, and ``pin_lines``.
"""

from __future__ import annotations

import gc
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench_savepoint import MetadataWriter, checkpoint_properties  # noqa: E402

from pytest_opid import fingerprint  # noqa: E402
from pytest_opid.flink.builder import StreamEnvironment  # noqa: E402
from pytest_opid.flink.restore import check_fingerprint, check_savepoint, pin_lines  # noqa: E402
from pytest_opid.flink.restore_states import default_max_parallelism  # noqa: E402
from pytest_opid.flink.savepoint import read_savepoint  # noqa: E402
from pytest_opid.restore import check_restore  # noqa: E402
from pytest_opid.result import Fingerprint  # noqa: E402

OPERATORS = 10_000
SOURCES = 20
RUNS = 5


def build_job(operators: int, *, inserted: bool = False) -> Fingerprint:
    """``operators`` operators (plus one per source where ``inserted``)."""
    env = StreamEnvironment(4)
    per_pipeline = operators // SOURCES
    for p in range(SOURCES):
        stream = env.source(f"Kafka {p}")
        if p % 4 == 0:
            stream.uid(f"source-{p}")
        if inserted:
            stream = stream.map(f"Inserted {p}")
        made = 2  # the source and the sink
        i = 0
        while made < per_pipeline:
            i += 1
            if i % 10 == 0 and made + 1 < per_pipeline:
                keyed = stream.key_by()
                stream = keyed.window(f"Window {p}.{i}") if i % 20 == 0 else keyed.process()
                if i % 30 == 0:
                    stream.uid(f"stateful-{p}-{i}")
            else:
                stream = stream.map(f"Map {p}.{i}")
            made += 1
        stream.sink(f"Sink {p}")
    return fingerprint(env)


def _inline(out: MetadataWriter, name: str, size: int) -> None:
    out.u8(1)  # BYTE_STREAM_HANDLE
    out.utf(f"file:/savepoints/savepoint-1a2b3c-4d5e6f7a8b9c/{name}")
    out.i32(size)
    out.raw(bytes(size))


def write_metadata(job: Fingerprint) -> bytes:
    """A version 6 ``_metadata`` with one operator state per operator of ``job``."""
    out = MetadataWriter()
    out.raw(struct.pack(">iiq", 0x4960672D, 6, 42))
    out.i32(0)  # no master states
    out.i32(len(job.operators))
    max_parallelism = {v.id: v.max_parallelism for v in job.job_vertices}
    for op in job.operators:
        kind = "source" if op.name.startswith("Source: ") else "keyed" if op.stateful else "none"
        out.utf(op.name)
        out.utf(op.uid or "")
        out.raw(bytes.fromhex(op.operator_id))
        parallelism = op.parallelism
        vmax = max_parallelism.get(op.job_vertex or "", -1)
        out.i32(parallelism)
        out.i32(vmax if vmax != -1 else default_max_parallelism(parallelism))
        if kind == "source":
            _inline(out, "coordinator", 64)
        else:
            out.u8(0)
        out.i32(parallelism)
        groups = 128 // parallelism
        for subtask in range(parallelism):
            out.i32(subtask)
            if kind == "source":  # managed operator state: the reader's splits
                out.i32(1)
                out.u8(4)  # PARTITIONABLE_OPERATOR_STATE_HANDLE
                out.i32(1)
                out.utf("SourceReaderState")
                out.u8(0)
                out.i32(1)
                out.i64(0)
                _inline(out, f"op-{subtask}", 48)
            else:
                out.i32(0)
            out.i32(0)  # raw operator state
            if kind == "keyed":
                out.u8(12)  # KEY_GROUPS_HANDLE_V2
                out.i32(subtask * groups)
                out.i32(groups)
                out.raw(b"".join(struct.pack(">q", 8 * g) for g in range(groups)))
                _inline(out, f"keyed-{subtask}", 8 * groups)
                out.utf(f"{subtask:032x}")
            else:
                out.u8(0)
            out.u8(0)  # raw keyed state
            out.i32(0)  # input channel state
            out.i32(0)  # result subpartition state
    out.raw(checkpoint_properties())
    return out.getvalue()


def timed(action: Callable[[], object], runs: int = RUNS) -> tuple[float, float]:
    times = []
    for _ in range(runs):
        gc.collect()
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


def main(operators: int = OPERATORS) -> None:
    start = time.perf_counter()
    old = build_job(operators)
    changed = build_job(operators, inserted=True)
    built = time.perf_counter() - start
    marked = sum(op.stateful is True for op in old.operators)
    print(
        f"job: {len(old.operators):,} operators, {len(old.job_vertices):,} job vertices, "
        f"{marked:,} marked stateful, the rest unknown (built and fingerprinted twice in "
        f"{built:.2f} s)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "savepoint-1a2b3c-4d5e6f7a8b9c"
        directory.mkdir()
        data = write_metadata(old)
        (directory / "_metadata").write_bytes(data)
        savepoint = read_savepoint(directory)
        holding = sum(o.has_state or o.coordinator_state for o in savepoint.operators)
        print(
            f"savepoint: {len(savepoint.operators):,} operator states ({holding:,} holding "
            f"state), _metadata {len(data) / 1e6:.1f} MB"
        )

        same = check_savepoint(savepoint, old)
        after = check_savepoint(savepoint, changed)
        assert same.restorable and not same.warnings
        assert not after.restorable
        rows = [
            ("check_savepoint, unchanged job", lambda: check_savepoint(savepoint, old), same),
            (
                "check_savepoint, map inserted behind each source",
                lambda: check_savepoint(savepoint, changed),
                after,
            ),
            (
                "check_restore(directory, fingerprint), unchanged",
                lambda: check_restore(directory, old),
                same,
            ),
            (
                "check_restore(directory, fingerprint), changed",
                lambda: check_restore(directory, changed),
                after,
            ),
            (
                "check_fingerprint, changed",
                lambda: check_fingerprint(old, changed),
                check_fingerprint(old, changed),
            ),
        ]
        print(f"\n{'what':52} {'best':>9} {'median':>9}  verdict")
        for label, action, result in rows:
            best, median = timed(action)
            verdict = (
                f"restorable={result.restorable}, {len(result.problems):,} problems, "
                f"{len(result.warnings):,} warnings"
            )
            print(f"{label:52} {best * 1e3:7.1f}ms {median * 1e3:7.1f}ms  {verdict}")
        best, median = timed(lambda: pin_lines(savepoint))
        print(
            f"{'pin_lines(savepoint)':52} {best * 1e3:7.1f}ms {median * 1e3:7.1f}ms  "
            f"{len(pin_lines(savepoint)):,} lines"
        )
        best, median = timed(lambda: read_savepoint(directory))
        print(f"{'(read_savepoint alone)':52} {best * 1e3:7.1f}ms {median * 1e3:7.1f}ms")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
