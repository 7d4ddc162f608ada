"""What each finding of Flink's restore check says: the operator and state at fault, Flink's own
words where it refuses (quoted from ``Checkpoints`` and ``StateAssignmentOperation``), and the fix
in the DataStream API.

:mod:`pytest_opid.flink.restore` decides (which states fail, which operator takes which state,
which operator should have got it); the functions here only word a finding, from what the check
hands them, so that every sentence a Flink user reads about a restore is in one place.
"""

from __future__ import annotations

from collections.abc import Mapping

from pytest_opid.flink.restore_states import OldState, ScheduledVertex
from pytest_opid.result import OperatorFingerprint, RestoreProblem
from pytest_opid.text import quote

__all__ = [
    "bound_problem",
    "max_parallelism_problem",
    "misplaced_warning",
    "shadowed_warning",
    "skipped_warning",
    "unmapped_problem",
]

_IGNORE_UNCLAIMED = (
    "--allowNonRestoredState (execution.state-recovery.ignore-unclaimed-state: true)"
)


def _describe(state: OldState) -> str:
    if state.name is None and state.uid is None:
        return f"operator {state.operator_id}"
    name = quote(state.name) if state.name is not None else "an unnamed operator"
    uid = f" (uid {quote(state.uid)})" if state.uid is not None else ""
    return f"{name}{uid}"


def _holds(state: OldState, from_fingerprint: bool) -> str:
    """What the state holds, as far as its source says: a savepoint names the kinds, an old
    fingerprint at most whether the operator was marked stateful."""
    if state.kinds:
        return ", ".join(state.kinds)
    if from_fingerprint:
        return (
            "state, as far as the snapshot tells (not marked stateless)"
            if state.unknown
            else "state (marked stateful)"
        )
    return "state"


def unmapped_problem(
    state: OldState, candidate: OperatorFingerprint | None, from_fingerprint: bool
) -> RestoreProblem:
    """A state no new operator has the ID of (step 1 fails); ``candidate``: the new operator
    that is most likely the old one, if there is one."""
    sid = state.operator_id
    lines = [
        f"{_describe(state)} left {_holds(state, from_fingerprint)} under {sid}, and no "
        "operator of the new job has this ID (generated, or given to setUidHash). Flink refuses "
        f'the restore: "Cannot map checkpoint/savepoint state for operator {sid} to the '
        'new program, because the operator is not available in the new program."',
        "Fix:",
    ]
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
        f"  - if it was removed on purpose: restore with {_IGNORE_UNCLAIMED}; its state is dropped"
    )
    return RestoreProblem(
        "unmapped_state", "\n".join(lines), state_id=sid, operator_id=None, name=state.name
    )


def max_parallelism_problem(
    state: OldState, vertex: ScheduledVertex, by_id: Mapping[str, OperatorFingerprint]
) -> RestoreProblem:
    """A state whose max parallelism the new job vertex sets otherwise (step 1 fails);
    ``by_id``: the new operators by generated ID."""
    sid = state.operator_id
    head = by_id.get(vertex.vertex.id)
    receiver = by_id.get(sid) or next(
        (
            by_id[o.generated]
            for o in vertex.vertex.operators
            if o.user_defined == sid and o.generated in by_id
        ),
        None,
    )
    head_name = quote(head.name) if head is not None else quote(vertex.vertex.name)
    lines = [
        f"{_describe(state)} left state under {sid} with max parallelism "
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
    return _max_parallelism(state, lines, receiver)


def bound_problem(
    state: OldState, vertex: ScheduledVertex, receiver: OperatorFingerprint | None
) -> RestoreProblem:
    """A state whose max parallelism is below its new job vertex's parallelism (step 2
    fails); ``receiver``: the new operator that takes it."""
    lines = [
        f"{_describe(state)} left state under {state.operator_id} with max parallelism "
        f"{state.max_parallelism}, which cannot be spread over the {vertex.parallelism} "
        f"subtasks of its new job vertex {quote(vertex.vertex.name)}. Flink refuses the "
        f'restore: "The state for task {vertex.vertex.id} can not be restored. The maximum '
        f"parallelism ({state.max_parallelism}) of the restored state is lower than the "
        f'configured parallelism ({vertex.parallelism})."',
        "Fix:",
        f"  - .setParallelism(n) with n <= {state.max_parallelism} on the operators of "
        f"{quote(vertex.vertex.name)}",
    ]
    return _max_parallelism(state, lines, receiver)


def _max_parallelism(
    state: OldState, lines: list[str], receiver: OperatorFingerprint | None
) -> RestoreProblem:
    """Both max parallelism refusals, filed under the state and the operator that takes it."""
    return RestoreProblem(
        "max_parallelism",
        "\n".join(lines),
        state_id=state.operator_id,
        operator_id=receiver.operator_id if receiver is not None else None,
        name=state.name,
    )


def skipped_warning(
    state: OldState, candidate: OperatorFingerprint | None, from_fingerprint: bool
) -> RestoreProblem:
    """An unmapped state that ``--allowNonRestoredState`` lets Flink drop."""
    sid = state.operator_id
    fix = (
        f'.setUidHash("{sid}") on {quote(candidate.name)} (node {candidate.node})'
        if candidate is not None
        else f'.setUidHash("{sid}") on the operator that should keep it'
    )
    message = (
        f"{_describe(state)} left {_holds(state, from_fingerprint)} under {sid}, which no "
        'operator of the new job has. With --allowNonRestoredState Flink starts anyway ("Skipping '
        f'savepoint state for operator {sid}.") and this state is lost. '
        f"To keep it: {fix}."
    )
    return RestoreProblem("state_skipped", message, state_id=sid, name=state.name)


def shadowed_warning(
    state: OldState, op: OperatorFingerprint | None, from_fingerprint: bool
) -> RestoreProblem:
    """A mapped state nobody takes: ``op``, which has its ID, restores from its
    ``setUidHash`` ID instead."""
    sid = state.operator_id
    who = f"{quote(op.name)} (node {op.node})" if op is not None else "its operator"
    message = (
        f"{_describe(state)} left {_holds(state, from_fingerprint)} under {sid}. {who} has that "
        "ID but restores from its setUidHash ID instead, which the savepoint also holds, so "
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


def misplaced_warning(
    sid: str,
    name: str,
    uid: str | None,
    receiver: OperatorFingerprint,
    own: OperatorFingerprint,
    kinds: tuple[str, ...] = (),
) -> RestoreProblem:
    """State restored into ``receiver``, which took over its ID, while ``own``, the operator
    with the old name (and uid), starts empty."""
    old = OldState(sid, name, uid, -1, True, True, kinds)
    what = ", ".join(kinds) if kinds else "state"
    message = (
        f"{_describe(old)}'s {what} ({sid}) goes to {quote(receiver.name)} (node "
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
