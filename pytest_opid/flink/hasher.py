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

The computation is the shared structural hasher, :mod:`pytest_opid.topology.structural_hash`,
which the Spark frontend uses too; this module gives it its Flink names and adds
:func:`state_id_changes`, which reads the walk under Flink's chaining rule.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_opid.flink.chaining import flink_chaining
from pytest_opid.model import Topology
from pytest_opid.topology.structural_hash import hash_order, operator_ids, uid_operator_id

__all__ = ["hash_order", "operator_ids", "state_id_changes", "uid_operator_id"]


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
