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

from collections import deque
from collections.abc import Sequence
from itertools import accumulate
from operator import itemgetter

import mmh3

from pytest_opid.errors import HashCollisionError
from pytest_opid.topology import Topology

__all__ = ["operator_ids", "uid_operator_id"]

# Folding multiplies every byte by 37 modulo 256 (Java's byte arithmetic keeps the low 8 bits);
# bytes.translate applies that per byte in C, and the XOR runs on 128-bit integers.
_TIMES_37 = bytes((b * 37) & 0xFF for b in range(256))
_COUNTER = [i.to_bytes(4, "little", signed=True) for i in range(4096)]


def uid_operator_id(uid: str) -> bytes:
    """The OperatorID Flink derives from ``uid()``: murmur3_128 of the UTF-8 bytes.

    Java encodes unpaired surrogates as ``?``; ``errors="replace"`` does the same.
    """
    return mmh3.hash_bytes(uid.encode("utf-8", "replace"), 0)


def operator_ids(topology: Topology, chainable: Sequence[bool]) -> list[bytes]:
    """The 16-byte OperatorID of every operator, indexed by operator position."""
    ops = topology.operators
    outs = topology.out_edges
    ends = topology.edge_ends
    degrees = topology.in_degrees
    hash_bytes = mmh3.hash_bytes
    from_bytes = int.from_bytes

    hashes: list[bytes | None] = [None] * len(ops)
    uids = [op.uid for op in ops]
    targets = [target for _, target in ends]
    # Every operator's input operators in input order, in one flat list: sorting the edges by
    # target (a stable sort keeps edge order) groups them, and operator p's inputs are
    # inputs[first[p]:first[p + 1]]. Cheaper than a list per operator on a large job.
    inputs = [source for source, _ in sorted(ends, key=itemgetter(1))]
    first = [0, *accumulate(degrees)]
    waiting = list(degrees)  # per operator: how many of its inputs have no hash yet
    assigned: dict[bytes, int] = {}  # every hash so far -> operator position
    count = 0  # Flink's hashes.size(): the node-local counter
    visited = bytearray(len(ops))
    queue = deque(topology.sources)
    for node in queue:
        visited[node] = 1

    while queue:
        node = queue.popleft()
        uid = uids[node]
        if uid is None and waiting[node]:
            visited[node] = 0  # revisit once the missing input is hashed
            continue
        # The node gets its hash below; nothing in between reads the queue, so its outputs'
        # targets are enqueued now, in the same pass that counts its chainable outputs.
        repeat = 1
        for e in outs[node]:
            if chainable[e]:
                repeat += 1
            target = targets[e]
            waiting[target] -= 1
            if not visited[target]:
                visited[target] = 1
                queue.append(target)
        if uid is not None:
            digest = uid_operator_id(uid)
            if digest in assigned:
                other = ops[assigned[digest]]
                raise HashCollisionError(
                    f"hash collision on uid {uid!r} of operator {ops[node].id}: its OperatorID "
                    f"{digest.hex()} is already taken by operator {other.id} ({other.name!r})"
                )
        else:
            local = _COUNTER[count] if count < 4096 else count.to_bytes(4, "little", signed=True)
            digest = hash_bytes(local * repeat, 0)
            for source in inputs[first[node] : first[node + 1]]:
                folded = from_bytes(digest.translate(_TIMES_37), "little")
                digest = (folded ^ from_bytes(hashes[source], "little")).to_bytes(16, "little")
        hashes[node] = digest
        assigned[digest] = node
        count += 1
    return hashes  # type: ignore[return-value]  # every node of a DAG is reached
