"""The topology model: operators, edges and the graph-wide switches that decide identities.

A :class:`Topology` is the engine-neutral picture of a job (a stream graph) that every frontend
produces and every engine package hashes and chains. It holds the attributes that decide an
operator's ID or chain, so two topologies that compare equal get the same fingerprint, plus two
facts the engine's scheduler and restore check read (whether an operator's parallelism was
configured, whether it keeps state) and the job's runtime mode. The enum vocabularies are the
stream graph's own (partitioners, chaining strategies, exchange modes); their docstrings name the
engine class each one mirrors.

Order is part of the model: a node's inputs are its incoming edges in list order and its outputs
its outgoing edges in list order, because Flink's breadth-first walk and its input folding both
depend on them.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import compress
from operator import attrgetter, lt, not_

from pytest_opid.errors import TopologyError
from pytest_opid.gc_pause import gc_paused

__all__ = [
    "ChainingStrategy",
    "Edge",
    "ExchangeMode",
    "Operator",
    "Partitioner",
    "RuntimeMode",
    "SourceKind",
    "Topology",
]


#: Flink's ``setUidHash`` accepts exactly 32 hex digits.
_UID_HASH = re.compile(r"[0-9A-Fa-f]{32}")
_SURROGATE = re.compile("[\ud800-\udfff]")


class Partitioner(enum.Enum):
    """How records travel along an edge (Flink's ``StreamPartitioner`` classes)."""

    FORWARD = "FORWARD"
    HASH = "HASH"
    REBALANCE = "REBALANCE"
    RESCALE = "RESCALE"
    SHUFFLE = "SHUFFLE"
    BROADCAST = "BROADCAST"
    GLOBAL = "GLOBAL"
    CUSTOM = "CUSTOM"


class ChainingStrategy(enum.Enum):
    """Flink's ``ChainingStrategy`` of an operator factory."""

    ALWAYS = "ALWAYS"
    HEAD = "HEAD"
    NEVER = "NEVER"
    HEAD_WITH_SOURCES = "HEAD_WITH_SOURCES"


class ExchangeMode(enum.Enum):
    """Flink's ``StreamExchangeMode`` of an edge; only ``BATCH`` prevents chaining."""

    UNDEFINED = "UNDEFINED"
    PIPELINED = "PIPELINED"
    BATCH = "BATCH"
    HYBRID_FULL = "HYBRID_FULL"
    HYBRID_SELECTIVE = "HYBRID_SELECTIVE"


class RuntimeMode(enum.Enum):
    """Flink's ``execution.runtime-mode`` of the job. In ``BATCH`` mode the adaptive batch
    scheduler decides the parallelism of job vertices whose parallelism the program did not
    configure; IDs and chains do not depend on it."""

    STREAMING = "STREAMING"
    BATCH = "BATCH"


class SourceKind(enum.Enum):
    """Which kind of source an operator is, where Flink's chaining rules care."""

    NEW = "new"  #: a FLIP-27 ``SourceOperatorFactory``
    LEGACY = "legacy"  #: a ``SourceFunction`` wrapped in a ``StreamSource``


@dataclass(frozen=True, slots=True)
class Operator:
    """One node of the stream graph (Flink's ``StreamNode``).

    ``chaining_strategy`` is ``None`` for a node without an operator factory, which Flink never
    chains. ``uid`` pins the OperatorID (``uid()``); ``uid_hash`` is the user-defined ID given
    to ``setUidHash()``, which Flink uses to restore state saved under that ID.

    Two attributes decide no ID or chain: ``parallelism_configured`` says whether the program
    called ``setParallelism()`` on the operator (Flink's ``StreamNode#isParallelismConfigured``;
    it matters to job vertex parallelism in ``BATCH`` mode), and ``stateful`` whether the
    operator keeps state (``None``: unknown, which restore checks count as stateful).
    """

    id: int
    name: str
    parallelism: int = -1
    max_parallelism: int = -1
    slot_sharing_group: str | None = "default"
    chaining_strategy: ChainingStrategy | None = ChainingStrategy.ALWAYS
    uid: str | None = None
    uid_hash: str | None = None
    source: SourceKind | None = None
    yielding: bool = False
    parallelism_configured: bool = False
    stateful: bool | None = None


@dataclass(frozen=True, slots=True)
class Edge:
    """One edge of the stream graph (Flink's ``StreamEdge``).

    ``type_number`` is the input position: 0 for a one-input operator, 1 and 2 for the two
    inputs of a two-input operator.
    """

    source: int
    target: int
    partitioner: Partitioner = Partitioner.FORWARD
    type_number: int = 0
    exchange_mode: ExchangeMode = ExchangeMode.UNDEFINED


@dataclass(frozen=True)
class Topology:
    """A validated, immutable stream graph.

    Construction validates everything a fingerprint relies on (unique ids and uids, edges that
    name existing operators, no cycles, well-formed values) and raises :class:`TopologyError`
    naming the culprit, so later stages never see a half-valid graph.
    """

    operators: tuple[Operator, ...]
    edges: tuple[Edge, ...]
    chaining_enabled: bool = True
    chain_different_max_parallelism: bool = True
    runtime_mode: RuntimeMode = RuntimeMode.STREAMING
    _index: dict[int, int] = field(init=False, repr=False, compare=False)

    def __init__(
        self,
        operators: Iterable[Operator],
        edges: Iterable[Edge],
        chaining_enabled: bool = True,
        chain_different_max_parallelism: bool = True,
        runtime_mode: RuntimeMode = RuntimeMode.STREAMING,
    ) -> None:
        self._assign(
            operators, edges, chaining_enabled, chain_different_max_parallelism, runtime_mode
        )
        with gc_paused():
            self._validate(check_fields=True)

    @classmethod
    def from_checked(
        cls,
        operators: Sequence[Operator],
        edges: Sequence[Edge],
        chaining_enabled: bool = True,
        chain_different_max_parallelism: bool = True,
        runtime_mode: RuntimeMode = RuntimeMode.STREAMING,
    ) -> Topology:
        """A topology from operators and edges whose every field a loader has already checked
        (types, ranges, enum members, ``uid_hash`` digits, text without lone surrogates), as a
        schema-driven decoder does in C. Only the structure is checked here: unique ids and uids,
        edges between existing operators, no cycle. Anything else must use the constructor."""
        self = cls.__new__(cls)
        self._assign(
            operators, edges, chaining_enabled, chain_different_max_parallelism, runtime_mode
        )
        with gc_paused():
            self._validate(check_fields=False)
        return self

    def _assign(
        self,
        operators: Iterable[Operator],
        edges: Iterable[Edge],
        chaining_enabled: bool,
        chain_different_max_parallelism: bool,
        runtime_mode: RuntimeMode,
    ) -> None:
        """Set the frozen fields (both constructors), before any check."""
        object.__setattr__(self, "operators", tuple(operators))
        object.__setattr__(self, "edges", tuple(edges))
        object.__setattr__(self, "chaining_enabled", chaining_enabled)
        object.__setattr__(self, "chain_different_max_parallelism", chain_different_max_parallelism)
        object.__setattr__(self, "runtime_mode", runtime_mode)
        object.__setattr__(self, "_index", {})

    # -- structure -------------------------------------------------------------------------

    def to_topology(self) -> Topology:
        """The topology itself: everything with ``to_topology()`` can be fingerprinted."""
        return self

    def index_of(self, node_id: int) -> int:
        """Position of the operator with ``node_id`` in :attr:`operators`."""
        try:
            return self._index[node_id]
        except KeyError:
            raise TopologyError(f"no operator with id {node_id!r}") from None

    def operator(self, node_id: int) -> Operator:
        return self.operators[self.index_of(node_id)]

    @cached_property
    def out_edges(self) -> tuple[tuple[int, ...], ...]:
        """For each operator position, the positions of its outgoing edges, in edge order."""
        return _adjacency(len(self.operators), self.edge_sources)

    @cached_property
    def in_edges(self) -> tuple[tuple[int, ...], ...]:
        """For each operator position, the positions of its incoming edges, in edge order."""
        return _adjacency(len(self.operators), self.edge_targets)

    @cached_property
    def edge_ends(self) -> tuple[tuple[int, int], ...]:
        """For each edge, the positions of its (source, target) operators."""
        return tuple(zip(self.edge_sources, self.edge_targets, strict=True))

    @cached_property
    def edge_sources(self) -> tuple[int, ...]:
        """For each edge, the position of its source operator (a column of :attr:`edge_ends`,
        which whole-graph passes read without a pair per edge)."""
        return tuple(map(self._index.__getitem__, map(_SOURCE, self.edges)))

    @cached_property
    def edge_targets(self) -> tuple[int, ...]:
        """For each edge, the position of its target operator."""
        return tuple(map(self._index.__getitem__, map(_TARGET, self.edges)))

    @cached_property
    def topological_order(self) -> tuple[int, ...]:
        """Operator positions such that every edge points forward (checked during validation:
        operator order itself where every edge already points forward, else Kahn's)."""
        if all(map(lt, self.edge_sources, self.edge_targets)):
            return tuple(range(len(self.operators)))
        return self._topological_order()

    @cached_property
    def sources(self) -> tuple[int, ...]:
        """Positions of the operators without inputs, in ascending id order (Flink's walk)."""
        found = list(compress(range(len(self.operators)), map(not_, self.in_degrees)))
        found.sort(key=self._ids.__getitem__)
        return tuple(found)

    @cached_property
    def in_degrees(self) -> tuple[int, ...]:
        """For each operator position, its number of inputs. The core's walks use them instead
        of building :attr:`in_edges`, which would cost a tuple per operator."""
        degrees = [0] * len(self.operators)
        for target in self.edge_targets:
            degrees[target] += 1
        return tuple(degrees)

    @cached_property
    def _ids(self) -> list[int]:
        return list(map(_ID, self.operators))

    # -- validation ------------------------------------------------------------------------

    def _validate(self, check_fields: bool) -> None:
        for flag in ("chaining_enabled", "chain_different_max_parallelism"):
            if not isinstance(getattr(self, flag), bool):
                raise TopologyError(f"{flag} must be true or false, got {getattr(self, flag)!r}")
        if not isinstance(self.runtime_mode, RuntimeMode):
            raise TopologyError(
                f"runtime_mode must be RuntimeMode.STREAMING or RuntimeMode.BATCH, "
                f"got {self.runtime_mode!r}"
            )
        if check_fields:
            self._check_each()
        else:
            self._check_structure()
        # Acyclic for certain where every edge points forward in operator order (a loader's
        # usual order): one pass in C. Otherwise Kahn's algorithm finds the order or a cycle.
        if not all(map(lt, self.edge_sources, self.edge_targets)):
            self.__dict__["topological_order"] = self._topological_order()

    def _check_each(self) -> None:
        """Every operator and edge in turn: its fields, then where it stands in the graph."""
        index = self._index
        uids: dict[str, int] = {}
        for position, op in enumerate(self.operators):
            if not isinstance(op, Operator):
                raise TopologyError(f"operator #{position} is not an Operator: {op!r}")
            _check_operator(op)
            if op.id in index:
                raise TopologyError(f"duplicate operator id {op.id}")
            index[op.id] = position
            if op.uid is not None:
                if op.uid in uids:
                    raise TopologyError(
                        f"duplicate uid {op.uid!r} on operators {uids[op.uid]} and {op.id}"
                    )
                uids[op.uid] = op.id
        for position, edge in enumerate(self.edges):
            if not isinstance(edge, Edge):
                raise TopologyError(f"edge #{position} is not an Edge: {edge!r}")
            _check_edge(edge, position)
            for end in (edge.source, edge.target):
                if end not in index:
                    raise TopologyError(
                        f"edge #{position} ({edge.source} -> {edge.target}) names operator "
                        f"{end!r}, which does not exist"
                    )

    def _check_structure(self) -> None:
        """The graph alone, for fields checked already: the same errors as :meth:`_check_each`
        gives for such input, found with whole-column operations in C (a dict built from all ids
        at once, a set of the uids, a map over the edge ends) and a second, precise pass only
        on failure."""
        ids = self._ids
        index = self._index
        index.update(zip(ids, range(len(ids)), strict=True))
        if len(index) != len(ids):
            seen: set[int] = set()
            for node_id in ids:
                if node_id in seen:
                    raise TopologyError(f"duplicate operator id {node_id}")
                seen.add(node_id)
        uids = list(map(_UID, self.operators))
        distinct = set(uids)
        if len(distinct) - (None in distinct) != len(uids) - uids.count(None):
            first: dict[str, int] = {}
            for uid, node_id in zip(uids, ids, strict=True):
                if uid is None:
                    continue
                if uid in first:
                    raise TopologyError(
                        f"duplicate uid {uid!r} on operators {first[uid]} and {node_id}"
                    )
                first[uid] = node_id
        del uids, distinct
        try:
            self.edge_sources  # noqa: B018  (cached: raises KeyError on an unknown id)
            self.edge_targets  # noqa: B018
        except KeyError:
            for position, edge in enumerate(self.edges):
                for end in (edge.source, edge.target):
                    if end not in index:
                        raise TopologyError(
                            f"edge #{position} ({edge.source} -> {edge.target}) names operator "
                            f"{end!r}, which does not exist"
                        ) from None
            raise

    def _topological_order(self) -> tuple[int, ...]:
        """Kahn's algorithm; on a cycle, raise naming the operators on one."""
        count = len(self.operators)
        targets = self.edge_targets
        indegree = list(self.in_degrees)
        outs = self.out_edges
        ready = [i for i in range(count) if indegree[i] == 0]
        order: list[int] = []
        while ready:
            node = ready.pop()
            order.append(node)
            for e in outs[node]:
                target = targets[e]
                indegree[target] -= 1
                if indegree[target] == 0:
                    ready.append(target)
        if len(order) != count:
            cycle = _find_cycle(indegree, self.in_edges, self.edge_ends)
            path = " -> ".join(str(self.operators[i].id) for i in cycle)
            raise TopologyError(f"the topology has a cycle: {path}")
        return tuple(order)


_ID = attrgetter("id")
_UID = attrgetter("uid")
_SOURCE = attrgetter("source")
_TARGET = attrgetter("target")


def _adjacency(count: int, ends: Sequence[int]) -> tuple[tuple[int, ...], ...]:
    """For each of ``count`` operators, the positions of the edges whose end is that operator,
    in edge order."""
    lists: list[list[int]] = [[] for _ in range(count)]
    for position, end in enumerate(ends):
        lists[end].append(position)
    return tuple(map(tuple, lists))


def _find_cycle(
    indegree: Sequence[int],
    ins: Sequence[Sequence[int]],
    ends: Sequence[tuple[int, int]],
) -> list[int]:
    """Name the operators of one cycle among those Kahn's algorithm could not order.

    Walking backwards always works: an operator left waiting has an input from another operator
    left waiting (walking forwards could end at one that merely sits downstream of a cycle).
    """
    stuck = {i for i, d in enumerate(indegree) if d > 0}
    node = min(stuck)
    order: dict[int, int] = {}
    path: list[int] = []
    while node not in order:
        order[node] = len(path)
        path.append(node)
        node = next(ends[e][0] for e in ins[node] if ends[e][0] in stuck)
    cycle = [*path[order[node] :], node]
    cycle.reverse()
    return cycle


def _is_int(value: object) -> bool:
    return type(value) is int or (isinstance(value, int) and not isinstance(value, bool))


def _check_operator(op: Operator) -> None:
    where = f"operator {op.id!r}"
    if not _is_int(op.id):
        raise TopologyError(f"{where}: id must be an integer")
    if not isinstance(op.name, str):
        raise TopologyError(f"{where}: name must be a string, got {op.name!r}")
    for attr in ("parallelism", "max_parallelism"):
        value = getattr(op, attr)
        if not _is_int(value) or (value <= 0 and value != -1):
            raise TopologyError(f"{where}: {attr} must be a positive integer or -1, got {value!r}")
    if op.slot_sharing_group is not None and not isinstance(op.slot_sharing_group, str):
        raise TopologyError(f"{where}: slot_sharing_group must be a string")
    if op.chaining_strategy is not None and not isinstance(op.chaining_strategy, ChainingStrategy):
        raise TopologyError(f"{where}: unknown chaining_strategy {op.chaining_strategy!r}")
    if op.uid is not None and not isinstance(op.uid, str):
        raise TopologyError(f"{where}: uid must be a string, got {op.uid!r}")
    if op.uid_hash is not None and (
        not isinstance(op.uid_hash, str) or not _UID_HASH.fullmatch(op.uid_hash)
    ):
        raise TopologyError(
            f"{where}: uid_hash must be 32 hex digits (as setUidHash() requires), "
            f"got {op.uid_hash!r}"
        )
    if op.source is not None and not isinstance(op.source, SourceKind):
        raise TopologyError(f"{where}: unknown source kind {op.source!r}")
    if not isinstance(op.yielding, bool):
        raise TopologyError(f"{where}: yielding must be true or false, got {op.yielding!r}")
    if not isinstance(op.parallelism_configured, bool):
        raise TopologyError(
            f"{where}: parallelism_configured must be true or false, "
            f"got {op.parallelism_configured!r}"
        )
    if op.stateful is not None and not isinstance(op.stateful, bool):
        raise TopologyError(
            f"{where}: stateful must be true, false or None (unknown), got {op.stateful!r}"
        )
    for attr in ("name", "uid", "slot_sharing_group"):
        value = getattr(op, attr)
        if value is not None and _SURROGATE.search(value):
            raise TopologyError(
                f"{where}: {attr} holds a lone surrogate (\\uD800-\\uDFFF), which is not text"
            )


def _check_edge(edge: Edge, position: int) -> None:
    where = f"edge #{position} ({edge.source!r} -> {edge.target!r})"
    if not _is_int(edge.source) or not _is_int(edge.target):
        raise TopologyError(f"{where}: source and target must be operator ids (integers)")
    if not isinstance(edge.partitioner, Partitioner):
        raise TopologyError(f"{where}: unknown partitioner {edge.partitioner!r}")
    if not isinstance(edge.exchange_mode, ExchangeMode):
        raise TopologyError(f"{where}: unknown exchange_mode {edge.exchange_mode!r}")
    if not _is_int(edge.type_number) or edge.type_number < 0:
        raise TopologyError(
            f"{where}: type_number must be a non-negative integer, got {edge.type_number!r}"
        )
