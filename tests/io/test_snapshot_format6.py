"""Format 6: a Spark snapshot a reviewer reads line by line, as exact as format 5.

Spark finds state by position (``state/<n>``), so its operator IDs mean nothing to a reviewer and
one harmless filter upstream changes all of them. Format 6 writes them once, on one ``[ids]``
line, marks the stateful operators in ``[operators]``, drops the always-empty user-defined ID
and uid columns and writes a run of indexed state fields (HyperLogLog++'s ``MS[0]`` to
``MS[51]``) as one field. The snapshots of format 5 committed by the previous release
(``tests/data/snapshots-format5``, the examples' own) are the inputs: each must read back through
format 6 to exactly the same fingerprint, compare with its format 5 self as unchanged, and a
changed buffer must still be a changed state schema.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_opid.comparison import Check, compare
from pytest_opid.errors import DocumentError
from pytest_opid.io.snapshot import HEADER, HEADER_IDS_ONCE, dumps, loads
from pytest_opid.result import ChainedOperator, Fingerprint, JobVertex, OperatorFingerprint

FORMAT5 = Path(__file__).resolve().parents[1] / "data" / "snapshots-format5"
HEX = re.compile(r"\b[0-9a-f]{32}\b")


def committed(name: str) -> tuple[str, Fingerprint]:
    text = (FORMAT5 / name).read_text(encoding="utf-8")
    assert text.startswith(HEADER + "\n")
    return text, loads(text)


@pytest.mark.parametrize("name", ["test_page_view_stats.opid", "test_daily_revenue.opid"])
def test_a_format_5_snapshot_reads_back_exactly_through_format_6(name):
    old_text, fp = committed(name)
    text = dumps(fp, ids_once=True)
    assert text.startswith(HEADER_IDS_ONCE + "\n")
    back = loads(text)
    assert back == fp
    assert back.operators == fp.operators and back.job_vertices == fp.job_vertices
    assert dumps(back, ids_once=True) == text
    # The two formats of one job compare as the same job: nothing moved, nothing to judge.
    comparison = compare(loads(old_text), back)
    assert len(comparison.kept) == len(fp.operators)
    assert not (comparison.changed or comparison.added or comparison.orphaned)
    assert not comparison.state_operator_changes and not comparison.breaks(Check.BOTH)


def test_ids_are_on_one_line_and_no_flink_column_is_written():
    _, fp = committed("test_page_view_stats.opid")
    text = dumps(fp, ids_once=True)
    with_ids = [line for line in text.splitlines() if HEX.search(line)]
    assert len(with_ids) == 1 and with_ids[0].startswith("operators ")
    assert len(HEX.findall(with_ids[0])) == len(fp.operators)
    assert "user_id" not in text.replace("hyperLogLogPlusPlus(user_id)", "")
    assert not re.search(r"\buid\b", text)
    assert "[job vertices]" not in text and "[stages]" in text
    # The stateful operators are marked on their own rows, by their state directory.
    rows = dict(re.findall(r'^s\d+\s+\S+\s+(state/\d+)\s+"([^"]+)"$', text, re.M))
    assert rows == {"state/1": "StreamingDeduplicate", "state/0": "StateStoreSave"}


def test_a_batch_job_has_no_state_column():
    _, fp = committed("test_daily_revenue.opid")
    text = dumps(fp, ids_once=True)
    assert "# stage  parallelism  name" in text and "state/" not in text


def test_the_hyperloglog_buffer_is_one_field_and_still_exact():
    old_text, fp = committed("test_page_view_stats.opid")
    assert old_text.count("`MS[") == 52
    text = dumps(fp, ids_once=True)
    assert '0        "default"  value  struct<count: bigint, `MS[0]`..`MS[51]`: bigint>' in text
    assert "`MS[1]`" not in text and len(text.splitlines()) < len(old_text.splitlines()) - 45
    value = json.loads(loads(text).state_operators[0].stores[0].value_schema)
    assert [f["name"] for f in value["fields"]] == ["count", *(f"MS[{i}]" for i in range(52))]


def changed_buffer(fp: Fingerprint, change) -> Fingerprint:
    """``fp`` with state/0's value schema fields changed by ``change`` (a list in place)."""
    state = fp.state_operators[0]
    store = state.stores[0]
    value = json.loads(store.value_schema)
    change(value["fields"])
    schema = json.dumps(value, separators=(",", ":"))
    states = (replace(state, stores=(replace(store, value_schema=schema), *state.stores[1:])),)
    return replace(fp, state_operators=states + fp.state_operators[1:])


@pytest.mark.parametrize(
    ("change", "written", "refused"),
    [
        (lambda f: f.pop(), "`MS[0]`..`MS[50]`: bigint>", True),  # a shorter buffer
        (lambda f: f[8].update(type="integer"), "`MS[0]`..`MS[6]`: bigint, `MS[7]`: int, ", True),
        # Spark 4.3 compares names and nullability loosely: the schema still differs exactly.
        (
            lambda f: f[52].update(nullable=False),
            "`MS[50]`: bigint, `MS[51]`: bigint NOT NULL",
            False,
        ),
        (lambda f: f[20].update(name="MS[x]"), "`MS[18]`: bigint, `MS[x]`: bigint, ", False),
    ],
    ids=["length", "type", "nullability", "name"],
)
def test_a_changed_buffer_is_a_changed_schema(change, written, refused):
    _, fp = committed("test_page_view_stats.opid")
    changed = changed_buffer(fp, change)
    text = dumps(changed, ids_once=True)
    assert written in text.replace("\n                             ", " ")
    back = loads(text)
    assert back == changed and back != fp
    assert back.state_operators[0].stores[0] != fp.state_operators[0].stores[0]
    comparison = compare(loads(dumps(fp, ids_once=True)), back)
    assert comparison.breaks(Check.IDS) is refused  # as Spark compares them at restart
    if refused:
        assert "value schema of state/0" in comparison.rules.explain(comparison, Check.IDS, None)


def flink_like(**changes) -> Fingerprint:
    ops = (
        OperatorFingerprint(1, "Source", "a" * 32, parallelism=2, job_vertex="b" * 32),
        OperatorFingerprint(2, "Map", "b" * 32, parallelism=2, job_vertex="b" * 32),
    )
    ops = tuple(op._replace(**changes) if op.node == 2 else op for op in ops)
    chained = tuple(ChainedOperator(op.operator_id, op.user_operator_id) for op in ops)
    vertex = JobVertex("b" * 32, "Source -> Map", 2, chained, tuple(op.node for op in ops))
    return Fingerprint(ops, (vertex,), None, "spark", "batch")


@pytest.mark.parametrize(
    "changes",
    [{"uid": "map-1"}, {"user_operator_id": "c" * 32}, {"node": 7}],
    ids=["uid", "user-id", "node-order"],
)
def test_what_format_6_cannot_say_is_written_in_format_5(changes):
    fp = flink_like(**changes)
    text = dumps(fp, ids_once=True)
    assert text.startswith(HEADER + "\n") and text == dumps(fp)
    assert loads(text) == fp


def test_a_stage_whose_id_is_not_its_last_operators_is_listed():
    fp = flink_like()
    assert dumps(fp, ids_once=True).count("stages ") == 0
    first = replace(fp, job_vertices=(fp.job_vertices[0]._replace(id="a" * 32),))
    first = replace(first, operators=tuple(o._replace(job_vertex="a" * 32) for o in fp.operators))
    text = dumps(first, ids_once=True)
    assert "\nstages " + "a" * 32 + "\n" in text
    assert loads(text) == first


def test_flink_snapshots_stay_format_5_byte_for_byte():
    text = (
        (Path(__file__).resolve().parents[2] / "examples" / "__snapshots__")
        .joinpath("test_orders_job", "test_orders_job.opid")
        .read_text(encoding="utf-8")
    )
    fp = loads(text)
    assert fp.engine == "flink"
    head = text.split("\n\n", 1)[0].splitlines()[1:]
    preamble = [line[2:] for line in head]
    assert dumps(fp, preamble) == text


def six() -> str:
    return dumps(committed("test_page_view_stats.opid")[1], ids_once=True)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda t: re.sub(r" [0-9a-f]{32}\n\n\[end\]", "\n\n[end]", t),
            "10 operator IDs for the 11",
        ),
        (lambda t: re.sub(r"(operators \S+) ", r"\1x ", t), "is not a 32-digit hex ID"),
        (lambda t: t.replace("[stages]", "[job vertices]"), "[job vertices] does not exist in"),
        (lambda t: t.replace("state/0 ", "state/7 "), "state/7 is not in [state operators]"),
        (lambda t: t.replace("state/0 ", "-       "), "no operator in [operators] is marked"),
        (lambda t: t.replace("state/0 ", "state/1 "), "a second operator marked state/1"),
        (lambda t: t.replace("state/0 ", "state/x "), "the state column must be state/<n> or -"),
        (lambda t: t.replace("`..`MS[51]`", "`..`NS[51]`"), "names X[i] and X[j] of one prefix"),
        (lambda t: t.replace("`MS[0]`..`MS[51]`", "`MS[0]`..`MS[1]`"), "at least 3 fields"),
        (lambda t: t.replace("`MS[51]`", "`MS[999999999]`"), "more than 100000 fields"),
        (lambda t: t.replace("\noperators ", "\nstagez "), "expected an [ids] row of operators"),
        (lambda t: t[: t.index("[ids]")], "it has no [ids] section"),
        (lambda t: t.replace("format 6", "format 5"), "[stages] does not exist in format 5"),
    ],
    ids=[
        "ids-short",
        "ids-not-hex",
        "job-vertices",
        "unknown-state",
        "unmarked-state",
        "marked-twice",
        "bad-mark",
        "run-prefix",
        "run-short",
        "run-huge",
        "ids-row",
        "cut-short",
        "format-5-header",
    ],
)
def test_malformed_format_6_is_one_error_naming_the_fault(edit, message):
    text = edit(six())
    with pytest.raises(DocumentError) as info:
        loads(text, origin="x.opid")
    assert str(info.value).startswith("x.opid") and message in str(info.value)
    assert "\n" not in str(info.value)
