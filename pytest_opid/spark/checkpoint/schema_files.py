"""State schema files (``state/<n>/<store>/_metadata/schema``, versions 1-3): Java
``DataOutput`` with modified UTF-8 and schemas as chunked JSON, read as Spark's
``StateSchemaCompatibilityChecker`` reads them."""

from __future__ import annotations

from typing import Any, NoReturn

from pytest_opid.io.java_data import DataInput
from pytest_opid.spark.checkpoint.files import CheckpointReader, quoted
from pytest_opid.spark.checkpoint.model import ColumnFamilySchema
from pytest_opid.spark.vocabulary import DEFAULT_COL_FAMILY_NAME

_MAX_SCHEMA_VERSION = 3


class _SchemaInput(DataInput):
    """The java.io.DataInputStream calls SchemaHelper's readers use; a problem is the
    checkpoint reader's, naming the schema file."""

    __slots__ = ("reader", "rel")

    def __init__(self, data: bytes, reader: CheckpointReader, rel: str) -> None:
        super().__init__(data)
        self.reader = reader
        self.rel = rel

    def fail(self, problem: str, at: int | None = None) -> NoReturn:
        if problem == "truncated":
            self.reader.fail(self.rel, f"truncated state schema file (ends at byte {self.end})")
        self.reader.fail(self.rel, f"{problem} at byte {self.pos if at is None else at}")


def read_schema_file(r: CheckpointReader, rel: str) -> tuple[int, tuple[ColumnFamilySchema, ...]]:
    return _parse_schema_file(r, rel, _SchemaInput(r.read_bytes(rel), r, rel))


def _parse_schema_file(
    r: CheckpointReader, rel: str, data: _SchemaInput
) -> tuple[int, tuple[ColumnFamilySchema, ...]]:
    # StateSchemaCompatibilityChecker.readSchemaFile: writeUTF("v<n>") then the version's body.
    version = r.version(rel, data.utf(), _MAX_SCHEMA_VERSION)
    if version == 1:
        # SchemaV1Reader: readUTF(key schema JSON), readUTF(value schema JSON).
        key = data.utf()
        value = data.utf()
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
    count = data.i32()
    if count < 0 or count > data.end:
        r.fail(rel, f"impossible column family count {count}")
    families: list[ColumnFamilySchema] = []
    seen: set[str] = set()
    for _ in range(count):
        name = data.utf()
        key_id = data.i16()
        key = _read_chunks(r, rel, data)
        value_id = data.i16()
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


def _read_chunks(r: CheckpointReader, rel: str, data: _SchemaInput) -> str:
    # SchemaReader.readJsonSchema: a string written as 65535-character writeUTF chunks.
    count = data.i32()
    if count < 0 or count > (data.end - data.pos) // 2:
        r.fail(rel, f"impossible string chunk count {count} at byte {data.pos - 4}")
    at = data.pos
    return data.text("".join(data.utf_units() for _ in range(count)), at)


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
