"""What a query started on a new checkpoint reads in its first batches, against what the old
query read in the batches of the same ids: where they are the same files, a file sink that skips
those batch ids (its ``_spark_metadata`` log holds them) already holds their rows, and a
foreachBatch writer idempotent by batch id rewrites the same rows.

``FileStreamSource`` lists the files of its path, sorts them by modification time (newest first
with ``latestFirst``) and takes ``maxFilesPerTrigger`` of them per batch (all of them without
it); the old query's batches are in the checkpoint's file source log (``sources/<n>/``, one log
batch per query batch that read files)."""

from __future__ import annotations

import json
import os

from pytest_opid.spark.checkpoint.logs import file_source_batches
from pytest_opid.spark.checkpoint.model import Checkpoint
from pytest_opid.spark.checkpoint.sink_log import local_path
from pytest_opid.spark.restart.endpoints import Endpoints

#: Options that decide a batch's files in a way not predicted here.
_UNPREDICTED = ("maxbytespertrigger", "maxfileage", "cleansource", "recursivefilelookup",
                "pathglobfilter", "modifiedbefore", "modifiedafter")  # fmt: skip


def _batches(
    new: Endpoints, checkpoint: Checkpoint
) -> tuple[list[frozenset[str]], dict[int, frozenset[str]]] | None:
    """The new query's batches on a new checkpoint, as files (predicted from the source's
    folder), and the old query's batches 0..its last (from the checkpoint's source log);
    ``None`` where they cannot be told: not one local file source, an option that changes the
    choice, files of equal modification times, a log that is not one log batch per query
    batch."""
    last = checkpoint.last_batch
    if last is None or len(new.sources) != 1 or len(checkpoint.sources) != 1:
        return None
    facts = new.sources[0]
    saved = checkpoint.sources[0]
    path = facts.get("path")
    folder = None if path is None else local_path(path)
    if folder is None or "class" in facts or not os.path.isdir(folder):
        return None
    if any(new.option(0, key) is not None for key in _UNPREDICTED):
        return None
    try:
        offset = json.loads(saved.offset or "")
    except ValueError:
        return None
    if not isinstance(offset, dict) or offset.get("logOffset") != last:
        return None  # a batch without new files: log batches and query batches differ
    logged = file_source_batches(checkpoint.path, saved.source_id, last)
    if logged is None or any(not files for files in logged.values()):
        return None
    listed = []
    for name in os.listdir(folder):
        full = os.path.join(folder, name)
        if name.startswith(("_", ".")) or not os.path.isfile(full):
            continue
        listed.append((os.path.getmtime(full), full))
    times = [t for t, _ in listed]
    if len(set(times)) != len(times):
        return None  # the order of files of one modification time is the listing's
    listed.sort(reverse=(new.option(0, "latestFirst") or "").lower() == "true")
    ordered = [f for _, f in listed]
    per = new.option(0, "maxFilesPerTrigger")
    size = int(per) if per is not None and per.isdigit() and int(per) > 0 else len(ordered)
    size = max(size, 1)
    chunks = [frozenset(ordered[i : i + size]) for i in range(0, len(ordered), size)]
    old = {
        b: frozenset(q for q in (local_path(f) for f in files) if q is not None)
        for b, files in logged.items()
    }
    return chunks, old


def replays_same_batches(new: Endpoints, checkpoint: Checkpoint, last: int) -> bool | None:
    """Whether the new query's batches 0..``last`` on a new checkpoint read exactly the files
    the old query's batches 0..``last`` read: a sink that skips those batch ids (a file sink,
    a writer that skips batch ids it wrote) then holds each row once. ``None``: not told."""
    both = _batches(new, checkpoint)
    if both is None:
        return None
    chunks, old = both
    return all(b < len(chunks) and chunks[b] == old.get(b) for b in range(last + 1))


def overwrites_to_each_row_once(new: Endpoints, checkpoint: Checkpoint) -> bool | None:
    """Whether a writer that replaces what a batch id wrote (a folder per batch id, written
    with mode overwrite) ends up with each input file once: the new query's batches replace
    the old ones of the same ids, and the old batches past the new query's last stay.
    ``None``: not told."""
    both = _batches(new, checkpoint)
    if both is None:
        return None
    chunks, old = both
    final = [*chunks, *(files for b, files in sorted(old.items()) if b >= len(chunks))]
    seen = [f for files in final for f in files]
    return len(seen) == len(set(seen)) and set(seen) >= set().union(*chunks, *old.values())
