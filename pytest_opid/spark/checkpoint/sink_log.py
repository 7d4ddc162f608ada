"""A file sink's own log, ``<path>/_spark_metadata`` (``FileStreamSinkLog``), read as Spark
reads it when a query writes into the folder: which batch ids are committed there and which
files they added. Pure Python, no verdicts.

Spark's ``FileStreamSink.addBatch`` skips a batch whose id is at most the log's latest batch id
("Skipping already committed batch"), and a reader of the folder (``spark.read``) lists the
files of the log, not of the folder, from batch 0 on. So what a restarted (or a new) query
does to the sink depends on this log as much as on its checkpoint.

Log files: one per batch, named by the batch id, and every 10th (``compactInterval``) batch
``<id>.compact`` holding every entry up to it; each starts with ``v1`` and holds one
``SinkFileStatus`` JSON per line (``path``, ``size``, ``isDir``, ``modificationTime``,
``blockReplication``, ``blockSize``, ``action``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from pytest_opid.spark.checkpoint.files import (
    BATCH_NAME,
    COMPACT_NAME,
    CheckpointReader,
    field_of,
    java_lines,
)

#: The log folder under a file sink's path (``FileStreamSink.metadataDir``).
METADATA_DIR = "_spark_metadata"

#: ``FileStreamSinkLog.VERSION``.
_SINK_LOG_VERSION = 1

#: Entries read per sink log, at most: the log's last files are enough to tell its layout.
_MAX_ENTRIES = 100_000

#: A Hive-style partition folder in a data file's path (``name=value``).
_PARTITION = re.compile(r"^([^=/]+)=[^/]*$")

#: A data file's format by the end of its name, as Spark's writers name them.
_EXTENSIONS = (
    (".parquet", "parquet"),
    (".json", "json"),
    (".csv", "csv"),
    (".orc", "orc"),
    (".txt", "text"),
    (".avro", "avro"),
    (".xml", "xml"),
)


@dataclass(frozen=True)
class SinkLog:
    """A file sink's folder as a restart finds it.

    ``exists``: the folder exists; ``logged``: it has a ``_spark_metadata`` folder;
    ``batches``: the batch ids of its log files (a compaction counts for every batch up to
    it); ``latest``: the highest (``None``: no log entry); ``files``: the data files the latest
    log file lists (paths as written); ``formats`` and ``partitions``: what the logged files'
    names and folders say (``{"json"}``, ``("name",)``); ``unlogged``: data files in the folder
    where there is no log (another writer's, or a log deleted)."""

    path: str
    exists: bool
    logged: bool
    batches: tuple[int, ...] = ()
    latest: int | None = None
    files: tuple[str, ...] = ()
    formats: frozenset[str] = frozenset()
    partitions: tuple[str, ...] = ()
    unlogged: int = 0
    #: logged data files (of the log's last file) that are not in the folder any more
    missing: int = 0


def local_path(location: str) -> str | None:
    """A local file system path for ``location`` (a plain path or a ``file:`` URI); ``None``
    for another file system (``s3a://``, ``hdfs://``), which is not read here."""
    if location.startswith("file:"):
        rest = location[len("file:") :]
        if rest.startswith("//"):
            rest = rest[2:]
            if not rest.startswith("/"):
                return None  # file://host/...
        return os.path.normpath(rest)
    if "://" in location:
        return None
    return os.path.normpath(os.path.abspath(location))


def format_of(name: str) -> str | None:
    """A data file's format by its name (``part-0-...c000.snappy.parquet`` -> parquet)."""
    lowered = name.lower()
    for suffix in (".gz", ".bz2", ".deflate", ".lz4", ".snappy", ".zst"):
        if lowered.endswith(suffix) and not lowered.endswith(".snappy.parquet"):
            lowered = lowered[: -len(suffix)]
    for ext, fmt in _EXTENSIONS:
        if lowered.endswith(ext):
            return fmt
    return None


def read_sink_log(location: str) -> SinkLog | None:
    """The file sink folder at ``location``; ``None`` where it is not on the local file
    system. A malformed log is a :class:`~pytest_opid.errors.DocumentError` naming the file."""
    root = local_path(location)
    if root is None:
        return None
    if not os.path.isdir(root):
        return SinkLog(location, exists=os.path.exists(root), logged=False)
    r = CheckpointReader(root)
    if not r.is_dir(METADATA_DIR):
        data = [
            n
            for n in _walk_names(root)
            if not n.startswith(("_", ".")) and format_of(n) is not None
        ]
        return SinkLog(location, exists=True, logged=False, unlogged=len(data))
    plain: dict[int, str] = {}
    compact: dict[int, str] = {}
    for name in r.listdir(METADATA_DIR):
        if BATCH_NAME.fullmatch(name):
            plain[int(name)] = name
        elif (m := COMPACT_NAME.fullmatch(name)) is not None:
            compact[int(m.group(1))] = name
    ids = set(plain) | set(compact)
    if compact:  # a compaction holds every batch up to it
        ids |= set(range(max(0, max(compact) - _MAX_ENTRIES), max(compact) + 1))
    if not ids:
        return SinkLog(location, exists=True, logged=True)
    latest = max(ids)
    name = plain.get(latest) or compact[latest]
    files = _read_entries(r, f"{METADATA_DIR}/{name}")
    formats = frozenset(f for f in (format_of(p.rsplit("/", 1)[-1]) for p in files) if f)
    return SinkLog(
        location,
        exists=True,
        logged=True,
        batches=tuple(sorted(ids)),
        latest=latest,
        files=files,
        formats=formats,
        partitions=_partition_columns(files),
        missing=sum(1 for p in files if (q := local_path(p)) is not None and not os.path.exists(q)),
    )


def _walk_names(root: str) -> list[str]:
    """File names under ``root``, at most a few thousand (enough to say data is there)."""
    names: list[str] = []
    for _, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
        names += files
        if len(names) > 10_000:
            break
    return names


def _read_entries(r: CheckpointReader, rel: str) -> tuple[str, ...]:
    lines = java_lines(r.read_text(rel))
    if not lines:
        r.fail(rel, "incomplete file sink log file (empty)")
    r.version(rel, lines[0], _SINK_LOG_VERSION)
    paths: list[str] = []
    for number, line in enumerate(lines[1 : _MAX_ENTRIES + 1], start=2):
        entry = r.json(rel, line, f"line {number}")
        if not isinstance(entry, dict):
            r.fail(rel, f"line {number} must be a JSON object")
        path = field_of(r, rel, entry, "path", "str")
        action = field_of(r, rel, entry, "action", "str", required=False)
        if action in (None, "add"):
            paths.append(path)
    return tuple(paths)


def _partition_columns(files: tuple[str, ...]) -> tuple[str, ...]:
    """The partition columns the logged files' folders name (``<path>/name=a/part-...``):
    the ``name=value`` folders right above the first file, outermost first."""
    for path in files[:1]:
        folders = path.split("/")[:-1]
        columns: list[str] = []
        while folders and (m := _PARTITION.match(folders[-1])) is not None:
            columns.insert(0, m.group(1))
            folders.pop()
        return tuple(columns)
    return ()
