"""Bad input: every way a topology document (or the model itself) can be wrong gets our own
error type and a message naming the culprit, through the Python API and through the CLI
(exit 2, one ``error:`` line, nothing on stdout)."""

from __future__ import annotations

import json

import pytest

from pytest_opid import fingerprint
from pytest_opid.cli import main
from pytest_opid.errors import DocumentError, OpidError, TopologyError
from pytest_opid.flink.document import load_document
from pytest_opid.model import Edge, Operator, Topology


def n(i, **kw):
    return {"id": i, "name": f"n{i}", **kw}


def e(a, b, **kw):
    return {"source": a, "target": b, **kw}


def doc(nodes, edges=(), **top):
    return {"nodes": list(nodes), "edges": list(edges), **top}


# (id, file content: a document or raw text, error type, fragments the message must contain)
CASES = [
    ("cycle", doc([n(1), n(2), n(3)], [e(1, 2), e(2, 3), e(3, 2)]), TopologyError,
     ["cycle", "2 -> 3 -> 2"]),
    ("self-loop", doc([n(1), n(2)], [e(1, 2), e(2, 2)]), TopologyError, ["cycle", "2 -> 2"]),
    ("dangling edge", doc([n(1)], [e(1, 9)]), TopologyError,
     ["edge #0 (1 -> 9)", "operator 9", "does not exist"]),
    ("duplicate node id", doc([n(1), n(1)]), TopologyError, ["duplicate operator id 1"]),
    ("duplicate uid", doc([n(1, uid="dedupe"), n(2, uid="dedupe")], [e(1, 2)]), TopologyError,
     ["duplicate uid 'dedupe'", "1", "2"]),
    ("malformed uid hash", doc([n(1, uid_hash="abc")]), TopologyError,
     ["operator 1", "uid_hash", "32 hex", "'abc'"]),
    ("uid hash of 33 digits", doc([n(1, uid_hash="0" * 33)]), TopologyError,
     ["operator 1", "uid_hash"]),
    ("unknown partitioner", doc([n(1), n(2)], [e(1, 2, partitioner="ROUND_ROBIN")]),
     DocumentError, ["edge #0 (1 -> 2)", "unknown partitioner", "ROUND_ROBIN"]),
    ("lower-case partitioner", doc([n(1), n(2)], [e(1, 2, partitioner="hash")]),
     DocumentError, ["edge #0 (1 -> 2)", "partitioner", "hash"]),
    ("unknown chaining strategy", doc([n(1, chaining_strategy="SOMETIMES")]), DocumentError,
     ["node 1", "chaining_strategy", "SOMETIMES"]),
    ("unknown exchange mode", doc([n(1), n(2)], [e(1, 2, exchange_mode="FAST")]),
     DocumentError, ["edge #0 (1 -> 2)", "exchange_mode", "FAST"]),
    ("unknown source kind", doc([n(1, source="old")]), DocumentError,
     ["node 1", "source", "old"]),
    ("zero parallelism", doc([n(1, parallelism=0)]), TopologyError,
     ["operator 1", "parallelism", "0"]),
    ("parallelism -2", doc([n(1, parallelism=-2)]), TopologyError,
     ["operator 1", "parallelism", "-2"]),
    ("zero max parallelism", doc([n(1, max_parallelism=0)]), TopologyError,
     ["operator 1", "max_parallelism"]),
    ("negative type number", doc([n(1), n(2)], [e(1, 2, type_number=-1)]), TopologyError,
     ["edge #0 (1 -> 2)", "type_number"]),
    ("string id", doc([{"id": "1", "name": "a"}]), DocumentError,
     ["node '1'", "'id' must be an integer", '"1"']),
    ("bool as id", doc([{"id": True, "name": "a"}]), DocumentError,
     ["'id' must be an integer", "true"]),
    ("bool as parallelism", doc([n(1, parallelism=True)]), DocumentError,
     ["node 1", "'parallelism' must be an integer", "true"]),
    ("float parallelism", doc([n(1, parallelism=2.0)]), DocumentError,
     ["node 1", "'parallelism' must be an integer"]),
    ("name not a string", doc([{"id": 1, "name": 5}]), DocumentError,
     ["node 1", "'name' must be a string", "5"]),
    ("uid not a string", doc([n(1, uid=3)]), DocumentError, ["node 1", "'uid' must be a string"]),
    ("yielding not a boolean", doc([n(1, yielding="yes")]), DocumentError,
     ["node 1", "'yielding'", "true or false"]),
    ("edge source a string", doc([n(1), n(2)], [e("1", 2)]), DocumentError,
     ["edge #0", "'source' must be an integer"]),
    ("chaining_enabled not a boolean", doc([], chaining_enabled="no"), DocumentError,
     ["chaining_enabled", "true or false"]),
    ("node without name", doc([{"id": 1}]), DocumentError, ["node 1", "no 'name'"]),
    ("node without id", doc([{"name": "a"}]), DocumentError, ["node #0", "no 'id'"]),
    ("edge without target", doc([n(1)], [{"source": 1}]), DocumentError,
     ["edge #0", "no 'target'"]),
    ("no nodes", {"edges": []}, DocumentError, ["no 'nodes' list"]),
    ("no edges", {"nodes": []}, DocumentError, ["no 'edges' list"]),
    ("no operators", {"nodes": [], "edges": []}, DocumentError, ["no operators"]),
    ("nodes not a list", {"nodes": {}, "edges": []}, DocumentError,
     ["'nodes' must be a list", "an object"]),
    ("unknown node key", doc([n(1, colour="red")]), DocumentError,
     ["node 1", "unknown key 'colour'"]),
    ("unknown edge key", doc([n(1), n(2)], [e(1, 2, weight=3)]), DocumentError,
     ["edge #0 (1 -> 2)", "unknown key 'weight'"]),
    ("unknown top-level key", doc([], extra=1), DocumentError, ["unknown key 'extra'"]),
    ("unsupported version", doc([], version=2), DocumentError, ["version 2"]),
    ("node not an object", doc([1]), DocumentError, ["node #0", "JSON object", "a number"]),
    ("edge not an object", doc([n(1)], ["x"]), DocumentError,
     ["edge #0", "JSON object", "a string"]),
    ("a list", [], DocumentError, ["JSON object", "a list"]),
    ("empty file", "", DocumentError, ["the file is empty"]),
    ("blank file", "  \n\t", DocumentError, ["the file is empty"]),
    ("not JSON", "nodes: [1, 2]", DocumentError, ["not valid JSON", "line 1"]),
    ("truncated JSON", '{"nodes": [', DocumentError, ["not valid JSON"]),
    ("deeply nested JSON", "[" * 100_000 + "]" * 100_000, DocumentError, ["nested too deeply"]),
]  # fmt: skip


def write(tmp_path, content) -> str:
    path = tmp_path / "topology.json"
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_text(json.dumps(content), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(("content", "kind", "fragments"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])  # fmt: skip
def test_bad_documents(tmp_path, content, kind, fragments):
    path = write(tmp_path, content)
    with pytest.raises(kind) as info:
        load_document(path)
    message = str(info.value)
    assert isinstance(info.value, OpidError)
    assert message.startswith(f"{path}: ")
    for fragment in fragments:
        assert fragment in message
    # The same through fingerprint() on the path, and (for objects) on the parsed mapping.
    with pytest.raises(kind) as again:
        fingerprint(path)
    assert str(again.value) == message
    if isinstance(content, dict):
        with pytest.raises(kind) as direct:
            fingerprint(content)
        assert f"{path}: {direct.value}" == message


@pytest.mark.parametrize(("content", "fragments"), [(c[1], c[3]) for c in CASES],
                         ids=[c[0] for c in CASES])  # fmt: skip
def test_bad_documents_through_the_cli(tmp_path, capsys, content, fragments):
    path = write(tmp_path, content)
    for argv in (["fingerprint", path], ["fingerprint", "--json", path]):
        assert main(argv) == 2
        out, err = capsys.readouterr()
        assert out == ""
        assert err.startswith(f"error: {path}: ")
        assert err.count("\n") == 1
        assert "Traceback" not in err
        for fragment in fragments:
            assert fragment in err


def test_cli_missing_file_and_directory(tmp_path, capsys):
    missing = tmp_path / "nope.json"
    assert main(["fingerprint", str(missing)]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"error: {missing}: no such file\n")
    assert main(["fingerprint", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"error: {tmp_path}: cannot read")


def test_cli_binary_file(tmp_path, capsys):
    path = tmp_path / "binary.json"
    path.write_bytes(b"\xff\xfe\x00\x01")
    assert main(["fingerprint", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"error: {path}: cannot read") and err.count("\n") == 1


def test_cli_bad_saved_fingerprint(tmp_path, capsys):
    path = write(tmp_path, {"operators": [], "job_vertices": [{"id": "xyz"}]})
    assert main(["fingerprint", path]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"error: {path}: not a valid saved fingerprint")
    assert "xyz" in err
    path = write(tmp_path, {"nodes": [], "edges": []})
    assert main(["fingerprint", "--format", "fingerprint", path]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "not a valid saved fingerprint: missing key 'operators'" in err


# -- the model itself --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("operators", "edges", "fragments"),
    [
        ([Operator("1", "a")], [], ["operator '1'", "id must be an integer"]),
        ([Operator(True, "a")], [], ["id must be an integer"]),
        ([Operator(1, 5)], [], ["operator 1", "name must be a string", "5"]),
        ([Operator(1, "a", parallelism=True)], [], ["operator 1", "parallelism"]),
        ([Operator(1, "a", parallelism=0)], [], ["operator 1", "parallelism", "0"]),
        ([Operator(1, "a", chaining_strategy="ALWAYS")], [], ["operator 1", "chaining_strategy"]),
        ([Operator(1, "a", source="new")], [], ["operator 1", "source kind"]),
        ([Operator(1, "a"), Operator(2, "b")], [Edge(1, 2, "FORWARD")], ["edge #0", "partitioner"]),
        ([Operator(1, "a")], [Edge(1, "2")], ["edge #0", "operator ids"]),
        ([Operator(1, "a")], [(1, 1)], ["edge #0 is not an Edge"]),
        (["op"], [], ["operator #0 is not an Operator"]),
    ],
)
def test_bad_model_values(operators, edges, fragments):
    with pytest.raises(TopologyError) as info:
        Topology(operators, edges)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_fingerprint_of_something_else_is_a_type_error():
    with pytest.raises(TypeError, match="accepts a Topology"):
        fingerprint(42)
    with pytest.raises(ValueError, match="format must be one of"):
        fingerprint({"nodes": [], "edges": []}, format="yaml")
