"""The sources, as Spark checks them when the restarted query starts (``MicroBatchExecution``):
by position or, under source evolution, by name; a file source's last batch listed again under
the new path (``FileStreamSource.getBatch``)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence

from pytest_opid.io.location_identity import qualified_location
from pytest_opid.snapshot_locations import is_kept_form, matches_kept
from pytest_opid.spark.restart.findings import Findings, OldSource
from pytest_opid.spark.source_entries import Source, parse_source
from pytest_opid.spark.vocabulary import (
    SOURCE_EVOLUTION,
)
from pytest_opid.spark.words import (
    FIX_NEW_CHECKPOINT,
    NEW_LOCATION_EFFECTS,
    capitalized,
)
from pytest_opid.text import plural, printable, quote


def same_path(previous: str | None, new: str | None) -> bool:
    """A file source's path unchanged as Spark compares it: the qualified paths
    (:func:`~pytest_opid.io.location_identity.qualified_location`), not the objects they
    reach. ``FileStreamSource`` keeps the files it read as URI strings and the basePath check
    (``PartitioningAwareFileIndex``: "Wrong basePath") compares qualified strings, so
    ``s3a://b/in`` read as ``s3://b/in`` is another path to Spark. A snapshot's kept form
    (``…/in``) matches the locations it stands for."""
    if previous is None or new is None:
        return previous == new
    for kept, other in ((previous, new), (new, previous)):
        matched = matches_kept(kept, other)
        if matched is not None:
            return matched
    return qualified_location(previous) == qualified_location(new)


def _base_moved(previous: str | None, new: str | None) -> bool:
    """The new path (not a glob, which sets no basePath) leaves the old one's files outside
    it: not the old folder nor one above it. A snapshot's shortened old path (``…/in``)
    names only its last folder: a new path ending in another one leaves it outside. Two
    temporary folders are two runs of a test, not a move."""
    if not previous or not new or any(c in new for c in "*?[{"):
        return False
    base = qualified_location(new).rstrip("/")
    if is_kept_form(previous) or is_kept_form(new):
        return True  # the folders' names differ (same_path), their parents are not known
    old = qualified_location(previous).rstrip("/")
    if _temporary(old) and _temporary(base):
        return False  # two runs' own temporary folders (tests): not a move of the input
    return old != base and not old.startswith(base + "/")


def _temporary(path: str) -> bool:
    """A path in this machine's temporary folder (``tempfile``'s, pytest's ``tmp_path``)."""
    return path.startswith(qualified_location(tempfile.gettempdir()).rstrip("/") + "/")


def check_sources(found: Findings) -> None:
    old_sources = found.old.sources
    if old_sources is None or found.new.sources is None:
        missing = "the previous fingerprint" if old_sources is None else "the new fingerprint"
        found.warn(
            "sources",
            f"{missing} records no sources: Spark also checks the number of sources (and, "
            "for file sources, their paths); they were not compared.",
        )
        return
    new = [parse_source(s) for s in found.new.sources]
    new_named = [s for s in new if s.name]
    if found.old.named:
        unnamed = [(i, s) for i, s in enumerate(new) if not s.name]
        if unnamed:
            listed = ", ".join(f"source {i} {s.describe()}" for i, s in unnamed)
            found.problem(
                "sources",
                f"{found.spark} stops the restarted query with java.lang.AssertionError: "
                '"assertion failed: All sources should be named at this point - validation '
                f'should have happened in analysis". {capitalized(found.old.origin)} was written '
                f"with source evolution ({SOURCE_EVOLUTION}=true, which the checkpoint "
                "pins and Spark restores over the session's setting), so every source needs "
                f"its name; without one now: {listed}.\n"
                "Fix:\n"
                '  - name every source again as before: spark.readStream.name("...")...\n'
                + FIX_NEW_CHECKPOINT,
            )
            return
        named_sources(found, old_sources, new)
        return
    if new_named:
        names = ", ".join(quote(s.name or "") for s in new_named)
        found.problem(
            "sources",
            f"{found.spark} stops the restarted query with "
            "STREAMING_QUERY_EVOLUTION_ERROR.CANNOT_ENABLE_ON_EXISTING_CHECKPOINT: the "
            f"sources are now named ({names}: source evolution), but "
            f"{found.old.origin}'s checkpoint was written without it (offset log format "
            "version 1), which cannot track sources by name.\n"
            "Fix:\n"
            "  - remove the .name() calls and keep the sources in their old order\n"
            "  - or start the named query on a new checkpoint location: its state starts "
            "empty, " + NEW_LOCATION_EFFECTS,
        )
        return
    if len(old_sources) != len(new):
        before = "; ".join(describe_old(found, s) for s in old_sources) or "none"
        now = "; ".join(f"{i}: {s.describe()}" for i, s in enumerate(new)) or "none"
        found.problem(
            "sources",
            f"{found.spark} stops the restarted query with java.lang.AssertionError: "
            f'"assertion failed: There are [{len(old_sources)}] sources in the checkpoint '
            f"offsets and now there are [{len(new)}] sources requested by the query. "
            'Cannot continue." Spark matches sources by position (sources/<n> in the '
            f"checkpoint). Before: {before}. Now: {now}.\n"
            "Fix:\n"
            "  - keep the same sources in the same order (a stream cannot be added to or "
            "removed from a running query's union or join)\n"
            + FIX_NEW_CHECKPOINT
            + "\n  - to add or remove sources later, name them on the new checkpoint: "
            f'spark.readStream.name("...") with {SOURCE_EVOLUTION}=true',
        )
        return
    for old_source, new_source in zip(old_sources, new, strict=True):
        same_source(found, old_source, new_source)


def named_sources(found: Findings, old_sources: Sequence[OldSource], new: Sequence[Source]) -> None:
    by_name = {s.name: s for s in new}
    for old_source in old_sources:
        match = by_name.pop(old_source.label, None)
        if match is None:
            found.warn(
                "sources",
                f"Source {quote(old_source.label)} is no longer read: Spark keeps its last "
                "offset in the checkpoint and ignores it (it resumes there if a source of "
                "that name comes back).",
                name=old_source.label,
            )
        else:
            same_source(found, old_source, match)
    for source in by_name.values():
        found.warn(
            "sources",
            f"Source {source.describe()} is new to the checkpoint: Spark starts it from its "
            "first offset as on a new query (a file source reads every file already in "
            "its path; a renamed source reads its input again).",
            name=source.name,
        )


def describe_old(found: Findings, s: OldSource) -> str:
    if s.source is not None:
        return f"{s.label}: {s.source.describe()}"
    if s.files:
        read = printable(directory_of(s.files[0]))
        return f"{s.label}: a file source (its last batch read {read})"
    if s.files is not None:
        return f"{s.label}: a file source"
    return f"{s.label}: offset {printable(s.offset or '-')}"


def same_source(found: Findings, old: OldSource, new: Source) -> None:
    label = f"source {old.label}" if not found.old.named else f"source {quote(old.label)}"
    if old.source is not None:  # from a fingerprint
        previous = old.source
        if previous.is_file and new.is_file:
            if not same_path(previous.path, new.path) and _base_moved(previous.path, new.path):
                # The old path's files are outside the new one: as from the checkpoint
                # (Spark's FileStreamSource.getBatch), whatever the route.
                found.problem(
                    "sources",
                    f"{found.spark} stops the restarted query with "
                    f'java.lang.IllegalArgumentException: "Wrong basePath {new.path} for the '
                    f'root path: <a file of {previous.path}>". {capitalized(label)} now reads '
                    f"{printable(new.path or '?')} instead of "
                    f"{printable(previous.path or '?')}: at restart Spark lists the files of "
                    "the last committed batch again with the new path as their base, and "
                    "they are under the old one (files copied to the new path do not "
                    "change that: the checkpoint's file source log names the old ones). Only "
                    "a last batch that read no file (one that only advanced the watermark) "
                    "restarts, and then reads the new path's files as new: rows again.\n"
                    "Fix:\n"
                    "  - keep reading the old path (move the new input under it)\n"
                    + FIX_NEW_CHECKPOINT,
                    name=old.label,
                )
            elif not same_path(previous.path, new.path):
                # A warning, not a problem: only the checkpoint knows whether Spark fails.
                # (In tests the inputs usually live in a fresh temporary folder per run.)
                found.warn(
                    "sources",
                    f"{capitalized(label)} now reads {printable(new.path or '?')} instead of "
                    f"{printable(previous.path or '?')}. Whether {found.spark} restarts depends "
                    "on what the checkpoint's last committed batch read: if it read any file "
                    f"from the old path, the restart fails with "
                    f'java.lang.IllegalArgumentException: "Wrong basePath {new.path} for '
                    "the root path: <that file>\" (Spark lists that batch's files again with "
                    "the new path as their base); if it read none (a batch that only "
                    "advanced the watermark), Spark restarts and reads the new path's files "
                    "that are not in its log yet. A fingerprint cannot tell: check the "
                    "checkpoint itself (check_restore(<checkpoint directory>, query)).\n"
                    "Fix:\n"
                    "  - keep reading the old path (move the new input under it)\n"
                    + FIX_NEW_CHECKPOINT,
                    name=old.label,
                )
            elif previous.fmt != new.fmt:
                found.warn(
                    "sources",
                    f"{capitalized(label)} reads {printable(new.path or '?')} as {new.fmt} instead "
                    f"of {previous.fmt}. Spark does not check it: files already in its log "
                    "are not read again and new ones are parsed as the new format.",
                    name=old.label,
                )
        elif previous.kind != new.kind and not unreadable_offsets(
            found, label, previous.kind, new, old.label, None
        ):
            swapped(found, label, previous.describe(), new, old.label)
        return
    # from a checkpoint
    if old.files is not None and new.is_file and not any(c in (new.path or "") for c in "*?[{"):
        # (a glob sets no basePath: spark.restart.sinks says what it reads)
        base = new.path or ""
        outside = [f for f in old.files if not qualified_location(f).startswith(base)]
        if outside:
            batch = found.old.last_committed
            found.problem(
                "sources",
                f"{found.spark} stops the restarted query with "
                f'java.lang.IllegalArgumentException: "Wrong basePath {base} for the root '
                f'path: {qualified_location(outside[0])}". {capitalized(label)} now reads '
                f"{printable(base)}, but the checkpoint's last committed batch "
                f"({batch}) read {plural(len(outside), 'file')} outside it, and at restart "
                "Spark lists that batch's files again with the new path as their base "
                "(FileStreamSource.getBatch).\n"
                "Fix:\n"
                f"  - keep reading the old path ({printable(directory_of(outside[0]))}); put "
                "the new input under it\n" + FIX_NEW_CHECKPOINT,
                name=old.label,
            )
    elif old.files is not None and new.is_file:
        pass  # a glob
    elif old.files is not None and not new.is_file:
        swapped(found, label, "a file source", new, old.label)
    elif old.files is None and new.is_file and old.offset is not None:
        swapped(found, label, f"a source at offset {printable(old.offset)}", new, old.label)
    elif old.files is None and old.offset is not None:
        kind = offset_kind(old.offset)
        if kind is not None and kind != new.kind:
            unreadable_offsets(found, label, kind, new, old.label, old.offset)


#: rate-micro-batch's offset (``RatePerMicroBatchStreamOffset``): a row count and the event
#: time of the next row, as JSON.
RATE_MICRO_BATCH_OFFSET = ("offset", "timestamp")


def offset_kind(offset: str) -> str | None:
    """The source that wrote a checkpoint's offset, where its format tells: ``rate-micro-batch``
    (``{"offset": n, "timestamp": t}``); ``None`` otherwise."""
    try:
        value = json.loads(offset)
    except ValueError:
        return None
    if isinstance(value, dict) and tuple(sorted(value)) == RATE_MICRO_BATCH_OFFSET:
        return "rate-micro-batch"
    return None


def unreadable_offsets(
    found: Findings, label: str, before: str, new: Source, name: str, offset: str | None
) -> bool:
    """A source replaced by one that cannot read its offsets: Spark hands the new source the
    checkpoint's last offset and fails when it commits it (``MicroBatchExecution.
    commitSources``). Known: ``rate-micro-batch`` -> ``rate`` (``RateStreamMicroBatchStream``
    reads a number of seconds, ``Long.parseLong``; tests/data/meaning-restart,
    rate_micro_batch_to_rate). Returns whether it was one."""
    if (before, new.kind) != ("rate-micro-batch", "rate"):
        return False
    text = offset if offset is not None else '{"offset":<rows>,"timestamp":<ms>}'
    found.problem(
        "sources",
        f"{found.spark} stops the restarted query with [STREAM_FAILED] ... terminated with "
        f'exception: For input string: "{printable(text)}" (java.lang.NumberFormatException, '
        f"when the first batch after the restart commits the checkpoint's last offsets). "
        f"{capitalized(label)} was rate-micro-batch and is now {new.describe()}: the rate "
        "source reads an offset as a number of seconds, and the checkpoint holds "
        "rate-micro-batch's offsets (a row count and a timestamp, as JSON).\n"
        "Fix:\n"
        '  - keep reading spark.readStream.format("rate-micro-batch") (with its rowsPerBatch) '
        "on this checkpoint\n" + FIX_NEW_CHECKPOINT,
        name=name,
    )
    return True


def swapped(found: Findings, label: str, before: str, new: Source, name: str) -> None:
    found.warn(
        "sources",
        f"{capitalized(label)} was {before} and is now {new.describe()}. Spark does not check "
        "it: it hands the new source the old one's last offset, which it may fail to read "
        "or read wrongly; the Structured Streaming guide does not allow changing a "
        "source's type. Use a new checkpoint location for another source: its state "
        "starts empty, " + NEW_LOCATION_EFFECTS + ".",
        name=name,
    )


def directory_of(path: str) -> str:
    return qualified_location(path).rsplit("/", 1)[0]
