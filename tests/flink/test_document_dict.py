"""The document's fast path for a parsed document (a dict): ``convert_document`` reads what
``topology_from_document`` reads, raises the same structural error, or declines (``None``) so
that the precise path names the fault. Every case is checked against the precise path."""

from __future__ import annotations

import enum
import json
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_opid.errors import OpidError
from pytest_opid.flink.document import convert_document, load_document, topology_from_document
from tests.core.test_errors import CASES as BAD_CASES
from tests.core.test_fast_readers import DOCUMENT, edit

from .test_document_fast import PLAIN, golden_documents


def outcome(read: Any, doc: Any) -> Any:
    try:
        return read(doc)
    except OpidError as exc:
        return type(exc), str(exc)


def agree(doc: Any) -> bool:
    """True where the fast path vouched for ``doc`` (and agrees), False where it declined."""
    fast = outcome(convert_document, doc)
    if fast is None:
        return False
    assert fast == outcome(topology_from_document, doc)
    return True


def test_every_golden_document_is_read_alike() -> None:
    documents = golden_documents()
    assert all(agree(document) for document in documents)
    assert len(documents) == 290


def parsed(content: Any) -> Any:
    """A bad case's document as a program would hold it; ``None`` for text that is not JSON."""
    if not isinstance(content, str):
        return content
    try:
        return json.loads(content)
    except (ValueError, RecursionError):
        return None


#: The bad documents there are as Python values (not-JSON texts are the file tests' business).
DICT_CASES = [(name, parsed(c[1])) for name, *c in BAD_CASES if parsed(c[0]) is not None]


@pytest.mark.parametrize("doc", [c[1] for c in DICT_CASES], ids=[c[0] for c in DICT_CASES])
def test_every_bad_document_is_declined_or_gets_the_same_error(doc: Any) -> None:
    if not isinstance(doc, dict):
        doc = {"nodes": doc, "edges": []}
    fast = outcome(convert_document, doc)
    assert not hasattr(fast, "operators")  # never a topology
    if fast is not None:
        assert fast == outcome(topology_from_document, doc)


class Small(enum.IntEnum):
    ONE = 1


def node(i: Any, **kw: Any) -> dict[str, Any]:
    return {"id": i, "name": f"n{i}", **kw}


@pytest.mark.parametrize(
    ("doc", "vouched"),
    [
        (PLAIN, True),
        # Python values JSON has no word for: declined, or read to the same topology.
        ({"nodes": (node(1),), "edges": []}, False),  # a tuple for a list: precise refuses it
        ({"nodes": [node(1)], "edges": ()}, False),
        ({"nodes": [node(1, name="a\ud800")], "edges": []}, False),  # a lone surrogate
        ({"nodes": [node(1, uid="\udfff")], "edges": []}, False),
        ({"nodes": [node(2**70)], "edges": []}, False),  # beyond 64 bits
        ({"nodes": [node(True)], "edges": []}, False),  # a bool is not an id
        ({"nodes": [node(1, parallelism=1.0)], "edges": []}, False),
        ({"nodes": [node(1, parallelism=0)], "edges": []}, False),
        ({"nodes": [node(Small.ONE)], "edges": []}, True),  # an int, as the precise path reads
        ({"nodes": [MappingProxyType(node(1))], "edges": []}, True),  # a mapping, as precise
        ({"nodes": [{**node(1), 7: "x"}], "edges": []}, False),  # a key that is not a string
        ({"nodes": [node(1, chaining_strategy="ALWAYS", state=None)], "edges": []}, True),
        ({"nodes": [], "edges": []}, False),
        ({"nodes": [node(1), node(1)], "edges": []}, True),  # structural: the same error
        ({"version": 1.0, "nodes": [node(1)], "edges": []}, False),
    ],
)  # fmt: skip
def test_python_values(doc: dict[str, Any], vouched: bool) -> None:
    assert agree(doc) is vouched


def test_a_mapping_that_is_not_a_dict_is_read_on_the_precise_path() -> None:
    doc = MappingProxyType(dict(PLAIN))
    assert convert_document(doc) is None
    assert load_document(doc) == topology_from_document(PLAIN)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_an_edited_document_parsed_reads_alike_or_is_declined(data: st.DataObject) -> None:
    try:
        doc = json.loads(edit(data, DOCUMENT))
    except ValueError:
        return
    agree(doc)
