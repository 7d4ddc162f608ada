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

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from pytest_opid.topology import (
    ChainingStrategy,
    ExchangeMode,
    Partitioner,
    SourceKind,
    Topology,
)

__all__ = ["Chain", "ChainingRule", "flink_chaining", "forward_chaining", "job_vertices"]

#: A chaining rule answers, for every edge of a topology in edge order, "is it chainable?".
ChainingRule = Callable[[Topology], Sequence[bool]]


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
    ins = topology.in_edges
    ends = topology.edge_ends
    same_max = not topology.chain_different_max_parallelism
    # Flink refuses to chain a yielding operator behind a chain whose head is a legacy source
    # (the legacy source thread cannot yield to the mailbox). It finds the head by walking back
    # along single chainable inputs; we carry that answer forward in topological order instead.
    head_is_legacy = [False] * len(ops)
    for node in topology.topological_order:
        down = ops[node]
        node_ins = ins[node]
        if len(node_ins) == 1:
            e = node_ins[0]
            edge = edges[e]
            up_pos = ends[e][0]
            up = ops[up_pos]
            ok = (
                up.slot_sharing_group == down.slot_sharing_group
                and edge.partitioner is Partitioner.FORWARD
                and edge.exchange_mode is not ExchangeMode.BATCH
                and up.parallelism == down.parallelism
                and (not same_max or up.max_parallelism == down.max_parallelism)
                and _strategies_chain(up, down)
                and not (down.yielding and head_is_legacy[up_pos])
            )
            # With a single input the union check (no other input at the same type number)
            # always passes, so it needs no code here.
            chainable[e] = ok
            if ok:
                head_is_legacy[node] = head_is_legacy[up_pos]
                continue
        head_is_legacy[node] = down.source is SourceKind.LEGACY
    return chainable


def _strategies_chain(up, down) -> bool:
    """Flink's ``areOperatorsChainable`` switch over both chaining strategies."""
    up_strategy = up.chaining_strategy
    down_strategy = down.chaining_strategy
    if up_strategy is None or down_strategy is None:  # no operator factory: never chained
        return False
    if up_strategy is ChainingStrategy.NEVER:
        return False
    if down_strategy is ChainingStrategy.ALWAYS:
        return True
    if down_strategy is ChainingStrategy.HEAD_WITH_SOURCES:
        return up.source is SourceKind.NEW  # only behind a SourceOperatorFactory
    return False  # NEVER or HEAD downstream


def forward_chaining(topology: Topology) -> list[bool]:
    """Pipelining without Flink's extra conditions: an edge chains when it is FORWARD and its
    target has a single input. Engines that fuse everything between exchanges (Spark's stages)
    use this rule."""
    ins = topology.in_edges
    ends = topology.edge_ends
    return [
        edge.partitioner is Partitioner.FORWARD and len(ins[ends[i][1]]) == 1
        for i, edge in enumerate(topology.edges)
    ]


@dataclass(frozen=True)
class Chain:
    """One operator chain: what becomes a JobVertex.

    ``members`` are operator positions in Flink's order (depth-first post-order over the chain,
    head last); ``name`` is Flink's chained name (``A -> B``, ``A -> (B, C)``).
    """

    head: int
    members: tuple[int, ...]
    name: str
    parallelism: int


def job_vertices(topology: Topology, chainable: Sequence[bool]) -> list[Chain]:
    """Grow chains from the sources as ``StreamingJobGraphGenerator.createChain`` does.

    Flink recurses: for a node it first follows chainable outputs (same chain), then
    non-chainable ones (each starts a new chain unless built already), then adds the node to its
    chain, and creates the JobVertex when it reaches the chain's head again. We run the same
    recursion on an explicit stack of generators.
    """
    ops = topology.operators
    outs = topology.out_edges
    ends = topology.edge_ends
    count = len(ops)

    built = [False] * count  # chain heads whose JobVertex exists
    members: dict[int, list[int]] = {}  # head -> operators in post-order
    chained_children: list[tuple[int, ...]] = [()] * count  # node -> chainable output targets
    vertex_order: list[int] = []  # heads in JobVertex creation order
    vertex_out: dict[int, list[int]] = {}  # head -> its non-chainable (transitive) out edges

    def create_chain(node: int, head: int) -> Iterator[tuple[int, int]]:
        # Yields (node, head) sub-calls; the driver runs each to completion before resuming.
        if built[head]:
            return
        chained: list[int] = []
        non_chained: list[int] = []
        for e in outs[node]:
            (chained if chainable[e] else non_chained).append(e)
        for e in chained:
            yield ends[e][1], head
        for e in non_chained:
            vertex_out.setdefault(head, []).append(e)
            target = ends[e][1]
            yield target, target
        chained_children[node] = tuple(ends[e][1] for e in chained)
        members.setdefault(head, []).append(node)
        if node == head:
            built[head] = True
            vertex_order.append(head)

    for source in topology.sources:
        stack = [create_chain(source, source)]
        while stack:
            try:
                call = next(stack[-1])
            except StopIteration:
                stack.pop()
                continue
            stack.append(create_chain(*call))

    # Transitive out edges are recorded against the chain whose member emits them; Flink does
    # the same (they are collected up the chain and connected from the head).
    order = _sorted_from_sources(vertex_order, vertex_out, ends, _chain_of(members, count))
    return [
        Chain(
            head=head,
            members=tuple(members[head]),
            name=chained_name(ops, chained_children, head),
            parallelism=ops[head].parallelism,
        )
        for head in order
    ]


def _chain_of(members: dict[int, list[int]], count: int) -> list[int]:
    chain_of = [0] * count
    for head, nodes in members.items():
        for node in nodes:
            chain_of[node] = head
    return chain_of


def _sorted_from_sources(
    vertex_order: Sequence[int],
    vertex_out: dict[int, list[int]],
    ends: Sequence[tuple[int, int]],
    chain_of: Sequence[int],
) -> list[int]:
    """``JobGraph.getVerticesSortedTopologicallyFromSources``, without its recursion.

    Vertices without inputs come first in creation order; then, from each placed vertex in
    turn, its consumers (in the order its outputs were connected) as soon as all their
    producers are placed, depth first.
    """
    consumers: dict[int, list[int]] = {}
    unplaced: dict[int, int] = {}  # vertex -> its input edges whose producer is not placed yet
    for head in vertex_order:
        for e in vertex_out.get(head, ()):
            target = chain_of[ends[e][1]]
            consumers.setdefault(head, []).append(target)
            unplaced[target] = unplaced.get(target, 0) + 1
    placed: list[int] = [h for h in vertex_order if h not in unplaced]
    done = set(placed)

    def place(vertex: int) -> None:
        placed.append(vertex)
        done.add(vertex)
        for target in consumers.get(vertex, ()):
            unplaced[target] -= 1

    for vertex in placed[:]:
        for target in consumers.get(vertex, ()):
            unplaced[target] -= 1
    position = 0
    while position < len(placed):
        start = placed[position]
        position += 1
        stack = [iter(consumers.get(start, ()))]
        while stack:
            target = next(stack[-1], None)
            if target is None:
                stack.pop()
            elif target not in done and unplaced[target] == 0:
                place(target)
                stack.append(iter(consumers.get(target, ())))
    return placed


def chained_name(ops, chained_children: Sequence[Sequence[int]], head: int) -> str:
    """Flink's ``createChainedName``: ``A -> B`` for one chained output, ``A -> (B, C)`` for
    several. Built as one token list, since a long chain would make per-node strings quadratic."""
    parts: list[str] = []
    stack: list[object] = [head]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            parts.append(item)
            continue
        node = item
        parts.append(ops[node].name)
        children = chained_children[node]
        if len(children) == 1:
            parts.append(" -> ")
            stack.append(children[0])
        elif children:
            parts.append(" -> (")
            stack.append(")")
            for i in range(len(children) - 1, -1, -1):
                stack.append(children[i])
                if i:
                    stack.append(", ")
    return "".join(parts)
