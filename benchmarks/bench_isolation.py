"""What recording a transformWithState processor's ``init`` in a child process costs.

``python benchmarks/run.py isolation`` (or ``python benchmarks/bench_isolation.py``).

``record_processor`` pickles the processor, hands it to a child Python (``spark.isolation``)
that unpickles it and runs ``init`` with the recording handle, and reads the calls back. The
reference is the same work in this process (``record_pickled`` of the pickled processor: the
unpickling and the recorded ``init``, as pytest-opid did before the child). Figures, each the
median of 15:

* cold: no spare child (a fresh Python imports PySpark first: the first recording of a session);
* warm: the spare child started by the previous call had a second to import its modules (a
  test session: recordings are apart by query planning and JVM work);
* back to back: the next call at once (the spare may still be importing).

Also the resident memory of the waiting spare child.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from pyspark import cloudpickle  # noqa: E402
from pyspark.sql.types import LongType, StructField, StructType  # noqa: E402

from pytest_opid.spark import isolation  # noqa: E402
from pytest_opid.spark.processor_recording import record_pickled  # noqa: E402
from pytest_opid.spark.transform_with_state import record_processor  # noqa: E402

COUNT = StructType([StructField("c", LongType())])
RUNS = 15


class Counter:
    """A processor as the PySpark guide writes one: three variables."""

    def init(self, handle: Any) -> None:
        handle.getValueState("cnt", COUNT)
        handle.getListState("seen", "id LONG, ts TIMESTAMP", ttlDurationMs=60_000)
        handle.getMapState("per", "k STRING", "n INT")


def _ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:.1f} ms"


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _children() -> list[int]:
    """This process's child processes (the spare: the one waiting child)."""
    out = []
    for task in Path("/proc/self/task").iterdir():
        out += [int(pid) for pid in (task / "children").read_text().split()]
    return out


def main() -> None:
    processor = Counter()
    expected = record_processor(processor)
    assert expected.reason is None, expected.reason
    payload = bytes(cloudpickle.dumps(processor))

    reference = []
    for _ in range(RUNS):
        start = time.perf_counter()
        answer = record_pickled(payload)
        reference.append(time.perf_counter() - start)
        assert len(answer["calls"]) == len(expected.calls or ())

    def timed(between: float, drop_spare: bool) -> list[float]:
        out = []
        for _ in range(RUNS):
            if drop_spare:
                isolation.drop_spare()
            time.sleep(between)
            start = time.perf_counter()
            record = record_processor(processor)
            out.append(time.perf_counter() - start)
            assert record == expected
        return out

    cold = timed(0.0, drop_spare=True)
    warm = timed(1.0, drop_spare=False)
    back = timed(0.0, drop_spare=False)
    time.sleep(2)  # the spare's imports done
    rss = sum(_rss_kib(pid) for pid in _children())
    ref = statistics.median(reference)
    for label, samples in (("cold", cold), ("warm", warm), ("back to back", back)):
        ratio = statistics.median(samples) / ref
        print(f"{label:>13}: {_ms(samples)}  ({ratio:.0f}x in-process {_ms(reference)})")
    print(f"spare child: {rss / 1024:.0f} MiB resident")


if __name__ == "__main__":
    main()
