"""Reading a checkpoint's files as untrusted input: bounded sizes, regular files only, strict
JSON (no duplicate keys, no NaN), Java's line and trim rules where Spark reads text with them;
every problem is one :class:`~pytest_opid.errors.DocumentError` naming the file."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any, NoReturn

from pytest_opid.errors import DocumentError
from pytest_opid.io.json import JsonProblem, strict_loads
from pytest_opid.io.storage import Location, StorageError, locate
from pytest_opid.text import printable, quote

_MAX_FILE_BYTES = 64 * 1024 * 1024  # no checkpoint metadata file comes near this


_QUOTE_CHARS = 80


BATCH_NAME = re.compile(r"[0-9]{1,18}")  # HDFSMetadataLog batch files: the batch id as name


COMPACT_NAME = re.compile(r"([0-9]{1,18})\.compact")  # CompactibleFileStreamLog


#: The file pytest-opid keeps in a checkpoint folder: the deployed query's fingerprint
#: (:mod:`pytest_opid.spark.deployed`). Spark lists no such name; a slim copy keeps it.
RECORD_NAME = "_opid_deployed.json"

#: The file a slim copy (:mod:`pytest_opid.spark.checkpoint.slim`) keeps the location it was
#: copied from in, ``{"copied_from": "<checkpoint location>"}``: a writer naming that location
#: restarts on the state the copy holds. Spark lists no such name.
ORIGIN_NAME = "_opid_slim.json"


LINE_BREAK = re.compile(r"\r\n|\r|\n")  # java.io.BufferedReader.readLine


def quoted(text: str, limit: int = _QUOTE_CHARS, around: int | None = None) -> str:
    """``text`` as a one-line JSON string literal of at most ``limit`` characters of it (those
    around position ``around`` when given): :func:`pytest_opid.text.quote`."""
    return quote(text, limit, around)


def _show_path(path: str) -> str:
    """A path for a message: as is when harmless, else quoted."""
    return path if printable(path) == path and path.strip() == path else quote(path, 300)


class CheckpointReader:
    """Reads the files of one checkpoint, local or in a store (:class:`Location`), and raises
    DocumentError naming the file."""

    def __init__(self, root: str | os.PathLike[str] | Location) -> None:
        self.location = locate(root)
        self.root = str(self.location)

    def at(self, rel: str) -> Location:
        return self.location.child(*rel.split("/")) if rel else self.location

    def full(self, rel: str) -> str:
        return str(self.at(rel))

    def fail(self, rel: str, what: str) -> NoReturn:
        where = _show_path(self.full(rel) if rel else self.root)
        raise DocumentError(f"{where}: {what}".replace("\n", " "))

    def is_dir(self, rel: str) -> bool:
        return self.at(rel).is_dir()

    def is_file(self, rel: str) -> bool:
        """Whether a regular file is at ``rel`` (a link followed). Anything else there (a
        directory, a FIFO, a device) is an error naming it, never skipped as if missing:
        Spark's readers would fail on it, not pass it by."""
        try:
            return self.at(rel).is_file()
        except StorageError as exc:
            self.fail(rel, exc.what)

    def listdir(self, rel: str) -> list[str]:
        try:
            return list(self.at(rel).list())
        except StorageError as exc:
            self.fail(rel, exc.what)

    def read_bytes(self, rel: str) -> bytes:
        try:
            data = self.at(rel).read_bytes(_MAX_FILE_BYTES)
        except StorageError as exc:
            self.fail(rel, exc.what)
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
            return strict_loads(text)
        except JsonProblem as exc:
            self.fail(
                rel, f"{what} is not valid JSON ({exc.reason}): {quoted(text, around=exc.pos)}"
            )

    def version(self, rel: str, line: str, max_version: int) -> int:
        # MetadataVersionUtil.validateVersion: "v<positive int>", at most max_version.
        digits = line[1:]
        if (
            line[:1] != "v"
            or not (digits.isascii() and digits.isdigit() and len(digits) <= 9)
            or int(digits) <= 0
        ):
            self.fail(rel, f"malformed version line {quoted(line)}, expected v1..v{max_version}")
        version = int(digits)
        if version > max_version:
            self.fail(
                rel,
                f"unsupported version v{version}: Spark 4.3 reads this file up to v{max_version}",
            )
        return version


def reparse(text: str) -> dict[str, Any]:
    # Only ever called on text strict_loads already accepted as an object.
    value = strict_loads(text)
    assert isinstance(value, dict)
    return value


def java_lines(text: str) -> list[str]:
    """Lines as java.io.BufferedReader.readLine (and Scala's getLines) split them."""
    if not text:
        return []
    lines = LINE_BREAK.split(text)
    if lines[-1] == "":
        lines.pop()
    return lines


def java_trim(text: str) -> str:
    """java.lang.String.trim: drops characters up to U+0020 at both ends."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def field_of(
    r: CheckpointReader,
    rel: str,
    obj: Mapping[str, Any],
    key: str,
    kind: str,
    *,
    required: bool = True,
) -> Any:
    """obj[key] checked to be of ``kind`` (int, str, bool, object, array); None if absent."""
    if key not in obj:
        if required:
            r.fail(rel, f"missing {quoted(key)}")
        return None
    value = obj[key]
    ok = {
        "int": is_int(value) and -(2**63) <= value < 2**63,  # a Java long
        "str": isinstance(value, str),
        "bool": isinstance(value, bool),
        "object": isinstance(value, dict),
        "array": isinstance(value, list),
    }[kind]
    if not ok:
        shown = quoted(json.dumps(value, ensure_ascii=False)) if _shallow(value) else type(value)
        r.fail(rel, f"{quoted(key)} must be {'an' if kind[0] in 'aio' else 'a'} {kind}: {shown}")
    return value


def _shallow(value: Any) -> bool:
    return not isinstance(value, (dict, list))


def batch_files(r: CheckpointReader, rel_dir: str) -> dict[int, str]:
    """Batch id -> file name of an HDFSMetadataLog folder (hidden and .crc files are skipped)."""
    found: dict[int, str] = {}
    for name in r.listdir(rel_dir):
        if BATCH_NAME.fullmatch(name) and r.is_file(f"{rel_dir}/{name}"):
            batch = int(name)
            if batch in found:
                r.fail(f"{rel_dir}/{name}", f"batch {batch} is also in {quoted(found[batch])}")
            found[batch] = name
    return found
