"""Read a Flink savepoint's or retained checkpoint's ``_metadata`` without a JVM.

Why: whether a changed job can restore from a savepoint depends on which OperatorIDs the
savepoint holds state for, with what parallelism and max parallelism. That list lives in the
binary ``_metadata`` file, and Flink's own loader (``Checkpoints.loadCheckpointMetadata``) needs
a JVM and Flink on the classpath. This package reads the same bytes in one pass in pure Python,
so a test, the CLI or CI can look at a savepoint next to the OperatorIDs pytest-opid computes.
It reads no state itself, only the handles that say where the state is and how big it is.

Java's ``DataInputStream`` conventions throughout: big-endian ints and longs, ``readUTF`` as a
2-byte length and modified UTF-8. Every problem is a :class:`~pytest_opid.errors.DocumentError`
with one line naming the file, the byte and what was being read. Nothing recurses.

Modules: :mod:`.model` (the result types), :mod:`.read` (finding and mapping ``_metadata``),
:mod:`.metadata` (the format per version, ``Checkpoints`` and ``MetadataV3Serializer`` ..
``MetadataV7Serializer``), :mod:`.state_handles` (``MetadataV2V3SerializerBase``'s state handles),
:mod:`.object_stream` (the Java-serialized checkpoint properties), :mod:`.metadata_input` (the
data stream and its messages), :mod:`.text` (``opid savepoint``'s table).
"""

from __future__ import annotations

from pytest_opid.flink.savepoint.metadata import parse_metadata
from pytest_opid.flink.savepoint.model import OperatorState, Savepoint, StateFile
from pytest_opid.flink.savepoint.read import METADATA_FILE, read_savepoint, referenced_files
from pytest_opid.flink.savepoint.text import render_text

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
