"""The guide's *parameters of input sources*, against the previous fingerprint (rate limits may
change; files, topics, a rate's rows may not) and against the checkpoint's offsets as the new
source will read them: a rate offset handed to rate-micro-batch, Kafka's topic-partition map
(``KafkaSourceOffset``, read from the offsets format: no broker here), a glob that moved the
input, a Python data source whose offset keys changed."""

from __future__ import annotations

import fnmatch
import json
import os
from collections.abc import Mapping

from pytest_opid.spark.checkpoint.model import Checkpoint
from pytest_opid.spark.checkpoint.sink_log import local_path
from pytest_opid.spark.restart.endpoints import (
    RESULTS_CHANGED,
    ROWS_DUPLICATED,
    ROWS_LOST,
    Endpoints,
    same_location,
)
from pytest_opid.spark.restart.findings import Findings
from pytest_opid.spark.restart.source_files import logged_files, under, unread_formats
from pytest_opid.spark.restart.unkept import RATE_LIMITS
from pytest_opid.spark.words import new_location_fix
from pytest_opid.text import printable

#: Kafka's options that choose what is read.
_KAFKA_SUBSCRIPTION = ("subscribe", "subscribepattern", "assign")


def source_changes(
    found: Findings, old: Endpoints, new: Endpoints, checkpoint: Checkpoint | None = None
) -> None:
    """The guide's *parameters of input sources*: rate limits may change; what is read (files,
    topics, a rate's rows) may not. With the ``checkpoint``, a file source's format changed
    on its folder is judged by the files the restarted query reads next."""
    for position, facts in sorted(new.sources.items()):
        before = old.sources.get(position)
        if before is None:
            continue
        fmt = facts.get("format")
        if before.get("format") != fmt:
            file_sources = "class" not in facts and "class" not in before
            same = "path" in facts and same_location(before.get("path"), facts.get("path"))
            # a snapshot's path (…/in) too
            if file_sources and same and not next_files_fit(found, checkpoint, position, facts):
                found.reinterpret(
                    RESULTS_CHANGED,
                    f"Results changed: source {position} reads {printable(facts['path'])} as "
                    f"{fmt} instead of {before.get('format')}: Spark does not check it; files "
                    "already in its log are not read again, and the new format parses the "
                    "files that come (old-format files read as the new format give wrong or "
                    "null rows).\n"
                    "Fix:\n"
                    "  - read the new format from a new folder in a new query, on its own "
                    "checkpoint location",
                    name=str(position),
                )
            continue  # another source: the source checks say what Spark does
        _schema_change(found, position, before.get("schema"), facts.get("schema"))
        for fact in sorted(set(facts) | set(before)):
            a, b = before.get(fact), facts.get(fact)
            key = fact.removeprefix("option ").lower()
            if a == b or key in RATE_LIMITS or fact in ("path", "schema", "class"):
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
            elif key == "maxfileage" and b is not None:
                found.reinterpret(
                    ROWS_LOST,
                    f"Rows lost: source {position} ({fmt}) now sets maxFileAge {b} (was "
                    f"{a or 'the default, 7 days'}): from the restart on, a file older than "
                    "that before the newest file Spark has seen is skipped without a word (a "
                    "late file, a backfill).\n"
                    "Fix:\n"
                    "  - keep maxFileAge as it was, or move late files in with a fresh "
                    "modification time",
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


def next_files_fit(
    found: Findings, checkpoint: Checkpoint | None, position: int, facts: Mapping[str, str]
) -> bool:
    """A file source's format changed on its folder, where every file the restarted query
    reads next (under its path, not in its log) is of the new format by its name: the files
    of the old format are in the log, and ``FileStreamSource`` never reads them again. Warns
    and returns True then; False where that is not shown."""
    fmt, path = facts.get("format"), facts.get("path")
    if checkpoint is None or fmt is None or path is None or position >= len(checkpoint.sources):
        return False
    saved = checkpoint.sources[position]
    formats = unread_formats(checkpoint, saved.source_id, _json(saved.offset), path)
    if not formats or formats != {fmt}:
        return False
    found.warn(
        "sources",
        f"Source {position} now reads {printable(path)} as {fmt}: the files its log names "
        f"(the old format's) are not read again, and the files there it has not read are "
        f"{fmt} files by their names. Files of the old format that arrive later are read as "
        f"{fmt} (wrong or null rows).",
        name=str(position),
    )
    return True


def _fields(schema: str | None) -> list[tuple[str, str]] | None:
    """The top-level ``(name, type)`` fields of a ``struct<a:int,b:string>`` simpleString."""
    if not schema or not schema.startswith("struct<") or not schema.endswith(">"):
        return None
    body, fields, depth, start = schema[7:-1], [], 0, 0
    for i, c in enumerate(body + ","):
        if c in "<(":
            depth += 1
        elif c in ">)":
            depth -= 1
        elif c == "," and depth == 0:
            name, _, kind = body[start:i].partition(":")
            fields.append((name, kind))
            start = i + 1
    return fields


def _schema_change(found: Findings, position: int, was: str | None, now: str | None) -> None:
    """A file source's schema: fields added at the end read as null from old files (fine); a
    field renamed, retyped or removed reads the files still to come with another meaning."""
    before, after = _fields(was), _fields(now)
    if before is None or after is None or before == after[: len(before)]:
        return
    gone = [f"{n} {k}" for n, k in before if (n, k) not in after]
    found.reinterpret(
        RESULTS_CHANGED,
        f"Results changed: source {position}'s schema changed from {printable(was or '-')} to "
        f"{printable(now or '-')} (no longer: {', '.join(gone) or 'the same order'}): Spark "
        "does not check a file source's schema at restart; files written with the old fields "
        "are read with the new ones (a renamed column reads as null, a retyped one as null or "
        "another value).\n"
        "Fix:\n"
        "  - keep the source's fields and add new ones at the end, or rename the column after "
        "reading it (withColumnRenamed)",
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


def offsets_against(found: Findings, new: Endpoints, checkpoint: Checkpoint) -> None:
    """Each source's checkpoint offsets against the new source that will read them: a rate
    offset (seconds, a bare number) handed to rate-micro-batch, Kafka's topic-partition map
    against the new subscription, a file source's log against a new glob."""
    for position, facts in sorted(new.sources.items()):
        if position >= len(checkpoint.sources):
            continue
        saved = checkpoint.sources[position]
        fmt = facts.get("format")
        if saved.log_missing is not None:
            found.problem(
                "sources",
                f"{found.spark} stops the restarted query with java.lang.IllegalStateException: "
                f"\"batch {saved.log_missing} doesn't exist\": the checkpoint's file source log "
                f"sources/{saved.source_id} is missing, and Spark lists the files of the last "
                "committed batch again from it when the query restarts.\n"
                "Fix:\n"
                f"  - restore the checkpoint's sources/{saved.source_id} folder from a backup\n"
                + new_location_fix("  - or run the query"),
                name=str(position),
            )
            continue
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
                + new_location_fix(),
                name=str(position),
            )
        elif fmt == "kafka" and isinstance(value, dict):
            _kafka_offsets(found, new, position, value)
        elif "class" in facts and _python_reader(found, position, fmt, saved.offset, value):
            pass
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
                    "the old layout too and convert it\n" + new_location_fix(),
                    name=str(position),
                )
        elif (
            saved.files
            and "path" in facts
            and (new.option(position, "cleanSource") or "off").lower() == "off"
            and _gone(saved.files)
        ):
            gone = _gone(saved.files)
            found.reinterpret(
                ROWS_DUPLICATED,
                f"Rows duplicated: {len(gone)} of the files the checkpoint's last batch read "
                f"from source {position} are no longer where it read them "
                f"({printable(gone[0])}). Spark knows files by their full path: moved or "
                "renamed under the source path, they are read again as new files.\n"
                "Fix:\n"
                "  - leave read files where they are (or archive them with "
                'cleanSource="archive" / "delete", which Spark does after a batch)',
                name=str(position),
            )
        elif saved.files == () and "path" in facts and not _is_glob(facts["path"]):
            moved_after_no_file(found, checkpoint, saved.source_id, position, facts["path"], value)
        elif saved.files and "path" in facts and _is_glob(facts["path"]):
            pattern = facts["path"]
            outside = [f for f in saved.files if not _glob_matches(pattern, f)]
            if outside and (new.option(position, "fileNameOnly") or "").lower() == "true":
                # FileStreamSource's SeenFilesMap keeps (and checks) a file's name only
                found.warn(
                    "sources",
                    f"Source {position} now reads the glob {printable(pattern)}, which does "
                    f"not match the files the checkpoint's last batch read "
                    f"({printable(outside[0])}). With fileNameOnly=true {found.spark} knows "
                    "files by their name: a file under the glob with the name of one it read "
                    "is skipped (copied history is not read again), one with a new name is "
                    "read; the files left unread in the old folder are never read.",
                    name=str(position),
                )
            elif outside:
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
                    + new_location_fix(),
                    name=str(position),
                )


def moved_after_no_file(
    found: Findings,
    checkpoint: Checkpoint,
    source_id: str,
    position: int,
    path: str,
    offset: object,
) -> None:
    """A file source moved to another folder where the checkpoint's last committed batch read
    no file (a batch that only advanced the watermark, or found nothing new): Spark lists that
    batch's files again under the new path (``FileStreamSource.getBatch``), finds none, and
    restarts without "Wrong basePath"; then it reads every file under the new path that its
    log does not name by its full path, and never the files left in the old one. Judged
    against every file the log names (``sources/<n>``), whatever batch the restart follows."""
    read = logged_files(checkpoint, source_id, offset)
    outside = [f for f in read or () if not under(f, path)]
    if not outside:
        return
    found.reinterpret(
        RESULTS_CHANGED,
        f"Rows lost or duplicated: source {position} now reads {printable(path)}, and the files "
        f"its log names were read from elsewhere ({printable(outside[0])}, "
        f"{len(outside)} of {len(read or ())}). The checkpoint's last committed batch read "
        f'no file, so {found.spark} restarts without a word (no "Wrong basePath": it lists that '
        f"batch's files again under the new path and finds none); then it reads every file "
        f"under {printable(path)} that its log does not name by its full path (history copied "
        "there is read again: rows duplicated, an aggregation counts them twice) and never "
        "the files left unread in the old folder (rows lost).\n"
        "Fix:\n"
        "  - keep reading the old path (move the new input under it)\n" + new_location_fix(),
        name=str(position),
    )


def _python_reader(
    found: Findings, position: int, fmt: str | None, text: str | None, offset: object
) -> bool:
    """A Python data source's new reader asked about the checkpoint's offset
    (:mod:`pytest_opid.spark.query.python_offsets`), as the first batch after the restart asks
    it (``latestOffset(start, limit)``): it fails on it (Spark stops the query the same way),
    or answers an end before the start at a number the two offsets share (it counts them in
    another unit: the rows between are never read). Returns whether it found either."""
    answer = (found.old.readers or {}).get(position)
    if answer is None or not isinstance(offset, dict):
        return False
    label = f"source {position} ({printable(fmt or '?')}, a Python data source)"
    shown = printable(text or "-")
    if "failed" in answer:
        step = str(answer.get("failed_in", "latestOffset"))
        found.problem(
            "sources",
            f"{found.spark} stops the restarted query with "
            "[PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR] Failed when Python streaming data "
            f"source perform {printable(step)}: {label}'s new reader fails on the checkpoint's "
            f"offset {shown} ({printable(str(answer['failed']))}), which the first batch after "
            "the restart hands it (latestOffset(start, limit), then partitions(start, end)) as "
            "the old reader wrote it.\n"
            "Fix:\n"
            "  - read the old offset's layout too (its keys) and convert it\n" + new_location_fix(),
            name=str(position),
        )
        return True
    latest = answer.get("latest")
    behind = _behind(offset, latest)
    if behind is None:
        return False
    found.reinterpret(
        ROWS_LOST,
        f"Rows lost: {label}'s new reader, asked where the input ends from the checkpoint's "
        f"offset {shown} (latestOffset, as the first batch after the restart asks it), "
        f"answers {printable(json.dumps(latest))}: {behind} is behind where the checkpoint "
        "says the query was. It reads the offsets in another unit than the reader that wrote "
        f"them, and {found.spark} hands it the batches from the checkpoint's offset on: the "
        "rows in between are never read.\n"
        "Fix:\n"
        "  - keep the offsets' unit as the checkpoint has it, or convert the old offset when "
        "the reader reads it\n" + new_location_fix(),
        name=str(position),
    )
    return True


def _behind(start: dict, latest: object) -> str | None:
    """The first number of ``latest`` below the same key's number in ``start`` (keys of
    nested objects joined by dots), as text; ``None`` where there is none."""
    if not isinstance(latest, dict):
        return None
    pending: list[tuple[str, object, object]] = [("", start, latest)]
    while pending:
        where, a, b = pending.pop(0)
        if isinstance(a, dict) and isinstance(b, dict):
            pending += [(f"{where}.{k}" if where else str(k), a[k], b[k]) for k in a if k in b]
        elif _number(a) and _number(b) and b < a:  # type: ignore[operator]
            return f"{where} {b} < {a}"
    return None


def _number(value: object) -> bool:
    return type(value) in (int, float)


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


def _gone(files: tuple[str, ...]) -> list[str]:
    """The files of a source log that are not on this machine's file system at their path
    (remote paths are not looked at)."""
    out = []
    for f in files:
        local = local_path(f)
        if local is not None and not os.path.exists(local):
            out.append(f)
    return out


def _is_glob(path: str) -> bool:
    return any(c in path for c in "*?[{")


def _glob_matches(pattern: str, path: str) -> bool:
    """A file of the source log (``file:/in/x.json``) against a glob (``/in/*.json``)."""
    plain = local_path(path) or path
    glob = local_path(pattern) or pattern
    return fnmatch.fnmatchcase(plain, glob)
