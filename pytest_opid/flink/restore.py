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
its ``operator_id``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import NamedTuple

from pytest_opid.comparison import Comparison, compare
from pytest_opid.flink.savepoint import Savepoint
from pytest_opid.result import (
    ChainedOperator,
    Fingerprint,
    JobVertex,
    OperatorFingerprint,
    RestoreCheck,
    RestoreProblem,
)
from pytest_opid.text import quote

__all__ = [
    "check_fingerprint",
    "check_savepoint",
    "default_max_parallelism",
    "pin_lines",
]

ENGINE = "flink"

#: ``KeyGroupRangeAssignment.DEFAULT_LOWER_BOUND_MAX_PARALLELISM`` and ``UPPER_BOUND_...``
LOWER_BOUND_MAX_PARALLELISM = 1 << 7
UPPER_BOUND_MAX_PARALLELISM = 1 << 15

_IGNORE_UNCLAIMED = (
    "--allowNonRestoredState (execution.state-recovery.ignore-unclaimed-state: true)"
)


@lru_cache(maxsize=1024)
def default_max_parallelism(parallelism: int) -> int:
    """The max parallelism Flink gives a job vertex whose program set none:
    ``KeyGroupRangeAssignment.computeDefaultMaxParallelism`` of the parallelism as the scheduler
    normalizes it (-1, "default", counts as 1): 1.5 times the parallelism rounded up to a power
    of two, at least 128 and at most 32768."""
    if parallelism == -1:
        parallelism = 1  # SchedulerBase.normalizeParallelism
    if not 0 < parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise ValueError(
            f"parallelism must be between 1 and {UPPER_BOUND_MAX_PARALLELISM} (or -1), "
            f"got {parallelism}"
        )
    wanted = parallelism + parallelism // 2
    power = 1 << (wanted - 1).bit_length()  # MathUtils.roundUpToPowerOfTwo
    return min(max(power, LOWER_BOUND_MAX_PARALLELISM), UPPER_BOUND_MAX_PARALLELISM)


# -- what the check reads ----------------------------------------------------------------------


class _OldState(NamedTuple):
    """One operator state the previous job left (or would leave) behind."""

    operator_id: str
    name: str | None
    uid: str | None
    max_parallelism: int
    #: Flink fails on it when unmapped: coordinator state or any subtask with state
    holds_state: bool
    #: the subtask entries Flink counts (``getNumberCollectedStates() > 0``)
    has_subtasks: bool
    #: what it holds, for messages ("keyed state", ...); empty where unknown
    kinds: tuple[str, ...]
    #: the old job's fingerprint does not say whether it keeps state
    unknown: bool = False


class _Vertex(NamedTuple):
    """A job vertex of the new job as the scheduler sees it."""

    vertex: JobVertex
    parallelism: int  # normalized: -1 counts as 1
    max_parallelism: int  # the configured one, else Flink's default for the parallelism
    configured_max: bool
    head: OperatorFingerprint | None


_KIND_WORDS = {
    "managed_keyed": "keyed state",
    "raw_keyed": "raw keyed state",
    "managed_operator": "operator state",
    "raw_operator": "raw operator state",
    "input_channel": "in-flight data",
    "result_subpartition": "in-flight data",
    "upstream_output_buffer": "in-flight data",
}


def _savepoint_states(savepoint: Savepoint) -> list[_OldState]:
    out = []
    for op in savepoint.operators:
        kinds = [_KIND_WORDS.get(k, k) for k in op.state_kinds]
        if op.coordinator_state:
            kinds.append("source coordinator state")
        out.append(
            _OldState(
                operator_id=op.operator_id,
                name=op.name,
                uid=op.uid,
                max_parallelism=op.max_parallelism,
                holds_state=op.coordinator_state or op.has_state,
                has_subtasks=op.subtask_states > 0 and not op.fully_finished,
                kinds=tuple(dict.fromkeys(kinds)),
            )
        )
    return out


def _fingerprint_states(old: Fingerprint) -> list[_OldState]:
    """What a savepoint of ``old`` would hold: every operator not known to be stateless, under
    its generated ID, with its job vertex's max parallelism (as configured, else Flink's
    default for the vertex's parallelism)."""
    vertex_max = {
        v.id: _max_parallelism(v.max_parallelism, v.parallelism) for v in old.job_vertices
    }
    new = tuple.__new__  # builds the NamedTuple in C: one per operator of a large job
    out = []
    for op in old.operators:
        stateful = op.stateful
        if stateful is False:
            continue
        max_parallelism = vertex_max.get(op.job_vertex or "")
        if max_parallelism is None:
            max_parallelism = _max_parallelism(op.max_parallelism, op.parallelism)
        row = (op.operator_id, op.name, op.uid, max_parallelism, True, True, (), stateful is None)
        out.append(new(_OldState, row))
    return out


def _max_parallelism(configured: int, parallelism: int) -> int:
    if configured == -1:
        return default_max_parallelism(_normalized(parallelism))
    return configured


def _normalized(parallelism: int) -> int:
    return 1 if parallelism <= 0 else min(parallelism, UPPER_BOUND_MAX_PARALLELISM)


def _new_vertices(new: Fingerprint) -> tuple[list[_Vertex], dict[str, OperatorFingerprint]]:
    """The new job's vertices; operators that no vertex lists (a saved fingerprint without
    chains) run as vertices of their own."""
    by_id: dict[str, OperatorFingerprint] = {}
    for op in new.operators:
        by_id.setdefault(op.operator_id, op)
    vertices = list(new.job_vertices)
    listed = {o.generated for v in vertices for o in v.operators}
    for op in new.operators:
        if op.operator_id not in listed:
            vertices.append(
                JobVertex(
                    op.operator_id,
                    op.name,
                    op.parallelism,
                    (ChainedOperator(op.operator_id, op.user_operator_id),),
                    (op.node,),
                    op.max_parallelism,
                )
            )
    new_vertex = tuple.__new__
    out = []
    for v in vertices:
        parallelism = _normalized(v.parallelism)
        configured = v.max_parallelism != -1
        maximum = v.max_parallelism if configured else default_max_parallelism(parallelism)
        row = (v, parallelism, maximum, configured, by_id.get(v.id))
        out.append(new_vertex(_Vertex, row))
    return out, by_id


# -- the check ---------------------------------------------------------------------------------


def check_savepoint(
    savepoint: Savepoint, new: Fingerprint, *, allow_non_restored_state: bool = False
) -> RestoreCheck:
    """Flink's verdict on starting ``new`` from ``savepoint`` (a savepoint or retained
    checkpoint, as :func:`~pytest_opid.flink.savepoint.read_savepoint` reads it)."""
    return _Check(_savepoint_states(savepoint), new, allow_non_restored_state).run()


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
    check = _Check(_fingerprint_states(old), new, allow_non_restored_state, from_fingerprint=True)
    result = check.run()
    warnings = list(result.warnings)
    for o, receiver, own in (comparison or compare(old, new)).misplaced:
        if o.stateful is not False:
            warnings.append(check.misplaced_warning(o.operator_id, o.name, o.uid, receiver, own))
    return RestoreCheck(ENGINE, result.restorable, result.problems, tuple(warnings))


class _Check:
    def __init__(
        self,
        states: Sequence[_OldState],
        new: Fingerprint,
        allow: bool,
        *,
        from_fingerprint: bool = False,
    ) -> None:
        self.states = states
        self.new = new
        self.allow = allow
        self.from_fingerprint = from_fingerprint
        self.vertices, self.by_id = _new_vertices(new)
        self.receivers: dict[str, OperatorFingerprint] = {}
        self._free: dict[str, dict[str, list[OperatorFingerprint]]] | None = None

    def run(self) -> RestoreCheck:
        # Step 1: Checkpoints.loadAndValidateCheckpoint, in file order. A later vertex listing
        # the same ID wins, as in Flink's HashMap.
        owner: dict[str, int] = {}
        for index, v in enumerate(self.vertices):
            for o in v.vertex.operators:
                owner[o.generated] = index
                if o.user_defined:
                    owner[o.user_defined] = index
        first: list[tuple[int, _OldState, int]] = []  # (file position, state, vertex or -1)
        mapped: dict[str, _OldState] = {}
        mapped_vertex: dict[str, int] = {}
        for position, state in enumerate(self.states):
            index = owner.get(state.operator_id, -1)
            if index >= 0:
                vertex = self.vertices[index]
                if vertex.max_parallelism == state.max_parallelism or (
                    not vertex.configured_max
                    and 0 < state.max_parallelism <= UPPER_BOUND_MAX_PARALLELISM
                ):
                    mapped[state.operator_id] = state
                    mapped_vertex[state.operator_id] = index
                else:
                    first.append((position, state, index))
            elif state.holds_state:
                first.append((position, state, -1))
        # Step 2: StateAssignmentOperation: which operator takes which state.
        remaining = dict(mapped)
        receivers: dict[str, OperatorFingerprint] = {}  # state id -> operator that takes it
        via_user_id: set[str] = set()
        bound: list[tuple[_OldState, _Vertex]] = []
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
        self.receivers = receivers
        problems: list[RestoreProblem] = []
        warnings: list[RestoreProblem] = []
        claimed: set[int] = set()
        for _, state, index in first:
            if index >= 0:
                problems.append(self.max_parallelism_problem(state, self.vertices[index]))
            elif self.allow:
                warnings.append(self.skipped_warning(state, claimed))
            else:
                problems.append(self.unmapped_problem(state, claimed))
        problems += [self.bound_problem(s, v) for s, v in bound]
        for state in remaining.values():  # mapped, but an operator took its user-defined ID
            if state.holds_state:
                warnings.append(self.shadowed_warning(state, mapped_vertex[state.operator_id]))
        if not self.from_fingerprint:
            warnings += self.misplaced_warnings(via_user_id)
        return RestoreCheck(ENGINE, not problems, tuple(problems), tuple(warnings))

    # -- who should have got the state -------------------------------------------------------

    def _unclaimed(self) -> Iterable[OperatorFingerprint]:
        taken = {id(op) for op in self.receivers.values()}
        return (op for op in self.new.operators if id(op) not in taken)

    def candidate(self, state: _OldState, claimed: set[int]) -> OperatorFingerprint | None:
        """The new operator that is most likely the old one: the only one without state that
        has its uid, else the only one with its name. Never a guess among several, since
        ``setUidHash`` on the wrong operator restores foreign state into it."""
        if self._free is None:
            self._free = {"uid": {}, "name": {}}
            for op in self._unclaimed():
                if op.uid is not None:
                    self._free["uid"].setdefault(op.uid, []).append(op)
                self._free["name"].setdefault(op.name, []).append(op)
        for key, value in (("uid", state.uid), ("name", state.name)):
            if value is None:
                continue
            found: list[OperatorFingerprint] = []
            for op in self._free[key].get(value, ()):
                if id(op) not in claimed:
                    found.append(op)
                    if len(found) > 1:
                        return None
            if found:
                claimed.add(id(found[0]))
                return found[0]
        return None

    # -- messages ----------------------------------------------------------------------------

    def describe(self, state: _OldState) -> str:
        if state.name is None and state.uid is None:
            return f"operator {state.operator_id}"
        name = quote(state.name) if state.name is not None else "an unnamed operator"
        uid = f" (uid {quote(state.uid)})" if state.uid is not None else ""
        return f"{name}{uid}"

    def holds(self, state: _OldState) -> str:
        if state.kinds:
            return ", ".join(state.kinds)
        if self.from_fingerprint:
            return (
                "state, as far as the snapshot tells (not marked stateless)"
                if state.unknown
                else "state (marked stateful)"
            )
        return "state"

    def unmapped_problem(self, state: _OldState, claimed: set[int]) -> RestoreProblem:
        sid = state.operator_id
        lines = [
            f"{self.describe(state)} left {self.holds(state)} under {sid}, and no operator "
            "of the new job has this ID (generated, or given to setUidHash). Flink refuses "
            f'the restore: "Cannot map checkpoint/savepoint state for operator {sid} to the '
            'new program, because the operator is not available in the new program."',
            "Fix:",
        ]
        candidate = self.candidate(state, claimed)
        if candidate is not None:
            lines.append(
                f"  - give it back to {quote(candidate.name)} (node {candidate.node}): "
                f'.setUidHash("{sid}")'
                + ("" if candidate.uid else ', and pin it for later changes with .uid("...")')
            )
        else:
            lines.append(
                f'  - if the operator is still in the job: .setUidHash("{sid}") on it (and '
                '.uid("...") to pin it for later changes)'
            )
        lines.append(
            f"  - if it was removed on purpose: restore with {_IGNORE_UNCLAIMED}; its state "
            "is dropped"
        )
        return RestoreProblem(
            "unmapped_state", "\n".join(lines), state_id=sid, operator_id=None, name=state.name
        )

    def max_parallelism_problem(self, state: _OldState, vertex: _Vertex) -> RestoreProblem:
        sid = state.operator_id
        head = vertex.head
        receiver = self.by_id.get(sid) or next(
            (
                self.by_id[o.generated]
                for o in vertex.vertex.operators
                if o.user_defined == sid and o.generated in self.by_id
            ),
            None,
        )
        head_name = quote(head.name) if head is not None else quote(vertex.vertex.name)
        lines = [
            f"{self.describe(state)} left state under {sid} with max parallelism "
            f"{state.max_parallelism}, but its new job vertex "
            f"{quote(vertex.vertex.name)} sets max parallelism {vertex.max_parallelism}; Flink "
            "adopts the savepoint's only where the program sets none. Flink refuses the "
            'restore: "Max parallelism mismatch between checkpoint/savepoint state and new '
            f"program. Cannot map operator {sid} with max parallelism {state.max_parallelism} "
            f'to new program with max parallelism {vertex.max_parallelism}."',
            "Fix:",
            f"  - .setMaxParallelism({state.max_parallelism}) on {head_name} (the job vertex "
            "takes its first operator's), or remove the setMaxParallelism call so that Flink "
            "adopts the savepoint's",
        ]
        return RestoreProblem(
            "max_parallelism",
            "\n".join(lines),
            state_id=sid,
            operator_id=receiver.operator_id if receiver is not None else None,
            name=state.name,
        )

    def bound_problem(self, state: _OldState, vertex: _Vertex) -> RestoreProblem:
        sid = state.operator_id
        receiver = self.receivers.get(sid)
        lines = [
            f"{self.describe(state)} left state under {sid} with max parallelism "
            f"{state.max_parallelism}, which cannot be spread over the {vertex.parallelism} "
            f"subtasks of its new job vertex {quote(vertex.vertex.name)}. Flink refuses the "
            f'restore: "The state for task {vertex.vertex.id} can not be restored. The maximum '
            f"parallelism ({state.max_parallelism}) of the restored state is lower than the "
            f'configured parallelism ({vertex.parallelism})."',
            "Fix:",
            f"  - .setParallelism(n) with n <= {state.max_parallelism} on the operators of "
            f"{quote(vertex.vertex.name)}",
        ]
        return RestoreProblem(
            "max_parallelism",
            "\n".join(lines),
            state_id=sid,
            operator_id=receiver.operator_id if receiver is not None else None,
            name=state.name,
        )

    def skipped_warning(self, state: _OldState, claimed: set[int]) -> RestoreProblem:
        sid = state.operator_id
        candidate = self.candidate(state, claimed)
        fix = (
            f'.setUidHash("{sid}") on {quote(candidate.name)} (node {candidate.node})'
            if candidate is not None
            else f'.setUidHash("{sid}") on the operator that should keep it'
        )
        message = (
            f"{self.describe(state)} left {self.holds(state)} under {sid}, which no operator "
            'of the new job has. With --allowNonRestoredState Flink starts anyway ("Skipping '
            f'savepoint state for operator {sid}.") and this state is lost. '
            f"To keep it: {fix}."
        )
        return RestoreProblem("state_skipped", message, state_id=sid, name=state.name)

    def shadowed_warning(self, state: _OldState, index: int) -> RestoreProblem:
        sid = state.operator_id
        op = self.by_id.get(sid)
        who = f"{quote(op.name)} (node {op.node})" if op is not None else "its operator"
        message = (
            f"{self.describe(state)} left {self.holds(state)} under {sid}. {who} has that ID "
            "but restores from its setUidHash ID instead, which the savepoint also holds, so "
            "Flink silently ignores the state under its generated ID. Remove the setUidHash "
            "call if this state is the one to keep."
        )
        return RestoreProblem(
            "state_skipped",
            message,
            state_id=sid,
            operator_id=op.operator_id if op is not None else None,
            name=state.name,
        )

    def misplaced_warnings(self, via_user_id: set[str]) -> list[RestoreProblem]:
        """A stateful operator's state restored into a differently named operator that took
        over its ID, while an operator with the old name (and uid) gets none: what inserting
        an operator upstream of an unpinned stateful one typically does."""
        states = {s.operator_id: s for s in self.states}
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
                    self.misplaced_warning(sid, state.name, state.uid, receiver, own, state.kinds)
                )
        return out

    def misplaced_warning(
        self,
        sid: str,
        name: str,
        uid: str | None,
        receiver: OperatorFingerprint,
        own: OperatorFingerprint,
        kinds: tuple[str, ...] = (),
    ) -> RestoreProblem:
        old = _OldState(sid, name, uid, -1, True, True, kinds)
        what = ", ".join(kinds) if kinds else "state"
        message = (
            f"{self.describe(old)}'s {what} ({sid}) goes to {quote(receiver.name)} (node "
            f"{receiver.node}), which took over that ID, while {quote(own.name)} (node "
            f"{own.node}) starts empty under {own.operator_id}. Flink restores by ID, not by "
            "name: the restore succeeds with the state in the wrong operator (it may fail "
            "later, or compute with foreign state).\n"
            "Fix:\n"
            f'  - .setUidHash("{sid}") on {quote(own.name)} (node {own.node}), and .uid("...") '
            f"on {quote(receiver.name)} (node {receiver.node}) so that it stops taking the ID"
        )
        return RestoreProblem(
            "state_into_other_operator",
            message,
            state_id=sid,
            operator_id=receiver.operator_id,
            name=name,
        )


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
