"""A topology's OperatorIDs and job vertices, computed as Flink computes them.

:func:`compute` runs Flink's chaining rule (:mod:`.chaining`), its hasher (:mod:`.hasher`) and
its chain builder over a :class:`~pytest_opid.model.Topology` and assembles the
:class:`~pytest_opid.result.Fingerprint`.

In ``BATCH`` runtime mode a job vertex's parallelism is what Flink's JobGraph holds for the
adaptive batch scheduler (:func:`batch_parallelism`): -1 ("decided at run time") unless the
program configured it.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat
from operator import attrgetter

from pytest_opid.flink.chaining import flink_chaining, job_vertices
from pytest_opid.gc_pause import gc_paused
from pytest_opid.model import Partitioner, RuntimeMode, Topology
from pytest_opid.result import ChainedOperator, Fingerprint, JobVertex, OperatorFingerprint
from pytest_opid.topology import Chain, ChainingRule, operator_ids

__all__ = ["batch_parallelism", "compute"]

ENGINE = "flink"

_new = tuple.__new__
_SOURCE, _TARGET = attrgetter("source"), attrgetter("target")


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
    # The NamedTuples are built in C (tuple.__new__ over zipped columns): a 100k-operator job
    # makes 250k of them, and a Python frame each would cost more than everything else here.
    chained = list(map(_new, repeat(ChainedOperator), zip(ids, user, strict=True)))
    vertex_of: list[str] = [""] * len(ops)
    vertices = []
    operators: tuple[ChainedOperator, ...]
    nodes: tuple[int, ...]
    chains = job_vertices(topology, chainable)
    batch = topology.runtime_mode is RuntimeMode.BATCH
    decided = batch_parallelism(topology, chainable, chains) if batch else {}
    for head, members, name, parallelism in chains:
        if batch:
            parallelism = decided[head]
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
            _new(
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
        [op.stateful for op in ops],
        strict=True,
    )
    fingerprints = tuple(map(_new, repeat(OperatorFingerprint), columns))
    mode = "batch" if batch else "streaming"
    return Fingerprint(
        fingerprints, tuple(vertices), None, ENGINE, mode, edges=_edge_labels(topology)
    )


def _edge_labels(topology: Topology) -> tuple[tuple[int, int, str], ...]:
    """Each edge with its partitioner as Flink's web UI names it (``HASH``, ``FORWARD``...),
    and its exchange mode where that is not pipelined (``HASH (BATCH)``)."""
    edges = topology.edges
    # Keyed by the members' values: Enum.__hash__ is Python code, a str's hash is cached. The
    # (partitioner, mode) pairs stay transient (zip reuses its tuple): a list of them would
    # hold 64 bytes per edge at the fingerprint's peak.
    partitioners = [e.partitioner._value_ for e in edges]
    modes = [e.exchange_mode._value_ for e in edges]
    labels = {kind: _label(*kind) for kind in set(zip(partitioners, modes, strict=True))}
    names = map(labels.__getitem__, zip(partitioners, modes, strict=True))
    ends = zip(map(_SOURCE, edges), map(_TARGET, edges), names, strict=True)
    return tuple(ends)


def _label(partitioner: str, exchange_mode: str) -> str:
    if exchange_mode in ("UNDEFINED", "PIPELINED"):
        return partitioner
    return f"{partitioner} ({exchange_mode})"


def batch_parallelism(
    topology: Topology, chainable: Sequence[bool], chains: Sequence[Chain]
) -> dict[int, int]:
    """Each chain's JobVertex parallelism in ``BATCH`` mode, by head position, as Flink's
    ``StreamingJobGraphGenerator.setVertexParallelismsForDynamicGraphIfNecessary`` leaves it
    for the adaptive batch scheduler.

    A vertex none of whose operators had its parallelism configured gets -1 (decided at run
    time). Vertices joined by ``forward()`` edges form a forward group (Flink's
    ``ForwardGroupComputeUtil``, transitively); a group with a configured vertex gives its
    parallelism to every vertex in it. Flink's default edge between equal parallelisms is an
    *unspecified* forward that becomes ``rescale`` between vertices and joins no group, and a
    topology document does not say which FORWARD edges were explicit ``forward()`` calls. We
    take a FORWARD edge between two vertices into a one-input operator with configured
    parallelism as one: it matches every BATCH job vertex of the golden cases; a default edge
    of that shape (an operator with ``setParallelism()`` split off its input by a slot sharing
    group or ``disableChaining()``) would make us report a parallelism where Flink has -1.
    """
    ops = topology.operators
    chain_of = [0] * len(ops)
    for chain in chains:
        for m in chain.members:
            chain_of[m] = chain.head
    parent = {chain.head: chain.head for chain in chains}

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    degrees = topology.in_degrees
    edges = topology.edges
    for e, (up, down) in enumerate(topology.edge_ends):
        if (
            not chainable[e]
            and edges[e].partitioner is Partitioner.FORWARD
            and chain_of[up] != chain_of[down]
            and degrees[down] == 1
            and ops[down].parallelism_configured
        ):
            parent[root(chain_of[up])] = root(chain_of[down])
    configured = {
        chain.head: any(ops[m].parallelism_configured for m in chain.members) for chain in chains
    }
    group_parallelism: dict[int, int] = {}
    for chain in chains:
        if configured[chain.head]:
            group_parallelism.setdefault(root(chain.head), chain.parallelism)
    return {
        chain.head: chain.parallelism
        if configured[chain.head]
        else group_parallelism.get(root(chain.head), -1)
        for chain in chains
    }
