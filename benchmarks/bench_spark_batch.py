"""``fingerprint()`` of Spark batch queries next to Spark's own planning, and memory over 1,000
fingerprints (issue 22).

``python benchmarks/run.py spark_batch`` (or ``python benchmarks/bench_spark_batch.py``).

The TPC-DS-like corpus of ``tests/data/tpcds-like`` (39 queries of our own), its ten tables
created empty in a temporary warehouse of this benchmark's session (``bench_spark``'s settings,
``local[2]``):

1. Per query, after warm-up rounds, alternated run by run: ``pytest_opid.fingerprint(df)`` and
   ``df._jdf.queryExecution().executedPlan()``, each on a DataFrame built afresh
   (``spark.sql(text)``, not timed: Spark parses and analyzes it there), so that both include
   Spark's optimizer and planner, as in a test. Medians and fastest runs per query; the total
   ratio fingerprint / executed plan is the sum of the medians of one over the other's. Target:
   at most 1.5x.
2. Memory: 1,000 fingerprints of fresh DataFrames, the corpus's queries in turn; the JVM heap
   after ``System.gc()`` and Python's memory (objects its collector tracks, counted without a
   collection; RSS) before and after.
"""

from __future__ import annotations

import gc
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

WARMUP = 3  # rounds over the whole corpus: the first plans in a JVM take seconds
RUNS = 9  # per query and kind
ROUNDS = 1_000  # fingerprints for the memory figures


def _session(warehouse: str) -> Any:
    """``bench_spark``'s session settings, with a warehouse of its own for the tables."""
    from pyspark.sql import SparkSession

    from pytest_opid.plugin.spark import SPARK_CONF

    builder = SparkSession.builder.master("local[2]").appName("bench_spark_batch")
    for key, value in {**SPARK_CONF, "spark.sql.warehouse.dir": warehouse}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def _executed_plan(df: Any) -> Any:
    return df._jdf.queryExecution().executedPlan()


def _ms(fn: Callable[[Any], Any], df: Any) -> float:
    start = time.perf_counter()
    fn(df)
    return (time.perf_counter() - start) * 1000


def _rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        kib = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    return kib / 1024


def timing(spark: Any, queries: dict[str, str]) -> list[dict[str, Any]]:
    import pytest_opid

    for _ in range(WARMUP):
        for text in queries.values():
            pytest_opid.fingerprint(spark.sql(text))
            _executed_plan(spark.sql(text))
    rows = []
    for name, text in queries.items():
        fp, plan = [], []
        for _ in range(RUNS):
            fp.append(_ms(pytest_opid.fingerprint, spark.sql(text)))
            plan.append(_ms(_executed_plan, spark.sql(text)))
        row = {
            "query": name,
            "operators": len(pytest_opid.fingerprint(spark.sql(text)).operators),
            "fingerprint_ms": statistics.median(fp),
            "fingerprint_min_ms": min(fp),
            "executed_plan_ms": statistics.median(plan),
            "executed_plan_min_ms": min(plan),
        }
        row["ratio"] = row["fingerprint_ms"] / row["executed_plan_ms"]
        rows.append(row)
        print(
            f"{name:<4} {row['operators']:>3} ops  fingerprint {row['fingerprint_ms']:6.1f} ms "
            f"(min {row['fingerprint_min_ms']:5.1f})  executedPlan {row['executed_plan_ms']:6.1f}"
            f" ms (min {row['executed_plan_min_ms']:5.1f})  = {row['ratio']:.2f}x",
            flush=True,
        )
    return rows


def memory(spark: Any, queries: dict[str, str], rounds: int = ROUNDS) -> dict[str, float]:
    import pytest_opid

    texts = list(queries.values())
    for text in texts:  # every query once more: what Spark caches per query is kept anyway
        pytest_opid.fingerprint(spark.sql(text))
    gc.collect()
    from tests.spark.query.test_jvm_memory import _heap_mib  # the memory test's own reading

    heap, objects, rss = _heap_mib(spark), len(gc.get_objects()), _rss_mib()
    start = time.perf_counter()
    for i in range(rounds):
        pytest_opid.fingerprint(spark.sql(texts[i % len(texts)]))
    seconds = time.perf_counter() - start
    row = {
        "fingerprints": rounds,
        "seconds": seconds,
        "objects_before": objects,
        "objects_after": len(gc.get_objects()),  # before any collection of ours
        "rss_before_mib": rss,
        "rss_after_mib": _rss_mib(),
        "heap_before_mib": heap,
        "heap_after_mib": _heap_mib(spark),
    }
    print(
        f"{rounds:,} fingerprints of fresh DataFrames in {seconds:.1f} s "
        f"({seconds / rounds * 1000:.1f} ms each, spark.sql included): "
        f"JVM heap after System.gc() {row['heap_before_mib']:.1f} -> "
        f"{row['heap_after_mib']:.1f} MiB; Python objects {objects:,} -> "
        f"{row['objects_after']:,}; RSS {rss:.1f} -> {row['rss_after_mib']:.1f} MiB",
        flush=True,
    )
    return row


def main() -> None:
    from tests.spark import tpcds_like

    queries = tpcds_like.texts("queries")
    with tempfile.TemporaryDirectory() as warehouse:
        spark = _session(warehouse)
        try:
            tpcds_like.create_tables(spark)
            rows = timing(spark, queries)
            mem = memory(spark, queries)
        finally:
            spark.stop()
    fp = [r["fingerprint_ms"] for r in rows]
    plan = [r["executed_plan_ms"] for r in rows]
    ratios = [r["ratio"] for r in rows]
    total = sum(fp) / sum(plan)
    fastest = sum(r["fingerprint_min_ms"] for r in rows) / sum(
        r["executed_plan_min_ms"] for r in rows
    )
    print(
        f"{len(rows)} queries: fingerprint median {statistics.median(fp):.1f} ms, total "
        f"{sum(fp):,.0f} ms; executedPlan median {statistics.median(plan):.1f} ms, total "
        f"{sum(plan):,.0f} ms; total ratio {total:.2f}x (target <= 1.5x; fastest runs "
        f"{fastest:.2f}x); per query {min(ratios):.2f}x to {max(ratios):.2f}x, "
        f"median {statistics.median(ratios):.2f}x",
        flush=True,
    )
    summary = {"total_ratio": total, "fastest_ratio": fastest, "memory": mem}
    print("BENCH_SPARK_BATCH " + json.dumps({"queries": rows, **summary}))


if __name__ == "__main__":
    main()
