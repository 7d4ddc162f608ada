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
from itertools import compress
from typing import NamedTuple

from pytest_opid.model import (
    ChainingStrategy,
    ExchangeMode,
    Operator,
    Partitioner,
    SourceKind,
    Topology,
)

__all__ = ["Chain", "ChainingRule", "flink_chaining", "forward_chaining", "job_vertices"]

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
    targets = topology.edge_targets
    count = len(ops)
    degrees = topology.in_degrees
    chained_input = bytearray(count)  # per operator: 1 if a chainable edge leads into it
    for target in compress(targets, chainable):
        chained_input[target] = 1

    new = tuple.__new__  # builds the NamedTuple in C
    chains: dict[int, Chain] = {}  # by head
    chain_of = [0] * count  # operator -> head of its chain
    vertex_out: dict[int, Sequence[int]] = {}  # head -> non-chained out edges, in Flink's order
    for head in range(count):
        if degrees[head] == 1 and chained_input[head]:
            continue  # chained to its single input: not a head
        op = ops[head]
        head_outs = outs[head]
        for e in head_outs:
            if chainable[e]:
                break
        else:  # the common one-operator chain
            chains[head] = new(Chain, (head, (head,), op.name, op.parallelism))
            chain_of[head] = head
            vertex_out[head] = head_outs
            continue
        line = _straight_chain(head, outs, targets, chainable)
        if line is not None:  # half the chains of a real job: A -> B -> C
            members = tuple(reversed(line))
            name = " -> ".join([ops[m].name for m in line])
        else:
            members = _chain_members(head, outs, targets, chainable)
            name = chained_name(ops, outs, targets, chainable, head)
        chains[head] = new(Chain, (head, members, name, op.parallelism))
        for m in members:
            chain_of[m] = head
        vertex_out[head] = [e for m in members for e in outs[m] if not chainable[e]]

    order = _sorted_from_sources(topology.sources, vertex_out, targets, chain_of)
    return [chains[head] for head in order]


def _straight_chain(
    head: int, outs: Sequence[Sequence[int]], targets: Sequence[int], chainable: Sequence[bool]
) -> list[int] | None:
    """A chain's members from its head on, where every member has at most one chained output
    (its name is then ``A -> B -> C`` and its post-order the reverse); else None."""
    line = [head]
    node = head
    while True:
        chained = [e for e in outs[node] if chainable[e]]
        if not chained:
            return line
        if len(chained) > 1:
            return None
        node = targets[chained[0]]
        line.append(node)


def _chain_members(
    head: int, outs: Sequence[Sequence[int]], targets: Sequence[int], chainable: Sequence[bool]
) -> tuple[int, ...]:
    """A chain's members in depth-first post-order: chained outputs in output order, head last.

    The reverse of that post-order is a pre-order that takes the chained outputs right to left,
    which a stack yields with one push per member."""
    order: list[int] = []
    stack = [head]
    while stack:
        node = stack.pop()
        order.append(node)
        for e in outs[node]:
            if chainable[e]:
                stack.append(targets[e])
    order.reverse()
    return tuple(order)


def _sorted_from_sources(
    sources: Sequence[int],
    vertex_out: dict[int, Sequence[int]],
    targets: Sequence[int],
    chain_of: Sequence[int],
) -> list[int]:
    """``JobGraph.getVerticesSortedTopologicallyFromSources``, without its recursion.

    The vertices without inputs (source chains) come first; then, from each placed vertex in
    turn, its consumers in the order its outputs were connected, each as soon as all its
    producers are placed, depth first.

    Flink also walks from the vertices placed after the sources, but that never places
    anything: such a vertex already walked its consumers when it was placed, and a consumer
    that was not ready then gets placed by the producer that makes it ready.
    """
    consumers: dict[int, list[int]] = {}
    unplaced = [0] * len(chain_of)  # per vertex: input edges from producers not placed yet
    for head, out_edges in vertex_out.items():
        consumers[head] = vertex_consumers = [chain_of[targets[e]] for e in out_edges]
        for consumer in vertex_consumers:
            unplaced[consumer] += 1
    placed: list[int] = list(sources)
    done = bytearray(len(chain_of))
    for vertex in placed:
        done[vertex] = 1
        for consumer in consumers[vertex]:
            unplaced[consumer] -= 1
    for source in sources:
        # Depth first: a stack of the consumers still to look at, the next one on top.
        stack = consumers[source][::-1]
        while stack:
            vertex = stack.pop()
            if done[vertex] or unplaced[vertex]:
                continue
            placed.append(vertex)
            done[vertex] = 1
            next_consumers = consumers[vertex]
            for consumer in next_consumers:
                unplaced[consumer] -= 1
            stack.extend(reversed(next_consumers))
    return placed


def chained_name(
    ops: Sequence[Operator],
    outs: Sequence[Sequence[int]],
    targets: Sequence[int],
    chainable: Sequence[bool],
    head: int,
) -> str:
    """Flink's ``createChainedName``: ``A -> B`` for one chained output, ``A -> (B, C)`` for
    several. Built as one token list, since a long chain would make per-node strings quadratic."""
    parts: list[str] = []
    stack: list[int | str] = [head]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            parts.append(item)
            continue
        parts.append(ops[item].name)
        children = [targets[e] for e in outs[item] if chainable[e]]
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
