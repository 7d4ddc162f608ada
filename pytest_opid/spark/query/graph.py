"""Spark plans as topologies: pure Python over Spark's plan JSON, no JVM.

Spark Structured Streaming files a stateful operator's state under ``state/<operatorId>/``,
where the id is the operator's position in a pre-order walk of the physical plan; batch jobs
split into stages wherever an exchange sits. Both change when a refactor adds, removes or
reorders operators, so this module turns Spark's *physical plan* into the engine-neutral
:class:`~pytest_opid.model.Topology` and lets the Flink-exact hasher give every operator an
identity.

The plan is read as Spark's own plan JSON (``SparkPlan.toJSON()``) with the file scans'
formats, in one py4j call for a batch plan (:mod:`pytest_opid.spark.query.jvm`), never one
round trip per operator. The conversion rules (docs/pyspark-batch.md has a worked example):

* Operators become nodes named by Spark's node name (``HashAggregate``, ``Filter``,
  ``FileScan parquet``, ``StateStoreSave``...). Names carry no column names, literals,
  expression ids, paths or plan ids, so nothing that varies between sessions reaches a snapshot.
* Wrappers disappear: ``WholeStageCodegen``, ``InputAdapter`` and the columnar transitions
  ``ColumnarToRow``/``RowToColumnar`` (they depend on codegen settings, not on the dataflow). A
  plan planned with adaptive execution (AQE) is planned again without it: AQE's runtime
  re-optimisations depend on data, the fingerprint describes the static plan.
* Exchanges become the partitioner of the edge they sit on: hash -> HASH, round robin ->
  REBALANCE, single partition -> GLOBAL, range (and any other partitioning) -> CUSTOM,
  broadcast -> BROADCAST. ``CollectLimit`` and ``TakeOrderedAndProject`` shuffle to one
  partition internally, so their input edge is GLOBAL. An exchange with no operator above it
  (the plan's root, or an exchange right under another) stays as a node named ``Exchange``.
* A ``ReusedExchange`` becomes a second consumer of the exchange it reuses: the producer below
  that exchange gets a second outgoing edge with the same partitioner.
* Node ids come from a post-order walk of the plan (children left to right), so scans are the
  sources in plan order and every edge points to a larger id.
* Parallelism is the operator's number of output partitions where the plan fixes it (after an
  exchange, ``Coalesce``, ``Union`` of known inputs, limits); scans get -1 because Spark derives
  their partitions from file sizes and the machine's cores.
* Chains are Spark's stages: an edge is chainable iff no exchange sits on it
  (:func:`spark_chaining`). A stage is a connected group of such edges; unlike a Flink chain it
  may have several entry operators (a ``Union`` or a zipped join reads two pipelines in one
  stage), so :func:`spark_stages` builds them here instead of Flink's ``job_vertices``.
* Stateful operators of a streaming plan are numbered as ``IncrementalExecution`` numbers them:
  a counter over a pre-order walk (parent before children, left before right), one id per
  ``StateStoreSave``/``StateStoreRestore`` pair, deduplication, stream-stream join,
  ``(flat)mapGroupsWithState``, ``applyInPandasWithState``, ``transformWithState`` and
  streaming global limit. Each is listed with the data types of its state key, since Spark
  refuses state whose key schema changed; read from PySpark (:mod:`.jvm`), each also carries
  the name its state metadata records and the key and value schema of every state store as
  Spark writes them, and the plan its sources in the offset log's order, which
  :mod:`.restore` checks a restart against.

Streaming DataFrames (started or not) are planned with an ``IncrementalExecution`` built for the
analyzed plan, exactly as ``DataFrame.explain()`` does for a streaming DataFrame: nothing runs,
no data is read and no checkpoint is touched. A ``StreamingQuery`` is planned the same way from
the query it runs, so a query and the DataFrame it was started from share one fingerprint.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from pytest_opid.errors import DocumentError
from pytest_opid.io.schema import type_shape
from pytest_opid.model import Edge, Operator, Partitioner, Topology
from pytest_opid.result import (
    UNKNOWN,
    StateStore,
)
from pytest_opid.spark.query.expressions import MeaningPlan
from pytest_opid.spark.query.meaning import operator_meaning
from pytest_opid.spark.query.plan_tree import WORD, WRAPPERS, plan_children, plan_tree, word_after
from pytest_opid.spark.transform_with_state import transform_with_state_meaning
from pytest_opid.spark.vocabulary import (
    FUNCTION_DIGEST_FACT,
    SCHEMA_CHECK_FACT,
    SHUFFLE_PARTITIONS,
    STATEFUL_OPERATORS,
)

_EXCHANGES = frozenset({"ShuffleExchangeExec", "BroadcastExchangeExec"})


#: Operators that shuffle to a single partition inside their own execution.
_IMPLICIT_GLOBAL = frozenset({"CollectLimitExec", "TakeOrderedAndProjectExec"})


#: Nodes of adaptive plans, which keep their real plan in a field; such plans are planned
#: again without AQE before conversion (see :func:`_static_plan`).
_ADAPTIVE = frozenset(
    {
        "AdaptiveSparkPlanExec",
        "ShuffleQueryStageExec",
        "BroadcastQueryStageExec",
        "TableCacheQueryStageExec",
        "AQEShuffleReadExec",
    }
)


_PARTITIONERS = {
    "HashPartitioning": Partitioner.HASH,
    "CoalescedHashPartitioning": Partitioner.HASH,
    "RoundRobinPartitioning": Partitioner.REBALANCE,
    "SinglePartition": Partitioner.GLOBAL,
}


@dataclass(frozen=True)
class StatefulNode:
    """A stateful operator: its node in the topology and the id of its state directory.

    ``key_types`` are the data types of its state key (no column names): Spark refuses state
    whose key schema changed, and they tell two operators of one kind apart."""

    state_operator_id: int
    node: int
    kind: str  #: Spark's name for it in the state metadata, e.g. ``"stateStoreSave"``
    key_types: tuple[str, ...] = ()
    #: its state stores with the key and value schemas Spark writes (read from the JVM)
    stores: tuple[StateStore, ...] = ()
    #: what its state means (:mod:`pytest_opid.spark.query.meaning`)
    meaning: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class SparkPlanGraph:
    """A Spark plan as a topology, plus its stateful operators (``None`` for a batch plan) and,
    for a streaming plan read from PySpark, its sources in the offset log's order."""

    topology: Topology
    state_operators: tuple[StatefulNode, ...] | None = None
    sources: tuple[str, ...] | None = None
    #: a batch plan as a readable tree (:mod:`pytest_opid.spark.query.plan_tree`)
    plan: tuple[str, ...] | None = None
    #: the session confs the operators' parallelism -1 stands for
    settings: tuple[tuple[str, str], ...] = ()


_DECODER = msgspec.json.Decoder()


def graph_from_plan(
    plan: str | Sequence[dict[str, Any]],
    *,
    leaves: Sequence[str | None] | None = None,
    streaming: bool = False,
    state: Sequence[Any] | None = None,
    sources: Sequence[str] | None = None,
    output_mode_known: bool = True,
    schema_check: bool = True,
    node_texts: Mapping[int, str] | None = None,
    shuffle_partitions: int | None = None,
) -> SparkPlanGraph:
    """Convert Spark's plan JSON (``SparkPlan.toJSON()``, a pre-order list of nodes) into a
    :class:`SparkPlanGraph`.

    ``leaves`` are Spark's node names of the plan's leaves in plan order (``collectLeaves``,
    ``None`` where unknown); they only supply the format of file scans. ``streaming`` asks for
    the stateful operators. ``state`` (read from the JVM, one entry per stateful operator in
    Spark's numbering, each with ``operator_name`` and ``stores``) and ``sources`` (the offset
    log's sources) complete a streaming plan with what a restart is checked against.
    ``output_mode_known`` is false for a streaming DataFrame not started yet: its plan is made
    in append mode, but the query's mode is chosen at ``writeStream``. For a batch plan,
    ``shuffle_partitions`` (the session's ``spark.sql.shuffle.partitions``, where known) is
    recorded once as a setting, and the exchanges Spark sized with it get parallelism -1; a
    batch plan also gets its readable tree (:func:`~pytest_opid.spark.query.plan_tree.plan_tree`).
    ``schema_check`` false (the session sets
    ``spark.sql.streaming.stateStore.stateSchemaCheck=false``) is recorded in every stateful
    operator's meaning. ``node_texts`` adds what the JSON leaves out of some
    nodes (a watermark's delay, a join's condition), by their position in it.
    """
    subqueries = not isinstance(plan, str) or '"plan"' in plan
    if isinstance(plan, str):
        try:  # msgspec: 2.5x the standard library's speed on plan JSON (measured)
            plan = _DECODER.decode(plan)
        except (msgspec.DecodeError, RecursionError) as exc:
            raise DocumentError(f"the Spark plan is not valid JSON: {exc}") from None
    nodes = _check_plan(plan, "the Spark plan")
    conf = None if streaming else shuffle_partitions
    builder = _Builder(leaves or (), output_mode_known, node_texts or {}, conf)
    builder.convert(nodes, main=True)
    topology = Topology(builder.operators, builder.edges())
    if not streaming:
        settings = ((SHUFFLE_PARTITIONS, str(conf)),) if builder.conf_used else ()
        tree = plan_tree(
            nodes,
            leaves=leaves or (),
            shuffle_partitions=conf,
            subqueries=subqueries,
            children=builder.main_children,
        )
        return SparkPlanGraph(topology, None, None, tree, settings)
    states = None
    if streaming:
        read = list(state) if state is not None else []
        if len(read) != len(builder.stateful):
            read = []  # not what the plan JSON has: keep the names from the class names
        states = tuple(
            StatefulNode(
                state_operator_id=i,
                node=node,
                kind=read[i].operator_name if read else kind,
                key_types=keys,
                stores=tuple(read[i].stores) if read else (),
                meaning=(_tws_meaning(read[i], kind) + facts if read else facts)
                + (_function_fact(read[i]) if read else ())
                + (() if schema_check else ((SCHEMA_CHECK_FACT, "off"),)),
            )
            for i, (node, kind, keys, facts) in enumerate(builder.stateful)
        )
    return SparkPlanGraph(
        topology, states, tuple(sources) if streaming and sources is not None else None
    )


def _tws_meaning(reading: Any, kind: str) -> tuple[tuple[str, str], ...]:
    """A transformWithState operator's processor, modes and state variables
    (:func:`~pytest_opid.spark.transform_with_state.transform_with_state_meaning`); nothing for
    other kinds."""
    if not kind.startswith("transformWithState"):
        return ()
    return transform_with_state_meaning(
        tuple(reading.stores),
        getattr(reading, "processor", None),
        getattr(reading, "encoding", None),
    )


def _function_fact(reading: Any) -> tuple[tuple[str, str], ...]:
    """The digest of the Python code that updates the state, where the operator runs some
    (:mod:`~pytest_opid.spark.function_digest`)."""
    value = getattr(reading, "function", None)
    return ((FUNCTION_DIGEST_FACT, value),) if isinstance(value, str) else ()


def _check_plan(plan: Any, what: str) -> list[dict[str, Any]]:
    if not isinstance(plan, list) or not plan:
        raise DocumentError(f"{what} must be a non-empty JSON list of plan nodes")
    for i, node in enumerate(plan):
        if not isinstance(node, dict) or not isinstance(node.get("class"), str):
            raise DocumentError(f"{what}: node #{i} has no 'class'")
        kids = node.get("num-children")
        if not isinstance(kids, int) or isinstance(kids, bool) or kids < 0:
            raise DocumentError(f"{what}: node #{i} ({node['class']}) has no valid 'num-children'")
    return plan


def _short_class(node: dict[str, Any]) -> str:
    return node["class"].rsplit(".", 1)[-1].rsplit("$", 1)[-1]


class _Port:
    """What a consumer connects to: the producing operator and the edge's partitioner."""

    __slots__ = ("parallelism", "partitioner", "source")

    def __init__(self, source: int | None, partitioner: Partitioner, parallelism: int) -> None:
        self.source = source  # None until a reused exchange is resolved
        self.partitioner = partitioner
        self.parallelism = parallelism


class _Builder:
    """Walks plan lists in post-order and collects operators and edges."""

    def __init__(
        self,
        leaves: Sequence[str | None],
        output_mode_known: bool = True,
        node_texts: Mapping[int, str] | None = None,
        shuffle_partitions: int | None = None,
    ) -> None:
        self.output_mode_known = output_mode_known
        self.shuffle_partitions = shuffle_partitions
        self.conf_used = False  # some exchange took its partitions from shuffle_partitions
        self.node_texts = node_texts or {}
        self.leaves = leaves
        self.operators: list[Operator] = []
        self._edges: list[tuple[_Port, int, int]] = []  # (input port, target id, type number)
        #: (node id, kind, key types) in Spark's numbering order
        self.stateful: list[tuple[int, str, tuple[str, ...], tuple[tuple[str, str], ...]]] = []
        self._exchanges: list[tuple[list[dict[str, Any]], int, int, _Port]] = []
        self._reused: list[tuple[list[dict[str, Any]], _Port]] = []
        self.main_children: list[list[int]] | None = None  # the main plan's, once walked

    def edges(self) -> list[Edge]:
        return [
            Edge(port.source, target, port.partitioner, type_number)  # type: ignore[arg-type]
            for port, target, type_number in self._edges
        ]

    def convert(self, nodes: list[dict[str, Any]], *, main: bool) -> _Port:
        root = self._walk(nodes, main=main)
        if main:
            self._resolve_reused()
        return root

    # The walk ------------------------------------------------------------------------------

    def _walk(self, nodes: list[dict[str, Any]], *, main: bool) -> _Port:
        what = "the Spark plan" if main else "a nested Spark plan"
        children, end = plan_children(nodes, what)
        if main:
            self.main_children = children
        ports: list[_Port | None] = [None] * len(nodes)
        state_order: dict[int, int] = {}  # plan index -> pre-order rank among stateful nodes
        leaf_rank: dict[int, int] = {}
        for i, node in enumerate(nodes):
            cls = _short_class(node)
            if cls in _ADAPTIVE:
                raise DocumentError(
                    f"{what}: node #{i} is {cls}; convert the plan Spark makes with "
                    "spark.sql.adaptive.enabled=false (pytest_opid.spark.plan_graph does that)"
                )
            if main and cls in STATEFUL_OPERATORS:
                state_order[i] = len(state_order)
            if not children[i]:
                leaf_rank[i] = len(leaf_rank)
        stateful: list[tuple[int, int, str, tuple[str, ...], tuple[tuple[str, str], ...]]] = []
        meaning_plan = MeaningPlan(nodes, self.node_texts) if main and state_order else None
        stack = [(0, False)]
        while stack:
            i, expanded = stack.pop()
            if not expanded:
                stack.append((i, True))
                stack.extend((c, False) for c in reversed(children[i]))
                continue
            node = nodes[i]
            cls = _short_class(node)
            inputs = [ports[c] for c in children[i]]
            if cls in WRAPPERS and len(inputs) == 1:
                ports[i] = inputs[0]
            elif cls in _EXCHANGES and len(inputs) == 1:
                ports[i] = self._exchange(node, cls, inputs[0])  # type: ignore[arg-type]
                if main:
                    self._exchanges.append((nodes, i, end[i], ports[i]))  # type: ignore[arg-type]
            elif cls == "ReusedExchangeExec" and isinstance(node.get("child"), list):
                ports[i] = self._reuse(node["child"], what, i)
            else:
                rank = leaf_rank.get(i, len(self.leaves)) if main else len(self.leaves)
                leaf = self.leaves[rank] if rank < len(self.leaves) else None
                op = self._operator(node, cls, inputs, leaf)  # type: ignore[arg-type]
                ports[i] = _Port(op, Partitioner.FORWARD, self.operators[-1].parallelism)
                if i in state_order:
                    kind = STATEFUL_OPERATORS[cls]
                    facts = operator_meaning(nodes, i, plan=meaning_plan)
                    if not self.output_mode_known:
                        facts = tuple((f, UNKNOWN if f == "output mode" else v) for f, v in facts)
                    stateful.append((state_order[i], op, kind, _key_types(node), facts))
        stateful.sort()
        self.stateful.extend(entry[1:] for entry in stateful)
        root = ports[0]
        assert root is not None
        if root.partitioner is not Partitioner.FORWARD:
            # An exchange at the root: its read side is a stage of its own.
            root = self._materialize(root)
        return root

    # Nodes ----------------------------------------------------------------------------------

    def _operator(
        self, node: dict[str, Any], cls: str, inputs: list[_Port], leaf: str | None
    ) -> int:
        op_id = len(self.operators) + 1
        if cls in _IMPLICIT_GLOBAL:
            inputs = [self._with_partitioner(p, Partitioner.GLOBAL, 1) for p in inputs]
        self.operators.append(
            Operator(
                op_id, _node_name(node, cls, leaf), parallelism=_parallelism(node, cls, inputs)
            )
        )
        for position, port in enumerate(inputs):
            self._edges.append((port, op_id, position + 1 if len(inputs) > 1 else 0))
        return op_id

    def _with_partitioner(self, port: _Port, partitioner: Partitioner, parallelism: int) -> _Port:
        if port.partitioner is not Partitioner.FORWARD:
            port = self._materialize(port)
        return _Port(port.source, partitioner, parallelism)

    def _materialize(self, port: _Port) -> _Port:
        """Give an exchange without an operator above it a node of its own."""
        name = "BroadcastExchange" if port.partitioner is Partitioner.BROADCAST else "Exchange"
        op_id = len(self.operators) + 1
        self.operators.append(Operator(op_id, name, parallelism=port.parallelism))
        self._edges.append((port, op_id, 0))
        return _Port(op_id, Partitioner.FORWARD, port.parallelism)

    def _exchange(self, node: dict[str, Any], cls: str, child: _Port) -> _Port:
        if child.partitioner is not Partitioner.FORWARD:
            child = self._materialize(child)
        partitioner, parallelism = self._partitioning(node, cls)
        return _Port(child.source, partitioner, parallelism)

    def _partitioning(self, node: dict[str, Any], cls: str) -> tuple[Partitioner, int]:
        """An exchange's partitioner and partitions: -1 where Spark took them from the
        session's shuffle partitions (recorded once instead), unless the query asked for that
        number itself (``repartition(n)``)."""
        partitioner, parallelism = _exchange_partitioning(node, cls)
        origin = node.get("shuffleOrigin")
        asked = isinstance(origin, dict) and str(origin.get("object", "")).endswith(
            ".REPARTITION_BY_NUM$"
        )
        if parallelism == self.shuffle_partitions and parallelism > 0 and not asked:
            self.conf_used = True
            return partitioner, -1
        return partitioner, parallelism

    def _reuse(self, nested: list[dict[str, Any]], what: str, index: int) -> _Port:
        nested = _check_plan(nested, f"{what}: the ReusedExchange at node #{index}")
        cls = _short_class(nested[0])
        partitioner, parallelism = (
            self._partitioning(nested[0], cls) if cls in _EXCHANGES else (Partitioner.CUSTOM, -1)
        )
        port = _Port(None, partitioner, parallelism)
        self._reused.append((nested, port))
        return port

    def _resolve_reused(self) -> None:
        """Point every reused exchange at the producer of the exchange it reuses. Spark reuses
        the very same exchange object, so its JSON equals that exchange's subtree exactly; an
        exchange found nowhere (it lived in a subquery) is converted as a branch of its own."""
        while self._reused:
            nested, port = self._reused.pop(0)
            size = len(nested)
            for nodes, start, stop, original in self._exchanges:
                if stop - start == size and nodes[start:stop] == nested:
                    port.source = original.source
                    break
            else:
                cls = _short_class(nested[0])
                inner = nested[0] if cls in _EXCHANGES else None
                root = self._walk(nested[1:] if inner else nested, main=False)
                if root.partitioner is not Partitioner.FORWARD:
                    root = self._materialize(root)
                port.source = root.source


#: Where stateful operators keep their state key, in order of preference.
_KEY_FIELDS = ("keyExpressions", "keyWithoutSessionExpressions", "leftKeys", "groupingAttributes")


def _key_types(node: dict[str, Any]) -> tuple[str, ...]:
    """The data types of a stateful operator's key expressions (``?`` where the JSON has none)."""
    for field in _KEY_FIELDS:
        keys = node.get(field)
        if isinstance(keys, list):
            return tuple(
                type_shape(key[0].get("dataType"))
                if isinstance(key, list) and key and isinstance(key[0], dict)
                else "?"
                for key in keys
            )
    return ()


def _exchange_partitioning(node: dict[str, Any], cls: str) -> tuple[Partitioner, int]:
    if cls == "BroadcastExchangeExec":
        return Partitioner.BROADCAST, -1
    spec = node.get("outputPartitioning")
    first = spec[0] if isinstance(spec, list) and spec else spec
    if not isinstance(first, dict):
        return Partitioner.CUSTOM, -1
    # A TreeNode serialises as {"class"}, a case class as {"product-class"}, an object as
    # {"object"}; HashPartitioning, RoundRobinPartitioning and SinglePartition use one each.
    kind = first.get("class") or first.get("product-class") or first.get("object") or ""
    name = kind.rsplit(".", 1)[-1].rstrip("$")
    partitioner = _PARTITIONERS.get(name, Partitioner.CUSTOM)
    if partitioner is Partitioner.GLOBAL:
        return partitioner, 1
    count = first.get("numPartitions")
    return partitioner, count if isinstance(count, int) and count > 0 else -1


def _parallelism(node: dict[str, Any], cls: str, inputs: Sequence[_Port]) -> int:
    """Output partitions where the plan fixes them, else -1."""
    if not inputs:
        return -1  # scans: Spark derives them from file sizes and the machine's cores
    if cls in _IMPLICIT_GLOBAL:
        return 1
    known = [p.parallelism for p in inputs]
    if cls == "CoalesceExec":
        n = node.get("numPartitions")
        if isinstance(n, int) and n > 0:
            return min(n, known[0]) if known[0] > 0 else n
        return -1
    if cls == "UnionExec":
        return sum(known) if all(k > 0 for k in known) else -1
    if cls == "CartesianProductExec":
        return known[0] * known[1] if len(known) == 2 and min(known) > 0 else -1
    forward = [p.parallelism for p in inputs if p.partitioner is Partitioner.FORWARD]
    if forward:
        return forward[0]
    shuffled = [
        p.parallelism
        for p in inputs
        if p.partitioner is not Partitioner.BROADCAST and p.parallelism > 0
    ]
    return shuffled[0] if shuffled else -1


def _node_name(node: dict[str, Any], cls: str, leaf: str | None) -> str:
    """Spark's node name, without anything that varies between runs (paths, expressions)."""
    base = cls[:-4] if cls.endswith("Exec") and len(cls) > 4 else cls
    if cls in ("FileSourceScanExec", "BatchScanExec"):
        # Spark names them "Scan parquet <table>" and "BatchScan <table or path>"
        prefix = "FileScan" if cls == "FileSourceScanExec" else "BatchScan"
        fmt = word_after(leaf, "Scan" if cls == "FileSourceScanExec" else "BatchScan")
        return f"{prefix} {fmt}" if fmt else prefix
    if cls == "StreamingRelationExec":
        source = node.get("sourceName")
        match = WORD.match(source) if isinstance(source, str) else None
        return f"StreamingRelation {match.group()}" if match else "StreamingRelation"
    if cls == "RDDScanExec":
        name = node.get("name")
        return f"Scan {name}" if isinstance(name, str) and WORD.fullmatch(name) else "Scan"
    if cls == "ShuffleExchangeExec":
        return "Exchange"
    return base
