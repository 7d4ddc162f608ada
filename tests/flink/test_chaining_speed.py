"""``job_vertices`` against a plain model of Flink's chain building and JobGraph ordering.

``job_vertices`` is tuned for speed (one walk per chain tree, shortcuts for the rules that chain
only into single-input operators); the reference here is written the obvious way from Flink's
``StreamingJobGraphGenerator.createChain``/``createChainedName`` and
``JobGraph.getVerticesSortedTopologicallyFromSources``: per node a list of chained outputs, a
frame stack standing for each recursion, and a ``remaining`` set as in Flink's sort. It is
iterative too, so the 100,000-operator chains below check both sides for recursion.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_opid.flink.chaining import Chain, flink_chaining, forward_chaining, job_vertices
from pytest_opid.model import ChainingStrategy, Edge, Operator, Partitioner, Topology
from pytest_opid.strategies import topologies


def reference_job_vertices(t: Topology, chainable: Sequence[bool]) -> list[Chain]:
    count = len(t.operators)
    targets = t.edge_targets
    ins: list[list[int]] = [[] for _ in range(count)]
    outs: list[list[int]] = [[] for _ in range(count)]
    for k, (source, target) in enumerate(zip(t.edge_sources, targets, strict=True)):
        outs[source].append(k)
        ins[target].append(k)

    def chained(node: int) -> list[int]:
        return [targets[k] for k in outs[node] if chainable[k]]

    def post_order(head: int) -> list[int]:
        order: list[int] = []
        frames = [(head, iter(chained(head)))]
        while frames:
            node, children = frames[-1]
            child = next(children, None)
            if child is None:
                frames.pop()
                order.append(node)
            else:
                frames.append((child, iter(chained(child))))
        return order

    def chained_name(head: int) -> str:
        text: list[str] = []
        frames: list[tuple[int, list[int], int]] = []  # node, its chained outputs, next one

        def enter(node: int) -> None:
            children = chained(node)
            text.append(t.operators[node].name)
            text.append({0: "", 1: " -> "}.get(len(children), " -> ("))
            frames.append((node, children, 0))

        enter(head)
        while frames:
            node, children, i = frames.pop()
            if i == len(children):
                text.append(")" if len(children) > 1 else "")
                continue
            frames.append((node, children, i + 1))
            if i > 0:
                text.append(", ")
            enter(children[i])
        return "".join(text)

    heads = [v for v in range(count) if not (len(ins[v]) == 1 and chainable[ins[v][0]])]
    chains: dict[int, Chain] = {}
    chain_of: dict[int, int] = {}
    for head in heads:
        members = post_order(head)
        op = t.operators[head]
        chains[head] = Chain(head, tuple(members), chained_name(head), op.parallelism)
        for m in members:
            chain_of[m] = head
    consumers = {
        head: [
            chain_of[targets[k]] for m in chains[head].members for k in outs[m] if not chainable[k]
        ]
        for head in heads
    }
    producers: dict[int, list[int]] = {head: [] for head in heads}
    for head in heads:
        for consumer in consumers[head]:
            producers[consumer].append(head)

    # getVerticesSortedTopologicallyFromSources: the vertices without inputs in creation
    # order (ascending source id), then addNodesThatHaveNoNewPredecessors from each in turn.
    placed = sorted((h for h in heads if not producers[h]), key=lambda h: t.operators[h].id)
    remaining = set(heads) - set(placed)
    position = 0
    while remaining:
        walks = [iter(consumers[placed[position]])]
        position += 1
        while walks:
            vertex = next(walks[-1], None)
            if vertex is None:
                walks.pop()
            elif vertex in remaining and not any(p in remaining for p in producers[vertex]):
                placed.append(vertex)
                remaining.remove(vertex)
                walks.append(iter(consumers[vertex]))
    return [chains[head] for head in placed]


def single_input_rule(t: Topology, rnd: random.Random) -> list[bool]:
    """A random custom rule that, like Flink's, chains only into single-input operators."""
    degrees = t.in_degrees
    return [degrees[target] == 1 and rnd.random() < 0.8 for target in t.edge_targets]


# Mostly FORWARD edges between equal parallelisms in one group: many operators with several
# chained outputs, long chains and chains of one.
chain_heavy = topologies(
    max_operators=40,
    parallelism=(2, 2),
    default_parallelism=False,
    partitioners=(Partitioner.FORWARD, Partitioner.FORWARD, Partitioner.REBALANCE),
    slot_sharing_groups=("default",),
    chaining_strategies=(ChainingStrategy.ALWAYS,),
    chaining_disabled=False,
)


@settings(max_examples=300)
@given(st.one_of(topologies(), chain_heavy), st.randoms(use_true_random=False))
def test_job_vertices_match_the_plain_model(t, rnd):
    for chainable in (flink_chaining(t), forward_chaining(t), single_input_rule(t, rnd)):
        assert job_vertices(t, chainable) == reference_job_vertices(t, chainable)


def test_some_generated_operators_have_several_chained_outputs():
    """The strategy above does reach the several-outputs case (``A -> (B, C)``)."""
    seen: list[bool] = []

    @settings(max_examples=50, database=None)
    @given(chain_heavy)
    def collect(t):
        seen.append(any("(" in c.name for c in job_vertices(t, flink_chaining(t))))

    collect()
    assert any(seen)


def _long_topology(size: int, branching: bool) -> Topology:
    """A 100,000-operator chain: a straight line, or a comb whose every operator has a leaf
    and the rest of the comb as chained outputs."""
    ops = [Operator(i, "Source" if i == 0 else f"Op{i % 7}", 1) for i in range(size)]
    if not branching:
        return Topology(ops, [Edge(i, i + 1) for i in range(size - 1)])
    edges = []
    for a in range(0, size - 1, 2):
        edges.append(Edge(a, a + 1))  # a leaf first,
        if a + 2 < size:
            edges.append(Edge(a, a + 2))  # then the rest of the comb
    return Topology(ops, edges)


def test_chains_of_100000_operators():
    for branching in (False, True):
        t = _long_topology(100_000, branching)
        chainable = flink_chaining(t)
        got = job_vertices(t, chainable)
        assert got == reference_job_vertices(t, chainable)
        assert len(got) == 1 and len(got[0].members) == len(t.operators)
