"""Issue 32, Flink's side: where a savepoint would not restore (or would restore state into the
wrong operator), "How to fix" lists what makes the deploy safe, and accepting the snapshot is
named only as the step after one of them; a chain-only change may still be accepted."""

from __future__ import annotations

import pytest_opid
from pytest_opid.flink.builder import StreamEnvironment

ACCEPT_AFTER = [
    "Then, once the job is deployed one of these ways, record it as the new snapshot:",
    "  pytest --snapshot-update",
]


def job(*, filtered: bool = False, parallelism: int = 4, pinned: bool = False):
    env = StreamEnvironment(4)
    parsed = env.source("Kafka clicks").uid("clicks").map("Parse click")
    if filtered:
        parsed = parsed.filter("Drop bots")
    counted = parsed.key_by().process("Count per user").set_parallelism(parallelism)
    if pinned:
        counted = counted.uid("count-per-user")
    return counted.sink("Kafka counts").uid("counts")


def _fixes(text: str) -> list[str]:
    return text[text.index("How to fix:") :].splitlines()[1:]


def test_lost_state_fixes_make_the_deploy_safe_first():
    comparison = pytest_opid.compare(
        pytest_opid.fingerprint(job()), pytest_opid.fingerprint(job(filtered=True))
    )
    assert not comparison.restore.restorable
    lines = _fixes(pytest_opid.explain(comparison, "ids"))
    assert lines[-2:] == ACCEPT_AFTER
    assert not any("accept it" in line for line in lines), lines
    assert sum("--snapshot-update" in line for line in lines) == 1
    body = "\n".join(lines[:-2])
    assert ".setUidHash(" in body and "--allowNonRestoredState" in body


def test_a_chain_change_alone_may_still_be_accepted():
    comparison = pytest_opid.compare(
        pytest_opid.fingerprint(job(pinned=True)),
        pytest_opid.fingerprint(job(pinned=True, parallelism=2)),
    )
    assert comparison.restore.restorable
    lines = _fixes(pytest_opid.explain(comparison, "chains"))
    assert lines[-1] == "  - or, if the change is intended, accept it: pytest --snapshot-update"
    assert "Then, once" not in "\n".join(lines)
