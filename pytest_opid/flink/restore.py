"""Would Flink 2.3 start a new version of a job from a savepoint of the old one? Its own verdict.

Flink decides in two steps when a job is submitted with a savepoint or retained checkpoint:

1. ``Checkpoints.loadAndValidateCheckpoint`` maps every operator state of ``_metadata`` (in file
   order) to the job vertex whose operators have that ID, as generated or as user-defined
   (``setUidHash``). A mapped state needs a compatible max parallelism: equal to the job
   vertex's, or the vertex's was not configured (Flink then adopts the savepoint's,
   ``DefaultVertexParallelismInfo.canRescaleMaxParallelism``). A state that maps to nothing
   fails the restore only if it holds something (coordinator state, or any subtask with
   state) and ``--allowNonRestoredState`` is off; an empty one is skipped.
2. ``StateAssignmentOperation`` hands each mapped state to one operator (the user-defined ID
   where the savepoint has state under it, else the generated one) and, for every job vertex
   with state, refuses a max parallelism below the vertex's parallelism.

:func:`check_savepoint` mirrors both on a :class:`~pytest_opid.flink.savepoint.Savepoint` and a
new :class:`~pytest_opid.result.Fingerprint`; :func:`check_fingerprint` does the same from the old
job's fingerprint (a snapshot or saved fingerprint), taking what its savepoint would hold from
it. Flink stops at the first failure; these report every one, the first one Flink's. Warnings
name restores that succeed but hand a stateful operator's state to another operator, or drop it.

Flink stores state under the *generated* OperatorID even where ``setUidHash`` is set (the
user-defined ID only maps old state on restore), so an old fingerprint's state is looked up by
its ``operator_id``. What the check reads (the old states, the new job's vertices as the
scheduler sees them, Flink's default max parallelism) is :mod:`pytest_opid.flink.restore_states`'s;
what each finding says, :mod:`pytest_opid.flink.restore_messages`'s.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from functools import cached_property
from itertools import compress, repeat
from operator import eq, getitem, is_not, itemgetter, lt, not_
from typing import cast

from pytest_opid.comparison import Comparison, compare
from pytest_opid.flink.restore_messages import (
    bound_problem,
    max_parallelism_problem,
    misplaced_warning,
    shadowed_warning,
    skipped_warning,
    unmapped_problem,
)
from pytest_opid.flink.restore_states import (
    OPERATOR_ID,
    STATE_MAX,
    UPPER_BOUND_MAX_PARALLELISM,
    OldState,
    OldStates,
    ScheduledVertex,
    fingerprint_states,
    listed_states,
    new_vertices,
    savepoint_states,
)
from pytest_opid.flink.savepoint import Savepoint
from pytest_opid.gc_pause import gc_paused
from pytest_opid.result import (
    ChainedOperator,
    Fingerprint,
    OperatorFingerprint,
    RestoreCheck,
    RestoreProblem,
)
from pytest_opid.text import quote

__all__ = [
    "check_fingerprint",
    "check_savepoint",
    "pin_lines",
]


ENGINE = "flink"

#: An operator's generated ID (``False``) or user-defined ID (``True``): ``ChainedOperator[b]``.
_PICK = cast(Callable[[ChainedOperator, bool], str], getitem)
_UID_FIELD = OperatorFingerprint._fields.index("uid")
_NAME_FIELD = OperatorFingerprint._fields.index("name")
#: Values looked up by a scan of the unclaimed operators before they are indexed.
_SCANS = 8


# -- the check ---------------------------------------------------------------------------------


def check_savepoint(
    savepoint: Savepoint, new: Fingerprint, *, allow_non_restored_state: bool = False
) -> RestoreCheck:
    """Flink's verdict on starting ``new`` from ``savepoint`` (a savepoint or retained
    checkpoint, as :func:`~pytest_opid.flink.savepoint.read_savepoint` reads it)."""
    states = listed_states(savepoint_states(savepoint))
    return _Check(states, new, allow_non_restored_state).run()


def check_fingerprint(
    old: Fingerprint,
    new: Fingerprint,
    *,
    allow_non_restored_state: bool = False,
    comparison: Comparison | None = None,
) -> RestoreCheck:
    """Flink's verdict on starting ``new`` from a savepoint of the job ``old`` describes (a
    snapshot or saved fingerprint). Operators ``old`` marks stateless are left out; where it
    does not say (``stateful`` is None), an operator counts as holding state. Max parallelism
    is the old job vertex's (or operator's), else Flink's default for its parallelism.
    ``comparison``, where the caller has it, saves pairing the two again."""
    with gc_paused():  # columns of a large job: the collector's passes would cost more
        states = fingerprint_states(old)
        check = _Check(states, new, allow_non_restored_state, from_fingerprint=True)
        result = check.run()
    warnings = list(result.warnings)
    for o, receiver, own in (comparison or compare(old, new)).misplaced:
        if o.stateful is not False:
            warnings.append(misplaced_warning(o.operator_id, o.name, o.uid, receiver, own))
    return RestoreCheck(ENGINE, result.restorable, result.problems, tuple(warnings))


class _Check:
    def __init__(
        self,
        states: OldStates,
        new: Fingerprint,
        allow: bool,
        *,
        from_fingerprint: bool = False,
    ) -> None:
        self.states = states
        self.new = new
        self.allow = allow
        self.from_fingerprint = from_fingerprint
        #: every vertex's operators in order, their generated and user-defined IDs, and the
        #: index of the vertex each runs in
        self.vertices, self.members, self.generated, self.member_vertex, self.vertex_of = (
            new_vertices(new)
        )
        self.users = list(map(itemgetter(1), self.members))
        self._receivers: dict[str, OperatorFingerprint] | None = None
        self._taken: list[str] = []  # the IDs of the states taken, where receivers are lazy
        #: unclaimed operators by uid or name (field number), as far as looked up
        self._free: dict[int, dict[str, list[OperatorFingerprint]]] | None = None
        self._indexed: set[int] = set()  # fields of _free that index every value

    @cached_property
    def by_id(self) -> dict[str, OperatorFingerprint]:
        """The new operators by generated ID (the first with it), for messages."""
        operators = self.new.operators
        return dict(zip(map(OPERATOR_ID, reversed(operators)), reversed(operators), strict=True))

    @property
    def receivers(self) -> dict[str, OperatorFingerprint]:
        """State ID -> the new operator that takes it, in the operators' order. Where step 2
        was settled by columns, built on the first question (only messages ask)."""
        if self._receivers is None:
            taken = set(self._taken)
            ids = list(compress(self.generated, map(taken.__contains__, self.generated)))
            ops = list(map(self.by_id.get, ids))
            known = map(is_not, ops, repeat(None))
            self._receivers = dict(zip(compress(ids, known), filter(None, ops), strict=True))
        return self._receivers

    def run(self) -> RestoreCheck:
        with gc_paused():  # a few objects per operator: the collector's passes would cost more
            return self._run()

    def _run(self) -> RestoreCheck:
        owner = self._owners()
        first, ok, at = self._map(owner)
        if self._assigned_by_id(ok, at, owner):
            remaining: dict[str, OldState] = {}
            via_user_id: set[str] = set()
            bound: list[tuple[OldState, ScheduledVertex]] = []
        else:
            ids = list(compress(self.states.ids, ok))
            states = map(self.states.__getitem__, compress(range(len(ok)), ok))
            mapped = dict(zip(ids, states, strict=True))
            remaining, via_user_id, bound = self._assign(mapped)
        problems: list[RestoreProblem] = []
        warnings: list[RestoreProblem] = []
        claimed: set[int] = set()
        for _, state, index in first:
            if index >= 0:
                problems.append(max_parallelism_problem(state, self.vertices[index], self.by_id))
                continue
            candidate = self.candidate(state, claimed)
            if self.allow:
                warnings.append(skipped_warning(state, candidate, self.from_fingerprint))
            else:
                problems.append(unmapped_problem(state, candidate, self.from_fingerprint))
        problems += [bound_problem(s, v, self.receivers.get(s.operator_id)) for s, v in bound]
        for state in remaining.values():  # mapped, but an operator took its user-defined ID
            if state.holds_state:
                op = self.by_id.get(state.operator_id)
                warnings.append(shadowed_warning(state, op, self.from_fingerprint))
        if not self.from_fingerprint:
            warnings += self.misplaced_warnings(via_user_id)
        return RestoreCheck(ENGINE, not problems, tuple(problems), tuple(warnings))

    def _owners(self) -> dict[str, int]:
        """The vertex each operator ID (generated or user-defined) maps to. A later vertex
        listing the same ID wins, as in Flink's HashMap."""
        generated, users, at = self.generated, self.users, self.member_vertex
        if not any(users):
            return self.vertex_of
        if set(filter(None, users)).isdisjoint(generated):  # no ID is both: two dicts in C
            owner = dict(self.vertex_of)
            owner.update(zip(compress(users, users), compress(at, users), strict=True))
            return owner
        owner = {}
        for o, index in zip(self.members, at, strict=True):
            owner[o.generated] = index
            if o.user_defined:
                owner[o.user_defined] = index
        return owner

    def _map(
        self, owner: dict[str, int]
    ) -> tuple[list[tuple[int, OldState, int]], list[bool], list[int]]:
        """Step 1, ``Checkpoints.loadAndValidateCheckpoint`` in file order: the states that
        fail it, as (file position, state, vertex or -1); whether each state maps; the vertex
        each maps to (-1: none). A state whose vertex has its max parallelism maps; only the
        others (found by columns, in C: the rare ones) take a closer look."""
        states = self.states
        at = list(map(owner.get, states.ids, repeat(-1)))
        maxima: list[int | None] = [v.max_parallelism for v in self.vertices]
        maxima.append(None)  # at -1: no vertex
        ok = list(map(eq, map(maxima.__getitem__, at), states.maxima))
        first: list[tuple[int, OldState, int]] = []
        for position in compress(range(len(states)), map(not_, ok)):
            state, index = states[position], at[position]
            if index >= 0:
                vertex = self.vertices[index]
                if not vertex.configured_max and (
                    0 < state.max_parallelism <= UPPER_BOUND_MAX_PARALLELISM
                ):
                    ok[position] = True  # Flink adopts the savepoint's max parallelism
                else:
                    first.append((position, state, index))
            elif state.holds_state:
                first.append((position, state, -1))
        return first, ok, at

    def _assigned_by_id(self, ok: list[bool], at: list[int], owner: dict[str, int]) -> bool:
        """Whether step 2 is settled without looking at each state: no new operator has a
        user-defined ID, no two share an ID, and no mapped state has a max parallelism below
        its vertex's parallelism. Then the operator with a mapped state's ID takes it, every
        one is taken (of states sharing an ID, the last: step 1 kept only that one), and
        nothing fails; receivers follow lazily."""
        generated, ids = self.generated, self.states.ids
        if not (
            self.users.count(None) == len(self.users)
            and len(owner) == len(generated)  # owner's keys: the generated IDs
        ):
            return False
        parallelism = [v.parallelism for v in self.vertices]
        if parallelism and ids and max(parallelism) <= min(self.states.maxima):
            below: Iterable[bool] = ()  # the usual case: each max parallelism suffices
        else:
            below = map(
                lt, compress(self.states.maxima, ok), map(parallelism.__getitem__, compress(at, ok))
            )
        if any(below):
            return False
        self._taken = list(compress(ids, ok))
        return True

    def _assign(
        self, mapped: dict[str, OldState]
    ) -> tuple[dict[str, OldState], set[str], list[tuple[OldState, ScheduledVertex]]]:
        """Step 2, ``StateAssignmentOperation``: which operator takes which mapped state (the
        user-defined ID where the savepoint has state under it, else the generated one). Sets
        the receivers; returns the states nobody took, the IDs taken through a user-defined
        ID and the states whose max parallelism is below their vertex's parallelism. Where no
        two operators share an ID, no operator can take another's state, and every choice is
        made by columns in C."""
        members, generated, users = self.members, self.generated, self.users
        named = list(compress(users, map(is_not, users, repeat(None))))
        distinct = set(generated)
        if not (
            len(distinct) == len(generated)
            and len(set(named)) == len(named)
            and distinct.isdisjoint(named)
        ):
            return self._assign_in_turn(mapped)
        via_user = list(map(mapped.__contains__, users))
        # (generated, user-defined)[via user]: the ID each operator asks for
        chosen: list[str] = list(map(_PICK, members, via_user))
        taken = list(map(mapped.get, chosen))
        took = list(map(is_not, taken, repeat(None)))
        chosen = list(compress(chosen, took))
        receivers = list(map(self.by_id.get, compress(generated, took)))
        known = list(map(is_not, receivers, repeat(None)))
        self._receivers = dict(zip(compress(chosen, known), filter(None, receivers), strict=True))
        states: list[OldState] = list(filter(None, taken))
        where = list(compress(self.member_vertex, took))
        parallelism = [v.parallelism for v in self.vertices]
        bound: list[tuple[OldState, ScheduledVertex]] = []
        if any(map(lt, map(STATE_MAX, states), map(parallelism.__getitem__, where))):
            by_vertex: dict[int, list[OldState]] = defaultdict(list)
            for state, index in zip(states, where, strict=True):
                by_vertex[index].append(state)
            for index, group in by_vertex.items():
                vertex = self.vertices[index]
                if any(s.has_subtasks for s in group):
                    bound += [(s, vertex) for s in group if s.max_parallelism < vertex.parallelism]
        remaining = {}
        if len(chosen) < len(mapped):
            gone = set(chosen)
            remaining = dict(compress(mapped.items(), map(not_, map(gone.__contains__, mapped))))
        return remaining, set(compress(users, via_user)), bound

    def _assign_in_turn(
        self, mapped: dict[str, OldState]
    ) -> tuple[dict[str, OldState], set[str], list[tuple[OldState, ScheduledVertex]]]:
        """:meth:`_assign` operator by operator, vertex by vertex, as Flink does it: where
        operators share an ID, the first to ask for a state takes it."""
        remaining = dict(mapped)
        receivers: dict[str, OperatorFingerprint] = {}  # state id -> operator that takes it
        via_user_id: set[str] = set()
        bound: list[tuple[OldState, ScheduledVertex]] = []
        for vertex in self.vertices:
            taken = []
            for o in vertex.vertex.operators:
                user = o.user_defined
                chosen = user if user is not None and user in remaining else o.generated
                taken_state = remaining.pop(chosen, None)
                if taken_state is None:
                    continue
                taken.append(taken_state)
                op = self.by_id.get(o.generated)
                if op is not None:
                    receivers[chosen] = op
                if chosen != o.generated:
                    via_user_id.add(chosen)
            if any(s.has_subtasks for s in taken):
                bound += [(s, vertex) for s in taken if s.max_parallelism < vertex.parallelism]
        self._receivers = receivers
        return remaining, via_user_id, bound

    # -- who should have got the state -------------------------------------------------------

    @cached_property
    def _claims(self) -> tuple[Callable[[OperatorFingerprint], object], set[object]]:
        """How to tell a new operator that takes state, and the keys of those that do: where
        step 2 was settled by ID and no two operators share one, their IDs (no receivers
        needed); else the receivers themselves, by identity."""
        if self._receivers is None:
            ids = list(map(OPERATOR_ID, self.new.operators))
            if len(set(ids)) == len(ids):
                return OPERATOR_ID, set(self._taken)
        return id, set(map(id, self.receivers.values()))

    def _unclaimed(
        self, operators: Sequence[OperatorFingerprint] | None = None
    ) -> list[OperatorFingerprint]:
        """The new operators (of ``operators``, else all) that take no state, in order."""
        if operators is None:
            operators = self.new.operators
        key, claimed = self._claims
        return list(compress(operators, map(not_, map(claimed.__contains__, map(key, operators)))))

    def _free_with(self, field: int, value: str) -> list[OperatorFingerprint]:
        """The unclaimed operators whose uid (``field`` 4) or name (1) is ``value``, in order.
        The first few values are looked up by a scan of every operator in C, and only the few
        found are asked whether they take state; past those, an index of every unclaimed
        operator's value is built once (a Python step per operator, worth it only for many
        lookups)."""
        if self._free is None:
            self._free = {}
        found = self._free.setdefault(field, {})
        if value in found:
            return found[value]
        if field in self._indexed:
            return []
        if len(found) < _SCANS:
            everyone = self.new.operators
            column = map(itemgetter(field), everyone)
            found[value] = self._unclaimed(list(compress(everyone, map(eq, column, repeat(value)))))
            return found[value]
        index: dict[str, list[OperatorFingerprint]] = {}
        ops = self._unclaimed()
        for op, key in zip(ops, map(itemgetter(field), ops), strict=True):
            if key is not None:
                index.setdefault(key, []).append(op)
        self._free[field] = index
        self._indexed.add(field)
        return index.get(value, [])

    def candidate(self, state: OldState, claimed: set[int]) -> OperatorFingerprint | None:
        """The new operator that is most likely the old one: the only one without state that
        has its uid, else the only one with its name. Never a guess among several, since
        ``setUidHash`` on the wrong operator restores foreign state into it."""
        for field, value in ((_UID_FIELD, state.uid), (_NAME_FIELD, state.name)):
            if value is None:
                continue
            found: list[OperatorFingerprint] = []
            for op in self._free_with(field, value):
                if id(op) not in claimed:
                    found.append(op)
                    if len(found) > 1:
                        return None
            if found:
                claimed.add(id(found[0]))
                return found[0]
        return None

    def misplaced_warnings(self, via_user_id: set[str]) -> list[RestoreProblem]:
        """A stateful operator's state restored into a differently named operator that took
        over its ID, while an operator with the old name (and uid) gets none: what inserting
        an operator upstream of an unpinned stateful one typically does."""
        states = {s.operator_id: s for s in self.states.all()}
        free: dict[str, list[OperatorFingerprint]] = {}
        for op in self._unclaimed():
            free.setdefault(op.name, []).append(op)
        out = []
        for sid, receiver in self.receivers.items():
            state = states[sid]
            if (
                sid in via_user_id  # setUidHash: the program says where it goes
                or not state.holds_state
                or state.name is None
                or state.name == receiver.name
            ):
                continue
            candidates = free.get(state.name, [])
            at = next((i for i, op in enumerate(candidates) if state.uid in (None, op.uid)), None)
            if at is not None:
                own = candidates.pop(at)
                out.append(
                    misplaced_warning(sid, state.name, state.uid, receiver, own, state.kinds)
                )
        return out


# -- pinning -----------------------------------------------------------------------------------


def pin_lines(previous: Savepoint | Fingerprint) -> list[str]:
    """One line per stateful operator of ``previous`` (a savepoint, or the fingerprint of the
    job it was taken from): its name, uid and the call that pins an operator to the ID its
    state is filed under, in Java and Python, e.g.
    ``"Window" (uid -)  Java: .setUidHash("a1b2...")  Python: .set_uid_hash("a1b2...")``.
    A fingerprint's operators count unless marked stateless; their state is filed under the
    generated ID (where the job restored through ``setUidHash``, that ID is the one to pin)."""
    rows: list[tuple[str | None, str | None, str]] = []
    if isinstance(previous, Savepoint):
        for op in previous.operators:
            if op.has_state or op.coordinator_state:
                rows.append((op.name, op.uid, op.operator_id))
    else:
        for fp in previous.operators:
            if fp.stateful is not False:
                rows.append((fp.name, fp.uid, fp.operator_id))
    out = []
    for name, uid, sid in rows:
        shown = quote(name) if name is not None else "-"
        shown_uid = quote(uid) if uid is not None else "-"
        out.append(
            f'{shown} (uid {shown_uid})  Java: .setUidHash("{sid}")  Python: .set_uid_hash("{sid}")'
        )
    return out
