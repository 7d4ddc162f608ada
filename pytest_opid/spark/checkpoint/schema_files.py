"""State schema files (``state/<n>/<store>/_metadata/schema``, versions 1-3): Java
``DataOutput`` with modified UTF-8 and schemas as chunked JSON, read as Spark's
``StateSchemaCompatibilityChecker`` reads them."""

from __future__ import annotations

import re
from typing import Any

from pytest_opid.spark.checkpoint.files import CheckpointReader, quoted
from pytest_opid.spark.checkpoint.model import ColumnFamilySchema
from pytest_opid.spark.vocabulary import DEFAULT_COL_FAMILY_NAME

_MAX_SCHEMA_VERSION = 3


class _Truncated(Exception):
    pass


class _DataInput:
    """The java.io.DataInputStream calls SchemaHelper's readers use."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n > len(self.data) - self.pos:
            raise _Truncated
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def read_int(self) -> int:
        return int.from_bytes(self.take(4), "big", signed=True)

    def read_short(self) -> int:
        return int.from_bytes(self.take(2), "big", signed=True)

    def read_utf_raw(self) -> str:
        """DataInputStream.readUTF, keeping surrogates unpaired (chunks may split a pair)."""
        length = int.from_bytes(self.take(2), "big")
        raw = self.take(length)
        # Modified UTF-8: NUL is C0 80, characters past U+FFFF are two 3-byte surrogates and a
        # 4-byte sequence is malformed (DataInputStream.readUTF: UTFDataFormatException).
        if raw and max(raw) >= 0xF0:
            at = next(i for i, b in enumerate(raw) if b >= 0xF0)
            if raw[at] <= 0xF4:
                raise UnicodeError(
                    f"byte {raw[at]:#04x} starts a 4-byte sequence, which modified UTF-8 "
                    "does not have"
                )
            raise UnicodeError(f"byte {raw[at]:#04x}, which UTF-8 never holds")
        try:
            return raw.replace(b"\xc0\x80", b"\x00").decode("utf-8", "surrogatepass")
        except UnicodeDecodeError as exc:
            byte = exc.object[exc.start]
            raise UnicodeError(f"byte {byte:#04x} is not valid there ({exc.reason})") from None


def _join_surrogates(text: str) -> str:
    """Pairs of surrogates (how modified UTF-8 writes a character past U+FFFF) as the one
    character they are; a lone one is an error in words, not the UTF-16 codec's."""
    try:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    except UnicodeDecodeError:
        lone = _SURROGATE.search(_SURROGATE_PAIR.sub("", text))
        code = f" (U+{ord(lone.group()):04X})" if lone else ""
        raise UnicodeError(f"a lone surrogate{code}, which is not text") from None


_SURROGATE_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")


_SURROGATE = re.compile("[\ud800-\udfff]")


def read_schema_file(r: CheckpointReader, rel: str) -> tuple[int, tuple[ColumnFamilySchema, ...]]:
    data = _DataInput(r.read_bytes(rel))
    try:
        return _parse_schema_file(r, rel, data)
    except _Truncated:
        r.fail(rel, f"truncated state schema file (ends at byte {len(data.data)})")
    except UnicodeError as exc:
        r.fail(rel, f"invalid modified UTF-8 string near byte {data.pos}: {exc}")


def _parse_schema_file(
    r: CheckpointReader, rel: str, data: _DataInput
) -> tuple[int, tuple[ColumnFamilySchema, ...]]:
    # StateSchemaCompatibilityChecker.readSchemaFile: writeUTF("v<n>") then the version's body.
    version = r.version(rel, _join_surrogates(data.read_utf_raw()), _MAX_SCHEMA_VERSION)
    if version == 1:
        # SchemaV1Reader: readUTF(key schema JSON), readUTF(value schema JSON).
        key = _join_surrogates(data.read_utf_raw())
        value = _join_surrogates(data.read_utf_raw())
        cf = ColumnFamilySchema(
            DEFAULT_COL_FAMILY_NAME,
            _struct_json(r, rel, key, "the key schema"),
            _struct_json(r, rel, value, "the value schema"),
        )
        return version, (cf,)
    if version == 2:
        # SchemaV2Reader: key and value schema JSON, each as (int count, count x readUTF).
        key = _read_chunks(r, rel, data)
        value = _read_chunks(r, rel, data)
        cf = ColumnFamilySchema(
            DEFAULT_COL_FAMILY_NAME,
            _struct_json(r, rel, key, "the key schema"),
            _struct_json(r, rel, value, "the value schema"),
        )
        return version, (cf,)
    # SchemaV3Reader (Spark 4): int count of column families, each: readUTF(name), short key
    # schema id, key schema (chunks), short value schema id, value schema (chunks),
    # KeyStateEncoderSpec JSON (chunks), user key encoder schema (chunks; "{    }" for none).
    count = data.read_int()
    if count < 0 or count > len(data.data):
        r.fail(rel, f"impossible column family count {count}")
    families: list[ColumnFamilySchema] = []
    seen: set[str] = set()
    for _ in range(count):
        name = _join_surrogates(data.read_utf_raw())
        key_id = data.read_short()
        key = _read_chunks(r, rel, data)
        value_id = data.read_short()
        value = _read_chunks(r, rel, data)
        spec = _read_chunks(r, rel, data)
        user_key = _read_chunks(r, rel, data)
        spec_obj = r.json(rel, spec, f"the key encoder spec of {quoted(name)}")
        if not isinstance(spec_obj, dict):
            r.fail(rel, f"the key encoder spec of {quoted(name)} must be a JSON object")
        user_obj = r.json(rel, user_key, f"the user key schema of {quoted(name)}")
        user_json = None if user_obj == {} else _struct_json(r, rel, user_key, "a user key schema")
        if name in seen:
            r.fail(rel, f"column family {quoted(name)} appears twice")
        seen.add(name)
        families.append(
            ColumnFamilySchema(
                name=name,
                key_schema_json=_struct_json(r, rel, key, f"the key schema of {quoted(name)}"),
                value_schema_json=_struct_json(
                    r, rel, value, f"the value schema of {quoted(name)}"
                ),
                key_schema_id=key_id,
                value_schema_id=value_id,
                key_state_encoder_spec_json=spec,
                user_key_encoder_schema_json=user_json,
            )
        )
    return version, tuple(families)


def _read_chunks(r: CheckpointReader, rel: str, data: _DataInput) -> str:
    # SchemaReader.readJsonSchema: a string written as 65535-character writeUTF chunks.
    count = data.read_int()
    if count < 0 or count > (len(data.data) - data.pos) // 2:
        r.fail(rel, f"impossible string chunk count {count} at byte {data.pos - 4}")
    return _join_surrogates("".join(data.read_utf_raw() for _ in range(count)))


def _struct_json(r: CheckpointReader, rel: str, text: str, what: str) -> str:
    """Checks ``text`` is a StructType's JSON (StructType.fromString) and returns it."""
    obj = r.json(rel, text, what)
    problem = struct_problem(obj)
    if problem:
        r.fail(rel, f"{what} is not a Spark struct type ({problem}): {quoted(text)}")
    return text


def struct_problem(obj: Any) -> str | None:
    # DataType.fromJson for a struct; nested types are checked no deeper than the top level.
    if not isinstance(obj, dict) or obj.get("type") != "struct":
        return 'not {"type": "struct", ...}'
    fields = obj.get("fields")
    if not isinstance(fields, list):
        return '"fields" is not an array'
    for i, f in enumerate(fields):
        if not isinstance(f, dict):
            return f"field {i} is not an object"
        if not isinstance(f.get("name"), str):
            return f'field {i} has no string "name"'
        if not isinstance(f.get("type"), (str, dict)):
            return f'field {i} has no "type"'
        if not isinstance(f.get("nullable"), bool):
            return f'field {i} has no boolean "nullable"'
        if "metadata" in f and not isinstance(f["metadata"], dict):
            return f'field {i} has a "metadata" that is not an object'
    return None
