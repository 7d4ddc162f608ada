"""State handles as ``MetadataV2V3SerializerBase`` (Flink 2.3) writes them, and the channel state
handles of unaligned checkpoints as ``ChannelStateHandleSerializerV1``/``V2`` do.

The reader takes from a handle only its size and, when asked, the files it refers to; it makes
the checks Flink's constructors make (key-group ranges, null handles where Flink requires one,
known tags and modes). Changelog handles, which nest keyed handles, are walked with an explicit
stack.
"""

from __future__ import annotations

from collections.abc import Callable

from pytest_opid.flink.savepoint.metadata_input import MetadataInput
from pytest_opid.flink.savepoint.model import StateFile

__all__ = [
    "BYTE_STREAM_HANDLE",
    "NULL_HANDLE",
    "STREAM_HANDLE_NAMES",
    "StateHandleReader",
]

# Handle tags of MetadataV2V3SerializerBase (Flink 2.3).
NULL_HANDLE = 0
BYTE_STREAM_HANDLE = 1
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

STREAM_HANDLE_NAMES = {
    BYTE_STREAM_HANDLE: "byte stream handle",
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
    NULL_HANDLE,
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


class StateHandleReader(MetadataInput):
    """Reading the state handles of a subtask state."""

    __slots__ = ()

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
            name = STREAM_HANDLE_NAMES.get(tag)
            if name is not None:
                self.what = "the " + name
            if tag == NULL_HANDLE:
                if wrappers:
                    self.fail("a key-groups handle around a null handle", at)
                return None
            if tag == BYTE_STREAM_HANDLE:
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
        count = self.key_group_range(_key_group_offsets_ok)
        self.skip(count, "key-group offsets", 8)

    def key_group_range(self, valid: Callable[[int, int], bool] = _key_group_range_ok) -> int:
        """A key-group range (start, count) that ``valid`` accepts; its count."""
        at = self.pos
        start = self.i32()
        count = self.i32()
        if not valid(start, count):
            self.fail(f"invalid key-group range: start {start}, {count} key groups", at)
        return count

    def operator_handle(self) -> int | None:
        """``MetadataV2V3SerializerBase.deserializeOperatorStateHandle``."""
        at = self.pos
        tag = self.u8()
        if tag == NULL_HANDLE:
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
            if tag == NULL_HANDLE:
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
