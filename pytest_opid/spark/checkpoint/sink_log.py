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
``blockReplication``, ``blockSize``, ``action``). A compaction grows with every file the sink
ever wrote (about 250 bytes each: 72 MiB after 300,000 files), so the latest log file is read a
line at a time, keeping counts, not paths, within :data:`MAX_LOG_BYTES`.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

from pytest_opid.spark.checkpoint.files import (
    BATCH_NAME,
    COMPACT_NAME,
    CheckpointReader,
    field_of,
)

#: The log folder under a file sink's path (``FileStreamSink.metadataDir``).
METADATA_DIR = "_spark_metadata"

#: ``FileStreamSinkLog.VERSION``.
_SINK_LOG_VERSION = 1

#: Batch ids a compaction is taken to stand for, at most (``batches``).
_MAX_ENTRIES = 100_000

#: The largest log file read, a line at a time: 1 GiB is about 4 million entries of 250 bytes,
#: a year of a sink writing 8 files a minute, all in its latest compaction. A larger one is
#: not read (``SinkLog.unread`` says why): the restart is then not verified at the sink.
MAX_LOG_BYTES = 1 << 30

#: The longest line of a log file read (one ``SinkFileStatus``: a path and six numbers).
_MAX_LINE = 1 << 20

#: File names listed per data folder to find the logged files gone, at most in all (beyond
#: it each file is looked up by itself).
_MAX_LISTED = 2_000_000

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
    it); ``latest``: the highest (``None``: no log entry); ``files``: how many data files the
    latest log file lists; ``formats`` and ``partitions``: what the logged files' names and
    folders say (``{"json"}``, ``("name",)``); ``unlogged``: data files in the folder where
    there is no log (another writer's, or a log deleted); ``unread``: why the latest log file
    was not read (larger than :data:`MAX_LOG_BYTES`), ``""`` when it was."""

    path: str
    exists: bool
    logged: bool
    batches: tuple[int, ...] = ()
    latest: int | None = None
    files: int = 0
    formats: frozenset[str] = frozenset()
    partitions: tuple[str, ...] = ()
    unlogged: int = 0
    #: logged data files (of the log's last file) that are not in the folder any more
    missing: int = 0
    unread: str = ""


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
    batches = tuple(sorted(ids))
    rel = f"{METADATA_DIR}/{name}"
    if not r.is_file(rel):
        r.fail(rel, "not a regular file")
    size = os.stat(os.path.join(root, METADATA_DIR, name)).st_size
    if size > MAX_LOG_BYTES:
        unread = f"{r.full(rel)} is {size} bytes, more than the {MAX_LOG_BYTES} read of a sink log"
        return SinkLog(location, True, True, batches, latest, unread=unread)
    entries = _Entries()
    _read_entries(r, rel, os.path.join(root, METADATA_DIR, name), entries)
    return SinkLog(
        location,
        exists=True,
        logged=True,
        batches=batches,
        latest=latest,
        files=entries.count,
        formats=frozenset(entries.formats),
        partitions=entries.partitions,
        missing=entries.missing,
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


class _Entries:
    """What the verdict needs of a log file's entries, kept while they stream past: how many
    files, their formats, the first one's partition folders, and how many are gone."""

    def __init__(self) -> None:
        self.count = 0
        self.formats: set[str] = set()
        self.partitions: tuple[str, ...] = ()
        self.missing = 0
        self._listed: dict[str, frozenset[str] | None] = {}
        self._names = 0

    def add(self, path: str) -> None:
        if self.count == 0:
            self.partitions = _partition_columns(path)
        self.count += 1
        name = path.rsplit("/", 1)[-1]
        fmt = format_of(name)
        if fmt is not None:
            self.formats.add(fmt)
        local = local_path(path)
        if local is not None and not self._exists(local):
            self.missing += 1

    def _exists(self, local: str) -> bool:
        """Whether the data file is there: its folder is listed once (a stat per file costs
        seconds on a compaction of 300,000), up to :data:`_MAX_LISTED` names in all."""
        folder, name = os.path.split(local)
        if folder not in self._listed:
            names: frozenset[str] | None = None
            if self._names < _MAX_LISTED:
                try:
                    names = frozenset(os.listdir(folder))
                except OSError:
                    names = frozenset()
                self._names += len(names)
            self._listed[folder] = names
        listed = self._listed[folder]
        return os.path.exists(local) if listed is None else name in listed


def _read_entries(r: CheckpointReader, rel: str, local: str, entries: _Entries) -> None:
    """The log file's entries into ``entries``, a line at a time as Java's ``readLine`` splits
    them (``\n``, ``\r\n`` or ``\r``: Python's universal newlines are those three)."""
    try:
        with open(local, encoding="utf-8", newline=None) as stream:
            first = stream.readline(_MAX_LINE)
            if not first:
                r.fail(rel, "incomplete file sink log file (empty)")
            r.version(rel, first.rstrip("\n"), _SINK_LOG_VERSION)
            number = 1
            while line := stream.readline(_MAX_LINE):
                number += 1
                if not line.endswith("\n") and len(line) >= _MAX_LINE:
                    r.fail(rel, f"line {number} is longer than {_MAX_LINE} characters")
                _read_entry(r, rel, line.rstrip("\n"), number, entries)
    except UnicodeDecodeError as exc:
        r.fail(rel, f"not UTF-8 text ({exc.reason})")
    except OSError as exc:
        r.fail(rel, f"cannot be read: {exc.strerror or exc}")


def _read_entry(r: CheckpointReader, rel: str, line: str, number: int, entries: _Entries) -> None:
    """One ``SinkFileStatus`` line. The C parser reads it (a compaction has millions); a line
    it refuses, or that holds what the strict reader refuses (NaN), is read again by the
    strict one, whose message names the fault."""
    try:
        entry = json.loads(line, parse_constant=_refused)
    except (ValueError, RecursionError):
        entry = r.json(rel, line, f"line {number}")
    if not isinstance(entry, dict):
        r.fail(rel, f"line {number} must be a JSON object")
    path = field_of(r, rel, entry, "path", "str")
    action = field_of(r, rel, entry, "action", "str", required=False)
    if action in (None, "add"):
        entries.add(path)


def _refused(name: str) -> None:
    raise ValueError(name)


def _partition_columns(path: str) -> tuple[str, ...]:
    """The partition columns a logged file's folders name (``<path>/name=a/part-...``): the
    ``name=value`` folders right above it, outermost first."""
    folders = path.split("/")[:-1]
    columns: list[str] = []
    while folders and (m := _PARTITION.match(folders[-1])) is not None:
        columns.insert(0, m.group(1))
        folders.pop()
    return tuple(columns)
