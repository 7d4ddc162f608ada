"""Reading plans from PySpark: the only code that touches the JVM (through py4j).

:func:`read_plan` returns Spark's physical plan as JSON plus the little the JSON leaves out,
with a fixed number of py4j calls whatever the plan's size; :mod:`pytest_opid.spark.plan`
converts it.
"""

from __future__ import annotations

import json
from typing import Any

from pytest_opid.errors import OpidError

__all__ = ["read_plan"]

# -- reading plans from PySpark (the only code that touches the JVM) -------------------------

_ACCEPTED = "a PySpark DataFrame (batch or streaming) or StreamingQuery of a classic SparkSession"
_SCANS = (".FileSourceScanExec", ".BatchScanExec")


def read_plan(obj: Any) -> tuple[str, list[str | None] | None, bool]:
    """Plan JSON, node names of the plan's file scans, and whether the plan is streaming."""
    module = type(obj).__module__ or ""
    name = f"{module}.{type(obj).__qualname__}"
    if module.startswith("pyspark.sql.connect"):
        raise TypeError(
            f"pytest_opid.spark does not support Spark Connect: got {name}, whose plan lives "
            f"on the Connect server, out of reach of py4j. It accepts {_ACCEPTED}: build the "
            'pipeline under test with SparkSession.builder.master("local[2]"), not .remote(), '
            "SPARK_REMOTE or spark.api.mode=connect"
        )
    from pyspark.sql import DataFrame  # lazy: pyspark is an optional extra
    from pyspark.sql.streaming import StreamingQuery

    if isinstance(obj, StreamingQuery):
        jvm = _Jvm.get()
        execution = obj._jsq.streamingQuery()
        session = _stream_session(execution)
        plan = jvm.incremental_plan(session, execution.analyzedPlan(), execution.outputMode())
        return jvm.plan_json(plan), None, True
    if not isinstance(obj, DataFrame):
        hint = ""
        if module.startswith("pandas"):
            hint = "; a pandas DataFrame is not a Spark plan (spark.createDataFrame(pdf) makes one)"
        elif module.startswith("pyspark.pandas"):
            hint = "; convert a pandas-on-Spark DataFrame with .to_spark()"
        elif type(obj).__name__ == "RDD":
            hint = "; an RDD has no SQL plan (rdd.toDF() makes a DataFrame of it)"
        raise TypeError(f"pytest_opid.spark accepts {_ACCEPTED}; got {name}{hint}")
    jvm = _Jvm.get()
    jdf = obj._jdf
    execution = jdf.queryExecution()
    session = jdf.sparkSession()
    if jdf.isStreaming():
        plan = jvm.incremental_plan(session, execution.analyzed(), None)
        return jvm.plan_json(plan), None, True
    plan = execution.executedPlan()
    if plan.nodeName() == "AdaptiveSparkPlan":
        plan = jvm.static_plan(session, execution.analyzed())
    text = jvm.plan_json(plan)
    return text, _scan_names(plan, text), False


def _scan_names(plan: Any, text: str) -> list[str | None] | None:
    """Spark's node names of the file scans (``Scan parquet``), by leaf position: one small JVM
    call per scan, since the plan JSON leaves a scan's relation (and so its format) out."""
    if not any(cls + '"' in text for cls in _SCANS):
        return None
    leaves = plan.collectLeaves()
    names: list[str | None] = []
    for i in range(leaves.size()):
        leaf = leaves.apply(i)
        cls = leaf.getClass().getName()
        names.append(leaf.nodeName() if cls.endswith(_SCANS) else None)
    return names


def _stream_session(execution: Any) -> Any:
    """The session a query plans its batches with (it carries the checkpoint's settings)."""
    try:
        return execution.sparkSessionForStream()
    except Exception:  # older Spark: the query's own session
        return execution.sparkSession()


_AQE = "spark.sql.adaptive.enabled"
_INCREMENTAL_EXECUTION = (
    "org.apache.spark.sql.execution.streaming.IncrementalExecution",
    "org.apache.spark.sql.execution.streaming.runtime.IncrementalExecution",
)
#: Characters fetched per py4j call. py4j (up to 0.10.9.9, bundled with PySpark 4.0) answers
#: through an 8 KiB buffered writer without TCP_NODELAY, so a longer answer waits ~40 ms for a
#: delayed ACK (py4j issue #516); plan JSON comes in pieces that fit the buffer instead.
_CHUNK = 7500


class _Jvm:
    """What pytest-opid needs from the JVM of the active SparkContext, with the reflection
    looked up once per py4j gateway."""

    _cache: dict[int, _Jvm] = {}

    def __init__(self, gateway: Any) -> None:
        self.gateway = gateway
        self.jvm = gateway.jvm
        self._to_builder: Any = None
        self._incremental: tuple[Any, list[str]] | None = None

    @classmethod
    def get(cls) -> _Jvm:
        from pyspark import SparkContext

        sc = SparkContext._active_spark_context
        if sc is None:
            raise OpidError("no active SparkContext: the DataFrame's SparkSession was stopped")
        found = cls._cache.get(id(sc._gateway))
        if found is None or found.gateway is not sc._gateway:
            found = cls._cache[id(sc._gateway)] = cls(sc._gateway)
        return found

    def plan_json(self, plan: Any) -> str:
        """``plan.toJSON()``, kept in the JVM as a StringBuilder and fetched in pieces."""
        if self._to_builder is None:
            invoke = self.jvm.java.lang.invoke
            lookup = invoke.MethodHandles.publicLookup()
            tree = self.jvm.java.lang.Class.forName("org.apache.spark.sql.catalyst.trees.TreeNode")
            builder = self.jvm.java.lang.Class.forName("java.lang.StringBuilder")
            to_json = lookup.findVirtual(
                tree,
                "toJSON",
                invoke.MethodType.fromMethodDescriptorString("()Ljava/lang/String;", None),
            )
            new_builder = lookup.findConstructor(
                builder, invoke.MethodType.fromMethodDescriptorString("(Ljava/lang/String;)V", None)
            )
            self._to_builder = invoke.MethodHandles.filterReturnValue(to_json, new_builder)
        text = self._to_builder.invokeWithArguments(
            self.jvm.java.util.Collections.singletonList(plan)
        )
        size = text.length()
        parts = []
        start = 0
        while start < size:
            end = min(start + _CHUNK, size)
            part = text.substring(start, end)
            if end < size and part.endswith("?"):
                # A UTF-16 pair cut in two reaches Python as "?": fetch that char again.
                part = part[:-1]
                end -= 1
            parts.append(part)
            start = end
        return "".join(parts)

    def static_plan(self, session: Any, logical: Any) -> Any:
        """Plan ``logical`` again with adaptive execution off, restoring the setting after."""
        conf = session.conf()
        was = conf.get(_AQE)
        conf.set(_AQE, "false")
        try:
            mode = self.jvm.org.apache.spark.sql.execution.CommandExecutionMode.SKIP()
            return session.sessionState().executePlan(logical, mode).executedPlan()
        finally:
            conf.set(_AQE, was)

    def incremental_plan(self, session: Any, logical: Any, output_mode: Any) -> Any:
        """The physical plan Structured Streaming runs a batch with, as ``DataFrame.explain()``
        builds it for a streaming DataFrame: an ``IncrementalExecution`` with an unknown
        checkpoint, not the first batch, so nothing is written anywhere and no data is read."""
        java_class, kinds = self._incremental_execution()
        jvm = self.jvm
        package = java_class.getPackage().getName()
        mode = output_mode or jvm.org.apache.spark.sql.streaming.OutputMode.Append()
        args: list[Any] = []
        for kind in kinds:
            if kind.endswith(".SparkSession"):
                args.append(session)
            elif kind.endswith(".LogicalPlan"):
                args.append(logical)
            elif kind.endswith(".OutputMode"):
                args.append(mode)
            elif kind == "java.lang.String":
                args.append("<unknown>")  # the checkpoint location
            elif kind == "java.util.UUID":
                args.append(jvm.java.util.UUID.randomUUID())
            elif kind == "long":
                args.append(0)
            elif kind == "boolean":
                args.append(False)  # not the first batch: do not write state metadata
            elif kind == "scala.Option":
                args.append(jvm.scala.Option.empty())
            elif kind.endswith((".OffsetSeqMetadata", ".OffsetSeqMetadataBase")):
                # Spark 4.3 takes the base trait (in .checkpointing); its v1 case class fits.
                metadata = _java_class(jvm, kind.rsplit(".", 1)[0], "OffsetSeqMetadata")
                args.append(_offset_seq_metadata(metadata, session))
            elif kind.endswith(".WatermarkPropagator"):
                propagator = _java_class(jvm, kind.rsplit(".", 1)[0], "WatermarkPropagator")
                args.append(propagator.noop())
            elif kind == "scala.collection.mutable.Map":
                args.append(jvm.scala.collection.mutable.HashMap())
            else:  # scala.Enumeration$Value: the CommandExecutionMode
                args.append(jvm.org.apache.spark.sql.execution.CommandExecutionMode.ALL())
        execution = _java_class(jvm, package, "IncrementalExecution")(*args)
        return execution.executedPlan()

    def _incremental_execution(self) -> tuple[Any, list[str]]:
        if self._incremental is None:
            java_class = None
            for candidate in _INCREMENTAL_EXECUTION:
                try:
                    java_class = self.jvm.java.lang.Class.forName(candidate)
                    break
                except Exception:  # py4j wraps ClassNotFoundException
                    continue
            if java_class is None:
                raise OpidError("this Spark version has no IncrementalExecution pytest-opid knows")
            constructor = max(
                java_class.getConstructors(), key=lambda c: len(c.getParameterTypes())
            )
            kinds = [t.getName() for t in constructor.getParameterTypes()]
            known = (
                ".SparkSession", ".LogicalPlan", ".OutputMode", ".OffsetSeqMetadata",
                ".OffsetSeqMetadataBase",
                ".WatermarkPropagator", "java.lang.String", "java.util.UUID", "long",
                "boolean", "scala.Option", "scala.collection.mutable.Map",
                "scala.Enumeration$Value",
            )  # fmt: skip
            for kind in kinds:
                if not kind.endswith(known):
                    raise OpidError(
                        "cannot plan a streaming query on this Spark version: its "
                        f"IncrementalExecution takes a {kind} pytest-opid does not know"
                    )
            self._incremental = (java_class, kinds)
        return self._incremental


def _offset_seq_metadata(metadata: Any, session: Any) -> Any:
    """``OffsetSeqMetadata(0, 0, <the session's stateful confs>)``. Spark 4.3 records a conf the
    session leaves unset (``spark.sql.shuffle.partitions``) as null and then fails to parse it,
    so nulls are replaced with the conf's effective value (or dropped) through the JSON form."""
    captured = json.loads(metadata.apply(0, 0, session.conf()).json())
    conf = {}
    for key, value in (captured.get("conf") or {}).items():
        if value is None:
            try:
                value = session.conf().get(key)
            except Exception:  # py4j: no value and no default
                continue
        conf[key] = value
    captured["conf"] = conf
    return metadata.apply(json.dumps(captured))


def _java_class(jvm: Any, package: str, name: str) -> Any:
    target = jvm
    for part in package.split("."):
        target = getattr(target, part)
    return getattr(target, name)
