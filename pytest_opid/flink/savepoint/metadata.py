"""The ``_metadata`` format, versions 3 to 7, as ``Checkpoints.loadCheckpointMetadata`` reads it
and ``MetadataV3Serializer`` .. ``MetadataV6Serializer`` write it on top of
``MetadataV2V3SerializerBase`` (version 7: unreleased Flink master, an optional trailing field
per subtask): the header, the master states, each operator state with its subtask states, and
(version 4 on) the Java-serialized checkpoint properties.

It makes the checks Flink's loader makes (counts, parallelism, subtask indices, null handles),
so that a corrupt file is refused rather than misread, and trusts no count or length from the
file before it is checked against the bytes that are left.
"""

from __future__ import annotations

from pytest_opid.errors import DocumentError
from pytest_opid.flink.savepoint.metadata_input import show_origin
from pytest_opid.flink.savepoint.model import OperatorState, Savepoint
from pytest_opid.flink.savepoint.object_stream import ObjectStreamReader
from pytest_opid.flink.savepoint.state_handles import (
    BYTE_STREAM_HANDLE,
    NULL_HANDLE,
    STREAM_HANDLE_NAMES,
    StateHandleReader,
)

__all__ = ["MetadataReader", "parse_metadata"]

# Checkpoints.HEADER_MAGIC_NUMBER
_MAGIC = 0x4960672D
# MetadataV2V3SerializerBase.MASTER_STATE_MAGIC_NUMBER, as the signed int that readInt returns
_MASTER_STATE_MAGIC = 0xC96B1696 - (1 << 32)
_SUPPORTED_VERSIONS = range(3, 8)


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

#: ``deserializeSubtaskState`` reads them in this order: each kind's part (for messages) and bit;
#: a channel state's side (input channel: True, result subpartition: False).
_OPERATOR_PARTS = (
    ("managed operator state", _MANAGED_OPERATOR),
    ("raw operator state", _RAW_OPERATOR),
)
_KEYED_PARTS = (("managed keyed state", _MANAGED_KEYED), ("raw keyed state", _RAW_KEYED))
_CHANNEL_PARTS = (
    ("input channel state", _INPUT_CHANNEL, True),
    ("result subpartition state", _RESULT_SUBPARTITION, False),
)


def _kind_names(mask: int) -> tuple[str, ...]:
    return tuple(sorted(name for bit, name in _KIND_NAMES if mask & bit))


class MetadataReader(StateHandleReader, ObjectStreamReader):
    """One pass over the bytes of a ``_metadata`` file: Java's data stream (the primitives are
    :class:`~pytest_opid.io.java_data.DataInput`'s), its state handles and object stream."""

    __slots__ = ()

    def parse(self) -> Savepoint:
        """``Checkpoints.loadCheckpointMetadata`` and ``MetadataV2V3SerializerBase``."""
        if self.end == 0:
            raise DocumentError(f"{show_origin(self.origin)}: empty file, not a _metadata file")
        if self.end < 8:
            raise DocumentError(
                f"{show_origin(self.origin)}: only {self.end} bytes, too short for a Flink "
                "_metadata file"
            )
        magic = self.i32() & 0xFFFFFFFF
        if magic != _MAGIC:
            raise DocumentError(
                f"{show_origin(self.origin)}: not a Flink savepoint or checkpoint _metadata "
                f"file (magic number 0x{magic:08x}, expected 0x{_MAGIC:08x})"
            )
        version = self.i32()
        if version not in _SUPPORTED_VERSIONS:
            hint = " (Flink 1.10 or older)" if version in (1, 2) else ""
            raise DocumentError(
                f"{show_origin(self.origin)}: unsupported _metadata version {version}{hint}; "
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
        if coordinator is not None and self.stream_tag != BYTE_STREAM_HANDLE:
            self.fail(
                f"a {STREAM_HANDLE_NAMES[self.stream_tag]} as coordinator state (Flink expects "
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
        elif n > self.end - self.pos:
            self.fail(
                f"{n} subtask states announced, only {self.end - self.pos} bytes left", count_at
            )
        subtasks: dict[int, tuple[int, int]] = {}
        for _ in range(n):  # none where fully finished (n < 0)
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
            fully_finished=n < 0,
            subtask_states=len(subtasks),
            state_kinds=_kind_names(mask),
        )

    def subtask_state(self) -> tuple[int, int]:
        """``MetadataV2V3SerializerBase.deserializeSubtaskState``: the kinds of state present
        (as bits) and their size. Null keyed handles, the common case, take a shortcut."""
        mask = 0
        size = 0
        for part, bit in _OPERATOR_PARTS:
            self.part = part
            if self.presence_flag():
                size += self.flagged_operator_handle()
                mask |= bit
        for part, bit in _KEYED_PARTS:
            self.part = part
            if self.pos < self.end and self.data[self.pos] == NULL_HANDLE:
                self.pos += 1
                continue
            handle_size = self.keyed_handle()
            if handle_size is not None:
                mask |= bit
                size += handle_size
        for part, bit, input_side in _CHANNEL_PARTS:
            self.part = part
            handles = self.collection_size()
            if handles > 0:
                mask |= bit
                for _ in range(handles):
                    size += self.channel_handle(input_side)
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


def parse_metadata(data: bytes, origin: str) -> Savepoint:
    """Read the bytes of a ``_metadata`` file; ``origin`` names it in error messages."""
    return MetadataReader(bytes(data), origin).parse()
