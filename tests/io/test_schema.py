"""State store schemas in the ``.opid`` snapshot: Spark's DDL form, read back to the same JSON.

The expected texts are written by hand from Spark's own spelling of the types
(``DataType.simpleString``: ``bigint``, ``int``, ``struct<a: int>``; ``NOT NULL`` from
``StructField.toDDL``), not copied from the writer's output.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_opid.errors import DocumentError
from pytest_opid.io.schema import fields_text, schema_json, schema_text, type_shape, type_text
from pytest_opid.io.snapshot import HEADER, dumps, loads
from pytest_opid.result import (
    ChainedOperator,
    Fingerprint,
    JobVertex,
    OperatorFingerprint,
    StateOperator,
    StateStore,
)
from pytest_opid.text import printable

DATA = Path(__file__).resolve().parents[1] / "data"


def field(name, kind, nullable=True, metadata=None):
    return {"name": name, "type": kind, "nullable": nullable, "metadata": metadata or {}}


def struct(*fields):
    return {"type": "struct", "fields": list(fields)}


def compact(data) -> str:
    """Spark's StructType.json: compact, keys in Spark's order."""
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


@pytest.mark.parametrize(
    ("data", "text"),
    [
        (
            struct(field("count", "long"), field("sum", "double")),
            "struct<count: bigint, sum: double>",
        ),
        (
            struct(
                field("i", "integer"),
                field("s", "short"),
                field("b", "byte"),
                field("d", "decimal(12,2)"),
                field("t", "timestamp_ntz"),
                field("v", "void"),
            ),
            "struct<i: int, s: smallint, b: tinyint, d: decimal(12,2), t: timestamp_ntz, v: void>",
        ),
        (
            struct(
                field("window", struct(field("start", "timestamp"), field("end", "timestamp"))),
                field("k", "string", nullable=False),
            ),
            "struct<window: struct<start: timestamp, end: timestamp>, k: string NOT NULL>",
        ),
        (
            struct(
                field("xs", {"type": "array", "elementType": "long", "containsNull": False}),
                field(
                    "m",
                    {
                        "type": "map",
                        "keyType": "string",
                        "valueType": "interval day to second",
                        "valueContainsNull": True,
                    },
                ),
            ),
            "struct<xs: array<bigint NOT NULL>, m: map<string, interval day to second>>",
        ),
        (
            struct(field("MS[0]", "long"), field("a `b`", "string")),
            "struct<`MS[0]`: bigint, `a ``b```: string>",
        ),
        (struct(), "struct<>"),
    ],
)
def test_a_schema_reads_as_spark_ddl_and_back_to_the_same_json(data, text):
    assert schema_text(compact(data)) == text
    assert schema_json(text) == compact(data)


@pytest.mark.parametrize(
    "json_text",
    [
        compact(struct(field("w", "string", metadata={"spark.timeWindow": True}))),  # metadata
        compact(struct(field("p", {"type": "udt", "class": "x.Point", "sqlType": "long"}))),
        compact(struct(field("line\nbreak", "string"))),  # a name that is not printable
        compact(struct(field("rtl\u202e", "string"))),  # a bidi override
        compact(struct(field("x", "bigint"))),  # would read back as "long"
        compact(struct(field("x", "string collate UTF8_LCASE"))),
        json.dumps(struct(field("x", "long"))),  # not compact: the text would differ
        '{"type":"struct","fields":[{"name":"k:1","type":"string"}]}',  # no nullable/metadata
        '{"timeMode":"NoTime","outputMode":"Update","stateVariables":[]}',  # not a type
        "not json",
    ],
)
def test_a_schema_without_an_exact_ddl_form_has_none(json_text):
    assert schema_text(json_text) is None


@pytest.mark.parametrize(
    "text",
    [
        "struct<a bigint>",
        "struct<a: bigint",
        "struct<`a: int>",
        "struct<a: Bigint>",
        "map<int>",
        "",
    ],
)
def test_malformed_ddl_is_a_value_error(text):
    with pytest.raises(ValueError):
        schema_json(text)


def test_fields_split_at_the_top_level_only():
    text = (
        "struct<w: struct<a: int, b: int>, `x,<y`: map<string, bigint>, "
        "d: decimal(12,2), z: int NOT NULL>"
    )
    assert fields_text(text) == [
        "w: struct<a: int, b: int>",
        "`x,<y`: map<string, bigint>",
        "d: decimal(12,2)",
        "z: int NOT NULL",
    ]
    assert fields_text("struct<>") == []
    assert fields_text("bigint") is None


_NAMES = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)
_LEAVES = st.sampled_from(
    [
        *("long", "integer", "short", "byte", "string", "double", "float", "boolean", "binary"),
        *("date", "timestamp", "timestamp_ntz", "void", "decimal(38,18)", "interval year to month"),
    ]
)
_TYPES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.builds(
            lambda fs: struct(*(field(n, t, b) for n, t, b in fs)),
            st.lists(st.tuples(_NAMES, inner, st.booleans()), max_size=4),
        ),
        st.builds(
            lambda t, b: {"type": "array", "elementType": t, "containsNull": b},
            inner,
            st.booleans(),
        ),
        st.builds(
            lambda k, v, b: {"type": "map", "keyType": k, "valueType": v, "valueContainsNull": b},
            inner,
            inner,
            st.booleans(),
        ),
    ),
    max_leaves=12,
)


def _names(data) -> list[str]:
    found = []
    todo = [data]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            if item.get("type") == "struct":
                found += [f["name"] for f in item["fields"]]
            todo += list(item.values())
        elif isinstance(item, list):
            todo += item
    return found


@settings(max_examples=300, deadline=None)
@given(_TYPES)
def test_any_type_with_a_text_reads_back_exactly(data):
    text = schema_text(compact(data))
    if text is None:
        # Only names the snapshot could not print raw have no text.
        assert any(printable(name) != name for name in _names(data)), data
        return
    assert schema_json(text) == compact(data)
    if text.startswith("struct<"):
        pieces = fields_text(text)
        assert pieces is not None and len(pieces) == len(data["fields"])
        assert schema_json("struct<\n  " + ",\n  ".join(pieces) + "\n>") == compact(data)


# -- in the snapshot ------------------------------------------------------------------------------

AGGREGATE = compact(struct(field("page", "string")))
BUFFER = compact(struct(field("count", "long"), field("sum", "double")))
WIDE = compact(struct(*(field(f"MS[{i}]", "long") for i in range(12))))
PROPERTIES = '{"timeMode":"NoTime","stateVariables":[],"note":"a<b"}'  # JSON holding a "<"


def _fingerprint(*stores: StateStore) -> Fingerprint:
    vertex = "b" * 32
    ops = (OperatorFingerprint(0, "StateStoreSave", "a" * 32, job_vertex=vertex),)
    state = StateOperator(0, "a" * 32, "StateStoreSave(string)", "stateStoreSave", stores)
    chain = (ChainedOperator("a" * 32, None),)
    return Fingerprint(
        ops, (JobVertex(vertex, "query", 4, chain, (0,)),), (state,), "spark", "streaming", ()
    )


def test_the_snapshot_writes_each_schema_on_its_row_in_ddl_and_reads_it_back():
    fp = _fingerprint(
        StateStore("default", AGGREGATE, BUFFER),
        StateStore("default/wide", AGGREGATE, WIDE),
        StateStore("_properties", None, PROPERTIES),
    )
    text = dumps(fp)
    assert text.startswith(HEADER + "\n") and HEADER.endswith("format 5")
    section = text.split("[state stores]\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert section[0].split() == ["#", "state", "store", "part", "schema"]
    rows = [line.split(None, 3) for line in section[1:]]
    assert rows[0] == ["0", '"default"', "key", "struct<page: string>"]
    assert rows[1] == ["0", '"default"', "value", "struct<count: bigint, sum: double>"]
    # The wide value: "struct<" on its row, a field per line below, then ">".
    assert rows[3] == ["0", '"default/wide"', "value", "struct<"]
    assert [line.strip() for line in section[5:18]] == [
        *(f"`MS[{i}]`: bigint," for i in range(11)),
        "`MS[11]`: bigint",
        ">",
    ]
    assert max(len(line) for line in section[:-1]) < 80  # all but the JSON-quoted one
    # No DDL form: the JSON stays, quoted; no schema: "-".
    assert section[-2].split(None, 3) == ["0", '"_properties"', "key", "-"]
    assert section[-1].split(None, 3)[3] == json.dumps(PROPERTIES)
    back = loads(text)
    assert back == fp
    assert dumps(back) == text  # deterministic, and a fixed point


def test_a_format_2_snapshot_with_json_schemas_still_reads(tmp_path):
    """The Spark example's snapshot as format 2 wrote it (escaped JSON, two schemas a row)."""
    old_text = (DATA / "snapshots-format2" / "test_page_view_stats.opid").read_text("utf-8")
    assert old_text.startswith("# pytest-opid topology snapshot, format 2\n")
    old = loads(old_text)
    stores = {s.state_operator_id: s.stores for s in old.state_operators}
    key, value = json.loads(stores[0][0].key_schema), json.loads(stores[0][0].value_schema)
    assert [f["name"] for f in key["fields"]] == ["window", "page"]
    assert key["fields"][0]["metadata"] == {
        "spark.timeWindow": True,
        "spark.watermarkDelayMs": 600000,
    }
    assert [f["name"] for f in value["fields"]] == ["count", *(f"MS[{i}]" for i in range(52))]
    # Written again, it is format 3; the window key's metadata keeps it JSON (no DDL form).
    again = dumps(old)
    assert loads(again) == old
    assert "struct<event_id: string, event_time: timestamp>" not in again  # metadata on ts
    assert "struct<__dummy__: void>" in again


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ('0 "default" key struct<a: int\n', "line {0}: the schema's struct<...> is never closed"),
        ('0 "default" key struct<a int>\n', "line {0}: malformed key schema"),
        ('0 "default" keys struct<a: int>\n', "line {0}: expected state, store, key or value"),
        (
            '0 "default" key struct<a: int>\n0 "default" key struct<b: int>\n',
            "line {1}: a second key schema for state 0",
        ),
    ],
)
def test_a_malformed_schema_row_names_its_line(rows, message):
    text = dumps(_fingerprint(StateStore("default", AGGREGATE, BUFFER)))
    head, tail = text.split("[state stores]\n", 1)
    rest = tail.split("\n\n", 1)[1]
    broken = f"{head}[state stores]\n{rows}\n{rest}"
    first = head.count("\n") + 2  # the line after [state stores]
    assert broken.split("\n")[first - 1] == rows.split("\n")[0]
    with pytest.raises(DocumentError, match=message.format(first, first + 1)):
        loads(broken)


# -- the renderer for people: type_text and type_shape ------------------------------------------

_NESTED = {
    "type": "struct",
    "fields": [
        {
            "name": "window",
            "type": {
                "type": "struct",
                "fields": [
                    {"name": "start", "type": "timestamp", "nullable": True, "metadata": {}},
                    {"name": "end", "type": "timestamp", "nullable": False, "metadata": {}},
                ],
            },
            "nullable": False,
            "metadata": {},
        },
        {"name": "MS[0]", "type": "long", "nullable": True, "metadata": {}},
        {
            "name": "xs",
            "type": {"type": "array", "elementType": "integer", "containsNull": True},
            "nullable": True,
            "metadata": {},
        },
        {
            "name": "m",
            "type": {
                "type": "map",
                "keyType": "string",
                "valueType": "short",
                "valueContainsNull": True,
            },
            "nullable": True,
            "metadata": {},
        },
    ],
}


def test_type_text_speaks_spark_ddl_with_not_null_where_a_field_cannot_be_null():
    assert type_text(_NESTED) == (
        "struct<window: struct<start: timestamp, end: timestamp NOT NULL> NOT NULL, "
        "`MS[0]`: bigint, xs: array<int>, m: map<string, smallint>>"
    )
    assert type_text(_NESTED, nullability=False) == (
        "struct<window: struct<start: timestamp, end: timestamp>, "
        "`MS[0]`: bigint, xs: array<int>, m: map<string, smallint>>"
    )


def test_type_text_never_declines_and_never_recurses():
    assert type_text(None) == "?"
    assert type_text({"type": "struct", "fields": [1]}) == "struct<?>"
    assert type_text({"type": "udt", "sqlType": "binary"}) == "udt<binary>"
    assert type_text("a\x1b[31m") == printable("a\x1b[31m")
    deep: object = "long"
    for _ in range(100_000):  # far past the recursion limit
        deep = {"type": "array", "elementType": deep, "containsNull": True}
    text = type_text(deep)
    assert text.count("array<") == 65 and "\u2026" in text


def test_type_shape_keeps_the_json_names_and_no_field_names():
    assert (
        type_shape(_NESTED)
        == "struct<struct<timestamp,timestamp>,long,array<integer>,map<string,short>>"
    )
    assert type_shape([]) == "?"
