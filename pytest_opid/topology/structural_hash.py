"""The structural hasher: a 16-byte ID for every operator of a topology, from its uid or else
from the graph's shape up to it.

An operator without a uid gets its ID from its place in a breadth-first walk from the sources,
how many of its outputs are chainable (the engine's chaining rule says which) and its inputs'
IDs, so the ID holds while the graph up to it keeps its shape. This is the computation of
Flink's ``StreamGraphHasherV2`` (:mod:`pytest_opid.flink.hasher` gives its rules in Flink's
terms): Flink's OperatorIDs are these hashes, and the Spark frontend gives Spark's operators
their IDs the same way under Spark's chaining rule, so a change of shape shows alike in both.

murmur3_128 seeded with 0 (Guava's ``Hashing.murmur3_128(0)``), via ``mmh3``.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Sequence
from itertools import accumulate, compress
from operator import attrgetter

import mmh3

from pytest_opid.errors import HashCollisionError
from pytest_opid.model import Operator, Topology

__all__ = ["hash_order", "operator_ids", "uid_operator_id"]

# Folding multiplies every byte by 37 modulo 256 (Java's byte arithmetic keeps the low 8 bits);
# bytes.translate applies that per byte in C, and the XOR runs on 128-bit integers.
_TIMES_37 = bytes((b * 37) & 0xFF for b in range(256))
#: The node-local counter as Guava's ``Hasher.putInt`` writes it: a little-endian int.
_counter = struct.Struct("<i").pack
_UID = attrgetter("uid")


def uid_operator_id(uid: str) -> bytes:
    """An operator's ID from its uid: murmur3_128 of the UTF-8 bytes (the OperatorID Flink
    derives from ``uid()``).

    Java encodes unpaired surrogates as ``?``; ``errors="replace"`` does the same.
    """
    return mmh3.hash_bytes(uid.encode("utf-8", "replace"), 0)


def hash_order(topology: Topology) -> list[int]:
    """Operator positions in the order they are hashed: a breadth-first walk from the sources
    in which an operator without a uid waits for all its inputs (``StreamGraphHasherV2``'s). An
    operator's index in this list is its node-local counter. Refactoring analysis reads the same
    walk."""
    outs = topology.out_edges
    targets = topology.edge_targets
    uids = [op.uid for op in topology.operators]
    waiting = list(topology.in_degrees)  # per operator: how many inputs are not hashed yet
    visited = bytearray(len(uids))
    queue = deque(topology.sources)
    for node in queue:
        visited[node] = 1
    order: list[int] = []
    while queue:
        node = queue.popleft()
        if uids[node] is None and waiting[node]:
            visited[node] = 0  # revisit once the missing input is hashed
            continue
        order.append(node)
        for e in outs[node]:
            target = targets[e]
            waiting[target] -= 1
            if not visited[target]:
                visited[target] = 1
                queue.append(target)
    return order


def operator_ids(topology: Topology, chainable: Sequence[bool]) -> list[bytes]:
    """The 16-byte ID of every operator, indexed by operator position, with ``chainable`` the
    chaining rule's flag per edge."""
    ops = topology.operators
    hash_bytes = mmh3.hash_bytes
    from_bytes = int.from_bytes

    uids = list(map(_UID, ops))
    # How often the node-local counter is written: once, and once per chainable output.
    repeats = [1] * len(ops)
    for source in compress(topology.edge_sources, chainable):
        repeats[source] += 1
    # Every operator's input operators in input order, in one flat list: sorting the edges by
    # target (a stable sort keeps edge order) groups them, and operator p's inputs are
    # inputs[first[p]:first[p + 1]]. Cheaper than a list per operator on a large job.
    sources = topology.edge_sources
    by_target = sorted(range(len(sources)), key=topology.edge_targets.__getitem__)
    inputs = [sources[e] for e in by_target]
    first = [0, *accumulate(topology.in_degrees)]

    hashes: list[bytes] = [b""] * len(ops)
    order = hash_order(topology)
    for position, node in enumerate(order):  # position: Flink's hashes.size()
        uid = uids[node]
        if uid is not None:
            hashes[node] = uid_operator_id(uid)
            continue
        digest = hash_bytes(_counter(position) * repeats[node], 0)
        start, stop = first[node], first[node + 1]
        while start < stop:  # fold the inputs in, in input order
            folded = from_bytes(digest.translate(_TIMES_37), "little")
            digest = (folded ^ from_bytes(hashes[inputs[start]], "little")).to_bytes(16, "little")
            start += 1
        hashes[node] = digest
    if len(set(hashes)) != len(hashes):  # some hash twice: was a uid's the later one?
        _check_uid_collisions(ops, order, hashes)
    return hashes


def _check_uid_collisions(ops: Sequence[Operator], order: list[int], hashes: list[bytes]) -> None:
    """Flink's ``StreamGraphHasherV2.generateUserSpecifiedHash`` refuses a uid whose hash equals
    one assigned earlier in the walk (generated hashes are not checked)."""
    assigned: dict[bytes, int] = {}  # every hash so far -> the last operator it went to
    for node in order:
        digest = hashes[node]
        uid = ops[node].uid
        if uid is not None and digest in assigned:
            other = ops[assigned[digest]]
            raise HashCollisionError(
                f"hash collision on uid {uid!r} of operator {ops[node].id}: its OperatorID "
                f"{digest.hex()} is already taken by operator {other.id} ({other.name!r})"
            )
        assigned[digest] = node
