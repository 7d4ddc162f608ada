"""Finding a savepoint's or retained checkpoint's ``_metadata`` and reading it: the directory or
the file, refused with one line when it is neither (a FIFO, a device, a broken link, a
directory without ``_metadata``), and the bytes mapped rather than read."""

from __future__ import annotations

import contextlib
import mmap
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pytest_opid.errors import DocumentError
from pytest_opid.flink.savepoint.metadata import MetadataReader
from pytest_opid.flink.savepoint.metadata_input import show_origin
from pytest_opid.flink.savepoint.model import Savepoint, StateFile
from pytest_opid.io.json import open_regular
from pytest_opid.io.storage import Location, is_url, locate
from pytest_opid.text import quote

__all__ = ["METADATA_FILE", "read_savepoint", "referenced_files"]

METADATA_FILE = "_metadata"

# A _metadata file is kilobytes to megabytes; refuse to slurp anything absurd.
_MAX_FILE_SIZE = 1 << 31


def _metadata_path(path: str | os.PathLike[str]) -> Path:
    """The ``_metadata`` file of a savepoint or checkpoint directory, or the file itself."""
    given = Path(path)
    shown = show_origin(str(given))
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
                f"{show_origin(str(inner))}: it is {what}, not a regular file, so not a "
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


def read_savepoint(path: str | os.PathLike[str] | Location) -> Savepoint:
    """Read a savepoint or checkpoint: its directory (holding ``_metadata``) or the
    ``_metadata`` file itself, a local path or a URL (``s3://``, ``gs://``...; only
    ``_metadata`` is read there)."""
    if isinstance(path, Location) or is_url(path):
        remote = _remote_metadata(locate(path))
        return MetadataReader(remote.read_bytes(_MAX_FILE_SIZE), str(remote)).parse()
    metadata = _metadata_path(path)
    with _mapped(metadata) as data:
        return MetadataReader(data, str(metadata)).parse()


def _remote_metadata(where: Location) -> Location:
    """The ``_metadata`` in a store: the folder's (found by one listing) or the file given."""
    if where.is_local:
        return where / METADATA_FILE if Path(where.path).is_dir() else where
    if where.is_dir():
        metadata = where / METADATA_FILE
        if not metadata.is_file():
            raise DocumentError(
                f"{where}: no {METADATA_FILE} file in this folder, so not a savepoint or "
                "checkpoint"
            )
        return metadata
    if not where.is_file():
        raise DocumentError(f"{where}: no such file or folder")
    return where


def referenced_files(path: str | os.PathLike[str]) -> tuple[StateFile, ...]:
    """The files the state handles of a savepoint's or checkpoint's ``_metadata`` refer to, in
    file order (state small enough to be inlined into ``_metadata`` is not among them)."""
    metadata = _metadata_path(path)
    with _mapped(metadata) as data:
        parser = MetadataReader(data, str(metadata), collect_files=True)
        parser.parse()
    assert parser.files is not None
    return tuple(parser.files)


@contextlib.contextmanager
def _mapped(metadata: Path) -> Iterator[bytes]:
    """The file's bytes, mapped rather than read: the parser touches what the header and the
    counts it reads lead it to, so memory follows what the metadata declares, not the file's
    size (a valid header followed by 300 MB of zeros is refused after a few pages)."""
    shown = show_origin(str(metadata))
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
