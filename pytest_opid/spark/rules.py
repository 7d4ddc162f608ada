"""What a change means to Spark, in Spark's words: state by position, stages by exchange.

Spark Structured Streaming keeps the state of stateful operator *n* in ``state/<n>`` of the
checkpoint, numbered by the operator's position in the plan, and refuses to restart when the
operator at a position is not the one that wrote it. Operator IDs are only shapes here: a
changed upstream filter moves them all and harms nothing. A batch job keeps no state between
runs; what a refactor can change there is its stages (a shuffle or join strategy that appears,
disappears or moves). :class:`SparkRules` judges each mode by that, and never speaks of
savepoints.
"""

from __future__ import annotations

from dataclasses import replace

from pytest_opid.comparison import Check, Comparison
from pytest_opid.result import Fingerprint, RestoreCheck, StateOperator
from pytest_opid.spark.restore import check_fingerprint, short_source
from pytest_opid.text import plural, quote

__all__ = ["ROWS", "SparkRules"]

#: Rows listed per section of an explanation; ``opid diff --json`` has them all.
ROWS = 20


class SparkRules:
    """Spark's restart rules for :mod:`pytest_opid.io.registry`."""

    name = "spark"

    def claims_untagged(self, fp: Fingerprint) -> bool:
        return fp.state_operators is not None  # before the tag, only Spark numbered state

    def snapshot_form(self, fp: Fingerprint) -> Fingerprint:
        """File sources keep their format and folder name, not the folder's absolute path:
        a test's inputs usually live in a fresh temporary folder per run."""
        if not fp.sources:
            return fp
        return replace(fp, sources=tuple(short_source(s) for s in fp.sources))

    def snapshot_preamble(self, fp: Fingerprint) -> tuple[str, ...]:
        if fp.mode == "batch":
            return (
                "A Spark batch job keeps no state; job vertices are its stages, which end at",
                "every exchange (shuffle, broadcast). Accept changes: pytest --snapshot-update",
            )
        return (
            "Spark finds a stateful operator's state in state/<n> by its position n in the plan",
            "([state operators]); job vertices are Spark's stages. "
            "Accept: pytest --snapshot-update",
        )

    def loses_state(self, c: Comparison) -> bool:
        if c.mode == "batch":
            return False
        # Spark's own restart checks (spark.restore): operators by position, key and value
        # schemas per store, sources.
        return not c.restore.restorable

    def breaks(self, c: Comparison, check: Check) -> bool:
        stages = _stages_changed(c)
        if c.mode == "batch":
            return stages  # no state: only the stages can be held stable
        state = self.loses_state(c)
        if check is Check.IDS:
            return state
        if check is Check.CHAINS:
            return stages
        return state or stages

    def explain(self, c: Comparison, check: Check, accept: str | None) -> str:
        broken = self.breaks(c, check)
        out = [_verdict(c, check, broken, self.loses_state(c))]
        if c.state_operator_changes and c.mode == "streaming":
            out += ["", "Spark state directories (state/<n> in the checkpoint location):"]
            for s in c.state_operator_changes[:ROWS]:
                if s.old is not None and s.new is not None:
                    text = (
                        f"was {_stateful(s.old)}, is now {_stateful(s.new)}: "
                        "the wrong operator would read it"
                    )
                elif s.old is not None:
                    text = f"was {_stateful(s.old)}; no operator reads it any more"
                else:
                    assert s.new is not None
                    text = f"new: {_stateful(s.new)} starts with empty state"
                out.append(f"  state/{s.state_operator_id}  {text}")
            if len(c.state_operator_changes) > ROWS:
                more = len(c.state_operator_changes) - ROWS
                out.append(f"  ... and {more} more (opid diff --json lists them all)")
        if c.mode == "streaming" and (c.restore.problems or c.restore.warnings):
            out += ["", "Restarting the changed query on the old checkpoint:"]
            for item in [*c.restore.problems, *c.restore.warnings][:ROWS]:
                lines = item.message.split("\n")
                fix = lines.index("Fix:") if "Fix:" in lines else len(lines)
                out.append(f"  - {lines[0]}")
                out += [f"    {line}" for line in lines[1:fix]]
        before, after = len(c.old.job_vertices), len(c.new.job_vertices)
        if before != after:
            out += ["", f"Stages: {before} before, {after} now (an exchange was added or removed)."]
        if c.chain_changes:
            out += ["", "Stages that split or merged:"]
            out += [f"  {change.describe()}" for change in c.chain_changes[:ROWS]]
        if broken:
            out += ["", *_fixes(c, check, accept, self.loses_state(c))]
        return "\n".join(out)

    def check_restore(
        self,
        old: Fingerprint,
        new: Fingerprint,
        allow_non_restored_state: bool,
        comparison: Comparison | None = None,
    ) -> RestoreCheck:
        """Spark 4.3's verdict on restarting the query of ``new`` on the checkpoint of the query
        ``old`` describes (:func:`pytest_opid.spark.restore.check_fingerprint`). Spark has no
        ``--allowNonRestoredState``: the flag is Flink's and ignored."""
        return check_fingerprint(old, new)

    def added_warning(self, c: Comparison) -> str | None:
        appended = [s.new for s in c.state_operator_changes if s.old is None and s.new]
        if not appended or c.mode == "batch":
            return None
        names = ", ".join(f"state/{s.state_operator_id} {_stateful(s)}" for s in appended[:3])
        return (
            f"{plural(len(appended), 'stateful operator')} not in the snapshot yet ({names}): "
            "a restart on an existing checkpoint would start it with empty state; nothing holds "
            "its position stable until you run pytest --snapshot-update"
        )


def _verdict(c: Comparison, check: Check, broken: bool, loses: bool) -> str:
    held = f"[check={check.value}]"
    problems = []
    if loses:
        lost = sum(1 for s in c.state_operator_changes if s.loses_state)
        if lost:
            problems.append(
                f"{plural(lost, 'Spark state directory', 'Spark state directories')} would be "
                "read by another operator or by none"
            )
        else:
            kinds = sorted({p.kind.replace("_", " ") for p in c.restore.problems})
            problems.append(
                f"Spark would refuse to restart on the old checkpoint ({', '.join(kinds)})"
            )
    if c.chain_changes:
        problems.append(f"{plural(len(c.chain_changes), 'stage')} split or merged")
    elif _stages_changed(c):
        problems.append(f"{len(c.old.job_vertices)} stages became {len(c.new.job_vertices)}")
    if broken:
        title = "Stages changed" if c.mode == "batch" else "Topology not stable"
        return f"{title} {held}: " + "; ".join(problems) + "."
    moved = len(c.changed) + len(c.added)
    if c.mode == "batch":
        if moved or problems:
            return (
                f"Stages unchanged {held}: {plural(moved, 'operator')} with a new ID, no stage "
                "split or merged (a batch job keeps no state between runs)."
            )
        return f"Stages unchanged {held}: every operator keeps its ID."
    notes = problems
    if moved:
        notes = [
            f"{plural(moved, 'operator')} with a new ID "
            "(Spark finds state by state/<n>, not by ID)",
            *notes,
        ]
    if notes:
        return f"No state lost {held}; not held stable: " + "; ".join(notes) + "."
    return f"No state lost {held}: every operator keeps its ID."


def _stages_changed(c: Comparison) -> bool:
    """A stage split or merged, or one added or removed (an exchange came or went)."""
    return bool(c.chain_changes) or len(c.old.job_vertices) != len(c.new.job_vertices)


def _stateful(s: StateOperator) -> str:
    return f"{s.kind} {quote(s.name)}" if s.name and s.name != s.kind else s.kind


def _fixes(c: Comparison, check: Check, accept: str | None, loses: bool) -> list[str]:
    out = ["How to fix:"]
    if loses:
        out += [
            "  - keep the stateful operators (aggregations, deduplication, joins, windows) in",
            "    the same order in the query, so that each finds its state/<n> again",
            "  - or run the changed query on a new checkpoint location (its state starts empty)",
            '  - or carry the state over: read it with spark.read.format("statestore") from the',
            "    old checkpoint and write it into the new query's state",
        ]
    if _stages_changed(c) and (check is not Check.IDS or c.mode == "batch"):
        out += [
            "  - a stage ends at every exchange: look for a groupBy/join/repartition/",
            "    distinct that was added, removed or moved, or a join strategy that changed",
        ]
    if accept:
        out.append(f"  - or, if the change is intended, accept it: {accept}")
    return out
