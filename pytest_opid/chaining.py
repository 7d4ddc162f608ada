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
from typing import NamedTuple

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


class Chain(NamedTuple):
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

    Flink recurses over operators: for a node it follows its chainable outputs first (same
    chain), then its non-chainable ones (each starts a new chain unless that chain is built
    already), then appends the node to its chain, and creates the JobVertex once it is back at
    the chain's head. Unrolled, that gives three facts we compute without recursion:

    * a chain's members are its chain tree (chainable edges) in depth-first post-order;
    * its non-chained outputs are its members' non-chainable edges, in that member order;
    * a JobVertex is created after the chains behind those outputs (the first time each is
      reached), so creation order is a post-order over chains.
    """
    ops = topology.operators
    outs = topology.out_edges
    ends = topology.edge_ends
    count = len(ops)

    # Filled per chain as it is opened: chainable output targets, non-chainable output edges.
    chained_children: list[tuple[int, ...]] = [()] * count
    non_chained: list[tuple[int, ...]] = [()] * count
    walk = (outs, chainable, chained_children, non_chained, ends)

    members: dict[int, list[int]] = {}
    chain_of = [0] * count
    vertex_out: dict[int, list[int]] = {}
    vertex_order: list[int] = []
    built = bytearray(count)
    for source in topology.sources:
        if built[source]:
            continue
        built[source] = 1
        # Each frame: (head, iterator over the chain's non-chained targets).
        stack = [(source, iter(_open_chain(source, walk, members, chain_of, vertex_out)))]
        while stack:
            head, targets = stack[-1]
            target = next(targets, None)
            if target is None:
                stack.pop()
                vertex_order.append(head)
            elif not built[target]:
                built[target] = 1
                stack.append(
                    (target, iter(_open_chain(target, walk, members, chain_of, vertex_out)))
                )

    order = _sorted_from_sources(vertex_order, vertex_out, ends, chain_of)
    return [
        Chain(
            head=head,
            members=tuple(members[head]),
            name=chained_name(ops, chained_children, head),
            parallelism=ops[head].parallelism,
        )
        for head in order
    ]


def _open_chain(
    head: int,
    walk: tuple,
    members: dict[int, list[int]],
    chain_of: list[int],
    vertex_out: dict[int, list[int]],
) -> list[int]:
    """Collect a chain's members in post-order and return the targets of its non-chained
    outputs, in the order Flink's recursion reaches them."""
    outs, chainable, chained_children, non_chained, ends = walk
    head_outs = outs[head]
    if not any(chainable[e] for e in head_outs):  # the common one-operator chain
        members[head] = [head]
        chain_of[head] = head
        vertex_out[head] = list(head_outs)
        return [ends[e][1] for e in head_outs]
    post: list[int] = []
    out_edges: list[int] = []
    stack = [(head, 0)]
    while stack:
        node, i = stack.pop()
        if i == 0:
            children = []
            others = []
            for e in outs[node]:
                if chainable[e]:
                    children.append(ends[e][1])
                else:
                    others.append(e)
            chained_children[node] = children
            non_chained[node] = others
        children = chained_children[node]
        if i < len(children):
            stack.append((node, i + 1))
            stack.append((children[i], 0))
        else:
            post.append(node)
            chain_of[node] = head
            out_edges.extend(non_chained[node])
    members[head] = post
    vertex_out[head] = out_edges
    return [ends[e][1] for e in out_edges]


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
    count = len(chain_of)
    consumers: list[list[int]] = [[] for _ in range(count)]
    unplaced = [0] * count  # per vertex: input edges whose producer is not placed yet
    for head in vertex_order:
        targets = consumers[head]
        for e in vertex_out[head]:
            target = chain_of[ends[e][1]]
            targets.append(target)
            unplaced[target] += 1
    placed: list[int] = [h for h in vertex_order if not unplaced[h]]
    done = bytearray(count)
    for vertex in placed:
        done[vertex] = 1
        for target in consumers[vertex]:
            unplaced[target] -= 1
    position = 0
    while position < len(placed):
        start = placed[position]
        position += 1
        stack = [iter(consumers[start])]
        while stack:
            target = next(stack[-1], -1)
            if target < 0:
                stack.pop()
            elif not done[target] and not unplaced[target]:
                placed.append(target)
                done[target] = 1
                next_targets = consumers[target]
                for t in next_targets:
                    unplaced[t] -= 1
                stack.append(iter(next_targets))
    return placed


def chained_name(ops, chained_children: Sequence[Sequence[int]], head: int) -> str:
    """Flink's ``createChainedName``: ``A -> B`` for one chained output, ``A -> (B, C)`` for
    several. Built as one token list, since a long chain would make per-node strings quadratic."""
    if not chained_children[head]:
        return ops[head].name
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
