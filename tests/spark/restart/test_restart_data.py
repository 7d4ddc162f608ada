"""Restart verdicts against Spark 4.3's own.

``tests/data/spark-restart`` holds 66 real restarts: query A's code and the checkpoint it left,
query B's code, and what Spark 4.3 did when B restarted on it. Every pair is judged twice, from
the checkpoint and from A's fingerprint alone, and compared with Spark: the verdict and, where
Spark failed, the kind of the first problem. Scenarios the data lacks are restarted here for
real (A on a new checkpoint, then B on it) and judged the same way.
"""

from __future__ import annotations

import os
import sys

# The Python workers of applyInPandasWithState and of transformWithState's driver-side init()
# import pandas: run them with this interpreter (set before the session's SparkContext starts).
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

import json
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import pytest_opid
from pytest_opid.engines import engine_rules
from pytest_opid.errors import DocumentError
from pytest_opid.io.snapshot import dumps, loads
from pytest_opid.result import Fingerprint, RestoreCheck
from pytest_opid.spark.checkpoint.read import read_checkpoint
from pytest_opid.spark.restart.schemas import schema_compatible
from pytest_opid.spark.restart.verdict import check_checkpoint
from pytest_opid.spark.source_entries import parse_source
from pytest_opid.spark.vocabulary import PROPERTIES_STORE
from tests.spark.restart_cases import (
    DATA,
    SCHEMA,
    Outcome,
    build,
    extract,
    load_cases,
    restart,
)

pytestmark = pytest.mark.spark_line(
    "4.3", reason="the data's truth is Spark 4.3.0's restarts (tests/data/spark-restart)"
)

CASES = load_cases()

#: Spark's failure (its error condition, else the Java exception) -> the first problem's kind.
KIND_OF = {
    "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE": "key_schema",
    "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE": "value_schema",
    "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA": "state_operators",
    "STREAMING_STATEFUL_OPERATOR_MISSING_STATE_DIRECTORY": "state_operators",
    "STATE_STORE_INVALID_CONFIG_AFTER_RESTART": "state_config",
    "java.lang.AssertionError": "sources",
    "java.lang.IllegalArgumentException": "sources",
}

#: From A's fingerprint alone these depend on what the checkpoint's last committed batch read
#: (a file source's path changed): the verdict is "restorable" with a warning that says so (in
#: a test, the inputs' folder usually changes from run to run; the checkpoint itself decides).
DEPENDS_ON_LAST_BATCH = {
    "dedup_watermark__change_source_path__100029",  # the last batch read no file: restarted
    "stateless_udf__change_source_path__100062",  # it read in0/batch2.json: Wrong basePath
    "union_agg__swap_source_order__100046",  # both sources read a file: Wrong basePath
}


@dataclass(frozen=True)
class Pair:
    folder: Path
    a: Fingerprint  # query A's fingerprint
    from_checkpoint: RestoreCheck  # check_restore(<checkpoint>, query B)
    from_fingerprint: RestoreCheck  # check_restore(fingerprint(query A), query B)


@pytest.fixture(scope="module")
def pair(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Pair]:
    """A case's pair, extracted, built and judged once (on first use)."""
    root = tmp_path_factory.mktemp("spark-restart")
    done: dict[str, Pair] = {}

    def get(case_id: str) -> Pair:
        if case_id not in done:
            rec = CASES[case_id]
            folder = extract(rec, root)
            a = pytest_opid.fingerprint(build(spark, rec, "before", folder))
            # check_restore(previous, query B) fingerprints B first: once for both verdicts
            # (test_a_dataframe_is_judged_by_its_fingerprint shows it is the same)
            b = pytest_opid.fingerprint(build(spark, rec, "after", folder))
            done[case_id] = Pair(
                folder,
                a,
                pytest_opid.check_restore(folder / "checkpoint", b),
                pytest_opid.check_restore(a, b),
            )
        return done[case_id]

    return get


def _agrees(check: RestoreCheck, spark: dict[str, Any]) -> bool:
    """The verdict is Spark's; where Spark failed, the first problem is of the kind of Spark's
    failure and names it."""
    if check.restorable != spark["restarted"]:
        return False
    if spark["restarted"]:
        return True
    failure = spark["error_class"] or spark["exception_class"]
    first = check.problems[0]
    return first.kind == KIND_OF[failure] and failure.rsplit(".", 1)[-1] in first.message


def _explain(check: RestoreCheck) -> str:
    return json.dumps(check.to_dict(), indent=1)[:4000]


# -- the 66 real restarts --------------------------------------------------------------------------


def test_the_data_set() -> None:
    assert len(CASES) == 66
    outcomes = {
        rec["spark"]["error_class"] or rec["spark"]["exception_class"] for rec in CASES.values()
    }
    assert outcomes - {None} <= KIND_OF.keys()


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_restart_on_the_checkpoint(pair: Callable[[str], Pair], case_id: str) -> None:
    check = pair(case_id).from_checkpoint
    assert _agrees(check, CASES[case_id]["spark"]), _explain(check)


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_restart_from_the_fingerprint(pair: Callable[[str], Pair], case_id: str) -> None:
    check = pair(case_id).from_fingerprint
    spark = CASES[case_id]["spark"]
    if case_id in DEPENDS_ON_LAST_BATCH:
        depends = [
            w for w in check.warnings if "depends on what the checkpoint's last" in w.message
        ]
        assert depends and all(w.kind == "sources" for w in depends), _explain(check)
        assert "Wrong basePath" in depends[0].message
        assert not [p for p in check.problems if p.kind == "sources"], _explain(check)
    else:
        assert _agrees(check, spark), _explain(check)


def test_agreement_figures(pair: Callable[[str], Pair]) -> None:
    """(a) 66/66 from the checkpoint; (b) from A's fingerprint, 63/63 of the pairs whose
    outcome a fingerprint decides, and exactly the 3 file-source-path pairs depend on the
    checkpoint's last batch (a warning says so; the one Spark restarted also agrees)."""
    from_checkpoint = sum(_agrees(pair(c).from_checkpoint, CASES[c]["spark"]) for c in CASES)
    from_fingerprint = {c for c in CASES if _agrees(pair(c).from_fingerprint, CASES[c]["spark"])}
    depends = {
        c
        for c in CASES
        if any(
            "depends on what the checkpoint's last" in p.message
            for p in pair(c).from_fingerprint.warnings
        )
    }
    assert from_checkpoint == 66
    assert depends == DEPENDS_ON_LAST_BATCH
    assert set(CASES) - from_fingerprint == {
        "stateless_udf__change_source_path__100062",
        "union_agg__swap_source_order__100046",
    }
    assert len(from_fingerprint) == 64


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_fingerprint_records_what_spark_wrote(pair: Callable[[str], Pair], case_id: str) -> None:
    """Query A's fingerprint holds, per state store, the key and value schema Spark wrote to
    the checkpoint (from the optimized plan: a dropped aggregate shrinks it), byte for byte, the
    operator names of the state metadata and transformWithState's operator properties."""
    fp = pair(case_id).a
    checkpoint = read_checkpoint(pair(case_id).folder / "checkpoint")
    recorded = {
        (s.state_operator_id, s.kind, st.name): (st.key_schema, st.value_schema)
        for s in fp.state_operators or ()
        for st in s.stores
    }
    written: dict[tuple[int, str | None, str], tuple[str | None, str | None]] = {}
    for op in checkpoint.state_operators:
        for store in op.stores:
            for family in store.column_families:
                name = store.name if store.schema_version != 3 else f"{store.name}/{family.name}"
                written[(op.operator_id, op.operator_name, name)] = (
                    family.key_schema_json,
                    family.value_schema_json,
                )
        if op.properties is not None:
            written[(op.operator_id, op.operator_name, PROPERTIES_STORE)] = (None, op.properties)
    assert recorded == written
    assert len(fp.sources or ()) == len(checkpoint.sources)


def test_fingerprint_records_the_sources_by_position(pair: Callable[[str], Pair]) -> None:
    union = pair("union_agg__swap_source_order__100046")
    assert [parse_source(s).path for s in union.a.sources or ()] == [
        f"file:{(union.folder / 'in0').resolve().as_posix()}",
        f"file:{(union.folder / 'in1').resolve().as_posix()}",
    ]
    assert {parse_source(s).fmt for s in union.a.sources or ()} == {"json"}
    named = pair("named_sources_union__rename_source__100050").a.sources or ()
    assert [parse_source(s).name for s in named] == ["orders", "returns"]
    assert pair("rate_agg__add_filter_upstream__100065").a.sources == ("rate-micro-batch",)


# -- warnings: restarts that succeed but do not do what the code says -----------------------------


@pytest.mark.parametrize(
    ("case_id", "before", "after"),
    [
        ("agg_user_sum__change_shuffle_partitions__100005", 3, 5),
        ("dedup_within_watermark__change_shuffle_partitions__100033", 2, 4),
        ("join_left_outer__change_shuffle_partitions__100045", 3, 5),
    ],
)
def test_changed_shuffle_partitions_are_ignored_with_a_warning(
    pair: Callable[[str], Pair], case_id: str, before: int, after: int
) -> None:
    for check in (pair(case_id).from_checkpoint, pair(case_id).from_fingerprint):
        assert check.restorable
        (warning,) = [w for w in check.warnings if w.kind == "state_config"]
        assert f"has {before} partitions" in warning.message
        assert f"asks for {after}, which Spark ignores" in warning.message


@pytest.mark.parametrize(
    ("case_id", "kind", "renamed"),
    [
        ("agg_int_key__count_to_sum_v__100012", "value_schema", "value count -> sum"),
        ("agg_cat_complete__cat_to_user__100009", "key_schema", "key cat -> user"),
        ("dedup_no_watermark__id_to_v__100023", "key_schema", "key id -> v"),
        ("session_window_agg__user_to_cat__100022", "key_schema", "key user -> cat"),
    ],
)
def test_same_typed_state_under_new_names_restarts_but_is_not_safe(
    pair: Callable[[str], Pair], case_id: str, kind: str, renamed: str
) -> None:
    for check in (pair(case_id).from_checkpoint, pair(case_id).from_fingerprint):
        assert check.restorable, _explain(check)
        (warning,) = [w for w in check.warnings if w.kind == kind]
        assert renamed in warning.message and "by position" in warning.message
        assert not check.safe
        assert "the results are wrong" in check.reinterpreted[0].message


def test_renamed_named_source_reads_its_input_again(pair: Callable[[str], Pair]) -> None:
    for check in (
        pair("named_sources_union__rename_source__100050").from_checkpoint,
        pair("named_sources_union__rename_source__100050").from_fingerprint,
    ):
        assert check.restorable
        messages = " ".join(w.message for w in check.warnings)
        assert '"returns" is no longer read' in messages
        assert '"refunds"' in messages and "new to the checkpoint" in messages


def test_renamed_state_variable_starts_empty(pair: Callable[[str], Pair]) -> None:
    check = pair("transform_with_state_pandas__rename_state_variable__100057").from_checkpoint
    assert check.restorable and not check.safe
    (reinterpreted,) = check.reinterpreted
    assert '"cnt" no longer declared' in reinterpreted.message
    assert '"row_count" new (starts empty)' in reinterpreted.message


# -- messages -------------------------------------------------------------------------------------


def test_messages_speak_spark(pair: Callable[[str], Pair]) -> None:
    """Every problem names what Spark raises and how to fix it in PySpark; state problems name
    the state directory; nothing is Flink advice."""
    for case_id in CASES:
        p = pair(case_id)
        for check in (p.from_checkpoint, p.from_fingerprint):
            for problem in check.problems + check.warnings:
                text = problem.message.lower()
                assert not any(w in text for w in ("uid", "savepoint", "allownonrestoredstate"))
            for problem in check.problems:
                assert "Fix:" in problem.message
                if problem.kind != "sources":
                    assert f"state/{problem.state_id}" in problem.message
                    assert "new checkpoint location" in problem.message


def test_key_schema_problem_in_spark_words(pair: Callable[[str], Pair]) -> None:
    check = pair("window_agg__add_grouping_key__100018").from_checkpoint
    (problem,) = check.problems
    assert problem.kind == "key_schema" and problem.state_id == "0"
    assert problem.name == "stateStoreSave"
    assert problem.message.startswith(
        "Spark 4.3 fails the first batch after the restart with "
        "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE"
    )
    assert "3 fields instead of 2 (added user)" in problem.message
    assert 'spark.read.format("statestore")' in problem.message


# -- the cases of the table ----------------------------------------------------------------


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Input batches with matching ids in in0 and in1 (for joins), from the data set."""
    root = tmp_path_factory.mktemp("inputs")
    tarball = DATA / CASES["join_inner__add_filter_upstream__100041"]["inputs"]
    with tarfile.open(tarball, "r:gz") as tar:
        tar.extractall(root, filter="data")
    return root


@dataclass(frozen=True)
class Judged:
    outcome: Outcome
    from_checkpoint: RestoreCheck
    from_fingerprint: RestoreCheck


def _restart(
    spark: Any,
    tmp_path: Path,
    inputs: Path,
    before: Callable[[Any, dict[str, str]], Any],
    after: Callable[[Any, dict[str, str]], Any],
    output_mode: str,
) -> Judged:
    checkpoint, a, b, outcome = restart(spark, tmp_path / "run", before, after, inputs, output_mode)
    return Judged(
        outcome,
        pytest_opid.check_restore(checkpoint, b),
        pytest_opid.check_restore(pytest_opid.fingerprint(a), b),
    )


def _windowed(with_max: bool) -> Callable[[Any, dict[str, str]], Any]:
    def query(session: Any, paths: dict[str, str]) -> Any:
        from pyspark.sql import functions as F

        events = session.readStream.schema(SCHEMA).json(paths["in0"])
        aggregates = [F.count("*").alias("n"), F.sum("v").alias("sum_v")]
        if with_max:
            aggregates.append(F.max("ts").alias("last_ts"))
        return (
            events.withWatermark("ts", "10 minutes")
            .groupBy(F.window("ts", "5 minutes"), "cat")
            .agg(*aggregates)
        )

    return query


def test_windowed_aggregation_gains_max_ts(spark, tmp_path, inputs) -> None:
    judged = _restart(spark, tmp_path, inputs, _windowed(False), _windowed(True), "append")
    assert not judged.outcome.restarted
    assert judged.outcome.error_class == "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE"
    for check in (judged.from_checkpoint, judged.from_fingerprint):
        assert not check.restorable
        assert check.problems[0].kind == "value_schema", _explain(check)
        assert "3 fields instead of 2 (added max)" in check.problems[0].message


def _pandas_state(fields: int) -> Callable[[Any, dict[str, str]], Any]:
    def query(session: Any, paths: dict[str, str]) -> Any:
        import pandas as pd
        from pyspark.sql.streaming.state import GroupStateTimeout

        def running_total(key: Any, pdfs: Any, state: Any) -> Any:
            total = state.get[0] if state.exists else 0
            for pdf in pdfs:
                total += int(pdf["v"].sum())
            state.update((total,) if fields == 1 else (total, 0))
            yield pd.DataFrame({"user": [key[0]], "total": [total]})

        state_schema = "total long" if fields == 1 else "total long, seen long"
        return (
            session.readStream.schema(SCHEMA)
            .json(paths["in0"])
            .groupBy("user")
            .applyInPandasWithState(
                running_total,
                "user string, total long",
                state_schema,
                "Update",
                GroupStateTimeout.NoTimeout,
            )
        )

    return query


def test_apply_in_pandas_with_state_state_gains_a_field(spark, tmp_path, inputs, pair) -> None:
    judged = _restart(spark, tmp_path, inputs, _pandas_state(1), _pandas_state(2), "update")
    assert judged.outcome.error_class == "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE"
    for check in (judged.from_checkpoint, judged.from_fingerprint):
        assert not check.restorable and check.problems[0].kind == "value_schema"
        assert "group state" in check.problems[0].message
    # and in the data: its state field changes type (long -> double)
    data = pair("apply_in_pandas_with_state__change_state_field_type__100052")
    for check in (data.from_checkpoint, data.from_fingerprint):
        assert check.problems[0].kind == "value_schema"


def _join(swapped: bool) -> Callable[[Any, dict[str, str]], Any]:
    def query(session: Any, paths: dict[str, str]) -> Any:
        from pyspark.sql import functions as F

        impressions = (
            session.readStream.schema(SCHEMA)
            .json(paths["in0"])
            .select(F.col("id").alias("imp_id"), "user", F.col("ts").alias("imp_ts"))
            .withWatermark("imp_ts", "10 minutes")
        )
        clicks = (
            session.readStream.schema(SCHEMA)
            .json(paths["in1"])
            .select(F.col("id").alias("click_id"), "amount", F.col("ts").alias("click_ts"))
            .withWatermark("click_ts", "10 minutes")
        )
        condition = F.expr(
            "click_id = imp_id AND click_ts >= imp_ts AND click_ts <= imp_ts + interval 5 minutes"
        )
        if swapped:
            return clicks.join(impressions, condition)
        return impressions.join(clicks, condition)

    return query


def test_swapping_the_sides_of_a_stream_stream_join(spark, tmp_path, inputs) -> None:
    judged = _restart(spark, tmp_path, inputs, _join(False), _join(True), "append")
    assert not judged.outcome.restarted
    assert _agrees(judged.from_checkpoint, _spark(judged.outcome)), _explain(judged.from_checkpoint)
    assert judged.outcome.error_class == "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE"
    assert "left-keyWithIndexToValue" in judged.from_checkpoint.problems[0].message
    # From A's fingerprint: the sources swapped places too (a warning: it depends on the last
    # batch); the value schema problem is Spark's own refusal.
    kinds = [p.kind for p in judged.from_fingerprint.problems]
    assert not judged.from_fingerprint.restorable and "value_schema" in kinds


def test_drop_duplicates_added_on_one_input_of_a_join(pair) -> None:
    p = pair("join_inner__add_dedup_before_join__100042")
    for check in (p.from_checkpoint, p.from_fingerprint):
        (problem,) = check.problems
        assert problem.kind == "state_operators"
        assert "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA" in problem.message
        assert "state/1: new dedupe" in problem.message


def _aggregation(repartition: bool) -> Callable[[Any, dict[str, str]], Any]:
    def query(session: Any, paths: dict[str, str]) -> Any:
        from pyspark.sql import functions as F

        events = session.readStream.schema(SCHEMA).json(paths["in0"])
        if repartition:
            events = events.repartition(8)
        return events.groupBy("user").agg(F.sum("v").alias("total_v"))

    return query


def test_repartition_upstream_restarts(spark, tmp_path, inputs) -> None:
    judged = _restart(spark, tmp_path, inputs, _aggregation(False), _aggregation(True), "update")
    assert judged.outcome.restarted, judged.outcome.message
    for check in (judged.from_checkpoint, judged.from_fingerprint):
        # From the checkpoint, only the note of what a checkpoint cannot show (the inputs of
        # the aggregates) remains.
        noted = [w for w in check.warnings if "were not checked" not in w.message]
        assert check.restorable and check.safe is not False and not noted, _explain(check)
        # the aggregates' inputs are in no checkpoint: not verified there, never "safe"
        assert check.safe is (True if check.meaning_verified else None), _explain(check)
    assert judged.from_fingerprint.safe is True


def _int_key(as_long: bool) -> Callable[[Any, dict[str, str]], Any]:
    def query(session: Any, paths: dict[str, str]) -> Any:
        from pyspark.sql import functions as F

        key = F.col("k").cast("long").alias("k") if as_long else F.col("k")
        events = session.readStream.schema(SCHEMA).json(paths["in0"])
        return events.groupBy(key).agg(F.count("*").alias("n"))

    return query


def test_grouping_key_int_to_long(spark, tmp_path, inputs) -> None:
    judged = _restart(spark, tmp_path, inputs, _int_key(False), _int_key(True), "update")
    assert judged.outcome.error_class == "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE"
    for check in (judged.from_checkpoint, judged.from_fingerprint):
        (problem,) = check.problems
        assert problem.kind == "key_schema"
        # Spark names a cast grouping column _groupingexpression in the state key
        assert "The key (the grouping key) was struct<k: int> and is now struct<" in (
            problem.message
        )
        assert "field 1 (k, now _groupingexpression) was int, is now bigint" in problem.message


def _stateless_then_counting(counting: bool) -> Callable[[Any, dict[str, str]], Any]:
    def query(session: Any, paths: dict[str, str]) -> Any:
        events = session.readStream.schema(SCHEMA).json(paths["in0"])
        return events.groupBy("user").count() if counting else events.select("id", "user")

    return query


def test_stateless_query_gains_a_stateful_operator(spark, tmp_path, inputs) -> None:
    judged = _restart(
        spark,
        tmp_path,
        inputs,
        _stateless_then_counting(False),
        _stateless_then_counting(True),
        "update",
    )
    assert judged.outcome.error_class == "STREAMING_STATEFUL_OPERATOR_MISSING_STATE_DIRECTORY"
    for check in (judged.from_checkpoint, judged.from_fingerprint):
        (problem,) = check.problems
        assert problem.kind == "state_operators"
        assert "STREAMING_STATEFUL_OPERATOR_MISSING_STATE_DIRECTORY" in problem.message


def _spark(outcome: Outcome) -> dict[str, Any]:
    return {"restarted": outcome.restarted, "error_class": outcome.error_class}


# -- the API -------------------------------------------------------------------------------------


def test_a_batch_dataframe_does_not_restart_on_a_checkpoint(spark, pair) -> None:
    p = pair("agg_user_sum__add_aggregate__100001")
    batch = spark.createDataFrame([(1, "a")], "id long, user string").groupBy("user").count()
    with pytest.raises(DocumentError, match=r"batch \(non-streaming\) DataFrame"):
        pytest_opid.check_restore(p.folder / "checkpoint", batch)
    with pytest.raises(DocumentError, match="batch"):
        check_checkpoint(read_checkpoint(p.folder / "checkpoint"), pytest_opid.fingerprint(batch))


@pytest.mark.parametrize(
    "case_id", ["agg_user_sum__add_aggregate__100001", "union_agg__swap_source_order__100046"]
)
def test_a_dataframe_is_judged_by_its_fingerprint(spark, pair, case_id) -> None:
    p = pair(case_id)
    b = build(spark, CASES[case_id], "after", p.folder)
    assert pytest_opid.check_restore(p.folder / "checkpoint", b) == p.from_checkpoint
    assert pytest_opid.check_restore(p.a, b) == p.from_fingerprint


def test_a_saved_fingerprint_judges_as_the_live_one(spark, pair) -> None:
    case_id = "agg_user_sum__add_aggregate__100001"
    p = pair(case_id)
    new = pytest_opid.fingerprint(build(spark, CASES[case_id], "after", p.folder))
    saved = Fingerprint.from_dict(json.loads(p.a.to_json()))
    snapshot = loads(dumps(p.a))
    rules = engine_rules("spark")
    for old in (saved, snapshot):
        assert rules.check_restore(old, new, False) == p.from_fingerprint
        assert rules.check_restore(old, new, True) == p.from_fingerprint  # a Flink-only flag


# -- Spark's rules, unit by unit ----------------------------------------------------------------


def _struct(*fields: tuple[str, Any, bool]) -> dict[str, Any]:
    return {
        "type": "struct",
        "fields": [{"name": n, "type": t, "nullable": nl, "metadata": {}} for n, t, nl in fields],
    }


def test_the_schema_rule() -> None:
    stored = _struct(("user", "string", True), ("n", "long", False))
    assert schema_compatible(_struct(("u", "string", True), ("count", "long", False)), stored)
    assert schema_compatible(_struct(("user", "string", False), ("n", "long", False)), stored)
    assert not schema_compatible(_struct(("user", "string", True), ("n", "long", True)), stored)
    assert not schema_compatible(_struct(("user", "string", True)), stored)
    assert not schema_compatible(_struct(("user", "string", True), ("n", "integer", False)), stored)
    nested = _struct(("a", {"type": "array", "elementType": "long", "containsNull": False}, True))
    wider = _struct(("a", {"type": "array", "elementType": "long", "containsNull": True}, True))
    assert schema_compatible(nested, wider) and not schema_compatible(wider, nested)


def test_sources_as_recorded() -> None:
    named = parse_source("@orders FileSource json file:/data/my orders")
    assert (named.name, named.kind, named.fmt, named.path) == (
        "orders",
        "FileSource",
        "json",
        "file:/data/my orders",
    )
    assert parse_source("rate-micro-batch").kind == "rate-micro-batch"


# -- state meaning: restarts Spark accepts that read the old state as something else ---------------

#: Refactoring kinds of the data set whose restart feeds A's state to B under another definition
#: (issue 18): Spark restarts, and the results are wrong.
MEANING_CHANGES = {
    "change_grouping_key_same_type",
    "change_grouping_key_expression_same_type",
    "change_aggregate_function_same_type",
    "tumbling_to_sliding_window",
    "change_dedup_column_same_type",
    "rename_state_variable",
}
#: From the checkpoint alone these cannot be seen: it records the state's field names and
#: types, not the expression that computes a key or the window's durations. (k -> (k % 2) AS k
#: is seen: Spark names a computed grouping key _groupingexpression in the state's key schema,
#: where the checkpoint has k.) The verdict is "restorable, meaning not verified", naming what
#: was not checked and how to check it (the snapshot route sees them).
CHECKPOINT_CANNOT_SEE = {
    "rate_agg__change_grouping_key_expression_same_type__100063",  # value % 5 -> value % 7
    "window_agg__tumbling_to_sliding_window__100016",  # window(ts, 5 min) -> (10 min, 5 min)
}
RESTARTED = sorted(c for c, rec in CASES.items() if rec["spark"]["restarted"])


@pytest.mark.parametrize("case_id", RESTARTED)
def test_state_meaning_from_the_fingerprint(pair: Callable[[str], Pair], case_id: str) -> None:
    check = pair(case_id).from_fingerprint
    unsafe = CASES[case_id]["case"]["refactor_kind"] in MEANING_CHANGES
    assert check.restorable, _explain(check)
    assert check.safe is not unsafe, _explain(check)
    assert bool(check.reinterpreted) is unsafe
    assert check.to_dict()["safe"] is check.safe


@pytest.mark.parametrize("case_id", RESTARTED)
def test_state_meaning_from_the_checkpoint(pair: Callable[[str], Pair], case_id: str) -> None:
    check = pair(case_id).from_checkpoint
    unsafe = CASES[case_id]["case"]["refactor_kind"] in MEANING_CHANGES
    assert check.restorable, _explain(check)
    if case_id in CHECKPOINT_CANNOT_SEE:
        # restorable, meaning not verified: what and how to check it, never plain "safe"
        assert check.safe is None and not check.meaning_verified, _explain(check)
        assert all("--previous-fingerprint" in u.message for u in check.unverified)
        return
    if check.safe is False and check.restorable:  # shown, whatever else it could not tell
        assert check.reinterpreted and unsafe, _explain(check)
    else:
        assert check.safe is ((not unsafe) if check.meaning_verified else None), _explain(check)


def test_refused_restarts_are_neither_restorable_nor_safe(pair: Callable[[str], Pair]) -> None:
    for case_id, rec in CASES.items():
        if not rec["spark"]["restarted"] and case_id.startswith(("agg_", "global_", "window_")):
            check = pair(case_id).from_fingerprint
            assert not check.restorable and check.safe is False
