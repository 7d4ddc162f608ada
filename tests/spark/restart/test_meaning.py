"""spark.restart.meaning: which changes of a stateful operator's meaning make a restart unsafe
(pure Python: the facts as spark.query.meaning records them; the real restarts are in
test_restart_data.py and test_meaning_restarts.py)."""

from __future__ import annotations

import json

import pytest

from pytest_opid.spark.restart.checkpoint_meaning import checkpoint_meaning, plain_column
from pytest_opid.spark.restart.meaning import compare_meaning

AGG = (
    ("key 1", "cat: string"),
    ("key 2", "country: string"),
    ("aggregate 1", "sum(v): bigint"),
    ("aggregate 2", "count(1): bigint"),
    ("output mode", "update"),
)


def _with(facts, **changes):
    names = {k.replace("_", " "): v for k, v in changes.items()}
    return tuple((f, names.get(f, v)) for f, v in facts)


def _changes(old, new, operator="stateStoreSave"):
    return compare_meaning(0, operator, old, new, "the snapshot")


def test_the_same_meaning_is_no_change() -> None:
    assert _changes(AGG, AGG) == []


@pytest.mark.parametrize(
    ("new", "kind", "words"),
    [
        (_with(AGG, key_1="user: string"), "key_meaning", "key 1 was cat: string, is now user"),
        (_with(AGG, key_1="country: string", key_2="cat: string"), "key_meaning", "another order"),
        (_with(AGG, aggregate_1="max(v): bigint"), "aggregate_meaning", "sum(v) so far"),
        (
            _with(AGG, aggregate_1="count(1): bigint", aggregate_2="sum(v): bigint"),
            "aggregate_meaning",
            "another order",
        ),
        (_with(AGG, aggregate_1="sum(cast(k as bigint)): bigint"), "aggregate_meaning", "sum(v)"),
    ],
)
def test_same_typed_changes_reinterpret_the_state(new, kind: str, words: str) -> None:
    (change,) = _changes(AGG, new)
    assert change.reinterprets and change.kind == kind
    assert words in change.message and "Spark restarts" in change.message


def test_a_window_change_says_the_windows_mix() -> None:
    old = (("key 1", "tumbling window(ts, 5 minutes)"), ("key 2", "cat: string"))
    new = (("key 1", "tumbling window(ts, 10 minutes)"), ("key 2", "cat: string"))
    (change,) = _changes(old, new)
    assert change.reinterprets and change.kind == "window_meaning"
    assert "A's windows (tumbling window(ts, 5 minutes)) stay in the state" in change.message


def test_a_deduplication_column_change_says_which_rows_pass_or_drop() -> None:
    (change,) = _changes((("key 1", "id: bigint"),), (("key 1", "v: bigint"),), "dedupe")
    assert change.reinterprets
    assert "duplicates by v seen before the restart pass again" in change.message


def test_swapped_join_sides_reinterpret_the_buffers() -> None:
    old = (("left input", "FileSource[…/clicks]"), ("right input", "FileSource[…/views]"))
    new = (("left input", "FileSource[…/views]"), ("right input", "FileSource[…/clicks]"))
    (change,) = _changes(old, new, "symmetricHashJoin")
    assert change.reinterprets and change.kind == "join_meaning"


def test_a_session_gap_change_reinterprets() -> None:
    old = (("session window", "session_window(ts, gap 5 minutes)"),)
    new = (("session window", "session_window(ts, gap 10 minutes)"),)
    (change,) = _changes(old, new, "sessionWindowStateStoreSaveExec")
    assert change.reinterprets and change.kind == "window_meaning"


def test_state_fields_reordered_reinterpret_renamed_do_not() -> None:
    old = (("state schema", "struct<count: bigint, total: bigint>"),)
    swapped = (("state schema", "struct<total: bigint, count: bigint>"),)
    renamed = (("state schema", "struct<n: bigint, total: bigint>"),)
    (change,) = _changes(old, swapped, "applyInPandasWithState")
    assert change.reinterprets
    assert _changes(old, renamed, "applyInPandasWithState") == []


@pytest.mark.parametrize(
    "fact", ["output mode", "watermark", "join type", "join condition", "function", "timeout"]
)
def test_what_does_not_change_the_meaning_of_old_state_is_a_warning(fact: str) -> None:
    (change,) = _changes(((fact, "a"),), ((fact, "b"),))
    assert not change.reinterprets and "Spark restarts on the old state" in change.message


def test_unknown_facts_are_never_guessed() -> None:
    assert _changes((("output mode", "?"),), (("output mode", "update"),)) == []
    (change,) = _changes((("key 1", "?"),), (("key 1", "user: string"),))
    assert not change.reinterprets and "not compared" in change.message


def test_a_snapshot_without_meaning_says_so_once() -> None:
    (change,) = _changes((), AGG)
    assert not change.reinterprets and "records no state meaning" in change.message
    assert _changes(AGG, ()) == []


def _schema(*names: str) -> str:
    fields = [{"name": n, "type": "string", "nullable": True, "metadata": {}} for n in names]
    return json.dumps({"type": "struct", "fields": fields})


def test_from_a_checkpoint_a_renamed_column_is_the_same_key() -> None:
    stored = {"default": (_schema("user"), _schema("sum"))}
    new = {"default": (_schema("u"), _schema("sum"))}
    facts = (("key 1", "user: string"), ("aggregate 1", "sum(v): bigint"))
    (unchecked,) = checkpoint_meaning(0, "stateStoreSave", stored, new, facts)
    assert not unchecked.reinterprets  # only: the aggregates' inputs were not checked
    assert not unchecked.verified
    assert "not verified: the aggregates' input columns (now sum(v))" in unchecked.message
    assert "--previous-fingerprint OLD.json" in unchecked.message


def test_from_a_checkpoint_count_star_reads_no_column() -> None:
    """count(*) (Spark's count(1)) has no input a checkpoint could hide: nothing unverified."""
    stored = {"default": (_schema("user"), _schema("count"))}
    facts = (("key 1", "user: string"), ("aggregate 1", "count(1): bigint"))
    assert checkpoint_meaning(0, "stateStoreSave", stored, stored, facts) == []


def test_from_a_checkpoint_another_column_reinterprets() -> None:
    stored = {"default": (_schema("cat"), _schema("sum"))}
    new = {"default": (_schema("user"), _schema("sum"))}
    facts = (("key 1", "user: string"), ("aggregate 1", "sum(v): bigint"))
    change, unchecked = checkpoint_meaning(0, "stateStoreSave", stored, new, facts)
    assert change.reinterprets and "keyed by cat" in change.message
    assert not unchecked.reinterprets


def test_from_a_checkpoint_an_expression_under_the_same_name_is_not_checked() -> None:
    stored = {"default": (_schema("_groupingexpression"), _schema("sum"))}
    new = {"default": (_schema("_groupingexpression"), _schema("sum"))}
    facts = (("key 1", "(value % 7): bigint"), ("aggregate 1", "sum(v): bigint"))
    changes = checkpoint_meaning(0, "stateStoreSave", stored, new, facts)
    assert not any(c.reinterprets for c in changes)
    assert not changes[0].verified
    assert "key 1 _groupingexpression (now (value % 7)) is computed" in changes[0].message


def test_from_a_checkpoint_a_changed_aggregate_function_reinterprets() -> None:
    stored = {"default": (_schema("k"), _schema("count", "sum"))}
    new = {"default": (_schema("k"), _schema("sum", "sum"))}
    facts = (("key 1", "k: int"), ("aggregate 1", "sum(v): bigint"))
    change, _ = checkpoint_meaning(0, "stateStoreSave", stored, new, facts)
    assert change.reinterprets and change.kind == "aggregate_meaning"
    assert "buffer field 1 was count, is now sum" in change.message


def test_plain_column() -> None:
    assert plain_column("user: string") == "user"
    assert plain_column("(k % 2): int") is None


def _join_stores(left: tuple[str, ...], right: tuple[str, ...]) -> dict:
    return {
        "left-keyWithIndexToValue": (_schema("field0"), _schema(*left)),
        "right-keyWithIndexToValue": (_schema("field0"), _schema(*right)),
    }


def test_from_a_checkpoint_swapped_join_sides_reinterpret() -> None:
    clicks, views = ("click_id", "click_ts"), ("view_id", "view_ts")
    facts = (("left key 1", "id: bigint"), ("right key 1", "id: bigint"))
    changes = checkpoint_meaning(
        0, "symmetricHashJoin", _join_stores(clicks, views), _join_stores(views, clicks), facts
    )
    assert changes[0].reinterprets and changes[0].kind == "join_meaning"
    assert "join keys" in changes[1].message and not changes[1].reinterprets
    same = checkpoint_meaning(
        0, "symmetricHashJoin", _join_stores(clicks, views), _join_stores(clicks, views), facts
    )
    assert not any(c.reinterprets for c in same)


def test_from_a_checkpoint_reordered_group_state_fields_reinterpret() -> None:
    def value(*names: str) -> str:
        inner = json.loads(_schema(*names))
        outer = {
            "type": "struct",
            "fields": [
                {"name": "groupState", "type": inner, "nullable": True, "metadata": {}},
                {"name": "timeoutTimestamp", "type": "long", "nullable": False, "metadata": {}},
            ],
        }
        return json.dumps(outer)

    key = _schema("user")
    (change,) = checkpoint_meaning(
        0,
        "applyInPandasWithState",
        {"default": (key, value("n", "total"))},
        {"default": (key, value("total", "n"))},
        (("key 1", "user: string"),),
    )
    assert change.reinterprets and "n, total" in change.message
    renamed = checkpoint_meaning(
        0,
        "applyInPandasWithState",
        {"default": (key, value("n", "total"))},
        {"default": (key, value("n", "acc"))},
        (("key 1", "user: string"),),
    )
    assert renamed == []


def test_deep_plans_and_types_are_cut_not_recursed_into() -> None:
    from pytest_opid.spark.query.expressions import MeaningPlan, data_type_text, expression_tree

    nested: object = "long"
    for _ in range(3000):
        nested = {"type": "array", "elementType": nested}
    assert data_type_text(nested).endswith("…" + ">" * 65)  # the one renderer's limit (was 32)
    flat = [{"class": "x.Not", "num-children": 1} for _ in range(5000)]
    flat.append({"class": "x.AttributeReference", "num-children": 0, "name": "a"})
    text = MeaningPlan([]).render(expression_tree(flat))
    assert text.endswith("…") and text.count("NOT") < 300


@pytest.mark.parametrize(
    ("was", "now"),
    [("pythonUDF0: int", "bucket2(k): int"), ("getStructField(s): string", "s.user: string")],
)
def test_a_key_recorded_without_saying_which_is_not_compared(was: str, now: str) -> None:
    # Before Python UDFs and struct fields were written by name, such a key was recorded as
    # pythonUDF0 or getStructField(s): it says nothing of which. Against today's words, a
    # warning.
    old = (("key 1", was), ("aggregate 1", "count(1): bigint"))
    new = (("key 1", now), ("aggregate 1", "count(1): bigint"))
    (change,) = _changes(old, new)
    assert not change.reinterprets
    assert "could not be read on both sides" in change.message
    # Named ones are compared as any keys are.
    other = now.replace("bucket2", "bucket3").replace("user", "cat")
    (change,) = _changes(_with(new, key_1=other), new)
    assert change.reinterprets and change.kind == "key_meaning"
    assert f"key 1 was {other}, is now {now}" in change.message
