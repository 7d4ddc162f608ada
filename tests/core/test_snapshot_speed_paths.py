"""The fast paths of the snapshot check agree with the precise code they stand in for.

``loads`` reads well-formed text a section at a time and hands anything else to the precise
line-by-line reader; ``dumps`` writes a column at a time; ``compare`` pairs position by position
when both sides list the same state IDs. Each must give exactly what the precise path gives,
and malformed text must still get the precise reader's messages.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_opid import comparison
from pytest_opid.comparison import compare
from pytest_opid.errors import DocumentError
from pytest_opid.flink.compute import compute
from pytest_opid.flink.document import topology_from_document
from pytest_opid.io import snapshot
from pytest_opid.io.snapshot import dumps, loads
from pytest_opid.result import Fingerprint, JobVertex, OperatorFingerprint
from pytest_opid.text import quote, quote_all

DATA = Path(__file__).resolve().parents[1] / "data"
FORMAT1 = sorted((DATA / "snapshots-format1").glob("*.opid"))


@pytest.fixture(scope="module")
def golden() -> Fingerprint:
    with gzip.open(DATA / "large_10k.jsonl.gz", "rt", encoding="utf-8") as f:
        case = json.loads(f.readline())
    return compute(topology_from_document(case["topology"]))


def precise(text: str) -> Fingerprint:
    lines = text.split("\n")
    return snapshot._precise_loads(lines, snapshot._HEADERS[lines[0].strip()], "the snapshot")


def outcome(read, text: str) -> object:
    try:
        return read(text)
    except DocumentError as exc:
        return str(exc)


def test_the_golden_job_takes_the_fast_path_to_the_precise_result(golden):
    text = dumps(golden)
    fast = snapshot._fast_loads(text, 2)
    assert fast is not None
    assert fast == precise(text)
    assert fast.job_vertices == precise(text).job_vertices  # max parallelism, members, nodes
    assert dumps(fast) == text


@pytest.mark.parametrize("path", FORMAT1, ids=lambda p: p.name)
def test_format_1_snapshots_read_alike(path):
    text = path.read_text(encoding="utf-8")
    fast = snapshot._fast_loads(text, 1)
    assert fast is None or fast == precise(text)
    assert loads(text) == precise(text)


def small() -> Fingerprint:
    ops = (
        OperatorFingerprint(1, 'Source: "in" \\ 1', "a" * 32, None, None, 2, "a" * 32, 128, True),
        OperatorFingerprint(2, "Map\u2028\x85", "b" * 32, "c" * 32, "u-2", 2, "a" * 32, -1, None),
        OperatorFingerprint(3, "Sink: é \u202e", "d" * 32, None, 'u "3"', 1, None, -1, False),
    )
    vertices = (
        JobVertex("a" * 32, 'Source: "in" -> Map', 2, (), (1, 2)),
        JobVertex("e" * 32, "empty  chain", 3, ()),
    )
    return Fingerprint(ops, vertices, None, "flink", "batch")


def test_escaped_names_uids_and_details_read_alike():
    text = dumps(small())
    fast = snapshot._fast_loads(text, 2)
    assert fast is not None and fast == precise(text)
    assert [op.uid for op in fast.operators] == [None, "u-2", 'u "3"']
    assert text.replace("\n", "\r\n") and loads(text.replace("\n", "\r\n")) == fast


def reference_table(header, rows):
    """The cell-by-cell layout dumps used before it wrote by columns."""
    head = ("# " + header[0], *header[1:])
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(header))]
    out = []
    for row in [head, *rows]:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
        out.append("  ".join([*cells, row[-1]]).rstrip())
    return out


def test_dumps_writes_every_cell_as_quote_and_ljust_would():
    fp = small()
    number = {v.id: f"v{i}" for i, v in enumerate(fp.job_vertices, 1)}
    operators = reference_table(
        ("vertex", "operator_id", "user_id", "parallelism", "node", "uid", "name"),
        [
            (
                number.get(op.job_vertex or "", "-"),
                op.operator_id,
                op.user_operator_id or "-",
                str(op.parallelism),
                str(op.node),
                "-" if op.uid is None else quote(op.uid),
                quote(op.name),
            )
            for op in fp.operators
        ],
    )
    vertices = reference_table(
        ("vertex", "id", "parallelism", "name"),
        [(number[v.id], v.id, str(v.parallelism), quote(v.name)) for v in fp.job_vertices],
    )
    text = dumps(fp)
    assert "\n".join(["[operators]", *operators, ""]) in text
    assert "\n".join(["[job vertices]", *vertices, ""]) in text
    assert snapshot._table(("a", "b"), []) == reference_table(("a", "b"), [])
    assert quote_all(["a", None, 'x", "y'], "-") == ['"a"', "-", quote('x", "y')]
    assert quote_all([], "-") == [] and quote_all([None], "-") == ["-"]


MALFORMED = [
    ("\nv1 ", "\n  v1 "),  # leading blanks: the precise reader strips them
    ("\nv1 ", "\nv1\t"),  # a tab between cells
    ('"Map"', '"Map'),  # an unterminated string
    ('"Map"', '"Map\\x"'),  # a bad escape
    ('"Map"', '"\\ud800"'),  # an escaped lone surrogate
    ('"Map"', "Map"),  # an unquoted name
    ("5da08a42", "5DA08A42"),  # upper case: precise reads it
    ("[job vertices]", "  [job vertices]"),
    ('"streaming"', '"sideways"'),
    ("[job vertices]", "[sources]"),
    ("[job vertices]", "[state stores]"),
    ("-        2", "-        2x"),
    ("v1  ", "v999  "),  # a vertex that is not listed
    ("# vertex", "vertex"),  # the header comment made a row
    ('"flink"', '"flink" "x"'),
    ('"flink"', '"\\flink"'),  # an escape in [job] (form feed): found by Hypothesis
]


@pytest.mark.parametrize(("old", "new"), MALFORMED)
def test_malformed_text_gets_the_precise_reader_s_message(golden, old, new):
    text = dumps(golden)
    assert old in text
    bad = text.replace(old, new, 1)
    assert outcome(loads, bad) == outcome(precise, bad)
    if isinstance(outcome(precise, bad), str):
        assert snapshot._fast_loads(bad, 2) is None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_edited_text_reads_alike_either_way(data):
    text = dumps(small())
    where = data.draw(st.integers(0, len(text)))
    cut = data.draw(st.integers(0, 3))
    insert = data.draw(st.text(alphabet=' "\\-#[]\n\r\t\x00v0a1éu\u2028', max_size=3))
    edited = text[:where] + insert + text[where + cut :]
    if edited.split("\n")[0].strip() not in snapshot._HEADERS:
        return  # not a snapshot: loads says so before either path runs
    assert outcome(loads, edited) == outcome(precise, edited)


def test_compare_with_the_same_ids_pairs_as_the_general_path(golden, monkeypatch):
    text = dumps(golden)
    old = loads(text)
    renamed = text.replace('"Map"', '"Renamed"', 3)
    moved = text.replace("v264      ", "v1        ", 2)  # chains merge
    for new in (loads(text), loads(renamed), loads(moved), golden):
        fast = compare(old, new)
        monkeypatch.setattr(comparison, "_same_state_ids", lambda a, b: False)
        slow = compare(old, new)
        monkeypatch.undo()
        assert fast == slow
        assert fast.chain_changes == slow.chain_changes
    assert compare(old, loads(moved)).chain_changes
