"""The document's fast path (msgspec, from bytes) reads exactly what the precise path reads.

``decode_document`` either returns the same topology as ``topology_from_document`` over the
strictly parsed JSON, raises the same structural error, or declines (``None``) so that the
precise path names the fault. Every case here is checked against the precise path itself, so
a difference in either direction fails.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from pytest_opid import fingerprint
from pytest_opid.errors import OpidError
from pytest_opid.flink.document import decode_document, topology_from_document
from pytest_opid.io.json import parse_json
from tests.core.test_errors import CASES as BAD_CASES

DATA = Path(__file__).resolve().parents[1] / "data"


def precise(raw: bytes):
    """(topology, None) or (None, (error type, message)) from the precise path."""
    try:
        return topology_from_document(parse_json(raw.decode("utf-8"), "x")), None
    except (OpidError, UnicodeDecodeError) as exc:
        return None, (type(exc), str(exc))


def fast(raw: bytes):
    try:
        return decode_document(raw), None
    except OpidError as exc:
        return None, (type(exc), str(exc))


def agree(raw: bytes) -> bool:
    """True where the fast path vouched for the input (and agrees); False where it declined."""
    topology, error = fast(raw)
    expected, expected_error = precise(raw)
    if error is not None:
        assert error == expected_error
        return True
    if topology is None:
        return False
    assert expected_error is None, expected_error
    assert topology == expected
    return True


def golden_documents() -> list[dict]:
    with (DATA / "cases.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line)["topology"] for line in f]


def test_every_golden_document_is_read_alike_on_both_paths() -> None:
    documents = golden_documents()
    assert len(documents) == 290
    for document in documents:
        assert agree(json.dumps(document).encode())


def test_the_large_golden_document_is_read_alike() -> None:
    with gzip.open(DATA / "large_10k.jsonl.gz", "rt", encoding="utf-8") as f:
        document = json.loads(f.readline())["topology"]
    assert agree(json.dumps(document, indent=2).encode())


def test_documents_that_omit_keys_or_give_state_are_read_alike() -> None:
    for document in golden_documents()[:40]:
        for i, node in enumerate(document["nodes"]):
            if i % 3 == 0:
                node["state"] = i % 2 == 0
            for key in ("yielding", "uid_hash", "source")[: i % 4]:
                node.pop(key, None)
        for i, edge in enumerate(document["edges"]):
            if i % 2:
                edge.pop("exchange_mode")
        for key in ("runtime_mode", "chaining_enabled"):
            document.pop(key, None)
        assert agree(json.dumps(document).encode())


def node(i: int, **kw) -> dict:
    return {"id": i, "name": f"n{i}", **kw}


PLAIN = {"nodes": [node(1), node(2, name="b: c")], "edges": [{"source": 1, "target": 2}]}


@pytest.mark.parametrize(
    ("text", "vouched"),
    [
        (json.dumps(PLAIN), True),
        # Colons and escaped quotes inside strings are not keys.
        ('{"nodes": [{"id": 1, "name": "say \\"a\\": b:c", "uid": "u:1"}], "edges": []}', True),
        # Whitespace before a colon.
        ('{"nodes" : [{"id" :1, "name"\n:"a"}], "edges"\t: []}', True),
        # A repeated key: msgspec keeps the last, the precise path names it.
        ('{"nodes": [{"id": 1, "name": "a", "name": "b"}], "edges": []}', False),
        ('{"nodes": [{"id": 1, "name": "a"}], "edges": [], "edges": []}', False),
        ('{"nodes": [{"id": 1, "name": "a", "parallelism": 2, "parallelism": 2}], "edges": []}',
         False),
        # "state" is counted by its value: true or false on the fast path, an explicit null
        # (the default) on the precise one.
        ('{"nodes": [{"id": 1, "name": "a", "state": true}], "edges": []}', True),
        ('{"nodes": [{"id": 1, "name": "a", "state": false, "state": false}], "edges": []}',
         False),
        # null is "unknown", as an absent key is: read in C, like every other default.
        ('{"nodes": [{"id": 1, "name": "a", "state": null}], "edges": []}', True),
        # A colon written as an escape would hide a repeated key from the count.
        ('{"nodes": [{"id": 1, "name": "a\\u003a", "name": "b"}], "edges": []}', False),
        ('{"nodes": [{"id": 1, "name": "a\\u003A"}], "edges": []}', False),
        # Numbers msgspec does not take in the model's type, read on the precise path.
        ('{"nodes": [{"id": 99999999999999999999, "name": "a"}], "edges": []}', False),
        ('{"version": 1.0, "nodes": [{"id": 1, "name": "a"}], "edges": []}', False),
        ('{"nodes": [{"id": 1, "name": "a", "parallelism": NaN}], "edges": []}', False),
        # Text that is not text.
        ('{"nodes": [{"id": 1, "name": "\\ud800"}], "edges": []}', False),
        ('{"nodes": [{"id": 1, "name": "a", "uid_hash": "' + "a" * 32 + '\\n"}], "edges": []}',
         False),
        ("\ufeff" + json.dumps(PLAIN), False),
    ],
)  # fmt: skip
def test_odd_but_valid_or_invalid_json(text: str, vouched: bool) -> None:
    assert agree(text.encode("utf-8")) is vouched


def test_bytes_that_are_not_utf8_are_declined() -> None:
    raw = json.dumps(PLAIN).encode().replace(b"n1", b"n\xff")
    assert decode_document(raw) is None


@pytest.mark.parametrize("content", [c[1] for c in BAD_CASES], ids=[c[0] for c in BAD_CASES])
def test_every_bad_document_gets_the_precise_message(tmp_path, content) -> None:
    text = content if isinstance(content, str) else json.dumps(content)
    raw = text.encode("utf-8")
    topology, error = fast(raw)
    assert topology is None
    if error is not None:  # structural errors come from the fast path itself
        assert error == precise(raw)[1]
    # Through a file, the error is the one the precise path gives, naming the file.
    path = tmp_path / "doc.json"
    path.write_bytes(raw)
    with pytest.raises(OpidError) as raised:
        fingerprint(str(path))
    assert str(raised.value).startswith(f"{path}: ")


def test_a_file_is_fingerprinted_alike_on_both_paths(tmp_path) -> None:
    document = golden_documents()[7]
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    assert fingerprint(str(path)) == fingerprint(document)


def test_threads_decoding_at_once_count_their_own_defaults() -> None:
    """The count of left-out keys is shared state (the defaults' sources): documents decoded
    in several threads at once must each get the verdict they get alone."""
    from concurrent.futures import ThreadPoolExecutor

    sparse = json.dumps({"nodes": [{"id": i, "name": "n"} for i in range(2_000)], "edges": []})
    repeated = sparse.replace('"name": "n"}', '"name": "n", "name": "m"}', 1)
    inputs = [sparse.encode(), repeated.encode()] * 20
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(decode_document, inputs))
    assert all(r is not None and len(r.operators) == 2_000 for r in results[::2])
    assert all(r is None for r in results[1::2])  # the repeated key, declined every time
