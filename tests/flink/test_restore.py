"""Restore verdicts against Flink 2.3.0's own, and the rules one by one.

``tests/data/flink-restore`` (vendored unchanged) holds 80 pairs of DataStream programs: a
program A, a savepoint or retained checkpoint of it, and a program B (A after one refactoring)
that a real Flink 2.3.0 was asked to start from it. Each case records whether Flink restored and,
where it refused, the kind of failure and the OperatorID its message named.
"""

from __future__ import annotations

import copy
import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest

import pytest_opid
from pytest_opid import fingerprint
from pytest_opid.engines import engine_rules
from pytest_opid.errors import DocumentError
from pytest_opid.flink.builder import StreamEnvironment
from pytest_opid.flink.restore import check_fingerprint, check_savepoint, pin_lines
from pytest_opid.flink.restore_states import default_max_parallelism
from pytest_opid.flink.savepoint import OperatorState, Savepoint
from pytest_opid.restore import check_restore
from pytest_opid.result import Fingerprint, OperatorFingerprint, RestoreCheck

DATA = Path(__file__).resolve().parent.parent / "data" / "flink-restore"
with gzip.open(DATA / "cases.jsonl.gz", "rt", encoding="utf-8") as _f:
    CASES = [json.loads(line) for line in _f]
SEEDS = [case["case"]["seed"] for case in CASES]
BY_SEED = {case["case"]["seed"]: case for case in CASES}


@pytest.fixture(scope="session")
def savepoints(extracted: Path) -> dict[int, Path]:
    """The directory holding each case's ``_metadata`` (extracted once, see conftest.py)."""
    return {
        case["case"]["seed"]: extracted / str(case["case"]["seed"]) / case["savepoint_root"]
        for case in CASES
    }


def agrees(check: RestoreCheck, flink: dict[str, Any]) -> bool:
    """Our verdict is Flink's: restored or not, and where not, the operator Flink named is
    among our problems of Flink's kind."""
    if check.restorable != flink["restored"]:
        return False
    if flink["restored"]:
        return not check.problems
    return any(
        p.kind == flink["kind"] and p.state_id == flink["operator_id"] for p in check.problems
    )


# -- the 80 cases: from the savepoint ----------------------------------------------------------


def test_the_data() -> None:
    assert len(CASES) == 80
    assert sum(c["flink"]["restored"] for c in CASES) == 42
    kinds = sorted({c["flink"]["kind"] for c in CASES if not c["flink"]["restored"]})
    assert kinds == ["max_parallelism", "unmapped_state"]


@pytest.mark.parametrize("seed", SEEDS)
def test_verdict_from_the_savepoint_is_flinks(savepoints: dict[int, Path], seed: int) -> None:
    case = BY_SEED[seed]
    check = check_restore(savepoints[seed], case["after"])
    assert agrees(check, case["flink"]), (case["case"], check.to_dict())
    if not case["flink"]["restored"]:
        # Flink stops at the first failure; we report it first too.
        first = check.problems[0]
        assert (first.kind, first.state_id) == (case["flink"]["kind"], case["flink"]["operator_id"])
        assert case["flink"]["operator_id"] in case["flink"]["message"]


def test_all_80_verdicts_from_savepoints_agree(savepoints: dict[int, Path]) -> None:
    agreed = sum(
        agrees(check_restore(savepoints[s], BY_SEED[s]["after"]), BY_SEED[s]["flink"])
        for s in SEEDS
    )
    assert agreed == 80


def test_the_metadata_file_itself_works_too(savepoints: dict[int, Path]) -> None:
    for seed in SEEDS[:10]:
        case = BY_SEED[seed]
        check = check_restore(savepoints[seed] / "_metadata", case["after"])
        assert agrees(check, case["flink"])


def _vertices(fp: Fingerprint) -> list[dict[str, Any]]:
    return [
        {
            "id": v.id,
            "name": v.name,
            "parallelism": v.parallelism,
            "max_parallelism": v.max_parallelism,
            "operators": [
                {"generated": o.generated, "user_defined": o.user_defined} for o in v.operators
            ],
        }
        for v in fp.job_vertices
    ]


@pytest.mark.parametrize("seed", SEEDS)
def test_our_fingerprints_are_flinks(seed: int) -> None:
    case = BY_SEED[seed]
    for side in ("before", "after"):
        fp = fingerprint(case[side])
        assert {str(op.node): op.operator_id for op in fp.operators} == case[f"{side}_ids"]
        user_ids = {str(op.node): op.user_operator_id for op in fp.operators if op.user_operator_id}
        assert user_ids == case[f"{side}_user_ids"]
        assert _vertices(fp) == case[f"{side}_job_vertices"]


# -- the 80 cases: from the fingerprint of program A -------------------------------------------


def _holds_nothing(case: dict[str, Any], state_id: str) -> bool:
    meta = next(m for m in case["metadata"] if m["operator_id"] == state_id)
    return not meta["has_state"] and not meta["coordinator_state"]


def test_verdicts_from_the_fingerprint_of_program_a() -> None:
    """The documents do not say which operators keep state (no ``state`` key), so every old
    operator counts as stateful. Flink fails only on state that holds something: where it
    restored although an operator of A lost its ID, the savepoint stored nothing for that
    operator (a stateless map or sink, or a stateful one no record had reached yet). Those 8
    cases are the only disagreements, and each is exactly of that kind."""
    disagreements = []
    for case in CASES:
        check = check_restore(fingerprint(case["before"]), case["after"])
        if agrees(check, case["flink"]):
            continue
        disagreements.append(case["case"]["seed"])
        assert case["flink"]["restored"], case["case"]
        assert {p.kind for p in check.problems} == {"unmapped_state"}
        assert all(_holds_nothing(case, p.state_id or "") for p in check.problems)
    assert sorted(disagreements) == [1002, 1012, 1013, 1025, 1052, 1056, 1073, 1078]
    assert len(CASES) - len(disagreements) == 72


def _with_state(case: dict[str, Any]) -> dict[str, Any]:
    """Program A's document with each node's ``state`` as the savepoint says it was."""
    doc = copy.deepcopy(case["before"])
    meta = {m["operator_id"]: m for m in case["metadata"]}
    for node in doc["nodes"]:
        m = meta.get(case["before_ids"][str(node["id"])])
        node["state"] = bool(m and (m["has_state"] or m["coordinator_state"]))
    return doc


def test_verdicts_from_a_fingerprint_that_knows_the_state_agree_all() -> None:
    agreed = 0
    for case in CASES:
        check = check_restore(fingerprint(_with_state(case)), case["after"])
        assert agrees(check, case["flink"]), case["case"]
        agreed += 1
    assert agreed == 80


def test_fingerprint_checks_go_through_the_engine_rules() -> None:
    case = BY_SEED[1001]
    old, new = fingerprint(case["before"]), fingerprint(case["after"])
    via_rules = engine_rules("flink").check_restore(old, new, False)
    assert via_rules == check_fingerprint(old, new, allow_non_restored_state=False)
    assert via_rules == check_restore(old, case["after"])


def test_a_saved_fingerprint_of_a_works(tmp_path: Path) -> None:
    case = BY_SEED[1001]
    saved = tmp_path / "a.json"
    saved.write_text(fingerprint(case["before"]).to_json(), encoding="utf-8")
    check = check_restore(saved, case["after"])
    assert agrees(check, case["flink"])


def test_misplaced_state_that_flink_silently_accepts(savepoints: dict[int, Path]) -> None:
    """Case 1073: a sink was added; Flink restored and ran, but the operator state of 'op119'
    went into the legacy sink that took over its ID."""
    case = BY_SEED[1073]
    assert case["flink"]["restored"] and case["flink"]["ran_after_restore"]
    for previous in (savepoints[1073], _with_state(case)):
        check = check_restore(
            previous if isinstance(previous, Path) else fingerprint(previous), case["after"]
        )
        assert check.restorable
        (warning,) = check.warnings
        assert warning.kind == "state_into_other_operator"
        assert warning.name == "op119"
        assert warning.state_id == "0c23e62ea319711b24530a38c267707c"
        assert '"Sink: Unnamed" (node 6)' in warning.message
        assert '.setUidHash("0c23e62ea319711b24530a38c267707c") on "op119" (node 7)' in (
            warning.message
        )


# -- the rules, one by one ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("parallelism", "expected"),
    [
        (-1, 128),
        (1, 128),
        (85, 128),
        (86, 256),
        (100, 256),
        (171, 256),
        (172, 512),
        (1000, 2048),
        (21845, 32768),
        (32768, 32768),
    ],
)
def test_default_max_parallelism(parallelism: int, expected: int) -> None:
    assert default_max_parallelism(parallelism) == expected


@pytest.mark.parametrize("parallelism", [0, -2, 32769])
def test_default_max_parallelism_refuses_impossible_parallelism(parallelism: int) -> None:
    with pytest.raises(ValueError, match="parallelism"):
        default_max_parallelism(parallelism)


def state(
    operator_id: str,
    *,
    name: str | None = "Op",
    uid: str | None = None,
    parallelism: int = 2,
    max_parallelism: int = 128,
    kinds: tuple[str, ...] = ("managed_keyed",),
    coordinator: bool = False,
    subtasks: int | None = None,
) -> OperatorState:
    return OperatorState(
        operator_id=operator_id,
        name=name,
        uid=uid,
        parallelism=parallelism,
        max_parallelism=max_parallelism,
        coordinator_state=coordinator,
        has_state=bool(kinds),
        state_size=100 if kinds or coordinator else 0,
        fully_finished=False,
        subtask_states=parallelism if subtasks is None else subtasks,
        state_kinds=kinds,
    )


def savepoint_of(*states: OperatorState) -> Savepoint:
    return Savepoint(version=6, checkpoint_id=7, operators=states)


def job(
    parallelism: int = 2, max_parallelism: int | None = None, *, insert: bool = False
) -> Fingerprint:
    """Source -> keyBy -> "Counts" (keyed reduce) -> print; optionally with a filter before."""
    env = StreamEnvironment(parallelism)
    s = env.source("Events")
    if insert:
        s = s.filter("Drop test events")
    counts = s.key_by().reduce("Counts")
    if max_parallelism is not None:
        counts.set_max_parallelism(max_parallelism)
    counts.print()
    return fingerprint(env)


def op(fp: Fingerprint, name: str) -> OperatorFingerprint:
    return next(o for o in fp.operators if o.name == name)


def test_same_job_restores() -> None:
    fp = job()
    sp = savepoint_of(*(state(o.operator_id, name=o.name) for o in fp.operators))
    check = check_savepoint(sp, fp)
    assert check == RestoreCheck("flink", True)


def test_unmapped_state_fails_with_flinks_words_and_the_fix() -> None:
    old = job()
    new = job(insert=True)  # the filter shifts the generated IDs behind it
    counts = op(old, "Counts")
    assert op(new, "Counts").operator_id != counts.operator_id
    sp = savepoint_of(state(counts.operator_id, name="Counts", uid=None))
    check = check_savepoint(sp, new)
    assert not check.restorable
    (problem,) = check.problems
    assert problem.kind == "unmapped_state"
    assert problem.state_id == counts.operator_id and problem.name == "Counts"
    assert (
        f'"Cannot map checkpoint/savepoint state for operator {counts.operator_id} to the new '
        "program" in problem.message
    )
    new_counts = op(new, "Counts")
    assert (
        f'give it back to "Counts" (node {new_counts.node}): '
        f'.setUidHash("{counts.operator_id}")' in problem.message
    )
    assert '.uid("...")' in problem.message
    assert "--allowNonRestoredState" in problem.message
    assert "execution.state-recovery.ignore-unclaimed-state" in problem.message
    assert "keyed state" in problem.message


def test_the_fix_restores() -> None:
    old = job()
    counts = op(old, "Counts")
    env = StreamEnvironment(2)
    env.source("Events").filter("Drop test events").key_by().reduce("Counts").set_uid_hash(
        counts.operator_id
    ).sink("Out")
    sp = savepoint_of(state(counts.operator_id, name="Counts"))
    assert check_savepoint(sp, fingerprint(env)).restorable


def test_empty_unmapped_state_is_skipped() -> None:
    sp = savepoint_of(state("0" * 32, kinds=()))
    assert check_savepoint(sp, job()) == RestoreCheck("flink", True)


def test_coordinator_state_alone_fails() -> None:
    sp = savepoint_of(state("1" * 32, name="Source: Kafka", kinds=(), coordinator=True))
    (problem,) = check_savepoint(sp, job()).problems
    assert problem.kind == "unmapped_state"
    assert "source coordinator state" in problem.message


def test_allow_non_restored_state_drops_it_with_a_warning() -> None:
    sp = savepoint_of(state("1" * 32, name="Gone"), state("2" * 32, kinds=()))
    check = check_savepoint(sp, job(), allow_non_restored_state=True)
    assert check.restorable and not check.problems
    (warning,) = check.warnings
    assert warning.kind == "state_skipped" and warning.state_id == "1" * 32
    assert '"Skipping savepoint state for operator 11111111111111111111111111111111."' in (
        warning.message
    )


def test_every_failing_operator_is_reported_in_file_order() -> None:
    new = job(max_parallelism=64)
    counts = op(new, "Counts")
    sp = savepoint_of(
        state("a" * 32, name="First"),
        state(counts.operator_id, name="Counts", max_parallelism=128),
        state("b" * 32, name="Third", kinds=("managed_operator",)),
        state("c" * 32, name="Empty", kinds=()),
    )
    check = check_savepoint(sp, new)
    assert [(p.kind, p.state_id) for p in check.problems] == [
        ("unmapped_state", "a" * 32),
        ("max_parallelism", counts.operator_id),
        ("unmapped_state", "b" * 32),
    ]


def test_configured_max_parallelism_must_match() -> None:
    new = job(max_parallelism=64)
    counts = op(new, "Counts")
    (problem,) = check_savepoint(savepoint_of(state(counts.operator_id)), new).problems
    assert problem.kind == "max_parallelism"
    assert problem.operator_id == counts.operator_id
    assert (
        '"Max parallelism mismatch between checkpoint/savepoint state and new program. Cannot '
        f"map operator {counts.operator_id} with max parallelism 128 to new program with max "
        'parallelism 64."' in problem.message
    )
    assert ".setMaxParallelism(128)" in problem.message
    assert check_savepoint(savepoint_of(state(counts.operator_id, max_parallelism=64)), new)


def test_max_parallelism_not_configured_adopts_the_savepoints() -> None:
    new = job()  # Flink's default for parallelism 2 would be 128
    counts = op(new, "Counts")
    for max_parallelism in (2, 96, 128, 4096, 32768):  # (1 < parallelism 2: see below)
        sp = savepoint_of(state(counts.operator_id, max_parallelism=max_parallelism))
        assert check_savepoint(sp, new).restorable, max_parallelism


def test_max_parallelism_below_the_new_parallelism_fails() -> None:
    new = job(parallelism=10)
    counts = op(new, "Counts")
    sp = savepoint_of(state(counts.operator_id, max_parallelism=8))
    (problem,) = check_savepoint(sp, new).problems
    assert problem.kind == "max_parallelism"
    assert "of the restored state is lower than the configured parallelism (10)" in (
        problem.message
    )
    assert "The maximum parallelism (8)" in problem.message
    assert ".setParallelism(n) with n <= 8" in problem.message
    # Flink checks it only for job vertices with subtask states.
    sp = savepoint_of(state(counts.operator_id, max_parallelism=8, subtasks=0))
    assert check_savepoint(sp, new).restorable


def test_user_defined_id_maps_state() -> None:
    env = StreamEnvironment(2)
    env.source("Events").key_by().reduce("Counts").set_uid_hash("AB" * 16).sink("Out")
    new = fingerprint(env)
    assert check_savepoint(savepoint_of(state("ab" * 16, name="Counts")), new).restorable


def test_state_under_a_shadowed_generated_id_is_dropped_with_a_warning() -> None:
    """An operator with setUidHash restores from that ID where the savepoint has it; state
    under its generated ID passes the validation but is then ignored."""
    env = StreamEnvironment(2)
    env.source("Events").key_by().reduce("Counts").set_uid_hash("ab" * 16).sink("Out")
    new = fingerprint(env)
    counts = op(new, "Counts")
    sp = savepoint_of(state("ab" * 16, name="Counts"), state(counts.operator_id, name="Counts"))
    check = check_savepoint(sp, new)
    assert check.restorable
    (warning,) = check.warnings
    assert warning.kind == "state_skipped" and warning.state_id == counts.operator_id
    assert "silently ignores" in warning.message


def test_state_restored_into_another_operator_warns() -> None:
    """A map inserted between the source and a stateful operator takes over the ID the
    stateful one had (same place in the walk, same number of chained outputs, same input)."""
    env = StreamEnvironment(2)
    env.source("Events").map("Counts").set_stateful(True).print()
    old = fingerprint(env)
    env = StreamEnvironment(2)
    env.source("Events").map("Enrich").map("Counts").set_stateful(True).print()
    new = fingerprint(env)
    counts = op(old, "Counts")
    assert op(new, "Enrich").operator_id == counts.operator_id
    sp = savepoint_of(
        *(
            state(
                o.operator_id,
                name=o.name,
                kinds=() if o.stateful is False else ("managed_operator",),
            )
            for o in old.operators
        )
    )
    check = check_savepoint(sp, new)
    assert check.restorable
    (warning,) = check.warnings
    assert warning.kind == "state_into_other_operator"
    assert warning.state_id == counts.operator_id and warning.name == "Counts"
    assert warning.operator_id == counts.operator_id
    assert '"Counts"\'s operator state' in warning.message
    assert f'goes to "Enrich" (node {op(new, "Enrich").node})' in warning.message
    assert f'.setUidHash("{counts.operator_id}") on "Counts" (node {op(new, "Counts").node})' in (
        warning.message
    )
    # The same from the old job's fingerprint: the comparison's misplaced state.
    from_fp = check_fingerprint(old, new)
    assert from_fp.restorable
    assert [(w.kind, w.state_id) for w in from_fp.warnings] == [
        ("state_into_other_operator", counts.operator_id)
    ]


def test_renames_do_not_warn() -> None:
    fp = job()
    sp = savepoint_of(*(state(o.operator_id, name=o.name + " (old name)") for o in fp.operators))
    assert check_savepoint(sp, fp) == RestoreCheck("flink", True)


def test_fingerprint_skips_operators_known_to_be_stateless() -> None:
    env = StreamEnvironment(2)
    env.source("Events").map("Parse").key_by().reduce("Counts").print()
    old = fingerprint(env)
    env = StreamEnvironment(2)
    env.source("Events").map("Parse").filter("New").key_by().reduce("Counts").print()
    new = fingerprint(env)
    stateful = {o.name: o.stateful for o in old.operators}
    assert stateful == {
        "Source: Events": True,
        "Parse": None,
        "Counts": True,
        "Sink: Print to Std. Out": False,
    }
    check = check_fingerprint(old, new)
    # Parse, Counts and the sink all get new IDs (the filter is hashed in between); the sink
    # keeps no state, Parse may (unknown), Counts does.
    assert [(p.kind, p.name) for p in check.problems] == [
        ("unmapped_state", "Parse"),
        ("unmapped_state", "Counts"),
    ]
    assert "not marked stateless" in check.problems[0].message
    assert "(marked stateful)" in check.problems[1].message


def test_fingerprint_max_parallelism_from_the_old_vertices() -> None:
    """A savepoint records each job vertex's max parallelism: as configured, else Flink's
    default for the vertex's parallelism (128 for 2, 512 for 200)."""
    (problem,) = check_fingerprint(job(2), job(2, max_parallelism=256)).problems
    assert problem.kind == "max_parallelism" and problem.name == "Counts"
    assert "with max parallelism 128 to new program with max parallelism 256" in problem.message
    assert not check_fingerprint(job(200), job(2, max_parallelism=512)).problems
    assert check_fingerprint(job(200), job(2, max_parallelism=256)).problems
    assert not check_fingerprint(job(200), job(300)).problems  # adopts 512
    assert not check_fingerprint(job(2, max_parallelism=64), job(3)).problems  # adopts 64
    # Adopting 128 for a vertex of parallelism 200 is impossible: too few key groups.
    problems = check_fingerprint(job(2), job(200)).problems
    assert [(p.kind, p.name) for p in problems] == [
        ("max_parallelism", "Source: Events"),
        ("max_parallelism", "Counts"),
    ]
    assert all("is lower than the configured parallelism (200)" in p.message for p in problems)


_SPARK_WORDS = re.compile(
    r"spark|stage|micro-?batch|state store|offsets|dataframe|structured streaming", re.I
)


def test_messages_speak_flink_only() -> None:
    new = job(parallelism=10, max_parallelism=64)
    counts = op(new, "Counts")
    sp = savepoint_of(
        state("a" * 32, name="Gone", uid="gone"),
        state(counts.operator_id, name="Counts", max_parallelism=128),
    )
    checks = [
        check_savepoint(sp, new),
        check_savepoint(sp, new, allow_non_restored_state=True),
        check_savepoint(savepoint_of(state(counts.operator_id, max_parallelism=8)), job(10)),
        check_fingerprint(job(), job(insert=True)),
    ]
    messages = [p.message for c in checks for p in (*c.problems, *c.warnings)]
    assert len(messages) >= 5
    for message in messages:
        assert not _SPARK_WORDS.search(message), message


# -- routing -----------------------------------------------------------------------------------


def test_check_restore_recognises_savepoint_directories_and_files(
    savepoints: dict[int, Path], tmp_path: Path
) -> None:
    case = BY_SEED[1000]
    assert check_restore(savepoints[1000], case["after"]).restorable
    assert check_restore(savepoints[1000] / "_metadata", case["after"]).restorable
    empty = tmp_path / "not-a-savepoint"
    empty.mkdir()
    with pytest.raises(DocumentError, match="neither a Flink savepoint"):
        check_restore(empty, case["after"])
    assert pytest_opid.check_restore(savepoints[1000], case["after"]).restorable


def test_check_restore_reports_a_corrupt_metadata_file(tmp_path: Path) -> None:
    bad = tmp_path / "sp"
    bad.mkdir()
    (bad / "_metadata").write_bytes(b"\x00" * 20)
    with pytest.raises(DocumentError, match="not a Flink savepoint"):
        check_restore(bad, job())


# -- pinning -----------------------------------------------------------------------------------


def test_pin_lines_from_a_savepoint(savepoints: dict[int, Path]) -> None:
    from pytest_opid.flink.savepoint import read_savepoint

    sp = read_savepoint(savepoints[1000])
    lines = pin_lines(sp)
    stateful = [o for o in sp.operators if o.has_state or o.coordinator_state]
    assert len(lines) == len(stateful) == 4
    assert lines[0] == (
        '"op152" (uid "sink-1")  Java: .setUidHash("ef00859f8106a0a0d1262e192bb2ad94")  '
        'Python: .set_uid_hash("ef00859f8106a0a0d1262e192bb2ad94")'
    )


def test_pin_lines_from_a_fingerprint() -> None:
    env = StreamEnvironment(2)
    env.source("Events").map("Parse").key_by().window().uid("w").print()
    fp = fingerprint(env)
    lines = pin_lines(fp)
    by_name = {o.name: o for o in fp.operators}
    window = by_name["Window"].operator_id
    assert f'"Window" (uid "w")  Java: .setUidHash("{window}")  Python: .set_uid_hash(' in (
        "\n".join(lines)
    )
    assert len(lines) == 3  # source, Parse (unknown), Window; print() keeps no state
    assert lines[1].startswith('"Parse" (uid -)  Java: .setUidHash("')
    unnamed = savepoint_of(state("f" * 32, name=None))
    assert pin_lines(unnamed) == [
        f'- (uid -)  Java: .setUidHash("{"f" * 32}")  Python: .set_uid_hash("{"f" * 32}")'
    ]
