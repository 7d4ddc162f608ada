"""The saved form's fast path (msgspec) against its precise path (``parse_json`` + the reader).

``Fingerprint.to_json`` writes with msgspec and ``Fingerprint.from_json`` decodes with it; both
must behave exactly as the standard-library path did: the same text, the same fingerprint read
back (edges included, which take no part in equality), and for every malformed input the same
message, because the fast path declines (``decode_fast`` gives ``None``) and the precise path
names the fault.
"""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_opid import compute
from pytest_opid.errors import DocumentError
from pytest_opid.flink.document import topology_from_document
from pytest_opid.io.json import parse_json
from pytest_opid.result import (
    ChainedOperator,
    Fingerprint,
    JobVertex,
    OperatorFingerprint,
    StateOperator,
    StateStore,
)

CASES = Path(__file__).resolve().parents[1] / "data" / "cases.jsonl"
ORIGIN = "the JSON text"
HEX_A, HEX_B, HEX_C = "a" * 32, "b" * 32, "c" * 32


def golden_fingerprints(limit: int = 40) -> list[Fingerprint]:
    with CASES.open(encoding="utf-8") as f:
        lines = [line for _, line in zip(range(limit), f, strict=False)]
    return [compute(topology_from_document(json.loads(line)["topology"])) for line in lines]


def spark_style() -> Fingerprint:
    """Stateful operators with stores whose schemas (JSON text) hold colons, sources, edges,
    non-ASCII and escaped characters: everything the saved form can hold."""
    schema = json.dumps({"type": "struct", "fields": [{"name": "k:1", "type": "string"}]})
    ops = (
        OperatorFingerprint(
            0, 'Source: "kafka" [t:1]', HEX_A, None, "src:uid", 2, HEX_A, 128, False
        ),
        OperatorFingerprint(1, "Aggregate é\t\\ \u2028 😀", HEX_B, HEX_C, None, 2, HEX_A, -1, True),
        OperatorFingerprint(5, "Sink", HEX_C, None, None, -1, None, -1, None),
    )
    vertices = (
        JobVertex(
            HEX_A,
            "stage: 0",
            2,
            (ChainedOperator(HEX_A), ChainedOperator(HEX_B, HEX_C)),
            (0, 1),
            128,
        ),
    )
    states = (
        StateOperator(
            0, HEX_B, "stateStoreSave", "aggregate", (StateStore("default", schema, schema),)
        ),
        StateOperator(1, HEX_C, "dedupe", "dedupe", (StateStore("s", None, None),)),
        StateOperator(2, HEX_A, "none", "x", ()),
    )
    edges = ((0, 1, "hash: key"), (1, 5, "forward"))
    sources = ("FileStreamSource[file:/tmp/in0]", "kafka:topic")
    return Fingerprint(ops, vertices, states, "spark", "streaming", sources, edges)


def precise_error(text: str) -> str | None:
    """The message the precise path gives for ``text`` (``None`` if it reads it)."""
    try:
        data = parse_json(text, ORIGIN)
    except DocumentError as exc:
        return str(exc)
    try:
        Fingerprint.from_dict(data)
    except DocumentError as exc:
        return f"{ORIGIN}: {exc}"
    return None


def precise(text: str) -> Fingerprint:
    return Fingerprint.from_dict(parse_json(text, ORIGIN))


def same(a: Fingerprint, b: Fingerprint) -> None:
    assert a == b
    assert a.edges == b.edges
    assert [type(x) for x in a.operators] == [type(x) for x in b.operators]


def old_to_json(fp: Fingerprint) -> str:
    """What ``to_json`` wrote before msgspec: the standard library's layout."""
    return json.dumps(fp.to_dict(), indent=2, ensure_ascii=False)


@pytest.mark.parametrize("fp", [*golden_fingerprints(), spark_style()])
def test_fast_path_reads_what_the_precise_path_reads(fp: Fingerprint) -> None:
    text = fp.to_json()
    assert text == old_to_json(fp)
    fast = Fingerprint.decode_fast(text.encode())
    assert fast is not None
    same(fast, fp)
    same(fast, precise(text))
    same(Fingerprint.from_json(text), fp)
    same(Fingerprint.from_dict(json.loads(text)), fp)


def test_to_dict_is_the_saved_form() -> None:
    fp = spark_style()
    data = fp.to_dict()
    assert list(data) == [
        "version",
        "engine",
        "mode",
        "operators",
        "job_vertices",
        "state_operators",
        "sources",
        "edges",
    ]
    assert data["edges"] == [[0, 1, "hash: key"], [1, 5, "forward"]]
    assert data["job_vertices"][0]["operators"][1] == {"generated": HEX_B, "user_defined": HEX_C}
    assert data["state_operators"][2]["stores"] == []
    bare = Fingerprint(fp.operators, fp.job_vertices)
    assert list(bare.to_dict()) == ["version", "engine", "mode", "operators", "job_vertices"]
    assert json.loads(bare.to_json()) == bare.to_dict()


def test_a_lone_surrogate_is_still_written_as_before() -> None:
    op = OperatorFingerprint(0, "bad \ud800", HEX_A)
    fp = Fingerprint((op,), (JobVertex(HEX_A, "v", 1, (ChainedOperator(HEX_A),)),))
    assert fp.to_json() == old_to_json(fp)


def version_1(fp: Fingerprint) -> dict[str, Any]:
    """The version 1 saved form: no version, no engine tag, no optional keys."""
    data = fp.to_dict()
    for key in ("version", "engine", "mode", "state_operators", "sources", "edges"):
        data.pop(key, None)
    for op in data["operators"]:
        for key in ("user_operator_id", "uid", "parallelism", "max_parallelism", "stateful"):
            op.pop(key)
    for v in data["job_vertices"]:
        v.pop("max_parallelism")
        v.pop("nodes")
        for o in v["operators"]:
            o.pop("user_defined")
    return data


@pytest.mark.parametrize("fp", [*golden_fingerprints(5), spark_style()])
def test_version_1_and_missing_optional_keys(fp: Fingerprint) -> None:
    for data in (version_1(fp), {**version_1(fp), "version": 1}):
        text = json.dumps(data)
        fast = Fingerprint.decode_fast(text.encode())
        assert fast is not None
        same(fast, precise(text))
        assert fast.engine == "" and fast.mode == "streaming"
        assert all(op.parallelism == -1 and op.stateful is None for op in fast.operators)


def sample() -> dict[str, Any]:
    return spark_style().to_dict()


def set_at(data: dict[str, Any], path: tuple[Any, ...], value: Any) -> str:
    """``data`` as JSON text, with the value at ``path`` replaced by ``value``."""
    target: Any = data
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return json.dumps(data, ensure_ascii=False)


def with_(path: tuple[Any, ...], value: Any) -> str:
    return set_at(sample(), path, value)


def without(path: tuple[Any, ...]) -> str:
    data = sample()
    target: Any = data
    for step in path[:-1]:
        target = target[step]
    del target[path[-1]]
    return json.dumps(data, ensure_ascii=False)


GOOD = json.dumps(sample(), ensure_ascii=False)

MALFORMED = {
    "duplicate top key": GOOD.replace('"mode": ', '"mode": "batch", "mode": ', 1),
    "duplicate operator key": GOOD.replace('{"node": 0,', '{"node": 0, "node": 0,', 1),
    "duplicate key hidden by an escaped colon": GOOD.replace(
        '{"node": 0,', '{"node": 0, "node": 0,', 1
    ).replace("stage: 0", "stage\\u003a 0"),
    "duplicate store key": GOOD.replace(
        '"key_schema": null', '"key_schema": null, "key_schema": null'
    ),
    "NaN": with_(("operators", 0, "parallelism"), 1).replace(
        '"parallelism": 1', '"parallelism": NaN', 1
    ),
    "Infinity": GOOD.replace('"version": 2', '"version": Infinity'),
    "long integer": GOOD.replace('"node": 5', '"node": 123456789012345678901234', 1),
    "long integer in a list": GOOD.replace(
        '"nodes": [0, 1]', '"nodes": [0, 100000000000000000000000]'
    ),
    "lone surrogate": GOOD.replace('"Sink"', '"Sink \\ud800"'),
    "lone low surrogate": GOOD.replace('"Sink"', '"Sink \\udc00 x"'),
    "wrong type": with_(("operators", 0, "name"), 3),
    "null name": with_(("operators", 0, "name"), None),
    "boolean parallelism": with_(("operators", 0, "parallelism"), True),
    "float node": with_(("operators", 0, "node"), 1.0),
    "large node": with_(("operators", 0, "node"), 2**31),
    "unknown key": with_(("operators", 0, "job_vertex"), HEX_A),
    "unknown top key": with_(("extra",), 1),
    "bad hex id": with_(("operators", 1, "operator_id"), "B" * 32),
    "short hex id": with_(("job_vertices", 0, "id"), "a" * 31),
    "hex id with a newline": with_(
        ("job_vertices", 0, "operators", 0, "generated"), "a" * 32 + "\n"
    ),
    "bad user id": with_(("operators", 0, "user_operator_id"), "x"),
    "version 4": with_(("version",), 4),
    "version true": with_(("version",), True),
    "mode": with_(("mode",), "micro-batch"),
    "null engine": with_(("engine",), None),
    "stateful string": with_(("operators", 0, "stateful"), "yes"),
    "node twice": with_(("operators", 1, "node"), 0),
    "edge to nowhere": with_(("edges",), [[0, 9, "x"]]),
    "edge of two": with_(("edges",), [[0, 1]]),
    "null nodes": with_(("job_vertices", 0, "nodes"), None),
    "missing operators": without(("operators",)),
    "missing node": without(("operators", 0, "node")),
    "missing vertex operators": without(("job_vertices", 0, "operators")),
    "missing vertex parallelism": without(("job_vertices", 0, "parallelism")),
    "missing state kind": without(("state_operators", 0, "kind")),
    "source not a string": with_(("sources",), ["a", 1]),
    "not an object": "[]",
    "empty": "",
    "blank": "  \n",
    "truncated": GOOD[:-1],
    "trailing data": GOOD + " {}",
    "NUL byte": GOOD.replace('"Sink"', '"Sink\x00"'),
    "raw tab in a string": GOOD.replace('"Sink"', '"Si\tnk"'),
    "byte order mark": "\ufeff" + GOOD,
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_input_gives_the_precise_message(name: str) -> None:
    text = MALFORMED[name]
    expected = precise_error(text)
    assert expected is not None, name
    assert Fingerprint.decode_fast(text.encode()) is None
    assert Fingerprint.decode_fast(text) is None
    with pytest.raises(DocumentError) as info:
        Fingerprint.from_json(text.encode())
    assert str(info.value) == expected


def test_the_messages_are_the_ones_the_tests_pin() -> None:
    def message(name: str) -> str:
        with pytest.raises(DocumentError) as info:
            Fingerprint.from_json(MALFORMED[name].encode())
        return str(info.value)

    assert message("duplicate operator key") == f'{ORIGIN}: duplicate key "node" in one object'
    assert message("NaN") == f"{ORIGIN}: NaN is not a number JSON allows"
    assert message("long integer").startswith(f"{ORIGIN}: integer of 24 digits is too large")
    assert "lone surrogate" in message("lone surrogate")
    assert message("unknown key") == (
        f'{ORIGIN}: not a valid saved fingerprint: operators[0]: unknown key "job_vertex"'
    )


def test_bytes_that_are_not_utf8() -> None:
    raw = GOOD.encode().replace(b'"Sink"', b'"Sink \xff"')
    assert Fingerprint.decode_fast(raw) is None
    with pytest.raises(DocumentError, match=r"not UTF-8 text \(byte \d+ is 0xff\)"):
        Fingerprint.from_json(raw, "f.json")
    encoded_surrogate = GOOD.encode().replace(b'"Sink"', b'"Sink \xed\xa0\x80"')
    assert Fingerprint.decode_fast(encoded_surrogate) is None


def mutations() -> Iterator[tuple[str, str]]:
    """Every object's every key removed, and set to each of a few values of the wrong (or
    right) type, walked with a stack."""
    values = [
        None,
        0,
        -1,
        2**31 - 1,
        -(2**31),
        2**31,
        "x",
        HEX_B,
        True,
        False,
        [],
        {},
        1.5,
        [0, 1, "x"],
    ]
    base = sample()
    stack: list[tuple[Any, ...]] = [()]
    while stack:
        path = stack.pop()
        node: Any = base
        for step in path:
            node = node[step]
        if isinstance(node, dict):
            for key in node:
                stack.append((*path, key))
            keys: list[Any] = list(node)
        elif isinstance(node, list):
            for i in range(len(node)):
                stack.append((*path, i))
            keys = list(range(len(node)))
        else:
            continue
        for key in keys:
            for value in values:
                data = copy.deepcopy(base)
                target: Any = data
                for step in path:
                    target = target[step]
                target[key] = value
                yield f"{path}[{key!r}]={value!r}", json.dumps(data, ensure_ascii=False)
            data = copy.deepcopy(base)
            target = data
            for step in path:
                target = target[step]
            del target[key]
            yield f"del {path}[{key!r}]", json.dumps(data, ensure_ascii=False)


def test_every_mutation_reads_alike_on_both_paths() -> None:
    checked = accepted = 0
    for where, text in mutations():
        checked += 1
        expected = precise_error(text)
        fast = Fingerprint.decode_fast(text.encode())
        if expected is None:
            # Both paths read it: the same fingerprint (the fast path may still decline).
            same(Fingerprint.from_json(text.encode()), precise(text))
            if fast is not None:
                accepted += 1
                same(fast, precise(text))
        else:
            assert fast is None, where
            with pytest.raises(DocumentError) as info:
                Fingerprint.from_json(text.encode())
            assert str(info.value) == expected, where
    assert checked > 1000 and accepted > 50


# -- write_json: the same text, written a piece at a time -------------------------------------


@pytest.mark.parametrize("rows_per_chunk", [1, 3, 10_000])
@pytest.mark.parametrize("fp", [*golden_fingerprints(8), spark_style()])
def test_write_json_writes_to_json_text(fp: Fingerprint, rows_per_chunk: int) -> None:
    stream = io.BytesIO()
    fp.write_json(stream, rows_per_chunk)
    assert stream.getvalue() == old_to_json(fp).encode("utf-8")


def test_write_json_of_empty_and_bare_fingerprints() -> None:
    for fp in (
        Fingerprint((), (), None, "flink", "streaming", edges=()),
        Fingerprint((), (), (), "spark", "batch", sources=()),
        Fingerprint(spark_style().operators, spark_style().job_vertices),
    ):
        stream = io.BytesIO()
        fp.write_json(stream, 2)
        assert stream.getvalue() == old_to_json(fp).encode("utf-8")


def test_write_json_escapes_a_lone_surrogate_as_the_cli_writes_it() -> None:
    op = OperatorFingerprint(0, "bad \ud800", HEX_A)
    fp = Fingerprint((op,), (JobVertex(HEX_A, "v", 1, (ChainedOperator(HEX_A),)),))
    stream = io.BytesIO()
    fp.write_json(stream)
    assert stream.getvalue() == old_to_json(fp).encode("utf-8", "backslashreplace")
