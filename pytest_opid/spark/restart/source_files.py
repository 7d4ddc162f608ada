"""A file source's folder against its log in the checkpoint: which files the restarted query
will read, as ``FileStreamSource`` picks them (every file under its path that its log does not
name, hidden files ``_*`` and ``.*`` left out), and whether a file of the log lies under a
folder. Only a folder on this machine's file system is listed."""

from __future__ import annotations

import os

from pytest_opid.spark.checkpoint.logs import file_source_batches
from pytest_opid.spark.checkpoint.model import Checkpoint
from pytest_opid.spark.checkpoint.sink_log import format_of, local_path

#: Files listed under a source folder, at most (a larger folder is not judged).
MAX_LISTED = 10_000


def under(file: str, folder: str) -> bool:
    """A file of a source log (``file:/in/x.json``) inside ``folder`` (a path or URI)."""
    plain, root = local_path(file), local_path(folder)
    if plain is not None and root is not None:
        top = os.path.realpath(root)
        return os.path.realpath(plain).startswith(top.rstrip("/") + "/")
    return file.startswith(folder.rstrip("/") + "/")


def logged_files(checkpoint: Checkpoint, source_id: str, offset: object) -> list[str] | None:
    """Every file the source's log names up to the offset's log batch (``{"logOffset": n}``);
    ``None`` where it cannot be read."""
    if not isinstance(offset, dict) or not isinstance(offset.get("logOffset"), int):
        return None
    batches = file_source_batches(checkpoint.path, source_id, offset["logOffset"])
    if batches is None:
        return None
    return [f for files in batches.values() for f in files]


def unread_formats(
    checkpoint: Checkpoint, source_id: str, offset: object, path: str
) -> frozenset[str | None] | None:
    """The formats (by their names, ``None`` where a name does not tell) of the files under
    ``path`` that the source's log does not name: what the restarted query reads next.
    ``None`` where the folder is not on this machine, is too large, or its log cannot be
    read; empty where every file there is in the log."""
    root = local_path(path)
    logged = logged_files(checkpoint, source_id, offset)
    if root is None or logged is None or not os.path.isdir(root):
        return None
    seen = set()
    for f in logged:
        local = local_path(f)
        if local is not None:
            seen.add(os.path.realpath(local))
    formats: set[str | None] = set()
    listed = 0
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
        for name in names:
            listed += 1
            if listed > MAX_LISTED:
                return None
            if name.startswith(("_", ".")):
                continue
            if os.path.realpath(os.path.join(folder, name)) not in seen:
                formats.add(format_of(name))
    return frozenset(formats)
