"""A batch job's stage comparison says what really changed in Spark's stages: a stage added or
removed, a stage that now holds another join or aggregate, a join strategy; never a split or
merge that did not happen. Each pair of real PySpark queries is checked against Spark's own
executed plan first (its exchanges), then compared as the snapshot holds it (no edges)."""

from __future__ import annotations

import re
from typing import Any

import pytest_opid
from pytest_opid.io.snapshot import dumps, loads
from tests.spark.spark_checks import CUSTOMERS_SCHEMA

FLINK_WORDS = ("setUidHash", "savepoint", "uid(", "allowNonRestoredState", "Flink", "chain")


def _exchanges(df: Any) -> list[str]:
    """Spark's exchanges in the executed plan: kind and partitioning, without expressions."""
    plan = df._jdf.queryExecution().executedPlan().toString()
    lines = [line.strip(" +-:*") for line in plan.splitlines()]
    return [re.sub("#[0-9]+", "", line.split("(", 1)[0]) for line in lines if "Exchange" in line]


def _snapshot_comparison(old: Any, new: Any) -> Any:
    """Compare the two queries as their snapshots hold them (names, parallelism, no edges)."""
    a, b = pytest_opid.fingerprint(old), pytest_opid.fingerprint(new)
    return pytest_opid.compare(loads(dumps(a)), loads(dumps(b)))


def _inputs(spark: Any, tables: dict[str, str]) -> tuple[Any, Any]:
    orders = spark.read.parquet(tables["orders"])
    customers = spark.read.schema(CUSTOMERS_SCHEMA).json(tables["customers"])
    return orders, customers


def filter_removed(spark: Any, tables: dict[str, str]) -> tuple[Any, Any]:
    """A filter removed inside a stage: the same exchanges, the operator IDs moved (pairing
    stages by them used to say one stage split and two merged)."""
    from pyspark.sql import functions as F

    orders, customers = _inputs(spark, tables)
    second = customers.withColumnRenamed("country", "second")
    third = customers.withColumnRenamed("country", "third")

    def query(first: Any) -> Any:
        joined = orders.join(F.broadcast(first), "customer_id")
        joined = joined.join(F.broadcast(second), "customer_id")
        return joined.join(F.broadcast(third), "customer_id").groupBy("second", "third").count()

    return query(customers.filter("country = 'FR'").select("customer_id")), query(
        customers.select("customer_id")
    )


def test_a_filter_removed_inside_a_stage_passes_without_a_split(spark, tables):
    old, new = filter_removed(spark, tables)
    # Spark: the same exchanges, the same number of stages; only a Filter/Project went away.
    assert _exchanges(old) == _exchanges(new)
    assert len(_exchanges(old)) == 4
    comparison = _snapshot_comparison(old, new)
    assert comparison.changed or comparison.added  # the operator IDs did move
    # Pairing the stages by operator IDs, then names, would invent a split and a merge here.
    assert {change.kind for change in comparison.chain_changes} == {"split", "merged"}
    assert not comparison.breaks("chains")
    text = pytest_opid.explain(comparison, "chains")
    assert text.startswith("Stages unchanged [checked: stages]: ")
    assert "the same stages and exchanges" in text
    assert "1 stage changed only in row-wise operators (Filter, Project)" in text
    assert "split" not in text and "merged" not in text
    assert not any(word in text for word in FLINK_WORDS)


def test_a_broadcast_join_added_is_one_stage_added(spark, tables):
    from pyspark.sql import functions as F

    orders, customers = _inputs(spark, tables)
    old = orders.join(F.broadcast(customers), "customer_id").groupBy("country").count()
    more = customers.withColumnRenamed("country", "home")
    new = orders.join(F.broadcast(customers), "customer_id")
    new = new.join(F.broadcast(more), "customer_id").groupBy("country").count()
    # Spark: one more broadcast exchange, nothing else.
    before, after = _exchanges(old), _exchanges(new)
    assert sum("BroadcastExchange" in e for e in before) == 1
    assert sum("BroadcastExchange" in e for e in after) == 2
    assert len(after) == len(before) + 1
    comparison = _snapshot_comparison(old, new)
    assert comparison.breaks("chains")
    text = pytest_opid.explain(comparison, "chains")
    headline = text.splitlines()[0]
    assert headline == (
        'Stages changed [checked: stages]: 1 stage added ("FileScan json -> Filter"); '
        "1 stage changed (BroadcastHashJoin added); Scan added: json [customer_id]."
    )
    assert "split" not in text and "merged" not in text
    assert "Stages: 3 before, 4 now." in text
    assert not any(word in text for word in FLINK_WORDS)


def test_a_group_by_removed_is_one_stage_removed(spark, tables):
    from pyspark.sql import functions as F

    orders, customers = _inputs(spark, tables)
    joined = orders.join(F.broadcast(customers), "customer_id")
    old, new = joined.groupBy("country").agg(F.sum("amount")), joined
    # Spark: the hash exchange of the aggregation is gone, the broadcast stays.
    before, after = _exchanges(old), _exchanges(new)
    assert [e for e in before if "hashpartitioning" in e] and not [
        e for e in after if "hashpartitioning" in e
    ]
    assert [e for e in before if "Broadcast" in e] == [e for e in after if "Broadcast" in e]
    comparison = _snapshot_comparison(old, new)
    assert comparison.breaks("chains")
    headline = pytest_opid.explain(comparison, "chains").splitlines()[0]
    assert headline == (
        'Stages changed [checked: stages]: 1 stage removed ("HashAggregate"); '
        "1 stage changed (HashAggregate removed)."
    )


def test_a_join_strategy_change_is_said_as_such(spark, tables):
    from pyspark.sql import functions as F

    orders, customers = _inputs(spark, tables)
    old = orders.join(F.broadcast(customers), "customer_id").groupBy("country").count()
    new = orders.hint("merge").join(customers, "customer_id").groupBy("country").count()
    plan_old = old._jdf.queryExecution().executedPlan().toString()
    plan_new = new._jdf.queryExecution().executedPlan().toString()
    assert "BroadcastHashJoin" in plan_old and "SortMergeJoin" not in plan_old
    assert "SortMergeJoin" in plan_new and "BroadcastHashJoin" not in plan_new
    comparison = _snapshot_comparison(old, new)
    assert comparison.breaks("chains")
    text = pytest_opid.explain(comparison, "chains")
    assert text.startswith(
        "Stages changed [checked: stages]: a join strategy changed "
        "(BroadcastHashJoin -> SortMergeJoin); 1 stage added ("
    )
    assert "  join strategy: BroadcastHashJoin is now SortMergeJoin" in text
    assert "split" not in text and "merged" not in text


def test_the_same_query_twice_has_no_stage_change(spark, tables):
    from pyspark.sql import functions as F

    orders, customers = _inputs(spark, tables)
    df = orders.join(F.broadcast(customers), "customer_id").groupBy("country").count()
    comparison = _snapshot_comparison(df, df)
    assert not comparison.breaks("chains")
    text = pytest_opid.explain(comparison, "chains")
    assert text == (
        "Stages unchanged [checked: stages]: the same stages "
        "(a batch job keeps no state between runs)."
    )
