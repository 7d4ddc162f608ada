"""Random edits of valid texts: each fast reader (msgspec, in C) reads an edited text to the
value the precise reader reads, or declines it so that the precise reader names the fault.

The snapshot reader had the same test while it had a fast path; it found a ``\\f`` escape
the fast path kept as two characters. Here the document and the saved fingerprint get theirs.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_opid import compute
from pytest_opid.errors import OpidError
from pytest_opid.flink.document import decode_document, dump_document, topology_from_document
from pytest_opid.io.json import parse_json
from pytest_opid.model import Edge, Operator, Partitioner, SourceKind, Topology
from pytest_opid.result import Fingerprint

#: What an edit inserts: JSON's punctuation and escapes, digits, keys' letters, a colon (which
#: the repeated-key count reads), non-ASCII and a line separator.
ALPHABET = ' "\\:,{}[]0123456789-.eEntrufalsidmu\u00e9\u2028\ud800'
EDITS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def small_topology() -> Topology:
    operators = [
        Operator(1, "Source: in", 2, source=SourceKind.NEW),
        Operator(2, "Map: a", 2, uid="map:1", stateful=True),
        Operator(3, "Sink", 1, 128, uid_hash="0" * 31 + "a"),
    ]
    edges = [Edge(1, 2), Edge(2, 3, Partitioner.REBALANCE)]
    return Topology(operators, edges)


DOCUMENT = json.dumps(dump_document(small_topology()))
FINGERPRINT = compute(small_topology()).to_json()


def edit(data: st.DataObject, text: str) -> str:
    where = data.draw(st.integers(0, len(text)))
    cut = data.draw(st.integers(0, 3))
    insert = data.draw(st.text(alphabet=ALPHABET, max_size=3))
    return text[:where] + insert + text[where + cut :]


def encoded(text: str) -> bytes | None:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a raw lone surrogate: no file holds it
        return None


@EDITS
@given(st.data())
def test_an_edited_document_reads_alike_or_is_declined(data: st.DataObject) -> None:
    raw = encoded(edit(data, DOCUMENT))
    if raw is None:
        return
    try:
        fast = decode_document(raw)
    except OpidError as exc:  # a structural error (duplicate id, cycle...): the same as precise
        fast_error: str | None = str(exc)
    else:
        fast_error = None
        if fast is None:
            return  # declined: the precise path reads it
    try:
        expected = topology_from_document(parse_json(raw.decode("utf-8"), "x"))
    except OpidError as exc:
        assert fast_error == str(exc)
        return
    assert fast_error is None
    assert fast == expected


@EDITS
@given(st.data())
def test_an_edited_fingerprint_reads_alike_or_is_declined(data: st.DataObject) -> None:
    raw = encoded(edit(data, FINGERPRINT))
    if raw is None:
        return
    fast = Fingerprint.decode_fast(raw)
    if fast is None:
        return
    expected = Fingerprint.from_dict(parse_json(raw.decode("utf-8"), "x"))  # must not raise
    assert fast == expected
    assert fast.edges == expected.edges
