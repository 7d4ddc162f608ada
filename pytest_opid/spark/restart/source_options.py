"""The guide's *parameters of input sources*, against the previous fingerprint (rate limits may
change; files, topics, a rate's rows may not) and against the checkpoint's offsets as the new
source will read them: a rate offset handed to rate-micro-batch, Kafka's topic-partition map
(``KafkaSourceOffset``, read from the offsets format: no broker here), a glob that moved the
input, a Python data source whose offset keys changed."""

from __future__ import annotations

import fnmatch
import json

from pytest_opid.spark.checkpoint.model import Checkpoint
from pytest_opid.spark.checkpoint.sink_log import local_path
from pytest_opid.spark.restart.endpoints import (
    RESULTS_CHANGED,
    ROWS_DUPLICATED,
    Endpoints,
)
from pytest_opid.spark.restart.findings import Findings
from pytest_opid.spark.words import NEW_LOCATION_EFFECTS
from pytest_opid.text import printable

#: Source options that only limit how much a batch reads (the guide allows changing them).
_RATE_LIMITS = frozenset(
    {"maxfilespertrigger", "maxbytespertrigger", "maxoffsetspertrigger", "minoffsetspertrigger",
     "maxtriggerdelay", "maxrowspertrigger", "maxrecordspertrigger"}
)  # fmt: skip

#: Kafka's options that choose what is read.
_KAFKA_SUBSCRIPTION = ("subscribe", "subscribepattern", "assign")


def source_changes(found: Findings, old: Endpoints, new: Endpoints) -> None:
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
                "  - or run the query on a new checkpoint location: its state starts empty, "
                + NEW_LOCATION_EFFECTS,
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
