"""A Spark Connect server outside the test process (``sc://``, another JVM): its DataFrames are
replayed in a local session where everything they read resolves here, and say so; anything
only the server knows (a temp view, a registered function, a running query) is refused in one
line naming it.

The server is real: ``tests/spark/connect_server.py`` runs Spark's Connect plugin in a Python
process of its own on loopback, started once for this module and stopped at its end.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("pyspark.sql.connect.session")

import pytest_opid
from pytest_opid.errors import OpidError
from tests.spark.connect_corpus import (
    CORPUS,
    EVENTS,
    cases,
    start_unwidened,
    totals,
    write_events,
)
from tests.spark.connect_server import remote_server

pytestmark = pytest.mark.spark_line("4.0", reason="Connect replay is Spark 4's")

#: Pipelines that read nothing but paths (no view, conf-free or conf set through the session):
#: they resolve here as on the server.
LOCAL = ["join_aggregate", "windowed_count", "dedupe", "stream_join", "transform_with_state"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with remote_server(tmp_path_factory.mktemp("connect-server") / "stderr.log") as url:
        yield url


@pytest.fixture(scope="module")
def paths(tables: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return {**tables, **write_events(tmp_path_factory.mktemp("remote-inputs"))}


@pytest.fixture
def remote(spark: Any, spark_connect: Any, server: str) -> Iterator[Any]:
    """A Connect session of the remote server (``spark``: the local Spark a replay runs in).
    With ``spark_connect`` this JVM serves Connect too, the harder case: the replay first asks
    whether the client is one of its own (a query's refusal once blamed the server for not
    answering, where only this process's question was wrong)."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    session = ConnectSession.builder.remote(server).create()
    try:
        yield session
    finally:
        session.stop()


def _refusal(frame: Any) -> str:
    with pytest.raises(OpidError) as error:
        pytest_opid.fingerprint(frame)
    message = str(error.value)
    assert "\n" not in message and "Traceback" not in message
    assert "sc://localhost:" in message and "token" not in message
    assert "run the marked tests with a Spark Connect server in the test process" in message
    assert "on Databricks, keep a separate test environment with pyspark installed" in message
    return message


@pytest.mark.parametrize("case", cases(LOCAL))
def test_a_remote_plan_reading_only_paths_is_replayed_locally(case, spark, remote, paths):
    build, kinds = CORPUS[case]
    frame = build(remote, paths)
    ours = pytest_opid.fingerprint(frame)
    theirs = pytest_opid.fingerprint(build(spark.newSession(), paths))
    assert ours == theirs
    assert tuple(state.kind for state in ours.state_operators or ()) == kinds
    assert ours.note is not None
    assert ours.note.startswith(f"replayed locally on Spark {spark.version}: ")
    assert "sc://localhost:" in ours.note and "token" not in ours.note


def test_the_remote_sessions_confs_come_along(spark, remote, paths):
    remote.conf.set("spark.sql.shuffle.partitions", "3")
    frame = remote.read.parquet(paths["orders"]).groupBy("customer_id").count()
    fp = pytest_opid.fingerprint(frame)
    assert ("spark.sql.shuffle.partitions", "3") in fp.settings
    assert spark.conf.get("spark.sql.shuffle.partitions") == "4"  # the local one untouched


def test_only_allowed_remote_settings_come_along(spark, remote, paths):
    """A remote session naming a catalog class (or a state store class) does not make the test's
    JVM load or use it: only the settings that decide a plan are copied (the catalog test is
    on ``spark.sql.catalog.other``: a bad ``spark_catalog`` breaks the server's own plans)."""
    from pytest_opid.spark.query.connect import replay_locally

    remote.conf.set("spark.sql.shuffle.partitions", "5")
    # loaded only where a query names the catalog: the remote plan still resolves there
    remote.conf.set("spark.sql.catalog.other", "org.example.NotAClassHere")
    remote.conf.set("spark.sql.streaming.stateStore.providerClass", "org.example.Store")
    frame = remote.read.parquet(paths["orders"]).groupBy("customer_id").count()
    local = replay_locally(frame).obj.sparkSession.conf
    assert local.get("spark.sql.shuffle.partitions") == "5"
    assert local.get("spark.sql.catalog.other", None) is None
    assert local.get("spark.sql.streaming.stateStore.providerClass") != "org.example.Store"
    fp = pytest_opid.fingerprint(frame)
    assert ("spark.sql.shuffle.partitions", "5") in fp.settings
    assert not [key for key, _ in fp.settings if "catalog" in key or "Class" in key]


def test_a_temp_view_only_the_server_knows_is_refused_naming_it(remote, paths):
    remote.read.parquet(paths["orders"]).createOrReplaceTempView("remote_orders")
    by_table = remote.table("remote_orders").groupBy("customer_id").count()
    by_sql = remote.sql("SELECT customer_id, count(*) FROM remote_orders GROUP BY customer_id")
    for frame in (by_table, by_sql):
        message = _refusal(frame)
        assert "reads remote_orders from the catalog of the Spark Connect server" in message, (
            message
        )


def test_a_function_only_the_server_knows_is_refused_naming_it(remote, paths):
    remote.udf.register("remote_bucket", lambda c: c % 3, "long")
    orders = remote.read.parquet(paths["orders"])
    frame = orders.selectExpr("remote_bucket(customer_id) AS b").groupBy("b").count()
    message = _refusal(frame)
    assert "calls remote_bucket, a function registered only in the session of the" in message, (
        message
    )


def test_a_remote_streaming_query_is_refused(remote, paths, tmp_path):
    events = remote.readStream.schema(EVENTS).json(paths["events"])
    query = (
        events.groupBy("page")
        .count()
        .writeStream.format("noop")
        .outputMode("update")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    message = _refusal(query)
    assert "a Connect client holds no plan of a started query" in message
    assert "fingerprint the streaming DataFrame before .writeStream" in message


def test_a_query_the_server_cannot_resolve_either_is_said_to_be_at_fault(remote, paths):
    # Not "registered only on the server": the server has no such function either.
    frame = remote.read.parquet(paths["orders"]).selectExpr("no_such_function(customer_id)")
    with pytest.raises(OpidError) as error:
        pytest_opid.fingerprint(frame)
    message = str(error.value)
    assert "\n" not in message
    assert "does not resolve on the Spark Connect server at sc://localhost:" in message
    assert "either ([UNRESOLVED_ROUTINE] Cannot resolve routine `no_such_function`" in message
    assert "the query itself is at fault" in message
    assert "registered only" not in message


def test_a_remote_program_is_planned_with_the_settings_its_checkpoint_pins(
    spark, remote, paths, tmp_path
):
    # The pinned setting is set on the remote session and comes along with its confs.
    checkpoint = str(tmp_path / "checkpoint")
    start_unwidened(spark, paths, checkpoint)
    ours = pytest_opid.check_restore(checkpoint, totals(remote, paths, swapped=True))
    theirs = pytest_opid.check_restore(checkpoint, totals(spark.newSession(), paths, swapped=True))
    assert ours.to_dict() == theirs.to_dict()
    assert not theirs.restorable
