"""What a streaming query reads and writes, as its restart acts on it: the sink of a
``DataStreamWriter`` (``df.writeStream...`` before ``start()``, read from the JVM object's fields,
never started) and the options of its sources (from the analyzed plan's ``StreamingRelation``
leaves). Both become ``(endpoint, fact, value)`` rows of
:attr:`~pytest_opid.result.Fingerprint.endpoints`.

Spark's ``DataStreamWriter`` (``org.apache.spark.sql.classic.DataStreamWriter`` in Spark 4,
``org.apache.spark.sql.streaming.DataStreamWriter`` in 3.5) keeps what ``start()`` will use in
private fields: ``source`` (the format), ``outputMode``, ``trigger``, ``extraOptions`` (path,
checkpointLocation, queryName and the sink's options), ``partitioningColumns``,
``foreachWriter`` and ``foreachBatchWriter``. A Python ``foreachBatch`` function is a py4j
proxy there, whose object id finds the Python function in the gateway's pool, and is recorded
as a digest (:mod:`pytest_opid.spark.function_digest`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from pytest_opid.io.endpoint_values import safe_value
from pytest_opid.spark.data_sources import resolve_format
from pytest_opid.spark.function_digest import command_digest, digest_of
from pytest_opid.spark.query.batch_writes import batch_writes, write_facts
from pytest_opid.spark.query.python_offsets import pickled_source_class
from pytest_opid.text import without_userinfo

#: Options that are recorded as facts of their own, not under ``option``.
_OWN = frozenset({"path", "checkpointlocation", "queryname"})

#: A source's endpoint label, by its position in the offset log.
SOURCE = "source {}"

SINK = "sink"


class WriterReading(NamedTuple):
    """A DataStreamWriter read: the DataFrame it writes, its output mode (the JVM object, for
    planning) and the sink's facts."""

    frame: Any
    output_mode: Any
    facts: tuple[tuple[str, str], ...]


def is_writer(obj: Any) -> bool:
    """A classic PySpark ``DataStreamWriter``."""
    cls = type(obj)
    return cls.__name__ == "DataStreamWriter" and (cls.__module__ or "").startswith(
        "pyspark.sql.streaming"
    )


def _field(obj: Any, name: str) -> Any:
    field = obj.getClass().getDeclaredField(name)
    field.setAccessible(True)
    return field.get(obj)


def _scala_map(jvm: Any, value: Any) -> dict[str, str]:
    """A Scala or Java map of strings as a dict (``CaseInsensitiveMap``: its original keys;
    ``CaseInsensitiveStringMap``: its case-sensitive view)."""
    if value is None:
        return {}
    name = str(value.getClass().getSimpleName())
    if name == "CaseInsensitiveMap":
        value = value.originalMap()
    elif name == "CaseInsensitiveStringMap":
        value = value.asCaseSensitiveMap()
    if not jvm.java.util.Map._java_lang_class.isInstance(value):  # a Scala map
        try:  # Scala 2.13 (Spark 4)
            value = jvm.scala.jdk.javaapi.CollectionConverters.asJava(value)
        except Exception:  # py4j: Scala 2.12 (PySpark 3.5's build)
            value = jvm.scala.collection.JavaConverters.mapAsJavaMapConverter(value).asJava()
    return {str(k): str(v) for k, v in dict(value).items()}


def option_facts(options: dict[str, str]) -> list[tuple[str, str]]:
    """Every option the user set, sorted by key as Spark compares them (case-insensitively),
    each value as a fact that cannot carry a secret (:func:`~pytest_opid.io.endpoint_values.
    safe_value`: shown for the options known to be harmless, else a digest). Spark's own
    ``spark.redaction.regex`` (``secret|password|token|access[.]?key``) misses most
    credentials a connector takes: ``fs.azure.account.key.<account>``, a MongoDB URI's
    ``user:pass@``, a JDBC URL's ``;pwd=``, a bearer header, a private key."""
    return [
        (f"option {key}", safe_value(f"option {key}", options[key]))
        for key in sorted(options, key=lambda k: (k.lower(), k))
        if key.lower() not in _OWN
    ]


def read_writer(writer: Any) -> WriterReading:
    """The sink of an unstarted ``DataStreamWriter`` (see the module's docstring)."""
    jw = writer._jwrite
    jvm = writer._spark._jvm
    facts: list[tuple[str, str]] = []
    fmt = str(_field(jw, "source") or "")
    batch_writer = _field(jw, "foreachBatchWriter")
    row_writer = _field(jw, "foreachWriter")
    options = _scala_map(jvm, _field(jw, "extraOptions"))
    lowered = {k.lower(): v for k, v in options.items()}
    if batch_writer is not None:
        facts.append(("kind", "foreachBatch"))
        function = _batch_function(writer, jvm, batch_writer)
        facts.append(("function", _digest(function)))
        writes = batch_writes(function) if function is not None else None
        if writes is not None:
            facts += write_facts(writes)
    elif row_writer is not None:
        facts.append(("kind", "foreach"))
        facts.append(("function", _row_function(jvm, row_writer)))
    else:
        # one sink whatever name it was given (org.apache.spark.sql.parquet, a class name)
        sink = resolve_format(fmt)
        facts.append(("kind", sink.kind))
        facts.append(("format", sink.format))
    if "path" in lowered:
        facts.append(("path", without_userinfo(lowered["path"])))
    partitioning = _field(jw, "partitioningColumns")
    if partitioning is not None and partitioning.isDefined():
        columns = partitioning.get()
        facts.append(
            ("partitionBy", ", ".join(str(columns.apply(i)) for i in range(columns.size())))
        )
    mode = _field(jw, "outputMode")
    facts.append(("outputMode", str(mode.toString()).lower()))
    facts.append(("trigger", str(_field(jw, "trigger").toString())))
    if "queryname" in lowered:
        facts.append(("queryName", lowered["queryname"]))
    if "checkpointlocation" in lowered:
        facts.append(("checkpointLocation", without_userinfo(lowered["checkpointlocation"])))
    facts += option_facts(options)
    return WriterReading(writer._df, mode, tuple(facts))


def _digest(function: Any) -> str:
    """A foreachBatch function's digest (a JVM function named by its class, ``?`` where it
    could not be reached)."""
    if isinstance(function, str):
        return function
    try:
        return digest_of(function).fact
    except Exception:  # an object pytest-opid cannot read
        return "?"


def _batch_function(writer: Any, jvm: Any, batch_writer: Any) -> Any:
    """A Python foreachBatch function: the py4j proxy the Scala closure holds carries the id of
    the Python object (PySpark's ``ForeachBatchFunction``) in the gateway's pool; a JVM (Scala,
    Java) function is named by its class (a ``str``); ``?`` where it cannot be reached."""
    try:
        for f in batch_writer.getClass().getDeclaredFields():
            f.setAccessible(True)
            held = f.get(batch_writer)
            if held is None or not hasattr(held, "getClass"):
                continue
            if not jvm.java.lang.reflect.Proxy.isProxyClass(held.getClass()):
                continue
            handler = jvm.java.lang.reflect.Proxy.getInvocationHandler(held)
            object_id = str(_field(handler, "id"))
            python = writer._spark._sc._gateway.gateway_property.pool[object_id]
            return getattr(python, "func", python)
        return f"JVM {batch_writer.getClass().getName().split('$$')[0]}"
    except Exception:  # py4j or an object pytest-opid cannot reach
        return "?"


def _row_function(jvm: Any, row_writer: Any) -> str:
    """The digest of a Python ``foreach`` writer, from the pickled function
    ``PythonForeachWriter`` keeps (its ``func.command``)."""
    try:
        if row_writer.getClass().getSimpleName() != "PythonForeachWriter":
            return f"JVM {row_writer.getClass().getName()}"
        func = next(
            _field(row_writer, f.getName())
            for f in row_writer.getClass().getDeclaredFields()
            if f.getName().endswith("$$func") or f.getName() == "func"
        )
        command = func.command()
        if not isinstance(command, (bytes, bytearray)):
            tag = getattr(getattr(jvm.scala.reflect, "ClassTag$"), "MODULE$").Byte()
            command = command.toArray(tag)
        return command_digest(bytes(command)).fact
    except Exception:  # py4j or unpickling: code pytest-opid cannot reach
        return "?"


def source_rows(jvm: Any, analyzed: Any, session: Any = None) -> tuple[tuple[str, str, str], ...]:
    """The options of the query's sources in offset-log order (the streaming leaves of the
    analyzed plan, left to right, as :meth:`Jvm.sources` numbers them): a file source's
    format, path, schema and options (latestFirst, maxFileAge, cleanSource...), a V2 source's
    provider class and options (rate, Kafka, a Python data source), each value as a fact
    without a secret (:func:`option_facts`). A Python data source's offset layout (the keys
    of its reader's ``initialOffset()``, as Spark calls it when the query starts) is recorded
    where ``session`` finds its class."""
    leaves = analyzed.collectLeaves()
    rows: list[tuple[str, str, str]] = []
    position = 0
    for i in range(leaves.size()):
        leaf = leaves.apply(i)
        cls = leaf.getClass().getSimpleName()
        if cls not in ("StreamingRelation", "StreamingRelationV2"):
            continue
        label = SOURCE.format(position)
        position += 1
        facts: list[tuple[str, str]] = []
        if cls == "StreamingRelation":
            source = leaf.dataSource()
            name = str(source.className())
            facts.append(("format", name))
            options = _scala_map(jvm, source.options())
            if "path" in {k.lower() for k in options}:
                path = next(v for k, v in options.items() if k.lower() == "path")
                facts.append(("path", without_userinfo(path)))
            schema = source.userSpecifiedSchema()
            if schema.isDefined():
                facts.append(("schema", str(schema.get().simpleString())))
        else:
            facts.append(("format", str(leaf.sourceName())))
            provider = leaf.source()
            if provider.isDefined():
                facts.append(("class", str(provider.get().getClass().getName())))
            options = _scala_map(jvm, leaf.extraOptions())
            if "path" in {k.lower() for k in options}:
                path = next(v for k, v in options.items() if k.lower() == "path")
                facts.append(("path", without_userinfo(path)))
            python = (
                provider.isDefined()
                and provider.get().getClass().getSimpleName() == "PythonDataSourceV2"
            )
            if session is not None and python:
                facts += _python_source_facts(jvm, session, str(leaf.sourceName()), options)
        facts += option_facts(options)
        rows += [(label, fact, value) for fact, value in facts]
    return tuple(rows)


def _python_source_facts(
    jvm: Any, session: Any, name: str, options: dict[str, str]
) -> list[tuple[str, str]]:
    """A Python streaming data source's ``offset keys`` (the keys of its reader's
    ``initialOffset()``) and ``code`` (the digest of its class and the reader it makes): its
    class found in the session's data source manager (``UserDefinedPythonDataSource``, the
    pickled class ``spark.dataSource.register`` keeps), made with the query's options as
    Spark makes it. Nothing where it cannot be (the user's code failing included: it runs at
    start anyway)."""
    command = pickled_source_class(jvm, session, name)
    if command is None:
        return []
    try:
        from pyspark.serializers import CPickleSerializer  # lazy: pyspark is optional

        loaded = CPickleSerializer().loads(command)
        cls = loaded[0] if isinstance(loaded, tuple) else loaded
        code = digest_of(cls).fact
    except Exception:  # the user's code, or a Spark without Python data sources
        return []
    facts: list[tuple[str, str]] = []
    try:
        source = cls(dict(options))
        schema = source.schema()
        try:
            reader = source.streamReader(schema)
        except NotImplementedError:
            reader = source.simpleStreamReader(schema)
        offset = reader.initialOffset()
        if isinstance(offset, dict):
            facts.append(("offset keys", ", ".join(sorted(map(str, offset)))))
    except Exception:  # the user's code: it runs at start anyway
        pass
    return [*facts, ("code", code)]


#: A started query's sink, by the simple name of its class: the kind recorded.
_SINK_KINDS = {
    "FileStreamSink": "file",
    "ForeachBatchSink": "foreachBatch",
    "MemorySink": "memory",
    "ConsoleTable$": "console",
    "ConsoleTable": "console",
    "ForeachWriterTable": "foreach",
    "NoopTable$": "noop",
    "KafkaTable": "kafka",
}


def query_sink_rows(execution: Any) -> tuple[tuple[str, str, str], ...]:
    """What a started query's ``StreamExecution`` keeps of its sink: its kind (by the sink's
    class), a file sink's path and format, output mode, trigger, name and checkpoint. A
    foreachBatch function is not reachable from a started query: recorded as ``?``."""
    sink = execution.sink()
    name = str(sink.getClass().getSimpleName())
    kind = _SINK_KINDS.get(name, str(sink.getClass().getName()))
    facts: list[tuple[str, str]] = [("kind", kind)]
    if kind == "file":
        file_format = str(_field(sink, "fileFormat").getClass().getSimpleName())
        fmt = file_format.removesuffix("FileFormat").lower()
        facts.append(("format", {"jsonfile": "json", "textfile": "text"}.get(fmt, fmt)))
        facts.append(("path", without_userinfo(str(_field(sink, "path")))))
        columns = _field(sink, "partitionColumnNames")
        if columns.size():
            facts.append(
                ("partitionBy", ", ".join(str(columns.apply(i)) for i in range(columns.size())))
            )
    elif kind in ("foreachBatch", "foreach"):
        facts.append(("function", "?"))
    else:
        facts.append(("format", kind))
    facts.append(("outputMode", str(_field(execution, "outputMode").toString()).lower()))
    facts.append(("trigger", str(execution.trigger().toString())))
    query_name = execution.name()
    if query_name is not None:
        facts.append(("queryName", str(query_name)))
    facts.append(("checkpointLocation", without_userinfo(str(execution.resolvedCheckpointRoot()))))
    return tuple((SINK, fact, value) for fact, value in facts)
