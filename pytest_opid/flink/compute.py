"""A topology's OperatorIDs and job vertices, computed as Flink computes them.

:func:`compute` runs Flink's chaining rule (:mod:`.chaining`), its hasher (:mod:`.hasher`) and
its chain builder over a :class:`~pytest_opid.model.Topology` and assembles the
:class:`~pytest_opid.result.Fingerprint`.
"""

from __future__ import annotations

from pytest_opid.flink.chaining import ChainingRule, flink_chaining, job_vertices
from pytest_opid.flink.hasher import operator_ids
from pytest_opid.model import Topology, gc_paused
from pytest_opid.result import ChainedOperator, Fingerprint, JobVertex, OperatorFingerprint

__all__ = ["compute"]

ENGINE = "flink"


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
    operators: tuple[ChainedOperator, ...]
    nodes: tuple[int, ...]
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
        vertices.append(
            new(
                JobVertex,
                (vertex_id, name, parallelism, operators, nodes, ops[head].max_parallelism),
            )
        )
    columns = zip(
        node_ids,
        [op.name for op in ops],
        ids,
        user,
        [op.uid for op in ops],
        [op.parallelism for op in ops],
        vertex_of,
        [op.max_parallelism for op in ops],
        [None] * len(ops),
        strict=True,
    )
    fingerprints = tuple([new(OperatorFingerprint, row) for row in columns])
    return Fingerprint(fingerprints, tuple(vertices), None, ENGINE, "streaming")
