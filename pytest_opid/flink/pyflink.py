"""PyFlink: the job a ``StreamExecutionEnvironment`` (or a ``StatementSet``) would submit, read
from Flink's own StreamGraph and hashed by pytest-opid's engine.

:func:`fingerprint_pyflink` asks PyFlink for the StreamGraph exactly as ``env.execute()`` builds
it (``StreamExecutionEnvironment._generate_stream_graph``: Python operator configuration,
PyFlink's chaining of Python functions, custom partition counts), without clearing the
environment's transformations, reads every attribute that decides an OperatorID or a chain
(:func:`pytest_opid.flink.stream_graph.read_stream_graph`) and computes the fingerprint with
:func:`pytest_opid.flink.compute.compute`. Flink only supplies the graph; the IDs and chains are
ours (the tests compare them with the JobGraph Flink builds, as a witness).

The graph is read on the JVM side by a small Java class (:mod:`pytest_opid.flink.java_helper`,
loaded by :mod:`pytest_opid.flink.jvm`), which also undoes what PyFlink's preparation does to
the environment (PyFlink's chaining optimizer rewires the transformations in place), so
fingerprinting neither consumes nor changes a job: ``env.execute()`` afterwards submits the
same graph.

PyFlink is imported only when a PyFlink object is fingerprinted: :func:`is_pyflink` recognises
one by its class's module name.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pytest_opid.errors import OpidError
from pytest_opid.flink.chaining import ChainingRule
from pytest_opid.flink.jvm import FlinkJvm, root_message
from pytest_opid.flink.stream_graph import (
    StreamGraphReading,
    fingerprint_reading,
    read_stream_graph,
)
from pytest_opid.result import Fingerprint

__all__ = [
    "ACCEPTED",
    "fingerprint_pyflink",
    "is_pyflink",
    "job_graph_vertices",
    "stream_graph",
]

ACCEPTED = (
    "a PyFlink StreamExecutionEnvironment (the job env.execute() would submit), a DataStream "
    "(its environment's job) or a StatementSet (the job statement_set.execute() would submit)"
)


# -- from PyFlink objects to a StreamGraph ----------------------------------------------------


@contextmanager
def stream_graph(obj: Any) -> Iterator[Any]:
    """The Java StreamGraph that ``obj.execute()`` would submit, for the ``with`` block; the
    environment is left exactly as it was afterwards. ``obj`` is a PyFlink
    ``StreamExecutionEnvironment``, a ``DataStream`` (its environment) or a ``StatementSet``."""
    kind = _kind(obj)
    jvm = FlinkJvm.get()
    if kind == "statement_set":
        try:
            j_graph = jvm.helper.statementSetPipeline(obj._j_statement_set)
        except Exception as exc:
            raise _java_error(jvm, exc, "the statement set") from None
        yield j_graph
        return
    env = obj.get_execution_environment() if kind == "datastream" else obj
    j_env = env._j_stream_execution_environment
    if j_env.getTransformations().isEmpty():
        raise OpidError(
            "the StreamExecutionEnvironment holds no operators, so env.execute() would fail "
            '("No operators defined in streaming topology"): build the pipeline first'
        )
    token = jvm.helper.capture(j_env)
    try:
        try:
            j_graph = env._generate_stream_graph(clear_transformations=False)
        except Exception as exc:
            raise _java_error(jvm, exc, "the environment") from None
        yield j_graph
    finally:
        jvm.helper.restore(token)


def _kind(obj: Any) -> str:
    module = type(obj).__module__ or ""
    name = type(obj).__name__
    if module.startswith("pyflink.datastream") and hasattr(obj, "_j_stream_execution_environment"):
        return "env"
    if module.startswith("pyflink.datastream") and hasattr(obj, "get_execution_environment"):
        return "datastream"
    if module.startswith("pyflink.table") and hasattr(obj, "_j_statement_set"):
        return "statement_set"
    hint = ""
    if module.startswith("pyflink.table") and "TableEnvironment" in name:
        hint = (
            "; a table environment holds no job: fingerprint t_env.create_statement_set() "
            "with the INSERTs added, or the StreamExecutionEnvironment after "
            "statement_set.attach_as_datastream() or t_env.to_data_stream(table)"
        )
    elif module.startswith("pyflink.table") and name == "Table":
        hint = "; a Table is no job until it is written: add it to a statement set"
    raise TypeError(f"pytest_opid.fingerprint() accepts {ACCEPTED}; got {module}.{name}{hint}")


def _java_error(jvm: FlinkJvm, exc: Exception, what: str) -> OpidError:
    java = getattr(exc, "java_exception", None)
    if java is None:
        return OpidError(f"Flink could not build the stream graph of {what}: {exc}")
    chain = jvm.describe(java)
    return OpidError(f"Flink could not build the stream graph of {what}: {root_message(chain)}")


# -- the frontend -----------------------------------------------------------------------------


def fingerprint_pyflink(obj: Any, chaining: ChainingRule | None = None) -> Fingerprint:
    """The fingerprint of the job a PyFlink environment, DataStream or StatementSet would
    submit, computed by pytest-opid's engine from Flink's StreamGraph."""
    with stream_graph(obj) as j_graph:
        reading = read_stream_graph(j_graph)
    return fingerprint_reading(reading, chaining)


def job_graph_vertices(obj: Any) -> tuple[StreamGraphReading, list[dict[str, Any]]]:
    """Our reading of ``obj``'s StreamGraph and Flink's own JobGraph of the same graph (read
    first, then handed to Flink): what the tests compare."""
    jvm = FlinkJvm.get()
    with stream_graph(obj) as j_graph:
        reading = read_stream_graph(j_graph)
        vertices = jvm.job_graph(j_graph)
    return reading, vertices


def is_pyflink(obj: Any) -> bool:
    # By module name, without importing PyFlink: every PyFlink object comes here, and the
    # ones that are no job get a TypeError saying which are.
    return (type(obj).__module__ or "").startswith("pyflink.")
