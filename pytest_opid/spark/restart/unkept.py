"""What a checkpoint does not keep of the query that wrote it, at its sink and sources: judged
from the checkpoint alone, the new query's facts there are either shown by a file Spark wrote
(a file source's log names the files it read, whose names give their format) or not verified.

Spark keeps in a checkpoint the offsets, the commits, a file source's log and the state; not a
source's schema or options (``FileStreamSource`` and the rate source read them from the new
query), not the code of a foreachBatch or foreach writer (``ForeachBatchSink`` calls the new
one), and not the filters and projections between the sources and the sink (the plan is made
again from the new query). A restart with another one of these runs without a word from Spark
and loses, repeats or changes rows; only the query that wrote the checkpoint (its fingerprint,
or the record ``opid record-deploy`` leaves in the checkpoint) shows whether it changed."""

from __future__ import annotations

import json
from collections.abc import Mapping

from pytest_opid.spark.checkpoint.model import Checkpoint
from pytest_opid.spark.checkpoint.sink_log import format_of
from pytest_opid.spark.restart.endpoints import RESULTS_CHANGED, Endpoints, endpoints_of
from pytest_opid.spark.restart.findings import Findings, plan_of
from pytest_opid.spark.restart.source_files import unread_formats
from pytest_opid.text import printable

#: Source options that only limit how much a batch reads (the guide allows changing them).
RATE_LIMITS = frozenset(
    {"maxfilespertrigger", "maxbytespertrigger", "maxoffsetspertrigger", "minoffsetspertrigger",
     "maxtriggerdelay", "maxrowspertrigger", "maxrecordspertrigger"}
)  # fmt: skip

#: The rate source's options that decide its rows' values (``RateStreamProvider``).
_RATE_VALUES = ("rowsPerSecond", "rampUpTime", "numPartitions")

#: File sink formats whose readers match columns by position, not by name.
_POSITIONAL = frozenset({"csv", "text"})

#: How to have them checked: the record at deploy, or the previous fingerprint.
_HOW = (
    "To have them compared: record the running query in its checkpoint at each deploy (opid "
    "record-deploy CHECKPOINT --spark MODULE:FUNCTION -- ARGS), which check-restore then uses "
    "by itself; or pass the fingerprint or snapshot of the query that wrote the checkpoint "
    "(opid check-restore CHECKPOINT NEW --previous-fingerprint OLD.json; "
    "check_restore(..., previous_fingerprint=...))."
)


def check_unkept(found: Findings, new: Endpoints, checkpoint: Checkpoint) -> None:
    """What the checkpoint does not keep: with the query that wrote it (its fingerprint or
    the record), the operators between the sources and the sink compared (its sink and
    sources are by :mod:`.sinks`); from the checkpoint alone, a file source's format against
    the files its log names, and one unverified item listing the new query's facts the
    checkpoint does not keep."""
    check_plan(found)
    old = endpoints_of(found.old.endpoints)
    if old is not None and found.old.plan is not None:
        for position, source in sorted(new.sources.items()):
            if "PythonDataSource" in source.get("class", ""):
                _python_source(found, checkpoint, position, old.sources.get(position), source)
        return
    sink_known = old is not None and old.sink is not None
    facts: list[str] = []
    if not sink_known:
        facts += _sink_facts(new)
    for position, source in sorted(new.sources.items()):
        facts += _source_facts(found, new, checkpoint, position, source)
    if not facts:
        return
    found.unverify(
        "endpoints",
        "Not kept in the checkpoint, so not compared with the query that wrote it: "
        + "; ".join(facts)
        + f". {found.spark} restarts without comparing them either, and a change there loses, "
        "repeats or changes rows without a word (a foreachBatch function writing elsewhere, "
        "a source column renamed, rate's rowsPerSecond raised, a filter added: the rows "
        "already in the sink stay as the old query made them). " + _HOW,
        name="endpoints",
    )


def _python_source(
    found: Findings,
    checkpoint: Checkpoint,
    position: int,
    before: Mapping[str, str] | None,
    facts: Mapping[str, str],
) -> None:
    """A Python data source against the query that wrote the checkpoint: the same code (the
    digest of its class and reader), options and offset keys, nothing to say; otherwise not
    verified, saying what changed and what its new reader answered on the checkpoint's offset
    (a reader that fails on it, or answers an end before it, is a finding of its own)."""
    if any(p.name == str(position) for p in (*found.problems, *found.reinterpreted)):
        return  # already judged from what its reader answered
    before = before or {}
    if (
        before.get("code") is not None
        and before.get("code") == facts.get("code")
        and all(before.get(k) == v for k, v in facts.items() if k.startswith("option "))
        and before.get("offset keys") == facts.get("offset keys")
    ):
        return
    label = f"source {position} ({printable(facts.get('format', '?'))}, a Python data source)"
    if before.get("code") is None or facts.get("code") is None:
        changed = (
            f"the code of {label} was not compared: "
            + ("the query that wrote the checkpoint" if before.get("code") is None else "it")
            + " has no recorded digest of it"
        )
    elif before.get("code") != facts.get("code"):
        changed = (
            f"the code of {label} changed (digest {printable(before['code'])} -> "
            f"{printable(facts['code'])})"
        )
    else:
        changed = f"the options or offset keys of {label} changed"
    saved = checkpoint.sources[position] if position < len(checkpoint.sources) else None
    offset = printable((saved.offset if saved else None) or "-")
    answer = (found.old.readers or {}).get(position)
    if answer is None:
        asked = "its new reader was not asked (no live query: a saved fingerprint)"
    elif "error" in answer:
        asked = f"its new reader was not asked: {printable(str(answer['error']))}"
    else:
        asked = (
            f"its new reader, asked from the checkpoint's offset {offset}, answers "
            f"latestOffset {printable(json.dumps(answer.get('latest')))} (initialOffset "
            f"{printable(json.dumps(answer.get('initial')))}): neither fails nor goes back"
        )
    found.unverify(
        "endpoints",
        f"Not verified: {changed}; {asked}. Whether it counts the checkpoint's offset {offset} "
        "in the same unit and under the same keys as the reader that wrote it (rows, files, "
        f"positions) is its code's, and was not shown: {found.spark} hands the reader that "
        "offset as it is, and a reader that reads it as another position reads rows again "
        "or skips them. Check that the new reader reads the offsets the old one wrote the "
        "same way, then accept it (in pytest: allow_unverified=True).",
        name="endpoints",
    )


def _sink_facts(new: Endpoints) -> list[str]:
    assert new.sink is not None
    kind = new.sink_kind
    out = []
    if kind in ("foreachBatch", "foreach"):
        out.append(f"the {kind} function's code ({printable(new.sink.get('function', '?'))})")
    out.append(
        "the filters and projections between the sources and the sink (what each row "
        "becomes, and which rows reach the sink)"
    )
    return out


def _source_facts(
    found: Findings,
    new: Endpoints,
    checkpoint: Checkpoint,
    position: int,
    source: Mapping[str, str],
) -> list[str]:
    fmt = source.get("format", "?")
    label = f"source {position} ({printable(fmt)})"
    options = sorted(
        fact.removeprefix("option ")
        for fact in source
        if fact.startswith("option ") and fact[7:].lower() not in RATE_LIMITS
    )
    if fmt == "rate":
        return [f"{label}'s {', '.join(_RATE_VALUES)} (set or default), which decide its rows"]
    if fmt in ("rate-micro-batch", "kafka"):
        # their offsets are rows and topic-partitions: offsets_against reads them
        return [f"{label}'s subscribePattern"] if new.option(position, "subscribePattern") else []
    if "class" in source:
        shown = f" and options ({', '.join(options)})" if options else ""
        return [f"{label}'s code{shown}"]
    out = []
    if not _format_shown(found, checkpoint, position, source):
        out.append(f"{label}'s format")
    if "schema" in source:
        out.append(f"{label}'s schema {printable(source['schema'])}")
    if options:
        out.append(f"{label}'s options {', '.join(options)}")
    return out


def _format_shown(
    found: Findings, checkpoint: Checkpoint, position: int, source: Mapping[str, str]
) -> bool:
    """A file source's format against the names of the files its last batch read (the
    checkpoint's ``sources/<n>/`` log): the same, shown; another, results changed; names that
    do not tell, not shown."""
    if position >= len(checkpoint.sources):
        return False
    files = checkpoint.sources[position].files
    if not files:
        return False
    formats = {format_of(f.rsplit("/", 1)[-1]) for f in files}
    fmt = source.get("format")
    if len(formats) != 1 or None in formats or fmt is None:
        return False
    (read,) = formats
    if read == fmt:
        return True
    saved = checkpoint.sources[position]
    path = source.get("path")
    offset = _offset(saved.offset)
    coming = None if path is None else unread_formats(checkpoint, saved.source_id, offset, path)
    if coming and coming == {fmt}:
        # the files of the old format are in the log: FileStreamSource never reads them again
        found.warn(
            "sources",
            f"Source {position} now reads {printable(path or '?')} as {fmt}, and the files the "
            f"checkpoint's last batch read from it are {read} files: they are not read again, "
            f"and the files there it has not read are {fmt} files by their names. Files of "
            f"the old format that arrive later are read as {fmt} (wrong or null rows).",
            name=str(position),
        )
        return True
    found.reinterpret(
        RESULTS_CHANGED,
        f"Results changed: source {position} now reads {printable(source.get('path', '?'))} "
        f"as {fmt}, and the files the checkpoint's last batch read from it are {read} files "
        f"({printable(files[0])}). Spark does not check a file source's format: files already "
        f"in its log are not read again, and the files that come are parsed as {fmt} "
        f"({read} files read as {fmt} give wrong or null rows).\n"
        "Fix:\n"
        f"  - keep reading {read} on this checkpoint, and read the new format from a new "
        "folder in a new query, on its own checkpoint location",
        name=str(position),
    )
    return True


def _offset(text: str | None) -> object:
    try:
        return json.loads(text or "")
    except ValueError:
        return None


def check_plan(found: Findings) -> None:
    """The operators between the sources and the sink against the previous query's, where
    its fingerprint is known: from a checkpoint with it (:func:`check_unkept`) and from the
    fingerprint alone alike (a snapshot, a saved fingerprint), one judgement."""
    if found.old.plan is not None:
        _plan_changes(found, found.old.plan)


def _plan_changes(found: Findings, was: tuple[str, ...]) -> None:
    """The operators between the sources and the sink, by name, against the query that wrote
    the checkpoint. The guide allows changing filters and projections (Spark restarts), but
    the sink keeps the rows the old ones made: a reader of it sees both."""
    now = plan_of(found.new)
    if was == now:
        return
    gone, added = list(was), []
    for name in now:
        if name in gone:
            gone.remove(name)
        else:
            added.append(name)
    change = (
        ", ".join(
            [*(f"{printable(n)} added" for n in added), *(f"{printable(n)} removed" for n in gone)]
        )
        or "the same operators in another order"
    )
    new = endpoints_of(found.new.endpoints)
    sink = None if new is None else new.sink
    fmt = None if sink is None else sink.get("format")
    by_position = sink is not None and new is not None and new.sink_kind == "file"
    by_position = by_position and fmt in _POSITIONAL
    if any(n.startswith("Filter") for n in (*added, *gone)) or by_position:
        found.reinterpret(
            RESULTS_CHANGED,
            f"Results changed: the operators between the sources and the sink changed "
            f"({change})"
            + (f"; the {fmt} sink's columns are read by position" if by_position else "")
            + f". The Structured Streaming guide allows changing filters and projections, and "
            f"{found.spark} restarts; the rows already in the sink stay as the old query made "
            "them (rows it filtered out, columns in its order), so the sink holds rows of both "
            "versions, not what the new query makes of all its input.\n"
            "Fix:\n"
            "  - if the sink's readers accept rows of both versions, accept the change: pytest "
            "--snapshot-update (opid check-restore: --allow-reinterpreted-state)\n"
            "  - or write the new version to a new sink, on its own checkpoint location, and "
            "backfill it",
            name="sink",
        )
        return
    found.unverify(
        "endpoints",
        f"The projections between the sources and the sink changed ({change}): columns "
        "added, dropped, reordered or computed by other expressions. A reader that matches "
        "columns by name (parquet, json, a table) reads added or reordered columns as before "
        "(null in the old rows), but a column computed by another expression under its old "
        "name holds old and new values side by side; the fingerprint records the operators, "
        "not their expressions, so which one it is was not verified. Compare the two "
        "versions' output (opid demonstrate --spark OLD_MODULE:FUNCTION --spark "
        "NEW_MODULE:FUNCTION), then accept it (in pytest: allow_unverified=True).",
        name="sink",
    )
