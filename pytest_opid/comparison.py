"""Pairing two fingerprints of one job, engine-neutral: what stayed, moved, left or arrived.

:func:`compare` pairs old and new operators by the ID their state is filed under (the
user-defined ID where set, else the operator ID), never by name; then, only to *explain* what
moved, it pairs the rest by uid and by name. It also pairs chains and numbered state operators.
What a difference *means* (lost state, a failed restart, harmless) is each engine's decision:
:attr:`Comparison.rules` is the rule set registered for the fingerprints' engine.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from itertools import compress, count, repeat
from operator import itemgetter, le, ne, not_
from typing import Any

from pytest_opid.engine_rules import Check, EngineRules
from pytest_opid.engines import engine_rules
from pytest_opid.errors import DocumentError
from pytest_opid.gc_pause import gc_paused
from pytest_opid.inputs import fingerprint
from pytest_opid.result import (
    Fingerprint,
    JobVertex,
    OperatorFingerprint,
    RestoreCheck,
    StateOperator,
)
from pytest_opid.text import quote

__all__ = ["ChainChange", "Comparison", "StateOperatorChange", "compare"]


@dataclass(frozen=True)
class ChainChange:
    """Operators that ran in one job vertex now run in several (``split``), or the other way
    round (``merged``). Only operators present on both sides count."""

    kind: str  # "split" | "merged"
    old: tuple[JobVertex, ...]
    new: tuple[JobVertex, ...]

    def describe(self) -> str:
        """One line: ``split: "A -> B" now runs as "A" + "B"``, names quoted and escaped."""
        before = " + ".join(quote(v.name) for v in self.old)
        after = " + ".join(quote(v.name) for v in self.new)
        verb = "now runs as" if self.kind == "split" else "now run as one"
        return f"{self.kind}: {before} {verb} {after}"


@dataclass(frozen=True)
class StateOperatorChange:
    """Spark: the operator that reads ``state/<n>`` before (``old``) and after (``new``) the
    change; ``None`` where there is none."""

    state_operator_id: int
    old: StateOperator | None
    new: StateOperator | None

    @property
    def loses_state(self) -> bool:
        """An existing state directory that a different operator, or none, would read."""
        return self.old is not None


@dataclass(frozen=True)
class Comparison:
    """The effect of going from ``old`` to ``new`` on operator state and chains."""

    old: Fingerprint
    new: Fingerprint
    #: pairs with the same state ID: Flink restores the old state into the new operator
    kept: tuple[tuple[OperatorFingerprint, OperatorFingerprint], ...]
    #: pairs (by uid or name) whose state ID changed: the old state would not find this operator
    changed: tuple[tuple[OperatorFingerprint, OperatorFingerprint], ...]
    #: old operators whose state ID no new operator has (includes the old side of ``changed``)
    orphaned: tuple[OperatorFingerprint, ...]
    #: new operators whose state ID did not exist before; they start with empty state
    added: tuple[OperatorFingerprint, ...]
    chain_changes: tuple[ChainChange, ...]
    state_operator_changes: tuple[StateOperatorChange, ...]
    #: (old, receiver, own): Flink restores ``old``'s state into ``receiver``, a differently
    #: named operator that took over its ID, while ``own`` (same name as ``old``, new ID) starts
    #: empty. Typical after inserting an operator in front of another: the wrong state restores.
    misplaced: tuple[tuple[OperatorFingerprint, OperatorFingerprint, OperatorFingerprint], ...] = ()
    #: accept restores the engine allows whose state the new job reads under another meaning
    #: (``RestoreCheck.reinterpreted``): the marker's ``allow_reinterpreted_state=True``
    allow_reinterpreted_state: bool = False

    @property
    def engine(self) -> str:
        """The engine both fingerprints come from (a saved form may leave it open)."""
        return self.new.engine or self.old.engine

    @property
    def mode(self) -> str:
        return self.new.mode

    @property
    def rules(self) -> EngineRules[Comparison]:
        """The engine's rules: what a difference means there, and how to word it."""
        return engine_rules(self.engine, self.new if self.new.engine else self.old)

    @cached_property
    def restore(self) -> RestoreCheck:
        """The engine's own verdict on restoring the new job from the old one's state, as far
        as the old fingerprint tells it (computed once)."""
        return self.rules.check_restore(self.old, self.new, False, self)

    @property
    def loses_state(self) -> bool:
        """Whether restoring the old job's state into the new one loses state, by the
        engine's rules."""
        return self.rules.loses_state(self)

    @cached_property
    def renamed(self) -> tuple[tuple[OperatorFingerprint, OperatorFingerprint], ...]:
        """Kept operators with a new name: harmless, Flink does not look at names. Computed
        once, by columns: an explanation reads it several times."""
        renamed = _renamed(self.kept)
        if not self.misplaced:
            return tuple(renamed)
        misplaced = {id(o) for o, _, _ in self.misplaced}
        return tuple(p for p in renamed if id(p[0]) not in misplaced)

    @property
    def misplaces_state(self) -> bool:
        """Whether some state would be restored into a different operator than its own."""
        return bool(self.misplaced)

    def breaks(self, check: Check | str = Check.BOTH) -> bool:
        """Whether the change violates what ``check`` holds stable, by the engine's rules."""
        return self.rules.breaks(self, Check.parse(check))

    @cached_property
    def derived(self) -> object:
        """What the engine's rules derive from this comparison (their own pairing of stages,
        say: :meth:`EngineRules.derive <pytest_opid.engine_rules.EngineRules.derive>`), computed
        once, on first use: the verdict, the explanation and the JSON form each ask. ``None``
        for an engine registered before the hook."""
        derive = getattr(self.rules, "derive", None)
        return derive(self) if derive is not None else None

    @cached_property
    def engine_changes(self) -> dict[str, Any]:
        """The engine's own account of what changed beyond operators, as JSON-ready keys
        (:meth:`EngineRules.changes <pytest_opid.engine_rules.EngineRules.changes>`; ``{}`` for
        an engine without one). Computed once: the JSON form and the picture both read it."""
        changes = getattr(self.rules, "changes", None)  # an engine registered before the hook
        return dict(changes(self)) if changes is not None else {}

    @property
    def real_chain_changes(self) -> tuple[ChainChange, ...]:
        """``chain_changes``, unless the engine says that pairing chains by operator IDs does not
        describe its chains (its own account replaces ``"chain_changes"``): then none, and
        :attr:`engine_changes` says what changed instead."""
        if "chain_changes" in self.engine_changes:
            return ()
        return self.chain_changes

    def to_dict(self) -> dict[str, Any]:
        """The JSON form ``opid diff --json`` prints: the engine-neutral keys, then the
        engine's own (:attr:`engine_changes`), which replace a neutral key of the same name."""
        data: dict[str, Any] = {
            "engine": self.engine,
            "mode": self.mode,
            "loses_state": self.loses_state,
            "changed": [{"old": _op(o), "new": _op(n)} for o, n in self.changed],
            "orphaned": [_op(o) for o in self.orphaned],
            "added": [_op(n) for n in self.added],
            "renamed": [{"old": _op(o), "new": _op(n)} for o, n in self.renamed],
            "misplaced": [
                {"old": _op(o), "restored_into": _op(n), "own": _op(a)}
                for o, n, a in self.misplaced
            ],
            "chain_changes": [
                {
                    "kind": c.kind,
                    "old": [{"id": v.id, "name": v.name} for v in c.old],
                    "new": [{"id": v.id, "name": v.name} for v in c.new],
                }
                for c in self.chain_changes
            ],
            "state_operator_changes": [
                {
                    "state_operator_id": c.state_operator_id,
                    "old": _state(c.old),
                    "new": _state(c.new),
                }
                for c in self.state_operator_changes
            ],
        }
        data.update(self.engine_changes)
        return data


def _op(op: OperatorFingerprint) -> dict[str, Any]:
    return {
        "node": op.node,
        "name": op.name,
        "operator_id": op.operator_id,
        "user_operator_id": op.user_operator_id,
        "state_id": op.state_id,
    }


def _state(s: StateOperator | None) -> dict[str, Any] | None:
    if s is None:
        return None
    return {"operator_id": s.operator_id, "name": s.name, "kind": s.kind}


# -- comparing ----------------------------------------------------------------------------------


def compare(old: Any, new: Any, *, allow_reinterpreted_state: bool = False) -> Comparison:
    """Pair ``new`` with ``old`` by state ID, then explain the rest by uid and name.

    ``old`` and ``new``: fingerprints, or anything :func:`pytest_opid.fingerprint` takes (a
    DataFrame, a streaming query, a topology, a saved fingerprint or its path, ...), which is
    fingerprinted first. Fingerprints of two different engines (or modes) do not describe one
    job: that is a :class:`DocumentError`. ``allow_reinterpreted_state`` accepts restores the
    engine allows whose state the new job reads under another meaning."""
    found = _compare(_fingerprint_of(old), _fingerprint_of(new))
    if allow_reinterpreted_state:
        return replace(found, allow_reinterpreted_state=True)
    return found


def _fingerprint_of(source: Any) -> Fingerprint:
    return source if isinstance(source, Fingerprint) else fingerprint(source)


def _compare(old: Fingerprint, new: Fingerprint) -> Comparison:
    if old.engine and new.engine and (old.engine, old.mode) != (new.engine, new.mode):
        raise DocumentError(
            f"cannot compare a {old.engine} {old.mode} fingerprint with a {new.engine} "
            f"{new.mode} one: they describe different jobs"
        )
    # Both in the terms every version of the engine shares: a fingerprint made on one
    # version and compared with one made on another differs by no renaming.
    try:
        rules = engine_rules(new.engine or old.engine, new if new.engine else old)
    except DocumentError:
        pass  # an engine not installed here: the comparison says so where it needs the rules
    else:
        old, new = rules.neutral(old), rules.neutral(new)
    with gc_paused():  # a pair per operator: the collector's passes would cost more
        if _same_state_ids(old.operators, new.operators):
            return _unchanged_ids(old, new)
        kept, orphaned, added = _by_state_id(old.operators, new.operators)
        changed = _pair(orphaned, added)
        pairs = kept + changed
        misplaced = _misplaced(kept, added, {id(n) for _, n in changed})
        return Comparison(
            old=old,
            new=new,
            kept=tuple(kept),
            changed=tuple(changed),
            orphaned=tuple(orphaned),
            added=tuple(added),
            chain_changes=tuple(_chain_changes(old, new, pairs)),
            state_operator_changes=tuple(_state_changes(old, new)),
            misplaced=tuple(misplaced),
        )


_OPERATOR_ID = itemgetter(OperatorFingerprint._fields.index("operator_id"))
_USER_ID = itemgetter(OperatorFingerprint._fields.index("user_operator_id"))
_JOB_VERTEX = itemgetter(OperatorFingerprint._fields.index("job_vertex"))
_NAME = itemgetter(OperatorFingerprint._fields.index("name"))
_Pair = tuple[OperatorFingerprint, OperatorFingerprint]
_OLD, _NEW = itemgetter(0), itemgetter(1)


def _state_ids(operators: Sequence[OperatorFingerprint]) -> list[str]:
    """Each operator's state ID, as a column: the operator IDs where no user ID is set."""
    if not any(map(_USER_ID, operators)):
        return list(map(_OPERATOR_ID, operators))
    return [op.state_id for op in operators]


def _by_state_id(
    old: Sequence[OperatorFingerprint], new: Sequence[OperatorFingerprint]
) -> tuple[list[_Pair], list[OperatorFingerprint], list[OperatorFingerprint]]:
    """Kept pairs (in old order), orphaned old and added new operators: the k-th old operator
    with a state ID takes the k-th new one with it. Where every state ID is unique on both
    sides (the usual case) that is one dict lookup per operator, done by columns in C."""
    old_ids, new_ids = _state_ids(old), _state_ids(new)
    if len(set(old_ids)) == len(old_ids) and len(set(new_ids)) == len(new_ids):
        # Unique IDs: the common head and tail pair in place (as zips), the middle by a dict.
        head = next(compress(count(), map(ne, old_ids, new_ids)), min(len(old), len(new)))
        tail = next(
            compress(count(), map(ne, reversed(old_ids[head:]), reversed(new_ids[head:]))),
            min(len(old), len(new)) - head,
        )
        old_end, new_end = len(old) - tail, len(new) - tail
        middle_ids = new_ids[head:new_end]
        position = dict(zip(middle_ids, range(head, new_end), strict=True))
        hits = list(map(position.get, old_ids[head:old_end], repeat(-1)))
        found = list(map(le, repeat(0), hits))
        taken = list(compress(hits, found))
        middle = old[head:old_end]
        kept = list(zip(old[:head], new[:head], strict=True))
        kept += zip(compress(middle, found), map(new.__getitem__, taken), strict=True)
        kept += zip(old[old_end:], new[new_end:], strict=True)
        orphaned = list(compress(middle, map(not_, found)))
        free = set(range(head, new_end)).difference(taken)
        added = list(compress(new[head:new_end], map(free.__contains__, range(head, new_end))))
        return kept, orphaned, added
    waiting: dict[str, deque[int]] = defaultdict(deque)
    for i, sid in enumerate(new_ids):
        waiting[sid].append(i)
    kept = []
    orphaned = []
    for op, sid in zip(old, old_ids, strict=True):
        queue = waiting.get(sid)
        if queue:
            kept.append((op, new[queue.popleft()]))
        else:
            orphaned.append(op)
    picked = {id(n) for _, n in kept}
    added = [n for n in new if id(n) not in picked]
    return kept, orphaned, added


def _renamed(kept: Sequence[_Pair]) -> list[_Pair]:
    """The pairs of ``kept`` whose names differ, compared as columns."""
    olds, news = map(_OLD, kept), map(_NEW, kept)
    return list(compress(kept, map(ne, map(_NAME, olds), map(_NAME, news))))


def _same_state_ids(old: Sequence[OperatorFingerprint], new: Sequence[OperatorFingerprint]) -> bool:
    """Whether both list the same state IDs in the same order, compared as columns (``map``
    in C): equal operator-ID and user-ID columns settle it without a state ID per operator."""
    if len(old) != len(new):
        return False
    if list(map(_OPERATOR_ID, old)) == list(map(_OPERATOR_ID, new)) and list(
        map(_USER_ID, old)
    ) == list(map(_USER_ID, new)):
        return True
    return _state_ids(old) == _state_ids(new)


def _unchanged_ids(old: Fingerprint, new: Fingerprint) -> Comparison:
    """:func:`compare` where both sides list the same state IDs in the same order, the common
    case of a snapshot check: the pairing is then position by position (the k-th old operator
    with an ID takes the k-th new one with it), nothing is orphaned, added, changed or
    misplaced (misplacing needs an added operator), and chains changed only if some operator's
    job vertex did."""
    kept = tuple(zip(old.operators, new.operators, strict=True))
    same_vertices = list(map(_JOB_VERTEX, old.operators)) == list(map(_JOB_VERTEX, new.operators))
    return Comparison(
        old=old,
        new=new,
        kept=kept,
        changed=(),
        orphaned=(),
        added=(),
        chain_changes=() if same_vertices else tuple(_chain_changes(old, new, kept)),
        state_operator_changes=tuple(_state_changes(old, new)),
        misplaced=(),
    )


def _misplaced(
    kept: Sequence[_Pair],
    added: Sequence[OperatorFingerprint],
    explained: set[int],
) -> list[tuple[OperatorFingerprint, OperatorFingerprint, OperatorFingerprint]]:
    """Kept pairs that are not a rename: the new holder of the old ID has another name, and an
    operator with the old name is new (it got another ID). Flink restores by ID, so the old
    operator's state would land in the stranger while its own operator starts empty."""
    by_name: dict[str, deque[OperatorFingerprint]] = defaultdict(deque)
    for n in added:
        if id(n) not in explained:
            by_name[n.name].append(n)
    found: list[tuple[OperatorFingerprint, OperatorFingerprint, OperatorFingerprint]] = []
    if not by_name:
        return found
    for o, n in _renamed(kept):
        if o.uid is None and o.user_operator_id is None:
            own = by_name.get(o.name)
            if own:
                found.append((o, n, own.popleft()))
                if not own:
                    del by_name[o.name]
                    if not by_name:
                        break  # every waiting name is taken: the rest would find none
    return found


def _pair(
    orphaned: Sequence[OperatorFingerprint], added: Sequence[OperatorFingerprint]
) -> list[tuple[OperatorFingerprint, OperatorFingerprint]]:
    """Explain orphaned IDs: the new operator with the same uid, else the same name.

    Names are aligned as sequences (in operator order, longest matching runs first), not by
    first match, so generic names such as Spark's ``Filter`` or ``Project`` pair with their own
    counterparts around an inserted operator. Nothing weaker (such as node position) is used:
    pairing an operator with a stranger would suggest ``setUidHash`` on the wrong operator and
    restore foreign state into it.
    """
    pairs: list[tuple[OperatorFingerprint, OperatorFingerprint]] = []
    by_uid: dict[str, deque[OperatorFingerprint]] = defaultdict(deque)
    for n in added:
        if n.uid is not None:
            by_uid[n.uid].append(n)
    taken: set[int] = set()
    free_old = []
    for o in orphaned:
        queue = by_uid.get(o.uid) if o.uid is not None else None
        if queue:
            n = queue.popleft()
            pairs.append((o, n))
            taken.add(id(n))
        else:
            free_old.append(o)
    free_new = [n for n in added if id(n) not in taken]
    for i, j in align([o.name for o in free_old], [n.name for n in free_new]):
        pairs.append((free_old[i], free_new[j]))
    position = {id(o): i for i, o in enumerate(orphaned)}
    pairs.sort(key=lambda p: position[id(p[0])])
    return pairs


def align(old: Sequence[str], new: Sequence[str]) -> list[tuple[int, int]]:
    """Pairs ``(i, j)`` with ``old[i] == new[j]``, in near-linear time, as patience diff does.

    Names that occur exactly once on each side are anchors; the longest run of anchors in the
    same order on both sides is kept (longest increasing subsequence, ``O(n log n)``). Between
    two kept anchors, the k-th occurrence of a name on one side pairs with its k-th occurrence
    on the other. Repeated generic names (``Filter``, ``Project``) thus pair with their own
    counterparts around an inserted operator, without the quadratic cost of a full alignment.
    """
    count_old: dict[str, int] = defaultdict(int)
    count_new: dict[str, int] = defaultdict(int)
    for name in old:
        count_old[name] += 1
    where_new: dict[str, int] = {}
    for j, name in enumerate(new):
        count_new[name] += 1
        where_new[name] = j
    candidates = [
        (i, where_new[name])
        for i, name in enumerate(old)
        if count_old[name] == 1 and count_new.get(name) == 1
    ]
    anchors = _increasing_run(candidates)
    pairs: list[tuple[int, int]] = []
    start_old = start_new = 0
    for i, j in [*anchors, (len(old), len(new))]:
        waiting: dict[str, deque[int]] = defaultdict(deque)
        for k in range(start_new, j):
            waiting[new[k]].append(k)
        for k in range(start_old, i):
            queue = waiting.get(old[k])
            if queue:
                pairs.append((k, queue.popleft()))
        if i < len(old):
            pairs.append((i, j))
        start_old, start_new = i + 1, j + 1
    return pairs


def _increasing_run(pairs: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest subsequence of ``pairs`` (sorted by first item) whose second items rise."""
    tails: list[int] = []  # tails[k]: smallest second item ending a run of length k + 1
    tail_at: list[int] = []  # index into pairs of that run's last pair
    previous = [-1] * len(pairs)
    for index, (_, j) in enumerate(pairs):
        k = bisect_left(tails, j)
        if k == len(tails):
            tails.append(j)
            tail_at.append(index)
        else:
            tails[k] = j
            tail_at[k] = index
        previous[index] = tail_at[k - 1] if k else -1
    run: list[tuple[int, int]] = []
    index = tail_at[-1] if tail_at else -1
    while index >= 0:
        run.append(pairs[index])
        index = previous[index]
    run.reverse()
    return run


def _chain_changes(
    old: Fingerprint,
    new: Fingerprint,
    pairs: Iterable[tuple[OperatorFingerprint, OperatorFingerprint]],
) -> list[ChainChange]:
    old_vertex = {v.id: v for v in old.job_vertices}
    new_vertex = {v.id: v for v in new.job_vertices}
    forward: dict[str, set[str]] = defaultdict(set)  # old vertex -> new vertices
    backward: dict[str, set[str]] = defaultdict(set)  # new vertex -> old vertices
    pairs = list(pairs)
    olds, news = map(_OLD, pairs), map(_NEW, pairs)
    # the distinct (old vertex, new vertex) pairs, found by columns
    links = dict.fromkeys(zip(map(_JOB_VERTEX, olds), map(_JOB_VERTEX, news), strict=True))
    for o, n in links:
        if o in old_vertex and n in new_vertex:
            forward[o].add(n)
            backward[n].add(o)
    old_order = {v.id: i for i, v in enumerate(old.job_vertices)}
    new_order = {v.id: i for i, v in enumerate(new.job_vertices)}
    changes = []
    for v in old.job_vertices:
        targets = forward.get(v.id, ())
        if len(targets) > 1:
            parts = sorted(targets, key=new_order.__getitem__)
            changes.append(ChainChange("split", (v,), tuple(new_vertex[t] for t in parts)))
    for v in new.job_vertices:
        sources = backward.get(v.id, ())
        if len(sources) > 1:
            parts = sorted(sources, key=old_order.__getitem__)
            changes.append(ChainChange("merged", tuple(old_vertex[s] for s in parts), (v,)))
    return changes


def _state_changes(old: Fingerprint, new: Fingerprint) -> list[StateOperatorChange]:
    if old.state_operators is None and new.state_operators is None:
        return []
    before = {s.state_operator_id: s for s in old.state_operators or ()}
    after = {s.state_operator_id: s for s in new.state_operators or ()}
    changes = []
    for number in sorted(before.keys() | after.keys()):
        o, n = before.get(number), after.get(number)
        # Spark finds state/<n> by number alone; the operator_id (a shape hash) moves with any
        # upstream change, so what tells a different operator is its kind and name.
        if o is not None and n is not None and (o.kind, o.name) == (n.kind, n.name):
            continue
        changes.append(StateOperatorChange(number, o, n))
    return changes
