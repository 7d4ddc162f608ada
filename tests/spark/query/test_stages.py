"""Chains are Spark's stages: for real batch queries, the job vertices pytest-opid predicts from
the plan are the stages Spark runs (same count, same operators in each, same task count where
the plan fixes it)."""

from __future__ import annotations

from typing import Any

import pytest

import pytest_opid
from pytest_opid.flink.chaining import forward_chaining
from pytest_opid.spark import plan_graph
from pytest_opid.spark.query.fingerprint import spark_chaining
from pytest_opid.topology import operator_ids
from tests.spark.spark_checks import CUSTOMERS_SCHEMA, predicted_stages, sql_conf


def _queries(spark: Any, tables: dict[str, str]) -> dict[str, Any]:
    from pyspark.sql import functions as F

    orders = spark.read.parquet(tables["orders"])
    customers = spark.read.schema(CUSTOMERS_SCHEMA).json(tables["customers"])
    per_customer = orders.groupBy("customer_id").agg(F.sum("amount").alias("total"))
    return {
        "scan_filter_project": orders.filter("amount > 10").select("order_id", "amount"),
        "aggregation": per_customer,
        "global_aggregation": orders.agg(F.max("amount")),
        "sort_merge_join": orders.hint("merge").join(customers, "customer_id"),
        "broadcast_join": orders.join(F.broadcast(customers), "customer_id"),
        "union": orders.select("customer_id")
        .union(customers.select("customer_id"))
        .groupBy("customer_id")
        .count(),
        "repartition": orders.repartition(3).filter("amount > 1").coalesce(2),
        "repartition_at_root": orders.repartition(3, "customer_id"),
        "reused_exchange": per_customer.join(
            F.broadcast(per_customer.withColumnRenamed("total", "again")), "customer_id"
        ),
        "join_after_aggregations": per_customer.hint("merge").join(
            orders.groupBy("customer_id").count(), "customer_id"
        ),
    }


QUERIES = [
    "scan_filter_project",
    "aggregation",
    "global_aggregation",
    "sort_merge_join",
    "broadcast_join",
    "union",
    "repartition",
    "repartition_at_root",
    "reused_exchange",
    "join_after_aggregations",
]


@pytest.mark.parametrize("query", QUERIES)
def test_job_vertices_are_the_stages_spark_runs(spark, tables, executed_stages, query):
    # Whole-stage codegen off: Spark then records one RDD scope per operator, which is what
    # lets the check see which operator ran in which stage. Stage boundaries do not move.
    with sql_conf(spark, {"spark.sql.codegen.wholeStage": "false"}):
        df = _queries(spark, tables)[query]
        predicted = sorted(predicted_stages(pytest_opid.fingerprint(df)), key=lambda s: s[1])
        ran = sorted(executed_stages(df), key=lambda s: s[1])
    assert [names for _, names in predicted] == [names for _, names in ran]
    for (parallelism, names), (tasks, _) in zip(predicted, ran, strict=True):
        if parallelism > 0:
            assert parallelism == tasks, names


def test_the_checked_queries_cover_what_they_claim(spark, tables):
    """Each scenario really has the exchange it is named after (read from Spark's explain)."""
    queries = _queries(spark, tables)
    plans = {
        name: df._jdf.queryExecution().executedPlan().toString() for name, df in queries.items()
    }
    assert "SortMergeJoin" in plans["sort_merge_join"]
    assert "BroadcastHashJoin" in plans["broadcast_join"]
    assert "Union" in plans["union"]
    assert "RoundRobinPartitioning(3)" in plans["repartition"]
    assert "ReusedExchange" in plans["reused_exchange"]
    assert "SinglePartition" in plans["global_aggregation"]
    # both join inputs already hash-partitioned by the key: the join reads two pipelines
    assert plans["join_after_aggregations"].count("Exchange hashpartitioning") == 2


def test_stages_read_several_pipelines(spark, tables):
    fp = pytest_opid.fingerprint(_queries(spark, tables)["union"])
    names = [v.name for v in fp.job_vertices]
    assert names == ["(FileScan parquet, FileScan json) -> Union -> HashAggregate", "HashAggregate"]


def test_operator_ids_count_chainable_outputs_by_sparks_rule(spark, tables):
    # A union's inputs are pipelined by Spark, not by Flink's single-input rule: the IDs are
    # computed with Spark's rule, and the rule makes a difference.
    graph = plan_graph(_queries(spark, tables)["union"])
    topology = graph.topology
    spark_ids = [h.hex() for h in operator_ids(topology, spark_chaining(topology))]
    flink_ids = [h.hex() for h in operator_ids(topology, forward_chaining(topology))]
    fp = pytest_opid.fingerprint(_queries(spark, tables)["union"])
    assert [o.operator_id for o in fp.operators] == spark_ids
    assert spark_ids != flink_ids
