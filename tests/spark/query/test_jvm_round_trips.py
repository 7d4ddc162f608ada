"""A warm fingerprint of a streaming query asks the JVM only what changes from call to call
(issue 20: fingerprint() against Spark's explain()). py4j resolves every name (``org``,
``org.apache``, ..., a class, its static method) with a round trip of its own on each access;
pytest-opid keeps what they resolve to, once per gateway."""

from __future__ import annotations

import pytest

import pytest_opid
from pytest_opid.spark.query.jvm import Jvm


def page_view_stats(spark, events_path):  # the example streaming query (examples/spark/jobs.py)
    from pyspark.sql import functions as F

    events = spark.readStream.schema(
        "event_id string, user_id long, page string, event_time timestamp"
    ).json(events_path)
    return (
        events.withWatermark("event_time", "10 minutes")
        .dropDuplicates(["event_id", "event_time"])
        .groupBy(F.window("event_time", "5 minutes"), "page")
        .agg(F.count("*").alias("views"), F.approx_count_distinct("user_id").alias("visitors"))
    )


@pytest.fixture
def round_trips(monkeypatch):
    """The py4j commands this test's thread sends (py4j's finalizer thread sends the detaches
    of other tests' proxies whenever it wakes: not ours to count)."""
    import threading

    from py4j import clientserver

    sent: list[str] = []
    send = clientserver.ClientServerConnection.send_command
    test_thread = threading.get_ident()

    def counting(self, command):
        if threading.get_ident() == test_thread:
            sent.append(command)
        return send(self, command)

    monkeypatch.setattr(clientserver.ClientServerConnection, "send_command", counting)
    return sent


def test_a_warm_streaming_fingerprint_resolves_no_name_again(spark, tmp_path, round_trips):
    df = page_view_stats(spark, str(tmp_path))
    first = pytest_opid.fingerprint(df)
    round_trips.clear()
    again = pytest_opid.fingerprint(df)
    assert again.to_json() == first.to_json()
    # "r" commands are py4j's reflection: resolving a package, a class or a static member.
    lookups = [c.split("\n")[2] for c in round_trips if c.startswith("r\n")]
    assert not [name for name in lookups if not name.startswith("file:") and "." in name], lookups
    assert len(round_trips) <= 100  # 169 before the names were kept


def test_a_static_field_is_read_each_time(spark):
    names = Jvm.get().jvm
    assert names.java.lang.Integer is names.java.lang.Integer  # a class: resolved once
    assert names.java.lang.Integer.MAX_VALUE == 2**31 - 1  # a field's value: not kept
    assert "MAX_VALUE" not in names.java.lang.Integer._found


def test_a_warm_batch_fingerprint_is_one_command(spark, round_trips):
    # Adaptive execution off (the plugin's session): one call makes the executed plan and
    # answers the shuffle partitions, the plan JSON and the scans' names, whole (Nagle off on
    # py4j's connection). Spark's own executedPlan() from Python is two commands.
    def query():  # its plan JSON is over 40 KiB: py4j's buffer is 8 KiB
        wide = "'" + "x" * 40_000 + "'"
        return spark.range(100).selectExpr(f"id % 7 || {wide} AS k").groupBy("k").count()

    pytest_opid.fingerprint(query())
    fresh = query()
    round_trips.clear()
    fp = pytest_opid.fingerprint(fresh)
    assert "x" * 40_000 in "\n".join(fp.plan)  # the grouping key, in the tree
    commands = [c.split("\n")[:3] for c in round_trips if not c.startswith("m\nd\n")]
    assert len(commands) == 1, commands
    assert fp.plan and fp.plan[0].startswith("HashAggregate keys [")
