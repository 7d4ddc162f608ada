"""Read a Flink savepoint's or retained checkpoint's ``_metadata`` without a JVM.

Why: whether a changed job can restore from a savepoint depends on which OperatorIDs the
savepoint holds state for, with what parallelism and max parallelism. That list lives in the
binary ``_metadata`` file, and Flink's own loader (``Checkpoints.loadCheckpointMetadata``) needs
a JVM and Flink on the classpath. This module reads the same bytes in one pass in pure Python,
so a test, the CLI or CI can look at a savepoint next to the OperatorIDs pytest-opid computes.

It mirrors metadata versions 3 to 6 (every format since Flink 1.11, up to 2.3) as
``MetadataV3Serializer`` .. ``MetadataV6Serializer`` write them on top of
``MetadataV2V3SerializerBase``, plus version 7 (unreleased Flink master: an optional trailing
field per subtask). It reads no state itself, only the handles that say where the state is and
how big it is, and it makes the checks Flink's loader makes on them (counts, key-group ranges,
null handles, subtask indices, parallelism), so that a corrupt file is refused rather than
misread. The Java-serialized checkpoint properties that end versions 4 and later are walked for
their structure only.

Java's ``DataInputStream`` conventions throughout: big-endian ints and longs, ``readUTF`` as a
2-byte length and modified UTF-8. Every problem is a :class:`~pytest_opid.errors.DocumentError`
with one line naming the file, the byte and what was being read. Nothing recurses (nested
handles are walked with explicit stacks) and no count or length from the file is trusted
before it is checked against the bytes that are left.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from pytest_opid.errors import DocumentError
from pytest_opid.io.java_data import DataInput
from pytest_opid.io.json import open_regular
from pytest_opid.text import printable, quote, shorten

__all__ = [
    "METADATA_FILE",
    "OperatorState",
    "Savepoint",
    "StateFile",
    "parse_metadata",
    "read_savepoint",
    "referenced_files",
    "render_text",
]

METADATA_FILE = "_metadata"

# Checkpoints.HEADER_MAGIC_NUMBER
_MAGIC = 0x4960672D
# MetadataV2V3SerializerBase.MASTER_STATE_MAGIC_NUMBER, as the signed int that readInt returns
_MASTER_STATE_MAGIC = 0xC96B1696 - (1 << 32)
_SUPPORTED_VERSIONS = range(3, 8)
# A _metadata file is kilobytes to megabytes; refuse to slurp anything absurd.
_MAX_FILE_SIZE = 1 << 31


# The kinds of state of a subtask (OperatorSubtaskState's collections), as bits.
_MANAGED_OPERATOR = 1
_RAW_OPERATOR = 2
_MANAGED_KEYED = 4
_RAW_KEYED = 8
_INPUT_CHANNEL = 16
_RESULT_SUBPARTITION = 32
_UPSTREAM_OUTPUT_BUFFER = 64  # in OperatorSubtaskState.hasState(), never set by the loader
_KIND_NAMES = (
    (_MANAGED_KEYED, "managed_keyed"),
    (_RAW_KEYED, "raw_keyed"),
    (_MANAGED_OPERATOR, "managed_operator"),
    (_RAW_OPERATOR, "raw_operator"),
    (_INPUT_CHANNEL, "input_channel"),
    (_UPSTREAM_OUTPUT_BUFFER, "upstream_output_buffer"),
    (_RESULT_SUBPARTITION, "result_subpartition"),
)


def _kind_names(mask: int) -> tuple[str, ...]:
    return tuple(sorted(name for bit, name in _KIND_NAMES if mask & bit))


# Handle tags of MetadataV2V3SerializerBase (Flink 2.3).
_NULL_HANDLE = 0
_BYTE_STREAM_HANDLE = 1
_FILE_STREAM_HANDLE = 2
_KEY_GROUPS_HANDLE = 3
_PARTITIONABLE_OPERATOR_STATE_HANDLE = 4
_INCREMENTAL_KEY_GROUPS_HANDLE = 5
_RELATIVE_STREAM_HANDLE = 6
_SAVEPOINT_KEY_GROUPS_HANDLE = 7
_CHANGELOG_HANDLE = 8
_CHANGELOG_BYTE_INCREMENT_HANDLE = 9
_CHANGELOG_FILE_INCREMENT_HANDLE = 10
_INCREMENTAL_KEY_GROUPS_HANDLE_V2 = 11
_KEY_GROUPS_HANDLE_V2 = 12
_CHANGELOG_FILE_INCREMENT_HANDLE_V2 = 13
_CHANGELOG_HANDLE_V2 = 14
_SEGMENT_FILE_HANDLE = 15
_EMPTY_SEGMENT_FILE_HANDLE = 16
_SEGMENT_PARTITIONABLE_OPERATOR_STATE_HANDLE = 17

_STREAM_HANDLE_NAMES = {
    _BYTE_STREAM_HANDLE: "byte stream handle",
    _FILE_STREAM_HANDLE: "file handle",
    _KEY_GROUPS_HANDLE: "key-groups handle",
    _RELATIVE_STREAM_HANDLE: "relative file handle",
    _SEGMENT_FILE_HANDLE: "file-merging segment handle",
    _EMPTY_SEGMENT_FILE_HANDLE: "empty file-merging segment handle",
}
_KEYED_HANDLE_NAMES = {
    _KEY_GROUPS_HANDLE: "key-groups handle",
    _KEY_GROUPS_HANDLE_V2: "key-groups handle",
    _SAVEPOINT_KEY_GROUPS_HANDLE: "savepoint key-groups handle",
    _INCREMENTAL_KEY_GROUPS_HANDLE: "incremental key-groups handle",
    _INCREMENTAL_KEY_GROUPS_HANDLE_V2: "incremental key-groups handle",
    _CHANGELOG_HANDLE: "changelog handle",
    _CHANGELOG_HANDLE_V2: "changelog handle",
    _CHANGELOG_BYTE_INCREMENT_HANDLE: "in-memory changelog handle",
    _CHANGELOG_FILE_INCREMENT_HANDLE: "changelog file handle",
    _CHANGELOG_FILE_INCREMENT_HANDLE_V2: "changelog file handle",
}
_CHANGELOG_INCREMENTS = (
    _NULL_HANDLE,
    _CHANGELOG_BYTE_INCREMENT_HANDLE,
    _CHANGELOG_FILE_INCREMENT_HANDLE,
    _CHANGELOG_FILE_INCREMENT_HANDLE_V2,
)

# ChannelStateHandleSerializerV2 tags (metadata version 6 and later).
_INPUT_CHANNEL_STATE_HANDLE = 1
_RESULT_SUBPARTITION_STATE_HANDLE = 2
_MERGED_INPUT_CHANNEL_STATE_HANDLE = 3
_MERGED_RESULT_SUBPARTITION_STATE_HANDLE = 4

# OperatorStateHandle.Mode: SPLIT_DISTRIBUTE, UNION, BROADCAST.
_OPERATOR_STATE_MODES = 3
# CheckpointedStateScope: EXCLUSIVE, SHARED.
_STATE_SCOPES = 2


# ---------------------------------------------------------------------------------------------
#  Results
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OperatorState:
    """One operator state of a ``_metadata`` file (Flink's ``OperatorState``).

    ``has_state`` is ``OperatorSubtaskState.hasState()`` of any subtask: some state handle is
    stored, however small. ``state_size`` is the sum of the sizes the stored handles record, as
    Flink's ``getStateSize()`` reports them (inline bytes count their length, files the size
    written next to their path, the coordinator state its bytes; an unknown size counts 0).
    ``subtask_states`` counts the subtask entries as the loader keeps them (one per subtask
    index, finished and empty ones included). ``state_kinds`` is sorted.
    """

    operator_id: str
    name: str | None
    uid: str | None
    parallelism: int
    max_parallelism: int
    coordinator_state: bool
    has_state: bool
    state_size: int
    fully_finished: bool
    subtask_states: int
    state_kinds: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        """The operator state as ``opid savepoint --json`` prints it."""
        return {
            "operator_id": self.operator_id,
            "name": self.name,
            "uid": self.uid,
            "parallelism": self.parallelism,
            "max_parallelism": self.max_parallelism,
            "coordinator_state": self.coordinator_state,
            "has_state": self.has_state,
            "state_size": self.state_size,
        }


@dataclass(frozen=True, slots=True)
class Savepoint:
    """A ``_metadata`` file: its format version, checkpoint id and operator states in file order
    (the order in which Flink checks them on restore)."""

    version: int
    checkpoint_id: int
    operators: tuple[OperatorState, ...]

    def to_dict(self) -> dict[str, object]:
        """The JSON that ``opid savepoint --json`` prints."""
        return {
            "version": self.version,
            "checkpoint_id": self.checkpoint_id,
            "operators": [op.to_dict() for op in self.operators],
        }


@dataclass(frozen=True, slots=True)
class StateFile:
    """A file that a state handle of ``_metadata`` refers to.

    ``kind`` is ``"file"`` (an absolute path or URI, as in checkpoints), ``"relative"`` (a path
    relative to the savepoint directory) or ``"segment"`` (``size`` bytes of a file shared with
    other handles by file merging). ``size`` is the size the handle records.
    """

    operator_id: str
    path: str
    size: int
    kind: str


def _show_origin(origin: str, limit: int = 100) -> str:
    """The file name for a message: escaped like a quoted value, without quotes, and only its
    tail (the part naming the savepoint) where it is very long."""
    return printable(shorten(origin, limit, around=len(origin)))


def _wrap32(value: int) -> int:
    """``value`` as Java's int arithmetic leaves it."""
    return ((value + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _key_group_range_ok(start: int, count: int) -> bool:
    """Whether ``KeyGroupRange.of(start, start + count - 1)`` succeeds."""
    end = _wrap32(start + count - 1)
    if start > end:
        return True  # the empty range
    return start >= 0 and _wrap32(end - start + 1) >= 0


def _key_group_offsets_ok(start: int, count: int) -> bool:
    """Whether ``count`` offsets fit ``KeyGroupRange.of(start, start + count - 1)`` as
    ``KeyGroupRangeOffsets`` requires."""
    if count < 0 or not _key_group_range_ok(start, count):
        return False
    end = _wrap32(start + count - 1)
    return count == (end - start + 1 if start <= end else 0)


# ---------------------------------------------------------------------------------------------
#  The reader
# ---------------------------------------------------------------------------------------------


class _JavaClassDesc:
    """A class descriptor of a Java serialization stream."""

    __slots__ = ("done", "fields", "flags", "head", "name", "parent")

    def __init__(self, name: str) -> None:
        self.name = name
        self.flags = 0
        self.fields: list[str] = []  # type codes
        self.parent: _JavaClassDesc | None = None
        self.done = False  # its superclass is read: ``parent`` is final
        # the nearest class from this one up with class data (None: none), once known
        self.head: _JavaClassDesc | object | None = _UNKNOWN

    def has_class_data(self) -> bool:
        """Whether an object of this class holds data of this class (fields, or what a
        writeObject or writeExternal method wrote); ObjectInputStream.readSerialData reads
        nothing for a serializable class with neither."""
        if self.flags & _SC_EXTERNALIZABLE:
            return True
        return bool(self.flags & _SC_SERIALIZABLE) and bool(
            self.fields or self.flags & _SC_WRITE_METHOD
        )


_JAVA_OBJECT = object()  # any object of the stream other than strings and class descriptors
_UNKNOWN = object()  # _JavaClassDesc.head not computed yet
_PRIMITIVE_WIDTHS = {"B": 1, "C": 2, "D": 8, "F": 4, "I": 4, "J": 8, "S": 2, "Z": 1}

# java.io.ObjectStreamConstants
_TC_NULL = 0x70
_TC_REFERENCE = 0x71
_TC_CLASSDESC = 0x72
_TC_OBJECT = 0x73
_TC_STRING = 0x74
_TC_ARRAY = 0x75
_TC_CLASS = 0x76
_TC_BLOCKDATA = 0x77
_TC_ENDBLOCKDATA = 0x78
_TC_RESET = 0x79
_TC_BLOCKDATALONG = 0x7A
_TC_LONGSTRING = 0x7C
_TC_PROXYCLASSDESC = 0x7D
_TC_ENUM = 0x7E
_BASE_WIRE_HANDLE = 0x7E0000
_SC_WRITE_METHOD = 0x01
_SC_SERIALIZABLE = 0x02
_SC_EXTERNALIZABLE = 0x04
_SC_BLOCK_DATA = 0x08

# Steps of the Java stream walker's work stack.
_J_READ, _J_DESC_DONE, _J_OBJECT, _J_FIELDS, _J_ANNOTATION = range(5)
_J_DISCARD, _J_ENUM, _J_ARRAY, _J_CLASS, _J_REPEAT, _J_PUSH = range(5, 11)

_JavaStep = tuple[int, object, int]


class _Parser(DataInput):
    """One pass over the bytes of a ``_metadata`` file: Java's data stream (the primitives are
    :class:`~pytest_opid.io.java_data.DataInput`'s) and object stream."""

    __slots__ = (
        "files",
        "op_id",
        "op_index",
        "origin",
        "part",
        "stream_tag",
        "subtask",
        "version",
        "what",
    )

    def __init__(self, data: bytes, origin: str, collect_files: bool = False) -> None:
        super().__init__(data)
        self.origin = origin
        self.version = 0
        self.what = "the header"
        self.part = ""
        self.op_index = -1
        self.op_id = ""
        self.subtask = -1
        self.stream_tag = 0
        self.files: list[StateFile] | None = [] if collect_files else None

    # --- errors -------------------------------------------------------------------------------

    def fail(self, problem: str, at: int | None = None) -> NoReturn:
        where = self.what
        if self.op_id:
            where += f" of operator {self.op_id}"
        elif self.op_index >= 0:
            where += f" of operator state #{self.op_index}"
        details = [f"subtask {self.subtask}"] if self.subtask >= 0 else []
        if self.part:
            details.append(self.part)
        if details:
            where += f" ({', '.join(details)})"
        byte = self.pos if at is None else at
        raise DocumentError(
            f"{_show_origin(self.origin)}: {problem} at byte {byte} while reading {where}"
        )

    # --- the file ---------------------------------------------------------------------------

    def parse(self) -> Savepoint:
        """``Checkpoints.loadCheckpointMetadata`` and ``MetadataV2V3SerializerBase``."""
        if self.end == 0:
            raise DocumentError(f"{_show_origin(self.origin)}: empty file, not a _metadata file")
        if self.end < 8:
            raise DocumentError(
                f"{_show_origin(self.origin)}: only {self.end} bytes, too short for a Flink "
                "_metadata file"
            )
        magic = self.i32() & 0xFFFFFFFF
        if magic != _MAGIC:
            raise DocumentError(
                f"{_show_origin(self.origin)}: not a Flink savepoint or checkpoint _metadata "
                f"file (magic number 0x{magic:08x}, expected 0x{_MAGIC:08x})"
            )
        version = self.i32()
        if version not in _SUPPORTED_VERSIONS:
            hint = " (Flink 1.10 or older)" if version in (1, 2) else ""
            raise DocumentError(
                f"{_show_origin(self.origin)}: unsupported _metadata version {version}{hint}; "
                f"this reader knows versions {_SUPPORTED_VERSIONS[0]} to "
                f"{_SUPPORTED_VERSIONS[-1]}"
            )
        self.version = version
        self.what = "the checkpoint id"
        at = self.pos
        checkpoint_id = self.i64()
        if checkpoint_id < 0:
            self.fail(f"invalid checkpoint id {checkpoint_id}", at)
        self.master_states()
        self.what = "the number of operator states"
        n = self.count("operator states")
        operators = []
        for index in range(n):
            operators.append(self.operator_state(index))
        self.op_index = -1
        self.op_id = ""
        if version >= 4:
            # MetadataV4Serializer: the CheckpointProperties, Java-serialized, end the file.
            self.what = "the checkpoint properties"
            self.java_object_stream()
        if self.pos < self.end:
            # Checkpoints.loadCheckpointMetadata stops reading here; bytes after the end are
            # not Flink's (a file overwritten in place, garbage appended) and refused.
            self.what = "the end of the metadata"
            self.fail(f"{self.end - self.pos} bytes after the end of the metadata", self.pos)
        return Savepoint(version=version, checkpoint_id=checkpoint_id, operators=tuple(operators))

    def master_states(self) -> None:
        """``MetadataV2V3SerializerBase.deserializeMasterState``: magic, length, then version,
        name and payload inside that length."""
        self.what = "the number of master states"
        at = self.pos
        n = self.i32()
        if n < 0:
            self.fail(f"invalid number of master states {n}", at)
        for index in range(n):
            self.what = f"master state #{index}"
            at = self.pos
            if self.i32() != _MASTER_STATE_MAGIC:
                self.fail("wrong magic number of a master state", at)
            at = self.pos
            length = self.i32()
            if length <= 0:
                self.fail(f"zero or negative master state length {length}", at)
            if length > self.end - self.pos:
                left = self.end - self.pos
                self.fail(f"a master state of {length} bytes, only {left} bytes left", at)
            outer_end = self.end
            self.end = self.pos + length
            self.i32()  # version
            self.utf_units()  # name
            self.skip(self.i32(), "bytes of master state")
            if self.pos != self.end:
                self.fail("trailing bytes in a master state")
            self.end = outer_end

    def operator_state(self, index: int) -> OperatorState:
        """``MetadataV3Serializer`` / ``MetadataV5Serializer.deserializeOperatorState``."""
        self.op_index = index
        self.op_id = ""
        self.subtask = -1
        self.part = ""
        name = uid = None
        if self.version >= 5:
            self.what = "the operator name"
            name = self.utf() or None
            self.what = "the operator uid"
            uid = self.utf() or None
        self.what = "the operator id"
        pos = self.pos
        if pos + 16 > self.end:
            self.truncated(pos)
        operator_id = self.data[pos : pos + 16].hex()
        self.pos = pos + 16
        self.op_id = operator_id
        self.what = "the parallelism"
        at = self.pos
        parallelism = self.i32()
        max_parallelism = self.i32()
        self.what = "the coordinator state"
        coordinator_at = self.pos
        coordinator = self.stream()
        if coordinator is not None and self.stream_tag != _BYTE_STREAM_HANDLE:
            self.fail(
                f"a {_STREAM_HANDLE_NAMES[self.stream_tag]} as coordinator state (Flink expects "
                "inline bytes)",
                coordinator_at,
            )
        self.what = "the number of subtask states"
        count_at = self.pos
        n = self.i32()
        # The OperatorState constructor.
        if parallelism > max_parallelism:
            self.fail(
                f"parallelism {parallelism} is larger than max parallelism {max_parallelism}", at
            )
        if parallelism < 0:
            self.fail(f"negative parallelism {parallelism}", at)
        if n < 0:
            # A fully finished operator: no subtask states, and no coordinator state either.
            if coordinator is not None:
                self.fail("coordinator state on a fully finished operator", coordinator_at)
            return OperatorState(
                operator_id=operator_id,
                name=name,
                uid=uid,
                parallelism=parallelism,
                max_parallelism=max_parallelism,
                coordinator_state=False,
                has_state=False,
                state_size=0,
                fully_finished=True,
                subtask_states=0,
                state_kinds=(),
            )
        if n > self.end - self.pos:
            self.fail(
                f"{n} subtask states announced, only {self.end - self.pos} bytes left", count_at
            )
        subtasks: dict[int, tuple[int, int]] = {}
        for _ in range(n):
            self.what = "a subtask index"
            self.subtask = -1
            at = self.pos
            raw_index = self.i32()
            if raw_index < 0:
                # MetadataV3Serializer: -(index + 1) marks a finished subtask, without state.
                subtask = -raw_index - 1
                state = (0, 0)
            else:
                subtask = raw_index
                self.subtask = subtask
                state = self.subtask_state()
                self.part = ""
            if not 0 <= subtask < parallelism:
                self.subtask = -1
                self.what = "a subtask index"
                self.fail(f"subtask index {subtask} outside parallelism {parallelism}", at)
            subtasks[subtask] = state  # OperatorState.putState: a later entry replaces one
        self.subtask = -1
        mask = 0
        size = 0
        for kinds, subtask_size in subtasks.values():
            mask |= kinds
            size += subtask_size
        if coordinator is not None:
            size += coordinator
        return OperatorState(
            operator_id=operator_id,
            name=name,
            uid=uid,
            parallelism=parallelism,
            max_parallelism=max_parallelism,
            coordinator_state=coordinator is not None,
            has_state=mask != 0,
            state_size=size,
            fully_finished=False,
            subtask_states=len(subtasks),
            state_kinds=_kind_names(mask),
        )

    def subtask_state(self) -> tuple[int, int]:
        """``MetadataV2V3SerializerBase.deserializeSubtaskState``: the kinds of state present
        (as bits) and their size. Null keyed handles, the common case, take a shortcut."""
        mask = 0
        size = 0
        self.part = "managed operator state"
        if self.presence_flag():
            size += self.flagged_operator_handle()
            mask = _MANAGED_OPERATOR
        self.part = "raw operator state"
        if self.presence_flag():
            size += self.flagged_operator_handle()
            mask |= _RAW_OPERATOR
        self.part = "managed keyed state"
        if self.pos < self.end and self.data[self.pos] == _NULL_HANDLE:
            self.pos += 1
        else:
            handle_size = self.keyed_handle()
            if handle_size is not None:
                mask |= _MANAGED_KEYED
                size += handle_size
        self.part = "raw keyed state"
        if self.pos < self.end and self.data[self.pos] == _NULL_HANDLE:
            self.pos += 1
        else:
            handle_size = self.keyed_handle()
            if handle_size is not None:
                mask |= _RAW_KEYED
                size += handle_size
        self.part = "input channel state"
        handles = self.collection_size()
        if handles > 0:
            mask |= _INPUT_CHANNEL
            for _ in range(handles):
                size += self.channel_handle(True)
        self.part = "result subpartition state"
        handles = self.collection_size()
        if handles > 0:
            mask |= _RESULT_SUBPARTITION
            for _ in range(handles):
                size += self.channel_handle(False)
        if self.version >= 7:
            # MetadataV7Serializer: a marker byte, then the reference checkpoint id if it is 1.
            self.part = ""
            self.what = "the reference checkpoint id"
            if self.u8() == 1:
                self.i64()
        return mask, size

    def presence_flag(self) -> bool:
        self.what = "the presence flag"
        return self.i32() != 0

    def flagged_operator_handle(self) -> int:
        at = self.pos
        handle_size = self.operator_handle()
        if handle_size is None:
            self.fail("a null handle where the flag says there is one", at)
        return handle_size

    def collection_size(self) -> int:
        """``MetadataV2V3SerializerBase.deserializeCollection``'s count: a negative one reads
        nothing."""
        self.what = "the number of handles"
        at = self.pos
        n = self.i32()
        if n > self.end - self.pos:
            self.fail(f"{n} handles announced, only {self.end - self.pos} bytes left", at)
        return n

    # --- state handles ------------------------------------------------------------------------

    def record(self, path: str, size: int, kind: str) -> None:
        if self.files is not None:
            self.files.append(StateFile(self.op_id, path, size, kind))

    def path(self) -> str:
        """A path string for ``org.apache.flink.core.fs.Path``, which refuses an empty one."""
        at = self.pos
        path = self.utf()
        if not path:
            self.fail("empty file path", at)
        return path

    def stream(self) -> int | None:
        """``MetadataV2V3SerializerBase.deserializeStreamStateHandle``: the handle's size, None
        for a null handle. Sets ``stream_tag`` to the outermost handle's tag."""
        wrappers = 0  # KeyGroupsStateHandles used as stream handles, each wrapping the next
        while True:
            at = self.pos
            tag = self.u8()
            if wrappers == 0:
                self.stream_tag = tag
            name = _STREAM_HANDLE_NAMES.get(tag)
            if name is not None:
                self.what = "the " + name
            if tag == _NULL_HANDLE:
                if wrappers:
                    self.fail("a key-groups handle around a null handle", at)
                return None
            if tag == _BYTE_STREAM_HANDLE:
                self.utf_units()  # the handle name (a path-like name; no such file exists)
                length = self.i32()
                self.skip(length, "bytes of inline state")
                return length
            if tag == _FILE_STREAM_HANDLE:
                size_at = self.pos
                size = self.i64()
                path = self.path()
                if size < -1:  # the FileStateHandle constructor; -1 is "unknown"
                    self.fail(f"invalid file size {size}", size_at)
                self.record(path, size, "file")
                return max(size, 0)
            if tag == _RELATIVE_STREAM_HANDLE:
                path = self.path()
                size_at = self.pos
                size = self.i64()
                if size < -1:
                    self.fail(f"invalid file size {size}", size_at)
                self.record(path, size, "relative")
                return max(size, 0)
            if tag == _KEY_GROUPS_HANDLE:
                self.key_group_offsets()
                wrappers += 1
                continue
            if tag == _SEGMENT_FILE_HANDLE:
                self.i64()  # start position
                size = self.i64()
                at = self.pos
                scope = self.i32()
                if not 0 <= scope < _STATE_SCOPES:
                    self.fail(f"unknown state scope {scope}", at)
                path = self.path()
                self.utf_units()  # the logical file id
                self.record(path, size, "segment")
                return max(size, 0)
            if tag == _EMPTY_SEGMENT_FILE_HANDLE:
                return 0
            self.what = "a stream state handle"
            self.fail(f"unknown stream state handle tag {tag}", at)

    def key_group_offsets(self) -> None:
        """A key-group range (start, count) and one offset per key group."""
        at = self.pos
        start = self.i32()
        count = self.i32()
        if not _key_group_offsets_ok(start, count):
            self.fail(f"invalid key-group range: start {start}, {count} key groups", at)
        self.skip(count, "key-group offsets", 8)

    def key_group_range(self) -> None:
        at = self.pos
        start = self.i32()
        count = self.i32()
        if not _key_group_range_ok(start, count):
            self.fail(f"invalid key-group range: start {start}, {count} key groups", at)

    def operator_handle(self) -> int | None:
        """``MetadataV2V3SerializerBase.deserializeOperatorStateHandle``."""
        at = self.pos
        tag = self.u8()
        if tag == _NULL_HANDLE:
            return None
        self.what = "the operator state handle"
        if tag not in (
            _PARTITIONABLE_OPERATOR_STATE_HANDLE,
            _SEGMENT_PARTITIONABLE_OPERATOR_STATE_HANDLE,
        ):
            self.fail(f"unknown operator state handle tag {tag}", at)
        entries = self.count("named states")
        for _ in range(entries):
            self.utf_units()  # the state's name
            at = self.pos
            mode = self.u8()
            if mode >= _OPERATOR_STATE_MODES:  # a negative Java byte is >= 128 here
                self.fail(f"unknown distribution mode {mode}", at)
            self.skip(self.i32(), "partition offsets", 8)
        if tag == _SEGMENT_PARTITIONABLE_OPERATOR_STATE_HANDLE:
            self.path()  # the task-owned directory
            self.path()  # the shared directory
            self.u8()  # whether the handle is empty
            at = self.pos
            size = self.stream()
            if size is None or self.stream_tag not in (
                _SEGMENT_FILE_HANDLE,
                _EMPTY_SEGMENT_FILE_HANDLE,
            ):
                self.fail("a file-merging operator state not in a segment file", at)
            return size
        at = self.pos
        size = self.stream()
        if size is None:
            self.fail("an operator state handle around a null handle", at)
        return size

    def keyed_handle(self) -> int | None:
        """``MetadataV2V3SerializerBase.deserializeKeyedStateHandle``: the handle's size, None
        for a null handle. Changelog handles nest keyed handles; they are walked with a stack of
        [handles left in the list, list (0 materialized, 1 not yet), tag] frames."""
        frames: list[list[int]] = []
        total = 0
        increments_only = False
        while True:
            at = self.pos
            tag = self.u8()
            name = _KEYED_HANDLE_NAMES.get(tag)
            self.what = "the " + name if name is not None else "a keyed state handle"
            if increments_only and tag not in _CHANGELOG_INCREMENTS:
                self.fail(f"a {name or f'handle with tag {tag}'} among changelog increments", at)
            size: int | None
            if tag == _NULL_HANDLE:
                size = None
            elif tag in (_KEY_GROUPS_HANDLE, _KEY_GROUPS_HANDLE_V2, _SAVEPOINT_KEY_GROUPS_HANDLE):
                self.key_group_offsets()
                inner_at = self.pos
                size = self.stream()
                if size is None:
                    self.fail("a key-groups handle around a null handle", inner_at)
                if tag == _KEY_GROUPS_HANDLE_V2:
                    self.utf_units()  # the state handle id
            elif tag in (_INCREMENTAL_KEY_GROUPS_HANDLE, _INCREMENTAL_KEY_GROUPS_HANDLE_V2):
                size = self.incremental_handle(tag == _INCREMENTAL_KEY_GROUPS_HANDLE_V2)
            elif tag in (_CHANGELOG_HANDLE, _CHANGELOG_HANDLE_V2):
                self.key_group_range()
                self.i64()  # checkpointed size
                frames.append([self.count("materialized handles"), 0, tag])
                size = None
            elif tag == _CHANGELOG_BYTE_INCREMENT_HANDLE:
                self.key_group_range()
                self.i64()  # from
                self.i64()  # to
                size = 0
                for _ in range(self.count("state changes")):
                    self.i32()  # key group
                    length = self.i32()
                    self.skip(length, "bytes of a state change")
                    size += length
                self.utf_units()  # the state handle id
            elif tag in (_CHANGELOG_FILE_INCREMENT_HANDLE, _CHANGELOG_FILE_INCREMENT_HANDLE_V2):
                self.key_group_range()
                for _ in range(self.count("changelog files")):
                    self.i64()  # offset
                    self.stream()
                    self.what = "the " + _KEYED_HANDLE_NAMES[tag]
                size = max(self.i64(), 0)
                self.i64()  # checkpointed size
                self.utf_units()  # the state handle id
                if tag == _CHANGELOG_FILE_INCREMENT_HANDLE_V2:
                    self.utf_units()  # the storage identifier
            else:
                self.fail(f"unknown keyed state handle tag {tag}", at)
            if not frames:
                return size
            if size is not None:
                total += size
            # Finish the changelog handles whose lists are complete, innermost first.
            while frames:
                frame = frames[-1]
                if frame[0] > 0:
                    frame[0] -= 1
                    increments_only = frame[1] == 1
                    break
                self.what = "the " + _KEYED_HANDLE_NAMES[frame[2]]
                if frame[1] == 0:
                    frame[0] = self.count("changelog increments")
                    frame[1] = 1
                    continue
                self.i64()  # materialization id
                if frame[2] == _CHANGELOG_HANDLE_V2:
                    self.i64()  # checkpoint id
                self.utf_units()  # the state handle id
                frames.pop()
            else:
                return total

    def incremental_handle(self, v2: bool) -> int:
        """``MetadataV2V3SerializerBase.deserializeIncrementalStateHandle`` (RocksDB)."""
        self.i64()  # checkpoint id
        self.utf_units()  # backend id
        at = self.pos
        start = self.i32()
        count = self.i32()
        if v2:
            self.i64()  # checkpointed size
        if not _key_group_range_ok(start, count):
            self.fail(f"invalid key-group range: start {start}, {count} key groups", at)
        what = self.what
        size = self.stream() or 0  # the meta data handle
        for files in ("shared", "private"):
            self.what = what
            for _ in range(self.count(f"{files} files")):
                self.what = what
                self.utf_units()  # the local path
                at = self.pos
                file_size = self.stream()
                if file_size is None:
                    self.what = what
                    self.fail(f"a null handle among the {files} files", at)
                size += file_size
        self.what = what
        if v2:
            self.utf_units()  # the state handle id
        return size

    def channel_handle(self, input_side: bool) -> int:
        """``ChannelStateHandleSerializerV1`` (versions 3 to 5) or ``V2`` (6 and later): an
        in-flight data handle of an unaligned checkpoint; its recorded size."""
        merged = False
        if self.version >= 6:
            at = self.pos
            tag = self.u8()
            if input_side:
                ok = tag in (_INPUT_CHANNEL_STATE_HANDLE, _MERGED_INPUT_CHANNEL_STATE_HANDLE)
                merged = tag == _MERGED_INPUT_CHANNEL_STATE_HANDLE
            else:
                ok = tag in (
                    _RESULT_SUBPARTITION_STATE_HANDLE,
                    _MERGED_RESULT_SUBPARTITION_STATE_HANDLE,
                )
                merged = tag == _MERGED_RESULT_SUBPARTITION_STATE_HANDLE
            if not ok:
                self.what = "a channel state handle"
                self.fail(f"unknown channel state handle tag {tag}", at)
        self.what = "the merged channel state handle" if merged else "the channel state handle"
        self.i32()  # subtask index
        if merged:
            size = self.i64()
            self.stream()
            self.skip(self.i32(), "bytes of channel offsets")
            return max(size, 0)
        self.i32()  # gate or partition index
        self.i32()  # channel or subpartition index
        self.skip(self.count("offsets"), "offsets", 8)
        size = self.i64()
        at = self.pos
        if self.stream() is None:
            self.fail("a channel state handle around a null handle", at)
        return max(size, 0)

    # --- java.io.ObjectInputStream ------------------------------------------------------------

    def java_string(self, handles: list[object]) -> str:
        """A string object: TC_STRING, TC_LONGSTRING or a reference to one."""
        at = self.pos
        tag = self.u8()
        if tag == _TC_STRING:
            text = self.utf_units()  # Java's string as is: never shown, lone surrogates too
        elif tag == _TC_LONGSTRING:
            length = self.i64()
            self.skip(length, "bytes of a long string")
            text = self.modified_utf8(self.data[self.pos - length : self.pos], at)
        elif tag == _TC_REFERENCE:
            found = self.java_reference(handles)
            if not isinstance(found, str):
                self.fail("a reference to a non-string where a string belongs", at)
            return found
        else:
            self.fail(f"unexpected serialization tag 0x{tag:02x} where a string belongs", at)
        handles.append(text)
        return text

    def java_reference(self, handles: list[object]) -> object:
        at = self.pos
        handle = self.i32() - _BASE_WIRE_HANDLE
        if not 0 <= handle < len(handles):
            self.fail("a reference to an unknown object", at)
        return handles[handle]

    def java_object_stream(self) -> None:
        """Walk one object of a Java serialization stream to its end (the grammar of the Java
        Object Serialization Specification, chapter 6) without building it.

        ``CheckpointProperties`` is read with ``ObjectInputStream.readObject``; walking it is
        how a file cut short there is noticed. Steps go on a work stack; results of finished
        reads (class descriptors, strings, placeholders) on a value stack.
        """
        at = self.pos
        if self.end - at < 4 or self.data[at : at + 4] != b"\xac\xed\x00\x05":
            self.fail("not a Java serialization stream", at)
        self.pos = at + 4
        handles: list[object] = []
        values: list[object] = []
        todo: list[_JavaStep] = [(_J_READ, None, 0)]
        while todo:
            step, arg, number = todo.pop()
            if step == _J_READ:
                self.java_content(todo, values, handles)
            elif step == _J_DESC_DONE:
                parent = values.pop()
                if parent is not None and not isinstance(parent, _JavaClassDesc):
                    self.fail("a superclass descriptor that is not a class descriptor")
                assert isinstance(arg, _JavaClassDesc)
                arg.parent = parent
                arg.done = True
                values.append(arg)
            elif step == _J_OBJECT:
                desc = self.java_desc(values)
                handles.append(_JAVA_OBJECT)
                todo.append((_J_PUSH, _JAVA_OBJECT, 0))
                # Class data goes from the topmost serializable class down; the work stack
                # takes it in reverse.
                cls = self.head(desc, handles)
                while cls is not None:
                    if cls.flags & _SC_EXTERNALIZABLE:
                        if not cls.flags & _SC_BLOCK_DATA:
                            self.fail("an externalizable object in the old stream format")
                        todo.append((_J_ANNOTATION, None, 0))
                    elif cls.flags & _SC_SERIALIZABLE:
                        if cls.flags & _SC_WRITE_METHOD:
                            todo.append((_J_ANNOTATION, None, 0))
                        todo.append((_J_FIELDS, cls, 0))
                    cls = None if cls.parent is None else self.head(cls.parent, handles)
            elif step == _J_FIELDS:
                assert isinstance(arg, _JavaClassDesc)
                fields = arg.fields
                index = number
                while index < len(fields):
                    code = fields[index]
                    index += 1
                    width = _PRIMITIVE_WIDTHS.get(code)
                    if width is None:
                        todo.append((_J_FIELDS, arg, index))
                        todo.append((_J_DISCARD, None, 0))
                        todo.append((_J_READ, None, 0))
                        break
                    self.skip(width, "bytes of a field")
            elif step == _J_ANNOTATION:
                tag_at = self.pos
                tag = self.u8()
                if tag == _TC_ENDBLOCKDATA:
                    continue
                todo.append((_J_ANNOTATION, None, 0))
                if tag == _TC_BLOCKDATA:
                    self.skip(self.u8(), "bytes of block data")
                elif tag == _TC_BLOCKDATALONG:
                    self.skip(self.i32(), "bytes of block data")
                else:
                    self.pos = tag_at
                    todo.append((_J_DISCARD, None, 0))
                    todo.append((_J_READ, None, 0))
            elif step == _J_DISCARD:
                values.pop()
            elif step == _J_ENUM:
                self.java_desc(values)
                handles.append(_JAVA_OBJECT)
                self.java_string(handles)
                values.append(_JAVA_OBJECT)
            elif step == _J_ARRAY:
                desc = self.java_desc(values)
                handles.append(_JAVA_OBJECT)
                length = self.i32()
                element = desc.name[1:2]
                width = _PRIMITIVE_WIDTHS.get(element)
                if width is not None:
                    self.skip(length, "array elements", width)
                    values.append(_JAVA_OBJECT)
                else:
                    if not 0 <= length <= self.end - self.pos:
                        self.fail(f"an array of {length} objects, more than the bytes left")
                    todo.append((_J_PUSH, _JAVA_OBJECT, 0))
                    todo.append((_J_REPEAT, None, length))
            elif step == _J_CLASS:
                self.java_desc(values)
                handles.append(_JAVA_OBJECT)
                values.append(_JAVA_OBJECT)
            elif step == _J_REPEAT:
                if number > 0:
                    todo.append((_J_REPEAT, None, number - 1))
                    todo.append((_J_DISCARD, None, 0))
                    todo.append((_J_READ, None, 0))
            else:  # _J_PUSH
                values.append(arg)

    def head(self, desc: _JavaClassDesc, handles: list[object]) -> _JavaClassDesc | None:
        """The nearest class from ``desc`` up its hierarchy that holds class data, or None.

        Kept on each complete descriptor, so that a hierarchy is walked once: an array of
        objects sharing a deep hierarchy of classes without data (a crafted file) would
        otherwise cost its depth per object, quadratic time in the file's size. What is left
        per object is one step per class with data, each of which reads at least a byte."""
        path: list[_JavaClassDesc] = []
        current: _JavaClassDesc | None = desc
        while current is not None and current.head is _UNKNOWN:
            if len(path) > len(handles):
                self.fail("a class hierarchy with a cycle")
            path.append(current)
            current = current.parent
        found = None if current is None else current.head
        complete = current is None or current.done
        for cls in reversed(path):
            if cls.has_class_data():
                found = cls
            complete = complete and cls.done  # one still being read may get a superclass yet
            if complete:
                cls.head = found
        assert found is None or isinstance(found, _JavaClassDesc)
        return found

    def java_desc(self, values: list[object]) -> _JavaClassDesc:
        desc = values.pop()
        if not isinstance(desc, _JavaClassDesc):
            self.fail("an object without a class descriptor")
        return desc

    def java_content(
        self, todo: list[_JavaStep], values: list[object], handles: list[object]
    ) -> None:
        """Start reading one object; what it contains goes on the work stack."""
        at = self.pos
        tag = self.u8()
        if tag == _TC_NULL:
            values.append(None)
        elif tag == _TC_REFERENCE:
            values.append(self.java_reference(handles))
        elif tag in (_TC_STRING, _TC_LONGSTRING):
            self.pos = at
            values.append(self.java_string(handles))
        elif tag == _TC_CLASSDESC:
            desc = _JavaClassDesc(self.utf_units())
            self.skip(8, "bytes of a serialVersionUID")
            handles.append(desc)
            desc.flags = self.u8()
            field_at = self.pos
            fields = self.i16()
            if not 0 <= fields <= self.end - self.pos:
                self.fail(f"invalid number of fields {fields}", field_at)
            for _ in range(fields):
                code_at = self.pos
                code = chr(self.u8())
                self.utf_units()  # the field name
                if code in "L[":
                    self.java_string(handles)  # the field's class name
                elif code not in _PRIMITIVE_WIDTHS:
                    self.fail(f"unknown field type code {code!r}", code_at)
                elif desc.fields and desc.fields[-1] in "L[":
                    # ObjectStreamClass.computeFieldOffsets: primitives come first.
                    self.fail("a primitive field after an object field", code_at)
                desc.fields.append(code)
            todo.append((_J_DESC_DONE, desc, 0))
            todo.append((_J_READ, None, 0))  # the superclass descriptor
            todo.append((_J_ANNOTATION, None, 0))  # the class annotation
        elif tag == _TC_PROXYCLASSDESC:
            desc = _JavaClassDesc("<proxy>")
            handles.append(desc)
            for _ in range(self.count("proxy interfaces")):
                self.utf_units()  # an interface name
            todo.append((_J_DESC_DONE, desc, 0))
            todo.append((_J_READ, None, 0))
            todo.append((_J_ANNOTATION, None, 0))
        elif tag in (_TC_OBJECT, _TC_ENUM, _TC_ARRAY, _TC_CLASS):
            follow = {_TC_OBJECT: _J_OBJECT, _TC_ENUM: _J_ENUM, _TC_ARRAY: _J_ARRAY}
            todo.append((follow.get(tag, _J_CLASS), None, 0))
            todo.append((_J_READ, None, 0))  # its class descriptor
        elif tag == _TC_RESET:
            handles.clear()
            todo.append((_J_READ, None, 0))
        else:
            self.fail(f"unexpected serialization tag 0x{tag:02x}", at)


# ---------------------------------------------------------------------------------------------
#  Entry points
# ---------------------------------------------------------------------------------------------


def parse_metadata(data: bytes, origin: str) -> Savepoint:
    """Read the bytes of a ``_metadata`` file; ``origin`` names it in error messages."""
    return _Parser(bytes(data), origin).parse()


def _metadata_path(path: str | os.PathLike[str]) -> Path:
    """The ``_metadata`` file of a savepoint or checkpoint directory, or the file itself."""
    given = Path(path)
    shown = _show_origin(str(given))
    try:
        is_dir = given.is_dir()
        is_file = not is_dir and given.is_file()
        exists = is_dir or is_file or given.exists()
        has_metadata = is_dir and (given / METADATA_FILE).is_file()
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise DocumentError(f"{shown}: cannot read it: {_os_error(exc)}") from None
    if not exists:
        raise DocumentError(f"{shown}: no such file or directory")
    if is_file:
        return given
    if not is_dir:
        raise DocumentError(f"{shown}: not a regular file or directory")
    if not has_metadata:
        inner = given / METADATA_FILE
        what = _not_a_file(inner)
        if what is not None:  # a FIFO would block the reader; a directory is not Flink's file
            raise DocumentError(
                f"{_show_origin(str(inner))}: it is {what}, not a regular file, so not a "
                "savepoint or checkpoint's metadata"
            )
        raise DocumentError(
            f"{shown}: no {METADATA_FILE} file in this directory, so not a savepoint or "
            "checkpoint directory"
        )
    return given / METADATA_FILE


def _not_a_file(path: Path) -> str | None:
    """What is at ``path`` when it is a FIFO, device, socket or broken link (``None``: nothing,
    a directory or a file)."""
    try:
        mode = os.lstat(path).st_mode
        if stat.S_ISLNK(mode):
            try:
                mode = os.stat(path).st_mode
            except OSError:
                return "a broken symbolic link"
    except (OSError, ValueError):
        return None
    for test, name in (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return None


def _os_error(exc: Exception) -> str:
    text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return quote(text, 80)[1:-1]


def read_savepoint(path: str | os.PathLike[str]) -> Savepoint:
    """Read a savepoint or checkpoint: its directory (holding ``_metadata``) or the
    ``_metadata`` file itself."""
    metadata = _metadata_path(path)
    with _mapped(metadata) as data:
        return _Parser(data, str(metadata)).parse()


def referenced_files(path: str | os.PathLike[str]) -> tuple[StateFile, ...]:
    """The files the state handles of a savepoint's or checkpoint's ``_metadata`` refer to, in
    file order (state small enough to be inlined into ``_metadata`` is not among them)."""
    metadata = _metadata_path(path)
    with _mapped(metadata) as data:
        parser = _Parser(data, str(metadata), collect_files=True)
        parser.parse()
    assert parser.files is not None
    return tuple(parser.files)


@contextlib.contextmanager
def _mapped(metadata: Path) -> Iterator[bytes]:
    """The file's bytes, mapped rather than read: the parser touches what the header and the
    counts it reads lead it to, so memory follows what the metadata declares, not the file's
    size (a valid header followed by 300 MB of zeros is refused after a few pages)."""
    shown = _show_origin(str(metadata))
    try:
        with open_regular(metadata) as f:
            size = os.fstat(f.fileno()).st_size
            if size > _MAX_FILE_SIZE:
                raise DocumentError(f"{shown}: {size} bytes, too large for a _metadata")
            if size == 0:
                data: Any = b""
            else:
                data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as exc:
        raise DocumentError(f"{shown}: cannot read it: {_os_error(exc)}") from None
    try:
        yield data
    finally:
        if isinstance(data, mmap.mmap):
            data.close()


# ---------------------------------------------------------------------------------------------
#  Text
# ---------------------------------------------------------------------------------------------


def _quote_or_dash(value: str | None) -> str:
    return "-" if value is None else quote(value)


def render_text(savepoint: Savepoint) -> str:
    """A readable table: one line per operator state, names and uids quoted and escaped so that
    no control character, line separator or bidi override reaches the terminal raw."""
    count = len(savepoint.operators)
    lines = [
        f"Flink _metadata version {savepoint.version}, checkpoint {savepoint.checkpoint_id}: "
        f"{count} operator state{'' if count == 1 else 's'}"
    ]
    rows = [("OPERATOR ID", "PARALLELISM", "STATE", "COORDINATOR", "SIZE", "UID", "NAME")]
    for op in savepoint.operators:
        rows.append(
            (
                op.operator_id,
                f"{op.parallelism}/{op.max_parallelism}",
                ("finished" if op.fully_finished else "yes" if op.has_state else "no"),
                "yes" if op.coordinator_state else "no",
                str(op.state_size),
                _quote_or_dash(op.uid),
                _quote_or_dash(op.name),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        lines.append("  " + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
    return "\n".join(lines)
