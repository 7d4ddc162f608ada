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

from collections.abc import Mapping

from pytest_opid.spark.checkpoint.model import Checkpoint
from pytest_opid.spark.checkpoint.sink_log import format_of
from pytest_opid.spark.restart.endpoints import RESULTS_CHANGED, Endpoints, endpoints_of
from pytest_opid.spark.restart.findings import Findings, plan_of
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
        python = [
            f"source {position} ({printable(facts.get('format', '?'))})"
            for position, facts in sorted(new.sources.items())
            if "PythonDataSource" in facts.get("class", "")
        ]
        if python:
            found.unverify(
                "endpoints",
                f"Not compared: the code of {', '.join(python)}, a Python data source, which "
                "no fingerprint records (only its name, options and offset keys): what its "
                "offsets mean (rows, files, positions) decides where the restarted reader "
                f"continues, and {found.spark} hands it the checkpoint's offset as it is. "
                "Check that the reader reads the offsets the old one wrote the same way.",
                name="endpoints",
            )
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
