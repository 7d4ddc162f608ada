"""Spark: PySpark DataFrames and streaming queries as fingerprints, and Spark's restart rules.

Importing the package registers with :mod:`pytest_opid.io.registry` the PySpark frontend and
:class:`~pytest_opid.spark.rules.SparkRules`; PySpark itself is imported only when a PySpark
object is fingerprinted. Modules: :mod:`.plan` (plan JSON to topology, stages and state
numbering, pure Python), :mod:`.jvm` (reading the plan through py4j, the only JVM code),
:mod:`.rules` (state by position, stages, in Spark's words).
"""

from __future__ import annotations

from typing import Any

from pytest_opid.io.registry import Frontend, register_engine, register_frontend, register_hint
from pytest_opid.result import Fingerprint
from pytest_opid.spark.jvm import read_plan
from pytest_opid.spark.plan import SparkPlanGraph, fingerprint_graph, graph_from_plan
from pytest_opid.spark.rules import SparkRules

__all__ = ["fingerprint", "plan_graph", "register"]


def fingerprint(obj: Any) -> Fingerprint:
    """The fingerprint of a DataFrame, a streaming DataFrame or a ``StreamingQuery``."""
    return fingerprint_graph(plan_graph(obj))


def plan_graph(obj: Any) -> SparkPlanGraph:
    """Read the physical plan of ``obj`` from the JVM and convert it."""
    plan_json, leaves, streaming = read_plan(obj)
    return graph_from_plan(plan_json, leaves=leaves, streaming=streaming)


def _top_module(obj: Any) -> str:
    return (type(obj).__module__ or "").partition(".")[0]


def _pandas_hint(obj: Any) -> str | None:
    if _top_module(obj) == "pandas":
        return "a pandas DataFrame has no plan: fingerprint spark.createDataFrame(pdf) instead"
    return None


def register() -> None:
    """Register this engine's frontends, data formats and rules (the entry point of the
    ``pytest_opid.engines`` group)."""
    register_frontend(
        Frontend(
            "pyspark",
            lambda obj: _top_module(obj) == "pyspark",
            lambda obj, chaining: fingerprint(obj),
            "a PySpark DataFrame (batch or streaming) or StreamingQuery",
        )
    )
    register_hint(_pandas_hint)
    register_engine(SparkRules())
