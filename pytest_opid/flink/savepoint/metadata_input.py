"""Java's data stream over the bytes of a ``_metadata`` file, with the place being read kept
for messages: every error is one line naming the file, the byte, the operator (its ID once
read, its position before), the subtask, the kind of state and the field."""

from __future__ import annotations

from typing import NoReturn

from pytest_opid.errors import DocumentError
from pytest_opid.flink.savepoint.model import StateFile
from pytest_opid.io.java_data import DataInput
from pytest_opid.text import printable, shorten

__all__ = ["MetadataInput", "show_origin"]


def show_origin(origin: str, limit: int = 100) -> str:
    """The file name for a message: escaped like a quoted value, without quotes, and only its
    tail (the part naming the savepoint) where it is very long."""
    return printable(shorten(origin, limit, around=len(origin)))


class MetadataInput(DataInput):
    """:class:`~pytest_opid.io.java_data.DataInput` over a ``_metadata`` file: what is being
    read (``what``, ``part``, the operator and subtask) and, when asked, the state files found
    (``files``)."""

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
            f"{show_origin(self.origin)}: {problem} at byte {byte} while reading {where}"
        )
