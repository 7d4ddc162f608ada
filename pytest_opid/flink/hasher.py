"""OperatorIDs as Flink's ``StreamGraphHasherV2`` computes them.

The walk, in Flink's terms:

* Sources (operators without inputs) enter a FIFO queue in ascending id order.
* A dequeued operator with a ``uid`` gets ``murmur3_128(utf8(uid))`` at once. Flink rejects a
  uid whose hash equals one already assigned.
* Any other operator waits until all its inputs have a hash. If one is missing it is dropped from
  the "visited" set, so whichever input finishes later enqueues it again.
* Its hash is murmur3_128 over the node-local counter (how many hashes exist so far) written as a
  little-endian int, once for the operator and once more per chainable output; then each input's
  hash is folded in, in input order, byte by byte: ``h[j] = h[j] * 37 ^ in[j]``.
* Once hashed, its outputs' targets are enqueued (in output order) unless already visited.

Everything is seeded with 0 (Guava's ``Hashing.murmur3_128(0)``), via ``mmh3``.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Sequence
from itertools import accumulate, compress
from operator import attrgetter

import mmh3

from pytest_opid.errors import HashCollisionError
from pytest_opid.flink.chaining import flink_chaining
from pytest_opid.model import Operator, Topology

__all__ = ["hash_order", "operator_ids", "state_id_changes", "uid_operator_id"]

# Folding multiplies every byte by 37 modulo 256 (Java's byte arithmetic keeps the low 8 bits);
# bytes.translate applies that per byte in C, and the XOR runs on 128-bit integers.
_TIMES_37 = bytes((b * 37) & 0xFF for b in range(256))
#: The node-local counter as Guava's ``Hasher.putInt`` writes it: a little-endian int.
_counter = struct.Struct("<i").pack
_UID = attrgetter("uid")


def uid_operator_id(uid: str) -> bytes:
    """The OperatorID Flink derives from ``uid()``: murmur3_128 of the UTF-8 bytes.

    Java encodes unpaired surrogates as ``?``; ``errors="replace"`` does the same.
    """
    return mmh3.hash_bytes(uid.encode("utf-8", "replace"), 0)


def hash_order(topology: Topology) -> list[int]:
    """Operator positions in the order ``StreamGraphHasherV2`` hashes them: its breadth-first
    walk, in which an operator without a uid waits for all its inputs. An operator's index in
    this list is Flink's node-local counter for it. Refactoring analysis reads the same walk."""
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
    """The 16-byte OperatorID of every operator, indexed by operator position."""
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


def _walk_positions(topology: Topology) -> list[int]:
    """Each operator's place in the hashing walk (its node-local counter)."""
    position = [-1] * len(topology.operators)
    for count, node in enumerate(hash_order(topology)):
        position[node] = count
    return position


def state_id_changes(before: Topology, after: Topology) -> frozenset[int]:
    """Ids of ``before``'s operators whose state ID may differ in ``after``, under Flink's
    chaining rule (see :class:`Refactoring`). Operators are matched by node id, so an edit must
    keep the ids of the operators it does not remove. Usable for edits of your own."""
    walk_before, walk_after = _walk_positions(before), _walk_positions(after)
    chained_before, chained_after = flink_chaining(before), flink_chaining(after)

    def shape(
        t: Topology, walk: list[int], chained: Sequence[bool], node: int
    ) -> tuple[int, int, tuple[int, ...]]:
        inputs = tuple(t.operators[t.edge_ends[e][0]].id for e in t.in_edges[node])
        return walk[node], sum(chained[e] for e in t.out_edges[node]), inputs

    known = {op.id for op in before.operators}
    generated_changes: set[int] = set()  # ids whose generated OperatorID may change
    for node in after.topological_order:
        op = after.operators[node]
        if op.id not in known:
            generated_changes.add(op.id)
            continue
        old_node = before.index_of(op.id)
        old = before.operators[old_node]
        if op.uid is not None:
            changed = op.uid != old.uid
        else:
            new_shape = shape(after, walk_after, chained_after, node)
            changed = (
                old.uid is not None
                or new_shape != shape(before, walk_before, chained_before, old_node)
                or any(i in generated_changes for i in new_shape[2])
            )
        if changed:
            generated_changes.add(op.id)
    remaining = {op.id for op in after.operators}
    result = set()
    for old in before.operators:
        if old.id not in remaining:
            result.add(old.id)
            continue
        new = after.operator(old.id)
        if old.uid_hash is None and new.uid_hash is None:
            if old.id in generated_changes:
                result.add(old.id)
        elif (old.uid_hash or "").lower() != (new.uid_hash or "").lower():
            result.add(old.id)
    return frozenset(result)
