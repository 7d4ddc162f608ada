"""The snapshot check's speed paths agree with the plain code they stand in for, and the one
reader reads back what they write.

``dumps`` writes a column at a time; ``compare`` pairs position by position when both sides list
the same state IDs. Each must give exactly what the plain path gives. ``loads`` is one
line-by-line reader (snapshots are small, one per test: the section-at-a-time fast path it had
went, issue 27); malformed text is one :class:`DocumentError` naming the line, never another
exception.
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
from pytest_opid.io.snapshot_format import HEADERS
from pytest_opid.result import Fingerprint, JobVertex, OperatorFingerprint
from pytest_opid.text import quote, quote_all

DATA = Path(__file__).resolve().parents[1] / "data"
FORMAT1 = sorted((DATA / "snapshots-format1").glob("*.opid"))


@pytest.fixture(scope="module")
def golden() -> Fingerprint:
    with gzip.open(DATA / "large_10k.jsonl.gz", "rt", encoding="utf-8") as f:
        case = json.loads(f.readline())
    return compute(topology_from_document(case["topology"]))


def outcome(read, text: str) -> object:
    try:
        return read(text)
    except DocumentError as exc:
        return str(exc)


def test_the_golden_job_reads_back_exactly(golden):
    text = dumps(golden)
    back = loads(text)
    assert back.operators == golden.operators
    assert dumps(back) == text


@pytest.mark.parametrize("path", FORMAT1, ids=lambda p: p.name)
def test_format_1_snapshots_read(path):
    text = path.read_text(encoding="utf-8")
    assert loads(text).operators


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
    back = loads(text)
    assert back.operators == small().operators and dumps(back) == text
    assert [op.uid for op in back.operators] == [None, "u-2", 'u "3"']
    assert loads(text.replace("\n", "\r\n")) == back


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


#: Edits the reader accepts: blanks around and between cells, upper-case IDs.
ACCEPTED = [
    ("\nv1 ", "\n  v1 "),
    ("\nv1 ", "\nv1\t"),
    ("[job vertices]", "  [job vertices]"),
    ("5da08a42", "5DA08A42"),
]


@pytest.mark.parametrize(("old", "new"), ACCEPTED)
def test_harmless_edits_read_as_the_same_job(golden, old, new):
    text = dumps(golden)
    assert old in text
    assert loads(text.replace(old, new, 1)) == loads(text)


MALFORMED = [
    ('"Map"', '"Map'),  # an unterminated string
    ('"Map"', '"Map\\x"'),  # a bad escape
    ('"Map"', '"\\ud800"'),  # an escaped lone surrogate
    ('"Map"', "Map"),  # an unquoted name
    ('"streaming"', '"sideways"'),
    ("[job vertices]", "[sources]"),
    ("[job vertices]", "[state stores]"),
    ("-        2", "-        2x"),
    ("v1  ", "v99999  "),  # a vertex that is not listed
    ("# vertex", "vertex"),  # the header comment made a row
    ('"flink"', '"flink" "x"'),
]


@pytest.mark.parametrize(("old", "new"), MALFORMED)
def test_malformed_text_is_one_line_naming_the_file(golden, old, new):
    text = dumps(golden)
    assert old in text
    with pytest.raises(DocumentError) as info:
        loads(text.replace(old, new, 1), origin="x.opid")
    assert str(info.value).startswith("x.opid") and "\n" not in str(info.value)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_edited_text_reads_or_is_a_document_error(data):
    text = dumps(small())
    where = data.draw(st.integers(0, len(text)))
    cut = data.draw(st.integers(0, 3))
    insert = data.draw(st.text(alphabet=' "\\-#[]\n\r\t\x00v0a1éu\u2028', max_size=3))
    edited = text[:where] + insert + text[where + cut :]
    if edited.split("\n")[0].strip() not in HEADERS:
        return  # not a snapshot: loads says so before either path runs
    result = outcome(loads, edited)  # anything but a DocumentError propagates and fails
    assert isinstance(result, (str, Fingerprint))


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
