"""``compare`` pairs by columns: the common head and tail in place, the middle through a dict,
where every state ID is unique; a queue per ID otherwise. Both must pair exactly as pairing
operator by operator does (the k-th old operator with a state ID takes the k-th new one with
it), and ``renamed`` and ``misplaced`` must not depend on which way ``compare`` went."""

from __future__ import annotations

import random
from collections import defaultdict, deque

from pytest_opid.comparison import _by_state_id, compare
from pytest_opid.result import Fingerprint, JobVertex, OperatorFingerprint

POOL = [f"{i:032x}" for i in range(1, 60)]
NAMES = ["Map", "Filter", "Source", "Sink"]


def reference(
    old: tuple[OperatorFingerprint, ...], new: tuple[OperatorFingerprint, ...]
) -> tuple[list[tuple[int, int]], list[int], list[int]]:
    """Pairing operator by operator, as positions: kept, orphaned, added."""
    waiting: dict[str, deque[int]] = defaultdict(deque)
    for j, op in enumerate(new):
        waiting[op.state_id].append(j)
    kept, orphaned = [], []
    for i, op in enumerate(old):
        queue = waiting.get(op.state_id)
        if queue:
            kept.append((i, queue.popleft()))
        else:
            orphaned.append(i)
    taken = {j for _, j in kept}
    return kept, orphaned, [j for j in range(len(new)) if j not in taken]


def operators(rng: random.Random, ids: list[str]) -> tuple[OperatorFingerprint, ...]:
    return tuple(
        OperatorFingerprint(
            node=k,
            name=rng.choice(NAMES),
            operator_id=sid,
            user_operator_id=rng.choice(POOL) if rng.random() < 0.05 else None,
            job_vertex=rng.choice(["v1", "v2", None]),
        )
        for k, sid in enumerate(ids)
    )


def edited(rng: random.Random, ids: list[str]) -> list[str]:
    """``ids`` after a few inserts, removals, replacements or a swap."""
    out = list(ids)
    for _ in range(rng.randint(0, 3)):
        what = rng.random()
        at = rng.randint(0, len(out))
        if what < 0.3:
            out.insert(at, rng.choice(POOL))
        elif what < 0.6 and at < len(out):
            del out[at]
        elif what < 0.8 and at < len(out):
            out[at] = rng.choice(POOL)
        elif len(out) > 1:
            i, j = rng.sample(range(len(out)), 2)
            out[i], out[j] = out[j], out[i]
    return out


def test_pairing_by_columns_is_pairing_in_turn() -> None:
    rng = random.Random(12)
    unique = 0
    for _ in range(3000):
        pool = POOL if rng.random() < 0.6 else POOL[:6]  # a small pool repeats IDs
        ids = rng.sample(pool, min(len(pool), rng.randint(0, 15)))
        if pool is not POOL:
            ids = [rng.choice(pool) for _ in ids]
        old, new = operators(rng, ids), operators(rng, edited(rng, ids))
        kept, orphaned, added = _by_state_id(old, new)
        expected_kept, expected_orphaned, expected_added = reference(old, new)
        assert [(old.index(o), new.index(n)) for o, n in kept] == expected_kept
        assert [old.index(o) for o in orphaned] == expected_orphaned
        assert [new.index(n) for n in added] == expected_added
        unique += len({op.state_id for op in old}) == len(old)
    assert unique > 1000


def test_renamed_and_misplaced_by_either_way() -> None:
    """An operator inserted in front of a stateful one: the ID moves to the newcomer."""
    src, window = POOL[0], POOL[1]
    old_ops = (
        OperatorFingerprint(1, "Source", src, job_vertex=src),
        OperatorFingerprint(2, "Window", window, job_vertex=window),
        OperatorFingerprint(3, "Sink", POOL[2], job_vertex=window),
    )
    new_ops = (
        OperatorFingerprint(1, "Source", src, job_vertex=src),
        OperatorFingerprint(2, "Filter", window, job_vertex=window),
        OperatorFingerprint(3, "Window", POOL[3], job_vertex=window),
        OperatorFingerprint(4, "Out", POOL[2], job_vertex=window),
    )
    vertices = (JobVertex(src, "Source", 1, ()), JobVertex(window, "Window", 1, ()))
    c = compare(Fingerprint(old_ops, vertices), Fingerprint(new_ops, vertices))
    assert c.misplaced == ((old_ops[1], new_ops[1], new_ops[2]),)
    assert c.renamed == ((old_ops[2], new_ops[3]),)
    assert c.renamed is c.renamed  # computed once
    same = compare(Fingerprint(old_ops, vertices), Fingerprint(old_ops, vertices))
    assert same.renamed == () and same.misplaced == ()
    renamed_only = Fingerprint(tuple(op._replace(name="x") for op in old_ops), vertices)
    assert compare(Fingerprint(old_ops, vertices), renamed_only).renamed == tuple(
        zip(old_ops, renamed_only.operators, strict=True)
    )
