"""The py4j side of reading a plan: a plan's JSON is long (hundreds of KiB for a TPC-DS query)
and py4j answers in 8 KiB writes, so this module switches Nagle's algorithm off on py4j's
connections, binds Spark's methods once per gateway as MethodHandles, and fetches the JSON (with
the few facts it leaves out) in as few calls as its length allows."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from pytest_opid.spark.vocabulary import (
    AQE,
    SHUFFLE_PARTITIONS,
)

#: Characters fetched per py4j call where Nagle's algorithm could not be switched off (see
#: :meth:`Jvm._no_delay`): py4j's Java side (up to 0.10.9.9, bundled with PySpark 4.x) answers
#: through an 8 KiB buffered writer, so a longer answer goes out in two writes and the second
#: waits ~40 ms for a delayed ACK (py4j issue #516). Pieces that fit the buffer avoid it.
_CHUNK = 7500


#: The piece size where Nagle is off: the whole text in one answer.
WHOLE = 2**31 - 1


#: Between the leaves' texts in :meth:`Jvm.batch_json`, and before them; JSON text never
#: holds either raw (it escapes control characters).
_LEAF_SEPARATOR = "\u0000"


_LEAVES_MARK = "\u0001"


#: After the shuffle partitions in :meth:`Jvm.batch_reading`.
_CONF_MARK = "\u0002"


#: :meth:`Jvm.batch_reading`'s whole answer for a streaming Dataset.
_STREAMING_MARK = "\u0003"


#: Cuts each leaf's text to its first two words (``FileScan parquet``), in the JVM.
_LEAF_HEAD = ("([^\\u0000 ]+(?: [^\\u0000 \\[]+)?)[^\\u0000]*", "$1")


#: What :meth:`Jvm.batch_json` shortens in a batch plan's JSON, as (text, replacement), none
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


def _java_length(text: str) -> int:
    """``text``'s length in the JVM: UTF-16 code units (a char past U+FFFF is two)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def has_java_method(jvm: Any, java_class: Any, name: str) -> bool:
    """Whether a py4j ``JavaClass`` has a public method ``name`` (py4j makes any attribute
    up, so ``hasattr`` cannot tell)."""
    found = jvm.java.lang.Class.forName(java_class._fqn)
    return any(method.getName() == name for method in found.getMethods())


def is_java_class(jvm: Any, name: str) -> bool:
    try:
        jvm.java.lang.Class.forName(name)
    except Exception:  # py4j's ClassNotFoundException
        return False
    return True


def find_java_class(jvm: Any, package: str, name: str) -> Any:
    target = jvm
    for part in package.split("."):
        target = getattr(target, part)
    return getattr(target, name)


SCAN_CLASSES = (".FileSourceScanExec", ".BatchScanExec")


class Gateway:
    """The py4j side of reading a plan: one connection per thread with Nagle's algorithm
    off, MethodHandles bound once per gateway, and a plan's JSON fetched in as few calls as its
    length allows."""

    def __init__(self, gateway: Any) -> None:
        self.gateway = gateway
        self.jvm = _Names(gateway.jvm)
        self._to_json: Any = None
        self._batch: Any = None
        self._direct: Any = None
        self._more: Any = None
        self._piece = _CHUNK
        self._quick: weakref.WeakSet[Any] = weakref.WeakSet()
        self._incremental: tuple[Any, list[str], str] | None = None
        #: Scala singletons and class lookups that do not change in a JVM, by name
        self._constants: dict[str, Any] = {}
        self._identity: Any = None
        self._methods: dict[tuple[str, str], Any] = {}

    def constant(self, name: str, make: Callable[[], Any]) -> Any:
        """A JVM object that does not change while the JVM lives (a Scala singleton, a
        static method), made by ``make`` once per gateway."""
        if name not in self._constants:
            self._constants[name] = make()
        return self._constants[name]

    def call_private(self, node: Any, method: str) -> Any:
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
        self._piece = WHOLE if self._no_delay() else _CHUNK
        kept = self._pieces()
        to_json = self._virtual(tree, "toJSON", "()Ljava/lang/String;")
        replace = self._virtual(
            "java.lang.String",
            "replace",
            "(Ljava/lang/CharSequence;Ljava/lang/CharSequence;)Ljava/lang/String;",
        )
        for text, replacement in _COMPACTED:
            to_json = handles.filterReturnValue(to_json, self._bound(replace, text, replacement))
        self._to_json = self._function(handles.filterReturnValue(to_json, kept))
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
        if self._piece == WHOLE:
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
        if self._piece != WHOLE:
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
            self._bound(get, SHUFFLE_PARTITIONS), self._bound(concat, _CONF_MARK)
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
            self._bound(get, AQE),
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
        if not any(cls + '"' in text for cls in SCAN_CLASSES):
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
        """``plan.toJSON()`` compacted as :meth:`batch_json`'s (a streaming plan's JSON is a
        third shorter, and sent and parsed faster), in one answer or in pieces
        (:meth:`_pieces`)."""
        if self._batch is None:
            self._build_batch()
        self._new_connection()
        return self._fetch(self._to_json.apply(plan))

    def _fetch(self, first: str) -> str:
        """The text kept by :meth:`_pieces`, from its ``first`` piece on: a piece shorter
        than :data:`_CHUNK` Java chars is the last."""
        if self._piece == WHOLE or (len(first) < _CHUNK and first.isascii()):
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


def command_bytes(jvm: Any, function: Any) -> bytes:
    """The pickled Python code of a ``PythonFunction`` (``command``): a ``byte[]`` in some
    Spark lines, a Scala ``Seq[Byte]`` in others."""
    command = function.command()
    if not isinstance(command, (bytes, bytearray)):
        tag = getattr(getattr(jvm.scala.reflect, "ClassTag$"), "MODULE$").Byte()
        command = command.toArray(tag)
    return bytes(command)
