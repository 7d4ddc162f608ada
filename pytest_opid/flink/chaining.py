"""Chaining rules and operator chains (Flink's JobVertices).

Flink fuses operators connected by a chainable edge into one task, a JobVertex. Which edges are
chainable decides both the chains and, through the hasher's count of chainable outputs, the
OperatorIDs themselves. A :data:`~pytest_opid.topology.chains.ChainingRule` maps a topology to
one flag per edge; :func:`flink_chaining` is Flink 2.3's rule and the default everywhere. Other
engines (the Spark frontend) pass their own rule. The rule's type and
:class:`~pytest_opid.topology.chains.Chain` belong to the topology core, which both engines share.

:func:`job_vertices` then grows the chains exactly as Flink's ``StreamingJobGraphGenerator`` does
and lists them in the order of ``JobGraph.getVerticesSortedTopologicallyFromSources()``. All
walks are iterative: a million-operator chain must not hit Python's recursion limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress

from pytest_opid.model import (
    ChainingStrategy,
    ExchangeMode,
    Operator,
    Partitioner,
    SourceKind,
    Topology,
)
from pytest_opid.topology.chains import Chain, ChainingRule

__all__ = ["Chain", "ChainingRule", "flink_chaining", "forward_chaining", "job_vertices"]

# Module constants rather than ``Partitioner.FORWARD`` in the loops: looking up an enum member
# on its class is slow enough in Python 3.11 to show on a 100k-operator job.
_FORWARD = Partitioner.FORWARD
_BATCH = ExchangeMode.BATCH
_LEGACY = SourceKind.LEGACY
_NEW = SourceKind.NEW
_NEVER = ChainingStrategy.NEVER
_ALWAYS = ChainingStrategy.ALWAYS
_HEAD_WITH_SOURCES = ChainingStrategy.HEAD_WITH_SOURCES


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
    if any(op.source is _LEGACY for op in ops):
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


def job_vertices(topology: Topology, chainable: Sequence[bool]) -> list[Chain]:
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
    """
    ops = topology.operators
    outs = topology.out_edges
    targets = topology.edge_targets
    count = len(ops)
    degrees = topology.in_degrees
    # One pass over the chainable edges finds the heads and, per operator, its chained outputs'
    # targets in output order (the chain trees). The rules here chain only into single-input
    # operators ("regular"); a custom rule that does otherwise takes the slow path below.
    is_head = bytearray(b"\x01") * count
    children: dict[int, list[int]] = {}
    regular = True
    for source, target in compress(zip(topology.edge_sources, targets, strict=True), chainable):
        if degrees[target] == 1:
            is_head[target] = 0
        else:
            regular = False
        kids = children.get(source)
        if kids is None:
            children[source] = [target]
        else:
            kids.append(target)
    heads = list(compress(range(count), is_head))

    new = tuple.__new__  # builds the NamedTuple in C
    chains: dict[int, Chain] = {}  # by head
    vertex_out: list[Sequence[int]] = list(outs)  # head -> non-chained out edges, Flink's order
    for head in heads:
        op = ops[head]
        if head in children:
            members, name, vertex_out[head] = _grow_chain(head, children, ops, outs, chainable)
            chains[head] = new(Chain, (head, members, name, op.parallelism))
        else:  # the common one-operator chain: all its outputs leave it
            chains[head] = new(Chain, (head, (head,), op.name, op.parallelism))

    if regular:
        # Every non-chained edge ends at a head, and every input of a head is non-chained.
        edge_vertex: Sequence[int] = targets
        unplaced = list(degrees)
    else:  # an operator may sit in several chains; the chain grown last claims it
        chain_of = [0] * count
        for head in heads:
            for m in chains[head].members:
                chain_of[m] = head
        edge_vertex = [chain_of[target] for target in targets]
        unplaced = [0] * count
        for head in heads:
            for e in vertex_out[head]:
                unplaced[edge_vertex[e]] += 1
    order = _sorted_from_sources(topology.sources, vertex_out, edge_vertex, unplaced)
    return list(map(chains.__getitem__, order))


def _grow_chain(
    head: int,
    children: dict[int, list[int]],
    ops: Sequence[Operator],
    outs: Sequence[Sequence[int]],
    chainable: Sequence[bool],
) -> tuple[tuple[int, ...], str, list[int]]:
    """One walk of a chain tree giving its members, its name and its non-chained out edges.

    Members are ``createChain``'s depth-first post-order (chained outputs in output order, head
    last); the name is ``createChainedName``'s ``A -> B`` for one chained output and
    ``A -> (B, C)`` for several, nested. The walk is a pre-order for the name: the stack holds
    operators to visit, the name's ``", "`` and ``")"`` still to write, and ``~node`` where a
    node's chained outputs are all done, which is its place in the post-order. The name is one
    token list, since a long chain would make per-node strings quadratic.
    """
    members: list[int] = []
    out: list[int] = []
    parts: list[str] = []
    stack: list[int | str] = [head]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            parts.append(item)
        elif item < 0:  # post-order place of a node with chained outputs
            node = ~item
            members.append(node)
            node_outs = outs[node]
            if len(node_outs) != len(children[node]):
                out += [e for e in node_outs if not chainable[e]]
        else:
            parts.append(ops[item].name)
            kids = children.get(item)
            if kids is None:  # ends the chain: all its outputs leave it
                members.append(item)
                out += outs[item]
            elif len(kids) == 1:
                parts.append(" -> ")
                stack.append(~item)
                stack.append(kids[0])
            else:
                parts.append(" -> (")
                stack.append(~item)
                stack.append(")")
                for i in range(len(kids) - 1, 0, -1):
                    stack.append(kids[i])
                    stack.append(", ")
                stack.append(kids[0])
    return tuple(members), "".join(parts), out


def _sorted_from_sources(
    sources: Sequence[int],
    vertex_out: Sequence[Sequence[int]],
    edge_vertex: Sequence[int],
    unplaced: list[int],
) -> list[int]:
    """``JobGraph.getVerticesSortedTopologicallyFromSources``, without its recursion.

    The vertices without inputs (source chains) come first; then, from each placed vertex in
    turn, its consumers in the order its outputs were connected, each as soon as all its
    producers are placed, depth first. ``edge_vertex`` is the consuming vertex of each edge;
    ``unplaced`` counts per vertex its input edges from producers not placed yet, and is
    consumed (-1 marks a placed vertex).

    Flink also walks from the vertices placed after the sources, but that never places
    anything: such a vertex already walked its consumers when it was placed, and a consumer
    that was not ready then gets placed by the producer that makes it ready.
    """
    placed = list(sources)
    for source in sources:
        unplaced[source] = -1
        for e in vertex_out[source]:
            unplaced[edge_vertex[e]] -= 1
    for source in sources:
        # Depth first: a stack of the output edges still to look at, the next one on top.
        stack = list(reversed(vertex_out[source]))
        while stack:
            vertex = edge_vertex[stack.pop()]
            if unplaced[vertex]:  # waits for a producer, or placed already
                continue
            placed.append(vertex)
            unplaced[vertex] = -1
            vertex_edges = vertex_out[vertex]
            for e in vertex_edges:
                unplaced[edge_vertex[e]] -= 1
            stack += reversed(vertex_edges)
    return placed
