"""Sinks, source options, output mode, trigger and the checkpoint location: the half of a
restart no state check sees, judged as Spark acts on what is on disk.

The rules are the rows of the Structured Streaming guide's "Recovery Semantics after Changes in
a Streaming Query", each with what Spark does (measured on Spark 4.3 restarts,
tests/data/sources-sinks):

* *number or type of input sources* (not allowed): :mod:`.sources`, plus the rate ->
  rate-micro-batch pair here (``org.json4s.MappingException``);
* *parameters of input sources*: rate limits (maxFilesPerTrigger, maxOffsetsPerTrigger) are
  allowed; subscribed topics or files are not (:func:`_source_changes`: a file source moved or
  globbed elsewhere, Kafka's subscribe/subscribePattern/assign read against the checkpoint's
  topic-partition offsets, rate's rowsPerSecond/rampUpTime);
* *type of output sink*: file -> Kafka/foreach allowed (the new sink sees only new data), Kafka
  or foreach -> file not (:func:`_sink_changes`, and on disk :func:`_file_sink_on_disk`);
* *parameters of output sink*: a file sink's output directory not allowed; Kafka's topic and a
  foreach writer's code allowed, their meaning the code's;
* *projection / filter / map-like operations* and *stateful operations*: the state checks
  (:mod:`.state`, :mod:`.schemas`, :mod:`.meaning`);
* *output mode* of a stateful query (:func:`_output_mode`): update -> append re-emits windows
  already emitted; append -> update emits partial results.

And what the guide takes for granted: the checkpoint's ``metadata`` file
(``STREAMING_CHECKPOINT_MISSING_METADATA_FILE``), the file sink's ``<path>/_spark_metadata``
log against the checkpoint's commits (``FileStreamSink.addBatch`` skips a batch id the log
holds), and a new checkpoint location, judged as any other change (:func:`check_new_location`:
the sources read from their beginning, the sink is handed it all again).

Outcomes are in Spark's words: refused (a problem, with Spark's error), rows lost, rows
duplicated, results changed (reinterpretations: Spark runs, the sink holds something else),
fine (nothing, or a warning that says what to watch).
"""

from __future__ import annotations

import fnmatch
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pytest_opid.spark.checkpoint.model import Checkpoint
from pytest_opid.spark.checkpoint.sink_log import SinkLog, local_path, read_sink_log
from pytest_opid.spark.restart.findings import Findings
from pytest_opid.spark.source_entries import SHORTENED
from pytest_opid.spark.vocabulary import AGGREGATIONS
from pytest_opid.spark.words import NEW_LOCATION_EFFECTS
from pytest_opid.text import printable

#: Reinterpretation kinds: what the sink holds after the restart.
ROWS_LOST = "rows_lost"
ROWS_DUPLICATED = "rows_duplicated"
RESULTS_CHANGED = "results_changed"

#: Sinks that write every row they are handed, with no log of batches done.
_REPLAYING = frozenset({"foreachBatch", "foreach", "console", "kafka"})

#: Source options that only limit how much a batch reads (the guide allows changing them).
_RATE_LIMITS = frozenset(
    {"maxfilespertrigger", "maxbytespertrigger", "maxoffsetspertrigger", "minoffsetspertrigger",
     "maxtriggerdelay", "maxrowspertrigger", "maxrecordspertrigger"}
)  # fmt: skip

#: Kafka's options that choose what is read.
_KAFKA_SUBSCRIPTION = ("subscribe", "subscribepattern", "assign")

_FIX_SINK = (
    "\nFix:\n"
    "  - keep the sink as it was on this checkpoint (its kind, format, path and "
    "partitionBy), and restore its folder with its _spark_metadata as the old query left it\n"
    "  - or run the changed query on a new checkpoint location: its state starts empty, "
    + NEW_LOCATION_EFFECTS
)


@dataclass(frozen=True)
class Endpoints:
    """One side's sink and sources, from a fingerprint's
    :attr:`~pytest_opid.result.Fingerprint.endpoints` rows. ``sink`` is ``None`` where no sink
    was recorded (a DataFrame)."""

    sink: Mapping[str, str] | None
    sources: Mapping[int, Mapping[str, str]]

    @property
    def sink_kind(self) -> str | None:
        return None if self.sink is None else self.sink.get("kind")

    def option(self, position: int, key: str) -> str | None:
        """A source option by its key, as Spark reads options (case-insensitively)."""
        for fact, value in self.sources.get(position, {}).items():
            if fact.lower() == f"option {key.lower()}":
                return value
        return None


def endpoints_of(rows: Sequence[tuple[str, str, str]] | None) -> Endpoints | None:
    if rows is None:
        return None
    sink: dict[str, str] | None = None
    sources: dict[int, dict[str, str]] = {}
    for endpoint, fact, value in rows:
        if endpoint == "sink":
            sink = sink if sink is not None else {}
            sink[fact] = value
        elif endpoint.startswith("source ") and endpoint[7:].isdigit():
            sources.setdefault(int(endpoint[7:]), {})[fact] = value
    return Endpoints(sink, sources)


def same_location(a: str | None, b: str | None) -> bool:
    """Two paths of one folder (a ``file:`` URI or not, trailing slashes, ``..``); a
    snapshot's shortened path (``…/out``) matches any path ending in that folder."""
    if a is None or b is None:
        return a == b
    for short, other in ((a, b), (b, a)):
        if short.startswith(SHORTENED):
            return other.rstrip("/").rsplit("/", 1)[-1] == short[len(SHORTENED) :]
    la, lb = local_path(a), local_path(b)
    if la is not None and lb is not None:
        return os.path.realpath(la) == os.path.realpath(lb)
    return a.rstrip("/") == b.rstrip("/")


# -- which half runs ---------------------------------------------------------------------------


def new_location(found: Findings, checkpoint: Checkpoint | None) -> str | None:
    """The new query's checkpoint location where it is not the one judged (so Spark starts it
    as a new query there); ``None`` where it is the same or not set."""
    new = endpoints_of(found.new.endpoints)
    moved = None if new is None or new.sink is None else new.sink.get("checkpointLocation")
    if moved is None:
        return None
    if checkpoint is not None:
        return None if same_location(moved, checkpoint.path) else moved
    old = endpoints_of(found.old.endpoints)
    was = None if old is None or old.sink is None else old.sink.get("checkpointLocation")
    return None if was is None or same_location(moved, was) else moved


# -- a new checkpoint location -------------------------------------------------------------------


def check_new_location(found: Findings, checkpoint: Checkpoint | None, location: str) -> None:
    """The new query starts on ``location``, not on the old checkpoint: no state or source
    check applies, but the sources read again what the old query read, and the sink is handed
    it again."""
    new = endpoints_of(found.new.endpoints)
    assert new is not None and new.sink is not None
    where = local_path(location)
    if where is not None and os.path.isdir(os.path.join(where, "offsets")):
        found.warn(
            "checkpoint",
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
        if already is not None:
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
        + ": give a file sink a new, empty path; make a foreachBatch writer skip rows already "
        "written (by a key of the rows, not by batch id); start Kafka at the old query's last "
        "offsets (startingOffsets)"
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


# -- the same checkpoint ------------------------------------------------------------------------


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
            'query id>"})\n'
            "  - or run the query on a new checkpoint location: its state starts empty, "
            + NEW_LOCATION_EFFECTS,
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
    on_disk = False
    if checkpoint is not None and new is not None and new.sink_kind == "file":
        on_disk = _file_sink_on_disk(found, new, checkpoint)
    if old is not None:
        _sink_changes(found, old, new, on_disk)
        _output_mode(found, old, new)
        _source_changes(found, old, new)
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
            name="outputMode",
        )
    if checkpoint is not None:
        _offsets_against(found, new, checkpoint)
    checked = ["sink", "source options"]
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
    if log.latest > committed:
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
    return True


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
            found.warn(
                "sink",
                f"The sink was {was} and is now {now}: allowed (the guide's file -> Kafka, "
                f"Kafka <-> foreach); the new sink is handed only the batches after the "
                f"restart, and the old sink keeps what it had.",
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
    if was in ("foreachBatch", "foreach") and old.sink.get("function") != new.sink.get("function"):
        found.warn(
            "sink",
            f"The {was} function changed ({old.sink.get('function')} -> "
            f"{new.sink.get('function')}): allowed; the batches after the restart are written "
            "by the new code, the rows written before stay as the old code wrote them.",
            name="sink",
        )
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
            name="outputMode",
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
            name="outputMode",
        )
    else:
        found.warn(
            "outputMode",
            f"The output mode changed from {was} to {now}: the sink is handed different "
            "rows per batch from now on (complete: the whole result; update: the changed "
            "rows); rows already emitted are not emitted again.",
            name="outputMode",
        )


def _source_changes(found: Findings, old: Endpoints, new: Endpoints) -> None:
    """The guide's *parameters of input sources*: rate limits may change; what is read (files,
    topics, a rate's rows) may not."""
    for position, facts in sorted(new.sources.items()):
        before = old.sources.get(position)
        if before is None or before.get("format") != facts.get("format"):
            continue  # another source: the source checks say what Spark does
        fmt = facts.get("format")
        for fact in sorted(set(facts) | set(before)):
            a, b = before.get(fact), facts.get(fact)
            key = fact.removeprefix("option ").lower()
            if a == b or key in _RATE_LIMITS or fact in ("path", "schema", "class"):
                continue
            if fmt == "rate" and key in ("rowspersecond", "rampuptime"):
                found.reinterpret(
                    RESULTS_CHANGED,
                    f"Rows lost or duplicated: source {position} (rate) changed {key} from "
                    f"{a or '-'} to {b or '-'}. The rate source's offset is the seconds since "
                    "it started, and its rows' values are computed from them with the "
                    "current rowsPerSecond and rampUpTime: after the restart the values jump "
                    "ahead (rows lost) or back (rows duplicated).\n"
                    "Fix:\n"
                    f"  - keep {key} as it was on this checkpoint",
                    name=str(position),
                )
            elif fmt == "kafka" and key in _KAFKA_SUBSCRIPTION:
                found.reinterpret(
                    RESULTS_CHANGED,
                    f"Results changed: source {position} (Kafka) now reads {key} "
                    f"{printable(b or '-')} (was {printable(a or '-')}): the Structured "
                    "Streaming guide does not allow changing the subscribed topics; topics "
                    "new to the checkpoint start at startingOffsets, topics dropped keep "
                    "their offsets unread.\n"
                    "Fix:\n"
                    "  - read the new topic in a new query, on its own checkpoint location",
                    name=str(position),
                )
            elif key in ("maxfileage", "latestfirst", "filenameonly", "startingoffsets",
                         "failondataloss", "cleansource", "sourcearchivedir"):  # fmt: skip
                found.warn(
                    "sources",
                    f"Source {position} ({fmt}) changed {key} from {a or '-'} to {b or '-'}: "
                    + _SOURCE_OPTION_WORDS.get(key, "allowed; it applies from the restart on."),
                    name=str(position),
                )


_SOURCE_OPTION_WORDS = {
    "maxfileage": "files older than maxFileAge (before the newest file seen) are ignored from "
    "now on: late files may be skipped (rows lost).",
    "latestfirst": "the newest files are read first from now on; with maxFilesPerTrigger, "
    "older files wait (and maxFileAge may skip them).",
    "filenameonly": "files are now known by their name only (or by their full path): a file "
    "of a known name in another folder is skipped (or read again).",
    "startingoffsets": "Spark ignores startingOffsets on a restart: the checkpoint's offsets "
    "decide where it continues.",
    "failondataloss": "from now on a missing offset (deleted or expired records) "
    "stops the query, or is skipped without a word.",
}


def _offsets_against(found: Findings, new: Endpoints, checkpoint: Checkpoint) -> None:
    """Each source's checkpoint offsets against the new source that will read them: a rate
    offset (seconds, a bare number) handed to rate-micro-batch, Kafka's topic-partition map
    against the new subscription, a file source's log against a new glob."""
    for position, facts in sorted(new.sources.items()):
        if position >= len(checkpoint.sources):
            continue
        saved = checkpoint.sources[position]
        fmt = facts.get("format")
        value = _json(saved.offset)
        if fmt == "rate-micro-batch" and isinstance(value, int):
            found.problem(
                "sources",
                f"{found.spark} stops the restarted query with [STREAM_FAILED] ... "
                "org.json4s.MappingException: No usable value for offset / Did not find "
                f"value which can be converted into long. Source {position} is now "
                "rate-micro-batch, and the checkpoint holds a rate source's offset "
                f"({printable(saved.offset or '-')}, seconds), which rate-micro-batch reads "
                'as {"offset": <rows>, "timestamp": <ms>}.\n'
                "Fix:\n"
                '  - keep reading spark.readStream.format("rate") on this checkpoint\n'
                "  - or run the changed query on a new checkpoint location: its state starts "
                "empty, " + NEW_LOCATION_EFFECTS,
                name=str(position),
            )
        elif fmt == "kafka" and isinstance(value, dict):
            _kafka_offsets(found, new, position, value)
        elif "offset keys" in facts and isinstance(value, dict):
            keys = ", ".join(sorted(map(str, value)))
            if keys != facts["offset keys"]:
                found.reinterpret(
                    RESULTS_CHANGED,
                    f"Rows lost or duplicated: source {position} ({printable(fmt or '?')}, a "
                    f"Python data source) now starts from offsets with the keys "
                    f"({facts['offset keys']}), and the checkpoint holds its offset "
                    f"{printable(saved.offset or '-')} (keys {keys}): {found.spark} hands "
                    "the reader the checkpoint's offset as it is; a reader that does not "
                    "find its keys there fails, or reads from a default position again "
                    "(rows duplicated) or skips ahead (rows lost).\n"
                    "Fix:\n"
                    "  - keep the offset's layout (its keys) as the checkpoint has it, or read "
                    "the old layout too and convert it\n"
                    "  - or run the changed query on a new checkpoint location: its state "
                    "starts empty, " + NEW_LOCATION_EFFECTS,
                    name=str(position),
                )
        elif saved.files and "path" in facts and _is_glob(facts["path"]):
            pattern = facts["path"]
            outside = [f for f in saved.files if not _glob_matches(pattern, f)]
            if outside:
                found.reinterpret(
                    ROWS_DUPLICATED,
                    f"Rows duplicated: source {position} now reads the glob "
                    f"{printable(pattern)}, which does not match the files the checkpoint's "
                    f"last batch read ({printable(outside[0])}). A glob sets no basePath, so "
                    f"{found.spark} does not fail: it knows files by their full path, and "
                    "reads every file the glob matches that is not in its log, the moved "
                    "or copied input already read included.\n"
                    "Fix:\n"
                    "  - keep reading the old path (move the new input under it)\n"
                    "  - or run the changed query on a new checkpoint location: its state "
                    "starts empty, " + NEW_LOCATION_EFFECTS,
                    name=str(position),
                )


def _kafka_offsets(found: Findings, new: Endpoints, position: int, offsets: dict) -> None:
    """Kafka's offsets as Spark writes them (``KafkaSourceOffset``: ``{"topic": {"0": n}}``)
    against the new query's subscribe/assign (a pattern cannot be checked without a broker)."""
    topics = set(offsets)
    subscribe = new.option(position, "subscribe")
    assign = _json(new.option(position, "assign"))
    if subscribe is not None:
        wanted = {t.strip() for t in subscribe.split(",") if t.strip()}
    elif isinstance(assign, dict):
        wanted = set(assign)
    else:
        return
    added, dropped = sorted(wanted - topics), sorted(topics - wanted)
    if added or dropped:
        found.reinterpret(
            RESULTS_CHANGED,
            f"Results changed: source {position} (Kafka) reads topics "
            f"{', '.join(sorted(wanted))}; the checkpoint's offsets are for "
            f"{', '.join(sorted(topics))}."
            + (
                f" New to it: {', '.join(added)}, read from startingOffsets (by default "
                "latest: what is already in them is never read)."
                if added
                else ""
            )
            + (f" No longer read: {', '.join(dropped)}." if dropped else "")
            + "\nFix:\n  - keep the subscription as it was on this checkpoint, and read other "
            "topics in a new query on its own checkpoint location",
            name=str(position),
        )


def _json(text: str | None) -> object:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _is_glob(path: str) -> bool:
    return any(c in path for c in "*?[{")


def _glob_matches(pattern: str, path: str) -> bool:
    """A file of the source log (``file:/in/x.json``) against a glob (``/in/*.json``)."""
    plain = local_path(path) or path
    glob = local_path(pattern) or pattern
    return fnmatch.fnmatchcase(plain, glob)


__all__ = [
    "RESULTS_CHANGED",
    "ROWS_DUPLICATED",
    "ROWS_LOST",
    "Endpoints",
    "SinkLog",
    "check_endpoints",
    "check_new_location",
    "endpoints_of",
    "new_location",
    "same_location",
]
