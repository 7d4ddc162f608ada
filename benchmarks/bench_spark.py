"""PySpark frontend figures: how long fingerprinting a DataFrame takes once the session is warm.

``python benchmarks/run.py spark`` (or ``python benchmarks/bench_spark.py``).

Plans of about 10 and 100 physical operators, batch (a union of filtered branches feeding an
aggregation, and a deep chain of aggregations) and streaming (deduplication and windowed
aggregations). For each it reports:

* ``extract``: ``pytest_opid.fingerprint(df)`` on a DataFrame built once (the figure the 50 ms
  target is about), split into: ``planning`` (a batch Dataset keeps the plan Spark made the
  first time, so this is a lookup; a streaming DataFrame is never planned before it starts, so
  pytest-opid has Spark plan it, an ``IncrementalExecution``, on every call), ``JSON read``
  (``toJSON`` in the JVM and the transfer), ``convert`` (JSON to topology) and ``hash/stages``.
* ``new DataFrame``: the same on a freshly built DataFrame, so Spark's analyzer, optimizer and
  planner run first.
* the plan's JSON size, operators per second and the Python-side peak memory (tracemalloc, in a
  separate pass).

Medians over repeated runs after warm-up rounds (the JVM's JIT compiles the planner first); the
fastest run of the extraction is shown too, as the JVM's garbage collector and other load on the
machine make single runs vary.
"""

from __future__ import annotations

import gc
import json
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from functools import reduce
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import pytest_opid  # noqa: E402
from pytest_opid.plugin.spark import SPARK_CONF  # noqa: E402
from pytest_opid.spark.query.fingerprint import fingerprint_graph  # noqa: E402
from pytest_opid.spark.query.graph import graph_from_plan  # noqa: E402
from pytest_opid.spark.query.jvm import Jvm  # noqa: E402
from pytest_opid.spark.query.read import read_plan as _read_plan  # noqa: E402

WARMUP = 10
RUNS = 21


def _session() -> Any:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").appName("bench_spark")
    for key, value in SPARK_CONF.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def wide_batch(spark: Any, branches: int) -> Any:
    """``branches`` filtered, projected scans, unioned and aggregated (3 operators a branch)."""
    from pyspark.sql import functions as F

    parts = [
        spark.range(1000)
        .filter(F.col("id") % (i + 2) == 0)
        .select((F.col("id") % 10).alias("k"), (F.col("id") * i).alias("v"))
        for i in range(branches)
    ]
    return reduce(lambda a, b: a.union(b), parts).groupBy("k").agg(F.sum("v").alias("v"))


def deep_batch(spark: Any, levels: int) -> Any:
    """``levels`` aggregations one after the other (about 2 operators a level)."""
    from pyspark.sql import functions as F

    df = spark.range(1000).select((F.col("id") % 97).alias("k"), F.col("id").alias("v"))
    for i in range(levels):
        df = df.groupBy((F.col("k") + i) % 89).agg(F.sum("v").alias("v"))
        df = df.toDF("k", "v")
    return df


def streaming(spark: Any, source: str, windows: int) -> Any:
    """A deduplicated event stream, counted per page in ``windows`` window sizes, unioned."""
    from pyspark.sql import functions as F

    events = (
        spark.readStream.schema("user long, page string, ts timestamp")
        .json(source)
        .withWatermark("ts", "1 minute")
        .dropDuplicates(["user", "ts"])
    )
    counts = [
        events.groupBy(F.window("ts", f"{i + 1} minutes"), "page").count() for i in range(windows)
    ]
    return reduce(lambda a, b: a.union(b), counts)


def _times_ms(fn: Callable[[], Any], runs: int = RUNS) -> list[float]:
    for _ in range(WARMUP):
        fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return times


def _median_ms(fn: Callable[[], Any], runs: int = RUNS) -> float:
    return statistics.median(_times_ms(fn, runs))


def _peak_kib(fn: Callable[[], Any]) -> float:
    gc.collect()
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 1024


def measure(label: str, build: Callable[[], Any]) -> dict[str, Any]:
    df = build()
    operators = len(pytest_opid.fingerprint(df).operators)
    jvm = Jvm.get()
    if df.isStreaming:
        # Spark never plans a streaming DataFrame that has not started: pytest-opid builds the
        # IncrementalExecution on every call, so Spark's planning is part of the extraction.
        jdf = df._jdf

        def plan() -> Any:
            return jvm.incremental_plan(jdf.sparkSession(), jdf.queryExecution().analyzed(), None)
    else:
        # Spark plans a Dataset once and keeps the plan: "planning" is then just the lookup.
        def plan() -> Any:
            return df._jdf.queryExecution().executedPlan()

    reading = _read_plan(df)
    plan_json, leaves, streaming_plan = reading.plan_json, reading.leaves, reading.streaming
    physical = plan()
    extract_times = _times_ms(lambda: pytest_opid.fingerprint(df))
    extract, fastest = statistics.median(extract_times), min(extract_times)
    planning = _median_ms(plan)
    read = _median_ms(lambda: jvm.plan_json(physical))
    extra = {"state": reading.state, "sources": reading.sources}
    graph = graph_from_plan(plan_json, leaves=leaves, streaming=streaming_plan, **extra)
    convert = _median_ms(
        lambda: graph_from_plan(plan_json, leaves=leaves, streaming=streaming_plan, **extra)
    )
    hashing = _median_ms(lambda: fingerprint_graph(graph))
    fresh = _median_ms(lambda: pytest_opid.fingerprint(build()), runs=max(5, RUNS // 3))
    peak = _peak_kib(lambda: pytest_opid.fingerprint(df))
    row = {
        "plan": label,
        "operators": operators,
        "json_kib": len(plan_json) / 1024,
        "extract_ms": extract,
        "extract_min_ms": fastest,
        "planning_ms": planning,
        "json_read_ms": read,
        "convert_ms": convert,
        "hash_ms": hashing,
        "fresh_ms": fresh,
        "ops_per_s": operators / (extract / 1000),
        "peak_kib": peak,
    }
    print(
        f"{label:<16} {operators:>4} ops  JSON {row['json_kib']:6.1f} KiB  "
        f"extract {extract:6.1f} ms (min {fastest:5.1f}) = planning {planning:5.1f} "
        f"+ JSON read {read:5.1f} "
        f"+ convert {convert:4.1f} + hash/stages {hashing:4.1f}  "
        f"| new DataFrame {fresh:6.1f} ms | {row['ops_per_s']:6.0f} ops/s "
        f"| peak {peak:6.0f} KiB",
        flush=True,
    )
    return row


def main() -> None:
    spark = _session()
    with tempfile.TemporaryDirectory() as source:
        Path(source, "events.json").write_text(
            '{"user": 1, "page": "p", "ts": "2024-01-01 00:00:00"}\n', encoding="utf-8"
        )
        cases = [
            ("batch wide ~10", lambda: wide_batch(spark, 3)),
            ("batch deep ~10", lambda: deep_batch(spark, 3)),
            ("streaming ~10", lambda: streaming(spark, source, 1)),
            ("batch wide ~100", lambda: wide_batch(spark, 32)),
            ("batch deep ~100", lambda: deep_batch(spark, 49)),
            ("streaming ~100", lambda: streaming(spark, source, 12)),
        ]
        rows = [measure(label, build) for label, build in cases]
    spark.stop()
    worst = max(r["extract_ms"] for r in rows if r["operators"] >= 90)
    print(f"slowest extract for ~100 operators: {worst:.1f} ms (target <= 50 ms)")
    print("BENCH_SPARK " + json.dumps(rows))


if __name__ == "__main__":
    main()
