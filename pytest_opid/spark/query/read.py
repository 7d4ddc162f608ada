"""Reading plans from PySpark: the only code that touches the JVM (through py4j).

:func:`read_plan` returns Spark's physical plan as JSON plus the little the JSON leaves out,
with a fixed number of py4j calls whatever the plan's size; :mod:`pytest_opid.spark.query.graph`
converts it. For a streaming plan it also reads what Spark checks when a query restarts on a
checkpoint, without writing anything: per stateful operator the name its state metadata records
(``shortName``) and the key and value schema of every state store exactly as Spark would write
them to ``state/<n>/.../_metadata/schema`` (a fixed few py4j calls per store), and the sources
in the order Spark numbers them in the offset log. A Python transformWithState's column families
exist once its processor's ``init`` has declared them:
:mod:`pytest_opid.spark.transform_with_state` records the declarations in a child process and
they are replayed on the operator's own driver-side handle (no Python worker; Spark's pre-init
worker only where ``init`` cannot be recorded).
"""

from __future__ import annotations

from typing import Any

from pytest_opid.spark.query.endpoints import (
    SINK,
    is_writer,
    query_sink_rows,
    read_writer,
    source_rows,
)
from pytest_opid.spark.query.jvm import (
    CACHED,
    IN_SET,
    NULL_PROJECTIONS,
    Jvm,
    PlanNodes,
    PlanReading,
)
from pytest_opid.spark.query.start_checks import start_refusal

_ACCEPTED = (
    "a PySpark DataFrame (batch or streaming), DataStreamWriter or StreamingQuery of a classic "
    "SparkSession"
)


def read_plan(obj: Any) -> PlanReading:
    """The plan of ``obj`` (see :class:`PlanReading`)."""
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

    if is_writer(obj):
        jvm = Jvm.get()
        jdf = obj._df._jdf
        analyzed = jdf.queryExecution().analyzed()
        try:
            writing = read_writer(obj)
            refused = start_refusal(jvm.jvm, jdf.sparkSession(), analyzed, writing.output_mode)
            facts = writing.facts + (() if refused is None else (("refused", refused),))
            written = source_rows(jvm.jvm, analyzed, jdf.sparkSession()) + tuple(
                (SINK, f, v) for f, v in facts
            )
        except Exception:  # py4j: a writer this Spark version keeps differently
            reading = _streaming_reading(jvm, jdf.sparkSession(), analyzed, None)
            return reading  # as its DataFrame: no sink recorded (the verdict says so)
        reading = _streaming_reading(jvm, jdf.sparkSession(), analyzed, writing.output_mode)
        return reading._replace(output_mode_known=True, endpoints=written)
    if isinstance(obj, StreamingQuery):
        jvm = Jvm.get()
        execution = obj._jsq.streamingQuery()
        session = _stream_session(execution)
        analyzed = execution.analyzedPlan()
        reading = _streaming_reading(jvm, session, analyzed, execution.outputMode())
        rows: tuple[tuple[str, str, str], ...] | None
        try:
            rows = source_rows(jvm.jvm, analyzed, session) + query_sink_rows(execution)
        except Exception:  # py4j: a query this Spark version keeps differently
            rows = None
        return reading._replace(output_mode_known=True, endpoints=rows)
    if not isinstance(obj, DataFrame):
        hint = ""
        if module.startswith("pandas"):
            hint = "; a pandas DataFrame is not a Spark plan (spark.createDataFrame(pdf) makes one)"
        elif module.startswith("pyspark.pandas"):
            hint = "; convert a pandas-on-Spark DataFrame with .to_spark()"
        elif type(obj).__name__ == "RDD":
            hint = "; an RDD has no SQL plan (rdd.toDF() makes a DataFrame of it)"
        raise TypeError(f"pytest_opid.spark accepts {_ACCEPTED}; got {name}{hint}")
    jvm = Jvm.get()
    jdf = obj._jdf
    # The Python DataFrame holds its session's JVM object and (a cached property) its
    # RuntimeConfig: no round trip for them.
    session = getattr(getattr(obj, "sparkSession", None), "_jsparkSession", None)
    conf = getattr(getattr(getattr(obj, "sparkSession", None), "conf", None), "_jconf", None)
    direct = jvm.batch_reading(conf, jdf) if conf is not None else False
    if session is None:
        session = jdf.sparkSession()
    if direct is True or (direct is False and conf is None and jdf.isStreaming()):
        return _streaming_reading(jvm, session, jdf.queryExecution().analyzed(), None)
    plan = None
    if isinstance(direct, tuple):  # adaptive execution off: the executed plan, in one call
        text, leaves = jvm._json_and_leaves(direct[0])
        partitions = direct[1]
    else:
        plan, partitions = jvm.batch_plan(session, jdf.queryExecution(), conf)
        text, leaves = jvm.batch_json(plan)
    cached, in_set = CACHED in text, IN_SET in text
    if cached or in_set:
        # Part of the plan reads a cached DataFrame (this one's, or an equal sub-plan that
        # other code cached: Spark's CacheManager substitutes those when it plans): plan it
        # again as if nothing were cached, so the fingerprint does not depend on the session.
        # An InSet (Spark's OptimizeIn makes one of an IN list over 10 values) writes its
        # values as null in the JSON: plan again keeping IN lists, so the tree shows them.
        analyzed = jdf.queryExecution().analyzed()
        if cached:
            plan = jvm.uncached_plan(session, analyzed)
        else:
            plan = jvm.static_plan(session, analyzed, in_lists=True)
        text, leaves = jvm.batch_json(plan)
    if NULL_PROJECTIONS in text:  # Spark 3.5: an Expand's projections, one call per expression
        executed = plan if plan is not None else jdf.queryExecution().executedPlan()
        text = jvm.expand_projections(PlanNodes(jvm, executed, text))
    return PlanReading(text, leaves, False, shuffle_partitions=partitions)


def _streaming_reading(jvm: Jvm, session: Any, analyzed: Any, mode: Any) -> PlanReading:
    """A streaming plan as Structured Streaming runs a batch of it; planned again keeping IN
    lists where it holds an InSet, whose values the plan JSON leaves out (as for batch)."""
    reading = jvm.streaming_reading(
        jvm.incremental_plan(session, analyzed, mode), analyzed, session
    )
    if IN_SET not in reading.plan_json:
        return reading
    with jvm._planning(session, in_lists=True):
        plan = jvm.incremental_plan(session, analyzed, mode)
    return jvm.streaming_reading(plan, analyzed, session)


def _stream_session(execution: Any) -> Any:
    """The session a query plans its batches with (it carries the checkpoint's settings)."""
    try:
        return execution.sparkSessionForStream()
    except Exception:  # older Spark: the query's own session
        return execution.sparkSession()
