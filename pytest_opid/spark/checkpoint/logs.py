"""The offset log, the commit log and the file source logs (``offsets/<batch>``,
``commits/<batch>``, ``sources/<n>/<batch>``): the last batch, what it committed, the confs it
pins, each source's offset and, for a file source, the files its last batch read."""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from pytest_opid.io.json import JsonProblem, strict_loads
from pytest_opid.spark.checkpoint.files import (
    BATCH_NAME,
    COMPACT_NAME,
    ORIGIN_NAME,
    CheckpointReader,
    field_of,
    is_int,
    java_lines,
    java_trim,
    quoted,
)
from pytest_opid.spark.checkpoint.model import SourceOffset
from pytest_opid.spark.checkpoint.operators import safe_component

# Highest versions Spark 4.3 reads: OffsetSeqLog.MAX_VERSION, CommitLog.MAX_VERSION,
# OperatorStateMetadata (v1 file or v2 log), SchemaHelper.SchemaReader, FileStreamSourceLog.
_MAX_OFFSET_LOG_VERSION = 2


_MAX_COMMIT_LOG_VERSION = 2


_FILE_SOURCE_LOG_VERSION = 1


_MAX_LOG_BATCHES = 1_000_000  # file source log batches one query batch may span


def read_query_id(r: CheckpointReader) -> str | None:
    # StreamMetadata: the file `metadata`, {"id": "<query id>"}. None where it is missing
    # beside an offset log: Spark refuses such a checkpoint (the restart check says so).
    rel = "metadata"
    if not r.is_file(rel):
        if r.is_dir("offsets"):
            return None
        r.fail(rel, "missing: not a Spark streaming checkpoint (no stream metadata file)")
    obj = r.json(rel, r.read_text(rel), "the stream metadata")
    if not isinstance(obj, dict):
        r.fail(rel, "the stream metadata must be a JSON object")
    return str(field_of(r, rel, obj, "id", "str"))


def read_copied_from(r: CheckpointReader) -> str | None:
    """The location a slim copy was copied from (:data:`ORIGIN_NAME`); ``None`` where the
    checkpoint is no slim copy (or one made before the copies kept it)."""
    if not r.is_file(ORIGIN_NAME):
        return None
    obj = r.json(ORIGIN_NAME, r.read_text(ORIGIN_NAME), "the slim copy's origin")
    if not isinstance(obj, dict):
        r.fail(ORIGIN_NAME, "the slim copy's origin must be a JSON object")
    return str(field_of(r, ORIGIN_NAME, obj, "copied_from", "str"))


@dataclass(frozen=True)
class _OffsetEntry:
    version: int
    watermark_ms: int | None
    timestamp_ms: int | None
    confs: dict[str, str]
    sources: tuple[tuple[str, str | None], ...]  # (source id, offset JSON or None)


def read_offsets(r: CheckpointReader, rel: str) -> _OffsetEntry:
    # OffsetSeqLog: "v1" + metadata JSON line + one offset JSON per source ("-": none), or
    # "v2" (OffsetMap, named sources) + metadata + one "<sourceId>:<offset JSON>" per source.
    lines = java_lines(r.read_text(rel))
    if not lines:
        r.fail(rel, "empty offset log file")
    version = r.version(rel, lines[0], _MAX_OFFSET_LOG_VERSION)
    if len(lines) < 2:
        r.fail(rel, "no metadata line after the version line")
    watermark = timestamp = None
    confs: dict[str, str] = {}
    meta_text = java_trim(lines[1])
    if meta_text:
        # OffsetSeqMetadata / OffsetSeqMetadataV2
        meta = r.json(rel, meta_text, "the offset metadata (line 2)")
        if not isinstance(meta, dict):
            r.fail(rel, "the offset metadata (line 2) must be a JSON object")
        watermark = field_of(r, rel, meta, "batchWatermarkMs", "int", required=False)
        timestamp = field_of(r, rel, meta, "batchTimestampMs", "int", required=False)
        conf = field_of(r, rel, meta, "conf", "object", required=False) or {}
        for key, value in conf.items():
            if not isinstance(value, str):
                r.fail(rel, f"conf {quoted(key)} must be a string")
            confs[key] = value
    elif version == 2:
        r.fail(rel, "a v2 offset log entry needs its metadata line")
    sources: list[tuple[str, str | None]] = []
    seen: set[str] = set()  # a set: one scan of the sources per source is quadratic time
    for number, line in enumerate(lines[2:], start=3):
        if version == 2:
            source_id, colon, offset_text = line.partition(":")
            if not colon:
                r.fail(rel, f"line {number} is not <sourceId>:<offset>: {quoted(line)}")
            if source_id in seen:
                r.fail(rel, f"source {quoted(source_id)} appears twice")
            seen.add(source_id)
        else:
            source_id, offset_text = str(len(sources)), line
        if offset_text == "-":  # OffsetSeqLog.SERIALIZED_VOID_OFFSET
            sources.append((source_id, None))
            continue
        r.json(rel, offset_text, f"the offset on line {number}")
        sources.append((source_id, offset_text))
    return _OffsetEntry(version, watermark, timestamp, confs, tuple(sources))


def read_commit_watermark(r: CheckpointReader, rel: str) -> int | None:
    # CommitLog: version line, then optional CommitMetadata JSON (nextBatchWatermarkMs, and in v2
    # the state store unique ids).
    lines = java_lines(r.read_text(rel))
    if not lines:
        r.fail(rel, "incomplete commit log file (empty)")
    r.version(rel, java_trim(lines[0]), _MAX_COMMIT_LOG_VERSION)
    meta = r.json(rel, lines[1], "the commit metadata (line 2)") if len(lines) > 1 else {}
    if not isinstance(meta, dict):
        r.fail(rel, "the commit metadata (line 2) must be a JSON object")
    watermark: int | None = field_of(r, rel, meta, "nextBatchWatermarkMs", "int", required=False)
    return 0 if watermark is None else watermark


def _file_source_log_offset(offset: str | None) -> int | None:
    """n for a FileStreamSourceOffset {"logOffset": n}, else None."""
    if offset is None:
        return None
    try:
        value = strict_loads(offset)
    except JsonProblem:
        return None
    if isinstance(value, dict) and set(value) == {"logOffset"} and is_int(value["logOffset"]):
        return int(value["logOffset"])
    return None


def _read_file_source_files(
    r: CheckpointReader, source_id: str, start: int, end: int
) -> tuple[str, ...]:
    """Paths of the FileStreamSourceLog batches start+1..end (what one query batch read)."""
    if end <= start:
        return ()
    rel_dir = f"sources/{source_id}"
    if not safe_component(source_id):
        r.fail("sources", f"source id {quoted(source_id)} is not a folder name")
    if end - start > _MAX_LOG_BATCHES:
        r.fail(rel_dir, f"one query batch cannot read log batches {start + 1}..{end}")
    if not r.is_dir(rel_dir):
        r.fail(rel_dir, f"missing: the file source log of its log batches {start + 1}..{end}")
    plain: dict[int, str] = {}
    compact: dict[int, str] = {}
    for name in r.listdir(rel_dir):
        if BATCH_NAME.fullmatch(name):
            plain[int(name)] = name
        elif (m := COMPACT_NAME.fullmatch(name)) is not None:
            compact[int(m.group(1))] = name
    compact_ids = sorted(compact)
    low, high = start + 1, end
    # CompactibleFileStreamLog folds every batch up to a compaction batch into
    # "<batch>.compact": a batch without its own file is in the next compaction's. Past the
    # last compaction every batch needs its own file; the first one without is reported.
    tail = max(low, (compact_ids[-1] + 1) if compact_ids else low)
    if tail <= high:
        own = sorted(b for b in plain if tail <= b <= high)
        for batch, found in zip(range(tail, high + 1), [*own, None], strict=False):
            if batch != found:
                r.fail(rel_dir, f"no log file holds file source batch {batch}")
    parsed: dict[str, dict[int, list[str]]] = {}

    def entries(name: str) -> dict[int, list[str]]:
        # Each log file read once, its entries grouped by batch: the work is the files' size,
        # whatever the span of batches (a large logOffset) and however many share a file.
        if name not in parsed:
            grouped: dict[int, list[str]] = {}
            for b, path in _read_file_source_log(r, f"{rel_dir}/{name}"):
                grouped.setdefault(b, []).append(path)
            parsed[name] = grouped
        return parsed[name]

    # FileStreamSourceLog.get keeps, per batch, the entries of that batch from its file.
    chosen = [(b, entries(plain[b]).get(b, [])) for b in sorted(plain) if low <= b <= high]
    i = bisect.bisect_left(compact_ids, low)
    previous = compact_ids[i - 1] if i else -1
    while i < len(compact_ids) and previous < high:
        holds = range(max(previous + 1, low), min(compact_ids[i], high) + 1)
        for b, paths in entries(compact[compact_ids[i]]).items():
            if b in holds and b not in plain:
                chosen.append((b, paths))
        previous = compact_ids[i]
        i += 1
    chosen.sort(key=lambda item: item[0])  # one entry list per batch, in batch order
    return tuple(path for _, paths in chosen for path in paths)


def _read_file_source_log(r: CheckpointReader, rel: str) -> list[tuple[int, str]]:
    # CompactibleFileStreamLog / FileStreamSourceLog: "v1", then one FileEntry JSON per line
    # ({"path": ..., "timestamp": ..., "batchId": ...}).
    lines = java_lines(r.read_text(rel))
    if not lines:
        r.fail(rel, "incomplete log file (empty)")
    r.version(rel, lines[0], _FILE_SOURCE_LOG_VERSION)
    out: list[tuple[int, str]] = []
    for number, line in enumerate(lines[1:], start=2):
        entry = r.json(rel, line, f"line {number}")
        if not isinstance(entry, dict):
            r.fail(rel, f"line {number} must be a JSON object")
        path = field_of(r, rel, entry, "path", "str")
        batch = field_of(r, rel, entry, "batchId", "int")
        field_of(r, rel, entry, "timestamp", "int")
        out.append((batch, path))
    return out


def read_sources(
    r: CheckpointReader,
    latest: _OffsetEntry | None,
    offset_files: dict[int, str],
    last_committed: int | None,
) -> tuple[SourceOffset, ...]:
    if latest is None:
        return ()
    # The files the last committed batch read: FileStreamSource.getBatch(start, end) reads the log
    # batches after the previous batch's logOffset up to this batch's.
    committed: dict[str, str | None] = {}
    before: dict[str, str | None] = {}
    if last_committed is not None:
        entry = (
            latest
            if last_committed == max(offset_files)
            else read_offsets(r, f"offsets/{offset_files[last_committed]}")
        )
        committed = dict(entry.sources)
        previous = last_committed - 1
        if previous in offset_files:
            before = dict(read_offsets(r, f"offsets/{offset_files[previous]}").sources)
    out: list[SourceOffset] = []
    for position, (source_id, offset) in enumerate(latest.sources):
        files: tuple[str, ...] | None = None
        if _file_source_log_offset(offset) is not None:
            end = _file_source_log_offset(committed.get(source_id))
            start = _file_source_log_offset(before.get(source_id))
            if (
                end is not None
                and safe_component(source_id)
                and not r.is_dir(f"sources/{source_id}")
            ):
                # the log folder is gone: Spark fails the restart (the restart check says so)
                out.append(SourceOffset(position, source_id, offset, None, log_missing=end))
                continue
            files = (
                ()
                if end is None
                else _read_file_source_files(r, source_id, -1 if start is None else start, end)
            )
        out.append(SourceOffset(position, source_id, offset, files))
    return tuple(out)


#: Log batches :func:`file_source_batches` reads, at most: enough for the first batches of a
#: query that starts over, bounded for a long-running one.
_MAX_EARLY_BATCHES = 1_000


def file_source_batches(root: str, source_id: str, last: int) -> dict[int, tuple[str, ...]] | None:
    """The files each file source log batch 0..``last`` of ``sources/<source_id>`` added, as
    ``FileStreamSourceLog.get`` returns them; ``None`` where the log is not there, a batch has
    no log file, or ``last`` is past :data:`_MAX_EARLY_BATCHES`."""
    if last >= _MAX_EARLY_BATCHES or not safe_component(source_id):
        return None
    r = CheckpointReader(root)
    rel_dir = f"sources/{source_id}"
    if not r.is_dir(rel_dir):
        return None
    try:
        files = _read_file_source_files(r, source_id, -1, last)
    except Exception:  # a malformed log: the restart check on it names it
        return None
    out: dict[int, list[str]] = {b: [] for b in range(last + 1)}
    wanted = set(files)
    for name in r.listdir(rel_dir):
        if BATCH_NAME.fullmatch(name) or COMPACT_NAME.fullmatch(name):
            for batch, path in _read_file_source_log(r, f"{rel_dir}/{name}"):
                if batch <= last and path in wanted and path not in out[batch]:
                    out[batch].append(path)
    return {b: tuple(paths) for b, paths in out.items()}


def file_source_log_latest(root: str, source_id: str) -> int | None:
    """The highest batch id of the file source log ``sources/<source_id>/`` (a file or a
    compaction), ``None`` where it has none or is not there."""
    if not safe_component(source_id):
        return None
    r = CheckpointReader(root)
    rel_dir = f"sources/{source_id}"
    if not r.is_dir(rel_dir):
        return None
    ids = [
        int(m.group(1)) if (m := COMPACT_NAME.fullmatch(name)) else int(name)
        for name in r.listdir(rel_dir)
        if BATCH_NAME.fullmatch(name) or COMPACT_NAME.fullmatch(name)
    ]
    return max(ids, default=None)
