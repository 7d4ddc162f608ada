"""PyFlink frontend figures: fingerprinting a 100-operator PyFlink job, next to Flink's own
stream graph generation for it.

``python benchmarks/bench_pyflink.py`` in an environment with PyFlink (``tox -e flink``'s, or
``pip install 'pytest-opid[flink]'``); not part of ``benchmarks/run.py``, whose environment has
PySpark and cannot install PyFlink next to it.

The job has 100 stream graph operators: a FLIP-27 source, chains of Python maps (which PyFlink
fuses into one operator per chain, so the user writes more functions than there are operators),
key_by + reduce stages, parallelism changes and a union, ending in sinks. Reported, as medians
over repeated runs after warm-up (the JVM's JIT compiles Flink's generator first):

* ``flink stream graph``: PyFlink's own ``env._generate_stream_graph(False)``, what
  ``env.execute()`` does before it submits;
* ``flink job graph``: Flink's ``StreamGraph.getJobGraph()`` on top of that, which computes the
  same IDs and chains in the JVM;
* ``pytest_opid.fingerprint(env)``: the stream graph as above, plus undoing PyFlink's changes to
  the environment, reading the graph (one JSON text) and hashing it in Python; split into
  ``read`` (JVM side and transfer) and ``convert + hash`` (pure Python);
* the one-off cost of the first fingerprint in a process (the reader class compiled or loaded
  from the cache).
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import pytest_opid  # noqa: E402
from pytest_opid.flink.jvm import FlinkJvm  # noqa: E402
from pytest_opid.flink.pyflink import stream_graph  # noqa: E402
from pytest_opid.flink.stream_graph import (  # noqa: E402
    fingerprint_reading,
    topology_from_graph_json,
)
from pytest_opid.plugin.flink import make_flink_env  # noqa: E402

WARMUP = 5
RUNS = 15


def hundred_operator_job(env: Any) -> Any:
    """Build the job; returns the environment. 100 StreamGraph nodes (asserted below)."""
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource

    env.set_parallelism(2)
    source = env.from_source(NumberSequenceSource(1, 1000), WatermarkStrategy.no_watermarks(), "N")
    branches = []
    for b in range(4):
        ds = source.map(lambda n, b=b: n + b, output_type=Types.LONG()).name(f"prepare {b}")
        for stage in range(6):
            ds = ds.key_by(lambda n: n % 8, key_type=Types.LONG()).reduce(lambda x, y: x + y)
            ds = ds.map(lambda n: n, output_type=Types.LONG()).disable_chaining()
            if stage % 3 == 2:
                ds = ds.rebalance().map(lambda n: n, output_type=Types.LONG()).set_parallelism(3)
        branches.append(ds)
    merged = branches[0].union(*branches[1:])
    for _ in range(12):
        merged = merged.map(lambda n: n, output_type=Types.LONG()).disable_chaining()
    merged.key_by(lambda n: n % 8, key_type=Types.LONG()).reduce(lambda x, y: x).print()
    for ds in branches:
        ds.filter(lambda n: n > 0).print()
    return env


def median_ms(fn: Callable[[], Any]) -> tuple[float, float]:
    for _ in range(WARMUP):
        fn()
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), min(times)


def main() -> int:
    try:
        import pyflink  # noqa: F401
    except ImportError:
        print("skipped: PyFlink is not installed here (pip install 'pytest-opid[flink]')")
        return 0
    start = time.perf_counter()
    jvm = FlinkJvm.get()
    first_jvm = time.perf_counter() - start
    env = hundred_operator_job(make_flink_env())
    start = time.perf_counter()
    first = pytest_opid.fingerprint(env)
    first_fp = time.perf_counter() - start
    operators = len(first.operators)

    def flink_stream_graph() -> None:
        env._generate_stream_graph(clear_transformations=False)

    def flink_job_graph() -> None:
        with stream_graph(env) as graph:
            graph.getJobGraph()

    def ours() -> None:
        pytest_opid.fingerprint(env)

    def read() -> None:
        with stream_graph(env) as graph:
            jvm.stream_graph_json(graph)

    with stream_graph(env) as graph:
        data = jvm.stream_graph_json(graph)

    def convert_and_hash() -> None:
        fingerprint_reading(topology_from_graph_json(data))

    rows = [
        ("flink stream graph (PyFlink's _generate_stream_graph)", median_ms(flink_stream_graph)),
        ("flink stream graph + job graph", median_ms(flink_job_graph)),
        ("pytest_opid.fingerprint(env)", median_ms(ours)),
        ("  stream graph + read (JVM, py4j)", median_ms(read)),
        ("  convert + hash (Python)", median_ms(convert_and_hash)),
    ]
    print(
        f"PyFlink job with {operators} stream graph operators, "
        f"{len(first.job_vertices)} job vertices"
    )
    print(
        f"first FlinkJvm.get() (JVM start + reader class): {first_jvm * 1000:.0f} ms; "
        f"first fingerprint: {first_fp * 1000:.0f} ms"
    )
    print(f"{'':<56} {'median ms':>10} {'best ms':>9}")
    for name, (median, best) in rows:
        print(f"{name:<56} {median:>10.1f} {best:>9.1f}")
    assert operators == 100, operators
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
