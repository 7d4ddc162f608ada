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

import json
import re
import textwrap
from dataclasses import replace
from typing import NamedTuple

from pytest_opid.comparison import Comparison, StateOperatorChange
from pytest_opid.engine_rules import Check
from pytest_opid.result import (
    Fingerprint,
    RestoreCheck,
    RestoreProblem,
    StateOperator,
    parts_broken,
    what_breaks,
)
from pytest_opid.spark.plan_changes import PlanDiff, StageDiff, plan_diff, stage_diff
from pytest_opid.spark.renamings import current
from pytest_opid.spark.restart.verdict import check_fingerprint
from pytest_opid.spark.source_entries import short_endpoint, short_source
from pytest_opid.spark.words import (
    KIND_WORDS,
    PICTURE_WORDS,
    RECORD_AFTER,
    new_location_fix,
    other_version,
)
from pytest_opid.text import plural, quote

#: Rows listed per section of an explanation; ``opid diff --json`` has them all.
ROWS = 20


#: Columns the fixes are wrapped to.
_WIDTH = 96


_OPERATOR_ID = re.compile(r'"operatorId", [0-9]+\)')


class SparkRules:
    """Spark's rules: what a change between two fingerprints means (:mod:`pytest_opid.engines`)."""

    name = "spark"
    #: Spark finds state by position (state/<n>), not by operator ID: snapshots write the IDs
    #: once (format 6), so that a filter added upstream changes one line, not every operator's.
    ids_find_state = False
    words = PICTURE_WORDS

    def claims_untagged(self, fp: Fingerprint) -> bool:
        return fp.state_operators is not None  # before the tag, only Spark numbered state

    def neutral(self, fp: Fingerprint) -> Fingerprint:
        """``fp`` with Spark's renamings between its lines undone
        (:func:`pytest_opid.spark.renamings.current`)."""
        return current(fp)

    def snapshot_form(self, fp: Fingerprint) -> Fingerprint:
        """File sources, the sink's path and the checkpoint location are kept as
        :func:`~pytest_opid.snapshot_locations.snapshot_location` keeps them: a folder under the
        run's temporary folders by its name (a test's inputs usually live in a fresh one per
        run), one in the project relative to its root, any other whole. State schemas lose
        their fields' metadata (``spark.timeWindow``, ``spark.watermarkDelayMs``), which Spark
        does not compare at restart (``equalsIgnoreNameAndCompatibleNullability``) and no check
        here reads, so that the snapshot writes them in DDL form."""
        if fp.sources:
            fp = replace(fp, sources=tuple(short_source(s) for s in fp.sources))
        if fp.endpoints:
            # the sink's and the sources' folders likewise (a sink path change stays one line)
            fp = replace(fp, endpoints=tuple(map(short_endpoint, fp.endpoints)))
        if fp.state_operators and any(
            _has_metadata(st.key_schema) or _has_metadata(st.value_schema)
            for s in fp.state_operators
            for st in s.stores
        ):
            states = tuple(
                replace(
                    s,
                    stores=tuple(
                        replace(
                            st,
                            key_schema=_without_metadata(st.key_schema),
                            value_schema=_without_metadata(st.value_schema),
                        )
                        for st in s.stores
                    ),
                )
                for s in fp.state_operators
            )
            fp = replace(fp, state_operators=states)
        return fp

    def snapshot_preamble(self, fp: Fingerprint) -> tuple[str, ...]:
        if fp.mode == "batch":
            return (
                "A Spark batch job keeps no state; its [stages] end at every exchange (shuffle,",
                "broadcast); [plan] names its tables, keys and joins. Parallelism -1: set at",
                "run time, or by a conf in [settings]. Accept changes: pytest --snapshot-update",
            )
        return (
            "Spark finds a stateful operator's state in state/<n> by its position n in the plan",
            "(the state column of [operators]) and checks the [state stores] schemas at restart.",
            "Accept: pytest --snapshot-update",
        )

    def loses_state(self, c: Comparison) -> bool:
        if c.mode == "batch":
            return False
        # Spark's own restart checks (spark.restart): operators by position, key and value
        # schemas per store, sources.
        return not c.restore.restorable

    def breaks(self, c: Comparison, check: Check) -> bool:
        stages = _stages_changed(c)
        if c.mode == "batch":
            return stages  # no state: only the stages can be held stable
        state = self.loses_state(c) or _reinterprets(c)
        return check.broken_by(state, stages)

    def explain(self, c: Comparison, check: Check, accept: str | None) -> str:
        broken = self.breaks(c, check)
        out = [_verdict(c, check, broken, self.loses_state(c))]
        if c.state_operator_changes and c.mode == "streaming":
            out += ["", "Spark state directories (state/<n> in the checkpoint location):"]
            for s in c.state_operator_changes[:ROWS]:
                if s.old is not None and s.new is not None and _rekeyed(c, s):
                    # the same kind of operator at the same position: its key changed
                    text = f"{s.new.kind}: its key was {_key_of(s.old)}, is now {_key_of(s.new)}"
                elif s.old is not None and s.new is not None:
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
        if _reinterprets(c) or (c.allow_reinterpreted_state and c.restore.reinterpreted):
            accepted = ""
            if c.allow_reinterpreted_state:
                accepted = " (accepted: allow_reinterpreted_state)"
            out += ["", f"Spark restarts, but the results are wrong{accepted}:"]
            for item in c.restore.reinterpreted[:ROWS]:
                lines = item.message.split("\n")
                fix = lines.index("Fix:") if "Fix:" in lines else len(lines)
                out.append(f"  - {lines[0]}")
                out += [f"    {line}" for line in lines[1:fix]]
        if c.mode == "streaming" and (c.restore.problems or c.restore.warnings):
            out += ["", "Restarting the changed query on the old checkpoint:"]
            for item in [*c.restore.problems, *c.restore.warnings][:ROWS]:
                lines = item.message.split("\n")
                fix = lines.index("Fix:") if "Fix:" in lines else len(lines)
                out.append(f"  - {lines[0]}")
                out += [f"    {line}" for line in lines[1:fix]]
        before, after = len(c.old.job_vertices), len(c.new.job_vertices)
        if c.mode == "batch":
            diff = _diffs(c).stages
            if diff:
                out += ["", f"Stages: {before} before, {after} now."]
                out += [f"  join strategy: {o} is now {n}" for o, n in diff.strategies]
                out += [f"  {change.describe()}" for change in diff.changes[:ROWS]]
                if len(diff.changes) > ROWS:
                    out.append(f"  ... and {len(diff.changes) - ROWS} more")
            plan = _diffs(c).plan
            if plan.changes:
                out += ["", "Plan (the [plan] lines that differ; row-wise ones last):"]
                ordered = [*plan.structural, *plan.row_wise]
                out += [f"  {change.describe()}" for change in ordered[:ROWS]]
                if len(ordered) > ROWS:
                    out.append(f"  ... and {len(ordered) - ROWS} more")
        elif before != after:
            out += ["", f"Stages: {before} before, {after} now (an exchange was added or removed)."]
        if c.chain_changes and c.mode != "batch":
            out += ["", "Stages that split or merged:"]
            out += [f"  {change.describe()}" for change in c.chain_changes[:ROWS]]
        if broken:
            out += ["", *_fixes(c, check, accept, self.loses_state(c))]
        return "\n".join(out)

    def reinterprets(self, c: Comparison) -> bool:
        """Spark restarts, but some stateful operator reads its state as something else."""
        return _reinterprets(c)

    def check_restore(
        self,
        old: Fingerprint,
        new: Fingerprint,
        allow_non_restored_state: bool,
        comparison: Comparison | None = None,
    ) -> RestoreCheck:
        """Spark 4.3's verdict on restarting the query of ``new`` on the checkpoint of the query
        ``old`` describes (:func:`pytest_opid.spark.restart.verdict.check_fingerprint`). Spark has
        no ``--allowNonRestoredState``: the flag is Flink's and ignored."""
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

    def other_version(self, made_with: str, checked_with: str) -> str:
        return other_version(made_with, checked_with)

    def derive(self, c: Comparison) -> BatchDiff:
        """The stages and plan compared, as a batch job's verdict, explanation and JSON form
        read them (computed when first asked for: a streaming query's verdict never asks)."""
        return BatchDiff(stage_diff(c.old, c.new), plan_diff(c.old, c.new))

    def changes(self, c: Comparison) -> dict[str, object]:
        """A batch job's own account for ``opid diff --json``: its stages compared by what they
        are (``stage_changes``, ``join_strategies``), the ``[plan]`` lines that differ
        (``plan_changes``) and the confs (``settings_changes``); ``chain_changes`` is emptied,
        since stages paired by operator IDs split and merge where Spark did not. A streaming
        query: nothing beyond the engine-neutral form."""
        if c.mode != "batch":
            return {}
        stages = _diffs(c).stages
        old, new = dict(c.old.settings), dict(c.new.settings)
        return {
            "chain_changes": [],
            "stage_changes": [
                {
                    "kind": s.kind,
                    "old": None if s.old is None else {"id": s.old.id, "name": s.old.name},
                    "new": None if s.new is None else {"id": s.new.id, "name": s.new.name},
                    "gained": list(s.gained),
                    "lost": list(s.lost),
                }
                for s in stages.changes
            ],
            "join_strategies": [{"old": o, "new": n} for o, n in stages.strategies],
            "plan_changes": [
                {
                    "kind": p.kind,
                    "operator": p.operator,
                    "old": p.old,
                    "new": p.new,
                    "structural": p.structural,
                }
                for p in _diffs(c).plan.changes
            ],
            # A snapshot from before settings were recorded has none: nothing known changed.
            "settings_changes": [
                {"name": name, "old": old.get(name), "new": new.get(name)}
                for name in sorted(old.keys() | new.keys())
                if old and old.get(name) != new.get(name)
            ],
        }


#: What each check holds stable in a streaming query, in Spark's terms (a batch query: stages).
_HELD = {Check.IDS: "state", Check.CHAINS: "stages", Check.BOTH: "state and stages"}


def _verdict(c: Comparison, check: Check, broken: bool, loses: bool) -> str:
    held = f"[checked: {'stages' if c.mode == 'batch' else _HELD[check]}]"
    # what breaks besides the state (the sink, the output mode, a source): named as checked
    parts = (
        [] if c.mode == "batch" else parts_broken([*c.restore.problems, *c.restore.reinterpreted])
    )
    if check is not Check.CHAINS and parts:
        held = f"[checked: {_HELD[check]}, {', '.join(p.removeprefix('the ') for p in parts)}]"
    problems = []
    if loses:
        lost = sum(1 for s in c.state_operator_changes if s.loses_state and not _rekeyed(c, s))
        rekeyed = sum(1 for s in c.state_operator_changes if _rekeyed(c, s))
        if rekeyed:
            problems.append(
                f"{plural(rekeyed, 'stateful operator')} keeps its position with another key "
                "(Spark refuses the old state's key schema)"
            )
        if lost:
            problems.append(
                f"{plural(lost, 'Spark state directory', 'Spark state directories')} would be "
                "read by another operator or by none"
            )
        elif not rekeyed:
            kinds = list(dict.fromkeys(_problem_words(p) for p in c.restore.problems))
            problems.append(
                f"Spark would refuse to restart on the old checkpoint ({', '.join(kinds)})"
            )
    if _reinterprets(c):
        n = len({r.state_id for r in c.restore.reinterpreted if r.state_id is not None})
        if n:
            dirs = plural(n, "state directory", "state directories")
            problems.append(
                f"Spark would restart on the old checkpoint, but {dirs} would be read as "
                "something else: the results would be wrong"
            )
        others = [r for r in c.restore.reinterpreted if r.state_id is None]
        if others:  # no state involved there: what breaks is named, not a state directory
            problems.append(
                f"Spark would restart on the old checkpoint, but with {what_breaks(others)}"
            )
    state_problems = len(problems)
    if c.mode == "batch":
        problems += _diffs(c).stages.problems()
        staged = len(problems)
        # The same stages: say which plan lines changed; else which tables came or went.
        problems += _diffs(c).plan.problems(tables_only=staged > state_problems)
    elif c.chain_changes:
        problems.append(f"{plural(len(c.chain_changes), 'stage')} split or merged")
    elif _stages_changed(c):
        problems.append(f"{len(c.old.job_vertices)} stages became {len(c.new.job_vertices)}")
    if broken:
        if c.mode == "batch" and staged == state_problems:
            title = "Plan changed"  # the same stages, another table, key, join or aggregate
        elif c.mode == "batch" or check is Check.CHAINS or not (loses or _reinterprets(c)):
            title = "Stages changed"
            # The stages first; what the state check would say, after, as not checked.
            problems = [
                *problems[state_problems:],
                *(f"not checked here: {p}" for p in problems[:state_problems]),
            ]
        elif loses:
            title = "Not restartable from the old checkpoint"
        else:
            title = "Not safe to restart from the old checkpoint"
        return f"{title} {held}: " + "; ".join(problems) + "."
    moved = len(c.changed) + len(c.added)
    if c.mode == "batch":
        notes = _settings_changes(c)
        inside = len(_diffs(c).stages.inside)
        if inside:
            notes.append(
                f"{plural(inside, 'stage')} changed only in row-wise operators (Filter, Project)"
            )
        rows = len(_diffs(c).plan.row_wise)
        if rows:
            notes.append(f"{plural(rows, 'plan line')} of row-wise work changed")
        noted = "".join(f"; {note}" for note in notes)
        if moved:
            return (
                f"Stages unchanged {held}: {plural(moved, 'operator')} with a new ID, the same "
                f"stages and exchanges{noted} (a batch job keeps no state between runs)."
            )
        return (
            f"Stages unchanged {held}: the same stages{noted} "
            "(a batch job keeps no state between runs)."
        )
    title = {
        Check.IDS: "Restartable from the old checkpoint",
        Check.CHAINS: "Stages unchanged",
        Check.BOTH: "Restartable from the old checkpoint, stages unchanged",
    }[check]
    notes = problems
    if moved:
        notes = [
            f"{plural(moved, 'operator')} with a new ID "
            "(Spark finds state by state/<n>, not by ID)",
            *notes,
        ]
    if notes:
        return f"{title} {held}; not held stable: " + "; ".join(notes) + "."
    if check is Check.CHAINS:
        return f"{title} {held}: no stage split or merged."
    if not c.new.state_operators:
        return f"{title} {held}: the query keeps no state."
    return f"{title} {held}: every stateful operator finds its state/<n> again."


def _reinterprets(c: Comparison) -> bool:
    """A streaming restart Spark accepts whose state some operator reads under another meaning
    (``RestoreCheck.reinterpreted``), unless the test accepts it knowingly."""
    if c.mode != "streaming" or c.allow_reinterpreted_state or not c.restore.restorable:
        return False
    return bool(c.restore.reinterpreted)


def _stages_changed(c: Comparison) -> bool:
    """A stage split or merged, or one added or removed (an exchange came or went); in a batch
    job, a stage added, removed or changed beyond row-wise operators, a join strategy, or a
    plan line beyond row-wise work (a table, exchange keys, a join, an aggregate, a
    subquery)."""
    if c.mode == "batch":
        return bool(_diffs(c).stages) or bool(_diffs(c).plan.structural)
    return bool(c.chain_changes) or len(c.old.job_vertices) != len(c.new.job_vertices)


def _settings_changes(c: Comparison) -> list[str]:
    """``conf changed: spark.sql.shuffle.partitions 4 -> 200``, once per conf. A snapshot
    from before settings were recorded has none: nothing is known to have changed."""
    old, new = dict(c.old.settings), dict(c.new.settings)
    if not old:
        return []
    return [
        f"conf changed: {name} {old.get(name, 'unset')} -> {new.get(name, 'unset')}"
        for name in sorted(old.keys() | new.keys())
        if old.get(name) != new.get(name)
    ]


class BatchDiff(NamedTuple):
    """A batch job's stages and ``[plan]`` lines compared: :meth:`SparkRules.derive`."""

    stages: StageDiff
    plan: PlanDiff


def _diffs(c: Comparison) -> BatchDiff:
    """A batch job's stage and plan comparison, made once per comparison."""
    found = c.derived
    if not isinstance(found, BatchDiff):
        raise TypeError(f"a batch comparison's derived facts, got {type(found).__name__}")
    return found


def _rekeyed(c: Comparison, change: StateOperatorChange) -> bool:
    """The same stateful operator at ``state/<n>`` with another key: the same kind there, and
    as many stateful operators as before (none added or removed, which moves the others)."""
    old, new = change.old, change.new
    same_count = len(c.old.state_operators or ()) == len(c.new.state_operators or ())
    return old is not None and new is not None and old.kind == new.kind and same_count


def _key_of(s: StateOperator) -> str:
    """``(string)`` of ``StateStoreSave(string)``: the types of an operator's key."""
    return s.name[s.name.find("(") :] if "(" in s.name else "unknown"


def _stateful(s: StateOperator) -> str:
    return f"{s.kind} {quote(s.name)}" if s.name and s.name != s.kind else s.kind


def _fixes(c: Comparison, check: Check, accept: str | None, loses: bool) -> list[str]:
    """What makes the deploy safe. Where the old checkpoint would not restart, or restart on
    state read under another meaning, accepting the snapshot is never one of the fixes (CI
    would pass and the deploy still fail or give wrong results): it is named as the step after
    the deploy is made safe."""
    out = ["How to fix:"]
    unsafe = loses or _reinterprets(c)
    after = [RECORD_AFTER.format(accept=accept)] if accept and unsafe else []
    if _reinterprets(c) and not loses:
        first = c.restore.reinterpreted[0].message.split("\n")
        if "Fix:" in first:
            return out + first[first.index("Fix:") + 1 :] + after
    if loses:
        out += _restart_fixes(c) or [
            new_location_fix("  - run the changed query"),
        ]
    restaged = c.mode != "batch" or bool(_diffs(c).stages)
    if _stages_changed(c) and (check is not Check.IDS or c.mode == "batch") and restaged:
        out += [
            "  - a stage ends at every exchange: look for a groupBy/join/repartition/",
            "    distinct that was added, removed or moved, or a join strategy that changed",
        ]
    elif _stages_changed(c):
        out += [
            "  - the query now reads another table, or shuffles, joins, groups or sorts by",
            "    other keys: make sure the change is intended",
        ]
    if after:
        out += after
    elif accept:
        out.append(f"  - or, if the change is intended, accept it: {accept}")
    return out


def _restart_fixes(c: Comparison) -> list[str]:
    """The fixes of the problems Spark would stop at, chosen by each problem's kind in
    :mod:`pytest_opid.spark.restart` (its message's lines after ``Fix:``): what to keep as it
    was first, then the alternatives, then what not to do, each once, wrapped for a CI log."""
    first: list[str] = []
    alternatives: list[str] = []
    warnings: list[str] = []
    for problem in c.restore.problems:
        lines = problem.message.split("\n")
        if "Fix:" not in lines:
            continue
        for line in lines[lines.index("Fix:") + 1 :]:
            bullet = line.strip().removeprefix("- ").strip()
            if not bullet:
                continue
            group = (
                alternatives
                if bullet.startswith("or ")
                else warnings
                if bullet.startswith("do not ")
                else first
            )
            # "migrate state/0", "migrate state/1": one bullet, for state/<n>
            general = _OPERATOR_ID.sub('"operatorId", <n>)', bullet)
            if general in group:
                continue
            twin = [b for b in group if _OPERATOR_ID.sub('"operatorId", <n>)', b) == general]
            if twin and twin[0] != bullet:
                group[group.index(twin[0])] = general
            elif not twin:
                group.append(bullet)
    if not first and alternatives:
        alternatives[0] = alternatives[0].removeprefix("or ")
    out = []
    for bullet in [*first, *alternatives, *warnings]:
        out += textwrap.wrap(
            bullet,
            _WIDTH,
            initial_indent="  - ",
            subsequent_indent="    ",
            break_long_words=False,
            break_on_hyphens=False,
        )
    return out


def _problem_words(problem: RestoreProblem) -> str:
    words = KIND_WORDS.get(problem.kind, problem.kind.replace("_", " "))
    return words.format(n="<n>" if problem.state_id is None else problem.state_id)


def _has_metadata(schema: str | None) -> bool:
    return schema is not None and '"metadata":{"' in schema


def _without_metadata(schema: str | None) -> str | None:
    """A data type's JSON with every struct field's metadata emptied, in Spark's compact
    form; the text itself where it has none or is not JSON."""
    if not _has_metadata(schema):
        return schema
    assert schema is not None
    try:
        data = json.loads(schema)
    except ValueError:
        return schema
    todo = [data]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            if item.get("type") == "struct" and isinstance(item.get("fields"), list):
                for field in item["fields"]:
                    if isinstance(field, dict) and field.get("metadata"):
                        field["metadata"] = {}
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)
