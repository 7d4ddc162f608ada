"""The mapping from Spark's physical plan to the topology model, on real plans."""

from __future__ import annotations

import json

import pytest

import pytest_opid
from pytest_opid import DocumentError, Partitioner
from pytest_opid.spark import plan_graph
from pytest_opid.spark.query.fingerprint import fingerprint_graph
from pytest_opid.spark.query.graph import graph_from_plan
from tests.spark.spark_checks import CUSTOMERS_SCHEMA


def _orders(spark, tables):
    return spark.read.parquet(tables["orders"])


def _customers(spark, tables):
    return spark.read.schema(CUSTOMERS_SCHEMA).json(tables["customers"])


def _plan_classes(df) -> list[str]:
    plan = json.loads(df._jdf.queryExecution().executedPlan().toJSON())
    return [node["class"].rsplit(".", 1)[-1] for node in plan]


def test_wrappers_disappear_and_names_are_sparks(spark, tables):
    df = _orders(spark, tables).filter("amount > 1").groupBy("customer_id").count()
    classes = _plan_classes(df)
    assert {"WholeStageCodegenExec", "InputAdapter", "ColumnarToRowExec"} <= set(classes)
    topology = plan_graph(df).topology
    assert [op.name for op in topology.operators] == [
        "FileScan parquet",
        "Filter",
        "Project",
        "HashAggregate",
        "HashAggregate",
    ]
    assert [(e.source, e.target, e.partitioner) for e in topology.edges] == [
        (1, 2, Partitioner.FORWARD),
        (2, 3, Partitioner.FORWARD),
        (3, 4, Partitioner.FORWARD),
        (4, 5, Partitioner.HASH),
    ]


def _exchange_edges(df):
    topology = plan_graph(df).topology
    ops = {op.id: op for op in topology.operators}
    return [
        (e.partitioner, ops[e.target].name, ops[e.target].parallelism)
        for e in topology.edges
        if e.partitioner is not Partitioner.FORWARD
    ]


def test_exchanges_become_partitioners(spark, tables):
    from pyspark.sql import functions as F

    orders = _orders(spark, tables)
    customers = _customers(spark, tables)
    # Sized by spark.sql.shuffle.partitions (4 in the fixture): recorded once as the conf.
    grouped = orders.groupBy("customer_id").count()
    assert _exchange_edges(grouped) == [(Partitioner.HASH, "HashAggregate", -1)]
    assert plan_graph(grouped).settings == (("spark.sql.shuffle.partitions", "4"),)
    # spark_partition_id() keeps the projection above the exchange (it is not pushed down)
    partition = F.spark_partition_id().alias("partition")
    assert _exchange_edges(orders.repartition(3).select(partition)) == [
        (Partitioner.REBALANCE, "Project", 3)
    ]
    assert _exchange_edges(orders.agg(F.max("amount"))) == [
        (Partitioner.GLOBAL, "HashAggregate", 1)
    ]
    assert _exchange_edges(orders.repartitionByRange(5, "amount").select(partition)) == [
        (Partitioner.CUSTOM, "Project", 5)
    ]
    # an exchange with no operator above it is a node of its own: the read side of the shuffle
    assert _exchange_edges(orders.repartition(3).filter("amount > 1")) == [
        (Partitioner.REBALANCE, "Exchange", 3)
    ]
    assert _exchange_edges(orders.join(F.broadcast(customers), "customer_id")) == [
        (Partitioner.BROADCAST, "BroadcastHashJoin", -1)
    ]


@pytest.mark.parametrize(
    "build",
    [
        lambda o, c: o.groupBy("customer_id").count(),
        lambda o, c: o.repartition(3).coalesce(2),
        lambda o, c: (
            o.select("customer_id").repartition(3).union(c.select("customer_id").repartition(2))
        ),
        lambda o, c: o.limit(5),
        lambda o, c: o.orderBy("amount").limit(5),
        lambda o, c: o.repartition(3, "customer_id"),
    ],
    ids=["hash", "coalesce", "union", "collect_limit", "take_ordered", "root_exchange"],
)
def test_parallelism_is_the_number_of_output_partitions(spark, tables, build):
    df = build(_orders(spark, tables), _customers(spark, tables))
    fp = pytest_opid.fingerprint(df)
    vertex = fp.job_vertices[-1]  # the stage producing the result
    # -1 after an exchange Spark sized itself: the number is the conf, recorded once
    conf = dict(fp.settings).get("spark.sql.shuffle.partitions")
    partitions = int(conf) if vertex.parallelism == -1 and conf else vertex.parallelism
    assert partitions == df._jdf.queryExecution().toRdd().getNumPartitions()


def test_scans_have_no_parallelism(spark, tables):
    topology = plan_graph(_orders(spark, tables).filter("amount > 1")).topology
    # Spark derives a scan's partitions from file sizes and the machine's cores: not stable.
    assert {op.parallelism for op in topology.operators} == {-1}


def test_reused_exchange_is_a_second_consumer(spark, tables):
    from pyspark.sql import functions as F

    totals = _orders(spark, tables).groupBy("customer_id").agg(F.sum("amount").alias("total"))
    df = totals.join(F.broadcast(totals.withColumnRenamed("total", "again")), "customer_id")
    assert "ReusedExchangeExec" in _plan_classes(df)
    topology = plan_graph(df).topology
    names = [op.name for op in topology.operators]
    assert names.count("FileScan parquet") == 1  # the reused branch is not duplicated
    partial = next(op.id for op in topology.operators if op.name == "HashAggregate")
    outs = [e for e in topology.edges if e.source == partial]
    assert [e.partitioner for e in outs] == [Partitioner.HASH, Partitioner.HASH]
    assert len({e.target for e in outs}) == 2


def test_node_ids_follow_the_plan_sources_first(spark, tables):
    df = _orders(spark, tables).hint("merge").join(_customers(spark, tables), "customer_id")
    topology = plan_graph(df).topology
    assert [op.id for op in topology.operators] == list(range(1, len(topology.operators) + 1))
    sources = [topology.operators[i].name for i in topology.sources]
    assert sources == ["FileScan parquet", "FileScan json"]  # left input, then right input
    assert all(e.source < e.target for e in topology.edges)


def test_streaming_sources_and_stateful_operators(spark, events_dir):
    stream = spark.readStream.schema("user long, page string, ts timestamp").json(str(events_dir))
    graph = plan_graph(stream.withWatermark("ts", "1 minute").dropDuplicates(["user", "ts"]))
    names = [op.name for op in graph.topology.operators]
    assert names == [
        "StreamingRelation FileSource",
        "EventTimeWatermark",
        "StreamingDeduplicate",
    ]
    assert [(s.state_operator_id, s.kind) for s in graph.state_operators] == [(0, "dedupe")]


@pytest.mark.parametrize("nagle_off", [True, False], ids=["whole", "pieces"])
def test_plan_json_comes_whole_or_in_pieces_without_mangling_text(spark, monkeypatch, nagle_off):
    # Whole where Nagle is off on py4j's connection; in pieces where it could not be switched
    # off (py4j stalls 40 ms on answers over 8 KiB). A character outside the BMP (two UTF-16
    # units) may fall on a piece boundary, on either parity.
    from pyspark import SparkContext
    from pyspark.sql import functions as F

    from pytest_opid.spark.query import gateway

    if not nagle_off:
        monkeypatch.setattr(gateway.Gateway, "_no_delay", lambda self: False)
    reader = gateway.Gateway(SparkContext._active_spark_context._gateway)  # handles of its own
    for pad in range(2):
        literal = "y" * pad + "a\U0001f600\u00e9?" * 3000
        df = spark.range(3).filter(F.lit(literal) != F.col("id").cast("string"))
        plan = df._jdf.queryExecution().executedPlan()
        text = reader.plan_json(plan)
        assert len(text) > 12_000  # several pieces
        # Spark's own text with the packages the readers never look at shortened (and an
        # expression id's class name dropped) in the JVM, nothing else changed.
        expected = (
            plan.toJSON()
            .replace('"product-class":"org.apache.spark.sql.catalyst.expressions.ExprId",', "")
            .replace("org.apache.spark.sql.catalyst.expressions.", "x.")
            .replace("org.apache.spark.sql.execution.", "x.")
        )
        assert text == expected
    assert (reader._piece == gateway.WHOLE) is nagle_off


def test_nagle_is_off_on_the_connection_plan_text_comes_over(spark):
    # py4j 0.10.9.9 leaves Nagle on (py4j issue #516); a long answer would wait for a delayed
    # ACK. pytest-opid switches it off on py4j's connections (as py4j's pull request #592 does),
    # also on the connection of a thread that fingerprints later (PySpark pins one per thread).
    import threading

    from pytest_opid.spark.query.jvm import Jvm

    df = spark.range(3).groupBy("id").count()
    pytest_opid.fingerprint(df)
    reader = Jvm.get()
    gateway = reader.gateway
    field = reader._class("py4j.GatewayServer").getDeclaredField("connections")
    field.setAccessible(True)

    def nagle_off_on_this_threads_connection() -> bool:
        port = gateway._gateway_client.get_thread_connection().socket.getsockname()[1]
        found = [c.getSocket() for c in field.get(gateway.java_gateway_server)]
        found = [s for s in found if s.getPort() == port]
        return len(found) == 1 and found[0].getTcpNoDelay()

    assert nagle_off_on_this_threads_connection()
    seen: list[object] = []

    def other_thread() -> None:
        spark.range(1).count()  # this thread's own connection, new
        pytest_opid.fingerprint(df)
        seen.append(nagle_off_on_this_threads_connection())

    worker = threading.Thread(target=other_thread)
    worker.start()
    worker.join(60)
    assert seen == [True]


# -- plan JSON handled without Spark --------------------------------------------------------


def _chain_plan(depth: int) -> list[dict]:
    nodes = [{"class": "org.apache.spark.sql.execution.FilterExec", "num-children": 1}] * depth
    return [*nodes, {"class": "org.apache.spark.sql.execution.RangeExec", "num-children": 0}]


def test_deep_plans_convert_without_recursion():
    graph = graph_from_plan(json.dumps(_chain_plan(30_000)))
    assert len(graph.topology.operators) == 30_001
    fp = fingerprint_graph(graph)
    assert len(fp.job_vertices) == 1
    assert fp.job_vertices[0].name.startswith("Range -> Filter -> Filter")


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[]", "non-empty JSON list"),
        ('[{"num-children": 0}]', "node #0 has no 'class'"),
        ('[{"class": "x.FilterExec"}]', "node #0 (x.FilterExec) has no valid 'num-children'"),
        ('[{"class": "x.FilterExec", "num-children": 1}]', "node #0 (x.FilterExec) misses"),
        (
            '[{"class": "x.RangeExec", "num-children": 0}, {"class": "x.B", "num-children": 0}]',
            "node #1 (x.B) is outside the plan tree",
        ),
        (
            '[{"class": "x.adaptive.AdaptiveSparkPlanExec", "num-children": 0}]',
            "spark.sql.adaptive.enabled=false",
        ),
    ],
)
def test_bad_plan_json_names_the_culprit(plan, message):
    with pytest.raises(DocumentError, match="the Spark plan") as error:
        graph_from_plan(plan)
    assert message in str(error.value)


# -- what is not accepted -------------------------------------------------------------------


def test_pandas_dataframe_is_rejected_with_the_accepted_inputs():
    import pandas as pd

    with pytest.raises(TypeError) as error:
        pytest_opid.fingerprint(pd.DataFrame({"a": [1]}))
    assert "PySpark DataFrame" in str(error.value)
    assert "got pandas" in str(error.value) and "DataFrame" in str(error.value)
    assert "spark.createDataFrame(pdf)" in str(error.value)
    # The Spark frontend itself says how to make one a Spark plan.
    with pytest.raises(TypeError, match=r"spark\.createDataFrame\(pdf\)"):
        pytest_opid.spark.fingerprint(pd.DataFrame({"a": [1]}))


def test_rdd_is_rejected(spark):
    rdd = spark.sparkContext.parallelize([1, 2, 3])
    with pytest.raises(TypeError) as error:
        pytest_opid.fingerprint(rdd)
    text = str(error.value)
    accepted = "a PySpark DataFrame (batch or streaming), DataStreamWriter or StreamingQuery"
    assert f"accepts {accepted}" in text
    assert "RDD" in text and "toDF()" in text


def test_column_is_rejected(spark):
    from pyspark.sql import functions as F

    with pytest.raises(TypeError, match="accepts a PySpark DataFrame"):
        pytest_opid.fingerprint(F.col("amount"))
