"""Refactorings with a known effect (:func:`refactorings`): one edit of a topology and the
state IDs it may change, computed over both graphs with Flink's hasher rules."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from pytest_opid.flink import flink_chaining, state_id_changes
from pytest_opid.model import ChainingStrategy, Edge, Operator, Partitioner, Topology
from pytest_opid.strategies.dags import UID_WORDS
from pytest_opid.strategies.draws import pick

__all__ = ["REFACTORING_KINDS", "Refactoring", "refactorings"]

#: Every kind of edit :func:`refactorings` knows.
REFACTORING_KINDS = (
    "rename",
    "parallelism",
    "insert",
    "sink",
    "uid",
    "remove_uid",
    "break_chain",
    "repartition",
)


@dataclass(frozen=True)
class Refactoring:
    """One edit of a topology and the state IDs it may change.

    ``may_change`` holds the ids of ``before``'s operators whose state ID (``setUidHash`` ID if
    set, else OperatorID) may differ in ``after``; ``added`` the ids of operators the edit
    created. Operators keep their ids across the edit.

    The set follows from Flink's hasher: an operator with a uid has the uid's hash; any other
    operator's hash is a function of its place in the breadth-first walk (the count of hashes
    before it), its number of chainable outputs and its inputs' hashes in order. So an operator
    may change when its uid changes, or, without a uid, when its walk position, its chainable
    outputs or its input list change, or an input's hash may change. This is computed over both
    graphs (walk order and Flink's chaining rule), not guessed per kind: inserting an operator
    shifts the walk count of everything hashed after it, and a new chainable edge changes the
    upstream operator's hash. It is an upper bound, and tight up to hash collisions.
    """

    kind: str
    description: str
    before: Topology
    after: Topology
    may_change: frozenset[int]
    added: frozenset[int] = frozenset()


def refactorings(
    topology: Topology, kinds: Sequence[str] = REFACTORING_KINDS
) -> st.SearchStrategy[Refactoring]:
    """Random edits of ``topology`` drawn from ``kinds`` (see :data:`REFACTORING_KINDS`).

    * ``rename``: another operator name (changes nothing).
    * ``parallelism``: another parallelism for one operator (FORWARD edges it breaks become
      REBALANCE).
    * ``insert``: a new operator on one edge, upstream of the edge's target.
    * ``sink``: a new sink behind one operator.
    * ``uid`` / ``remove_uid``: pin an operator with a uid, or drop its uid.
    * ``break_chain``: ``startNewChain()`` or ``disableChaining()`` on a chained operator.
    * ``repartition``: another partitioner on one edge (a keyBy, a rebalance, ...).

    Only kinds that apply to the topology are drawn (``break_chain`` needs a chained edge,
    ``remove_uid`` a uid, ...); if none applies the example is rejected. Use it as
    ``topologies().flatmap(refactorings)``.
    """
    unknown = [k for k in kinds if k not in REFACTORING_KINDS]
    if unknown or not kinds:
        raise InvalidArgument(
            f"unknown refactoring kind {unknown[0] if unknown else None!r} "
            f"(known: {', '.join(REFACTORING_KINDS)})"
        )
    if not isinstance(topology, Topology):
        raise InvalidArgument(f"refactorings() needs a Topology, got {type(topology).__name__}")
    applicable = [k for k in kinds if _APPLIES[k](topology)]
    if not applicable:
        return st.nothing()
    return _refactorings(topology, tuple(applicable))


@st.composite
def _refactorings(draw, before: Topology, kinds: tuple[str, ...]) -> Refactoring:
    kind = pick(draw, kinds)
    ops = list(before.operators)
    edges = list(before.edges)
    fresh = max(op.id for op in ops) + 1
    added: frozenset[int] = frozenset()

    if kind == "rename":
        at = draw(st.integers(0, len(ops) - 1))
        old = ops[at]
        name = pick(draw, ("Renamed", "Map (v2)", "Bereinigen", "x -> y", ""))
        if name == old.name:
            name += " (renamed)"
        ops[at] = dataclasses.replace(old, name=name)
        text = f"rename operator {old.id} {old.name!r} to {name!r}"
    elif kind == "parallelism":
        at = draw(st.integers(0, len(ops) - 1))
        old = ops[at]
        par = pick(draw, [p for p in (-1, 1, 2, 3, 4, 8) if p != old.parallelism])
        ops[at] = dataclasses.replace(old, parallelism=par)
        for i, e in enumerate(edges):
            if e.partitioner is Partitioner.FORWARD and old.id in (e.source, e.target):
                other = ops[before.index_of(e.target if e.source == old.id else e.source)]
                if other.parallelism != par:
                    edges[i] = dataclasses.replace(e, partitioner=Partitioner.REBALANCE)
        text = f"set the parallelism of operator {old.id} {old.name!r} to {par}"
    elif kind == "insert":
        at = draw(st.integers(0, len(edges) - 1))
        old = edges[at]
        up = before.operator(old.source)
        name = pick(draw, ("Filter", "Map", "Enrich"))
        ops.append(
            Operator(
                id=fresh,
                name=name,
                parallelism=up.parallelism,
                max_parallelism=up.max_parallelism,
                slot_sharing_group=up.slot_sharing_group,
            )
        )
        # The new edges take the old one's place in the upstream's outputs and in the
        # downstream's inputs.
        edges[at : at + 1] = [
            Edge(old.source, fresh),
            dataclasses.replace(old, source=fresh),
        ]
        added = frozenset({fresh})
        text = f"insert {name!r} ({fresh}) between operators {old.source} and {old.target}"
    elif kind == "sink":
        at = draw(st.integers(0, len(ops) - 1))
        up = ops[at]
        ops.append(
            Operator(
                id=fresh,
                name="Sink: Audit",
                parallelism=up.parallelism,
                max_parallelism=up.max_parallelism,
                slot_sharing_group=up.slot_sharing_group,
                yielding=True,
            )
        )
        edges.append(Edge(up.id, fresh))
        added = frozenset({fresh})
        text = f"add a sink ({fresh}) behind operator {up.id} {up.name!r}"
    elif kind == "uid":
        at = pick(draw, [i for i, op in enumerate(ops) if op.uid is None])
        old = ops[at]
        taken = {op.uid.encode("utf-8", "replace") for op in ops if op.uid is not None}
        uid = pick(draw, UID_WORDS)
        while uid.encode("utf-8", "replace") in taken:
            uid += "'"
        ops[at] = dataclasses.replace(old, uid=uid)
        text = f"set uid {uid!r} on operator {old.id} {old.name!r}"
    elif kind == "remove_uid":
        at = pick(draw, [i for i, op in enumerate(ops) if op.uid is not None])
        old = ops[at]
        ops[at] = dataclasses.replace(old, uid=None)
        text = f"remove uid {old.uid!r} from operator {old.id} {old.name!r}"
    elif kind == "break_chain":
        chained = [i for i, c in enumerate(flink_chaining(before)) if c]
        e = edges[pick(draw, chained)]
        at = before.index_of(e.target)
        old = ops[at]
        strategy = pick(draw, (ChainingStrategy.HEAD, ChainingStrategy.NEVER))
        ops[at] = dataclasses.replace(old, chaining_strategy=strategy)
        call = "startNewChain()" if strategy is ChainingStrategy.HEAD else "disableChaining()"
        text = f"{call} on operator {old.id} {old.name!r}"
    else:  # repartition
        at = draw(st.integers(0, len(edges) - 1))
        old = edges[at]
        equal = before.operator(old.source).parallelism == before.operator(old.target).parallelism
        choices = [
            p
            for p in Partitioner
            if p is not old.partitioner and (equal or p is not Partitioner.FORWARD)
        ]
        new = pick(draw, choices)
        edges[at] = dataclasses.replace(old, partitioner=new)
        text = (
            f"partition the edge {old.source} -> {old.target} by {new.value} "
            f"instead of {old.partitioner.value}"
        )
    after = Topology(
        ops,
        edges,
        chaining_enabled=before.chaining_enabled,
        chain_different_max_parallelism=before.chain_different_max_parallelism,
    )
    return Refactoring(kind, text, before, after, state_id_changes(before, after), added)


def _has_edges(t: Topology) -> bool:
    return bool(t.edges)


_APPLIES = {
    "rename": lambda t: True,
    "parallelism": lambda t: True,
    "insert": _has_edges,
    "sink": lambda t: True,
    "uid": lambda t: any(op.uid is None for op in t.operators),
    "remove_uid": lambda t: any(op.uid is not None for op in t.operators),
    "break_chain": lambda t: any(flink_chaining(t)),
    "repartition": _has_edges,
}
