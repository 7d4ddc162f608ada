"""The PySpark frontend: a live DataFrame, streaming DataFrame or ``StreamingQuery`` (classic or
Spark Connect) read from the JVM into a fingerprint, planned but never run."""

from __future__ import annotations

import dataclasses
from typing import Any

from pytest_opid.result import Fingerprint
from pytest_opid.spark.query.connect import is_connect, replay
from pytest_opid.spark.query.fingerprint import fingerprint_graph
from pytest_opid.spark.query.graph import SparkPlanGraph, graph_from_plan
from pytest_opid.spark.query.read import read_plan
from pytest_opid.spark.versions import installed_version
from pytest_opid.spark.vocabulary import SCHEMA_CHECK

__all__ = ["ACCEPTED", "fingerprint", "is_pyspark", "pandas_hint", "plan_graph"]

#: what the frontend accepts, for the error that lists every frontend's
ACCEPTED = (
    "a PySpark DataFrame (batch or streaming), DataStreamWriter or StreamingQuery, classic or "
    "Spark Connect"
)


def fingerprint(obj: Any) -> Fingerprint:
    """The fingerprint of a DataFrame, a streaming DataFrame, a ``DataStreamWriter`` (its sink
    and sources recorded too, never started) or a ``StreamingQuery`` (classic or Spark Connect:
    :mod:`.connect` replays a Connect one's plan)."""
    note = None
    if is_connect(obj):
        obj, note = replay(obj)
    graph, endpoints = _graph_and_endpoints(obj)
    fp = fingerprint_graph(graph)
    # the Spark that planned it: its line's restart rules judge a checkpoint it writes
    return dataclasses.replace(
        fp, note=note, engine_version=installed_version(), endpoints=endpoints
    )


def plan_graph(obj: Any) -> SparkPlanGraph:
    """Read the physical plan of ``obj`` from the JVM and convert it."""
    if is_connect(obj):
        obj = replay(obj).obj
    return _graph_and_endpoints(obj)[0]


def _graph_and_endpoints(
    obj: Any,
) -> tuple[SparkPlanGraph, tuple[tuple[str, str, str], ...] | None]:
    reading = read_plan(obj)
    graph = graph_from_plan(
        reading.plan_json,
        leaves=reading.leaves,
        streaming=reading.streaming,
        state=reading.state,
        sources=reading.sources,
        output_mode_known=reading.output_mode_known,
        node_texts=reading.node_texts,
        shuffle_partitions=reading.shuffle_partitions,
        schema_check=_schema_check(obj) if reading.streaming else True,
    )
    return graph, reading.endpoints


def _schema_check(obj: Any) -> bool:
    """Whether the session checks state schemas at restart
    (``spark.sql.streaming.stateStore.stateSchemaCheck``, a session conf the checkpoint does
    not keep). A query's own session is read through its JVM object."""
    try:
        obj = getattr(obj, "_df", obj)  # a DataStreamWriter: its DataFrame's session
        session = getattr(obj, "sparkSession", None)
        if session is not None:
            value = session.conf.get(SCHEMA_CHECK, "true")
        else:
            execution = obj._jsq.streamingQuery()
            value = execution.sparkSession().conf().get(SCHEMA_CHECK, "true")
    except Exception:  # py4j or a session gone: Spark's default
        return True
    return str(value).strip().lower() != "false"


def _top_module(obj: Any) -> str:
    return (type(obj).__module__ or "").partition(".")[0]


def pandas_hint(obj: Any) -> str | None:
    if _top_module(obj) == "pandas":
        return "a pandas DataFrame has no plan: fingerprint spark.createDataFrame(pdf) instead"
    return None


def is_pyspark(obj: Any) -> bool:
    """By module name, without importing PySpark."""
    return _top_module(obj) == "pyspark"
