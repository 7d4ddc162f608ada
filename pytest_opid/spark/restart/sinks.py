"""Sinks, source options, output mode, trigger and the checkpoint location: the half of a
restart no state check sees, judged as Spark acts on what is on disk.

The rules are the rows of the Structured Streaming guide's "Recovery Semantics after Changes in
a Streaming Query", each with what Spark does (measured on Spark 4.3 restarts,
tests/data/sources-sinks):

* *number or type of input sources* (not allowed): :mod:`.sources`, plus the rate ->
  rate-micro-batch pair in :mod:`.source_options` (``org.json4s.MappingException``);
* *parameters of input sources*: rate limits (maxFilesPerTrigger, maxOffsetsPerTrigger) are
  allowed; subscribed topics or files are not (:mod:`.source_options`: a file source moved or
  globbed elsewhere, Kafka's subscribe/subscribePattern/assign read against the checkpoint's
  topic-partition offsets, rate's rowsPerSecond/rampUpTime);
* *type of output sink*: file -> Kafka/foreach allowed (the new sink sees only new data), Kafka
  or foreach -> file not (:func:`_sink_changes`, and on disk :func:`_file_sink_on_disk`);
* *parameters of output sink*: a file sink's output directory not allowed; Kafka's topic and a
  foreach writer's code allowed, their meaning the code's (:mod:`.writers`: a foreachBatch
  function now overwriting or writing elsewhere, else not verified);
* *projection / filter / map-like operations* and *stateful operations*: the state checks
  (:mod:`.state`, :mod:`.schemas`, :mod:`.meaning`);
* *output mode* of a stateful query (:func:`_output_mode`): update -> append re-emits windows
  already emitted; append -> update emits partial results.

And what the guide takes for granted: the checkpoint's ``metadata`` file
(``STREAMING_CHECKPOINT_MISSING_METADATA_FILE``), the file sink's ``<path>/_spark_metadata``
log against the checkpoint's commits (``FileStreamSink.addBatch`` skips a batch id the log
holds), and a new checkpoint location, judged as any other change (:mod:`.new_location`:
the sources read from their beginning, the sink is handed it all again).

Outcomes are in Spark's words: refused (a problem, with Spark's error), rows lost, rows
duplicated, results changed (reinterpretations: Spark runs, the sink holds something else),
fine (nothing, or a warning that says what to watch).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from pytest_opid.spark.checkpoint.logs import file_source_log_latest
from pytest_opid.spark.checkpoint.model import Checkpoint
from pytest_opid.spark.checkpoint.sink_log import read_sink_log
from pytest_opid.spark.data_sources import BUILT_IN
from pytest_opid.spark.restart.endpoints import (
    RESULTS_CHANGED,
    ROWS_DUPLICATED,
    ROWS_LOST,
    Endpoints,
    endpoints_of,
    same_location,
)
from pytest_opid.spark.restart.findings import Findings
from pytest_opid.spark.restart.new_location import check_new_location, new_location
from pytest_opid.spark.restart.source_options import offsets_against, source_changes
from pytest_opid.spark.restart.unkept import check_plan, check_unkept
from pytest_opid.spark.restart.writers import writer_changes
from pytest_opid.spark.vocabulary import AGGREGATIONS
from pytest_opid.spark.words import new_location_fix
from pytest_opid.text import printable

_FIX_SINK = (
    "\nFix:\n"
    "  - keep the sink as it was on this checkpoint (its kind, format, path and "
    "partitionBy), and restore its folder with its _spark_metadata as the old query left it\n"
    + new_location_fix()
)


def check_endpoints(found: Findings, checkpoint: Checkpoint | None) -> tuple[str, ...]:
    """The restart on the same checkpoint: the checkpoint's own files, the file sink's log,
    and what changed at the sink and the sources against the previous fingerprint. Returns
    what was checked (for :attr:`RestoreCheck.verified`); a sink not recorded (a DataFrame)
    is not among it."""
    if checkpoint is not None and checkpoint.query_id is None:
        found.problem(
            "checkpoint",
            f"{found.spark} refuses to start the query with "
            f"STREAMING_CHECKPOINT_MISSING_METADATA_FILE: the checkpoint location "
            f"{printable(checkpoint.path)} is in an inconsistent state: the metadata file "
            "(the query id) is missing but offset and/or commit logs contain data.\n"
            "Fix:\n"
            '  - restore the checkpoint\'s metadata file from a backup ({"id": "<the old '
            'query id>"})\n' + new_location_fix("  - or run the query"),
            name="metadata",
        )
    new = endpoints_of(found.new.endpoints)
    old = endpoints_of(found.old.endpoints)
    if (new is None or new.sink is None) and old is not None and old.sink is not None:
        found.warn(
            "sink",
            "The new fingerprint records no sink (a DataFrame: record its DataStreamWriter, "
            "df.writeStream... before start()), so the sink, output mode, trigger and "
            "checkpoint location were not checked: a file sink's _spark_metadata log, a "
            "changed output path or partitionBy, a new checkpoint location lose or repeat "
            "rows without a word from Spark.",
        )
    if new is None or new.sink is None:
        return ()
    check_trigger(found)
    on_disk = False
    if checkpoint is not None and new is not None and new.sink_kind == "file":
        on_disk = _file_sink_on_disk(found, new, checkpoint)
    if old is not None:
        _sink_changes(found, old, new, on_disk)
        _output_mode(found, old, new)
        source_changes(found, old, new, checkpoint)
    elif checkpoint is not None and any(
        s.kind in AGGREGATIONS for s in found.new.state_operators or ()
    ):
        found.unverify(
            "outputMode",
            f"The checkpoint keeps no output mode: whether the new query's "
            f"{new.sink.get('outputMode', '?')} mode is the one that wrote it was not "
            "checked (update -> append on an aggregation emits its rows again; append -> "
            "update emits partial rows). Pass the previous query's fingerprint "
            "(--previous-fingerprint) to have it compared.",
            name="output mode",
        )
    if checkpoint is not None:
        offsets_against(found, new, checkpoint)
        _checkpoint_state(found, new, checkpoint)
        check_unkept(found, new, checkpoint)
    else:  # from the previous fingerprint alone: its plan, as with a checkpoint
        check_plan(found)
    unkept = any(u.kind == "endpoints" for u in found.unverified)
    # what the checkpoint does not keep is in the unverified item, not among the verified
    checked = (
        ["sink and sources against the checkpoint's files"]
        if unkept
        else ["sink", "source options"]
    )
    if on_disk:
        checked.append("the file sink's _spark_metadata log")
    return tuple(checked)


def _file_sink_on_disk(found: Findings, new: Endpoints, checkpoint: Checkpoint) -> bool:
    """The file sink's ``_spark_metadata`` against the checkpoint's commits, as
    ``FileStreamSink.addBatch`` acts on it. Returns whether the folder could be read."""
    assert new.sink is not None
    path = new.sink.get("path")
    committed = checkpoint.last_committed_batch
    if path is None or committed is None:
        return False
    log = read_sink_log(path)
    if log is None:
        found.warn(
            "sink",
            f"The file sink's folder {printable(path)} is not on this machine's file system: "
            "its _spark_metadata log was not checked against the checkpoint's commits.",
            name="sink",
        )
        return False
    following = committed + 1
    shown = printable(path)
    if log.unread:
        found.unverify(
            "sink",
            f"The file sink's log was not read: {printable(log.unread)}. Its batch ids were "
            "checked against the checkpoint's commits, not the data files it lists (gone "
            "ones, their format and partition folders).",
            name="sink",
        )
    if log.latest is None:
        held = (
            f"holds {log.unlogged} data files but no _spark_metadata log (another writer's, "
            "or a log deleted)"
            if log.unlogged
            else ("is empty" if log.exists else "does not exist")
        )
        found.reinterpret(
            RESULTS_CHANGED,
            f"Results changed: the file sink folder {shown} {held}, while the checkpoint has "
            f"committed batches up to {committed}. {found.spark} restarts at batch "
            f"{following} and logs only it in {shown}/_spark_metadata: spark.read of the "
            f"folder then fails (java.io.FileNotFoundException: .../_spark_metadata/0 "
            f"doesn't exist (latestId: {following}, ...)), and the rows of batches 0 to "
            f"{committed} are not in the folder's log." + _FIX_SINK,
            name="sink",
        )
        return True
    last = checkpoint.last_batch
    if log.latest > committed and last is not None and log.latest <= last:
        found.warn(
            "sink",
            f"The checkpoint's commit log ends at batch {committed} and its offset log at "
            f"{last}: {found.spark} runs batches {following} to {log.latest} again with the "
            f'offsets they had, and the file sink skips them (FileStreamSink: "Skipping '
            f'already committed batch"): its log {shown}/_spark_metadata holds them, with '
            "the rows those offsets read.",
            name="sink",
        )
    elif log.latest > committed:
        found.reinterpret(
            ROWS_LOST,
            f"Rows lost: the file sink's log {shown}/_spark_metadata already holds batch "
            f"{log.latest}, the checkpoint's last commit is batch {committed}: "
            f"{found.spark} skips the restarted query's batches {following} to "
            f'{log.latest} (FileStreamSink: "Skipping already committed batch") and their '
            "rows never reach the folder." + _FIX_SINK,
            name="sink",
        )
    elif log.latest < committed:
        found.reinterpret(
            RESULTS_CHANGED,
            f"Results changed: the file sink's log {shown}/_spark_metadata ends at batch "
            f"{log.latest}, the checkpoint has committed batches up to {committed}: the "
            f"rows of batches {log.latest + 1} to {committed} are not in the folder's log, "
            "and readers of the folder do not see them." + _FIX_SINK,
            name="sink",
        )
    if log.missing:
        found.reinterpret(
            RESULTS_CHANGED,
            f"Results changed: {log.missing} data files the log {shown}/_spark_metadata lists "
            f"are gone from the folder: {found.spark} appends the next batches to the log, and "
            "spark.read of the folder fails (java.io.FileNotFoundException) or, with "
            "ignoreMissingFiles, silently misses those rows." + _FIX_SINK,
            name="sink",
        )
    fmt = new.sink.get("format")
    if log.formats and fmt and fmt not in log.formats:
        found.reinterpret(
            RESULTS_CHANGED,
            f"Results changed: the file sink's folder {shown} holds "
            f"{'/'.join(sorted(log.formats))} files in its log and the new query writes "
            f"{fmt} into it: {found.spark} appends them to the same log, and a reader of the "
            "folder (one format) misreads or drops the other format's rows." + _FIX_SINK,
            name="sink",
        )
    columns = tuple(c.strip() for c in (new.sink.get("partitionBy") or "").split(",") if c)
    if log.files and columns != log.partitions:
        was = ", ".join(log.partitions) or "none"
        found.reinterpret(
            ROWS_LOST,
            f"Rows lost: the file sink's folder {shown} is partitioned by ({was}) in its log "
            f"and the new query writes partitionBy({', '.join(columns) or 'none'}) into it: "
            "a reader of the folder infers one partitioning, and the rows written under the "
            "other are dropped or misread." + _FIX_SINK,
            name="sink",
        )
    return not log.unread


def check_trigger(found: Findings) -> None:
    """A continuous trigger on a sink that only runs micro-batches: ``StreamingQueryManager``
    hands a ``ContinuousTrigger`` to ``ContinuousExecution`` only for a V2 sink
    (``SupportsWrite``); a file sink (``FileStreamSink``) or foreachBatch (``ForeachBatchSink``)
    gets ``MicroBatchExecution``, whose trigger executor knows processing-time, once and
    available-now triggers only."""
    new = endpoints_of(found.new.endpoints)
    if new is None or new.sink is None:
        return
    trigger = new.sink.get("trigger", "")
    if not trigger.startswith("ContinuousTrigger") or new.sink_kind not in ("file", "foreachBatch"):
        return
    sink = "a file sink" if new.sink_kind == "file" else "foreachBatch"
    found.problem(
        "trigger",
        f"{found.spark} stops the query with [STREAM_FAILED] ... java.lang."
        f"IllegalStateException: Unknown type of trigger: {printable(trigger)}: {sink} runs "
        "in micro-batches only (MicroBatchExecution), which knows processing-time, once and "
        "available-now triggers; continuous processing needs a sink that supports it (Kafka, "
        "memory, console, foreach).\n"
        "Fix:\n"
        "  - keep a micro-batch trigger (trigger(processingTime=...) or availableNow=True) "
        "with this sink",
        name="sink",
    )


def _checkpoint_state(found: Findings, new: Endpoints, checkpoint: Checkpoint) -> None:
    """What the checkpoint's own logs make Spark do with the new sink: a memory sink that
    cannot recover (``MemorySink``: only in complete mode), a batch planned but not committed
    (run again: its rows handed to the sink a second time)."""
    assert new.sink is not None
    kind = new.sink_kind
    last, committed = checkpoint.last_batch, checkpoint.last_committed_batch
    if kind == "memory" and new.sink.get("outputMode") != "complete" and last is not None:
        found.problem(
            "sink",
            f'{found.spark} refuses to start the query with AnalysisException: "This query '
            "does not support recovering from checkpoint location. Delete "
            f'{checkpoint.path}/offsets to start over." A memory sink recovers from a '
            "checkpoint only in complete mode.\n"
            "Fix:\n"
            '  - use outputMode("complete") (an aggregation), or another sink on this '
            "checkpoint\n" + new_location_fix("  - or run the query"),
            name="sink",
        )
    if (
        last is not None
        and (committed is None or last > committed)
        and kind in ("foreachBatch", "foreach", "console", "kafka")
    ):
        found.reinterpret(
            ROWS_DUPLICATED,
            f"Rows duplicated: the checkpoint's offset log has batch {last} and its commit log "
            f"{'nothing' if committed is None else f'only up to batch {committed}'}: "
            f"{found.spark} runs batch {last} again with the same offsets, and the {kind} sink "
            "is handed its rows a second time (the old query may have written them before it "
            "stopped).\n"
            "Fix:\n"
            f"  - make the {kind} writer idempotent by batch id (skip or overwrite batch "
            f"{last}'s rows), or delete what batch {last} wrote before the restart",
            name="sink",
        )
    elif kind in ("foreachBatch", "foreach", "console", "kafka"):
        _file_log_ahead(found, kind, checkpoint)


def _file_log_ahead(found: Findings, kind: str, checkpoint: Checkpoint) -> None:
    """A file source log past the offsets the offset log keeps: a batch ran whose offsets (and
    commit) are gone. ``FileStreamSource`` knows its files as seen from the log, and the
    restarted query's next batch reads them again (from the log batch after the kept offset),
    so the sink is handed what that batch already delivered."""
    for saved in checkpoint.sources:
        try:
            offset = json.loads(saved.offset or "")
        except ValueError:
            continue
        if not isinstance(offset, dict) or not isinstance(offset.get("logOffset"), int):
            continue
        kept = offset["logOffset"]
        latest = file_source_log_latest(checkpoint.path, saved.source_id)
        if latest is None or latest <= kept:
            continue
        found.reinterpret(
            ROWS_DUPLICATED,
            f"Rows duplicated: the file source log sources/{saved.source_id} holds log "
            f"batches up to {latest}, and the checkpoint's last offsets end at log batch "
            f"{kept}: a batch ran after the last one the offset log keeps (its offsets and "
            f"commit are gone). {found.spark}'s next batch reads log batches {kept + 1} to "
            f"{latest} again, and the {kind} sink is handed rows the lost batch already "
            "delivered.\n"
            "Fix:\n"
            "  - restore the checkpoint's offsets and commits from a backup, or delete what "
            f"the lost batch wrote before the restart, or make the {kind} writer skip rows "
            "it has written (by a key of the rows)",
            name="sink",
        )


def _sink_changes(found: Findings, old: Endpoints, new: Endpoints, on_disk: bool) -> None:
    """What changed at the sink against the previous fingerprint, by the guide's rows on the
    type and the parameters of output sinks. ``on_disk``: the file sink's folder was checked
    (its own findings say what a changed path or format does)."""
    if old.sink is None or new.sink is None:
        return
    was, now = old.sink_kind, new.sink_kind
    if was != now:
        if now == "file" and not on_disk:
            found.reinterpret(
                RESULTS_CHANGED,
                f"Results changed: the sink was {was} and is now a file sink (the Structured "
                "Streaming guide does not allow changing another sink to a file sink): its "
                "folder's _spark_metadata log starts at the restarted batch, and spark.read "
                "of the folder fails (.../_spark_metadata/0 doesn't exist) or misses the "
                "earlier batches." + _FIX_SINK,
                name="sink",
            )
        elif now != "file":
            found.reinterpret(
                ROWS_LOST,
                f"Rows lost (to readers of the new sink): the sink was {was} and is now {now}. "
                "The Structured Streaming guide allows it (file -> Kafka, Kafka <-> foreach), "
                f"and {found.spark} hands the new sink only the batches after the restart: the "
                "rows of the batches before stay in the old sink, and the new one never gets "
                "them.\n"
                "Fix:\n"
                "  - copy what the old sink holds into the new one (its readers then see every "
                "row), then accept the change: pytest --snapshot-update (opid check-restore: "
                "--allow-reinterpreted-state)\n"
                "  - or keep the sink as it was on this checkpoint",
                name="sink",
            )
        return
    if was == "file" and not on_disk:
        for fact, outcome in (
            ("path", RESULTS_CHANGED),
            ("format", RESULTS_CHANGED),
            ("partitionBy", ROWS_LOST),
        ):
            before, after = old.sink.get(fact), new.sink.get(fact)
            same = same_location(before, after) if fact == "path" else before == after
            if not same:
                words = "Rows lost" if outcome == ROWS_LOST else "Results changed"
                found.reinterpret(
                    outcome,
                    f"{words}: the file sink's {fact} changed from {printable(before or '-')} "
                    f"to {printable(after or '-')} on the same checkpoint (the Structured "
                    "Streaming guide does not allow changing a file sink's output): the "
                    "folder's _spark_metadata log does not match the checkpoint's batches, "
                    "and a reader of the folder fails or misses rows." + _FIX_SINK,
                    name="sink",
                )
    if was not in BUILT_IN and (old.sink.get("path") or new.sink.get("path")):
        _sink_not_built_in(found, was or "?", old.sink, new.sink)
    writer_changes(found, old, new)
    if was == "memory" and old.sink.get("queryName") != new.sink.get("queryName"):
        found.warn(
            "sink",
            f"The memory sink's table is now {printable(new.sink.get('queryName') or '-')} "
            f"(was {printable(old.sink.get('queryName') or '-')}): queries of the old name "
            "find nothing.",
            name="sink",
        )
    before, after = old.sink.get("trigger", ""), new.sink.get("trigger", "")
    if before.startswith("ContinuousTrigger") != after.startswith("ContinuousTrigger"):
        found.warn(
            "sink",
            f"The trigger changed from {before} to {after}: continuous processing and "
            "micro-batches keep their offsets differently; the guide allows changing the "
            "trigger only between micro-batch triggers.",
            name="sink",
        )


def _sink_not_built_in(
    found: Findings, kind: str, old: Mapping[str, str], new: Mapping[str, str]
) -> None:
    """A sink Spark does not build in (``delta``, a connector, a Python data source), known by
    its name and path: a path changed on the same checkpoint gets only the batches after the
    restart (Spark hands a sink each batch once, by batch id); what its partitioning or
    options mean is the sink's own, so a change there is not judged safe."""
    before, after = old.get("path"), new.get("path")
    if not same_location(before, after):
        found.reinterpret(
            ROWS_LOST,
            f"Rows lost (to readers of the new path): the {printable(kind)} sink's path changed "
            f"from {printable(before or '-')} to {printable(after or '-')} on the same "
            f"checkpoint. {found.spark} hands the sink only the batches after the restart: the "
            "rows of the batches before stay at the old path, and the new one never gets "
            "them.\n"
            "Fix:\n"
            "  - keep the sink's path as it was on this checkpoint\n"
            "  - or copy what the old path holds into the new one first, then accept the "
            "change: pytest --snapshot-update (opid check-restore: "
            "--allow-reinterpreted-state)\n" + new_location_fix("  - or run the query"),
            name="sink",
        )
    changed = [
        fact
        for fact in sorted(set(old) | set(new))
        if (fact == "partitionBy" or fact.startswith("option ")) and old.get(fact) != new.get(fact)
    ]
    if changed:
        shown = ", ".join(
            f"{fact} {printable(old.get(fact) or '-')} -> {printable(new.get(fact) or '-')}"
            for fact in changed
        )
        found.unverify(
            "sink",
            f"The {printable(kind)} sink is not one Spark builds in, and its {shown} changed: "
            f"what the sink does with that on the data it already holds is its own, and was "
            "not judged. Check it with the sink's documentation (a Delta table, for one, "
            "refuses another partitioning), or demonstrate the restart on a copy.",
            name="sink",
        )


def _output_mode(found: Findings, old: Endpoints, new: Endpoints) -> None:
    """A stateful aggregation's output mode decides which rows it emits, and when: Spark does
    not check it at restart."""
    if old.sink is None or new.sink is None:
        return
    was, now = old.sink.get("outputMode"), new.sink.get("outputMode")
    if was is None or now is None or was == now:
        return
    if not any(s.kind in AGGREGATIONS for s in found.new.state_operators or ()):
        return  # a stateless query emits the same rows in append and update
    if (was, now) == ("update", "append"):
        found.reinterpret(
            ROWS_DUPLICATED,
            "Rows duplicated: the output mode changed from update to append on a stateful "
            "aggregation. In update mode every window or group already went to the sink "
            "with each change; in append mode Spark emits it once more, final, when the "
            "watermark passes it: the sink holds those rows twice.\n"
            "Fix:\n"
            '  - keep outputMode("update") on this checkpoint, or make the sink upsert by '
            "the grouping key (foreachBatch with a MERGE)",
            name="output mode",
        )
    elif was == "append":
        found.reinterpret(
            RESULTS_CHANGED,
            f"Results changed: the output mode changed from append to {now} on a stateful "
            "aggregation: the sink received only final rows so far and now receives partial "
            "ones (every update of an open window or group), which an appending sink keeps "
            "as rows of their own.\n"
            "Fix:\n"
            '  - keep outputMode("append") on this checkpoint, or make the sink upsert by '
            "the grouping key (foreachBatch with a MERGE)",
            name="output mode",
        )
    else:
        found.warn(
            "outputMode",
            f"The output mode changed from {was} to {now}: the sink is handed different "
            "rows per batch from now on (complete: the whole result; update: the changed "
            "rows); rows already emitted are not emitted again.",
            name="output mode",
        )


__all__ = [
    "RESULTS_CHANGED",
    "ROWS_DUPLICATED",
    "ROWS_LOST",
    "check_endpoints",
    "check_new_location",
    "check_trigger",
    "new_location",
]
