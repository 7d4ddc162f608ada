"""A Spark plan graph as a fingerprint: operator IDs by the topology core's structural hash (the
one Flink's OperatorIDs use, so a shape change shows as in Flink) over Spark's operators, stages
cut where Spark puts an exchange, and the stateful operators with their stores and meaning."""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from pytest_opid.model import Operator, Partitioner, Topology
from pytest_opid.result import (
    ChainedOperator,
    Fingerprint,
    JobVertex,
    OperatorFingerprint,
    StateOperator,
)
from pytest_opid.spark.query.graph import SparkPlanGraph
from pytest_opid.spark.vocabulary import ENGINE
from pytest_opid.topology import Chain, operator_ids


def fingerprint_graph(graph: SparkPlanGraph) -> Fingerprint:
    """OperatorIDs under Spark's chaining rule, Spark's stages as job vertices, state ids."""
    topology = graph.topology
    chainable = spark_chaining(topology)
    ids = [h.hex() for h in operator_ids(topology, chainable)]
    ops = topology.operators
    vertex_of = [""] * len(ops)
    vertices = []
    for stage in spark_stages(topology, chainable):
        vertex_id = ids[stage.head]
        for m in stage.members:
            vertex_of[m] = vertex_id
        vertices.append(
            JobVertex(
                id=vertex_id,
                name=stage.name,
                parallelism=stage.parallelism,
                operators=tuple(ChainedOperator(ids[m]) for m in stage.members),
                nodes=tuple(ops[m].id for m in stage.members),
            )
        )
    operators = tuple(
        OperatorFingerprint(
            node=op.id,
            name=op.name,
            operator_id=ids[i],
            parallelism=op.parallelism,
            job_vertex=vertex_of[i],
        )
        for i, op in enumerate(ops)
    )
    states = None
    if graph.state_operators is not None:
        states = tuple(
            StateOperator(
                state_operator_id=s.state_operator_id,
                operator_id=ids[topology.index_of(s.node)],
                name=f"{topology.operator(s.node).name}({', '.join(s.key_types)})",
                kind=s.kind,
                stores=s.stores,
                meaning=s.meaning,
            )
            for s in graph.state_operators
        )
    mode = "batch" if states is None else "streaming"
    edges = tuple(
        (e.source, e.target, _EXCHANGE_LABELS.get(e.partitioner, "exchange"))
        for e in topology.edges
    )
    return Fingerprint(
        operators,
        tuple(vertices),
        states,
        ENGINE,
        mode,
        graph.sources,
        edges,
        graph.plan,
        graph.settings,
    )


#: How an edge's records travel, in Spark's terms: pipelined within a stage (no label) or
#: through an exchange, which ends a stage (range and other partitionings: ``exchange``).
_EXCHANGE_LABELS = {
    Partitioner.FORWARD: "",
    Partitioner.HASH: "hash exchange",
    Partitioner.REBALANCE: "round-robin exchange",
    Partitioner.GLOBAL: "single-partition exchange",
    Partitioner.BROADCAST: "broadcast exchange",
}


def spark_chaining(topology: Topology) -> list[bool]:
    """Spark pipelines every operator into its consumer unless an exchange sits between them:
    an edge is chainable iff it is FORWARD, whatever the number of inputs of its target."""
    return [edge.partitioner is Partitioner.FORWARD for edge in topology.edges]


def spark_stages(topology: Topology, chainable: Sequence[bool]) -> list[Chain]:
    """Group operators into Spark's stages: the connected groups of chainable edges.

    Each stage's ``head`` is its *last* operator (the one whose output leaves the stage, Spark's
    final RDD), ``members`` are in operator order (for this frontend's topologies: inputs
    first, head last), and stages come in topological order, ties broken by head position.
    The name follows Flink's style read upstream: ``A -> B``, ``(A, B) -> Union -> C``.
    """
    ops = topology.operators
    count = len(ops)
    ends = topology.edge_ends
    parent = list(range(count))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for e, (up, down) in enumerate(ends):
        if chainable[e]:
            a, b = find(up), find(down)
            if a != b:
                parent[max(a, b)] = min(a, b)
    groups: dict[int, list[int]] = {}
    for node in range(count):
        groups.setdefault(find(node), []).append(node)

    outs = topology.out_edges
    ins = topology.in_edges
    head_of: dict[int, int] = {}
    for root, members in groups.items():
        tops = [m for m in members if not any(chainable[e] for e in outs[m])]
        head_of[root] = tops[-1] if tops else members[-1]

    # Topological order of the stages, smallest head position first among the ready ones.
    stage_of = [head_of[find(n)] for n in range(count)]
    downstream: dict[int, set[int]] = {}
    pending = dict.fromkeys(head_of.values(), 0)
    for up, down in ends:
        a, b = stage_of[up], stage_of[down]
        if a != b and b not in downstream.setdefault(a, set()):
            downstream[a].add(b)
            pending[b] += 1
    ready = [h for h, n in pending.items() if n == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        head = heapq.heappop(ready)
        order.append(head)
        for b in sorted(downstream.get(head, ())):
            pending[b] -= 1
            if pending[b] == 0:
                heapq.heappush(ready, b)

    chained_ins = [[ends[e][0] for e in ins[n] if chainable[e]] for n in range(count)]
    return [
        Chain(
            head=head,
            members=tuple(groups[find(head)]),
            name=_stage_name(ops, chained_ins, head),
            parallelism=ops[head].parallelism,
        )
        for head in order
    ]


def _stage_name(ops: Sequence[Operator], chained_ins: Sequence[Sequence[int]], head: int) -> str:
    """``A -> B`` read from the stage's inputs to its head, built without recursion."""
    parts: list[str] = []
    stack: list[int | str] = [head]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            parts.append(item)
            continue
        assert isinstance(item, int)
        node = item
        inputs = chained_ins[node]
        stack.append(ops[node].name)
        if len(inputs) == 1:
            stack.append(" -> ")
            stack.append(inputs[0])
        elif inputs:
            stack.append(") -> ")
            for i, up in enumerate(reversed(inputs)):
                if i:
                    stack.append(", ")
                stack.append(up)
            stack.append("(")
    return "".join(parts)
