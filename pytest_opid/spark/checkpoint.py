"""Read a Spark Structured Streaming checkpoint directory, in pure Python (no JVM).

Whether a changed query can restart on an old checkpoint is decided by what Spark wrote there:
the state operators with their names, the key and value schema of every state store, the number
and order of the sources, and the confs the offset log pins (shuffle partitions, state format
versions, state store provider...). :func:`read_checkpoint` reads exactly those files, the way
Spark 4.x reads them, so that a tool can compare them with a new query before it is deployed,
without starting Spark. It reads a few small files (the latest offset and commit log entries,
operator metadata, schema files), never the state data itself.

Every file is untrusted: any problem raises :class:`~pytest_opid.errors.DocumentError` with one
line naming the file and what is wrong.
"""

from __future__ import annotations

import bisect
import json
import math
import os
import re
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from types import MappingProxyType
from typing import Any, NoReturn

from pytest_opid.errors import DocumentError
from pytest_opid.io.json import not_regular
from pytest_opid.spark.tws import user_variables, variable_text

__all__ = [
    "Checkpoint",
    "ColumnFamilySchema",
    "SourceOffset",
    "StateOperatorMetadata",
    "StateStoreMetadata",
    "StateVariableInfo",
    "read_checkpoint",
    "render_text",
    "schema_fields",
]

# Spark's StateStoreId.DEFAULT_STORE_NAME and StateStore.DEFAULT_COL_FAMILY_NAME.
DEFAULT_STORE_NAME = "default"
DEFAULT_COL_FAMILY_NAME = "default"

# Highest versions Spark 4.3 reads: OffsetSeqLog.MAX_VERSION, CommitLog.MAX_VERSION,
# OperatorStateMetadata (v1 file or v2 log), SchemaHelper.SchemaReader, FileStreamSourceLog.
_MAX_OFFSET_LOG_VERSION = 2
_MAX_COMMIT_LOG_VERSION = 2
_MAX_OPERATOR_METADATA_VERSION = 2
_MAX_SCHEMA_VERSION = 3
_FILE_SOURCE_LOG_VERSION = 1

_MAX_FILE_BYTES = 64 * 1024 * 1024  # no checkpoint metadata file comes near this
_QUOTE_CHARS = 80
_MAX_LOG_BATCHES = 1_000_000  # file source log batches one query batch may span
_RENDER_DEPTH = 16  # nesting depth of a data type that render_text spells out
_BATCH_NAME = re.compile(r"[0-9]{1,18}")  # HDFSMetadataLog batch files: the batch id as name
_COMPACT_NAME = re.compile(r"([0-9]{1,18})\.compact")  # CompactibleFileStreamLog
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # java.io.BufferedReader.readLine

# ---------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class SourceOffset:
    """One source of the latest offset log entry (``OffsetSeq`` / ``OffsetMap``).

    ``source_id`` is the source's position as text (``"0"``, ``"1"``...) for a v1 offset log,
    whose sources are matched by position, and the source's name for a v2 log (``OffsetMap``,
    named sources). ``offset`` is the offset JSON exactly as Spark wrote it, None for ``-`` (no
    offset yet). For a file source (offset ``{"logOffset": n}``, ``FileStreamSourceOffset``),
    ``files`` are the paths the last committed batch read, from ``sources/<source_id>/``; None
    for other sources.
    """

    position: int
    source_id: str
    offset: str | None
    files: tuple[str, ...] | None = None


@dataclass(frozen=True)
class ColumnFamilySchema:
    """One column family of a state store schema file (``StateStoreColFamilySchema``).

    Schema files v1 and v2 hold one, named ``default``; v3 (``transformWithState``) one per state
    variable and internal column family. Schemas are kept as the JSON text Spark wrote
    (``StructType.json``); :attr:`key_schema` and :attr:`value_schema` parse it.
    """

    name: str
    key_schema_json: str
    value_schema_json: str
    key_schema_id: int | None = None
    value_schema_id: int | None = None
    key_state_encoder_spec_json: str | None = None
    user_key_encoder_schema_json: str | None = None

    @property
    def key_schema(self) -> dict[str, Any]:
        return _reparse(self.key_schema_json)

    @property
    def value_schema(self) -> dict[str, Any]:
        return _reparse(self.value_schema_json)

    @property
    def key_state_encoder_spec(self) -> dict[str, Any] | None:
        if self.key_state_encoder_spec_json is None:
            return None
        return _reparse(self.key_state_encoder_spec_json)

    @property
    def user_key_encoder_schema(self) -> dict[str, Any] | None:
        if self.user_key_encoder_schema_json is None:
            return None
        return _reparse(self.user_key_encoder_schema_json)


@dataclass(frozen=True)
class StateStoreMetadata:
    """One state store of a stateful operator (``StateStoreMetadataV1`` / ``V2``) and its schema.

    ``schema_file`` is the schema file Spark compares a restarted query with, relative to the
    checkpoint: ``state/<op>/0[/<store>]/_metadata/schema`` for operator metadata v1, the last
    of ``stateSchemaFilePaths`` for v2. None when there is none (Spark writes one at restart
    then, without a check). ``num_cols_prefix_key`` is None for v2, which does not record it.
    """

    name: str
    num_partitions: int | None
    num_cols_prefix_key: int | None
    schema_version: int | None
    schema_file: str | None
    column_families: tuple[ColumnFamilySchema, ...] = ()
    schema_files: tuple[str, ...] = ()

    def column_family(self, name: str = DEFAULT_COL_FAMILY_NAME) -> ColumnFamilySchema | None:
        for cf in self.column_families:
            if cf.name == name:
                return cf
        return None

    @property
    def key_schema(self) -> dict[str, Any] | None:
        """The key schema of the ``default`` column family (all a v1/v2 schema file holds)."""
        cf = self.column_family()
        return None if cf is None else cf.key_schema

    @property
    def value_schema(self) -> dict[str, Any] | None:
        cf = self.column_family()
        return None if cf is None else cf.value_schema


@dataclass(frozen=True)
class StateVariableInfo:
    """A ``transformWithState`` state variable (``TransformWithStateVariableInfo``)."""

    state_name: str
    state_variable_type: str
    ttl_enabled: bool


@dataclass(frozen=True)
class StateOperatorMetadata:
    """One stateful operator, from ``state/<operatorId>/_metadata`` (``OperatorStateMetadata``).

    ``metadata_version`` is 1 (``_metadata/metadata``), 2 (``_metadata/v2/<batch>``, the entry
    for the last committed batch, as Spark's ``state-metadata`` reader picks it) or 0 when the
    operator has no metadata (checkpoints of Spark before 3.5): then ``operator_name`` is None and
    the stores are the schema files found under partition 0. ``properties`` is the
    ``operatorPropertiesJson`` text of v2 (``transformWithState``: time mode, output mode, state
    variables), parsed into ``state_variables``.
    """

    operator_id: int
    operator_name: str | None
    stores: tuple[StateStoreMetadata, ...]
    num_partitions: int | None
    properties: str | None
    metadata_version: int
    metadata_file: str | None
    state_variables: tuple[StateVariableInfo, ...] = ()

    def store(self, name: str = DEFAULT_STORE_NAME) -> StateStoreMetadata | None:
        for st in self.stores:
            if st.name == name:
                return st
        return None


@dataclass(frozen=True)
class Checkpoint:
    """What a checkpoint pins for a restarted query.

    ``last_batch`` is the latest batch of the offset log, ``last_committed_batch`` of the commit
    log (None when there is none). ``sources``, ``confs``, the watermark and timestamp come from
    the latest offset log entry: at restart Spark takes its confs over the session's and matches
    its sources with the query's. ``committed_watermark_ms`` is the last commit's
    ``nextBatchWatermarkMs``.
    """

    path: str
    query_id: str
    offset_log_version: int | None
    last_batch: int | None
    last_committed_batch: int | None
    batch_watermark_ms: int | None
    batch_timestamp_ms: int | None
    committed_watermark_ms: int | None
    sources: tuple[SourceOffset, ...]
    confs: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    state_operators: tuple[StateOperatorMetadata, ...] = ()

    def operator(self, operator_id: int) -> StateOperatorMetadata | None:
        for op in self.state_operators:
            if op.operator_id == operator_id:
                return op
        return None

    def to_dict(self) -> dict[str, Any]:
        """Everything read, as plain JSON-able values (schemas as parsed JSON)."""
        return {
            "path": self.path,
            "query_id": self.query_id,
            "offset_log_version": self.offset_log_version,
            "last_batch": self.last_batch,
            "last_committed_batch": self.last_committed_batch,
            "batch_watermark_ms": self.batch_watermark_ms,
            "batch_timestamp_ms": self.batch_timestamp_ms,
            "committed_watermark_ms": self.committed_watermark_ms,
            "confs": dict(sorted(self.confs.items())),
            "sources": [
                {
                    "position": s.position,
                    "source_id": s.source_id,
                    "offset": s.offset,
                    "files": None if s.files is None else list(s.files),
                }
                for s in self.sources
            ],
            "state_operators": [_operator_dict(op) for op in self.state_operators],
        }


def _user_variables(op: StateOperatorMetadata) -> dict[str, dict[str, Any]]:
    """A transformWithState operator's own state variables with their schemas, from its column
    families (:func:`~pytest_opid.spark.tws.user_variables`); empty for other operators."""
    if not op.state_variables:
        return {}
    families = {
        f"{st.name}/{cf.name}": (cf.key_schema_json, cf.value_schema_json)
        for st in op.stores
        for cf in st.column_families
    }
    return user_variables(families, op.properties)


def _operator_dict(op: StateOperatorMetadata) -> dict[str, Any]:
    schemas = _user_variables(op)
    return {
        "operator_id": op.operator_id,
        "operator_name": op.operator_name,
        "metadata_version": op.metadata_version,
        "metadata_file": op.metadata_file,
        "num_partitions": op.num_partitions,
        "properties": op.properties,
        "state_variables": [
            {
                "state_name": v.state_name,
                "state_variable_type": v.state_variable_type,
                "ttl_enabled": v.ttl_enabled,
                # the variable's own schemas (a TTL variable's value without Spark's wrapper;
                # a MapState's user key), None for Spark's timers
                "user_key_schema": schemas.get(v.state_name, {}).get("key"),
                "value_schema": schemas.get(v.state_name, {}).get("value"),
            }
            for v in op.state_variables
        ],
        "stores": [
            {
                "name": st.name,
                "num_partitions": st.num_partitions,
                "num_cols_prefix_key": st.num_cols_prefix_key,
                "schema_version": st.schema_version,
                "schema_file": st.schema_file,
                "schema_files": list(st.schema_files),
                "column_families": [
                    {
                        "name": cf.name,
                        "key_schema_id": cf.key_schema_id,
                        "key_schema": cf.key_schema,
                        "value_schema_id": cf.value_schema_id,
                        "value_schema": cf.value_schema,
                        "key_state_encoder_spec": cf.key_state_encoder_spec,
                        "user_key_encoder_schema": cf.user_key_encoder_schema,
                    }
                    for cf in st.column_families
                ],
            }
            for st in op.stores
        ],
    }


# ---------------------------------------------------------------------------------------------
# Errors, quoting and JSON


_UNSAFE_CHARS = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


def _escape_unsafe(text: str) -> str:
    return _UNSAFE_CHARS.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _quote(text: str, limit: int = _QUOTE_CHARS, around: int | None = None) -> str:
    """``text`` as a one-line JSON string literal of at most ``limit`` characters of it (those
    around position ``around`` when given)."""
    start = 0 if around is None else max(0, min(around - limit // 2, len(text) - limit))
    cut = text[start : start + limit]
    cut = ("\u2026" if start else "") + cut + ("\u2026" if start + limit < len(text) else "")
    return _escape_unsafe(json.dumps(cut, ensure_ascii=False))


def _show_path(path: str) -> str:
    """A path for a message: as is when harmless, else quoted."""
    return (
        path if _UNSAFE_CHARS.search(path) is None and path.strip() == path else _quote(path, 300)
    )


class _Reader:
    """Reads the files of one checkpoint and raises DocumentError naming the file."""

    def __init__(self, root: str) -> None:
        self.root = root

    def full(self, rel: str) -> str:
        return os.path.join(self.root, *rel.split("/"))

    def fail(self, rel: str, what: str) -> NoReturn:
        where = _show_path(self.full(rel) if rel else self.root)
        raise DocumentError(f"{where}: {what}".replace("\n", " "))

    def is_dir(self, rel: str) -> bool:
        return os.path.isdir(self.full(rel))

    def is_file(self, rel: str) -> bool:
        """Whether a regular file is at ``rel`` (a link followed). Anything else there (a
        directory, a FIFO, a device) is an error naming it, never skipped as if missing:
        Spark's readers would fail on it, not pass it by."""
        try:
            mode = os.stat(self.full(rel)).st_mode
        except (FileNotFoundError, NotADirectoryError):
            return False
        except (OSError, ValueError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            self.fail(rel, f"cannot examine it ({reason})")
        if stat.S_ISREG(mode):
            return True
        self.fail(rel, f"cannot read it: {not_regular(mode)}")

    def listdir(self, rel: str) -> list[str]:
        try:
            return sorted(os.listdir(self.full(rel)))
        except OSError as exc:
            self.fail(rel, f"cannot list the folder ({exc.strerror or type(exc).__name__})")

    def read_bytes(self, rel: str) -> bytes:
        path = self.full(rel)
        try:
            # Opened without blocking: a FIFO without a writer would keep open() waiting.
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except OSError as exc:
            self.fail(rel, f"cannot read the file ({exc.strerror or type(exc).__name__})")
        with os.fdopen(fd, "rb") as fh:
            mode = os.fstat(fh.fileno()).st_mode
            if not stat.S_ISREG(mode):
                self.fail(rel, f"cannot read it: {not_regular(mode)}")
            os.set_blocking(fd, True)
            try:
                data = fh.read(_MAX_FILE_BYTES + 1)
            except OSError as exc:
                self.fail(rel, f"cannot read the file ({exc.strerror or type(exc).__name__})")
        if len(data) > _MAX_FILE_BYTES:
            self.fail(rel, f"larger than {_MAX_FILE_BYTES} bytes, not a checkpoint metadata file")
        return data

    def read_text(self, rel: str) -> str:
        data = self.read_bytes(rel)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            self.fail(rel, f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})")

    def json(self, rel: str, text: str, what: str) -> Any:
        try:
            return _loads(text)
        except _JsonProblem as exc:
            self.fail(rel, f"{what} is not valid JSON ({exc}): {_quote(text, around=exc.pos)}")

    def version(self, rel: str, line: str, max_version: int) -> int:
        # MetadataVersionUtil.validateVersion: "v<positive int>", at most max_version.
        digits = line[1:]
        if (
            line[:1] != "v"
            or not (digits.isascii() and digits.isdigit() and len(digits) <= 9)
            or int(digits) <= 0
        ):
            self.fail(rel, f"malformed version line {_quote(line)}, expected v1..v{max_version}")
        version = int(digits)
        if version > max_version:
            self.fail(
                rel,
                f"unsupported version v{version}: Spark 4.3 reads this file up to v{max_version}",
            )
        return version


class _JsonProblem(Exception):
    def __init__(self, message: str, pos: int | None = None) -> None:
        super().__init__(message)
        self.pos = pos


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise _JsonProblem(f"duplicate key {_quote(key)}")
        obj[key] = value
    return obj


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _JsonProblem(f"number out of range {_quote(text)}")
    return value


def _no_constant(text: str) -> Any:
    raise _JsonProblem(f"{text} is not JSON")


def _loads(text: str) -> Any:
    try:
        return json.loads(
            text,
            object_pairs_hook=_no_duplicates,
            parse_float=_finite_float,
            parse_constant=_no_constant,
        )
    except json.JSONDecodeError as exc:
        raise _JsonProblem(f"{exc.msg}, line {exc.lineno} column {exc.colno}", exc.pos) from None
    except RecursionError:
        raise _JsonProblem("nested too deeply") from None
    except ValueError as exc:  # e.g. an integer beyond Python's digit limit
        raise _JsonProblem(str(exc)[:_QUOTE_CHARS]) from None


def _reparse(text: str) -> dict[str, Any]:
    # Only ever called on text _loads already accepted as an object.
    value = _loads(text)
    assert isinstance(value, dict)
    return value


def _java_lines(text: str) -> list[str]:
    """Lines as java.io.BufferedReader.readLine (and Scala's getLines) split them."""
    if not text:
        return []
    lines = _LINE_BREAK.split(text)
    if lines[-1] == "":
        lines.pop()
    return lines


def _java_trim(text: str) -> str:
    """java.lang.String.trim: drops characters up to U+0020 at both ends."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _field(
    r: _Reader, rel: str, obj: Mapping[str, Any], key: str, kind: str, *, required: bool = True
) -> Any:
    """obj[key] checked to be of ``kind`` (int, str, bool, object, array); None if absent."""
    if key not in obj:
        if required:
            r.fail(rel, f"missing {_quote(key)}")
        return None
    value = obj[key]
    ok = {
        "int": _is_int(value) and -(2**63) <= value < 2**63,  # a Java long
        "str": isinstance(value, str),
        "bool": isinstance(value, bool),
        "object": isinstance(value, dict),
        "array": isinstance(value, list),
    }[kind]
    if not ok:
        shown = _quote(json.dumps(value, ensure_ascii=False)) if _shallow(value) else type(value)
        r.fail(rel, f"{_quote(key)} must be {'an' if kind[0] in 'aio' else 'a'} {kind}: {shown}")
    return value


def _shallow(value: Any) -> bool:
    return not isinstance(value, (dict, list))


def _batch_files(r: _Reader, rel_dir: str) -> dict[int, str]:
    """Batch id -> file name of an HDFSMetadataLog folder (hidden and .crc files are skipped)."""
    found: dict[int, str] = {}
    for name in r.listdir(rel_dir):
        if _BATCH_NAME.fullmatch(name) and r.is_file(f"{rel_dir}/{name}"):
            batch = int(name)
            if batch in found:
                r.fail(f"{rel_dir}/{name}", f"batch {batch} is also in {_quote(found[batch])}")
            found[batch] = name
    return found


# ---------------------------------------------------------------------------------------------
# StreamMetadata, OffsetSeqLog, CommitLog


def _read_query_id(r: _Reader) -> str:
    # StreamMetadata: the file `metadata`, {"id": "<query id>"}.
    rel = "metadata"
    if not r.is_file(rel):
        r.fail(rel, "missing: not a Spark streaming checkpoint (no stream metadata file)")
    obj = r.json(rel, r.read_text(rel), "the stream metadata")
    if not isinstance(obj, dict):
        r.fail(rel, "the stream metadata must be a JSON object")
    return str(_field(r, rel, obj, "id", "str"))


@dataclass(frozen=True)
class _OffsetEntry:
    version: int
    watermark_ms: int | None
    timestamp_ms: int | None
    confs: dict[str, str]
    sources: tuple[tuple[str, str | None], ...]  # (source id, offset JSON or None)


def _read_offsets(r: _Reader, rel: str) -> _OffsetEntry:
    # OffsetSeqLog: "v1" + metadata JSON line + one offset JSON per source ("-": none), or
    # "v2" (OffsetMap, named sources) + metadata + one "<sourceId>:<offset JSON>" per source.
    lines = _java_lines(r.read_text(rel))
    if not lines:
        r.fail(rel, "empty offset log file")
    version = r.version(rel, lines[0], _MAX_OFFSET_LOG_VERSION)
    if len(lines) < 2:
        r.fail(rel, "no metadata line after the version line")
    watermark = timestamp = None
    confs: dict[str, str] = {}
    meta_text = _java_trim(lines[1])
    if meta_text:
        # OffsetSeqMetadata / OffsetSeqMetadataV2
        meta = r.json(rel, meta_text, "the offset metadata (line 2)")
        if not isinstance(meta, dict):
            r.fail(rel, "the offset metadata (line 2) must be a JSON object")
        watermark = _field(r, rel, meta, "batchWatermarkMs", "int", required=False)
        timestamp = _field(r, rel, meta, "batchTimestampMs", "int", required=False)
        conf = _field(r, rel, meta, "conf", "object", required=False) or {}
        for key, value in conf.items():
            if not isinstance(value, str):
                r.fail(rel, f"conf {_quote(key)} must be a string")
            confs[key] = value
    elif version == 2:
        r.fail(rel, "a v2 offset log entry needs its metadata line")
    sources: list[tuple[str, str | None]] = []
    seen: set[str] = set()  # a set: one scan of the sources per source is quadratic time
    for number, line in enumerate(lines[2:], start=3):
        if version == 2:
            source_id, colon, offset_text = line.partition(":")
            if not colon:
                r.fail(rel, f"line {number} is not <sourceId>:<offset>: {_quote(line)}")
            if source_id in seen:
                r.fail(rel, f"source {_quote(source_id)} appears twice")
            seen.add(source_id)
        else:
            source_id, offset_text = str(len(sources)), line
        if offset_text == "-":  # OffsetSeqLog.SERIALIZED_VOID_OFFSET
            sources.append((source_id, None))
            continue
        r.json(rel, offset_text, f"the offset on line {number}")
        sources.append((source_id, offset_text))
    return _OffsetEntry(version, watermark, timestamp, confs, tuple(sources))


def _read_commit_watermark(r: _Reader, rel: str) -> int | None:
    # CommitLog: version line, then optional CommitMetadata JSON (nextBatchWatermarkMs, and in v2
    # the state store unique ids).
    lines = _java_lines(r.read_text(rel))
    if not lines:
        r.fail(rel, "incomplete commit log file (empty)")
    r.version(rel, _java_trim(lines[0]), _MAX_COMMIT_LOG_VERSION)
    meta = r.json(rel, lines[1], "the commit metadata (line 2)") if len(lines) > 1 else {}
    if not isinstance(meta, dict):
        r.fail(rel, "the commit metadata (line 2) must be a JSON object")
    watermark: int | None = _field(r, rel, meta, "nextBatchWatermarkMs", "int", required=False)
    return 0 if watermark is None else watermark


# ---------------------------------------------------------------------------------------------
# FileStreamSourceLog


def _file_source_log_offset(offset: str | None) -> int | None:
    """n for a FileStreamSourceOffset {"logOffset": n}, else None."""
    if offset is None:
        return None
    try:
        value = _loads(offset)
    except _JsonProblem:
        return None
    if isinstance(value, dict) and set(value) == {"logOffset"} and _is_int(value["logOffset"]):
        return int(value["logOffset"])
    return None


def _read_file_source_files(r: _Reader, source_id: str, start: int, end: int) -> tuple[str, ...]:
    """Paths of the FileStreamSourceLog batches start+1..end (what one query batch read)."""
    if end <= start:
        return ()
    rel_dir = f"sources/{source_id}"
    if not _safe_component(source_id):
        r.fail("sources", f"source id {_quote(source_id)} is not a folder name")
    if end - start > _MAX_LOG_BATCHES:
        r.fail(rel_dir, f"one query batch cannot read log batches {start + 1}..{end}")
    if not r.is_dir(rel_dir):
        r.fail(rel_dir, f"missing: the file source log of its log batches {start + 1}..{end}")
    plain: dict[int, str] = {}
    compact: dict[int, str] = {}
    for name in r.listdir(rel_dir):
        if _BATCH_NAME.fullmatch(name):
            plain[int(name)] = name
        elif (m := _COMPACT_NAME.fullmatch(name)) is not None:
            compact[int(m.group(1))] = name
    compact_ids = sorted(compact)
    low, high = start + 1, end
    # CompactibleFileStreamLog folds every batch up to a compaction batch into
    # "<batch>.compact": a batch without its own file is in the next compaction's. Past the
    # last compaction every batch needs its own file; the first one without is reported.
    tail = max(low, (compact_ids[-1] + 1) if compact_ids else low)
    if tail <= high:
        own = sorted(b for b in plain if tail <= b <= high)
        for batch, found in zip(range(tail, high + 1), [*own, None], strict=False):
            if batch != found:
                r.fail(rel_dir, f"no log file holds file source batch {batch}")
    parsed: dict[str, dict[int, list[str]]] = {}

    def entries(name: str) -> dict[int, list[str]]:
        # Each log file read once, its entries grouped by batch: the work is the files' size,
        # whatever the span of batches (a large logOffset) and however many share a file.
        if name not in parsed:
            grouped: dict[int, list[str]] = {}
            for b, path in _read_file_source_log(r, f"{rel_dir}/{name}"):
                grouped.setdefault(b, []).append(path)
            parsed[name] = grouped
        return parsed[name]

    # FileStreamSourceLog.get keeps, per batch, the entries of that batch from its file.
    chosen = [(b, entries(plain[b]).get(b, [])) for b in sorted(plain) if low <= b <= high]
    i = bisect.bisect_left(compact_ids, low)
    previous = compact_ids[i - 1] if i else -1
    while i < len(compact_ids) and previous < high:
        holds = range(max(previous + 1, low), min(compact_ids[i], high) + 1)
        for b, paths in entries(compact[compact_ids[i]]).items():
            if b in holds and b not in plain:
                chosen.append((b, paths))
        previous = compact_ids[i]
        i += 1
    chosen.sort(key=lambda item: item[0])  # one entry list per batch, in batch order
    return tuple(path for _, paths in chosen for path in paths)


def _read_file_source_log(r: _Reader, rel: str) -> list[tuple[int, str]]:
    # CompactibleFileStreamLog / FileStreamSourceLog: "v1", then one FileEntry JSON per line
    # ({"path": ..., "timestamp": ..., "batchId": ...}).
    lines = _java_lines(r.read_text(rel))
    if not lines:
        r.fail(rel, "incomplete log file (empty)")
    r.version(rel, lines[0], _FILE_SOURCE_LOG_VERSION)
    out: list[tuple[int, str]] = []
    for number, line in enumerate(lines[1:], start=2):
        entry = r.json(rel, line, f"line {number}")
        if not isinstance(entry, dict):
            r.fail(rel, f"line {number} must be a JSON object")
        path = _field(r, rel, entry, "path", "str")
        batch = _field(r, rel, entry, "batchId", "int")
        _field(r, rel, entry, "timestamp", "int")
        out.append((batch, path))
    return out


# ---------------------------------------------------------------------------------------------
# Operator state metadata


def _read_operators(r: _Reader, last_committed: int | None) -> tuple[StateOperatorMetadata, ...]:
    # StateMetadataPartitionReader: every state/<operatorId>, metadata v2 where
    # _metadata/v2 exists, else v1.
    if not r.is_dir("state"):
        return ()
    op_dirs: dict[int, str] = {}
    for name in r.listdir("state"):
        if _BATCH_NAME.fullmatch(name):
            if int(name) in op_dirs:
                r.fail(
                    f"state/{name}", f"operator {int(name)} is also in state/{op_dirs[int(name)]}"
                )
            op_dirs[int(name)] = name
    for op_id, name in op_dirs.items():
        if name != str(op_id):
            r.fail(f"state/{name}", f"not the folder Spark names operator {op_id} by")
    return tuple(_read_operator(r, op_id, last_committed) for op_id in sorted(op_dirs))


def _read_operator(r: _Reader, op_id: int, last_committed: int | None) -> StateOperatorMetadata:
    op_dir = f"state/{op_id}"
    if r.is_dir(f"{op_dir}/_metadata/v2"):
        # OperatorStateMetadataV2Reader: the latest _metadata/v2/<batch> at or before the batch
        # (the last committed one; 0 when none is committed).
        batch = 0 if last_committed is None else last_committed
        batches = [b for b in _batch_files(r, f"{op_dir}/_metadata/v2") if b <= batch]
        if not batches:
            r.fail(f"{op_dir}/_metadata/v2", f"no operator metadata for batch {batch} or before")
        rel = f"{op_dir}/_metadata/v2/{max(batches)}"
        return _read_operator_file(r, rel, op_id, 2)
    rel = f"{op_dir}/_metadata/metadata"
    if r.is_file(rel):
        return _read_operator_file(r, rel, op_id, 1)
    return _discover_operator(r, op_id)


def _read_operator_file(r: _Reader, rel: str, op_id: int, expected: int) -> StateOperatorMetadata:
    # OperatorStateMetadataUtils.readMetadata: version line, then OperatorStateMetadataV1 / V2
    # JSON (operatorInfo, stateStoreInfo[, operatorPropertiesJson]).
    text = r.read_text(rel)
    first = _LINE_BREAK.search(text)
    version_line = text if first is None else text[: first.start()]
    version = r.version(rel, version_line, _MAX_OPERATOR_METADATA_VERSION)
    if version != expected:
        r.fail(rel, f"expected version v{expected}, but found v{version}")
    if first is None or not text[first.end() :].strip():
        r.fail(rel, "no operator metadata after the version line")
    obj = r.json(rel, text[first.end() :], "the operator metadata")
    if not isinstance(obj, dict):
        r.fail(rel, "the operator metadata must be a JSON object")
    info = _field(r, rel, obj, "operatorInfo", "object")
    meta_id = _field(r, rel, info, "operatorId", "int")
    name = _field(r, rel, info, "operatorName", "str")
    if meta_id != op_id:
        r.fail(rel, f"operatorId {meta_id} is not its folder's state/{op_id}")
    stores_json = _field(r, rel, obj, "stateStoreInfo", "array")
    properties: str | None = None
    variables: tuple[StateVariableInfo, ...] = ()
    if version == 2:
        properties = _field(r, rel, obj, "operatorPropertiesJson", "str")
        variables = _state_variables(r, rel, properties)
    stores: list[StateStoreMetadata] = []
    seen: set[str] = set()
    for store_json in stores_json:
        if not isinstance(store_json, dict):
            r.fail(rel, "every stateStoreInfo entry must be a JSON object")
        store_name = _field(r, rel, store_json, "storeName", "str")
        if store_name in seen:
            r.fail(rel, f"state store {_quote(store_name)} is listed twice")
        seen.add(store_name)
        stores.append(_read_store(r, rel, op_id, version, store_json))
    partitions = {st.num_partitions for st in stores}
    return StateOperatorMetadata(
        operator_id=op_id,
        operator_name=name,
        stores=tuple(stores),
        num_partitions=partitions.pop() if len(partitions) == 1 else None,
        properties=properties,
        metadata_version=version,
        metadata_file=rel,
        state_variables=variables,
    )


def _state_variables(r: _Reader, rel: str, properties: str) -> tuple[StateVariableInfo, ...]:
    props = r.json(rel, properties, "operatorPropertiesJson")
    if not isinstance(props, dict):
        r.fail(rel, "operatorPropertiesJson must hold a JSON object")
    out: list[StateVariableInfo] = []
    for var in _field(r, rel, props, "stateVariables", "array", required=False) or []:
        if not isinstance(var, dict):
            r.fail(rel, "every state variable in operatorPropertiesJson must be an object")
        out.append(
            StateVariableInfo(
                state_name=_field(r, rel, var, "stateName", "str"),
                state_variable_type=_field(r, rel, var, "stateVariableType", "str"),
                ttl_enabled=_field(r, rel, var, "ttlEnabled", "bool"),
            )
        )
    return tuple(out)


def _read_store(
    r: _Reader, rel: str, op_id: int, version: int, store_json: dict[str, Any]
) -> StateStoreMetadata:
    name = _field(r, rel, store_json, "storeName", "str")
    partitions = _field(r, rel, store_json, "numPartitions", "int")
    prefix = _field(r, rel, store_json, "numColsPrefixKey", "int", required=version == 1)
    if version == 1:
        # StateSchemaCompatibilityChecker: partition 0's store folder, _metadata/schema.
        if not _safe_component(name):
            r.fail(rel, f"store name {_quote(name)} is not a folder name")
        store_dir = f"state/{op_id}/0" if name == DEFAULT_STORE_NAME else f"state/{op_id}/0/{name}"
        schema_rel = f"{store_dir}/_metadata/schema"
        schema_files: tuple[str, ...] = ()
        if not r.is_file(schema_rel):
            return StateStoreMetadata(name, partitions, prefix, None, None)
    else:
        # StateStoreMetadataV2.stateSchemaFilePaths: absolute paths of the run; the last one is
        # the current schema (StateSchemaCompatibilityChecker takes oldSchemaFilePaths.last).
        paths = _field(r, rel, store_json, "stateSchemaFilePaths", "array")
        resolved: list[str] = []
        for path in paths:
            if not isinstance(path, str):
                r.fail(rel, "stateSchemaFilePaths must hold strings")
            resolved.append(_resolve_schema_path(r, rel, op_id, path))
        schema_files = tuple(resolved)
        if not schema_files:
            return StateStoreMetadata(name, partitions, prefix, None, None)
        schema_rel = schema_files[-1]
        if not r.is_file(schema_rel):
            r.fail(schema_rel, "missing: the state schema file the operator metadata names")
    schema_version, families = _read_schema_file(r, schema_rel)
    return StateStoreMetadata(
        name=name,
        num_partitions=partitions,
        num_cols_prefix_key=prefix,
        schema_version=schema_version,
        schema_file=schema_rel,
        column_families=families,
        schema_files=schema_files,
    )


def _safe_component(name: str) -> bool:
    return bool(name) and name not in (".", "..") and "/" not in name and "\\" not in name


def _resolve_schema_path(r: _Reader, rel: str, op_id: int, path: str) -> str:
    """A recorded schema file path, as a path inside this checkpoint.

    The path is the run's absolute one (``file:/.../state/<op>/_stateSchema/<store>/<file>``, see
    StateSchemaV3File); the checkpoint may have moved, so only its part from
    ``state/<op>/_stateSchema`` on is used.
    """
    parts = path.split("/")
    for i in range(len(parts) - 3, -1, -1):
        if parts[i : i + 3] == ["state", str(op_id), "_stateSchema"]:
            tail = parts[i + 3 :]
            if tail and all(_safe_component(p) for p in tail):
                return "/".join(["state", str(op_id), "_stateSchema", *tail])
            break
    r.fail(rel, f"schema file path {_quote(path)} is not under state/{op_id}/_stateSchema/")


def _discover_operator(r: _Reader, op_id: int) -> StateOperatorMetadata:
    """An operator without metadata (before Spark 3.5): its stores from partition 0's schemas."""
    op_dir = f"state/{op_id}"
    partitions = [n for n in r.listdir(op_dir) if _BATCH_NAME.fullmatch(n)]
    stores: list[StateStoreMetadata] = []
    part0 = f"{op_dir}/0"
    if r.is_dir(part0):
        names = [DEFAULT_STORE_NAME] + [
            n
            for n in r.listdir(part0)
            if n[:1] not in "._" and n != DEFAULT_STORE_NAME and r.is_dir(f"{part0}/{n}")
        ]
        for name in names:
            store_dir = part0 if name == DEFAULT_STORE_NAME else f"{part0}/{name}"
            schema_rel = f"{store_dir}/_metadata/schema"
            if r.is_file(schema_rel):
                version, families = _read_schema_file(r, schema_rel)
                stores.append(
                    StateStoreMetadata(
                        name, None, None, version, schema_rel, column_families=families
                    )
                )
    return StateOperatorMetadata(
        operator_id=op_id,
        operator_name=None,
        stores=tuple(stores),
        num_partitions=len(partitions) or None,
        properties=None,
        metadata_version=0,
        metadata_file=None,
    )


# ---------------------------------------------------------------------------------------------
# State schema files (SchemaHelper), written with java.io.DataOutputStream


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


def _read_schema_file(r: _Reader, rel: str) -> tuple[int, tuple[ColumnFamilySchema, ...]]:
    data = _DataInput(r.read_bytes(rel))
    try:
        return _parse_schema_file(r, rel, data)
    except _Truncated:
        r.fail(rel, f"truncated state schema file (ends at byte {len(data.data)})")
    except UnicodeError as exc:
        r.fail(rel, f"invalid modified UTF-8 string near byte {data.pos}: {exc}")


def _parse_schema_file(
    r: _Reader, rel: str, data: _DataInput
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
        spec_obj = r.json(rel, spec, f"the key encoder spec of {_quote(name)}")
        if not isinstance(spec_obj, dict):
            r.fail(rel, f"the key encoder spec of {_quote(name)} must be a JSON object")
        user_obj = r.json(rel, user_key, f"the user key schema of {_quote(name)}")
        user_json = None if user_obj == {} else _struct_json(r, rel, user_key, "a user key schema")
        if name in seen:
            r.fail(rel, f"column family {_quote(name)} appears twice")
        seen.add(name)
        families.append(
            ColumnFamilySchema(
                name=name,
                key_schema_json=_struct_json(r, rel, key, f"the key schema of {_quote(name)}"),
                value_schema_json=_struct_json(
                    r, rel, value, f"the value schema of {_quote(name)}"
                ),
                key_schema_id=key_id,
                value_schema_id=value_id,
                key_state_encoder_spec_json=spec,
                user_key_encoder_schema_json=user_json,
            )
        )
    return version, tuple(families)


def _read_chunks(r: _Reader, rel: str, data: _DataInput) -> str:
    # SchemaReader.readJsonSchema: a string written as 65535-character writeUTF chunks.
    count = data.read_int()
    if count < 0 or count > (len(data.data) - data.pos) // 2:
        r.fail(rel, f"impossible string chunk count {count} at byte {data.pos - 4}")
    return _join_surrogates("".join(data.read_utf_raw() for _ in range(count)))


def _struct_json(r: _Reader, rel: str, text: str, what: str) -> str:
    """Checks ``text`` is a StructType's JSON (StructType.fromString) and returns it."""
    obj = r.json(rel, text, what)
    problem = _struct_problem(obj)
    if problem:
        r.fail(rel, f"{what} is not a Spark struct type ({problem}): {_quote(text)}")
    return text


def _struct_problem(obj: Any) -> str | None:
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


# ---------------------------------------------------------------------------------------------
# Entry points


def read_checkpoint(path: str | os.PathLike[str]) -> Checkpoint:
    """Read the checkpoint directory ``path`` (the query's ``checkpointLocation``).

    Raises :class:`DocumentError` for anything that is not a readable Spark checkpoint.
    """
    root = os.fspath(path)
    r = _Reader(root)
    if not os.path.isdir(root):
        r.fail("", "not a directory")
    query_id = _read_query_id(r)
    if not r.is_dir("offsets"):
        r.fail("offsets", "missing: not a Spark streaming checkpoint (no offset log)")
    offset_files = _batch_files(r, "offsets")
    commit_files = _batch_files(r, "commits") if r.is_dir("commits") else {}
    last_batch = max(offset_files) if offset_files else None
    last_committed = max(commit_files) if commit_files else None
    if last_committed is not None and last_committed not in offset_files:
        r.fail(
            f"commits/{commit_files[last_committed]}",
            f"batch {last_committed} is committed but has no offset log entry",
        )

    latest = (
        _read_offsets(r, f"offsets/{offset_files[last_batch]}") if last_batch is not None else None
    )
    committed_watermark = (
        _read_commit_watermark(r, f"commits/{commit_files[last_committed]}")
        if last_committed is not None
        else None
    )
    sources = _sources(r, latest, offset_files, last_committed)
    return Checkpoint(
        path=root,
        query_id=query_id,
        offset_log_version=None if latest is None else latest.version,
        last_batch=last_batch,
        last_committed_batch=last_committed,
        batch_watermark_ms=None if latest is None else latest.watermark_ms,
        batch_timestamp_ms=None if latest is None else latest.timestamp_ms,
        committed_watermark_ms=committed_watermark,
        sources=sources,
        confs=MappingProxyType({} if latest is None else dict(latest.confs)),
        state_operators=_read_operators(r, last_committed),
    )


def _sources(
    r: _Reader,
    latest: _OffsetEntry | None,
    offset_files: dict[int, str],
    last_committed: int | None,
) -> tuple[SourceOffset, ...]:
    if latest is None:
        return ()
    # The files the last committed batch read: FileStreamSource.getBatch(start, end) reads the log
    # batches after the previous batch's logOffset up to this batch's.
    committed: dict[str, str | None] = {}
    before: dict[str, str | None] = {}
    if last_committed is not None:
        entry = (
            latest
            if last_committed == max(offset_files)
            else _read_offsets(r, f"offsets/{offset_files[last_committed]}")
        )
        committed = dict(entry.sources)
        previous = last_committed - 1
        if previous in offset_files:
            before = dict(_read_offsets(r, f"offsets/{offset_files[previous]}").sources)
    out: list[SourceOffset] = []
    for position, (source_id, offset) in enumerate(latest.sources):
        files: tuple[str, ...] | None = None
        if _file_source_log_offset(offset) is not None:
            end = _file_source_log_offset(committed.get(source_id))
            start = _file_source_log_offset(before.get(source_id))
            files = (
                ()
                if end is None
                else _read_file_source_files(r, source_id, -1 if start is None else start, end)
            )
        out.append(SourceOffset(position, source_id, offset, files))
    return tuple(out)


def schema_fields(schema: Mapping[str, Any] | str) -> tuple[tuple[str, str, bool], ...]:
    """The top-level fields of a struct type as (name, type JSON, nullable).

    The type is canonical JSON text (sorted keys, no spaces), so two schemas compare equal field
    by field whatever key order their JSON had. Field metadata is left out. Raises DocumentError
    when ``schema`` is not a struct type's JSON.
    """
    try:
        obj = _loads(schema) if isinstance(schema, str) else schema
    except _JsonProblem as exc:
        raise DocumentError(f"schema is not valid JSON ({exc})") from None
    problem = _struct_problem(obj)
    if problem:
        raise DocumentError(f"not a Spark struct type: {problem}")
    out: list[tuple[str, str, bool]] = []
    for f in obj["fields"]:
        try:
            type_json = json.dumps(f["type"], sort_keys=True, separators=(",", ":"))
        except (RecursionError, TypeError, ValueError):
            raise DocumentError(f"field {_quote(f['name'])} has an unreadable type") from None
        out.append((f["name"], type_json, f["nullable"]))
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# Text summary


def _name(text: str) -> str:
    return _quote(text, 500)


def _type_text(t: Any, depth: int = 0) -> str:
    """A data type's JSON as short text, e.g. struct<"a": long, "b": array<string>>."""
    if depth > _RENDER_DEPTH:
        return "\u2026"
    if isinstance(t, str):
        return t if re.fullmatch(r"[a-z][a-z0-9_(), ]{0,60}", t) else _name(t)
    if isinstance(t, dict):
        kind = t.get("type")
        if kind == "struct" and isinstance(t.get("fields"), list):
            parts = []
            for f in t["fields"]:
                if not isinstance(f, dict):
                    return "?"
                nn = "" if f.get("nullable", True) is True else " not null"
                name = f.get("name")
                shown = _name(name) if isinstance(name, str) else "?"
                parts.append(f"{shown}: {_type_text(f.get('type'), depth + 1)}{nn}")
            return "struct<" + ", ".join(parts) + ">"
        if kind == "array":
            return f"array<{_type_text(t.get('elementType'), depth + 1)}>"
        if kind == "map":
            key = _type_text(t.get("keyType"), depth + 1)
            return f"map<{key}, {_type_text(t.get('valueType'), depth + 1)}>"
        if kind == "udt":
            return f"udt<{_type_text(t.get('sqlType'), depth + 1)}>"
    return "?"


def watermark_iso(ms: int) -> str | None:
    """An event-time watermark (epoch milliseconds) as ISO-8601 UTC,
    ``2024-05-01T10:00:00.000Z``; None where no date has that time."""
    try:
        moment = _EPOCH + timedelta(milliseconds=ms)
    except (OverflowError, ValueError):
        return None
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _watermark_text(ms: int | None) -> str:
    if ms is None:
        return "none recorded"
    if ms == 0:  # Spark's value before any event time was seen, and without a watermark
        return "0 ms (none yet)"
    iso = watermark_iso(ms)
    return f"{ms} ms" if iso is None else f"{ms} ms = {iso}"


def _lines_of(cp: Checkpoint) -> Iterator[str]:
    yield f"checkpoint {_name(cp.path)}"
    yield f"  query id: {_name(cp.query_id)}"
    yield (
        f"  offset log: v{cp.offset_log_version}, last batch {cp.last_batch}, "
        f"last committed batch {cp.last_committed_batch}"
        if cp.offset_log_version is not None
        else "  offset log: empty (no batch planned yet)"
    )
    yield f"  watermark: {_watermark_text(cp.batch_watermark_ms)}"
    yield f"  next batch's watermark (last commit): {_watermark_text(cp.committed_watermark_ms)}"
    yield f"  confs ({len(cp.confs)}):"
    for key, value in sorted(cp.confs.items()):
        yield f"    {_name(key)} = {_name(value)}"
    yield f"  sources ({len(cp.sources)}):"
    for s in cp.sources:
        offset = "-" if s.offset is None else _quote(s.offset, 200)
        yield f"    [{s.position}] {_name(s.source_id)}: offset {offset}"
        if s.files is not None:
            yield f"      last committed batch read {len(s.files)} file(s)"
            for path in s.files:
                yield f"        {_name(path)}"
    yield f"  state operators ({len(cp.state_operators)}):"
    for op in cp.state_operators:
        name = "(no operator metadata)" if op.operator_name is None else _name(op.operator_name)
        yield (
            f"    operator {op.operator_id} {name}: metadata v{op.metadata_version}, "
            f"{op.num_partitions} partitions"
        )
        if op.properties is not None:
            yield f"      properties: {_quote(op.properties, 400)}"
        variables = _user_variables(op)
        if variables:
            yield f"      state variables ({len(variables)}):"
            for var_name, info in variables.items():
                yield f"        {_name(var_name)}: {_escape_unsafe(variable_text(info))}"
        for st in op.stores:
            schema = (
                "no schema file" if st.schema_version is None else f"schema v{st.schema_version}"
            )
            yield f"      store {_name(st.name)} ({st.num_partitions} partitions, {schema})"
            for cf in st.column_families:
                label = "" if st.schema_version != 3 else f"column family {_name(cf.name)} "
                yield f"        {label}key   {_type_text(cf.key_schema)}"
                yield f"        {' ' * len(label)}value {_type_text(cf.value_schema)}"


def render_text(checkpoint: Checkpoint) -> str:
    """A readable summary of ``checkpoint``; every name from the files is quoted and escaped."""
    return "\n".join(_lines_of(checkpoint)) + "\n"
