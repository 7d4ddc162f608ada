"""Reading plans from PySpark: the only code that touches the JVM (through py4j).

:func:`read_plan` returns Spark's physical plan as JSON plus the little the JSON leaves out,
with a fixed number of py4j calls whatever the plan's size; :mod:`pytest_opid.spark.plan`
converts it. For a streaming plan it also reads what Spark checks when a query restarts on a
checkpoint, without writing anything: per stateful operator the name its state metadata records
(``shortName``) and the key and value schema of every state store exactly as Spark would write
them to ``state/<n>/.../_metadata/schema`` (a fixed few py4j calls per store), and the sources
in the order Spark numbers them in the offset log. A Python transformWithState's column families
exist once its processor's ``init`` has declared them: :mod:`pytest_opid.spark.tws` records the
declarations in this interpreter and they are replayed on the operator's own driver-side handle
(no Python worker; Spark's pre-init worker only where ``init`` cannot be recorded).
"""

from __future__ import annotations

import contextlib
import json
import re
import weakref
from collections.abc import Iterator
from typing import Any, NamedTuple

from pytest_opid.errors import OpidError
from pytest_opid.result import StateStore
from pytest_opid.spark.plan import PROPERTIES_STORE, STATEFUL_OPERATORS
from pytest_opid.spark.tws import (
    ProcessorRecord,
    StateCall,
    processor_from_command,
    record_processor,
)
from pytest_opid.spark.versions import installed_line

__all__ = ["PlanReading", "StateReading", "read_plan"]


class StateReading(NamedTuple):
    """One stateful operator as Spark files its state: its ``shortName`` and its stores; for a
    Python transformWithState, what its processor's ``init`` declared (:mod:`.tws`)."""

    operator_name: str
    stores: tuple[StateStore, ...]
    processor: ProcessorRecord | None = None
    #: transformWithState's state encoding (``unsaferow``, ``avro``): decides how values evolve
    encoding: str | None = None


class PlanReading(NamedTuple):
    """What :func:`read_plan` reads: the plan JSON, the file scans' node names, whether the
    plan is streaming, and for a streaming plan its stateful operators (in Spark's numbering
    order, ``None`` where they could not be read) and sources (offset log order)."""

    plan_json: str
    leaves: list[str | None] | None
    streaming: bool
    state: tuple[StateReading, ...] | None = None
    sources: tuple[str, ...] | None = None
    #: a StreamingQuery's plan: its output mode is the query's; a streaming DataFrame's is
    #: planned as append, but the mode is chosen later, at writeStream
    output_mode_known: bool = False
    #: what the plan JSON leaves out of some nodes, by their position in it: a watermark's
    #: delay, a stream-stream join's condition (Spark's own text, expression ids removed)
    node_texts: dict[int, str] | None = None
    #: a batch plan's session ``spark.sql.shuffle.partitions`` (``None``: not a number)
    shuffle_partitions: int | None = None


# -- reading plans from PySpark (the only code that touches the JVM) -------------------------

_ACCEPTED = "a PySpark DataFrame (batch or streaming) or StreamingQuery of a classic SparkSession"
_SCANS = (".FileSourceScanExec", ".BatchScanExec")


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

    if isinstance(obj, StreamingQuery):
        jvm = _Jvm.get()
        execution = obj._jsq.streamingQuery()
        session = _stream_session(execution)
        analyzed = execution.analyzedPlan()
        reading = _streaming_reading(jvm, session, analyzed, execution.outputMode())
        return reading._replace(output_mode_known=True)
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
    # The Python DataFrame holds its session's JVM object and (a cached property) its
    # RuntimeConfig: no round trip for them.
    session = getattr(getattr(obj, "sparkSession", None), "_jsparkSession", None)
    conf = getattr(getattr(getattr(obj, "sparkSession", None), "conf", None), "_jconf", None)
    direct = jvm.batch_reading(conf, jdf) if conf is not None else False
    if session is None:
        session = jdf.sparkSession()
    if direct is True or (direct is False and conf is None and jdf.isStreaming()):
        return _streaming_reading(jvm, session, jdf.queryExecution().analyzed(), None)
    if isinstance(direct, tuple):  # adaptive execution off: the executed plan, in one call
        text, leaves = jvm._json_and_leaves(direct[0])
        partitions = direct[1]
    else:
        plan, partitions = jvm.batch_plan(session, jdf.queryExecution(), conf)
        text, leaves = jvm.batch_json(plan)
    cached, in_set = _CACHED in text, _IN_SET in text
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
    return PlanReading(text, leaves, False, shuffle_partitions=partitions)


def _streaming_reading(jvm: _Jvm, session: Any, analyzed: Any, mode: Any) -> PlanReading:
    """A streaming plan as Structured Streaming runs a batch of it; planned again keeping IN
    lists where it holds an InSet, whose values the plan JSON leaves out (as for batch)."""
    reading = jvm.streaming_reading(
        jvm.incremental_plan(session, analyzed, mode), analyzed, session
    )
    if _IN_SET not in reading.plan_json:
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


_AQE = "spark.sql.adaptive.enabled"
_SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
#: An expression id in Spark's text of an expression (``ts#12``, ``id#3L``).
_EXPR_ID = re.compile(r"#\d+L?")
#: A cached relation in a plan's JSON (``InMemoryTableScanExec`` and its relation).
_CACHED = "InMemoryTableScan"
#: An InSet's class name's end in a plan's JSON (compacted or not); its values are written
#: as null.
_IN_SET = '.InSet"'
#: Past this many values Spark's OptimizeIn makes an IN list an InSet (default 10).
_IN_SET_THRESHOLD = "spark.sql.optimizer.inSetConversionThreshold"
#: Spark 4.3 widens every state schema to nullable when this is on (its default, and what a new
#: checkpoint pins); the encoding decides transformWithState's column family schemas.
_ALWAYS_NULLABLE = "spark.sql.streaming.statefulOperator.alwaysNullableOutput.enabled"
_ENCODING = "spark.sql.streaming.stateStore.encodingFormat"
_DEFAULT = "default"  # StateStoreId.DEFAULT_STORE_NAME
_WIDENED = frozenset(
    {
        "StateStoreSaveExec",
        "SessionWindowStateStoreSaveExec",
        "StreamingDeduplicateExec",
        "StreamingDeduplicateWithinWatermarkExec",
        "FlatMapGroupsWithStateExec",
        "FlatMapGroupsInPandasWithStateExec",
        "StreamingSymmetricHashJoinExec",
    }
)
#: The session window operator's private state manager, by the package Spark files the class
#: in: ``operators.stateful`` from 4.0 on, ``execution.streaming`` in 3.5.
_SESSION_MANAGERS = (
    "org$apache$spark$sql$execution$streaming$operators$stateful$"
    "SessionWindowStateStoreSaveExec$$stateManager",
    "org$apache$spark$sql$execution$streaming$SessionWindowStateStoreSaveExec$$stateManager",
)
_TWS_PACKAGE = "org.apache.spark.sql.execution.streaming.operators.stateful.transformwithstate"
_INCREMENTAL_EXECUTION = (
    "org.apache.spark.sql.execution.streaming.IncrementalExecution",
    "org.apache.spark.sql.execution.streaming.runtime.IncrementalExecution",
)
#: Characters fetched per py4j call where Nagle's algorithm could not be switched off (see
#: :meth:`_Jvm._no_delay`): py4j's Java side (up to 0.10.9.9, bundled with PySpark 4.x) answers
#: through an 8 KiB buffered writer, so a longer answer goes out in two writes and the second
#: waits ~40 ms for a delayed ACK (py4j issue #516). Pieces that fit the buffer avoid it.
_CHUNK = 7500
#: The piece size where Nagle is off: the whole text in one answer.
_WHOLE = 2**31 - 1
#: Between the leaves' texts in :meth:`_Jvm.batch_json`, and before them; JSON text never
#: holds either raw (it escapes control characters).
_LEAF_SEPARATOR = "\u0000"
_LEAVES_MARK = "\u0001"
#: After the shuffle partitions in :meth:`_Jvm.batch_reading`.
_CONF_MARK = "\u0002"
#: :meth:`_Jvm.batch_reading`'s whole answer for a streaming Dataset.
_STREAMING_MARK = "\u0003"
#: Cuts each leaf's text to its first two words (``FileScan parquet``), in the JVM.
_LEAF_HEAD = ("([^\\u0000 ]+(?: [^\\u0000 \\[]+)?)[^\\u0000]*", "$1")
#: What :meth:`_Jvm.batch_json` shortens in a batch plan's JSON, as (text, replacement), none
#: of which the batch reading looks at: an expression id's class name, and the packages of
#: Spark's expressions and operators (``x.`` stays, so class names still end ``.FilterExec``).
#: Plain text, replaced with ``String.replace``: measured, regular expressions (also cutting
#: qualifiers, types and JVM ids) cost more time in the JVM than the shorter text saved.
_COMPACTED = (
    ('"product-class":"org.apache.spark.sql.catalyst.expressions.ExprId",', ""),
    ("org.apache.spark.sql.catalyst.expressions.", "x."),
    ("org.apache.spark.sql.execution.", "x."),
)


class _Names:
    """``gateway.jvm`` with what its names resolve to kept. py4j asks the JVM, one round trip
    each, what ``org``, ``org.apache``, ... ``OutputMode`` and a class's static method are, on
    every attribute access: some eighty round trips per fingerprint. A package, a class or a
    static method stays what it is for the gateway's life, so each is asked once; a static
    field's value (``MODULE$``) and names starting with ``_`` are read each time, as before."""

    __slots__ = ("_found", "_target")

    def __init__(self, target: Any) -> None:
        self._target = target
        self._found: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            return getattr(self._target, name)
        found = self._found.get(name)
        if found is None:
            from py4j.java_gateway import JavaClass, JavaMember, JavaPackage, JVMView

            value = getattr(self._target, name)
            if isinstance(value, JavaMember):
                found = value
            elif isinstance(value, (JavaClass, JavaPackage, JVMView)):
                found = _Names(value)
            else:  # a static field's value: read again next time
                return value
            self._found[name] = found
        return found

    def __call__(self, *args: Any) -> Any:
        return self._target(*args)


class _Jvm:
    """What pytest-opid needs from the JVM of the active SparkContext, with the reflection
    looked up once per py4j gateway."""

    _cache: dict[int, _Jvm] = {}

    def __init__(self, gateway: Any) -> None:
        self.gateway = gateway
        self.jvm = _Names(gateway.jvm)
        self._to_json: Any = None
        self._batch: Any = None
        self._direct: Any = None
        self._more: Any = None
        self._piece = _CHUNK
        self._quick: weakref.WeakSet[Any] = weakref.WeakSet()
        self._incremental: tuple[Any, list[str]] | None = None
        self._identity: Any = None
        self._methods: dict[tuple[str, str], Any] = {}

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

    def batch_json(self, plan: Any) -> tuple[str, list[str | None] | None]:
        """A batch plan's JSON, compacted in the JVM (:data:`_COMPACTED`), and Spark's node
        names of its file scans (``Scan parquet``) by leaf position, which the JSON leaves out
        (a scan's relation, and so its format). One call makes both: the JSON, then a mark,
        then the leaves' texts joined and cut to their first two words (a scan's starts
        ``FileScan parquet``), so that the answer stays short however wide the tables."""
        if self._batch is None:
            self._build_batch()
        self._new_connection()
        return self._json_and_leaves(self._fetch(self._batch.apply(plan)))

    def _build_batch(self) -> None:
        """The handles of :meth:`plan_json`, :meth:`batch_json` and :meth:`batch_reading`,
        composed once of Spark's and Java's own methods, each behind a ``java.util.function``
        proxy: py4j calls its ``apply`` in one round trip, where ``invokeWithArguments`` needed
        another to make the argument list (and a third to release it)."""
        handles = self.jvm.java.lang.invoke.MethodHandles
        tree = "org.apache.spark.sql.catalyst.trees.TreeNode"
        to_string = "(Ljava/lang/String;)Ljava/lang/String;"
        self._piece = _WHOLE if self._no_delay() else _CHUNK
        kept = self._pieces()
        to_json = self._virtual(tree, "toJSON", "()Ljava/lang/String;")
        self._to_json = self._function(handles.filterReturnValue(to_json, kept))
        replace = self._virtual(
            "java.lang.String",
            "replace",
            "(Ljava/lang/CharSequence;Ljava/lang/CharSequence;)Ljava/lang/String;",
        )
        for text, replacement in _COMPACTED:
            to_json = handles.filterReturnValue(to_json, self._bound(replace, text, replacement))
        concat = self._virtual("java.lang.String", "concat", to_string)
        seq = self._seq_class()
        heads = self._virtual(tree, "collectLeaves", f"()L{seq.replace('.', '/')};")
        for step in (
            self._bound(
                self._virtual(seq, "mkString", to_string),
                _LEAF_SEPARATOR,
            ),
            self._bound(
                self._virtual(
                    "java.lang.String",
                    "replaceAll",
                    "(Ljava/lang/String;Ljava/lang/String;)Ljava/lang/String;",
                ),
                *_LEAF_HEAD,
            ),
            concat.bindTo(_LEAVES_MARK),
        ):
            heads = handles.filterReturnValue(heads, step)
        both = handles.filterArguments(concat, 0, self._array("MethodHandle", to_json, heads))
        one = handles.permuteArguments(  # the plan, to both arguments
            both,
            self._kind(f"(L{tree.replace('.', '/')};)Ljava/lang/String;"),
            self.gateway.new_array(self.gateway.jvm.int, 2),
        )
        self._batch = self._function(handles.filterReturnValue(one, kept))
        self._direct = self._function(
            handles.filterReturnValue(self._direct_handle(one, concat), kept), "BiFunction"
        )

    def _pieces(self) -> Any:
        """(String) -> String: the text whole where Nagle is off (:meth:`_no_delay`);
        otherwise its first :data:`_CHUNK` characters, keeping the text in a ThreadLocal of
        this gateway for :attr:`_more` (start -> String) to answer the next pieces. Per JVM
        thread, and PySpark pins each Python thread to its own, so fingerprints in two threads
        do not mix; each thread keeps its last text only."""
        handles = self.jvm.java.lang.invoke.MethodHandles
        if self._piece == _WHOLE:
            return handles.identity(self._class("java.lang.String"))
        local = self.jvm.java.lang.ThreadLocal()
        keep = (
            self._virtual("java.lang.ThreadLocal", "set", "(Ljava/lang/Object;)V")
            .bindTo(local)
            .asType(self._kind("(Ljava/lang/String;)V"))
        )
        # commons-lang3 (on Spark's class path: TreeNode uses it) cuts leniently past the end.
        cut = self._lookup().findStatic(
            self._class("org.apache.commons.lang3.StringUtils"),
            "substring",
            self._kind("(Ljava/lang/String;II)Ljava/lang/String;"),
        )
        first = self._bound(cut, 0, _CHUNK)
        kept = self._virtual("java.lang.ThreadLocal", "get", "()Ljava/lang/Object;").bindTo(local)
        more = handles.collectArguments(  # (start, end): the kept text from start to end
            cut, 0, kept.asType(self._kind("()Ljava/lang/String;"))
        )
        add = self._lookup().findStatic(
            self._class("java.lang.Math"), "addExact", self._kind("(II)I")
        )
        plus = self._bound(add, _CHUNK)
        more = handles.filterArguments(more, 1, self._array("MethodHandle", plus))
        self._more = self._function(
            handles.permuteArguments(  # start, to both arguments
                more,
                self._kind("(I)Ljava/lang/String;"),
                self.gateway.new_array(self.gateway.jvm.int, 2),
            )
        )
        return handles.foldArguments(first, keep)

    def _no_delay(self) -> bool:
        """Switch Nagle's algorithm off (``TCP_NODELAY``) on the Java side of this gateway's
        py4j connections, as py4j itself does from its pull request #592 on (not in 0.10.9.9,
        which PySpark 4.x bundles): then a long answer comes at once (issue #516). A private
        field of ``py4j.GatewayServer`` lists the connections; ``False`` where it cannot be
        read (another py4j, a gateway without one), and plan text then comes in pieces. Also
        ``False`` without PySpark's pinned threads (``PYSPARK_PIN_THREAD=false``): py4j's
        pool may open a connection at any call there, and only a thread's own connection is
        seen being new (:meth:`_new_connection`)."""
        client: Any = getattr(self.gateway, "_gateway_client", None)
        if not hasattr(client, "get_thread_connection"):
            return False
        connection = self._thread_connection()
        try:
            server = self.gateway.java_gateway_server
            field = self._class("py4j.GatewayServer").getDeclaredField("connections")
            field.setAccessible(True)
            for each in list(field.get(server)):
                socket = each.getSocket()
                if not socket.getTcpNoDelay():
                    socket.setTcpNoDelay(True)
        except Exception:  # py4j's or the JVM's error: keep the pieces
            return False
        if connection is not None:
            self._quick.add(connection)
        return True

    def _new_connection(self) -> None:
        """:meth:`_no_delay` again when this Python thread talks to the JVM over a connection
        not seen before (PySpark gives each thread its own); a dict lookup otherwise."""
        if self._piece != _WHOLE:
            return
        connection = self._thread_connection()
        if connection is not None and connection not in self._quick:
            self._no_delay()

    def _thread_connection(self) -> Any:
        """The py4j connection of this Python thread (pinned threads), else ``None``."""
        client = getattr(self.gateway, "_gateway_client", None)
        return getattr(client, "get_thread_connection", lambda: None)()

    def _function(self, handle: Any, kind: str = "Function") -> Any:
        """``handle`` as a ``java.util.function`` interface (``Function``, ``BiFunction``)."""
        return self.jvm.java.lang.invoke.MethodHandleProxies.asInterfaceInstance(
            self._class(f"java.util.function.{kind}"), handle
        )

    def batch_reading(self, conf: Any, dataset: Any) -> tuple[str, int | None] | bool:
        """In one call, for a batch Dataset where adaptive execution is off: the session's
        shuffle partitions and :meth:`batch_json` of the executed plan. ``True`` for a
        streaming Dataset, ``False`` where adaptive execution is on (the plan is then made
        without it: :meth:`batch_plan`)."""
        if self._batch is None:
            self._build_batch()
        self._new_connection()
        text = self._fetch(self._direct.apply(conf, dataset))
        if text == _STREAMING_MARK:
            return True
        partitions, _, rest = text.partition(_CONF_MARK)
        if not rest:
            return False
        number = int(partitions) if partitions.isdigit() else None
        return rest, number

    def _direct_handle(self, json_of: Any, concat: Any) -> Any:
        """(RuntimeConfig, Dataset) -> String: for a streaming Dataset a mark; for a batch
        one the shuffle partitions, a mark, then, where ``spark.sql.adaptive.enabled`` is
        ``false``, :meth:`batch_json`'s text of the executed plan (nothing otherwise)."""
        handles = self.jvm.java.lang.invoke.MethodHandles
        conf = "org.apache.spark.sql.RuntimeConfig"
        execution = "org.apache.spark.sql.execution.QueryExecution"
        dataset = self._dataset_class()
        get = self._virtual(conf, "get", "(Ljava/lang/String;)Ljava/lang/String;")
        marked = handles.filterReturnValue(
            self._bound(get, _SHUFFLE_PARTITIONS), self._bound(concat, _CONF_MARK)
        )
        json_of = json_of.asType(
            self._kind("(Lorg/apache/spark/sql/execution/SparkPlan;)Ljava/lang/String;")
        )
        planned = handles.filterReturnValue(
            self._virtual(
                execution, "executedPlan", "()Lorg/apache/spark/sql/execution/SparkPlan;"
            ),
            json_of,
        )
        with_json = handles.filterArguments(  # (conf, execution)
            concat, 0, self._array("MethodHandle", marked, planned)
        )
        without_json = handles.dropArguments(
            marked, 1, self._array("Class", self._class(execution))
        )
        equals = self._virtual("java.lang.Object", "equals", "(Ljava/lang/Object;)Z")
        off = handles.filterReturnValue(
            self._bound(get, _AQE),
            equals.bindTo("false").asType(self._kind("(Ljava/lang/String;)Z")),
        )
        off = handles.dropArguments(off, 1, self._array("Class", self._class(execution)))
        chosen = handles.guardWithTest(off, with_json, without_json)
        # (conf, Dataset): a streaming Dataset answers the mark alone, a batch one the above
        # of its QueryExecution.
        execution_of = self._virtual(
            dataset, "queryExecution", "()Lorg/apache/spark/sql/execution/QueryExecution;"
        )
        batch = handles.filterArguments(chosen, 1, self._array("MethodHandle", execution_of))
        streaming = handles.dropArguments(
            self._virtual(dataset, "isStreaming", "()Z"),
            0,
            self._array("Class", self._class(conf)),
        )
        mark = handles.dropArguments(
            handles.constant(self._class("java.lang.String"), _STREAMING_MARK),
            0,
            self._array("Class", self._class(conf), self._class(dataset)),
        )
        return handles.guardWithTest(streaming, mark, batch)

    # MethodHandle plumbing ------------------------------------------------------------------

    def _lookup(self) -> Any:
        return self.jvm.java.lang.invoke.MethodHandles.publicLookup()

    def _class(self, name: str) -> Any:
        return self.jvm.java.lang.Class.forName(name)

    def _kind(self, descriptor: str) -> Any:
        return self.jvm.java.lang.invoke.MethodType.fromMethodDescriptorString(descriptor, None)

    def _seq_class(self) -> str:
        """Scala's ``Seq`` as Spark's methods return it: ``scala.collection.immutable.Seq``
        in Scala 2.13 (Spark 4), ``scala.collection.Seq`` in 2.12 (PySpark 3.5's build)."""
        version = str(self.jvm.scala.util.Properties.versionNumberString())
        if version.startswith("2.12"):
            return "scala.collection.Seq"
        return "scala.collection.immutable.Seq"

    def _dataset_class(self) -> str:
        """The JVM class of a PySpark DataFrame: ``classic.Dataset`` from Spark 4.0 on (where
        ``sql.Dataset`` became the API shared with Connect), ``sql.Dataset`` in 3.5."""
        for name in ("org.apache.spark.sql.classic.Dataset", "org.apache.spark.sql.Dataset"):
            try:
                self._class(name)
            except Exception:  # py4j's ClassNotFoundException: an older Spark
                continue
            return name
        return "org.apache.spark.sql.Dataset"

    def _virtual(self, owner: str, name: str, descriptor: str) -> Any:
        """The handle of ``owner``'s public method ``name`` (a JVM descriptor)."""
        return self._lookup().findVirtual(self._class(owner), name, self._kind(descriptor))

    def _array(self, kind: str, *items: Any) -> Any:
        """A Java array of ``java.lang.Class`` or ``java.lang.invoke.MethodHandle``."""
        element = (
            self.jvm.java.lang.Class if kind == "Class" else self.jvm.java.lang.invoke.MethodHandle
        )
        array = self.gateway.new_array(element, len(items))
        for i, item in enumerate(items):
            array[i] = item
        return array

    def _json_and_leaves(self, text: str) -> tuple[str, list[str | None] | None]:
        """:meth:`batch_json`'s text split into the JSON and the scans' node names."""
        text, _, tail = text.partition(_LEAVES_MARK)
        if not any(cls + '"' in text for cls in _SCANS):
            return text, None
        names: list[str | None] = []
        for head in tail.split(_LEAF_SEPARATOR):
            words = head.split(" ")
            if words[0] == "FileScan" and len(words) > 1:
                names.append(f"Scan {words[1]}")
            elif words[0] == "BatchScan" and len(words) > 1:
                names.append(f"BatchScan {words[1]}")
            else:
                names.append(None)
        return text, names

    def _bound(self, handle: Any, *values: str | int) -> Any:
        """``handle`` with its arguments after the first (a method's receiver) fixed to
        ``values`` (py4j passes an int as an Integer)."""
        arguments = self.gateway.new_array(self.jvm.java.lang.Object, len(values))
        for i, value in enumerate(values):
            arguments[i] = value
        return self.jvm.java.lang.invoke.MethodHandles.insertArguments(handle, 1, arguments)

    def plan_json(self, plan: Any) -> str:
        """``plan.toJSON()``, in one answer or in pieces (:meth:`_pieces`)."""
        if self._batch is None:
            self._build_batch()
        self._new_connection()
        return self._fetch(self._to_json.apply(plan))

    def _fetch(self, first: str) -> str:
        """The text kept by :meth:`_pieces`, from its ``first`` piece on: a piece shorter
        than :data:`_CHUNK` Java chars is the last."""
        if self._piece == _WHOLE or (len(first) < _CHUNK and first.isascii()):
            return first
        parts = []
        part, start = first, 0
        while True:
            size = _java_length(part)
            last = size < _CHUNK
            if not last and part.endswith("?"):
                # A UTF-16 pair cut in two reaches Python as "?": fetch that char again.
                part = part[:-1]
                size -= 1
            parts.append(part)
            if last:
                return "".join(parts)
            start += size
            part = self._more.apply(start)

    def batch_plan(self, session: Any, execution: Any, conf: Any = None) -> tuple[Any, int | None]:
        """A batch DataFrame's static plan (:meth:`static_plan`) and the session's shuffle
        partitions (``conf``: the session's RuntimeConfig, where the caller has it). Planned
        once: with adaptive execution on, the DataFrame's own ``executedPlan()`` would be an
        adaptive plan to be planned again without it."""
        conf = conf if conf is not None else session.conf()
        partitions = conf.get(_SHUFFLE_PARTITIONS)
        number = int(partitions) if str(partitions).isdigit() else None
        if conf.get(_AQE) == "false":
            return execution.executedPlan(), number
        return self.static_plan(session, execution.analyzed()), number

    def static_plan(self, session: Any, logical: Any, *, in_lists: bool = False) -> Any:
        """Plan ``logical`` again with adaptive execution off (``in_lists``: keeping IN lists,
        :data:`_IN_SET_THRESHOLD`), restoring the settings after."""
        with self._planning(session, in_lists=in_lists):
            mode = self.jvm.org.apache.spark.sql.execution.CommandExecutionMode.SKIP()
            return session.sessionState().executePlan(logical, mode).executedPlan()

    def uncached_plan(self, session: Any, analyzed: Any) -> Any:
        """The executed plan of ``analyzed`` planned without the cache: the steps of Spark's
        ``QueryExecution`` (optimize, plan, prepare for execution) minus ``withCachedData``,
        with adaptive execution off and IN lists kept as in :meth:`static_plan`."""
        with self._planning(session, in_lists=True):
            state = session.sessionState()
            optimized = state.optimizer().execute(analyzed.clone())
            answer = self.jvm.org.apache.spark.sql.catalyst.plans.logical.ReturnAnswer(optimized)
            physical = state.planner().plan(answer).next()
            execution = self.jvm.org.apache.spark.sql.execution.QueryExecution
            return execution.prepareExecutedPlan(session, physical)

    @contextlib.contextmanager
    def _planning(self, session: Any, *, in_lists: bool) -> Iterator[None]:
        """The session's confs for planning a fingerprint's own copy of a plan, put back after:
        adaptive execution off, and (``in_lists``) IN lists never made InSets, whose values
        Spark's plan JSON leaves out (the physical plan is otherwise the same)."""
        conf = session.conf()
        changes = {_AQE: "false", **({_IN_SET_THRESHOLD: str(2**31 - 1)} if in_lists else {})}
        was = {key: conf.getOption(key) for key in changes}
        for key, value in changes.items():
            conf.set(key, value)
        try:
            yield
        finally:
            for key, value in was.items():
                if value.isDefined():
                    conf.set(key, value.get())
                else:
                    conf.unset(key)

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

    # Streaming: state and sources -----------------------------------------------------------

    def streaming_reading(self, plan: Any, analyzed: Any, session: Any) -> PlanReading:
        """The plan JSON of a streaming plan, its stateful operators and its sources."""
        text = self.plan_json(plan)
        try:
            state: tuple[StateReading, ...] | None = self.state_readings(plan, text, session)
        except Exception:  # py4j: a Spark version whose operators pytest-opid cannot read
            state = None
        try:
            sources: tuple[str, ...] | None = self.sources(analyzed, session)
        except Exception:  # py4j: a plan whose sources pytest-opid cannot read
            sources = None
        try:
            texts: dict[int, str] | None = self.node_texts(plan, text)
        except Exception:  # py4j: a node this Spark version builds differently
            texts = None
        return PlanReading(text, None, True, state, sources, node_texts=texts)

    def node_texts(self, plan: Any, text: str) -> dict[int, str]:
        """``EventTimeWatermarkExec``'s delay and ``StreamingSymmetricHashJoinExec``'s join
        condition, which ``toJSON`` writes as null (a CalendarInterval, a case class of
        options): one JVM call per such node."""
        nodes = json.loads(text)
        classes = [str(n.get("class", "")).rsplit(".", 1)[-1] for n in nodes]
        wanted = [
            i
            for i, cls in enumerate(classes)
            if cls in ("EventTimeWatermarkExec", "StreamingSymmetricHashJoinExec")
        ]
        if not wanted:
            return {}
        everything = plan.collect(self._everything())
        out = {}
        for i in wanted:
            node = everything.apply(i)
            if classes[i] == "EventTimeWatermarkExec":
                out[i] = str(node.delay().toString())
            else:
                full = node.condition().full()
                found = str(full.get().sql()) if full.isDefined() else "none"
                out[i] = _EXPR_ID.sub("", found)
        return out

    def state_readings(self, plan: Any, text: str, session: Any) -> tuple[StateReading, ...]:
        """Every stateful operator of ``plan`` in Spark's numbering (pre-order) with its state
        stores' schemas as ``validateAndMaybeEvolveStateSchema`` builds them, computed from the
        same accessors but never handed to the schema checker, which would write them."""
        nodes = json.loads(text)
        classes = [str(n.get("class", "")).rsplit(".", 1)[-1] for n in nodes]
        wanted = [i for i, cls in enumerate(classes) if cls in STATEFUL_OPERATORS]
        if not wanted:
            return ()
        # SparkPlan.collect with an identity function lists the nodes in the pre-order of
        # TreeNode.toJSON, so the JSON's positions find the operators: one call for them all.
        everything = plan.collect(self._everything())
        if everything.size() != len(nodes):
            raise OpidError("the plan JSON and the plan disagree")
        conf = session.conf()
        widen = conf.get(_ALWAYS_NULLABLE, "true").lower() == "true"
        encoding = conf.get(_ENCODING, "unsaferow").lower()
        avro = encoding == "avro"
        out = []
        for i in wanted:
            node = everything.apply(i)
            try:
                stores, record = self._stores(node, classes[i], widen, avro)
            except _NotInspected as exc:  # its state variables are unknown: the check says so
                stores, record = (), exc.record
            except Exception:  # py4j: an operator this Spark version builds differently
                stores, record = (), None  # unknown: restore checks say they cannot check them
            tws = classes[i].startswith("TransformWithState")
            out.append(StateReading(node.shortName(), stores, record, encoding if tws else None))
        return tuple(out)

    def _everything(self) -> Any:
        """A Scala PartialFunction defined everywhere that returns its argument."""
        if self._identity is None:
            identity = getattr(self.jvm.scala.Predef, "$conforms")()
            companion = getattr(getattr(self.jvm.scala, "PartialFunction$"), "MODULE$")
            # Scala 2.13 (Spark 4) has fromFunction; 2.12 (PySpark 3.5's build) only apply,
            # which 2.13 deprecates.
            lift = getattr(companion, "fromFunction", None) or companion.apply
            try:
                self._identity = lift(identity)
            except Exception:  # py4j: no fromFunction in Scala 2.12
                self._identity = companion.apply(identity)
        return self._identity

    def _stores(
        self, node: Any, cls: str, widen: bool, avro: bool
    ) -> tuple[tuple[StateStore, ...], ProcessorRecord | None]:
        """The state stores of one stateful operator with their (key, value) schemas, as the
        operator's ``validateAndMaybeEvolveStateSchema`` (Spark 4.x) builds them, and for a
        Python transformWithState what its processor's ``init`` declared."""
        jvm = self.jvm
        attributes = _from_attributes(jvm)
        pairs: list[tuple[str, Any, Any]] = []  # (store or store/column family, key, value)
        properties = None
        record: ProcessorRecord | None = None
        # The schemas below are the raw ones; Spark widens them as the operator's
        # validateAndMaybeEvolveStateSchema does (the global limit's are fixed, and column
        # family schemas come out of getColFamilySchemas widened already).
        # Spark 3.5 writes them as they are (no validateAndMaybeEvolveStateSchema).
        widen = widen and cls in _WIDENED and installed_line().at_least(4, 0)
        if cls == "StateStoreSaveExec":
            value = node.stateManager().getStateValueSchema()
            pairs.append((_DEFAULT, attributes(node.keyExpressions()), value))
        elif cls == "SessionWindowStateStoreSaveExec":
            manager = _session_manager(node)
            pairs.append((_DEFAULT, manager.getStateKeySchema(), manager.getStateValueSchema()))
        elif cls in ("StreamingDeduplicateExec", "StreamingDeduplicateWithinWatermarkExec"):
            pairs.append((_DEFAULT, attributes(node.keyExpressions()), node.schemaForValueRow()))
        elif cls in ("FlatMapGroupsWithStateExec", "FlatMapGroupsInPandasWithStateExec"):
            value = node.stateManager().stateSchema()
            pairs.append((_DEFAULT, attributes(node.groupingAttributes()), value))
        elif cls == "StreamingGlobalLimitExec":
            key = self._private(node, "keySchema")
            pairs.append((_DEFAULT, key, self._private(node, "valueSchema")))
        elif cls == "StreamingSymmetricHashJoinExec":
            version = node.stateFormatVersion()
            if version >= 3:  # one store, a column family per former store
                widen = False
                pairs += self._column_families(node.getColFamilySchemas(False))
            else:
                helper, manager = _join_classes(jvm)
                if not _has_method(jvm, manager, "getSchemaForStateStores"):  # Spark 3.5
                    pairs += _join_stores(jvm, node, attributes, version)
                    helper = None
                for side, child, keys in (
                    ("LeftSide", node.left(), node.leftKeys()),
                    ("RightSide", node.right(), node.rightKeys()),
                ) if helper is not None else ():
                    module = getattr(helper, f"StreamingSymmetricHashJoinHelper${side}$")
                    schemas = manager.getSchemaForStateStores(
                        getattr(module, "MODULE$"), child.output(), keys, version
                    ).toList()
                    for k in range(schemas.size()):
                        entry = schemas.apply(k)
                        pair = entry._2()
                        pairs.append((entry._1(), pair._1(), pair._2()))
        else:  # transformWithState: a column family per state variable (and internal ones)
            if cls != "TransformWithStateExec":
                record = self._declare(node)  # the Python processor's init() declares them
            pairs += self._column_families(node.getColFamilySchemas(avro))
            infos = node.getStateVariableInfos().values().toList()
            properties_class = _java_class(
                jvm, _TWS_PACKAGE, "TransformWithStateOperatorProperties"
            )
            properties = properties_class(
                node.timeMode().toString(), node.outputMode().toString(), infos
            ).json()
        stores = [
            StateStore(
                name,
                (key.asNullable() if widen else key).json(),
                (value.asNullable() if widen else value).json(),
            )
            for name, key, value in pairs
        ]
        if properties is not None:
            stores.append(StateStore(PROPERTIES_STORE, None, properties))
        return tuple(stores), record

    def _column_families(self, schemas: Any) -> list[tuple[str, Any, Any]]:
        """``Map[String, StateStoreColFamilySchema]`` as (``default/<family>``, key, value)."""
        families = schemas.values().toList()
        out = []
        for k in range(families.size()):
            family = families.apply(k)
            out.append(
                (f"{_DEFAULT}/{family.colFamilyName()}", family.keySchema(), family.valueSchema())
            )
        return sorted(out, key=lambda entry: entry[0])

    def _declare(self, node: Any) -> ProcessorRecord:
        """Declare a Python transformWithState's state variables on the operator's driver-side
        handle, as Spark's pre-init runner does before it validates the state schema: the
        processor's ``init`` runs here with a recording handle (:func:`.tws.record_processor`)
        and its calls are replayed on the JVM handle (:meth:`_replay`). When ``init`` cannot be
        recorded, Spark's own pre-init worker (a Python process) runs it instead; when that
        fails too, :class:`_NotInspected` carries why."""
        try:
            function = self._private(node, "pythonFunction")
            tag = getattr(getattr(self.jvm.scala.reflect, "ClassTag$"), "MODULE$").Byte()
            processor, _ = processor_from_command(bytes(function.command().toArray(tag)))
        except Exception as exc:  # py4j or unpickling: a processor pytest-opid cannot reach
            record = ProcessorRecord(
                "?", None, f"could not read the stateful processor ({type(exc).__name__})"
            )
        else:
            record = record_processor(processor)
        if record.calls is not None:
            try:
                self._replay(node, record.calls)
                return record
            except Exception as exc:  # py4j: Spark refused a declaration
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
                reason = f"could not inspect {record.processor_class}: Spark refused its init(): "
                record = ProcessorRecord(record.processor_class, None, reason + first)
        try:
            self._pre_init(node)
        except Exception as exc:  # py4j: the worker's Python lacks pyspark, or init() failed
            worker = _python_error(exc)
            raise _NotInspected(
                ProcessorRecord(
                    record.processor_class,
                    None,
                    f"{record.reason}; Spark's pre-init Python worker failed too ({worker})",
                )
            ) from None
        return ProcessorRecord(record.processor_class, None)  # declared by Spark's worker

    def _replay(self, node: Any, calls: tuple[StateCall, ...]) -> None:
        """``init``'s calls on the operator's ``DriverStatefulProcessorHandleImpl``, as
        ``TransformWithStateInPySparkStateServer`` makes them for the pre-init worker."""
        jvm = self.jvm
        handle = self._private(node, "driverProcessorHandle")
        states = getattr(
            _java_class(jvm, _TWS_PACKAGE + ".statefulprocessor", "StatefulProcessorHandleState$"),
            "MODULE$",
        )
        handle.setHandleState(states.PRE_INIT())
        ttl_config = jvm.org.apache.spark.sql.streaming.TTLConfig
        row = jvm.org.apache.spark.sql.Encoders.row
        for call in calls:
            if call.method == "deleteIfExists":
                handle.deleteIfExists(call.name)
                continue
            if call.ttl_ms is None:
                ttl = ttl_config.NONE()
            else:
                ttl = ttl_config(jvm.java.time.Duration.ofMillis(call.ttl_ms))
            value = row(self._struct(call.schema, call.schema_is_json))
            if call.method == "getValueState":
                handle.getValueState(call.name, value, ttl)
            elif call.method == "getListState":
                handle.getListState(call.name, value, ttl)
            else:
                key = row(self._struct(call.user_key_schema, call.user_key_is_json))
                handle.getMapState(call.name, key, value, ttl)

    def _struct(self, text: str | None, is_json: bool) -> Any:
        """A schema as the state server reads it: ``StructType`` JSON, or a DDL string parsed
        by ``CatalystSqlParser.parseTableSchema`` (what PySpark's client asks it for)."""
        if is_json:
            return self.jvm.org.apache.spark.sql.types.DataType.fromJson(text)
        parser = getattr(self.jvm.org.apache.spark.sql.catalyst.parser, "CatalystSqlParser$")
        return getattr(parser, "MODULE$").parseTableSchema(text)

    def _pre_init(self, node: Any) -> None:
        """Run the Python stateful processor's ``init()`` on the driver as Spark does before
        it validates the state schema (``TransformWithStateInPySparkExec``): it fills the
        operator's driver-side handle with the state variables, and writes nothing."""
        runner_class = _java_class(
            self.jvm,
            "org.apache.spark.sql.execution.python.streaming",
            "TransformWithStateInPySparkPythonPreInitRunner",
        )
        runner = runner_class(
            self._private(node, "pythonFunction"),
            "pyspark.sql.streaming.transform_with_state_driver_worker",
            self._private(node, "groupingKeySchema"),
            self._private(node, "driverProcessorHandle"),
        )
        module = getattr(
            self.jvm.org.apache.spark.sql.execution.python.streaming,
            "TransformWithStateInPySparkExec$",
        )
        getattr(module, "MODULE$").runPreInitRunner(runner)

    def _private(self, node: Any, method: str) -> Any:
        """A private, argument-less method of ``node``'s class, through Java reflection."""
        cls = node.getClass()
        key = (cls.getName(), method)
        found = self._methods.get(key)
        if found is None:
            found = cls.getDeclaredMethod(
                method, self.gateway.new_array(self.jvm.java.lang.Class, 0)
            )
            found.setAccessible(True)
            self._methods[key] = found
        return found.invoke(node, self.gateway.new_array(self.jvm.java.lang.Object, 0))

    def sources(self, analyzed: Any, session: Any) -> tuple[str, ...]:
        """The query's sources in the order Spark numbers them (``sources/<i>``, the offset
        log's positions): the streaming leaves of the analyzed plan, left to right. A file
        source is ``FileSource <format> <qualified path>``, any other its name in Spark
        (``rate-micro-batch``, ``kafka``); a source named with ``.name()`` (source evolution)
        is prefixed with ``@<name> ``."""
        leaves = analyzed.collectLeaves()
        out = []
        hadoop_conf = None
        for i in range(leaves.size()):
            leaf = leaves.apply(i)
            cls = leaf.getClass().getSimpleName()
            if cls not in ("StreamingRelation", "StreamingRelationV2"):
                continue  # a static table joined to the stream
            text = leaf.sourceName()
            if cls == "StreamingRelation" and text.startswith("FileSource[") and text.endswith("]"):
                if hadoop_conf is None:
                    hadoop_conf = session.sessionState().newHadoopConf()
                path = self.jvm.org.apache.hadoop.fs.Path(text[len("FileSource[") : -1])
                qualified = path.getFileSystem(hadoop_conf).makeQualified(path).toString()
                fmt = "".join(leaf.dataSource().className().split()) or "?"
                text = f"FileSource {fmt} {qualified}"
            try:
                named = leaf.sourceIdentifyingName().nameOpt()
                name = named.get() if named.isDefined() else None
            except Exception:  # py4j: Spark before source naming (4.2)
                name = None
            out.append(f"@{name} {text}" if name else text)
        return tuple(out)

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


class _NotInspected(Exception):
    """A Python transformWithState whose state variables could not be declared."""

    def __init__(self, record: ProcessorRecord) -> None:
        super().__init__(record.reason)
        self.record = record


_PYTHON_ERROR = re.compile(r"(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception): .*")


def _java_length(text: str) -> int:
    """``text``'s length in the JVM: UTF-16 code units (a char past U+FFFF is two)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _python_error(exc: Exception) -> str:
    """The last line of a Python worker's error as py4j relays it, else the exception's name."""
    for line in reversed(str(exc).splitlines()):
        found = _PYTHON_ERROR.match(line.strip())
        if found:
            return found.group(0)[:200]
    return type(exc).__name__


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


def _from_attributes(jvm: Any) -> Any:
    """Attributes -> StructType: ``DataTypeUtils.fromAttributes`` (Spark 4), else 3.5's
    ``StructType.fromAttributes``."""
    if _is_class(jvm, "org.apache.spark.sql.catalyst.types.DataTypeUtils"):
        return jvm.org.apache.spark.sql.catalyst.types.DataTypeUtils.fromAttributes
    return jvm.org.apache.spark.sql.types.StructType.fromAttributes


def _session_manager(node: Any) -> Any:
    for name in _SESSION_MANAGERS:
        try:
            return getattr(node, name)()
        except Exception:  # py4j: no such method in this Spark's build
            continue
    raise OpidError("the session window operator's state manager is not reachable")


def _join_classes(jvm: Any) -> tuple[Any, Any]:
    """The stream-stream join's helper package and ``SymmetricHashJoinStateManager``: under
    ``operators.stateful.join`` from Spark 4.0 on; in 3.5 the helper is in
    ``execution.streaming`` and the manager in ``execution.streaming.state``."""
    joins = "org.apache.spark.sql.execution.streaming.operators.stateful.join"
    if _is_class(jvm, joins + ".SymmetricHashJoinStateManager"):
        package = jvm.org.apache.spark.sql.execution.streaming.operators.stateful.join
        return package, package.SymmetricHashJoinStateManager
    streaming = jvm.org.apache.spark.sql.execution.streaming
    return streaming, streaming.state.SymmetricHashJoinStateManager


def _join_stores(jvm: Any, node: Any, attributes: Any, version: int) -> list[tuple[str, Any, Any]]:
    """A stream-stream join's four stores as Spark 3.5's ``SymmetricHashJoinStateManager``
    builds their schemas (3.5 has no ``getSchemaForStateStores``): per side, keyToNumValues
    (the join keys as ``field<i>`` -> ``value`` long) and keyWithIndexToValue (the keys and an
    ``index`` long -> the side's input row, and from state format 2 on a ``matched`` flag)."""
    types = jvm.org.apache.spark.sql.types
    long_type = types.DataTypes.LongType
    out = []
    for side, child, keys in (
        ("left", node.left(), node.leftKeys()),
        ("right", node.right(), node.rightKeys()),
    ):
        key = types.StructType()
        for i in range(keys.size()):
            expression = keys.apply(i)
            key = key.add(f"field{i}", expression.dataType(), expression.nullable())
        value = attributes(child.output())
        if version >= 2:
            value = value.add("matched", types.DataTypes.BooleanType)
        out.append((f"{side}-keyToNumValues", key, types.StructType().add("value", long_type)))
        out.append((f"{side}-keyWithIndexToValue", key.add("index", long_type), value))
    return out


def _has_method(jvm: Any, java_class: Any, name: str) -> bool:
    """Whether a py4j ``JavaClass`` has a public method ``name`` (py4j makes any attribute
    up, so ``hasattr`` cannot tell)."""
    found = jvm.java.lang.Class.forName(java_class._fqn)
    return any(method.getName() == name for method in found.getMethods())


def _is_class(jvm: Any, name: str) -> bool:
    try:
        jvm.java.lang.Class.forName(name)
    except Exception:  # py4j's ClassNotFoundException
        return False
    return True


def _java_class(jvm: Any, package: str, name: str) -> Any:
    target = jvm
    for part in package.split("."):
        target = getattr(target, part)
    return getattr(target, name)
