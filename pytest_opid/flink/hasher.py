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

from collections.abc import Sequence
from itertools import chain, compress, count, repeat
from operator import add, attrgetter, eq, is_, is_not, mul, xor
from struct import Struct
from typing import Literal

import mmh3
from mmh3 import hash128

from pytest_opid.errors import HashCollisionError
from pytest_opid.flink.chaining import Wiring, flink_chaining, wiring
from pytest_opid.model import Topology

__all__ = ["hash_order", "id_numbers", "operator_ids", "state_id_changes", "uid_operator_id"]

# Folding multiplies every byte by 37 modulo 256 (Java's byte arithmetic keeps the low 8 bits);
# bytes.translate applies that per byte in C, and the XOR runs on 128-bit integers.
_TIMES_37 = bytes((b * 37) & 0xFF for b in range(256))
# Flink's node-local counter: a Java int, little-endian.
_COUNTER = Struct("<i").pack
_UID = attrgetter("uid")
_LITTLE: Literal["little"] = "little"
_from_bytes = int.from_bytes


def uid_operator_id(uid: str) -> bytes:
    """The OperatorID Flink derives from ``uid()``: murmur3_128 of the UTF-8 bytes.

    Java encodes unpaired surrogates as ``?``; ``errors="replace"`` does the same.
    """
    return mmh3.hash_bytes(uid.encode("utf-8", "replace"), 0)


def hash_order(topology: Topology, wired: Wiring | None = None) -> list[int]:
    """Operator positions in the order ``StreamGraphHasherV2`` hashes them: its breadth-first
    walk, in which an operator without a uid waits for all its inputs. An operator's index in
    this list is Flink's node-local counter for it. Refactoring analysis reads the same walk.

    Only an operator with several inputs can be waiting or already queued when an input
    reaches it, so only those keep counts; the outputs of an operator that feeds none of them
    join the queue in one ``extend``. The queue is a list read while it grows: an operator
    put back to wait appears in it more than once, and its last appearance is its turn."""
    outs = (wired or wiring(topology, [False] * len(topology.edges))).outs
    degrees = topology.in_degrees
    size = len(degrees)
    several = bytearray(map((1).__lt__, degrees))
    waiting = list(map(mul, degrees, several))  # inputs not hashed yet, where there are several
    no_uid = bytearray(map(is_, map(_UID, topology.operators), repeat(None)))
    feeds_several = bytearray(size)  # 1 where an output has several inputs
    any(
        map(
            feeds_several.__setitem__,
            compress(topology.edge_sources, map(several.__getitem__, topology.edge_targets)),
            repeat(1),
        )
    )
    queued = bytearray(size)
    queue = list(topology.sources)
    append, extend = queue.append, queue.extend
    put_back = False
    for node in queue:
        if waiting[node] and no_uid[node]:
            queued[node] = 0  # revisit once the missing input is hashed
            put_back = True
            continue
        if feeds_several[node]:
            for target in outs[node]:
                if several[target]:
                    waiting[target] -= 1
                    if queued[target]:
                        continue
                    queued[target] = 1
                append(target)
        else:
            extend(outs[node])
    if not put_back:
        return queue
    last = dict(zip(queue, count()))  # each operator's last appearance
    return list(compress(queue, map(eq, map(last.__getitem__, queue), count())))


def operator_ids(topology: Topology, chainable: Sequence[bool]) -> list[bytes]:
    """The 16-byte OperatorID of every operator, indexed by operator position."""
    wired = wiring(topology, chainable)
    ids = id_numbers(topology, wired, hash_order(topology, wired))
    return list(map(int.to_bytes, ids, repeat(16), repeat(_LITTLE)))


def id_numbers(topology: Topology, wired: Wiring, order: Sequence[int]) -> list[int]:
    """Every operator's OperatorID as a little-endian 128-bit int (``mmh3.hash128``), indexed
    by operator position, given the walk (:func:`hash_order`).

    All in C: murmur3 of the counter repeated (once, plus once per chainable output) for
    every generated ID at once, then the inputs folded in by one lazy pipeline over the
    (operator, input) pairs in walk order, so each fold reads IDs written before it."""
    ops = topology.operators
    degrees = topology.in_degrees
    uids = list(map(_UID, ops))
    ids = [0] * len(ops)
    generated_mask = list(map(is_, map(uids.__getitem__, order), repeat(None)))
    generated = list(compress(order, generated_mask))
    counters = map(_COUNTER, compress(count(), generated_mask))  # Flink's hashes.size()
    repeats = map(add, map(wired.chained_outs.__getitem__, generated), repeat(1))
    any(map(ids.__setitem__, generated, map(hash128, map(mul, counters, repeats))))
    del generated_mask
    named = list(compress(range(len(ops)), map(is_not, uids, repeat(None))))
    uid_ids = list(
        map(
            hash128,
            map(str.encode, map(uids.__getitem__, named), repeat("utf-8"), repeat("replace")),
        )
    )
    any(map(ids.__setitem__, named, uid_ids))
    # The folds: h[j] = h[j] * 37 ^ in[j], byte by byte, for each input in input order.
    folding = list(compress(generated, map(degrees.__getitem__, generated)))
    steps = list(chain.from_iterable(map(repeat, folding, map(degrees.__getitem__, folding))))
    joins = _inputs_of_joins(topology)
    inputs = chain.from_iterable(
        map(
            joins.get, folding, map(repeat, map(wired.single_input.__getitem__, folding), repeat(1))
        )
    )
    times_37 = map(
        _from_bytes,
        map(
            bytes.translate,
            map(int.to_bytes, map(ids.__getitem__, steps), repeat(16), repeat(_LITTLE)),
            repeat(_TIMES_37),
        ),
        repeat(_LITTLE),
    )
    any(map(ids.__setitem__, steps, map(xor, times_37, map(ids.__getitem__, inputs))))
    if named:
        distinct = set(uid_ids)
        if len(distinct) != len(uid_ids) or not distinct.isdisjoint(
            map(ids.__getitem__, generated)
        ):
            _raise_collision(topology, ids, uids, order)
    return ids


def _inputs_of_joins(topology: Topology) -> dict[int, list[int]]:
    """The inputs, in input order, of every operator with several inputs."""
    degrees = topology.in_degrees
    targets = topology.edge_targets
    several = list(map((1).__lt__, map(degrees.__getitem__, targets)))
    joins: dict[int, list[int]] = {target: [] for target in compress(targets, several)}
    any(
        map(
            list.append,
            map(joins.__getitem__, compress(targets, several)),
            compress(topology.edge_sources, several),
        )
    )
    return joins


def _raise_collision(
    topology: Topology, ids: Sequence[int], uids: Sequence[str | None], order: Sequence[int]
) -> None:
    """Flink's check, in walk order: a uid's hash must not equal one assigned before it."""
    ops = topology.operators
    assigned: dict[int, int] = {}  # every hash so far -> operator position
    for node in order:
        digest = ids[node]
        uid = uids[node]
        if uid is not None and digest in assigned:
            other = ops[assigned[digest]]
            raise HashCollisionError(
                f"hash collision on uid {uid!r} of operator {ops[node].id}: its OperatorID "
                f"{digest.to_bytes(16, 'little').hex()} is already taken by operator "
                f"{other.id} ({other.name!r})"
            )
        assigned[digest] = node


def _walk_positions(topology: Topology) -> list[int]:
    """Each operator's place in the hashing walk (its node-local counter)."""
    position = [-1] * len(topology.operators)
    for counter, node in enumerate(hash_order(topology)):
        position[node] = counter
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
