"""State store schemas as type text a reviewer reads: ``struct<count: bigint, sum: double>``.

A stateful operator's key and value schemas are recorded as the engine's JSON form of a data
type (Spark's ``StructType.json``: ``{"type":"struct","fields":[{"name":"count","type":"long",
"nullable":true,"metadata":{}}]}``). The ``.opid`` snapshot writes them in Spark's DDL form
instead, the way ``DataType.simpleString`` prints them (``bigint``, ``int``, ``struct<a: int>``),
with ``NOT NULL`` after a field that cannot be null, as Spark's DDL says it. Spark's DDL has no
words for an array element or a map value that cannot be null; they are written ``array<int NOT
NULL>`` and ``map<string, int NOT NULL>``. A field name that is not a plain identifier is quoted
with backticks (a backtick in it doubled), as in Spark SQL.

:func:`schema_text` gives the text only where :func:`schema_json` reads it back to exactly the
same JSON text; anything else (metadata, user-defined types, names with control characters,
JSON not in the engine's own compact form) has no text, and the snapshot keeps the JSON.

With ``runs=True`` (the ``.opid`` format 6), fields named ``X[0]``, ``X[1]``, ... in a row of one
type are written as one run, ``` `MS[0]`..`MS[51]`: bigint ```: an aggregate buffer (Spark's
HyperLogLog++ keeps 52 words) reads as one field, and the run reads back to every field it
stands for, so a changed buffer (another length, another type) is still a changed schema.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pytest_opid.text import printable

__all__ = [
    "FILE_BYTES",
    "FILE_FIELDS",
    "SchemaBudget",
    "fields_text",
    "json_schema_checked",
    "schema_json",
    "schema_text",
    "type_shape",
    "type_text",
    "unclosed",
]

#: JSON type names that DDL spells differently (``DataType.simpleString``).
_TO_DDL = {"long": "bigint", "integer": "int", "short": "smallint", "byte": "tinyint"}
_FROM_DDL = {ddl: name for name, ddl in _TO_DDL.items()}
#: A type without parameters other than numbers: ``string``, ``decimal(12,2)``,
#: ``interval day to second``. Lower case only, so ``NOT NULL`` never reads as a type.
_LEAF = re.compile(r"[a-z][a-z0-9_]*(?:\([0-9]+(?:,[0-9]+)?\))?(?: [a-z][a-z0-9_]*)*")
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NOT_NULL = " NOT NULL"
_DEPTH = 64
_SPACE = re.compile(r"\s*")
#: A field name that can be part of a run: a prefix and an index, ``MS[12]``.
_INDEXED = re.compile(r"(.*)\[(0|[1-9][0-9]{0,8})\]", re.DOTALL)
#: Fields in a row that make a run (fewer are written one by one).
_RUN_MIN = 3
#: Fields one run may stand for: a run is a few bytes, its fields are not.
_RUN_MAX = 100_000
_RUN = ".."


#: What the schemas of one snapshot file may expand to in all, runs and their nested types
#: counted once per field they stand for (a run's type is written once and read for each of
#: its fields): fields, and bytes of the engine's JSON.
FILE_FIELDS = 400_000
FILE_BYTES = 32 << 20
#: JSON brackets a quoted schema may nest: a struct opens three per level (``{"type":
#: {"fields": [{``), so this is :data:`_DEPTH` levels of types and some room.
_JSON_DEPTH = 3 * _DEPTH + 8
_JSON_STRUCTURE = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


class SchemaBudget:
    """What the schemas of one file have expanded to so far (:data:`FILE_FIELDS`,
    :data:`FILE_BYTES`): a snapshot of a few kilobytes cannot stand for gigabytes."""

    __slots__ = ("bytes", "fields")

    def __init__(self) -> None:
        self.fields = 0
        self.bytes = 0

    def fits(self, fields: int, size: int) -> None:
        """Raises :class:`ValueError` where ``fields`` and ``size`` more would not fit."""
        if self.fields + fields > FILE_FIELDS:
            raise ValueError(
                f"the file's schemas stand for more than {FILE_FIELDS} fields (runs and their "
                "nested types counted per field)"
            )
        if self.bytes + size > FILE_BYTES:
            raise ValueError(
                f"the file's schemas stand for more than {FILE_BYTES >> 20} MiB of schema JSON"
            )

    def charge(self, fields: int, size: int) -> None:
        self.fits(fields, size)
        self.fields += fields
        self.bytes += size


def json_schema_checked(text: str, budget: SchemaBudget | None = None) -> None:
    """A quoted (JSON) schema read as it is: its brackets nested at most :data:`_JSON_DEPTH`
    deep (checked with one linear scan, so no deeper schema reaches a check that walks it)
    and its size charged to ``budget``. Raises :class:`ValueError` saying why not."""
    depth = deepest = 0
    for match in _JSON_STRUCTURE.finditer(text):
        char = match.group()
        if char in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > _JSON_DEPTH:
                    raise ValueError(f"types nested too deeply (more than {_DEPTH} levels)")
        elif char in "]}":
            depth -= 1
    if budget is not None:
        budget.charge(text.count('"name"'), len(text))


class _Unwritable(Exception):
    """The JSON has no exact type text."""


# -- JSON -> text ---------------------------------------------------------------------------------


def schema_text(json_text: str, *, runs: bool = False) -> str | None:
    """The type text of a schema's JSON, or ``None`` where the text would not read back to
    the same JSON text; ``runs``: indexed fields in a row as one run."""
    try:
        data = json.loads(json_text)
        text = _text(data, 0, runs)
    except (ValueError, RecursionError, _Unwritable):
        return None
    try:
        if schema_json(text, runs=runs) != json_text:
            return None
    except ValueError:
        return None
    return text


def fields_text(text: str) -> list[str] | None:
    """A struct's type text split into its top-level fields (``["count: bigint", "sum:
    double"]``), for writing one field per line; ``None`` if ``text`` is not a struct."""
    if not text.startswith("struct<") or not text.endswith(">"):
        return None
    inner = text[len("struct<") : -1]
    out = []
    depth = 0
    start = 0
    quoted = False
    for i, char in enumerate(inner):
        if char == "`":
            quoted = not quoted
        elif quoted:
            continue
        elif char in "<(":
            depth += 1
        elif char in ">)":
            depth -= 1
        elif char == "," and depth == 0:
            out.append(inner[start:i].strip())
            start = i + 1
    if inner.strip():
        out.append(inner[start:].strip())
    return out


def unclosed(text: str) -> int:
    """How many ``<`` of a type text are still open (a field name's backticks skipped): a
    reader joins the lines of a struct written one field per line until none is."""
    depth = 0
    quoted = False
    for char in text:
        if char == "`":
            quoted = not quoted
        elif not quoted:
            depth += (char == "<") - (char == ">")
    return depth


def _text(data: Any, depth: int, runs: bool = False) -> str:
    if depth > _DEPTH:
        raise _Unwritable
    if isinstance(data, str):
        name = _TO_DDL.get(data, data)
        if not _LEAF.fullmatch(name) or (name in _FROM_DDL and name == data):
            raise _Unwritable  # e.g. a JSON "bigint" would read back as "long"
        return name
    if not isinstance(data, dict):
        raise _Unwritable
    kind = data.get("type")
    if kind == "struct" and data.keys() == {"type", "fields"}:
        fields = data["fields"]
        if not isinstance(fields, list):
            raise _Unwritable
        texts = [_field(f, depth, runs) for f in fields]
        return "struct<" + ", ".join(_runs(fields, texts) if runs else texts) + ">"
    if kind == "array" and data.keys() == {"type", "elementType", "containsNull"}:
        element = _text(data["elementType"], depth + 1, runs) + _nullable(data["containsNull"])
        return f"array<{element}>"
    if kind == "map" and data.keys() == {"type", "keyType", "valueType", "valueContainsNull"}:
        key = _text(data["keyType"], depth + 1, runs)
        value = _text(data["valueType"], depth + 1, runs) + _nullable(data["valueContainsNull"])
        return f"map<{key}, {value}>"
    raise _Unwritable


def _field(field: Any, depth: int, runs: bool = False) -> str:
    if not isinstance(field, dict) or field.keys() != {"name", "type", "nullable", "metadata"}:
        raise _Unwritable
    name = field["name"]
    if field["metadata"] != {} or not isinstance(name, str) or printable(name) != name:
        raise _Unwritable
    kind = _text(field["type"], depth + 1, runs)
    return f"{_quoted(name)}: {kind}{_nullable(field['nullable'])}"


def _runs(fields: list[Any], texts: list[str]) -> list[str]:
    """``texts`` (one per field, ``name: type``) with every run of at least :data:`_RUN_MIN`
    fields named ``X[i]``, ``X[i+1]``, ... of one type written as ``` `X[i]`..`X[j]`: type ```."""
    names = [_quoted(f["name"]) for f in fields]
    kinds = [text[len(name) + 2 :] for name, text in zip(names, texts, strict=True)]
    out = []
    i = 0
    while i < len(fields):
        j = i + 1
        match = _INDEXED.fullmatch(fields[i]["name"])
        if match is not None:
            prefix, first = match.group(1), int(match.group(2))
            while (
                j < len(fields)
                and j - i < _RUN_MAX
                and kinds[j] == kinds[i]
                and fields[j]["name"] == f"{prefix}[{first + j - i}]"
            ):
                j += 1
        if j - i >= _RUN_MIN:
            out.append(f"{names[i]}{_RUN}{names[j - 1]}: {kinds[i]}")
        else:
            out += texts[i:j]
        i = j
    return out


def _quoted(name: str) -> str:
    """A field name as DDL writes it: backticks unless a plain identifier."""
    return name if _PLAIN_NAME.fullmatch(name) else "`" + name.replace("`", "``") + "`"


def _nullable(flag: Any) -> str:
    if flag is True:
        return ""
    if flag is False:
        return _NOT_NULL
    raise _Unwritable


# -- JSON -> text for people (lossy, never fails) -------------------------------------------------


def type_text(data: Any, *, nullability: bool = True) -> str:
    """A data type's JSON (a parsed ``DataType.json``) in Spark's DDL words for a message or a
    report: ``bigint``, ``struct<window: struct<start: timestamp>, page: string NOT NULL>``,
    names quoted as :func:`schema_text` quotes them and escaped for a terminal. Unlike
    :func:`schema_text` it never declines: a part that is not a type reads ``?``, nesting past
    the depth limit ``…``. ``nullability=False`` leaves ``NOT NULL`` out (facts that name a type,
    not a stored row). The one renderer for people; the plan, the state meaning, the restart
    messages and ``opid checkpoint`` all use it."""
    out: list[str] = []
    stack: list[tuple[Any, int] | str] = [(data, 0)]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
            continue
        value, depth = item
        if depth > _DEPTH:
            out.append("\u2026")
            continue
        if isinstance(value, str):
            out.append(printable(_TO_DDL.get(value, value)))
            continue
        kind = value.get("type") if isinstance(value, dict) else None
        if kind == "struct" and isinstance(value.get("fields"), list):
            parts: list[tuple[Any, int] | str] = ["struct<"]
            for i, field in enumerate(value["fields"]):
                if i:
                    parts.append(", ")
                if not isinstance(field, dict):
                    parts.append("?")
                    continue
                name = field.get("name")
                parts.append(f"{_shown_name(name)}: " if isinstance(name, str) else "?: ")
                parts.append((field.get("type"), depth + 1))
                if nullability and field.get("nullable", True) is False:
                    parts.append(_NOT_NULL)
            parts.append(">")
            stack.extend(reversed(parts))
        elif kind == "array":
            stack.extend(reversed(["array<", (value.get("elementType"), depth + 1), ">"]))
        elif kind == "map":
            key, val = (value.get("keyType"), depth + 1), (value.get("valueType"), depth + 1)
            stack.extend(reversed(["map<", key, ", ", val, ">"]))
        elif kind == "udt":
            stack.extend(reversed(["udt<", (value.get("sqlType"), depth + 1), ">"]))
        else:
            out.append("?")
    return "".join(out)


def type_shape(data: Any) -> str:
    """A data type's JSON as its shape only, the type names as the JSON has them and no field
    names: ``struct<timestamp,timestamp>`` (how a Spark snapshot names a stateful operator's
    key types; kept as written since snapshots hold it)."""
    parts: list[str] = []
    stack: list[Any] = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            parts.append(item)
            continue
        if not isinstance(item, dict):
            parts.append("?")
            continue
        kind = item.get("type")
        if kind == "struct":
            children = [f.get("type") for f in item.get("fields", []) if isinstance(f, dict)]
        elif kind == "array":
            children = [item.get("elementType")]
        elif kind == "map":
            children = [item.get("keyType"), item.get("valueType")]
        else:
            parts.append(kind if isinstance(kind, str) else "?")
            continue
        stack.append(">")
        for i, child in enumerate(reversed(children)):
            if i:
                stack.append(",")
            stack.append(child)
        stack.append(f"{kind}<")
    return "".join(parts)


def _shown_name(name: str) -> str:
    if _PLAIN_NAME.fullmatch(name):
        return name
    return printable("`" + name.replace("`", "``") + "`")


# -- text -> JSON ---------------------------------------------------------------------------------


def schema_json(text: str, *, runs: bool = False, budget: SchemaBudget | None = None) -> str:
    """The JSON text (the engine's compact form) of a type text :func:`schema_text` wrote, one
    field per line or not; ``runs``: reading runs of indexed fields. What it expands to is
    charged to ``budget`` (the file's) before any of it is written. Raises :class:`ValueError`
    saying where it is malformed or what it would expand past."""
    budget = budget if budget is not None else SchemaBudget()
    parser = _Parser(text, runs, budget)
    data, end = parser.type(_SPACE.match(text, 0).end(), 0)  # type: ignore[union-attr]
    end = _SPACE.match(text, end).end()  # type: ignore[union-attr]
    if end != len(text):
        raise ValueError(f"unexpected {text[end : end + 20]!r} after the type")
    fields, size = parser.weight(data)
    budget.charge(fields, size)
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


class _Parser:
    def __init__(self, text: str, runs: bool = False, budget: SchemaBudget | None = None) -> None:
        self.text = text
        self.runs = runs
        self.budget = budget if budget is not None else SchemaBudget()
        self.fields = 0  # fields read so far, runs included
        #: id of each struct, array and map read -> (fields, JSON bytes) it expands to
        self.weights: dict[int, tuple[int, int]] = {}

    def weight(self, data: Any) -> tuple[int, int]:
        """The fields and JSON bytes a type read by :meth:`type` expands to (leaves: none and
        their name's length)."""
        if isinstance(data, str):
            return 0, len(data) + 2
        return self.weights[id(data)]

    def weigh(self, data: dict[str, Any], fields: int, size: int) -> dict[str, Any]:
        """Keep what ``data`` expands to; refused as soon as it would not fit the file's
        budget (an exponential nesting stops at the first level past it)."""
        self.budget.fits(fields, size)
        self.weights[id(data)] = (fields, size)
        return data

    def expect(self, at: int, word: str) -> int:
        at = self.skip(at)
        if not self.text.startswith(word, at):
            found = self.text[at : at + 20] or "the end"
            raise ValueError(f"expected {word!r} at {found!r}")
        return self.skip(at + len(word))

    def skip(self, at: int) -> int:
        return _SPACE.match(self.text, at).end()  # type: ignore[union-attr]

    def type(self, at: int, depth: int) -> tuple[Any, int]:
        if depth > _DEPTH:
            raise ValueError("types nested too deeply")
        text = self.text
        if text.startswith("struct<", at):
            at = self.skip(at + len("struct<"))
            fields: list[dict[str, Any]] = []
            total, size = 0, 32
            while not text.startswith(">", at):
                if fields:
                    at = self.expect(at, ",")
                name, at = self.name(at)
                names = [name]
                if self.runs and text.startswith(_RUN, at):
                    last, at = self.name(self.skip(at + len(_RUN)))
                    names = self.run(name, last)
                at = self.expect(at, ":")
                kind, at = self.type(at, depth + 1)
                nullable, at = self.nullable(at)
                inner, kind_size = self.weight(kind)
                total += len(names) * (1 + inner)
                size += sum(len(n) for n in names) + len(names) * (52 + kind_size)
                self.budget.fits(total, size)
                fields += (
                    {"name": n, "type": kind, "nullable": nullable, "metadata": {}} for n in names
                )
            struct = {"type": "struct", "fields": fields}
            return self.weigh(struct, total, size), self.skip(at + 1)
        if text.startswith("array<", at):
            element, at = self.type(self.skip(at + len("array<")), depth + 1)
            contains_null, at = self.nullable(at)
            at = self.expect(at, ">")
            array = {"type": "array", "elementType": element, "containsNull": contains_null}
            inner, size = self.weight(element)
            return self.weigh(array, inner, size + 50), at
        if text.startswith("map<", at):
            key, at = self.type(self.skip(at + len("map<")), depth + 1)
            at = self.expect(at, ",")
            value, at = self.type(at, depth + 1)
            contains_null, at = self.nullable(at)
            at = self.expect(at, ">")
            mapping = {
                "type": "map",
                "keyType": key,
                "valueType": value,
                "valueContainsNull": contains_null,
            }
            (key_fields, key_size), (value_fields, value_size) = (
                self.weight(key),
                self.weight(value),
            )
            return self.weigh(mapping, key_fields + value_fields, key_size + value_size + 70), at
        match = _LEAF.match(text, at)
        if match is None:
            raise ValueError(f"expected a type at {text[at : at + 20] or 'the end'!r}")
        name = match.group()
        return _FROM_DDL.get(name, name), self.skip(match.end())

    def run(self, first: str, last: str) -> list[str]:
        """The names a run ``first..last`` stands for: one prefix, indexes counting up."""
        start, end = _INDEXED.fullmatch(first), _INDEXED.fullmatch(last)
        if start is None or end is None or start.group(1) != end.group(1):
            raise ValueError(
                f"a run of fields from {first[:40]!r} to {last[:40]!r}: expected "
                "names X[i] and X[j] of one prefix"
            )
        low, high = int(start.group(2)), int(end.group(2))
        if high - low + 1 < _RUN_MIN:
            raise ValueError(
                f"a run of fields from {first[:40]!r} to {last[:40]!r}: expected "
                f"at least {_RUN_MIN} fields"
            )
        self.fields += high - low + 1
        if self.fields > _RUN_MAX:
            raise ValueError(f"runs of fields stand for more than {_RUN_MAX} fields")
        prefix = start.group(1)
        # the names themselves: a long prefix times many indexes is refused before it is built
        self.budget.fits(0, (high - low + 1) * (len(prefix) + 12))
        return [f"{prefix}[{i}]" for i in range(low, high + 1)]

    def nullable(self, at: int) -> tuple[bool, int]:
        """``NOT NULL`` after a type (the whitespace before it is skipped already)."""
        if self.text.startswith(_NOT_NULL[1:], at):
            return False, self.skip(at + len(_NOT_NULL) - 1)
        return True, at

    def name(self, at: int) -> tuple[str, int]:
        text = self.text
        if text.startswith("`", at):
            out = []
            i = at + 1
            while True:
                end = text.find("`", i)
                if end < 0:
                    raise ValueError("a field name's backtick is not closed")
                out.append(text[i:end])
                if text.startswith("``", end):
                    out.append("`")
                    i = end + 2
                    continue
                return "".join(out), self.skip(end + 1)
        match = _PLAIN_NAME.match(text, at)
        if match is None:
            raise ValueError(f"expected a field name at {text[at : at + 20] or 'the end'!r}")
        return match.group(), self.skip(match.end())
