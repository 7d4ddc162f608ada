"""The same query has one fingerprint, whatever ran before it in the session (issue 28, item 1).

Spark numbers expressions with a per-session counter and orders some lists by hash maps keyed
by expressions (the distinct aggregates' Expand and grouping keys): a fingerprint that let
either through would depend on which tests ran first (``pytest -k``, xdist, a new test
elsewhere). Every query of a corpus (joins, distinct and multiple-distinct aggregates,
rollup/cube, subqueries, UDFs, window functions, streaming stateful operators) is built and
fingerprinted again after other queries moved the counter by a different amount each time, and
its fingerprint, snapshot text and self-comparison message must be byte-identical and hold no
expression id."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest

import pytest_opid
from pytest_opid.comparison import compare
from pytest_opid.engine_rules import Check
from pytest_opid.engines import engine_rules
from pytest_opid.io.snapshot import dumps

#: An expression id as Spark prints one, right after a name (``v#2L``, ``ts#12``); our own
#: ordinals (``Subquery #1``) and digests (``… #3fa2b1c4d5e6``) follow a space.
EXPRESSION_ID = re.compile(r"(?<=\S)#\d+L?\b")


def _batch(spark: Any) -> dict[str, Callable[[], Any]]:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    def numbers() -> Any:
        return (
            spark.range(100)
            .withColumn("k", F.col("id") % 5)
            .withColumn("v", F.col("id") * 2)
            .withColumn("s", F.concat(F.lit("x"), (F.col("id") % 3).cast("string")))
        )

    @F.udf("long")
    def bucket(x):  # type: ignore[no-untyped-def]  # hints would make PySpark warn
        return x % 4

    return {
        # the two reproducers
        "distinct_join": lambda: (
            numbers()
            .groupBy("k")
            .agg(F.sum("v"), F.countDistinct("v"))
            .join(spark.range(10).withColumnRenamed("id", "k"), "k")
        ),
        "two_distinct": lambda: (
            spark.range(100)
            .withColumn("k", F.col("id") % 7)
            .groupBy("k")
            .agg(F.countDistinct("id"), F.sum_distinct(F.col("id") % 3))
        ),
        "three_distinct_and_regular": lambda: (
            numbers()
            .groupBy("k")
            .agg(
                F.countDistinct("v"),
                F.countDistinct("s"),
                F.countDistinct("id", "s"),
                F.sum("v"),
                F.max("s"),
            )
        ),
        "distinct_global": lambda: numbers().agg(F.countDistinct("k"), F.countDistinct("s")),
        "join_three": lambda: (
            numbers()
            .join(numbers().select("k", F.col("v").alias("w")), "k")
            .join(spark.range(5).withColumnRenamed("id", "k"), "k", "left")
        ),
        "rollup": lambda: numbers().rollup("k", "s").agg(F.sum("v"), F.countDistinct("id")),
        "cube": lambda: numbers().cube("k", "s").agg(F.count("*"), F.avg("v")),
        "subqueries": lambda: (
            numbers().createOrReplaceTempView("det_numbers")
            or spark.sql(
                "SELECT k, (SELECT max(v) FROM det_numbers) AS top FROM det_numbers "
                "WHERE k IN (SELECT k FROM det_numbers WHERE v > 10) "
                "AND EXISTS (SELECT 1 FROM det_numbers d WHERE d.k = det_numbers.k)"
            )
        ),
        "udf": lambda: numbers().select(bucket("id").alias("b"), "v").groupBy("b").sum("v"),
        "window_functions": lambda: numbers().select(
            "k",
            F.row_number().over(Window.partitionBy("k").orderBy("v")).alias("rn"),
            F.sum("v").over(Window.partitionBy("s").orderBy("id").rowsBetween(-2, 0)),
        ),
        "intersect_except": lambda: (
            numbers()
            .select("k")
            .intersect(spark.range(3).withColumnRenamed("id", "k"))
            .exceptAll(spark.range(1).withColumnRenamed("id", "k"))
        ),
    }


def _streaming(spark: Any) -> dict[str, Callable[[], Any]]:
    from pyspark.sql import functions as F

    def rate() -> Any:
        return (
            spark.readStream.format("rate")
            .option("rowsPerSecond", 1)
            .load()
            .withWatermark("timestamp", "10 minutes")
            .withColumn("k", F.col("value") % 5)
        )

    return {
        "window_count": lambda: (
            rate()
            .groupBy(F.window("timestamp", "10 minutes", "5 minutes"), "k")
            .agg(F.count("*"), F.sum("value"), F.max(F.col("value") * 2))
        ),
        "session_window": lambda: (
            rate()
            .groupBy(F.session_window("timestamp", "5 minutes"), F.col("k").alias("key"))
            .count()
        ),
        "dedupe": lambda: rate().dropDuplicates(["k", "timestamp"]),
        "stream_join": lambda: (
            rate()
            .alias("a")
            .join(
                rate().alias("b"),
                F.expr(
                    "a.k = b.k AND b.timestamp BETWEEN a.timestamp AND "
                    "a.timestamp + interval 5 minutes"
                ),
            )
        ),
        "dedupe_then_aggregate": lambda: (
            rate()
            .dropDuplicates(["value", "timestamp"])
            .groupBy(F.window("timestamp", "5 minutes"))
            .agg(F.approx_count_distinct("k"))
        ),
        "apply_in_pandas_with_state": lambda: (
            rate()
            .withColumn("user", F.concat(F.lit("u"), F.col("k").cast("string")))
            .withColumn("k2", F.col("k") * 2)  # the Python state APIs group by columns
            .groupBy("user", "k2")
            .applyInPandasWithState(
                _sessions,
                "user string, k2 long, n long",
                "n long, last timestamp",
                "Update",
                "ProcessingTimeTimeout",
            )
        ),
        **_transform_with_state(rate),
    }


def _sessions(key: Any, pdfs: Any, state: Any) -> Any:
    """applyInPandasWithState's function: a running count per group, timed out after 30
    minutes without rows (never run: the fingerprint reads the plan)."""
    import pandas as pd

    n = state.get[0] if state.exists else 0
    for pdf in pdfs:
        n += len(pdf)
    state.update((n, pd.Timestamp.now()))
    state.setTimeoutDuration(30 * 60 * 1000)
    yield pd.DataFrame({"user": [key[0]], "k2": [key[1]], "n": [n]})


def _transform_with_state(rate: Callable[[], Any]) -> dict[str, Callable[[], Any]]:
    """transformWithStateInPandas (PySpark 4.0 on): a value, a list and a map variable, a
    computed grouping column beside a plain one. Not in the corpus before 4.0, which has no such
    API (test_transform_with_state_is_in_the_corpus says it is there from 4.0)."""
    try:
        from pyspark.sql.streaming import StatefulProcessor
    except ImportError:
        return {}
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    class Totals(StatefulProcessor):
        def init(self, handle: Any) -> None:
            count = StructType([StructField("n", LongType())])
            self.count = handle.getValueState("count", count)
            self.seen = handle.getListState("seen", StructType([StructField("v", LongType())]))
            self.last = handle.getMapState(
                "last", StructType([StructField("tag", StringType())]), count
            )

        def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:
            import pandas as pd

            n = 0
            for pdf in rows:
                n += len(pdf)
            yield pd.DataFrame({"tag": [str(key[0])], "n": [n]})

        def close(self) -> None:
            pass

    return {
        "transform_with_state": lambda: (
            rate()
            .withColumn("tag", F.concat(F.lit("t"), F.col("k").cast("string")))
            .withColumn("parity", F.col("k") % 2)
            .groupBy("tag", "parity")
            .transformWithStateInPandas(
                statefulProcessor=Totals(),
                outputStructType="tag string, n long",
                outputMode="Update",
                timeMode="None",
            )
        ),
    }


def _noise(spark: Any, amount: int) -> None:
    """Queries that move the session's expression-id counter by ``amount`` steps or more."""
    from pyspark.sql import functions as F

    df = spark.range(3).select(*[(F.col("id") + i).alias(f"n{i}") for i in range(amount)])
    df.groupBy("n0").agg(*[F.sum(f"n{i}") for i in range(amount)])._jdf.queryExecution().analyzed()


def _texts(fp: Any) -> str:
    """Everything a user sees of a fingerprint: its saved form, its snapshot, the message of
    comparing it with itself."""
    rules = engine_rules(fp.engine, fp)
    kept = rules.snapshot_form(fp)
    comparison = compare(kept, kept)
    return "\n".join(
        [
            json.dumps(kept.to_dict(), sort_keys=True),
            dumps(kept, rules.snapshot_preamble(kept)),
            rules.explain(comparison, Check.BOTH, "pytest --snapshot-update"),
        ]
    )


@pytest.fixture(scope="module")
def corpus(spark: Any) -> dict[str, Callable[[], Any]]:
    return {**_batch(spark), **_streaming(spark)}


def test_every_query_has_one_fingerprint_whatever_ran_before(spark: Any, corpus: Any) -> None:
    names = list(corpus)
    rounds: list[dict[str, str]] = []
    for amount, order in ((1, names), (37, names[::-1]), (5, names[1::2] + names[::2])):
        _noise(spark, amount)
        seen: dict[str, str] = {}
        for name in order:
            seen[name] = _texts(pytest_opid.fingerprint(corpus[name]()))
            _noise(spark, 3)  # a different history before each query in every round
        rounds.append(seen)
    for name in names:
        first = rounds[0][name]
        assert not EXPRESSION_ID.search(first), (name, EXPRESSION_ID.findall(first)[:5])
        for other in rounds[1:]:
            lines = zip(first.split("\n"), other[name].split("\n"), strict=False)
            changed = [(a, b) for a, b in lines if a != b]
            assert other[name] == first, (name, changed[:3])


def test_the_distinct_rewrite_is_written_in_one_order(spark: Any, corpus: Any) -> None:
    """The Expand Spark plans for two distinct aggregates: distinct inputs by name, projections
    sorted, group numbers counted in that order, whichever order Spark chose."""
    fp = pytest_opid.fingerprint(corpus["two_distinct"]())
    assert fp.plan is not None
    expand = next(line.strip() for line in fp.plan if line.strip().startswith("Expand"))
    assert expand == "Expand [[(id % 7), (id % 3), null, 1], [(id % 7), null, id, 2]]"
    keys = [line.strip() for line in fp.plan if "keys [(id % 7), " in line]
    assert keys and all("[(id % 7), (id % 3L), id, gid]" in line for line in keys), keys


def test_a_distinct_aggregate_names_its_input_not_its_id(spark: Any, corpus: Any) -> None:
    fp = pytest_opid.fingerprint(corpus["distinct_join"]())
    assert fp.plan is not None
    # The final step's count has a new result id; its result attribute, named count(v#2L) by
    # Spark, is read as the aggregate it holds.
    assert fp.plan[0] == "Project [(id % 5), sum((id * 2)), count(DISTINCT (id * 2))]", fp.plan


@pytest.mark.spark_line("4.0", reason="transformWithStateInPandas is PySpark 4.0's")
def test_transform_with_state_is_in_the_corpus(corpus: Any) -> None:
    """The corpus holds both Python state APIs where PySpark has them, and their state
    operators are fingerprinted (as stateful operators with their meaning)."""
    assert {"apply_in_pandas_with_state", "transform_with_state"} <= set(corpus)
    for name in ("apply_in_pandas_with_state", "transform_with_state"):
        fp = pytest_opid.fingerprint(corpus[name]())
        (state,) = fp.state_operators or ()
        assert any(fact.startswith("key 2") for fact, _ in state.meaning), (name, state.meaning)
