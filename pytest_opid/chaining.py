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
    ins = topology.in_edges
    ends = topology.edge_ends
    count = len(ops)

    chained_children: list[list[int]] = [[]] * count  # filled for nodes with chained outputs
    chain_of = [0] * count
    members: dict[int, Sequence[int]] = {}
    vertex_out: dict[int, Sequence[int]] = {}  # head -> non-chained out edges, in Flink's order
    for head in range(count):
        head_ins = ins[head]
        if len(head_ins) == 1 and chainable[head_ins[0]]:
            continue  # chained to its single input: not a head
        head_outs = outs[head]
        for e in head_outs:
            if chainable[e]:
                break
        else:  # the common one-operator chain
            members[head] = (head,)
            chain_of[head] = head
            vertex_out[head] = head_outs
            continue
        post: list[int] = []
        out_edges: list[int] = []
        stack = [head]  # node: visit its chained outputs first; ~node: then emit it
        while stack:
            node = stack.pop()
            if node >= 0:
                children = [ends[e][1] for e in outs[node] if chainable[e]]
                chained_children[node] = children
                stack.append(~node)
                stack.extend(reversed(children))
            else:
                node = ~node
                post.append(node)
                chain_of[node] = head
                for e in outs[node]:
                    if not chainable[e]:
                        out_edges.append(e)
        members[head] = tuple(post)
        vertex_out[head] = out_edges

    order = _sorted_from_sources(topology.sources, vertex_out, ends, chain_of)
    new = tuple.__new__  # builds the NamedTuple in C
    return [
        new(
            Chain,
            (
                head,
                members[head],
                chained_name(ops, chained_children, head)
                if chained_children[head]
                else ops[head].name,
                ops[head].parallelism,
            ),
        )
        for head in order
    ]


def _sorted_from_sources(
    sources: Sequence[int],
    vertex_out: dict[int, Sequence[int]],
    ends: Sequence[tuple[int, int]],
    chain_of: Sequence[int],
) -> list[int]:
    """``JobGraph.getVerticesSortedTopologicallyFromSources``, without its recursion.

    The vertices without inputs (source chains) come first; then, from each placed vertex in
    turn, its consumers in the order its outputs were connected, each as soon as all its
    producers are placed, depth first.
    """
    consumers: dict[int, list[int]] = {}
    unplaced = [0] * len(chain_of)  # per vertex: input edges from producers not placed yet
    for head, out_edges in vertex_out.items():
        targets = [chain_of[ends[e][1]] for e in out_edges]
        consumers[head] = targets
        for target in targets:
            unplaced[target] += 1
    placed: list[int] = list(sources)
    done = bytearray(len(chain_of))
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
