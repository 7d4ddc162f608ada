"""What a change means to Flink, in Flink's words: savepoint restore by operator ID.

Flink maps the state in a savepoint to operators by ID: the user-defined ID given to
``setUidHash()`` where set, else the OperatorID (from ``uid()`` or generated from the graph
shape). It never matches by name. State whose ID finds no operator makes the restore fail
("Cannot map checkpoint/savepoint state for operator ... to the new program") unless the job
runs with ``--allowNonRestoredState``, which drops it. :class:`FlinkRules` decides from a
:class:`~pytest_opid.comparison.Comparison` whether that happens and explains it with fixes in the
DataStream API (``uid``, ``setUidHash``).
"""

from __future__ import annotations

import re

from pytest_opid.comparison import Comparison
from pytest_opid.engine_rules import Check, EngineWords
from pytest_opid.flink.restore import check_fingerprint
from pytest_opid.result import Fingerprint, OperatorFingerprint, RestoreCheck
from pytest_opid.text import columns, plural, quote

__all__ = ["PICTURE_WORDS", "FlinkRules"]

_DIFF_LEGEND = (
    ("lost", "state lost: the savepoint's state under its old ID finds no operator"),
    ("misplaced", "wrong state: restores the state of another operator"),
    ("new", "new: starts with empty state"),
    ("removed", "removed (dashed): its state finds no operator"),
    ("unchanged", "unchanged: restores its own state (or stateless, only its ID changed)"),
    ("chain", "box: a job vertex; marked split or merged where that changed"),
)

#: What the pictures and the ``opid fingerprint`` table call things in a Flink job: job
#: vertices (``JobVertex``, operators chained into one task), OperatorIDs, ``p=`` parallelism,
#: uids; state is restored from a savepoint by ID (``StateAssignmentOperation``), so a new
#: operator starts empty and a stateful one whose ID changed loses its state.
PICTURE_WORDS = EngineWords(
    chain="job vertex",
    chains="job vertices",
    operator_id="OperatorID",
    parallelism="p={}",
    parallelism_unset="p=default",
    chain_parallelism="p={}",
    chain_parallelism_unset="p=default",
    shows_uids=True,
    state_rule="Flink maps state by ID, not by name",
    saved_state="savepoint",
    new_operator="NEW: empty state",
    topology_legend=(
        ("chain", "box: a job vertex (operators chained into one task)"),
        ("plain", "operator: name, OperatorID (first 8 hex digits), parallelism, uid"),
        ("edge", "arrow label: the partitioner"),
    ),
    stateful_legend=("stateful", "stateful operator"),
    diff_legend=_DIFF_LEGEND,
    batch_diff_legend=_DIFF_LEGEND,
)


class FlinkRules:
    """Flink's restore rules for :mod:`pytest_opid.engines`."""

    name = "flink"
    #: Flink restores state by operator ID: snapshots write one per operator
    ids_find_state = True
    words = PICTURE_WORDS

    def claims_untagged(self, fp: Fingerprint) -> bool:
        return fp.state_operators is None  # the only untagged fingerprints without state ids

    def neutral(self, fp: Fingerprint) -> Fingerprint:
        return fp  # one Flink version (2.3) is supported: nothing to translate

    def snapshot_form(self, fp: Fingerprint) -> Fingerprint:
        return fp  # nothing machine-specific: IDs, names, parallelism

    def snapshot_preamble(self, fp: Fingerprint) -> tuple[str, ...]:
        return (
            "Flink restores an operator's state by its user_id (setUidHash) where set, else by",
            "its operator_id. Names may change freely; IDs may not. Accept changes: "
            "pytest --snapshot-update",
        )

    def loses_state(self, c: Comparison) -> bool:
        # Flink's own decision (flink.restore): an operator without state may change its ID.
        return not c.restore.restorable

    def breaks(self, c: Comparison, check: Check) -> bool:
        ids = self.loses_state(c) or bool(_misplaced(c))
        return check.broken_by(ids, bool(c.chain_changes))

    def explain(self, c: Comparison, check: Check, accept: str | None) -> str:
        out = [_verdict(c, check, self.breaks(c, check)), *_sections(c)]
        if c.chain_changes:
            out += ["", "Operator chains (job vertices) that split or merged:"]
            out += [f"  {change.describe()}" for change in c.chain_changes[:ROWS]]
        if c.renamed:
            out += ["", "Renamed, same ID (harmless: Flink restores state by ID, not by name):"]
            out += [f"  {quote(o.name)} -> {quote(n.name)}" for o, n in c.renamed[:5]]
            if len(c.renamed) > 5:
                out.append(f"  ... and {len(c.renamed) - 5} more")
        if self.breaks(c, check):
            out += ["", *_fixes(c, check, accept)]
        return "\n".join(out)

    def check_restore(
        self,
        old: Fingerprint,
        new: Fingerprint,
        allow_non_restored_state: bool,
        comparison: Comparison | None = None,
    ) -> RestoreCheck:
        """Flink's verdict on restoring ``new`` from a savepoint of the job ``old`` describes
        (see :func:`pytest_opid.flink.restore.check_fingerprint`)."""
        return check_fingerprint(
            old, new, allow_non_restored_state=allow_non_restored_state, comparison=comparison
        )

    def added_warning(self, c: Comparison) -> str | None:
        if not c.added:
            return None
        count = len(c.added)
        names = ", ".join(quote(n.name) for n in c.added[:3])
        more = f" and {count - 3} more" if count > 3 else ""
        return (
            f"{plural(count, 'operator')} not in the snapshot yet ({names}{more}): nothing "
            f"holds {'their' if count != 1 else 'its'} ID stable until you run "
            "pytest --snapshot-update"
        )

    def other_version(self, made_with: str, checked_with: str) -> str:
        return (
            f"made with Flink {made_with} and passed with Flink {checked_with}; "
            "--snapshot-update records this version"
        )

    def derive(self, c: Comparison) -> None:
        """Nothing: operators and chains paired by operator IDs say it all."""
        return None

    def changes(self, c: Comparison) -> dict[str, object]:
        """Nothing beyond operators: Flink's chains pair by operator IDs, as ``chain_changes``
        of :meth:`Comparison.to_dict` says them."""
        return {}


def _misplaced(
    c: Comparison,
) -> tuple[tuple[OperatorFingerprint, OperatorFingerprint, OperatorFingerprint], ...]:
    """Misplaced state, where the old operator may have state at all."""
    return tuple(m for m in c.misplaced if m[0].stateful is not False)


def _losing(c: Comparison) -> list[OperatorFingerprint]:
    """Orphaned operators that may hold state (an operator known to be stateless loses
    nothing: Flink restores without it)."""
    return [o for o in c.orphaned if o.stateful is not False]


def _verdict(c: Comparison, check: Check, broken: bool) -> str:
    problems = []
    misplaced = _misplaced(c)
    losing = _losing(c) if not c.restore.restorable else []
    if misplaced:
        problems.append(
            f"the state of {plural(len(misplaced), 'operator')} would be restored into "
            "the wrong operator"
        )
    if losing:
        problems.append(
            f"{plural(len(losing), 'operator')} would lose "
            f"{'its' if len(losing) == 1 else 'their'} state"
        )
    if c.chain_changes:
        problems.append(f"{plural(len(c.chain_changes), 'operator chain')} split or merged")
    held = f"[check={check.value}]"
    if broken:
        return f"Topology not stable {held}: " + "; ".join(problems) + "."
    notes = problems
    if c.added:
        notes = [f"{plural(len(c.added), 'new operator')} (empty state)", *notes]
    if notes:
        return f"No state lost {held}; not held stable: " + "; ".join(notes) + "."
    return f"No state lost {held}: every operator keeps its ID."


#: Rows listed per section of an explanation; ``opid diff --json`` has them all.
ROWS = 20


def _capped(rows: list[tuple[str, ...]]) -> list[str]:
    lines = columns(rows[:ROWS])
    if len(rows) > ROWS:
        lines.append(f"  ... and {len(rows) - ROWS} more (opid diff --json lists them all)")
    return lines


def _sections(c: Comparison) -> list[str]:
    out: list[str] = []
    misplaced = _misplaced(c)
    stateless = {id(o) for o in c.orphaned if o.stateful is False}
    changed_old = {id(o) for o, _ in c.changed}
    changed_new = {id(n) for _, n in c.changed} | {id(a) for _, _, a in misplaced}
    if misplaced:
        out += ["", "State restored into the wrong operator (Flink maps state by ID, not by name):"]
        for o, n, a in misplaced[:ROWS]:
            out += [
                f"  {quote(o.name)}'s state {o.state_id} goes to {quote(n.name)} (node {n.node}),",
                f"    which took over that ID; {quote(a.name)} (node {a.node}) starts empty "
                f"as {a.state_id}",
            ]
        if len(misplaced) > ROWS:
            out.append(f"  ... and {len(misplaced) - ROWS} more")
    changed = [(o, n) for o, n in c.changed if id(o) not in stateless]
    if changed:
        out += [
            "",
            "Operators whose ID changed (the state saved under the old ID finds no operator):",
        ]
        out += _capped(
            [
                (_node(o.node, n.node), quote(n.name), f"{o.state_id} -> {n.state_id}", _why(o, n))
                for o, n in changed
            ]
        )
    removed = [o for o in c.orphaned if id(o) not in changed_old and id(o) not in stateless]
    if removed:
        out += ["", "Operators that are gone (their state has no operator any more):"]
        out += _capped([(_node(o.node), quote(o.name), o.state_id) for o in removed])
    if stateless:
        out += ["", "Operators without state whose ID changed or that are gone (harmless):"]
        out += _capped(
            [(_node(o.node), quote(o.name), o.state_id) for o in c.orphaned if id(o) in stateless]
        )
    new_only = [n for n in c.added if id(n) not in changed_new]
    if new_only:
        out += ["", "New operators (start with empty state):"]
        out += _capped([(_node(n.node), quote(n.name), n.state_id) for n in new_only])
    unmapped = [p for p in c.restore.problems if p.kind == "unmapped_state"]
    if unmapped:
        out += [
            "",
            'Restoring a savepoint of the old job fails with "Cannot map checkpoint/savepoint',
            f'state for operator {unmapped[0].state_id} to the new program"; with',
            f"--allowNonRestoredState the job starts and the state of "
            f"{plural(len(unmapped), 'operator')} is lost.",
        ]
    other = [p for p in c.restore.problems if p.kind != "unmapped_state"]
    if other:
        out += ["", "Flink also refuses the restore for:"]
        out += [f"  {p.message.splitlines()[0]}" for p in other[:ROWS]]
    return out


def _fixes(c: Comparison, check: Check, accept: str | None) -> list[str]:
    out = ["How to fix:"]
    misplaced = _misplaced(c)
    if not c.restore.restorable or misplaced:
        if misplaced:
            out.append("  - give the operator its state back and pin the one that took over its ID")
            out += columns(
                [
                    (f"    {quote(a.name)}", f'.setUidHash("{o.state_id}")', "and")
                    for o, _, a in misplaced[:ROWS]
                ]
                + [(f"    {quote(n.name)}", '.uid("...")', "") for _, n, _ in misplaced[:ROWS]]
            )
        changed = [(o, n) for o, n in c.changed if o.stateful is not False]
        if changed:
            out.append("  - keep the running job's state: pin each changed operator to its old ID")
            out += _capped([(f"    {quote(n.name)}", _pin(o, n)) for o, n in changed])
        changed_old = {id(o) for o, _ in c.changed}
        if any(id(o) not in changed_old for o in c.orphaned) and len(c.added) > len(c.changed):
            out.append(
                '  - if a new operator is a gone one renamed: .setUidHash("<its old ID>") on it'
            )
        unpinned = [o for o in _losing(c) if o.uid is None] + [o for o, _, _ in misplaced]
        if unpinned:
            uid = _slug(min((o.name for o in unpinned), key=len))
            out += [
                f'  - pin every stateful operator with .uid("..."), e.g. .uid("{uid}"), so that',
                "    later changes keep its ID (on a running job a new uid changes the ID once:",
                "    keep the setUidHash next to it)",
            ]
        if misplaced:  # --allowNonRestoredState would still hand the state to the wrong one
            out.append("  - or, where the state may go: start the job without the savepoint")
        else:
            out += [
                "  - or, where that state may go: restore with --allowNonRestoredState (those",
                "    operators start empty), or start the job without the savepoint",
            ]
    if c.chain_changes and check is not Check.IDS:
        out += [
            "  - chained operators need equal parallelism and slot sharing group, a forward",
            "    edge, and no disableChaining()/startNewChain() between them",
        ]
    if accept and (not c.restore.restorable or misplaced):
        # Accepting the snapshot does not restore anything: it is the step after a safe deploy.
        out += [
            "Then, once the job is deployed one of these ways, record it as the new snapshot:",
            f"  {accept}",
        ]
    elif accept:
        out.append(f"  - or, if the change is intended, accept it: {accept}")
    return out


def _why(old: OperatorFingerprint, new: OperatorFingerprint) -> str:
    """The cause of an ID change, where the uids tell it."""
    if old.uid == new.uid or (old.uid is None and new.uid is None):
        return ""
    if new.uid is None:
        return f"(uid {quote(old.uid or '')} removed)"
    if old.uid is None:
        return f"(new uid {quote(new.uid)})"
    return f"(uid {quote(old.uid)} -> {quote(new.uid)})"


def _pin(old: OperatorFingerprint, new: OperatorFingerprint) -> str:
    """The call that gives ``new`` the old operator's state back."""
    if old.uid is not None and old.uid != new.uid and old.user_operator_id is None:
        return f".uid({quote(old.uid)})  (its old uid)"
    return f'.setUidHash("{old.state_id}")'


def _node(old: int, new: int | None = None) -> str:
    return f"node {old}" if new is None or new == old else f"node {old}->{new}"


def _slug(name: str) -> str:
    slug = re.sub(r"[^0-9a-z]+", "-", name.lower()).strip("-")
    return slug or "my-operator"
