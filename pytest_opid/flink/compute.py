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
from itertools import compress, repeat
from operator import attrgetter
from typing import Literal

from pytest_opid.flink.chaining import Chain, ChainingRule, flink_chaining, grow_chains, wiring
from pytest_opid.flink.hasher import hash_order, id_numbers
from pytest_opid.model import ExchangeMode, Partitioner, RuntimeMode, Topology, gc_paused
from pytest_opid.result import ChainedOperator, Fingerprint, JobVertex, OperatorFingerprint

__all__ = ["batch_parallelism", "compute"]

ENGINE = "flink"

_ID = attrgetter("id")
_NAME = attrgetter("name")
_UID = attrgetter("uid")
_UID_HASH = attrgetter("uid_hash")
_PARALLELISM = attrgetter("parallelism")
_MAX_PARALLELISM = attrgetter("max_parallelism")
_STATEFUL = attrgetter("stateful")
_LITTLE: Literal["little"] = "little"
_CONFIGURED = attrgetter("parallelism_configured")
_SOURCE = attrgetter("source")
_TARGET = attrgetter("target")
# ``_value_`` is the plain attribute behind an enum's ``value`` property: read in C.
_PARTITIONER_NAME = attrgetter("partitioner._value_")
_EXCHANGE_NAME = attrgetter("exchange_mode._value_")
_PIPELINED = frozenset({"UNDEFINED", "PIPELINED"})


def compute(topology: Topology, chaining: ChainingRule = flink_chaining) -> Fingerprint:
    """OperatorIDs and chains of a topology under a chaining rule (Flink's by default)."""
    with gc_paused():
        return _compute(topology, chaining)


def _compute(topology: Topology, chaining: ChainingRule) -> Fingerprint:
    """Everything by columns: each list below holds one value per operator (or per chain),
    and the result's NamedTuples are built from zipped columns by ``tuple.__new__`` in C
    (a 100k-operator job makes 250k of them)."""
    chainable = chaining(topology)
    wired = wiring(topology, chainable)
    order = hash_order(topology, wired)
    numbers = id_numbers(topology, wired, order)
    ids = list(map(bytes.hex, map(int.to_bytes, numbers, repeat(16), repeat(_LITTLE))))
    del numbers
    found = grow_chains(topology, wired, order)
    del wired, order
    ops = topology.operators
    size = len(ops)
    uid_hashes = list(map(_UID_HASH, ops))
    if uid_hashes.count(None) == size:
        user: list[str | None] = uid_hashes
    else:
        user = [h.lower() if h else None for h in uid_hashes]
    del uid_hashes
    node_ids = list(map(_ID, ops))
    parallelism = list(map(_PARALLELISM, ops))
    max_parallelism = list(map(_MAX_PARALLELISM, ops))
    new = tuple.__new__
    chained = list(map(new, repeat(ChainedOperator), zip(ids, user, strict=True)))
    heads, members = found.heads, found.members
    batch = topology.runtime_mode is RuntimeMode.BATCH
    if batch:
        decided = _batch_parallelism(topology, chainable, heads, found.head_of)
        vertex_parallelism = list(map(decided.__getitem__, heads))
    else:
        vertex_parallelism = list(map(parallelism.__getitem__, heads))
    # A chain of several operators lists them from ``members``; a one-operator chain is its
    # head alone, a 1-tuple from zip().
    chain_ops = {h: tuple(map(chained.__getitem__, m)) for h, m in members.items()}
    chain_nodes = {h: tuple(map(node_ids.__getitem__, m)) for h, m in members.items()}
    vertices = tuple(
        map(
            new,
            repeat(JobVertex),
            zip(
                map(ids.__getitem__, heads),
                map(found.names.get, heads, map(_NAME, map(ops.__getitem__, heads))),
                vertex_parallelism,
                map(chain_ops.get, heads, zip(map(chained.__getitem__, heads))),
                map(chain_nodes.get, heads, zip(map(node_ids.__getitem__, heads))),
                map(max_parallelism.__getitem__, heads),
                strict=True,
            ),
        )
    )
    del chain_ops, chain_nodes, chained, vertex_parallelism
    columns = zip(
        node_ids,
        map(_NAME, ops),
        ids,
        user,
        map(_UID, ops),
        parallelism,
        map(ids.__getitem__, found.head_of),
        max_parallelism,
        map(_STATEFUL, ops),
        strict=True,
    )
    fingerprints = tuple(map(new, repeat(OperatorFingerprint), columns))
    mode = "batch" if batch else "streaming"
    return Fingerprint(fingerprints, vertices, None, ENGINE, mode, edges=_edge_labels(topology))


def _edge_labels(topology: Topology) -> tuple[tuple[int, int, str], ...]:
    """Each edge with its partitioner as Flink's web UI names it (``HASH``, ``FORWARD``...),
    and its exchange mode where that is not pipelined (``HASH (BATCH)``)."""
    edges = topology.edges
    labels: Sequence[str] = list(map(_PARTITIONER_NAME, edges))
    modes = list(map(_EXCHANGE_NAME, edges))
    if not set(modes) <= _PIPELINED:
        named = {
            (p.value, m.value): p.value if m.value in _PIPELINED else f"{p.value} ({m.value})"
            for p in Partitioner
            for m in ExchangeMode
        }
        labels = list(map(named.__getitem__, zip(labels, modes, strict=True)))
    return tuple(zip(map(_SOURCE, edges), map(_TARGET, edges), labels, strict=True))


def batch_parallelism(
    topology: Topology, chainable: Sequence[bool], chains: Sequence[Chain]
) -> dict[int, int]:
    """Each chain's JobVertex parallelism in ``BATCH`` mode, by head position, as Flink's
    ``StreamingJobGraphGenerator.setVertexParallelismsForDynamicGraphIfNecessary`` leaves it
    for the adaptive batch scheduler (see :func:`_batch_parallelism`)."""
    head_of = list(range(len(topology.operators)))
    for chain in chains:
        for m in chain.members:
            head_of[m] = chain.head
    return _batch_parallelism(topology, chainable, [chain.head for chain in chains], head_of)


def _batch_parallelism(
    topology: Topology, chainable: Sequence[bool], heads: Sequence[int], head_of: Sequence[int]
) -> dict[int, int]:
    """Each chain's JobVertex parallelism in ``BATCH`` mode, by head position (``heads`` in
    JobGraph order, ``head_of`` each operator's chain head).

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
    parent = dict(zip(heads, heads, strict=True))

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    degrees = topology.in_degrees
    edges = topology.edges
    forward = Partitioner.FORWARD
    for e, (up, down) in enumerate(zip(topology.edge_sources, topology.edge_targets, strict=True)):
        if (
            not chainable[e]
            and edges[e].partitioner is forward
            and head_of[up] != head_of[down]
            and degrees[down] == 1
            and ops[down].parallelism_configured
        ):
            parent[root(head_of[up])] = root(head_of[down])
    configured = set(compress(head_of, map(_CONFIGURED, ops)))
    group_parallelism: dict[int, int] = {}
    for head in heads:
        if head in configured:
            group_parallelism.setdefault(root(head), ops[head].parallelism)
    return {
        head: ops[head].parallelism if head in configured else group_parallelism.get(root(head), -1)
        for head in heads
    }
