"""A new checkpoint location, judged as a change like any other: Spark starts the query there as
a new one (empty state, no offsets), so its sources read from their beginning and its sink is
handed everything again; a file sink kept on its path skips the new query's first batches
(``FileStreamSink``: its ``_spark_metadata`` log already holds their ids)."""

from __future__ import annotations

import os

from pytest_opid.spark.checkpoint.model import Checkpoint
from pytest_opid.spark.checkpoint.sink_log import local_path, read_sink_log
from pytest_opid.spark.restart.endpoints import (
    ROWS_DUPLICATED,
    ROWS_LOST,
    Endpoints,
    endpoints_of,
    same_location,
)
from pytest_opid.spark.restart.findings import Findings
from pytest_opid.spark.restart.replay import overwrites_to_each_row_once, replays_same_batches
from pytest_opid.spark.restart.unkept import check_unkept
from pytest_opid.spark.words import NEW_LOCATION_EFFECTS
from pytest_opid.text import printable

#: Sinks that write every row they are handed, with no log of batches done.
_REPLAYING = frozenset({"foreachBatch", "foreach", "console", "kafka"})

# -- which half runs ---------------------------------------------------------------------------


def new_location(found: Findings, checkpoint: Checkpoint | None) -> str | None:
    """The new query's checkpoint location where it is not the one judged (so Spark starts it
    as a new query there); ``None`` where it is the same or not set. The checkpoint judged is
    known by its path, the location a slim copy was copied from, and the location the
    fingerprint of the query that wrote it names; each compared as the store resolves it."""
    new = endpoints_of(found.new.endpoints)
    moved = None if new is None or new.sink is None else new.sink.get("checkpointLocation")
    if moved is None:
        return None
    old = endpoints_of(found.old.endpoints)
    was = None if old is None or old.sink is None else old.sink.get("checkpointLocation")
    if checkpoint is not None:
        judged = (checkpoint.path, checkpoint.copied_from, was)
        return None if any(same_location(moved, w) for w in judged if w) else moved
    return None if was is None or same_location(moved, was) else moved


def check_new_location(found: Findings, checkpoint: Checkpoint | None, location: str) -> None:
    """The new query starts on ``location``, not on the old checkpoint: no state or source
    check applies, but the sources read again what the old query read, and the sink is handed
    it again."""
    new = endpoints_of(found.new.endpoints)
    assert new is not None and new.sink is not None
    where = local_path(location)
    if where is not None and os.path.isdir(os.path.join(where, "offsets")):
        # not judged here: never "safe" on a state no check has read
        found.unverify(
            "checkpoint location",
            f"The new checkpoint location {printable(location)} already holds a checkpoint: "
            f"{found.spark} restarts the query on it, not on {found.old.origin}; check the "
            "restart against that one (opid check-restore <that location> PROGRAM).",
        )
        return
    ran = checkpoint.last_committed_batch is not None if checkpoint is not None else True
    if not ran:
        return
    origin = found.old.origin
    again, lost = _read_again(found, new, checkpoint)
    for text in lost:
        found.reinterpret(
            ROWS_LOST,
            f"Rows lost: the new query runs on a new checkpoint location "
            f"({printable(location)}), so {text}" + _fix_new_location(),
        )
    kind = new.sink_kind
    if kind == "file":
        path = new.sink.get("path")
        log = read_sink_log(path) if path is not None and checkpoint is not None else None
        already = (
            log.latest
            if log is not None
            else (0 if _old_file_sink_at(found, path) and checkpoint is None else None)
        )
        replayed = (
            already is not None
            and log is not None
            and checkpoint is not None
            and replays_same_batches(new, checkpoint, already)
        )
        if replayed:
            found.warn(
                "sink",
                f"The new query runs on a new checkpoint location ({printable(location)}) and "
                f"writes into the file sink folder {printable(path or '?')}, whose "
                f"_spark_metadata log holds batches 0 to {already}: {found.spark}'s file sink "
                'skips them (FileStreamSink: "Skipping already committed batch"), and the new '
                f"query's batches 0 to {already} read the same files the old query's did (its "
                "source log, the files' modification times and maxFilesPerTrigger): their rows "
                "are in the folder already. A change to the input's files or to "
                "maxFilesPerTrigger before the restart would drop rows.",
                name="sink",
            )
            # the old query's rows stay in the folder: what it made of them counts too
            assert checkpoint is not None
            check_unkept(found, new, checkpoint)
        elif already is not None:
            found.reinterpret(
                ROWS_LOST,
                f"Rows lost: the new query runs on a new checkpoint location "
                f"({printable(location)}) and writes into the file sink folder "
                f"{printable(path or '?')}, whose _spark_metadata log already holds batch "
                f"{already}"
                + (" (the old query's)" if log is None else f" ({len(log.batches)} batch ids)")
                + f". {found.spark}'s file sink skips every batch whose id the log holds "
                '(FileStreamSink: "Skipping already committed batch"): the new query\'s '
                f"batches 0 to {already} are dropped without a word, and what they read "
                f"({', '.join(again) or 'its sources from their beginning'}) never reaches "
                "the folder." + _fix_new_location(),
                name="sink",
            )
        elif log is not None and log.unlogged:
            found.warn(
                "sink",
                f"The file sink folder {printable(path or '?')} holds {log.unlogged} data "
                "files no _spark_metadata log lists: once the new query writes its log, "
                "spark.read of the folder reads only the files the log lists.",
                name="sink",
            )
    elif (
        kind in ("foreachBatch", "foreach")
        and again
        and checkpoint is not None
        and checkpoint.last_committed_batch is not None
        and (
            replays_same_batches(new, checkpoint, checkpoint.last_committed_batch)
            or overwrites_to_each_row_once(new, checkpoint)
        )
    ):
        last = checkpoint.last_committed_batch
        same = replays_same_batches(new, checkpoint, last)
        keeps = (
            "one idempotent by batch id (it skips or overwrites a batch id it wrote)"
            if same
            else "one that overwrites what a batch id wrote (the new query's batches "
            "replace the old ones of the same ids, and together they read each file once)"
        )
        found.unverify(
            "sink",
            f"The new query runs on a new checkpoint location ({printable(location)}): the "
            f"{kind} writer is handed again, under batch ids 0, 1, ..., the files the old "
            f"query's batches 0 to {last} read"
            + (" (the same files under the same ids)" if same else "")
            + f". A writer that appends writes them twice (rows duplicated); {keeps} keeps "
            "each row once. Which one it is is the writer's code, which no checkpoint keeps: "
            "check what it does with a batch id it has written." + _fix_new_location(),
            name="sink",
        )
    elif kind in _REPLAYING and again:
        found.reinterpret(
            ROWS_DUPLICATED,
            f"Rows duplicated: the new query runs on a new checkpoint location "
            f"({printable(location)}), so its sources start from their beginning "
            f"({', '.join(again)}) and the {kind} sink is handed again every row "
            f"{origin} already delivered, under the new query's batch ids 0, 1, ... (a "
            "writer idempotent by batch id writes other rows under those ids)."
            + _fix_new_location(),
            name="sink",
        )
    elif kind == "memory" and again:
        found.warn(
            "sink",
            "The new query runs on a new checkpoint location: its sources start from their "
            f"beginning ({', '.join(again)}); the memory sink's table is new in a new "
            "process, so it holds them once.",
            name="sink",
        )
    if not again and not lost and kind not in (None, "noop"):
        found.warn(
            "sources",
            "The new query runs on a new checkpoint location: its sources start from their "
            "beginning (or startingOffsets); what they read again reaches the sink again.",
        )


def _fix_new_location() -> str:
    return (
        "\nFix:\n"
        "  - restart on the old checkpoint location if the change allows it\n"
        "  - or, on the new checkpoint location, where "
        + NEW_LOCATION_EFFECTS
        + "; start Kafka at the old query's last offsets (startingOffsets)"
    )


def _old_file_sink_at(found: Findings, path: str | None) -> bool:
    old = endpoints_of(found.old.endpoints)
    return (
        old is not None
        and old.sink_kind == "file"
        and old.sink is not None
        and same_location(old.sink.get("path"), path)
    )


def _read_again(
    found: Findings, new: Endpoints, checkpoint: Checkpoint | None
) -> tuple[list[str], list[str]]:
    """What the sources of a query on a new checkpoint read again (as text), and where rows
    are never read (Kafka from latest)."""
    again: list[str] = []
    lost: list[str] = []
    for position, facts in sorted(new.sources.items()):
        fmt = facts.get("format", "?")
        label = f"source {position}"
        if fmt in ("rate", "rate-micro-batch"):
            again.append(f"{label} ({fmt}) from value 0")
        elif fmt == "kafka":
            start = (new.option(position, "startingOffsets") or "latest").strip()
            if start == "latest":
                lost.append(
                    f"{label} (Kafka) starts at startingOffsets latest: the records that "
                    "arrived after the old query's last batch and before the new query's first "
                    "are never read"
                )
            else:
                again.append(f"{label} (Kafka) from startingOffsets {printable(start)}")
        elif "path" in facts and "class" not in facts:
            files = ""
            if checkpoint is not None and position < len(checkpoint.sources):
                read = checkpoint.sources[position].files
                files = f", {len(read)} of them in the old query's last batch" if read else ""
            again.append(f"{label} every file in {printable(facts['path'])}{files}")
        else:
            again.append(f"{label} ({printable(fmt)}) from its initial offset")
    return again, lost
