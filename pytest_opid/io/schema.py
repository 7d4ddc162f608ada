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
"""

from __future__ import annotations

import json
import re
from typing import Any

from pytest_opid.text import printable

__all__ = ["fields_text", "schema_json", "schema_text", "unclosed"]

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


class _Unwritable(Exception):
    """The JSON has no exact type text."""


# -- JSON -> text ---------------------------------------------------------------------------------


def schema_text(json_text: str) -> str | None:
    """The type text of a schema's JSON, or ``None`` where the text would not read back to
    the same JSON text."""
    try:
        data = json.loads(json_text)
        text = _text(data, 0)
    except (ValueError, RecursionError, _Unwritable):
        return None
    try:
        if schema_json(text) != json_text:
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


def _text(data: Any, depth: int) -> str:
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
        return "struct<" + ", ".join(_field(f, depth) for f in fields) + ">"
    if kind == "array" and data.keys() == {"type", "elementType", "containsNull"}:
        element = _text(data["elementType"], depth + 1) + _nullable(data["containsNull"])
        return f"array<{element}>"
    if kind == "map" and data.keys() == {"type", "keyType", "valueType", "valueContainsNull"}:
        key = _text(data["keyType"], depth + 1)
        value = _text(data["valueType"], depth + 1) + _nullable(data["valueContainsNull"])
        return f"map<{key}, {value}>"
    raise _Unwritable


def _field(field: Any, depth: int) -> str:
    if not isinstance(field, dict) or field.keys() != {"name", "type", "nullable", "metadata"}:
        raise _Unwritable
    name = field["name"]
    if field["metadata"] != {} or not isinstance(name, str) or printable(name) != name:
        raise _Unwritable
    if not _PLAIN_NAME.fullmatch(name):
        name = "`" + name.replace("`", "``") + "`"
    return f"{name}: {_text(field['type'], depth + 1)}{_nullable(field['nullable'])}"


def _nullable(flag: Any) -> str:
    if flag is True:
        return ""
    if flag is False:
        return _NOT_NULL
    raise _Unwritable


# -- text -> JSON ---------------------------------------------------------------------------------


def schema_json(text: str) -> str:
    """The JSON text (the engine's compact form) of a type text :func:`schema_text` wrote, one
    field per line or not. Raises :class:`ValueError` saying where it is malformed."""
    data, end = _Parser(text).type(_SPACE.match(text, 0).end(), 0)  # type: ignore[union-attr]
    end = _SPACE.match(text, end).end()  # type: ignore[union-attr]
    if end != len(text):
        raise ValueError(f"unexpected {text[end : end + 20]!r} after the type")
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text

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
            while not text.startswith(">", at):
                if fields:
                    at = self.expect(at, ",")
                name, at = self.name(at)
                at = self.expect(at, ":")
                kind, at = self.type(at, depth + 1)
                nullable, at = self.nullable(at)
                fields.append({"name": name, "type": kind, "nullable": nullable, "metadata": {}})
            return {"type": "struct", "fields": fields}, self.skip(at + 1)
        if text.startswith("array<", at):
            element, at = self.type(self.skip(at + len("array<")), depth + 1)
            contains_null, at = self.nullable(at)
            at = self.expect(at, ">")
            return {"type": "array", "elementType": element, "containsNull": contains_null}, at
        if text.startswith("map<", at):
            key, at = self.type(self.skip(at + len("map<")), depth + 1)
            at = self.expect(at, ",")
            value, at = self.type(at, depth + 1)
            contains_null, at = self.nullable(at)
            at = self.expect(at, ">")
            return {
                "type": "map",
                "keyType": key,
                "valueType": value,
                "valueContainsNull": contains_null,
            }, at
        match = _LEAF.match(text, at)
        if match is None:
            raise ValueError(f"expected a type at {text[at : at + 20] or 'the end'!r}")
        name = match.group()
        return _FROM_DDL.get(name, name), self.skip(match.end())

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
