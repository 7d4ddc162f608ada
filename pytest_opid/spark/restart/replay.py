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


def replays_same_batches(new: Endpoints, checkpoint: Checkpoint, last: int) -> bool | None:
    """Whether the new query's batches 0..``last`` on a new checkpoint read exactly the files
    the old query's batches 0..``last`` read (in the checkpoint's source log). ``None`` where it
    cannot be told: not one local file source, an option that changes the choice, files of
    equal modification times, a log that is not one log batch per query batch."""
    if len(new.sources) != 1 or len(checkpoint.sources) != 1:
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
    if not isinstance(offset, dict) or offset.get("logOffset") != checkpoint.last_batch:
        return None  # a batch without new files: log batches and query batches differ
    old = file_source_batches(checkpoint.path, saved.source_id, last)
    if old is None or any(not files for files in old.values()):
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
    for batch in range(last + 1):
        chunk = set(ordered[batch * size : (batch + 1) * size])
        was = {local_path(f) for f in old.get(batch, ())}
        if not chunk or chunk != was:
            return False
    return True
