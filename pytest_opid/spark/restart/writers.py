"""A foreachBatch function or foreach writer changed between the query that wrote the checkpoint
and the new one, against its fingerprint.

Spark keeps neither in the checkpoint and calls whatever the new query hands it
(``ForeachBatchSink``, ``ForeachWriterTable``): the Structured Streaming guide allows the
change, and its effect is the code's. What the code shows is told apart
(:mod:`pytest_opid.spark.query.batch_writes`): a ``DataFrameWriter`` now in ``overwrite`` mode
on the same target (each batch replaces the rows the others wrote: rows lost), another target
(the rows before the restart stay in the old one: rows lost to readers of either), another
format in the same folder (results changed). Any other change (the rows or columns it writes,
a foreach writer's code) is "not verified": what the new code does with the rows was not run,
so nothing was shown, and the verdict says what was compared and what was not."""

from __future__ import annotations

from pytest_opid.spark.query.batch_writes import BatchWrite, writes_from_facts
from pytest_opid.spark.restart.endpoints import (
    RESULTS_CHANGED,
    ROWS_LOST,
    Endpoints,
    same_location,
)
from pytest_opid.spark.restart.findings import Findings
from pytest_opid.text import printable

_ACCEPT = (
    "  - if the readers of the sink accept it, accept the change: pytest --snapshot-update "
    "(opid check-restore: --allow-reinterpreted-state)\n"
)

#: How to see the effect that was not shown.
_SHOW = (
    "opid demonstrate --spark OLD_MODULE:FUNCTION --spark NEW_MODULE:FUNCTION shows the rows "
    "both versions hand their writer (it replaces the sink with its own); what each writer "
    "does with them is shown only by running both on one batch (a test that calls the two "
    "functions on one DataFrame and reads what they wrote). Then accept it (in pytest: "
    "allow_unverified=True; opid check-restore exits 3)."
)


def writer_changes(found: Findings, old: Endpoints, new: Endpoints) -> None:
    """The writer's code against the previous fingerprint, where the sink kept its kind."""
    if old.sink is None or new.sink is None:
        return
    kind = old.sink_kind
    if kind not in ("foreachBatch", "foreach") or new.sink_kind != kind:
        return
    before, after = old.sink.get("function"), new.sink.get("function")
    if before == after and before not in (None, "?"):
        return
    if before in (None, "?") or after in (None, "?"):
        found.unverify(
            "sink",
            f"The {kind} writer's code could not be compared: "
            f"{'the previous fingerprint' if before in (None, '?') else 'the new query'} "
            "records no digest of it (a function pytest-opid could not reach). "
            f"{found.spark} calls the new writer on the batches after the restart, whatever "
            "it does. " + _SHOW,
            name="sink",
        )
        return
    if kind == "foreachBatch" and _write_changes(found, old, new, before, after):
        return
    if kind == "foreachBatch":
        was = writes_from_facts(old.sink)
        now = writes_from_facts(new.sink)
        if was and now and was == now:
            how = "; ".join(_describe(w) for w in now)
            kept = (
                f" It writes as before ({how}): the same save mode, format and target. What "
                "changed is what it does with the rows (which rows, their columns or values), "
                "which its code decides and no fingerprint shows."
            )
        elif was and now:
            kept = (
                f" Its writes changed ({'; '.join(_describe(w) for w in was)} -> "
                f"{'; '.join(_describe(w) for w in now)}) in a way that does not by itself say "
                "what the sink then holds."
            )
        else:
            kept = (
                " Where and how it writes could not be read from both versions' code "
                "(no DataFrameWriter call with a literal target in one of them)."
            )
    else:
        kept = (
            " A foreach writer's target (a file, a table, a service) is its code's, which no "
            "fingerprint reads."
        )
    found.unverify(
        "sink",
        f"The {kind} writer's code changed (digest {printable(before or '-')} -> "
        f"{printable(after or '-')}).{kept} {found.spark} restarts and hands the new code the "
        "batches after the restart; the rows written before stay as the old code wrote "
        "them. Its effect on the sink was not shown: " + _SHOW,
        name="sink",
    )


def _write_changes(
    found: Findings, old: Endpoints, new: Endpoints, before: str, after: str
) -> bool:
    """Changes of a foreachBatch function's ``DataFrameWriter`` calls that say what the sink
    then holds. Returns whether one was found."""
    assert old.sink is not None and new.sink is not None
    was, now = writes_from_facts(old.sink), writes_from_facts(new.sink)
    if not was or not now:
        return False
    digests = f"(digest {printable(before)} -> {printable(after)})"
    told = False
    for position, (a, b) in enumerate(zip(was, now, strict=False)):
        which = "its write" if len(was) == len(now) == 1 else f"its write {position + 1}"
        if a.target != b.target or not same_location(a.where, b.where):
            told = True
            found.reinterpret(
                ROWS_LOST,
                f"Rows lost (to readers of either {a.target}): the foreachBatch function "
                f"{digests} now writes to {printable(b.where)} instead of "
                f"{printable(a.where)} ({which}: {_describe(a)} -> {_describe(b)}). "
                f"{found.spark} restarts and hands the new code the batches after the "
                f"restart: the rows of the batches before stay in {printable(a.where)}, those "
                f"after go to {printable(b.where)}, and neither holds every row.\n"
                "Fix:\n"
                f"  - keep writing to {printable(a.where)} on this checkpoint\n"
                f"  - or copy what {printable(a.where)} holds into {printable(b.where)} "
                "before the restart, then accept the change: pytest --snapshot-update "
                "(opid check-restore: --allow-reinterpreted-state)",
                name="sink",
            )
        elif b.mode == "overwrite" and a.mode != "overwrite" and "<batch_id>" not in b.where:
            told = True
            found.reinterpret(
                ROWS_LOST,
                f"Rows lost: the foreachBatch function {digests} now writes "
                f"{printable(b.where)} in save mode overwrite (was {a.mode}; {which}: "
                f"{_describe(a)} -> {_describe(b)}): each batch after the restart replaces "
                f"everything {printable(b.where)} holds, the rows the old code appended and the "
                "earlier batches' alike; only the last batch's rows remain.\n"
                "Fix:\n"
                f'  - keep mode("{a.mode}"), or overwrite only the batch\'s own rows (a '
                "folder or partition per batch id, or a MERGE by the rows' key)",
                name="sink",
            )
        elif a.format != b.format and b.target == "path":
            told = True
            found.reinterpret(
                RESULTS_CHANGED,
                f"Results changed: the foreachBatch function {digests} now writes "
                f"{b.format} into {printable(b.where)}, which holds the {a.format} files the "
                f"old code wrote ({which}): a reader of the folder reads one format, and "
                "misreads or drops the other format's rows.\n"
                "Fix:\n"
                f"  - keep writing {a.format} there, or write {b.format} to a new folder\n"
                + _ACCEPT,
                name="sink",
            )
    return told


def _describe(write: BatchWrite) -> str:
    return f"{write.mode} {write.format} to {write.target} {printable(write.where)}"
