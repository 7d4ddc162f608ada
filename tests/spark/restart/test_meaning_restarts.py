"""Issue 18's engine evidence: real Spark 4.3 restarts that Spark accepts but that change results.

``tests/data/meaning-restart`` (built by its ``make.py``, by hand) holds, per change, what Spark
did when query B restarted on query A's checkpoint in a fresh JVM, and the table a user ends up
with, compared with B run from scratch on the same three input batches. A change is *safe* when
Spark restarts and the tables are equal, or differ only as the change intends (a new filter
applies from the restart on). ``check_restore`` must say exactly that: ``restorable`` is Spark's
verdict, ``safe`` is the data's, from A's fingerprint and from A's checkpoint.
"""

from __future__ import annotations

import os
import sys

# applyInPandasWithState's Python workers import pandas: run them with this interpreter.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

import importlib.util
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import pytest_opid
from pytest_opid.result import RestoreCheck
from tests.spark.restart_cases import build, extract

pytestmark = pytest.mark.spark_line(
    "4.3", reason="the data's truth is Spark 4.3.0's restarts (tests/data/meaning-restart)"
)

DATA = Path(__file__).resolve().parents[2] / "data" / "meaning-restart"
RECORDS = {
    rec["case"]["id"]: rec
    for rec in map(json.loads, (DATA / "cases.jsonl").read_text(encoding="utf-8").splitlines())
}


def _make() -> Any:
    """The generator's own module: the live test runs queries and builds tables as it did."""
    spec = importlib.util.spec_from_file_location("meaning_restart_make", DATA / "make.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def expected_safe(rec: dict[str, Any]) -> bool:
    """Spark restarts, and the results are B's own (or differ only as the change intends)."""
    return rec["spark"]["restarted"] and (not rec["results_differ"] or rec["by_design"])


#: What a checkpoint does not hold: the expressions behind a state's fields (an aggregate's
#: input, a window's or session's durations; a stream-stream join's key fields are named
#: field0, field1... whatever the join keys are). From the checkpoint alone these are
#: "restorable, meaning not verified" (``opid check-restore`` exits 3), naming what was not
#: checked and how to check it; with A's fingerprint beside the checkpoint they are judged.
CHECKPOINT_CANNOT_SEE = {
    "aggregate_input_same_type",  # sum(v) -> sum(k): the buffer is "sum" either way
    "window_duration_5_to_10_minutes",
    "tumbling_to_sliding_window",
    "session_window_gap_change",
    "join_keys_change",
    "grouping_key_udf_swapped",  # the key field is g either way; which UDF is in no file
    "grouping_key_struct_field",  # g either way
    "pandas_state_function_timeout_30_to_10_minutes",  # a checkpoint keeps no code
}


def _explain(check: RestoreCheck) -> str:
    return json.dumps(check.to_dict(), indent=1)[:4000]


# -- the data -------------------------------------------------------------------------------


#: Spark restarts B, and B's results are not B's: the state is read as something else.
CHANGES_RESULTS = {
    "grouping_key_same_type",  # groupBy cat -> user
    "grouping_key_order_swapped",  # groupBy(cat, user) -> groupBy(user, cat)
    "grouping_key_expression_same_type",  # k -> (k % 2) AS k
    "grouping_key_udf_swapped",  # bucket3(k) AS g -> bucket2(k) AS g (Python UDFs)
    "grouping_key_struct_field",  # s.user AS g -> s.cat AS g (a struct's fields)
    "aggregate_function_same_type",  # max(v) -> sum(v)
    "aggregate_input_same_type",  # sum(v) -> sum(cast(k as long))
    "aggregate_order_swapped",  # sum(v), max(v) -> max(v), sum(v)
    "window_duration_5_to_10_minutes",
    "tumbling_to_sliding_window",
    "session_window_gap_change",  # 3 -> 8 minutes
    "dedup_column_id_to_v",
    "join_keys_change",  # imp_id = click_id -> imp_v = click_v
    "join_sides_swapped",  # impressions.join(clicks) -> clicks.join(impressions)
    "pandas_state_fields_reordered",  # "n long, total long" -> "total long, n long"
    "aggregate_type_change_schema_check_off",  # sum(v) -> sum(amount), stateSchemaCheck=false
    # sum(v), max(v) -> max(v), stateSchemaCheck=false: max reads the stored sum
    "removed_first_aggregate_schema_check_off",
    # transformWithStateInPandas, groupBy("session_id") -> groupBy("user_id"), both strings
    "tws_grouping_key_session_to_user",
    # applyInPandasWithState's function, same name and state schema: SESSION_TIMEOUT 30 -> 10
    # minutes (issue 28, item 4)
    "pandas_state_function_timeout_30_to_10_minutes",
}
#: Spark refuses B (the type-checked controls, and an added aggregate column even with
#: stateSchemaCheck=false: the state rows' format validation fails the first batch).
REFUSED = {
    "aggregate_order_swapped_types_differ": "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE",
    "aggregate_type_change_schema_check_on": "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE",
    "added_aggregate_schema_check_on": "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE",
    "added_aggregate_schema_check_off": (
        "CANNOT_LOAD_STATE_STORE.VALUE_ROW_FORMAT_VALIDATION_FAILURE"
    ),
    "removed_last_aggregate_schema_check_on": "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE",
    # the rate source reads rate-micro-batch's offsets ({"offset":40,"timestamp":2000}) as a
    # number when it commits them: no error condition, Spark's Java exception
    "rate_micro_batch_to_rate": "java.lang.NumberFormatException",
}
#: Spark restarts B and the results differ only as the change intends.
BY_DESIGN = {"add_filter_upstream", "join_inner_to_left_outer"}


def test_the_data_set() -> None:
    """Every case of issue 18, item 2 and the safe controls, and issue 28's (a removed
    aggregate without the schema check, a rate source's format, transformWithState's
    grouping key, the function that updates a state), small enough to keep."""
    assert len(RECORDS) == 35
    assert sum(p.stat().st_size for p in DATA.rglob("*") if p.is_file()) < 2_000_000
    restarted = {c for c, rec in RECORDS.items() if rec["spark"]["restarted"]}
    assert {c: RECORDS[c]["spark"]["outcome"] for c in set(RECORDS) - restarted} == REFUSED
    assert {c for c in restarted if not expected_safe(RECORDS[c])} == CHANGES_RESULTS
    assert {c for c, rec in RECORDS.items() if rec["by_design"]} == BY_DESIGN


@pytest.mark.parametrize("case_id", sorted(CHANGES_RESULTS))
def test_reading_the_state_as_something_else_changes_b_itself(case_id: str) -> None:
    """Not only the rows A wrote before the restart: what B emits for batch 3 on A's state is
    not what B emits for it on its own state."""
    rec = RECORDS[case_id]
    assert rec["b_restart"] != rec["b_scratch"]
    assert rec["b_output_differs"]


def test_safe_changes_leave_b_itself_alone() -> None:
    """A safe change's B emits the same for batch 3 on A's state as on its own, except where
    the change intends otherwise, and where a shorter watermark delay emitted a window a run
    earlier from scratch (the tables are the same)."""
    same = {
        c
        for c, rec in RECORDS.items()
        if rec["spark"]["restarted"] and c not in CHANGES_RESULTS and not rec["b_output_differs"]
    }
    assert set(RECORDS) - same - CHANGES_RESULTS - set(REFUSED) == {
        "add_filter_upstream",
        "watermark_delay_10_to_5_minutes",
    }
    assert not RECORDS["watermark_delay_10_to_5_minutes"]["results_differ"]


@pytest.mark.parametrize("case_id", sorted(RECORDS))
def test_spark_did_what_the_data_says(case_id: str) -> None:
    rec = RECORDS[case_id]
    spark = rec["spark"]
    if spark["restarted"]:
        assert spark["outcome"] == "restarted" and spark["error_class"] is None
        # B really ran a batch on A's state: batch 3's rows, after A's committed batches
        first = spark["batches"][0]
        assert first["numInputRows"] > 0
        assert first["batchId"] == max(b["batchId"] for b in rec["a_batches"]) + 1
        assert rec["table_restart"] is not None
        assert rec["results_differ"] is (rec["table_restart"] != rec["table_scratch"])
        assert rec["b_output_differs"] is (rec["b_restart"] != rec["b_scratch"])
    elif spark["error_class"] is None:  # no error condition: Spark's Java exception
        assert spark["message"].startswith(f"{spark['outcome']}: ")
        assert rec["table_restart"] is None and not rec["results_differ"]
    else:
        assert spark["outcome"] == spark["error_class"]
        assert f"[{spark['error_class']}]" in spark["message"]
        assert rec["table_restart"] is None and not rec["results_differ"]
    assert rec["table_scratch"], "B from scratch emitted nothing"
    assert rec["by_design"] is bool(rec["results_differ"] and rec["by_design_reason"])


# -- the verdicts ----------------------------------------------------------------------------


Judged = tuple[RestoreCheck, RestoreCheck, RestoreCheck, RestoreCheck]


@pytest.fixture(scope="module")
def judged(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Judged]:
    """A case judged once from A's fingerprint, from A's checkpoint (its kept metadata), from
    the checkpoint with A's fingerprint beside it, and A itself on its own checkpoint."""
    root = tmp_path_factory.mktemp("meaning-restart")
    done: dict[str, Judged] = {}

    def get(case_id: str) -> Judged:
        if case_id not in done:
            rec = RECORDS[case_id]
            tarballs = {"checkpoint": DATA / rec["checkpoint"], "inputs": DATA / rec["inputs"]}
            folder = extract({**rec, **tarballs}, root)
            a = pytest_opid.fingerprint(build(spark, rec, "before", folder))
            b = pytest_opid.fingerprint(build(spark, rec, "after", folder))
            checkpoint = folder / "checkpoint"
            done[case_id] = (
                pytest_opid.check_restore(a, b),
                pytest_opid.check_restore(checkpoint, b),
                pytest_opid.check_restore(checkpoint, b, previous_fingerprint=a),
                pytest_opid.check_restore(checkpoint, a),
            )
        return done[case_id]

    return get


@pytest.mark.parametrize("case_id", sorted(RECORDS))
def test_verdict_from_the_fingerprint(judged: Any, case_id: str) -> None:
    rec = RECORDS[case_id]
    check = judged(case_id)[0]
    assert check.restorable is rec["spark"]["restarted"], _explain(check)
    assert check.safe is expected_safe(rec), _explain(check)
    assert bool(check.reinterpreted) is (rec["spark"]["restarted"] and not check.safe)


@pytest.mark.parametrize("case_id", sorted(RECORDS))
def test_verdict_from_the_checkpoint(judged: Any, case_id: str) -> None:
    rec = RECORDS[case_id]
    check = judged(case_id)[1]
    assert check.restorable is rec["spark"]["restarted"], _explain(check)
    if case_id in CHECKPOINT_CANNOT_SEE and not expected_safe(rec):
        # restorable, meaning not verified: never "safe" without evidence
        assert check.safe is None and not check.meaning_verified, _explain(check)
        assert all("--previous-fingerprint" in u.message for u in check.unverified)
        return
    # "safe" only where verified; where the checkpoint cannot tell, None (not verified)
    # a change the checkpoint does show is not safe, whatever else it could not tell
    if not check.restorable:
        assert check.safe is False, _explain(check)
    elif check.safe is False:
        assert check.reinterpreted and not expected_safe(rec), _explain(check)
    else:
        expected = expected_safe(rec) if check.meaning_verified else None
        assert check.safe is expected, _explain(check)
    # never "safe" where the results go wrong: refused, reinterpreted or not verified
    if rec["spark"]["restarted"] and not expected_safe(rec):
        assert check.safe is not True, _explain(check)


@pytest.mark.parametrize("case_id", sorted(RECORDS))
def test_verdict_from_the_checkpoint_and_the_fingerprint(judged: Any, case_id: str) -> None:
    """The checkpoint's real schemas and A's plan: every case judged as the data says, and
    the state's meaning verified wherever Spark restarts."""
    rec = RECORDS[case_id]
    check = judged(case_id)[2]
    assert check.restorable is rec["spark"]["restarted"], _explain(check)
    assert check.safe is expected_safe(rec), _explain(check)
    assert check.meaning_verified, _explain(check)
    if check.restorable:
        assert "state meaning (from the previous fingerprint)" in check.verified


@pytest.mark.parametrize("case_id", sorted(RECORDS))
def test_an_unchanged_query_on_its_own_checkpoint(judged: Any, case_id: str) -> None:
    """A on its own checkpoint restarts; nothing is reported but what the checkpoint cannot
    show: an aggregate's input column, a window, a join's keys, a computed key. count(*) reads
    no column."""
    check = judged(case_id)[3]
    assert check.restorable and check.safe is not False and not check.reinterpreted, _explain(check)
    assert check.safe is (True if check.meaning_verified else None), _explain(check)
    assert not [w for w in check.warnings if w.kind != "state_config"], _explain(check)
    said = " ".join(u.message for u in check.unverified)
    assert "count(1)" not in said and "count(*)" not in said, said
    before = RECORDS[case_id]["before_code"]
    # (a key computed under its name, concat(user, '-', cat) AS session_id, is not either; nor
    # the code of the function that updates a state, which a checkpoint does not keep)
    if not re.search(
        r"F\.(sum|max|min|avg|concat)\(|window|\.join\(|udf|applyInPandasWithState|transformWithState",
        before,
    ):
        assert check.meaning_verified, _explain(check)


# -- one restart, live --------------------------------------------------------------------------


def test_swapped_grouping_keys_change_results_live(spark: Any, tmp_path: Path) -> None:
    """groupBy("cat", "user") -> groupBy("user", "cat"): Spark restarts B on A's state, and
    B's sums differ from B's own from scratch; exactly as the data recorded."""
    make = _make()
    rec = RECORDS["grouping_key_order_swapped"]
    mode = rec["output_mode_after"]
    sessions = {}
    for which in ("before", "after"):
        sessions[which] = spark.newSession()
        for key, value in rec[f"session_conf_{which}"].items():
            sessions[which].conf.set(key, value)
    restarted, scratch = tmp_path / "restarted", tmp_path / "scratch"
    outcomes = []
    for number in (1, 2, 3):
        for folder in (restarted, scratch):
            make.write_batch(folder, number)
        if number < 3:
            outcomes.append(
                make._run(
                    sessions["before"],
                    rec["before_code"],
                    restarted,
                    restarted / "checkpoint",
                    rec["output_mode_before"],
                    tmp_path / "a.jsonl",
                )
            )
        else:  # the restart: B on A's checkpoint
            outcomes.append(
                make._run(
                    sessions["after"],
                    rec["after_code"],
                    restarted,
                    restarted / "checkpoint",
                    mode,
                    tmp_path / "b.jsonl",
                )
            )
        outcomes.append(
            make._run(
                sessions["after"],
                rec["after_code"],
                scratch,
                scratch / "checkpoint",
                mode,
                tmp_path / f"scratch{number}.jsonl",
            )
        )
    assert all(o["restarted"] for o in outcomes), outcomes
    b_restart = make._sorted([r for b in make._emissions(tmp_path / "b.jsonl") for r in b])
    b_scratch = make._sorted([r for b in make._emissions(tmp_path / "scratch3.jsonl") for r in b])
    assert b_restart != b_scratch
    assert (b_restart, b_scratch) == (rec["b_restart"], rec["b_scratch"])


# -- opid check-restore -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case_id", "alone", "with_a"),
    [
        ("window_duration_5_to_10_minutes", 3, 1),
        ("no_change", 3, 0),
        ("dedup_column_id_to_v", 1, 1),
        # the checkpoint keys the state by session_id, the new query by the column user: seen
        # from the checkpoint alone, as for an aggregation's key (grouping_key_same_type)
        ("tws_grouping_key_session_to_user", 1, 1),
        ("rate_micro_batch_to_rate", 1, 1),
        ("removed_last_aggregate_schema_check_off", 3, 0),
        ("pandas_state_function_timeout_30_to_10_minutes", 3, 1),
        ("pandas_state_function_renamed", 3, 0),
    ],
)
def test_check_restore_exit_codes(
    spark: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    case_id: str,
    alone: int,
    with_a: int,
) -> None:
    """From the checkpoint alone a window or an aggregate's input cannot be checked: exit 3,
    "restorable, meaning not verified", saying what and how; with A's fingerprint beside it
    the verdict is the data's (1: the results go wrong; 0: safe)."""
    from pytest_opid.cli import main

    rec = RECORDS[case_id]
    tarballs = {"checkpoint": DATA / rec["checkpoint"], "inputs": DATA / rec["inputs"]}
    folder = extract({**rec, **tarballs}, tmp_path)
    paths = []
    for which in ("before", "after"):
        path = tmp_path / f"{which}.json"
        path.write_text(pytest_opid.fingerprint(build(spark, rec, which, folder)).to_json())
        paths.append(str(path))
    checkpoint = str(folder / "checkpoint")
    assert main(["check-restore", checkpoint, paths[1]]) == alone
    out = capsys.readouterr().out
    if alone == 3:
        assert out.startswith("Restorable, meaning not verified:"), out
        assert "--previous-fingerprint OLD.json" in out
    code = main(["check-restore", checkpoint, paths[1], "--previous-fingerprint", paths[0]])
    out = capsys.readouterr().out
    assert code == with_a, out
    assert "Not verified" not in out
    if with_a == 0:  # Spark's words: a restart from the checkpoint (not Flink's "job")
        assert out.startswith(
            "Restarts from the checkpoint: Spark 4.3 restarts the new query from the "
            "checkpoint, on its state and offsets"
        ), out


# -- issue 28: the marked test on the new cases ------------------------------------------------

MARKED = """
import json
from pathlib import Path

import pytest

HERE = Path(__file__).parent


@pytest.mark.stable_topology
def test_the_query(spark, opid):
    which = json.loads((HERE / "which.json").read_text())
    scope = {}
    exec(which["code"], scope)  # the data set's own query code
    session = spark.newSession()
    for key, value in which["conf"].items():
        session.conf.set(key, value)
    opid.record(scope["build"](session, which["paths"]))
"""


@pytest.mark.parametrize(
    ("case_id", "passes"),
    [
        ("removed_last_aggregate_schema_check_off", True),
        ("removed_first_aggregate_schema_check_off", False),
        ("rate_micro_batch_to_rate", False),
        ("tws_grouping_key_session_to_user", False),
        ("pandas_state_function_timeout_30_to_10_minutes", False),
        ("pandas_state_function_renamed", True),
    ],
)
def test_the_marked_test_judges_issue_28s_restarts(
    pytester: pytest.Pytester, spark: Any, tmp_path: Path, case_id: str, passes: bool
) -> None:
    """The snapshot records A; B passes where Spark restarts with B's own results, and fails
    where Spark refuses or the results go wrong."""
    rec = RECORDS[case_id]
    tarballs = {"checkpoint": DATA / rec["checkpoint"], "inputs": DATA / rec["inputs"]}
    folder = extract({**rec, **tarballs}, tmp_path)
    pytester.makepyfile(test_job=MARKED)

    def run(which: str, *args: str) -> Any:
        (pytester.path / "which.json").write_text(
            json.dumps(
                {
                    "code": rec[f"{which}_code"],
                    "conf": rec[f"session_conf_{which}"],
                    "paths": {name: str(folder / name) for name in ("in0", "in1")},
                }
            )
        )
        return pytester.runpytest_inprocess("-p", "no:cacheprovider", *args)

    run("before", "--snapshot-update").assert_outcomes(passed=1)
    result = run("after")
    text = result.stdout.str()
    if passes:
        result.assert_outcomes(passed=1)
        return
    result.assert_outcomes(failed=1)
    if rec["spark"]["restarted"]:
        assert "Spark restarts, but the results are wrong:" in text, text
    else:
        assert rec["spark"]["outcome"] in text, text


def test_a_removed_last_aggregate_without_the_schema_check_restarts(judged: Any) -> None:
    """sum(v), max(v) -> sum(v) with stateSchemaCheck=false: Spark 4.3 restarts (the stored
    rows are only longer than the new value) and sum reads its own old value: B restarted
    equals B from scratch. Said once, as a warning; removing the first aggregate instead makes
    max read the stored sum."""
    for check in judged("removed_last_aggregate_schema_check_off")[:3]:
        assert check.restorable and check.safe is not False, _explain(check)
        (warning,) = [w for w in check.warnings if w.kind == "value_schema"]
        assert "stateSchemaCheck=false" in warning.message
        assert "stores value rows of 2 fields and the new value has 1" in warning.message
    first = judged("removed_first_aggregate_schema_check_off")[0]
    assert first.restorable and first.safe is False
    assert "a field reads another's old value" in first.reinterpreted[0].message


def test_rate_micro_batch_to_rate_is_refused_in_sparks_words(judged: Any) -> None:
    """Both routes name Spark's failure: the rate source parses rate-micro-batch's JSON offset
    as a number (the checkpoint's own offset where the checkpoint is read)."""
    offset = '{"offset":40,"timestamp":2000}'
    assert offset in RECORDS["rate_micro_batch_to_rate"]["spark"]["message"]
    from_fingerprint, from_checkpoint, both, _ = judged("rate_micro_batch_to_rate")
    for check in (from_fingerprint, from_checkpoint, both):
        (problem,) = check.problems
        assert problem.kind == "sources"
        assert "java.lang.NumberFormatException" in problem.message
        assert "was rate-micro-batch and is now rate" in problem.message
    assert f'For input string: "{offset}"' in from_checkpoint.problems[0].message


# -- the function that updates the state (issue 28, item 4) ------------------------------------


def test_a_changed_state_function_is_said_in_spark_words(judged: Any) -> None:
    """SESSION_TIMEOUT 30 -> 10 minutes, read by applyInPandasWithState's function of the same
    name: from A's fingerprint (and with A's fingerprint beside the checkpoint) the function
    changed and Spark feeds it the old state; from the checkpoint alone it cannot be known."""
    from_a, alone, both, _ = judged("pandas_state_function_timeout_30_to_10_minutes")
    for check in (from_a, both):
        (said,) = check.reinterpreted
        assert said.state_id == "0" and said.kind == "state_meaning"
        head, fix = said.message.split("\nFix:\n")
        assert "the function that updates state/0 changed (function sessions:" in head
        assert "Spark will feed it the old state" in head
        assert "pytest --snapshot-update" in fix and "new checkpoint location" in fix
    assert alone.restorable and alone.safe is None and not alone.meaning_verified
    (unsaid,) = alone.unverified
    assert "the function that updates the state (now sessions" in unsaid.message


def test_a_renamed_state_function_is_the_same_function(judged: Any) -> None:
    """sessions -> user_sessions, the same code: safe from A's fingerprint, and not even the
    name change is a warning (the code itself was compared)."""
    from_a, alone, both, _ = judged("pandas_state_function_renamed")
    for check in (from_a, both):
        assert check.safe and check.meaning_verified, _explain(check)
        assert not [w for w in check.warnings if "function" in w.message], _explain(check)
    assert alone.safe is None and not alone.meaning_verified
