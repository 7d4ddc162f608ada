"""The Flink restore check's column paths against Flink's operator-by-operator order.

``check_fingerprint`` and ``check_savepoint`` settle step 2 (which operator takes which state)
by columns where nothing is shared (no user-defined IDs, no repeated IDs, every max parallelism
enough) and build receivers, unclaimed operators and name indexes only when a message asks.
Random small jobs, where every sharing and every mismatch occurs, must get the same verdict,
problems and warnings as with those shortcuts turned off.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from pytest_opid.comparison import compare
from pytest_opid.flink import restore
from pytest_opid.flink.restore import check_fingerprint, check_savepoint
from pytest_opid.flink.restore_states import fingerprint_states
from pytest_opid.flink.savepoint import OperatorState, Savepoint
from pytest_opid.result import ChainedOperator, Fingerprint, JobVertex, OperatorFingerprint

POOL = [f"{i:032x}" for i in range(1, 30)]
NAMES = ["Map", "Filter", "Source", "Sink", "Window"]
CASES = 400


def job(rng: random.Random, shared: bool) -> Fingerprint:
    """A job of up to 12 operators in chains of 1 to 3; ``shared``: IDs drawn from a small pool
    (so that some repeat) and some user-defined IDs."""
    ids = rng.sample(POOL, 12) if not shared else [rng.choice(POOL[:10]) for _ in range(12)]
    operators = []
    for k in range(rng.randint(0, 12)):
        user = rng.choice(POOL) if shared and rng.random() < 0.2 else None
        operators.append(
            OperatorFingerprint(
                node=k + 1,
                name=rng.choice(NAMES),
                operator_id=ids[k],
                user_operator_id=user,
                uid=rng.choice([None, None, "u1", "u2"]),
                parallelism=rng.choice([-1, 1, 2, 200, 300]),
                max_parallelism=rng.choice([-1, -1, 128, 256, 100]),
                stateful=rng.choice([None, True, False]),
            )
        )
    vertices = []
    start = 0
    while start < len(operators) and rng.random() < 0.9:  # the rest runs unlisted
        members = operators[start : start + rng.randint(1, 3)]
        start += len(members)
        vertices.append(
            JobVertex(
                members[0].operator_id,
                "vertex",
                rng.choice([-1, 1, 2, 200, 300]),
                tuple(ChainedOperator(m.operator_id, m.user_operator_id) for m in members),
                tuple(m.node for m in members),
                rng.choice([-1, -1, 128, 256, 100]),
            )
        )
    vertex_of = {o.generated: v.id for v in vertices for o in v.operators}
    operators = [op._replace(job_vertex=vertex_of.get(op.operator_id)) for op in operators]
    return Fingerprint(tuple(operators), tuple(vertices), engine="flink")


def savepoint(rng: random.Random) -> Savepoint:
    states = []
    for _ in range(rng.randint(0, 8)):
        kinds = rng.sample(["managed_keyed", "raw_operator"], rng.randint(0, 2))
        states.append(
            OperatorState(
                operator_id=rng.choice(POOL[:14]),
                name=rng.choice([*NAMES, None]),
                uid=rng.choice([None, "u1"]),
                parallelism=2,
                max_parallelism=rng.choice([128, 256, 100, 1, 40000]),
                coordinator_state=rng.random() < 0.2,
                has_state=rng.random() < 0.7,
                state_size=1,
                fully_finished=rng.random() < 0.1,
                subtask_states=rng.choice([0, 1, 2]),
                state_kinds=tuple(sorted(kinds)),
            )
        )
    return Savepoint(1, 1, tuple(states))


def cases() -> list[tuple[Fingerprint, Fingerprint, Savepoint]]:
    rng = random.Random(20261122)
    out = []
    for _ in range(CASES):
        shared = rng.random() < 0.5
        old = job(rng, shared)
        new = old if rng.random() < 0.2 else job(rng, shared)
        if rng.random() < 0.4 and old.operators:  # the old job with a few operators changed
            ops = [
                op._replace(operator_id=rng.choice(POOL)) if rng.random() < 0.2 else op
                for op in old.operators
            ]
            new = Fingerprint(tuple(ops), old.job_vertices, engine="flink")
        out.append((old, new, savepoint(rng)))
    return out


def verdicts(old: Fingerprint, new: Fingerprint, sp: Savepoint) -> list[dict[str, Any]]:
    comparison = compare(old, new)
    return [
        check(allow_non_restored_state=allow).to_dict()
        for allow in (False, True)
        for check in (
            lambda **kw: check_fingerprint(old, new, comparison=comparison, **kw),
            lambda **kw: check_savepoint(sp, new, **kw),
        )
    ]


def in_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    """Turn every shortcut off: step 2 operator by operator, names indexed at once."""
    monkeypatch.setattr(restore._Check, "_assigned_by_id", lambda self, ok, at, owner: False)
    monkeypatch.setattr(restore._Check, "_assign", restore._Check._assign_in_turn)
    monkeypatch.setattr(restore, "_SCANS", 0)


def test_the_shortcuts_give_flinks_order(monkeypatch: pytest.MonkeyPatch) -> None:
    pairs = cases()
    fast = [verdicts(*case) for case in pairs]
    in_turn(monkeypatch)
    slow = [verdicts(*case) for case in pairs]
    assert fast == slow
    failing = [v for case in fast for v in case if not v["restorable"]]
    warned = [v for case in fast for v in case if v["warnings"]]
    assert len(failing) > CASES // 4 and len(warned) > CASES // 10  # the cases are varied


def test_lazy_receivers_are_the_ones_step_2_hands_out() -> None:
    settled = 0
    for old, new, _ in cases():
        check = restore._Check(fingerprint_states(old), new, False)
        owner = check._owners()
        _, ok, at = check._map(owner)
        if not check._assigned_by_id(ok, at, owner):
            continue
        settled += 1
        mapped = {check.states.ids[p]: check.states[p] for p, keep in enumerate(ok) if keep}
        lazy = check.receivers
        unclaimed = check._unclaimed()
        eager = restore._Check(fingerprint_states(old), new, False)
        remaining, via_user_id, bound = eager._assign_in_turn(mapped)
        assert (remaining, via_user_id, bound) == ({}, set(), [])
        assert list(lazy.items()) == list(eager.receivers.items())
        taken = {id(op) for op in eager.receivers.values()}
        assert unclaimed == [op for op in new.operators if id(op) not in taken]
    assert settled > CASES // 4  # the shortcut is taken often enough to be tested
