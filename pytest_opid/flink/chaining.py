"""Chaining rules and operator chains (Flink's JobVertices).

Flink fuses operators connected by a chainable edge into one task, a JobVertex. Which edges are
chainable decides both the chains and, through the hasher's count of chainable outputs, the
OperatorIDs themselves. A :data:`ChainingRule` maps a topology to one flag per edge;
:func:`flink_chaining` is Flink 2.3's rule and the default everywhere. Other engines (the Spark
frontend) pass their own rule.

:func:`job_vertices` then grows the chains exactly as Flink's ``StreamingJobGraphGenerator`` does
and lists them in the order of ``JobGraph.getVerticesSortedTopologicallyFromSources()``. All
walks are iterative: a million-operator chain must not hit Python's recursion limit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import chain, compress, repeat
from operator import attrgetter, not_
from typing import NamedTuple

from pytest_opid.model import (
    ChainingStrategy,
    ExchangeMode,
    Operator,
    Partitioner,
    SourceKind,
    Topology,
)

__all__ = [
    "Chain",
    "ChainingRule",
    "Chains",
    "Wiring",
    "flink_chaining",
    "forward_chaining",
    "grow_chains",
    "job_vertices",
    "wiring",
]

#: A chaining rule answers, for every edge of a topology in edge order, "is it chainable?".
ChainingRule = Callable[[Topology], Sequence[bool]]

# Module constants rather than ``Partitioner.FORWARD`` in the loops: looking up an enum member
# on its class is slow enough in Python 3.11 to show on a 100k-operator job.
_FORWARD = Partitioner.FORWARD
_BATCH = ExchangeMode.BATCH
_LEGACY = SourceKind.LEGACY
_NEW = SourceKind.NEW
_NEVER = ChainingStrategy.NEVER
_ALWAYS = ChainingStrategy.ALWAYS
_HEAD_WITH_SOURCES = ChainingStrategy.HEAD_WITH_SOURCES

_SOURCE_KIND = attrgetter("source")
_NAME = attrgetter("name")


def flink_chaining(topology: Topology) -> list[bool]:
    """Flink 2.3's ``StreamingJobGraphGenerator.isChainable`` for every edge.

    An edge is chainable when chaining is on, its target has exactly this one input, both ends
    are in the same slot sharing group, both operators have a factory whose chaining strategies
    allow it, the parallelisms (and, where the option forbids differences, the max parallelisms)
    are equal, the partitioner is FORWARD and the exchange mode is not BATCH.
    """
    edges = topology.edges
    chainable = [False] * len(edges)
    if not topology.chaining_enabled:
        return chainable
    ops = topology.operators
    degrees = topology.in_degrees
    same_max = not topology.chain_different_max_parallelism
    for e, (up_pos, down_pos) in enumerate(
        zip(topology.edge_sources, topology.edge_targets, strict=True)
    ):
        edge = edges[e]
        # With a single input the union check (no other input at the same type number) always
        # passes, so it needs no code here.
        if degrees[down_pos] != 1 or edge.partitioner is not _FORWARD:
            continue
        up, down = ops[up_pos], ops[down_pos]
        chainable[e] = (
            up.slot_sharing_group == down.slot_sharing_group
            and edge.exchange_mode is not _BATCH
            and up.parallelism == down.parallelism
            and (not same_max or up.max_parallelism == down.max_parallelism)
            and _strategies_chain(up, down)
        )
    # The one condition that depends on the rest of the chain; only legacy sources bring it in.
    if _LEGACY in map(_SOURCE_KIND, ops):
        _unchain_yielding_behind_legacy_sources(topology, chainable)
    return chainable


def _unchain_yielding_behind_legacy_sources(topology: Topology, chainable: list[bool]) -> None:
    """Flink refuses to chain a yielding operator behind a chain whose head is a legacy source
    (the legacy source thread cannot yield to the mailbox). It finds the head by walking back
    along single chainable inputs; we carry that answer forward in topological order instead."""
    ops = topology.operators
    ins = topology.in_edges
    ends = topology.edge_ends
    head_is_legacy = [False] * len(ops)
    for node in topology.topological_order:
        node_ins = ins[node]
        if len(node_ins) == 1 and chainable[node_ins[0]]:
            up_pos = ends[node_ins[0]][0]
            if not (head_is_legacy[up_pos] and ops[node].yielding):
                head_is_legacy[node] = head_is_legacy[up_pos]
                continue
            chainable[node_ins[0]] = False  # the node heads a chain of its own
        head_is_legacy[node] = ops[node].source is _LEGACY


def _strategies_chain(up, down) -> bool:
    """Flink's ``areOperatorsChainable`` switch over both chaining strategies."""
    up_strategy = up.chaining_strategy
    down_strategy = down.chaining_strategy
    if up_strategy is None or down_strategy is None:  # no operator factory: never chained
        return False
    if up_strategy is _NEVER:
        return False
    if down_strategy is _ALWAYS:
        return True
    if down_strategy is _HEAD_WITH_SOURCES:
        return up.source is _NEW  # only behind a SourceOperatorFactory
    return False  # NEVER or HEAD downstream


def forward_chaining(topology: Topology) -> list[bool]:
    """Pipelining without Flink's extra conditions: an edge chains when it is FORWARD and its
    target has a single input. Engines that fuse everything between exchanges (Spark's stages)
    use this rule."""
    degrees = topology.in_degrees
    return [
        edge.partitioner is _FORWARD and degrees[target] == 1
        for edge, (_, target) in zip(topology.edges, topology.edge_ends, strict=True)
    ]


class Chain(NamedTuple):
    """One operator chain: what becomes a JobVertex.

    ``members`` are operator positions in Flink's order (depth-first post-order over the chain,
    head last); ``name`` is Flink's chained name (``A -> B``, ``A -> (B, C)``).
    """

    head: int
    members: tuple[int, ...]
    name: str
    parallelism: int


class Wiring(NamedTuple):
    """Per-operator columns that the hasher and the chain builder both read, built once.

    ``outs`` are each operator's output targets in output order; ``single_input`` is, for an
    operator with exactly one input, that input (for others, one of them or 0);
    ``chained_outs`` counts each operator's chainable outputs; ``chained_in`` is 1 where the
    operator's (single) input is chainable; ``next_chained`` is, for an operator with one
    chainable output, its target.
    """

    outs: list[list[int]]
    single_input: list[int]
    chained_outs: list[int]
    chained_in: bytearray
    next_chained: list[int]


def wiring(topology: Topology, chainable: Sequence[bool]) -> Wiring:
    """The :class:`Wiring` of a topology under a chaining rule's flags, built in C: each
    column by a map over the edges writing into a list (a later edge overwrites an earlier
    one, which is what ``single_input`` and ``next_chained`` rely on)."""
    size = len(topology.operators)
    sources, targets = topology.edge_sources, topology.edge_targets
    outs: list[list[int]] = [[] for _ in range(size)]
    any(map(list.append, map(outs.__getitem__, sources), targets))  # any(): run the map
    single_input = [0] * size
    any(map(single_input.__setitem__, targets, sources))
    chained_sources = list(compress(sources, chainable))
    chained_targets = list(compress(targets, chainable))
    chained_in = bytearray(size)
    any(map(chained_in.__setitem__, chained_targets, repeat(1)))
    next_chained = [0] * size
    any(map(next_chained.__setitem__, chained_sources, chained_targets))
    chained_outs = [0] * size
    for source in chained_sources:
        chained_outs[source] += 1
    return Wiring(outs, single_input, chained_outs, chained_in, next_chained)


class Chains(NamedTuple):
    """The chains of a topology as columns: ``heads`` in JobGraph order; ``head_of`` each
    operator's chain head; ``members`` and ``names`` only for chains of two or more operators
    (a one-operator chain is its head, named as it)."""

    heads: list[int]
    head_of: list[int]
    members: dict[int, tuple[int, ...]]
    names: dict[int, str]


def job_vertices(topology: Topology, chainable: Sequence[bool]) -> list[Chain]:
    """The chains Flink's ``StreamingJobGraphGenerator.createChain`` grows, in JobGraph order
    (see :func:`grow_chains`)."""
    ops = topology.operators
    found = grow_chains(topology, wiring(topology, chainable), topology.topological_order)
    members, names = found.members, found.names
    return [
        Chain(
            head,
            members.get(head, (head,)),
            names.get(head) or ops[head].name,
            ops[head].parallelism,
        )
        for head in found.heads
    ]


def grow_chains(topology: Topology, wired: Wiring, order: Sequence[int]) -> Chains:
    """The chains Flink's ``StreamingJobGraphGenerator.createChain`` grows, in JobGraph order.

    Flink recurses over operators: for a node it follows its chainable outputs first (same
    chain), then its non-chainable ones (each starting a new chain unless built already), then
    appends the node to its chain. Unrolled, that gives what we compute without recursion:

    * a chain head is an operator without a chainable input (chainable means single input);
    * a chain's members are its chain tree (chainable edges) in depth-first post-order;
    * its non-chained outputs are its members' non-chainable edges, in that member order.

    Flink's order of creating JobVertices matters only among the chains without inputs (those
    headed by sources): ``getVerticesSortedTopologicallyFromSources`` starts from them, in
    creation order, which is ascending source id. The rest follow from the edges.

    ``order`` is any order in which a single-input operator comes after its input (the
    topological order, or the hasher's walk).
    """
    ops = topology.operators
    size = len(ops)
    outs, single_input, chained_outs, chained_in, next_chained = wired
    # Each operator's head, carried down every chainable edge in order: a lazy map reads the
    # input's head only after the writes before it, all in C.
    head_of = list(range(size))
    chained = list(compress(order, map(chained_in.__getitem__, order)))
    any(
        map(
            head_of.__setitem__,
            chained,
            map(head_of.__getitem__, map(single_input.__getitem__, chained)),
        )
    )
    del chained
    heads = list(compress(range(size), map(not_, chained_in)))
    members: dict[int, tuple[int, ...]] = {}
    names: dict[int, str] = {}
    vertex_outs = outs.copy()  # a one-operator chain's outputs are its head's
    unchained = bytes(map(not_, chained_in))
    for head in compress(heads, map(chained_outs.__getitem__, heads)):
        node = head
        path = [head]
        while chained_outs[node] == 1:
            node = next_chained[node]
            path.append(node)
        if chained_outs[node]:  # a fan-out inside the chain: walk its tree
            chain_members, name = _chain_tree(ops, wired, head)
        else:  # a straight chain: its post-order is the path backwards
            name = " -> ".join(map(_NAME, map(ops.__getitem__, path)))
            path.reverse()
            chain_members = tuple(path)
        members[head] = chain_members
        names[head] = name
        ends = list(chain.from_iterable(map(outs.__getitem__, chain_members)))
        vertex_outs[head] = list(compress(ends, map(unchained.__getitem__, ends)))
    placed = _sorted_from_sources(topology.sources, vertex_outs, topology.in_degrees)
    return Chains(placed, head_of, members, names)


def _chain_tree(ops: Sequence[Operator], wired: Wiring, head: int) -> tuple[tuple[int, ...], str]:
    """A chain with a fan-out: its members in depth-first post-order (chained outputs in
    output order, head last) and Flink's ``createChainedName`` (``A -> B`` for one chained
    output, ``A -> (B, C)`` for several), from one walk with a stack of operators to enter,
    exits (``~operator``, negative: the operator joins the members) and text.

    The name is built as one token list, since a long chain would make per-node strings
    quadratic."""
    outs, _, chained_outs, chained_in, next_chained = wired
    parts: list[str] = []
    members: list[int] = []
    stack: list[int | str] = [head]
    pop, push, add, join = stack.pop, stack.append, parts.append, members.append
    while stack:
        item = pop()
        if item.__class__ is str:
            add(item)  # type: ignore[arg-type]
            continue
        if item < 0:  # type: ignore[operator]
            join(~item)  # type: ignore[operator]
            continue
        node: int = item  # type: ignore[assignment]
        add(ops[node].name)
        fan = chained_outs[node]
        if not fan:
            join(node)
        elif fan == 1:
            add(" -> ")
            push(~node)
            push(next_chained[node])
        else:
            add(" -> (")
            push(~node)
            push(")")
            children = [t for t in outs[node] if chained_in[t]]
            for i in range(fan - 1, 0, -1):
                push(children[i])
                push(", ")
            push(children[0])
    return tuple(members), "".join(parts)


def _sorted_from_sources(
    sources: Sequence[int], vertex_outs: Sequence[list[int]], degrees: Sequence[int]
) -> list[int]:
    """``JobGraph.getVerticesSortedTopologicallyFromSources``, without its recursion.

    The vertices without inputs (source chains) come first; then, from each placed vertex in
    turn, its consumers in the order its outputs were connected, each as soon as all its
    producers are placed, depth first. A vertex is named by its head, and a non-chained edge
    always ends at a head (an operator behind a chained edge has no other input), so a head's
    input count is its vertex's count of producer edges.

    Flink also walks from the vertices placed after the sources, but that never places
    anything: such a vertex already walked its consumers when it was placed, and a consumer
    that was not ready then gets placed by the producer that makes it ready.
    """
    unplaced = list(degrees)  # per vertex: input edges from producers not placed yet
    placed: list[int] = list(sources)
    done = bytearray(len(unplaced))
    for vertex in placed:
        done[vertex] = 1
        for consumer in vertex_outs[vertex]:
            unplaced[consumer] -= 1
    append = placed.append
    for source in sources:
        # Depth first: a stack of the consumers still to look at, the next one on top.
        stack = vertex_outs[source][::-1]
        pop, extend = stack.pop, stack.extend
        while stack:
            vertex = pop()
            if done[vertex] or unplaced[vertex]:
                continue
            append(vertex)
            done[vertex] = 1
            consumers = vertex_outs[vertex]
            for consumer in consumers:
                unplaced[consumer] -= 1
            extend(reversed(consumers))
    return placed
