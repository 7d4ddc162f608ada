"""What pytest-opid asks the JVM of the active SparkContext, on top of :mod:`gateway
<pytest_opid.spark.query.gateway>`: the physical plan Spark would run (batch, or the incremental
plan of a streaming query's next batch, planned without running it), and for a streaming query
the state each stateful operator would open (its ``shortName``, every store's key and value
schema as Spark writes them to ``state/<n>``) and its sources in offset-log order."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from typing import Any, NamedTuple

from pytest_opid.errors import OpidError
from pytest_opid.result import UNKNOWN, StateStore
from pytest_opid.spark.function_digest import command_digest
from pytest_opid.spark.query.gateway import (
    Gateway,
    command_bytes,
    find_java_class,
)
from pytest_opid.spark.query.processor_handle import NotInspected
from pytest_opid.spark.query.state_schemas import store_schemas
from pytest_opid.spark.transform_with_state import (
    ProcessorRecord,
)
from pytest_opid.spark.vocabulary import (
    ALWAYS_NULLABLE,
    AQE,
    ENCODING,
    IN_SET_THRESHOLD,
    SHUFFLE_PARTITIONS,
    STATEFUL_OPERATORS,
)


class StateReading(NamedTuple):
    """One stateful operator as Spark files its state: its ``shortName`` and its stores; for a
    Python transformWithState, what its processor's ``init`` declared
    (:mod:`pytest_opid.spark.transform_with_state`)."""

    operator_name: str
    stores: tuple[StateStore, ...]
    processor: ProcessorRecord | None = None
    #: transformWithState's state encoding (``unsaferow``, ``avro``): decides how values evolve
    encoding: str | None = None
    #: the digest of the Python code that updates the state (applyInPandasWithState's
    #: function, a transformWithState processor) as a meaning fact's value; ``None``: no
    #: Python code (a Scala or Java function)
    function: str | None = None


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
    #: a DataStreamWriter's or StreamingQuery's sink and sources as ``(endpoint, fact,
    #: value)`` rows (:mod:`pytest_opid.spark.query.endpoints`); ``None`` for a DataFrame
    endpoints: tuple[tuple[str, str, str], ...] | None = None


#: An expression id in Spark's text of an expression (``ts#12``, ``id#3L``).
_EXPR_ID = re.compile(r"#\d+L?")


#: transformWithState operators whose processor is Python code.
_PYTHON_TRANSFORM_WITH_STATE = ("TransformWithStateInPandasExec", "TransformWithStateInPySparkExec")


#: A cached relation in a plan's JSON (``InMemoryTableScanExec`` and its relation).
CACHED = "InMemoryTableScan"


#: An InSet's class name's end in a plan's JSON (compacted or not); its values are written
#: as null.
IN_SET = '.InSet"'

#: An ``ExpandExec`` in Spark 3.5's plan JSON: its ``TreeNode.toJSON`` cannot write a list of
#: lists of expressions and writes the projections as null (Spark 4 writes them).
NULL_PROJECTIONS = '"projections":null'


_INCREMENTAL_EXECUTION = (
    "org.apache.spark.sql.execution.streaming.IncrementalExecution",
    "org.apache.spark.sql.execution.streaming.runtime.IncrementalExecution",
)


class Jvm(Gateway):
    """What pytest-opid needs from the JVM of the active SparkContext, with the reflection
    looked up once per py4j gateway."""

    _cache: dict[int, Jvm] = {}

    @classmethod
    def get(cls) -> Jvm:
        from pyspark import SparkContext

        sc = SparkContext._active_spark_context
        if sc is None:
            raise OpidError("no active SparkContext: the DataFrame's SparkSession was stopped")
        found = cls._cache.get(id(sc._gateway))
        if found is None or found.gateway is not sc._gateway:
            found = cls._cache[id(sc._gateway)] = cls(sc._gateway)
        return found

    def batch_plan(self, session: Any, execution: Any, conf: Any = None) -> tuple[Any, int | None]:
        """A batch DataFrame's static plan (:meth:`static_plan`) and the session's shuffle
        partitions (``conf``: the session's RuntimeConfig, where the caller has it). Planned
        once: with adaptive execution on, the DataFrame's own ``executedPlan()`` would be an
        adaptive plan to be planned again without it."""
        conf = conf if conf is not None else session.conf()
        partitions = conf.get(SHUFFLE_PARTITIONS)
        number = int(partitions) if str(partitions).isdigit() else None
        if conf.get(AQE) == "false":
            return execution.executedPlan(), number
        return self.static_plan(session, execution.analyzed()), number

    def static_plan(self, session: Any, logical: Any, *, in_lists: bool = False) -> Any:
        """Plan ``logical`` again with adaptive execution off (``in_lists``: keeping IN lists,
        :data:`IN_SET_THRESHOLD`), restoring the settings after."""
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
        changes = {AQE: "false", **({IN_SET_THRESHOLD: str(2**31 - 1)} if in_lists else {})}
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
        _, kinds, package = self._incremental_execution()
        jvm = self.jvm
        constant = self.constant
        mode = output_mode or constant(
            "append", jvm.org.apache.spark.sql.streaming.OutputMode.Append
        )
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
                # The query's id and run id: explain() draws new ones; nothing runs here, so
                # one drawn per JVM serves every plan (a py4j call less each).
                args.append(constant("uuid", jvm.java.util.UUID.randomUUID))
            elif kind == "long":
                args.append(0)
            elif kind == "boolean":
                args.append(False)  # not the first batch: do not write state metadata
            elif kind == "scala.Option":
                args.append(constant("none", jvm.scala.Option.empty))
            elif kind.endswith((".OffsetSeqMetadata", ".OffsetSeqMetadataBase")):
                # Spark 4.3 takes the base trait (in .checkpointing); its v1 case class fits.
                metadata = find_java_class(jvm, kind.rsplit(".", 1)[0], "OffsetSeqMetadata")
                args.append(_offset_seq_metadata(metadata, session))
            elif kind.endswith(".WatermarkPropagator"):
                propagator = find_java_class(jvm, kind.rsplit(".", 1)[0], "WatermarkPropagator")
                args.append(constant("noop", propagator.noop))
            elif kind == "scala.collection.mutable.Map":
                args.append(jvm.scala.collection.mutable.HashMap())
            else:  # scala.Enumeration$Value: the CommandExecutionMode
                args.append(
                    constant("all", jvm.org.apache.spark.sql.execution.CommandExecutionMode.ALL)
                )
        execution = find_java_class(jvm, package, "IncrementalExecution")(*args)
        return execution.executedPlan()

    # Streaming: state and sources -----------------------------------------------------------

    def streaming_reading(self, plan: Any, analyzed: Any, session: Any) -> PlanReading:
        """The plan JSON of a streaming plan, its stateful operators and its sources."""
        text = self.plan_json(plan)
        nodes = PlanNodes(self, plan, text)
        if NULL_PROJECTIONS in text:
            text = self.expand_projections(nodes)
        try:
            state: tuple[StateReading, ...] | None = self.state_readings(nodes, session)
        except Exception:  # py4j: a Spark version whose operators pytest-opid cannot read
            state = None
        try:
            sources: tuple[str, ...] | None = self.sources(analyzed, session)
        except Exception:  # py4j: a plan whose sources pytest-opid cannot read
            sources = None
        try:
            texts: dict[int, str] | None = self.node_texts(nodes)
        except Exception:  # py4j: a node this Spark version builds differently
            texts = None
        return PlanReading(text, None, True, state, sources, node_texts=texts)

    def expand_projections(self, nodes: PlanNodes) -> str:
        """The plan's JSON with every ``ExpandExec``'s projections, which Spark 3.5 writes as
        null (:data:`NULL_PROJECTIONS`), read from the node and written as Spark 4 does: a list
        per projection of each expression's ``toJSON`` (``nodes`` is changed to match). Without
        them a ROLLUP, a CUBE, a distinct rewrite or a sliding window all read ``Expand []``."""
        changed = False
        for i, node in enumerate(nodes.nodes):
            if nodes.classes[i] == "ExpandExec" and node.get("projections") is None:
                found = nodes.node(i).projections()
                rows = [found.apply(r) for r in range(found.size())]
                node["projections"] = [
                    [json.loads(row.apply(c).toJSON()) for c in range(row.size())] for row in rows
                ]
                changed = True
        return json.dumps(nodes.nodes) if changed else nodes.text

    def node_texts(self, nodes: PlanNodes) -> dict[int, str]:
        """``EventTimeWatermarkExec``'s delay and ``StreamingSymmetricHashJoinExec``'s join
        condition, which ``toJSON`` writes as null (a CalendarInterval, a case class of
        options): one JVM call per such node."""
        out = {}
        for i, cls in enumerate(nodes.classes):
            if cls == "EventTimeWatermarkExec":
                out[i] = str(nodes.node(i).delay().toString())
            elif cls == "StreamingSymmetricHashJoinExec":
                full = nodes.node(i).condition().full()
                found = str(full.get().sql()) if full.isDefined() else "none"
                out[i] = _EXPR_ID.sub("", found)
        return out

    def state_readings(self, nodes: PlanNodes, session: Any) -> tuple[StateReading, ...]:
        """Every stateful operator of the plan in Spark's numbering (pre-order) with its state
        stores' schemas as ``validateAndMaybeEvolveStateSchema`` builds them, computed from the
        same accessors but never handed to the schema checker, which would write them."""
        classes = nodes.classes
        wanted = [i for i, cls in enumerate(classes) if cls in STATEFUL_OPERATORS]
        if not wanted:
            return ()
        conf = session.conf()
        widen = conf.get(ALWAYS_NULLABLE, "true").lower() == "true"
        encoding = conf.get(ENCODING, "unsaferow").lower()
        avro = encoding == "avro"
        out = []
        for i in wanted:
            node = nodes.node(i)
            try:
                stores, record = store_schemas(self, node, classes[i], widen, avro)
            except NotInspected as exc:  # its state variables are unknown: the check says so
                stores, record = (), exc.record
            except Exception:  # py4j: an operator this Spark version builds differently
                stores, record = (), None  # unknown: restore checks say they cannot check them
            tws = classes[i].startswith("TransformWithState")
            function = self._function_digest(node, classes[i])
            out.append(
                StateReading(node.shortName(), stores, record, encoding if tws else None, function)
            )
        return tuple(out)

    def _function_digest(self, node: Any, cls: str) -> str | None:
        """The digest of the Python code that updates the operator's state
        (:mod:`pytest_opid.spark.function_digest`), read from the pickled function Spark
        keeps (``PythonFunction.command``); UNKNOWN where it cannot be read or unpickled."""
        try:
            if cls == "FlatMapGroupsInPandasWithStateExec":
                function = node.functionExpr().func()
            elif cls in _PYTHON_TRANSFORM_WITH_STATE:
                function = self.call_private(node, "pythonFunction")
            else:
                return None  # flatMapGroupsWithState and Scala transformWithState: JVM code
            return command_digest(command_bytes(self.jvm, function)).fact
        except Exception:  # py4j or unpickling: code pytest-opid cannot reach
            return UNKNOWN

    def everything(self) -> Any:
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

    def _incremental_execution(self) -> tuple[Any, list[str], str]:
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
            self._incremental = (java_class, kinds, java_class.getPackage().getName())
        return self._incremental


class PlanNodes:
    """A plan's JSON nodes, parsed once, and the JVM node at a JSON position: the readers of
    projections, state and node texts share one ``SparkPlan.collect``, made where first asked."""

    def __init__(self, jvm: Jvm, plan: Any, text: str) -> None:
        self._jvm = jvm
        self._plan = plan
        self.text = text
        self.nodes = json.loads(text)
        self.classes = [str(n.get("class", "")).rsplit(".", 1)[-1] for n in self.nodes]
        self._everything: Any = None

    def node(self, i: int) -> Any:
        # SparkPlan.collect with an identity function lists the nodes in the pre-order of
        # TreeNode.toJSON, so the JSON's positions find them: one call for them all.
        if self._everything is None:
            everything = self._plan.collect(self._jvm.everything())
            if everything.size() != len(self.nodes):
                raise OpidError("the plan JSON and the plan disagree")
            self._everything = everything
        return self._everything.apply(i)


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
