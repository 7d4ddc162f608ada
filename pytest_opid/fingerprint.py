"""Fingerprints: what Flink would call every operator and every chain of a topology.

:func:`fingerprint` is the one entry point. It turns anything a frontend understands (a topology
document, a builder stream, a Flink execution plan, a PySpark DataFrame, a saved fingerprint) into
a :class:`Topology`, then runs the chaining rule, the hasher and the chain builder over it. The
result is plain immutable data whose :meth:`Fingerprint.to_dict` is the stable JSON form that
snapshots and ``opid fingerprint --json`` use.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from pytest_opid.chaining import ChainingRule, flink_chaining, job_vertices
from pytest_opid.errors import DocumentError
from pytest_opid.hasher import operator_ids
from pytest_opid.topology import Topology, gc_paused

__all__ = [
    "ChainedOperator",
    "Fingerprint",
    "JobVertex",
    "OperatorFingerprint",
    "StateOperator",
    "compute",
    "fingerprint",
    "to_topology",
]


class OperatorFingerprint(NamedTuple):
    """One operator's identity. ``operator_id`` is the generated OperatorID (or the uid's);
    ``user_operator_id`` is the ``setUidHash`` ID Flink restores state from, where set."""

    node: int
    name: str
    operator_id: str
    user_operator_id: str | None = None
    uid: str | None = None
    parallelism: int = -1
    job_vertex: str | None = None  # id of the JobVertex (chain) the operator runs in

    @property
    def state_id(self) -> str:
        """The ID Flink looks up this operator's state under."""
        return self.user_operator_id or self.operator_id


class ChainedOperator(NamedTuple):
    """An operator as a JobVertex lists it (Flink's ``OperatorIDPair``)."""

    generated: str
    user_defined: str | None = None


class JobVertex(NamedTuple):
    """One operator chain. ``id`` is the head's OperatorID; ``operators`` are in Flink's order
    (depth-first post-order, head last); ``nodes`` are the same operators' node ids."""

    id: str
    name: str
    parallelism: int
    operators: tuple[ChainedOperator, ...]
    nodes: tuple[int, ...] = ()


@dataclass(frozen=True)
class StateOperator:
    """A stateful operator as an engine numbers its state (Spark: ``state/<id>/``)."""

    state_operator_id: int
    operator_id: str
    name: str
    kind: str


@dataclass(frozen=True)
class Fingerprint:
    operators: tuple[OperatorFingerprint, ...]
    job_vertices: tuple[JobVertex, ...]
    state_operators: tuple[StateOperator, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "operators": [
                {
                    "node": op.node,
                    "name": op.name,
                    "operator_id": op.operator_id,
                    "user_operator_id": op.user_operator_id,
                }
                for op in self.operators
            ],
            "job_vertices": [
                {
                    "id": v.id,
                    "name": v.name,
                    "parallelism": v.parallelism,
                    "operators": [
                        {"generated": o.generated, "user_defined": o.user_defined}
                        for o in v.operators
                    ],
                }
                for v in self.job_vertices
            ],
        }
        if self.state_operators is not None:
            out["state_operators"] = [
                {
                    "state_operator_id": s.state_operator_id,
                    "operator_id": s.operator_id,
                    "name": s.name,
                    "kind": s.kind,
                }
                for s in self.state_operators
            ]
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, data: Any) -> Fingerprint:
        """Read back :meth:`to_dict` output (a saved fingerprint), validating it."""
        try:
            return _fingerprint_from_dict(data)
        except KeyError as exc:
            raise DocumentError(f"not a valid saved fingerprint: missing key {exc!s}") from None
        except (TypeError, ValueError, AttributeError) as exc:
            raise DocumentError(f"not a valid saved fingerprint: {exc!s}") from None


def compute(topology: Topology, chaining: ChainingRule = flink_chaining) -> Fingerprint:
    """OperatorIDs and chains of a topology under a chaining rule (Flink's by default)."""
    with gc_paused():
        return _compute(topology, chaining)


def _compute(topology: Topology, chaining: ChainingRule) -> Fingerprint:
    chainable = chaining(topology)
    ids = [h.hex() for h in operator_ids(topology, chainable)]
    ops = topology.operators
    user = [op.uid_hash.lower() if op.uid_hash else None for op in ops]
    node_ids = [op.id for op in ops]
    # tuple.__new__ builds the NamedTuples in C; a 100k-operator job makes 250k of them.
    new = tuple.__new__
    chained = [new(ChainedOperator, pair) for pair in zip(ids, user, strict=True)]
    vertex_of: list[str] = [""] * len(ops)
    vertices = []
    for head, members, name, parallelism in job_vertices(topology, chainable):
        vertex_id = ids[head]
        if len(members) == 1:
            vertex_of[head] = vertex_id
            operators, nodes = (chained[head],), (node_ids[head],)
        else:
            for m in members:
                vertex_of[m] = vertex_id
            operators = tuple([chained[m] for m in members])
            nodes = tuple([node_ids[m] for m in members])
        vertices.append(new(JobVertex, (vertex_id, name, parallelism, operators, nodes)))
    columns = zip(
        node_ids,
        [op.name for op in ops],
        ids,
        user,
        [op.uid for op in ops],
        [op.parallelism for op in ops],
        vertex_of,
        strict=True,
    )
    operators = tuple([new(OperatorFingerprint, row) for row in columns])
    return Fingerprint(operators, tuple(vertices))


def fingerprint(
    source: Any, *, chaining: ChainingRule | None = None, format: str | None = None
) -> Fingerprint:
    """Compute the fingerprint of anything pytest-opid understands.

    ``source`` may be a :class:`Topology`, a builder stream (anything with ``to_topology()``),
    a topology document or Flink execution plan (a dict, a JSON string, or a path), a saved
    fingerprint, or a PySpark DataFrame / ``StreamingQuery`` (needs the ``spark`` extra).
    ``format`` forces how a dict or file is read: ``"document"``, ``"plan"`` or
    ``"fingerprint"``. ``chaining`` replaces Flink's chaining rule.
    """
    if isinstance(source, Fingerprint):
        return source
    module = type(source).__module__ or ""
    if module.split(".")[0] == "pyspark":
        from pytest_opid import spark  # lazy: pyspark is an optional extra

        return spark.fingerprint(source)
    loaded = to_topology(source, format=format)
    if isinstance(loaded, Fingerprint):
        return loaded
    return compute(loaded, chaining or flink_chaining)


def to_topology(source: Any, *, format: str | None = None) -> Topology | Fingerprint:
    """The topology a source describes (or, for a saved fingerprint, the fingerprint itself)."""
    module = type(source).__module__ or ""
    if isinstance(source, Topology):
        return source
    if hasattr(source, "to_topology") and module.split(".")[0] != "pandas":
        return source.to_topology()
    if isinstance(source, str) and source.lstrip().startswith(("{", "[")):
        try:
            return _from_data(json.loads(source), format, "the JSON text")
        except json.JSONDecodeError as exc:
            raise DocumentError(
                f"the JSON text is not valid JSON (line {exc.lineno}, column {exc.colno}: "
                f"{exc.msg})"
            ) from None
    if isinstance(source, (str, os.PathLike)):
        from pytest_opid.document import read_json

        return _from_data(read_json(source), format, os.fspath(source))
    if isinstance(source, Mapping):
        return _from_data(source, format, None)
    hint = ""
    if module.split(".")[0] == "pandas":
        hint = " (a pandas DataFrame has no plan: fingerprint spark.createDataFrame(pdf) instead)"
    raise TypeError(
        "pytest_opid.fingerprint() accepts a Topology, a builder stream, a topology document "
        "or Flink execution plan (dict, JSON string or path), a saved fingerprint, or a PySpark "
        f"DataFrame / StreamingQuery; got {module}.{type(source).__qualname__}{hint}"
    )


FORMATS = ("document", "plan", "fingerprint")


def detect_format(data: Any) -> str:
    """Tell a topology document, a Flink plan and a saved fingerprint apart."""
    if isinstance(data, Mapping):
        if "job_vertices" in data and "operators" in data:
            return "fingerprint"
        nodes = data.get("nodes")
        if isinstance(nodes, list) and "edges" not in data:
            first = next((n for n in nodes if isinstance(n, Mapping)), {})
            if "pact" in first or "predecessors" in first or "contents" in first:
                return "plan"
    return "document"


def _from_data(data: Any, format: str | None, origin: str | None) -> Topology | Fingerprint:
    from pytest_opid.errors import OpidError

    if format is not None and format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {format!r}")
    kind = format or detect_format(data)
    try:
        if kind == "fingerprint":
            return Fingerprint.from_dict(data)
        if kind == "plan":
            from pytest_opid.flink_plan import topology_from_plan

            return topology_from_plan(data)
        from pytest_opid.document import topology_from_document

        return topology_from_document(data)
    except OpidError as exc:
        if origin is None:
            raise
        raise type(exc)(f"{origin}: {exc}") from None


def _fingerprint_from_dict(data: Any) -> Fingerprint:
    if not isinstance(data, Mapping):
        raise TypeError("expected a JSON object")
    ops = tuple(
        OperatorFingerprint(
            node=int(o["node"]),
            name=str(o["name"]),
            operator_id=_hex(o["operator_id"]),
            user_operator_id=_hex(o["user_operator_id"]) if o.get("user_operator_id") else None,
        )
        for o in data["operators"]
    )
    vertices = tuple(
        JobVertex(
            id=_hex(v["id"]),
            name=str(v["name"]),
            parallelism=int(v["parallelism"]),
            operators=tuple(
                ChainedOperator(
                    _hex(o["generated"]),
                    _hex(o["user_defined"]) if o.get("user_defined") else None,
                )
                for o in v["operators"]
            ),
        )
        for v in data["job_vertices"]
    )
    # Restore which vertex each operator runs in, for chain comparisons.
    vertex_of = {o.generated: v.id for v in vertices for o in v.operators}
    ops = tuple(
        OperatorFingerprint(
            node=o.node,
            name=o.name,
            operator_id=o.operator_id,
            user_operator_id=o.user_operator_id,
            job_vertex=vertex_of.get(o.operator_id),
        )
        for o in ops
    )
    states = None
    if data.get("state_operators") is not None:
        states = tuple(
            StateOperator(
                int(s["state_operator_id"]), _hex(s["operator_id"]), str(s["name"]), str(s["kind"])
            )
            for s in data["state_operators"]
        )
    return Fingerprint(ops, vertices, states)


def _hex(value: Any) -> str:
    if not isinstance(value, str) or len(value) != 32:
        raise ValueError(f"{value!r} is not a 32-digit hex ID")
    int(value, 16)
    return value.lower()
