"""An IN list of over ten values: Spark's OptimizeIn makes it an InSet, whose values the plan
JSON writes as null, so two different lists once looked alike. The fingerprint plans its own
copy keeping IN lists, and the tree and the state meaning show the values."""

from __future__ import annotations

from pyspark.sql import functions as F

import pytest_opid

THRESHOLD = "spark.sql.optimizer.inSetConversionThreshold"


def _grouped(spark, values):
    key = F.expr(f"x IN ({', '.join(map(str, values))})").alias("k")
    return spark.range(1000).selectExpr("id % 400 AS x").groupBy(key).count()


def _executed(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def test_two_long_in_lists_as_grouping_keys_are_told_apart(spark):
    values = list(range(300))
    changed = [*values[:250], 999, *values[251:]]  # past the first 200 nodes of the key
    a, b = _grouped(spark, values), _grouped(spark, changed)
    # Spark: both keys are InSets, of different values.
    assert " INSET 0, 1, 10, 100" in _executed(a) and ", 999" in _executed(b)
    assert ", 999" not in _executed(a)
    fa, fb = pytest_opid.fingerprint(a), pytest_opid.fingerprint(b)
    assert fa.plan[0].startswith("HashAggregate keys [in((id % 400), 0, 1, 2, 3, ")
    assert fa.plan != fb.plan  # the same first 200 nodes, told apart by the hash after "…"
    comparison = pytest_opid.compare(fa, fb)
    assert comparison.breaks("chains")
    assert "HashAggregate" in pytest_opid.explain(comparison, "chains").splitlines()[0]
    # The DataFrames keep the plans Spark made; the session its settings.
    assert " INSET " in _executed(a)
    assert spark.conf.get(THRESHOLD) == "10"
    assert spark.conf.get("spark.sql.adaptive.enabled") == "false"


def test_a_short_in_set_is_written_whole(spark):
    fp = pytest_opid.fingerprint(_grouped(spark, range(12)))
    assert fp.plan[0] == (
        "HashAggregate keys [in((id % 400), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)] "
        "functions [count(1)]"
    )
    ten = pytest_opid.fingerprint(_grouped(spark, range(10)))  # an In: never an InSet
    assert ten.plan[0].startswith("HashAggregate keys [in((id % 400), 0, 1, 2, ")


def test_a_streaming_key_shows_its_in_list(spark):
    stream = spark.readStream.format("rate").load().selectExpr("value % 400 AS x")
    key = F.expr(f"x IN ({', '.join(map(str, range(12)))})").alias("k")
    fp = pytest_opid.fingerprint(stream.groupBy(key).count())
    (operator,) = fp.state_operators
    keys = [value for fact, value in operator.meaning if fact.startswith("key")]
    assert keys == ["in((value % 400), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11): boolean"]
    assert spark.conf.get(THRESHOLD) == "10"
