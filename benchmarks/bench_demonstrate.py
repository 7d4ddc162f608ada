"""Seconds per pair of ``pytest_opid.demonstrate`` at its default budget.

``python benchmarks/run.py demonstrate`` (or ``python benchmarks/bench_demonstrate.py``).

Pairs from tests/data (their real Spark 4.3 outcome in brackets): one Spark refused
(agg_user_sum__add_aggregate), one whose restarted B emitted other rows than B from scratch
(grouping_key_same_type), the state function whose session timeout changed from 30 to 10
minutes (pandas_state_function_timeout_30_to_10_minutes: other rows, which the prediction can
only call "changed"), two where it emitted the same (add_projection_downstream, no_change),
each at the default knobs (3 examples of 3 batches, 20 s of shrinking) with seed 41, in one
``local[2]`` session after a warm-up pair (the JVM's and the Python workers' start is not
counted). Prints each pair's seconds, outcome and examples run, and the median.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tests.spark.demonstrate_corpus import SPARK_ENV, dataframe, pairs  # noqa: E402

PAIRS = (
    "agg_user_sum__add_aggregate__100001",
    "grouping_key_same_type",
    "pandas_state_function_timeout_30_to_10_minutes",
    "add_projection_downstream",
    "no_change",
)


def main() -> None:
    from pyspark.sql import SparkSession

    import pytest_opid

    builder = SparkSession.builder.appName("bench-demonstrate")
    for key, value in SPARK_ENV.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("OFF")
    by_id = {p["id"]: p for p in pairs()}

    def one(case_id: str) -> pytest_opid.Demonstration:
        pair = by_id[case_id]
        with tempfile.TemporaryDirectory() as tmp:
            a = dataframe(spark, pair, "before", Path(tmp))
            b = dataframe(spark, pair, "after", Path(tmp))
            return pytest_opid.demonstrate(a, b, seed=41)

    one("no_change")  # warm-up: the JVM's and the Python workers' first runs
    seconds = []
    for case_id in PAIRS:
        result = one(case_id)
        seconds.append(result.seconds)
        print(
            f"{case_id:40} [{by_id[case_id]['truth']:8}] {result.outcome:8} "
            f"{result.examples} example(s) {result.seconds:6.1f} s",
            flush=True,
        )
    print(f"median {statistics.median(seconds):.1f} s per pair ({len(seconds)} pairs)")
    spark.stop()


if __name__ == "__main__":
    main()
