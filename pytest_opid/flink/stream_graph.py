"""Flink's StreamGraph, as the helper writes it (:meth:`~pytest_opid.flink.jvm.FlinkJvm.
stream_graph_json`), read into a :class:`~pytest_opid.model.Topology`, and its fingerprint:
pytest-opid's engine, with job vertex parallelism in ``BATCH`` mode as Flink's JobGraph
generation sets it. Flink only supplies the graph; the IDs and chains are ours.
"""

from __future__ import annotations

import heapq
import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pytest_opid.errors import DocumentError, OpidError
from pytest_opid.flink.chaining import ChainingRule, flink_chaining
from pytest_opid.flink.compute import compute
from pytest_opid.flink.jvm import FlinkJvm
from pytest_opid.model import (
    ChainingStrategy,
    Edge,
    ExchangeMode,
    Operator,
    Partitioner,
    RuntimeMode,
    SourceKind,
    Topology,
)
from pytest_opid.result import Fingerprint

__all__ = [
    "StreamGraphReading",
    "batch_vertex_parallelism",
    "fingerprint_reading",
    "read_stream_graph",
    "topology_from_graph_json",
]

_PARTITIONERS = {p.value: p for p in Partitioner}
_EXCHANGE_MODES = {m.value: m for m in ExchangeMode}
_STRATEGIES = {s.value: s for s in ChainingStrategy}
_SOURCES = {"new": SourceKind.NEW, "legacy": SourceKind.LEGACY}


@dataclass(frozen=True)
class StreamGraphReading:
    """A StreamGraph read into a :class:`Topology`. The topology numbers its operators 1, 2,
    ... in the order of Flink's node ids (Flink's ids come from a JVM-wide counter, so they
    depend on what else the JVM built; the order, which is all the hash uses, does not);
    ``flink_ids`` maps our numbers back to Flink's. ``operators`` holds each operator's class,
    for messages."""

    topology: Topology
    flink_ids: Mapping[int, int]
    operators: Mapping[int, str | None]
    #: per topology edge, Flink's partitioner class (``ForwardPartitioner``,
    #: ``ForwardForUnspecifiedPartitioner``, ...), which BATCH parallelism depends on
    partitioner_classes: tuple[str | None, ...] = ()
    #: whether the graph is dynamic (``BATCH`` under the adaptive batch scheduler)
    dynamic: bool = False
    #: how much the table planner's ExecNode numbers in operator names were lowered by (see
    #: :func:`topology_from_graph_json`)
    exec_node_offset: int = 0


def topology_from_graph_json(data: Mapping[str, Any]) -> StreamGraphReading:
    """The topology of a StreamGraph as the helper writes it (:meth:`FlinkJvm.stream_graph_json`).

    Flink keeps a node's outputs and its inputs in two lists; a topology keeps one edge list
    whose order gives both. Edges are appended to both lists when Flink creates them, so an
    order agreeing with every list exists; we find it by merging the lists (a topological sort
    of "comes before in some node's list")."""
    nodes = data["nodes"]
    if not nodes:
        raise OpidError("the stream graph has no operators")
    number = {node["id"]: i + 1 for i, node in enumerate(nodes)}
    edges: list[tuple[int, int, list[Any]]] = []  # (source id, position in its outs, entry)
    for node in nodes:
        for position, out in enumerate(node["out"]):
            edges.append((node["id"], position, out))
    chained = [n for n in nodes if n["chainedSource"] and _inputs(nodes, n) > 1]
    if chained:
        raise OpidError(
            f"Flink chains source {chained[0]['name']!r} into a multiple-input operator (the "
            "table planner's multiple-input optimisation of batch jobs), a chain pytest-opid's "
            "engine does not model; set table.optimizer.multiple-input-enabled: false"
        )
    order = _edge_order(nodes, len(edges))
    dynamic = bool(data.get("dynamic"))
    names, offset = _planner_names(nodes)
    operators = [
        Operator(
            id=number[node["id"]],
            name=names[i],
            parallelism=_parallelism(node["parallelism"]),
            max_parallelism=_parallelism(node["maxParallelism"]),
            slot_sharing_group=node["slotSharingGroup"],
            chaining_strategy=None if node["strategy"] is None else _STRATEGIES[node["strategy"]],
            uid=node["uid"],
            uid_hash=node["userHash"],
            source=_SOURCES.get(node["source"]) if node["source"] else None,
            yielding=bool(node["yielding"]),
            parallelism_configured=bool(node["configured"]),
        )
        for i, node in enumerate(nodes)
    ]
    topology_edges = []
    classes = []
    for e in order:
        source_id, _, (target, type_number, kind, mode, partitioner_class) = edges[e]
        classes.append(partitioner_class)
        exchange = _EXCHANGE_MODES.get(mode, ExchangeMode.UNDEFINED)
        if kind == "FORWARD_FOR_CONSECUTIVE_HASH":
            # Flink chains it whatever the exchange mode (in a dynamic graph, the only kind
            # that has it): a FORWARD edge that is not BATCH says the same to our rule.
            if not dynamic:
                raise DocumentError(
                    "a ForwardForConsecutiveHashPartitioner outside a dynamic (adaptive batch) "
                    "graph, which Flink itself rejects when it builds the JobGraph"
                )
            kind = "FORWARD"
            if exchange is ExchangeMode.BATCH:
                exchange = ExchangeMode.UNDEFINED
        topology_edges.append(
            Edge(
                number[source_id],
                number[target],
                _PARTITIONERS[kind],
                type_number,
                exchange,
            )
        )
    mode = RuntimeMode.BATCH if data.get("jobType") == "BATCH" else RuntimeMode.STREAMING
    topology = Topology(
        operators,
        topology_edges,
        chaining_enabled=bool(data["chaining"]),
        chain_different_max_parallelism=bool(data["differentMaxParallelism"]),
        runtime_mode=mode,
    )
    return StreamGraphReading(
        topology,
        {number[n["id"]]: n["id"] for n in nodes},
        {number[n["id"]]: n["operator"] for n in nodes},
        tuple(classes),
        dynamic,
        offset,
    )


_EXEC_NODE = re.compile(r"\[(\d+)\]")
_PLANNER = ("org.apache.flink.table.",)


def _planner_names(nodes: Sequence[Mapping[str, Any]]) -> tuple[list[str], int]:
    """Operator names, with the table planner's ExecNode numbers (``Calc[27]``) counted from 1.

    The planner numbers ExecNodes with a JVM-wide counter, so the same SQL job is ``Calc[3]``
    in a fresh JVM (a deployed job's client) and ``Calc[27]`` after other jobs were planned
    in the same JVM (a test session). In a job with planner operators we lower every ``[N]``
    in a name (the planner's sources and sinks carry them too) so that the smallest is 1, as
    a fresh JVM numbers them; names never decide an ID."""
    names = [n["name"] for n in nodes]
    if not any((n.get("operator") or "").startswith(_PLANNER) for n in nodes):
        return names, 0
    found = [int(m) for name in names for m in _EXEC_NODE.findall(name)]
    if not found:
        return names, 0
    offset = min(found) - 1
    return [_EXEC_NODE.sub(lambda m: f"[{int(m.group(1)) - offset}]", name) for name in names], (
        offset
    )


def fingerprint_reading(
    reading: StreamGraphReading, chaining: ChainingRule | None = None
) -> Fingerprint:
    """The fingerprint of a StreamGraph reading: pytest-opid's engine
    (:func:`~pytest_opid.flink.compute.compute`), with job vertex parallelism in ``BATCH``
    mode decided as Flink's JobGraph generation decides it for this graph
    (:func:`batch_vertex_parallelism`)."""
    fp = compute(reading.topology, chaining or flink_chaining)
    if reading.topology.runtime_mode is RuntimeMode.BATCH:
        fp = batch_vertex_parallelism(reading, fp)
    return fp


def batch_vertex_parallelism(reading: StreamGraphReading, fp: Fingerprint) -> Fingerprint:
    """Job vertex parallelism and max parallelism of a ``BATCH`` job, as Flink 2.3's
    ``StreamingJobGraphGenerator.setVertexParallelismsForDynamicGraphIfNecessary`` sets them.

    A static graph (batch without the adaptive batch scheduler) keeps each chain head's
    parallelism. In a dynamic graph a vertex none of whose operators had its parallelism
    configured gets -1 (decided at run time); vertices joined by a non-chained edge with a
    plain ``ForwardPartitioner`` form forward groups (transitively; Flink turns the default
    ``ForwardForUnspecifiedPartitioner`` into ``rescale`` between vertices, which joins no
    group), and a group with a configured vertex gives its parallelism to all of its vertices,
    and the smallest positive max parallelism among them to all. Unlike a topology document, a
    StreamGraph reading knows each edge's partitioner class, so this is exact."""
    topology = reading.topology
    ops = topology.operators
    vertex_of: dict[int, int] = {}  # operator id -> vertex position
    for position, vertex in enumerate(fp.job_vertices):
        for node in vertex.nodes:
            vertex_of[node] = position
    heads = [topology.operator(v.nodes[-1]) for v in fp.job_vertices]
    parallelism = [head.parallelism for head in heads]
    max_parallelism = [head.max_parallelism for head in heads]
    if reading.dynamic:
        configured = [False] * len(heads)
        for op in ops:
            if op.parallelism_configured:
                configured[vertex_of[op.id]] = True
        parallelism = [p if c else -1 for p, c in zip(parallelism, configured, strict=True)]
        parent = list(range(len(heads)))

        def root(x: int) -> int:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for edge, cls in zip(topology.edges, reading.partitioner_classes, strict=True):
            up, down = vertex_of[edge.source], vertex_of[edge.target]
            if up != down and cls == "ForwardPartitioner":
                parent[root(up)] = root(down)
        group_parallelism: dict[int, int] = {}
        group_max: dict[int, int] = {}
        for v in range(len(heads)):
            r = root(v)
            if configured[v]:
                group_parallelism.setdefault(r, parallelism[v])
            if max_parallelism[v] > 0:
                group_max[r] = min(group_max.get(r, max_parallelism[v]), max_parallelism[v])
        for v in range(len(heads)):
            r = root(v)
            parallelism[v] = group_parallelism.get(r, parallelism[v])
            max_parallelism[v] = group_max.get(r, max_parallelism[v])
    vertices = tuple(
        v._replace(parallelism=p, max_parallelism=m)
        for v, p, m in zip(fp.job_vertices, parallelism, max_parallelism, strict=True)
    )
    return replace(fp, job_vertices=vertices)


def _parallelism(value: int) -> int:
    return value if value > 0 else -1


def _inputs(nodes: Sequence[Mapping[str, Any]], source: Mapping[str, Any]) -> int:
    target = source["out"][0][0] if source["out"] else None
    return next((len(n["in"]) for n in nodes if n["id"] == target), 0)


def _edge_order(nodes: Sequence[Mapping[str, Any]], count: int) -> list[int]:
    """One order of all edges that keeps every node's out-list and in-list order."""
    after: list[list[int]] = [[] for _ in range(count)]
    indegree = [0] * count
    first = 0
    chains: list[list[int]] = []
    for node in nodes:
        outs = list(range(first, first + len(node["out"])))
        first += len(node["out"])
        chains.append(outs)
    for node in nodes:
        ins = node["in"]
        if any(not 0 <= e < count for e in ins):
            raise DocumentError(f"operator {node['name']!r} has an input edge no node outputs")
        chains.append(ins)
    for chain in chains:
        for a, b in itertools.pairwise(chain):
            after[a].append(b)
            indegree[b] += 1
    # Kahn's algorithm, smallest edge number first: among the edges free to go next, the one
    # whose source comes first.
    ready = [e for e in range(count) if indegree[e] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        e = heapq.heappop(ready)
        order.append(e)
        for f in after[e]:
            indegree[f] -= 1
            if indegree[f] == 0:
                heapq.heappush(ready, f)
    if len(order) != count:
        raise DocumentError(
            "the stream graph's input and output edge lists disagree on the order of its edges"
        )
    return order


def read_stream_graph(j_graph: Any) -> StreamGraphReading:
    """Read a Java ``StreamGraph`` (a py4j object) into a topology."""
    return topology_from_graph_json(FlinkJvm.get().stream_graph_json(j_graph))
