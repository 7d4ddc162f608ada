"""Import Flink's execution plan JSON (``env.getExecutionPlan()``) as a :class:`Topology`.

The plan (Flink's ``JSONGenerator``) lists every StreamNode with its id, name (``type``), kind
(``pact``: ``Data Source``, ``Operator`` or ``Data Sink``), parallelism and its inputs
(``predecessors``, in the node's input order, with the partitioner as ``ship_strategy``). That is
most of what an OperatorID depends on, but not all of it. What the plan does not carry, and what
this module assumes unless the caller says otherwise (by node id):

* uids and uid hashes (``uids=``, ``uid_hashes=``);
* chaining strategies: ALWAYS, HEAD for a legacy source (``chaining_strategies=``), so a
  ``disableChaining()`` or ``startNewChain()`` is invisible;
* slot sharing groups: ``"default"`` (``slot_sharing_groups=``);
* max parallelism: unset (``max_parallelisms=``); and the job-wide switches
  ``chaining_enabled`` and ``chain_different_max_parallelism``;
* source kinds: a FLIP-27 source, except ``"Source: Custom Source"`` (the name Flink gives an
  unnamed ``addSource``), which is legacy (``source_kinds=``);
* yielding operators: a node named ``"...: Writer"`` that is not a Data Sink is a Sink V2
  writer;
* input positions (``type_number``): a node named ``"Co-..."`` with exactly two inputs is a
  two-input operator (1, 2), anything else one-input (0) (``type_numbers=``);
* the order of each node's outputs. Flink's hash visits outputs in the order they were
  created, which the plan does not show. Flink creates an operator's input edges when it
  translates the operator, in id order, so outputs are ordered by their target's id, except
  that a Sink V2 writer gets its id when the sink is expanded, after every other operator,
  though its edge was made when ``sinkTo`` was called. The import puts writers last, which
  is right when ``sinkTo`` came after the sibling operators; ``output_order=`` fixes the rest.

The plan's ``side`` field is always ``"second"`` in Flink's printer and carries nothing.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Iterable, Mapping, Sequence
from itertools import pairwise
from typing import Any

from pytest_opid.errors import DocumentError, TopologyError
from pytest_opid.io.json import describe_json, label, parse_json, read_json
from pytest_opid.model import (
    ChainingStrategy,
    Edge,
    Operator,
    Partitioner,
    SourceKind,
    Topology,
)

__all__ = ["load_plan", "topology_from_plan"]

_PACTS = ("Data Source", "Operator", "Data Sink")
_LEGACY_SOURCE_NAMES = frozenset({"Source: Custom Source"})


def load_plan(
    source: str | os.PathLike[str] | Mapping[str, Any],
    **options: Any,
) -> Topology:
    """A topology from a plan given as a mapping, a JSON string or a path to a JSON file.

    ``options`` are those of :func:`topology_from_plan`.
    """
    if isinstance(source, Mapping):
        return topology_from_plan(source, **options)
    if isinstance(source, str) and source.lstrip().startswith("{"):
        return topology_from_plan(parse_json(source, "the plan"), **options)
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(
            "load_plan() takes a dict, a JSON string or a path, "
            f"got {type(source).__module__}.{type(source).__qualname__}"
        )
    data = read_json(source)
    try:
        return topology_from_plan(data, **options)
    except (DocumentError, TopologyError) as exc:
        raise type(exc)(f"{source}: {exc}") from None


def topology_from_plan(
    data: Any,
    *,
    uids: Mapping[int, str] | None = None,
    uid_hashes: Mapping[int, str] | None = None,
    slot_sharing_groups: Mapping[int, str | None] | None = None,
    chaining_strategies: Mapping[int, ChainingStrategy | str | None] | None = None,
    max_parallelisms: Mapping[int, int] | None = None,
    source_kinds: Mapping[int, SourceKind | str | None] | None = None,
    type_numbers: Mapping[int, Sequence[int]] | None = None,
    output_order: Mapping[int, Sequence[int]] | None = None,
    chaining_enabled: bool = True,
    chain_different_max_parallelism: bool = True,
) -> Topology:
    """Build the topology a parsed execution plan describes, completed by the caller's facts.

    Every mapping is keyed by plan node id. ``type_numbers[n]`` gives the input position of
    each of node ``n``'s predecessors in plan order; ``output_order[n]`` lists the ids of the
    nodes ``n`` feeds, in the order Flink created those edges (a target fed twice appears
    twice).
    """
    nodes = _nodes(data)
    ids = [n["id"] for n in nodes]
    known = set(ids)
    for option, mapping in (
        ("uids", uids),
        ("uid_hashes", uid_hashes),
        ("slot_sharing_groups", slot_sharing_groups),
        ("chaining_strategies", chaining_strategies),
        ("max_parallelisms", max_parallelisms),
        ("source_kinds", source_kinds),
        ("type_numbers", type_numbers),
        ("output_order", output_order),
    ):
        _check_keys(option, mapping, known)

    operators = [
        _operator(
            node,
            uids or {},
            uid_hashes or {},
            slot_sharing_groups or {},
            chaining_strategies or {},
            max_parallelisms or {},
            source_kinds or {},
        )
        for node in nodes
    ]
    edges = _edges(nodes, known, type_numbers or {})
    edges = _order_edges(edges, output_order or {})
    return Topology(
        operators,
        edges,
        chaining_enabled=chaining_enabled,
        chain_different_max_parallelism=chain_different_max_parallelism,
    )


# -- nodes ---------------------------------------------------------------------------------------


def _nodes(data: Any) -> list[Mapping[str, Any]]:
    if not isinstance(data, Mapping):
        raise DocumentError(
            "a Flink execution plan is a JSON object with a 'nodes' list, "
            f"got {describe_json(data)}"
        )
    if "nodes" not in data:
        raise DocumentError("the plan has no 'nodes' list")
    nodes = data["nodes"]
    if not isinstance(nodes, list):
        raise DocumentError(f"the plan's 'nodes' must be a list, got {describe_json(nodes)}")
    seen: set[int] = set()
    for position, node in enumerate(nodes):
        node_id = _id_of(node, f"plan node #{position}")
        if node_id in seen:
            raise DocumentError(f"duplicate plan node id {node_id}")
        seen.add(node_id)
        where = f"plan node {node_id}"
        if "type" not in node and "contents" not in node:
            raise DocumentError(f"{where} has no 'type' (its name)")
        for key in ("type", "contents"):
            if key in node and not isinstance(node[key], str):
                raise DocumentError(f"{where}: {key!r} must be a string, got {label(node[key])}")
        pact = node.get("pact", "Operator")
        if pact == "IterativeDataStream":
            raise DocumentError(f"{where}: stream iterations are not supported (Flink 2 has none)")
        if pact not in _PACTS:
            raise DocumentError(
                f"{where}: unknown pact {label(pact)} (expected one of {', '.join(_PACTS)})"
            )
        if "parallelism" in node and not _is_int(node["parallelism"]):
            raise DocumentError(
                f"{where}: 'parallelism' must be an integer, got {label(node['parallelism'])}"
            )
        predecessors = node.get("predecessors", [])
        if not isinstance(predecessors, list):
            raise DocumentError(
                f"{where}: 'predecessors' must be a list, got {describe_json(predecessors)}"
            )
        if pact == "Data Source" and predecessors:
            raise DocumentError(f"{where} is a Data Source but has predecessors")
    return nodes


def _operator(
    node: Mapping[str, Any],
    uids: Mapping[int, str],
    uid_hashes: Mapping[int, str],
    groups: Mapping[int, str | None],
    strategies: Mapping[int, Any],
    max_parallelisms: Mapping[int, int],
    source_kinds: Mapping[int, Any],
) -> Operator:
    node_id = node["id"]
    name = node.get("type", node.get("contents"))
    pact = node.get("pact", "Operator")
    if node_id in source_kinds:
        kind = _enum(SourceKind, source_kinds[node_id], "source kind", node_id)
    elif pact == "Data Source":
        kind = SourceKind.LEGACY if name in _LEGACY_SOURCE_NAMES else SourceKind.NEW
    else:
        kind = None
    if node_id in strategies:
        strategy = _enum(ChainingStrategy, strategies[node_id], "chaining strategy", node_id)
    else:
        strategy = ChainingStrategy.HEAD if kind is SourceKind.LEGACY else ChainingStrategy.ALWAYS
    return Operator(
        id=node_id,
        name=name,
        parallelism=node.get("parallelism", -1),
        max_parallelism=max_parallelisms.get(node_id, -1),
        slot_sharing_group=groups.get(node_id, "default"),
        chaining_strategy=strategy,
        uid=uids.get(node_id),
        uid_hash=uid_hashes.get(node_id),
        source=kind,
        yielding=pact != "Data Sink" and name.endswith(": Writer"),
    )


# -- edges ---------------------------------------------------------------------------------------


def _edges(
    nodes: Sequence[Mapping[str, Any]],
    known: set[int],
    type_numbers: Mapping[int, Sequence[int]],
) -> list[Edge]:
    """Every node's input edges, in the node's input order (the plan's ``predecessors``)."""
    edges: list[Edge] = []
    for node in nodes:
        node_id = node["id"]
        predecessors = node.get("predecessors", [])
        types = _type_numbers(node, predecessors, type_numbers)
        for position, pred in enumerate(predecessors):
            where = f"plan node {node_id}, predecessor #{position}"
            source = _id_of(pred, where)
            if source not in known:
                raise DocumentError(f"{where} names node {source}, which is not in the plan")
            strategy = pred.get("ship_strategy", "FORWARD")
            try:
                partitioner = Partitioner(strategy.upper() if isinstance(strategy, str) else None)
            except ValueError:
                allowed = ", ".join(p.value for p in Partitioner)
                raise DocumentError(
                    f"{where} (from node {source}): unknown ship_strategy {label(strategy)} "
                    f"(expected one of {allowed})"
                ) from None
            edges.append(Edge(source, node_id, partitioner, types[position]))
    return edges


def _type_numbers(
    node: Mapping[str, Any], predecessors: Sequence[Any], given: Mapping[int, Sequence[int]]
) -> Sequence[int]:
    node_id = node["id"]
    if node_id in given:
        types = given[node_id]
        if (
            isinstance(types, (str, bytes))
            or not isinstance(types, Sequence)
            or len(types) != len(predecessors)
            or not all(_is_int(t) and t >= 0 for t in types)
        ):
            raise DocumentError(
                f"type_numbers for plan node {node_id} must list one non-negative integer per "
                f"predecessor ({len(predecessors)}), got {label(types)}"
            )
        return types
    name = node.get("type", node.get("contents"))
    if len(predecessors) == 2 and name.startswith("Co-"):
        return (1, 2)
    return (0,) * len(predecessors)


def _order_edges(edges: list[Edge], output_order: Mapping[int, Sequence[int]]) -> list[Edge]:
    """One edge list whose per-target order is the plan's and whose per-source order is the
    best reconstruction of Flink's creation order (see the module docstring).

    Without ``output_order`` that is a sort by target translation position. With it, the
    caller's per-source orders become constraints, and a heap-driven topological sort of the
    edges keeps everything else in the default order.
    """
    # Sorting by target id puts Sink V2 writers last among their siblings: their ids are the
    # highest of the job (see the module docstring).
    base = sorted(range(len(edges)), key=lambda i: (edges[i].target, i))
    if not output_order:
        return [edges[i] for i in base]

    rank = {e: r for r, e in enumerate(base)}
    by_source: dict[int, list[int]] = {}
    by_target: dict[int, list[int]] = {}
    for i in base:
        by_source.setdefault(edges[i].source, []).append(i)
        by_target.setdefault(edges[i].target, []).append(i)
    successors: dict[int, list[int]] = {}
    indegree = [0] * len(edges)

    def chain(sequence: Sequence[int]) -> None:
        for a, b in pairwise(sequence):
            successors.setdefault(a, []).append(b)
            indegree[b] += 1

    for sequence in by_target.values():
        chain(sequence)
    for source, outs in by_source.items():
        if source in output_order:
            chain(_apply_output_order(source, outs, edges, output_order[source]))
        else:
            chain(outs)
    ready = [(rank[i], i) for i in range(len(edges)) if indegree[i] == 0]
    heapq.heapify(ready)
    ordered: list[int] = []
    while ready:
        _, i = heapq.heappop(ready)
        ordered.append(i)
        for j in successors.get(i, ()):
            indegree[j] -= 1
            if indegree[j] == 0:
                heapq.heappush(ready, (rank[j], j))
    if len(ordered) != len(edges):
        stuck = sorted({edges[i].source for i in range(len(edges)) if indegree[i] > 0})
        raise DocumentError(
            "output_order contradicts the plan's input order (no edge creation order satisfies "
            f"both) around nodes {', '.join(map(str, stuck[:5]))}"
        )
    return [edges[i] for i in ordered]


def _apply_output_order(
    source: int, outs: list[int], edges: list[Edge], order: Iterable[int]
) -> list[int]:
    if isinstance(order, (str, bytes)) or not isinstance(order, Iterable):
        raise DocumentError(f"output_order for plan node {source} must be a list of node ids")
    order = list(order)
    pending: dict[int, list[int]] = {}
    for i in outs:
        pending.setdefault(edges[i].target, []).append(i)
    actual = sorted(edges[i].target for i in outs)
    if sorted(order, key=lambda x: (not _is_int(x), x if _is_int(x) else 0)) != actual:
        raise DocumentError(
            f"output_order for plan node {source} must list the nodes it feeds "
            f"({', '.join(map(str, actual))}), each as often as it feeds it; got {label(order)}"
        )
    return [pending[target].pop(0) for target in order]


# -- helpers -------------------------------------------------------------------------------------


def _check_keys(option: str, mapping: Mapping[int, Any] | None, known: set[int]) -> None:
    if mapping is None:
        return
    if not isinstance(mapping, Mapping):
        raise TypeError(f"{option} must be a mapping of plan node id to value")
    for key in mapping:
        if key not in known:
            raise DocumentError(f"{option} names node {label(key)}, which is not in the plan")


def _enum(kind: Any, value: Any, what: str, node_id: int) -> Any:
    if value is None or isinstance(value, kind):
        return value
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(m.value for m in kind)
        raise DocumentError(
            f"plan node {node_id}: unknown {what} {label(value)} (expected one of {allowed})"
        ) from None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _id_of(entry: Any, where: str) -> int:
    """The integer ``id`` of a plan node or predecessor entry, or an error naming ``where``."""
    if not isinstance(entry, Mapping):
        raise DocumentError(f"{where} must be a JSON object, got {describe_json(entry)}")
    if "id" not in entry:
        raise DocumentError(f"{where} has no 'id'")
    value = entry["id"]
    if not _is_int(value):
        raise DocumentError(f"{where}: 'id' must be an integer, got {label(value)}")
    return value
