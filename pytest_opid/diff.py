"""What a topology change does to a job's state, as Flink (or Spark) would restore it.

Flink maps the state in a savepoint to operators by ID: the user-defined ID given to
``setUidHash()`` where set, else the OperatorID (from ``uid()`` or generated from the graph
shape). It never matches by name. So :func:`compare` pairs old and new operators by that state ID
first; whatever old ID finds no operator any more is state Flink refuses to restore ("Cannot map
checkpoint/savepoint state for operator ... to the new program") unless the job runs with
``--allowNonRestoredState``, which drops it. Only to *explain* a change does it then pair the
remaining operators by uid and name ("``Parse`` had ID a, now has b"). Renaming an operator or
editing its function changes nothing here; an operator that gets another ID does.

Spark Structured Streaming keeps the state of stateful operator *n* in ``state/<n>`` of the
checkpoint, numbered by plan position; for Spark fingerprints the comparison says which operator
would read which directory after the change.

:func:`render` turns a :class:`Comparison` into the message a failing test prints, and
:func:`cli_diff` is ``opid diff OLD NEW``.
"""

from __future__ import annotations

import enum
import json
import re
import sys
from collections import defaultdict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any

from pytest_opid.errors import DocumentError, OpidError
from pytest_opid.fingerprint import (
    Fingerprint,
    JobVertex,
    OperatorFingerprint,
    StateOperator,
)

__all__ = [
    "ChainChange",
    "Check",
    "Comparison",
    "StateOperatorChange",
    "cli_diff",
    "compare",
    "render",
]


class Check(enum.Enum):
    """What ``@pytest.mark.stable_topology`` holds stable."""

    IDS = "ids"  #: every old operator's state ID still exists (no state lost)
    CHAINS = "chains"  #: no operator chain (job vertex) split or merged
    BOTH = "both"

    @classmethod
    def parse(cls, value: Any) -> Check:
        if isinstance(value, Check):
            return value
        try:
            return cls(value)
        except ValueError:
            allowed = ", ".join(repr(c.value) for c in cls)
            raise ValueError(f"check must be one of {allowed}, got {value!r}") from None


@dataclass(frozen=True)
class ChainChange:
    """Operators that ran in one job vertex now run in several (``split``), or the other way
    round (``merged``). Only operators present on both sides count."""

    kind: str  # "split" | "merged"
    old: tuple[JobVertex, ...]
    new: tuple[JobVertex, ...]


@dataclass(frozen=True)
class StateOperatorChange:
    """Spark: the operator that reads ``state/<n>`` before (``old``) and after (``new``) the
    change; ``None`` where there is none."""

    state_operator_id: int
    old: StateOperator | None
    new: StateOperator | None

    @property
    def loses_state(self) -> bool:
        """An existing state directory that a different operator, or none, would read."""
        return self.old is not None


@dataclass(frozen=True)
class Comparison:
    """The effect of going from ``old`` to ``new`` on operator state and chains."""

    old: Fingerprint
    new: Fingerprint
    #: pairs with the same state ID: Flink restores the old state into the new operator
    kept: tuple[tuple[OperatorFingerprint, OperatorFingerprint], ...]
    #: pairs (by uid or name) whose state ID changed: the old state would not find this operator
    changed: tuple[tuple[OperatorFingerprint, OperatorFingerprint], ...]
    #: old operators whose state ID no new operator has (includes the old side of ``changed``)
    orphaned: tuple[OperatorFingerprint, ...]
    #: new operators whose state ID did not exist before; they start with empty state
    added: tuple[OperatorFingerprint, ...]
    chain_changes: tuple[ChainChange, ...]
    state_operator_changes: tuple[StateOperatorChange, ...]
    #: (old, receiver, own): Flink restores ``old``'s state into ``receiver``, a differently
    #: named operator that took over its ID, while ``own`` (same name as ``old``, new ID) starts
    #: empty. Typical after inserting an operator in front of another: the wrong state restores.
    misplaced: tuple[tuple[OperatorFingerprint, OperatorFingerprint, OperatorFingerprint], ...] = ()

    @property
    def is_spark(self) -> bool:
        return self.old.state_operators is not None or self.new.state_operators is not None

    @property
    def loses_state(self) -> bool:
        """Whether restoring the old job's state into the new one loses (or misplaces) state."""
        if self.is_spark:
            return any(c.loses_state for c in self.state_operator_changes)
        return bool(self.orphaned)

    @property
    def renamed(self) -> tuple[tuple[OperatorFingerprint, OperatorFingerprint], ...]:
        """Kept operators with a new name: harmless, Flink does not look at names."""
        misplaced = {id(o) for o, _, _ in self.misplaced}
        return tuple((o, n) for o, n in self.kept if o.name != n.name and id(o) not in misplaced)

    @property
    def misplaces_state(self) -> bool:
        """Whether some state would be restored into a different operator than its own."""
        return bool(self.misplaced)

    def breaks(self, check: Check | str = Check.BOTH) -> bool:
        """Whether the change violates what ``check`` holds stable."""
        check = Check.parse(check)
        ids = self.loses_state or self.misplaces_state
        chains = bool(self.chain_changes)
        if check is Check.IDS:
            return ids
        if check is Check.CHAINS:
            return chains
        return ids or chains

    def to_dict(self) -> dict[str, Any]:
        """The JSON form ``opid diff --json`` prints."""
        return {
            "loses_state": self.loses_state,
            "changed": [{"old": _op(o), "new": _op(n)} for o, n in self.changed],
            "orphaned": [_op(o) for o in self.orphaned],
            "added": [_op(n) for n in self.added],
            "renamed": [{"old": _op(o), "new": _op(n)} for o, n in self.renamed],
            "misplaced": [
                {"old": _op(o), "restored_into": _op(n), "own": _op(a)}
                for o, n, a in self.misplaced
            ],
            "chain_changes": [
                {
                    "kind": c.kind,
                    "old": [{"id": v.id, "name": v.name} for v in c.old],
                    "new": [{"id": v.id, "name": v.name} for v in c.new],
                }
                for c in self.chain_changes
            ],
            "state_operator_changes": [
                {
                    "state_operator_id": c.state_operator_id,
                    "old": _state(c.old),
                    "new": _state(c.new),
                }
                for c in self.state_operator_changes
            ],
        }


def _op(op: OperatorFingerprint) -> dict[str, Any]:
    return {
        "node": op.node,
        "name": op.name,
        "operator_id": op.operator_id,
        "user_operator_id": op.user_operator_id,
        "state_id": op.state_id,
    }


def _state(s: StateOperator | None) -> dict[str, Any] | None:
    if s is None:
        return None
    return {"operator_id": s.operator_id, "name": s.name, "kind": s.kind}


# -- comparing ----------------------------------------------------------------------------------


def compare(old: Fingerprint, new: Fingerprint) -> Comparison:
    """Match ``new`` against ``old`` the way Flink restores state (by state ID)."""
    waiting: dict[str, deque[int]] = defaultdict(deque)
    for i, op in enumerate(new.operators):
        waiting[op.state_id].append(i)
    kept: list[tuple[OperatorFingerprint, OperatorFingerprint]] = []
    orphaned: list[OperatorFingerprint] = []
    for op in old.operators:
        queue = waiting.get(op.state_id)
        if queue:
            kept.append((op, new.operators[queue.popleft()]))
        else:
            orphaned.append(op)
    taken = {id(n) for _, n in kept}
    added = [n for n in new.operators if id(n) not in taken]
    changed = _pair(orphaned, added)
    pairs = kept + changed
    misplaced = _misplaced(kept, added, {id(n) for _, n in changed})
    return Comparison(
        old=old,
        new=new,
        kept=tuple(kept),
        changed=tuple(changed),
        orphaned=tuple(orphaned),
        added=tuple(added),
        chain_changes=tuple(_chain_changes(old, new, pairs)),
        state_operator_changes=tuple(_state_changes(old, new)),
        misplaced=tuple(misplaced),
    )


def _misplaced(
    kept: Sequence[tuple[OperatorFingerprint, OperatorFingerprint]],
    added: Sequence[OperatorFingerprint],
    explained: set[int],
) -> list[tuple[OperatorFingerprint, OperatorFingerprint, OperatorFingerprint]]:
    """Kept pairs that are not a rename: the new holder of the old ID has another name, and an
    operator with the old name is new (it got another ID). Flink restores by ID, so the old
    operator's state would land in the stranger while its own operator starts empty."""
    by_name: dict[str, deque[OperatorFingerprint]] = defaultdict(deque)
    for n in added:
        if id(n) not in explained:
            by_name[n.name].append(n)
    found = []
    for o, n in kept:
        if o.name != n.name and o.uid is None and o.user_operator_id is None:
            own = by_name.get(o.name)
            if own:
                found.append((o, n, own.popleft()))
    return found


def _pair(
    orphaned: Sequence[OperatorFingerprint], added: Sequence[OperatorFingerprint]
) -> list[tuple[OperatorFingerprint, OperatorFingerprint]]:
    """Explain orphaned IDs: the new operator with the same uid, else the same name.

    Names are aligned as sequences (in operator order, longest matching runs first), not by
    first match, so generic names such as Spark's ``Filter`` or ``Project`` pair with their own
    counterparts around an inserted operator. Nothing weaker (such as node position) is used:
    pairing an operator with a stranger would suggest ``setUidHash`` on the wrong operator and
    restore foreign state into it.
    """
    pairs: list[tuple[OperatorFingerprint, OperatorFingerprint]] = []
    by_uid: dict[str, deque[OperatorFingerprint]] = defaultdict(deque)
    for n in added:
        if n.uid is not None:
            by_uid[n.uid].append(n)
    taken: set[int] = set()
    free_old = []
    for o in orphaned:
        queue = by_uid.get(o.uid) if o.uid is not None else None
        if queue:
            n = queue.popleft()
            pairs.append((o, n))
            taken.add(id(n))
        else:
            free_old.append(o)
    free_new = [n for n in added if id(n) not in taken]
    matcher = SequenceMatcher(
        None, [o.name for o in free_old], [n.name for n in free_new], autojunk=False
    )
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            pairs.append((free_old[block.a + k], free_new[block.b + k]))
    position = {id(o): i for i, o in enumerate(orphaned)}
    pairs.sort(key=lambda p: position[id(p[0])])
    return pairs


def _chain_changes(
    old: Fingerprint,
    new: Fingerprint,
    pairs: Iterable[tuple[OperatorFingerprint, OperatorFingerprint]],
) -> list[ChainChange]:
    old_vertex = {v.id: v for v in old.job_vertices}
    new_vertex = {v.id: v for v in new.job_vertices}
    forward: dict[str, set[str]] = defaultdict(set)  # old vertex -> new vertices
    backward: dict[str, set[str]] = defaultdict(set)  # new vertex -> old vertices
    for o, n in pairs:
        if o.job_vertex in old_vertex and n.job_vertex in new_vertex:
            forward[o.job_vertex].add(n.job_vertex)
            backward[n.job_vertex].add(o.job_vertex)
    old_order = {v.id: i for i, v in enumerate(old.job_vertices)}
    new_order = {v.id: i for i, v in enumerate(new.job_vertices)}
    changes = []
    for v in old.job_vertices:
        targets = forward.get(v.id, ())
        if len(targets) > 1:
            parts = sorted(targets, key=new_order.__getitem__)
            changes.append(ChainChange("split", (v,), tuple(new_vertex[t] for t in parts)))
    for v in new.job_vertices:
        sources = backward.get(v.id, ())
        if len(sources) > 1:
            parts = sorted(sources, key=old_order.__getitem__)
            changes.append(ChainChange("merged", tuple(old_vertex[s] for s in parts), (v,)))
    return changes


def _state_changes(old: Fingerprint, new: Fingerprint) -> list[StateOperatorChange]:
    if old.state_operators is None and new.state_operators is None:
        return []
    before = {s.state_operator_id: s for s in old.state_operators or ()}
    after = {s.state_operator_id: s for s in new.state_operators or ()}
    changes = []
    for number in sorted(before.keys() | after.keys()):
        o, n = before.get(number), after.get(number)
        # Spark finds state/<n> by number alone; the operator_id (a shape hash) moves with any
        # upstream change, so what tells a different operator is its kind and name.
        if o is not None and n is not None and (o.kind, o.name) == (n.kind, n.name):
            continue
        changes.append(StateOperatorChange(number, o, n))
    return changes


# -- rendering ----------------------------------------------------------------------------------

_ACCEPT = "pytest --snapshot-update"


def render(
    comparison: Comparison,
    check: Check | str = Check.BOTH,
    *,
    accept: str | None = _ACCEPT,
) -> str:
    """The explanation of a comparison, most important first, for a CI log.

    ``check`` decides the verdict in the first line; ``accept`` is the command that accepts the
    change (``None`` leaves that hint out, as ``opid diff`` does).
    """
    check = Check.parse(check)
    c = comparison
    out: list[str] = [_verdict(c, check)]
    out += _spark_sections(c) if c.is_spark else _flink_sections(c)
    if c.chain_changes:
        what = "Stages" if c.is_spark else "Operator chains (job vertices)"
        out += ["", f"{what} that split or merged:"]
        for change in c.chain_changes:
            before = " + ".join(_q(v.name) for v in change.old)
            after = " + ".join(_q(v.name) for v in change.new)
            verb = "now runs as" if change.kind == "split" else "now run as one"
            out.append(f"  {change.kind}: {before} {verb} {after}")
    if c.renamed:
        out += ["", "Renamed, same ID (harmless: Flink restores state by ID, not by name):"]
        out += [f"  {_q(o.name)} -> {_q(n.name)}" for o, n in c.renamed[:5]]
        if len(c.renamed) > 5:
            out.append(f"  ... and {len(c.renamed) - 5} more")
    if c.breaks(check):
        out += ["", *_fixes(c, check, accept)]
    return "\n".join(out)


def _verdict(c: Comparison, check: Check) -> str:
    problems = []
    if c.is_spark:
        lost = sum(1 for s in c.state_operator_changes if s.loses_state)
        if lost:
            problems.append(
                f"{_n(lost, 'Spark state directory', 'Spark state directories')} would be read "
                "by another operator or by none"
            )
    else:
        if c.misplaced:
            problems.append(
                f"the state of {_n(len(c.misplaced), 'operator')} would be restored into "
                "the wrong operator"
            )
        if c.orphaned:
            problems.append(
                f"{_n(len(c.orphaned), 'operator')} would lose "
                f"{'its' if len(c.orphaned) == 1 else 'their'} state"
            )
    if c.chain_changes:
        problems.append(f"{_n(len(c.chain_changes), 'operator chain')} split or merged")
    held = f"[check={check.value}]"
    if c.breaks(check):
        return f"Topology not stable {held}: " + "; ".join(problems) + "."
    notes = problems
    if c.added and c.is_spark:
        moved = _n(len(c.added), "operator")
        notes = [f"{moved} with a new ID (Spark finds state by state/<n>, not by ID)", *notes]
    elif c.added:
        notes = [f"{_n(len(c.added), 'new operator')} (empty state)", *notes]
    if notes:
        return f"No state lost {held}; not held stable: " + "; ".join(notes) + "."
    return f"No state lost {held}: every operator keeps its ID."


def _flink_sections(c: Comparison) -> list[str]:
    out: list[str] = []
    changed_old = {id(o) for o, _ in c.changed}
    changed_new = {id(n) for _, n in c.changed} | {id(a) for _, _, a in c.misplaced}
    if c.misplaced:
        out += [
            "",
            "State restored into the wrong operator (Flink maps state by ID, not by name):",
        ]
        for o, n, a in c.misplaced:
            out += [
                f"  {_q(o.name)}'s state {o.state_id} goes to {_q(n.name)} (node {n.node}),",
                f"    which took over that ID; {_q(a.name)} (node {a.node}) starts empty "
                f"as {a.state_id}",
            ]
    if c.changed:
        out += [
            "",
            "Operators whose ID changed (the state saved under the old ID finds no operator):",
        ]
        out += _columns(
            [
                (_node(o.node, n.node), _q(n.name), f"{o.state_id} -> {n.state_id}", _why(o, n))
                for o, n in c.changed
            ]
        )
    removed = [o for o in c.orphaned if id(o) not in changed_old]
    if removed:
        out += ["", "Operators that are gone (their state has no operator any more):"]
        out += _columns([(_node(o.node), _q(o.name), o.state_id) for o in removed])
    new_only = [n for n in c.added if id(n) not in changed_new]
    if new_only:
        out += ["", "New operators (start with empty state):"]
        out += _columns([(_node(n.node), _q(n.name), n.state_id) for n in new_only])
    if c.orphaned:
        out += [
            "",
            'Restoring a savepoint of the old job fails with "Cannot map checkpoint/savepoint',
            f'state for operator {c.orphaned[0].state_id} to the new program"; with',
            f"--allowNonRestoredState the job starts and the state of "
            f"{_n(len(c.orphaned), 'operator')} is lost.",
        ]
    return out


def _spark_sections(c: Comparison) -> list[str]:
    out: list[str] = []
    if c.state_operator_changes:
        out += ["", "Spark state directories (state/<n> in the checkpoint location):"]
        for s in c.state_operator_changes:
            if s.old is not None and s.new is not None:
                text = (
                    f"was {_stateful(s.old)}, is now {_stateful(s.new)}: "
                    "the wrong operator would read it"
                )
            elif s.old is not None:
                text = f"was {_stateful(s.old)}; no operator reads it any more"
            else:
                text = f"new: {_stateful(s.new)} starts with empty state"  # type: ignore[arg-type]
            out.append(f"  state/{s.state_operator_id}  {text}")
    return out


def _stateful(s: StateOperator) -> str:
    return f"{s.kind} {_q(s.name)}" if s.name and s.name != s.kind else s.kind


def _fixes(c: Comparison, check: Check, accept: str | None) -> list[str]:
    out = ["How to fix:"]
    if c.is_spark and c.loses_state:
        out += [
            "  - keep the stateful operators (aggregations, deduplication, joins, windows) in",
            "    the same order in the query, so that each finds its state/<n> again",
            "  - or run the changed query on a new checkpoint location (its state starts empty)",
        ]
    elif c.loses_state or c.misplaces_state:
        if c.misplaced:
            out.append("  - give the operator its state back and pin the one that took over its ID")
            out += _columns(
                [
                    (f"    {_q(a.name)}", f'.setUidHash("{o.state_id}")', "and")
                    for o, _, a in c.misplaced
                ]
                + [(f"    {_q(n.name)}", '.uid("...")', "") for _, n, _ in c.misplaced]
            )
        if c.changed:
            out.append("  - keep the running job's state: pin each changed operator to its old ID")
            out += _columns([(f"    {_q(n.name)}", _pin(o, n)) for o, n in c.changed])
        changed_old = {id(o) for o, _ in c.changed}
        if any(id(o) not in changed_old for o in c.orphaned) and len(c.added) > len(c.changed):
            out.append(
                '  - if a new operator is a gone one renamed: .setUidHash("<its old ID>") on it'
            )
        unpinned = [o for o in c.orphaned if o.uid is None] + [o for o, _, _ in c.misplaced]
        if unpinned:
            uid = _slug(min((o.name for o in unpinned), key=len))
            out += [
                f'  - pin every stateful operator with .uid("..."), e.g. .uid("{uid}"), so that',
                "    later changes keep its ID (on a running job a new uid changes the ID once:",
                "    keep the setUidHash next to it)",
            ]
    if c.chain_changes and check is not Check.IDS:
        if c.is_spark:
            out += [
                "  - a stage ends at every exchange: look for a groupBy/join/repartition/",
                "    distinct that was added, removed or moved, or a join strategy that changed",
            ]
        else:
            out += [
                "  - chained operators need equal parallelism and slot sharing group, a forward",
                "    edge, and no disableChaining()/startNewChain() between them",
            ]
    if accept:
        out.append(f"  - or, if the change is intended, accept it: {accept}")
    return out


def _why(old: OperatorFingerprint, new: OperatorFingerprint) -> str:
    """The cause of an ID change, where the uids tell it."""
    if old.uid == new.uid or (old.uid is None and new.uid is None):
        return ""
    if new.uid is None:
        return f"(uid {_q(old.uid or '')} removed)"
    if old.uid is None:
        return f"(new uid {_q(new.uid)})"
    return f"(uid {_q(old.uid)} -> {_q(new.uid)})"


def _pin(old: OperatorFingerprint, new: OperatorFingerprint) -> str:
    """The call that gives ``new`` the old operator's state back."""
    if old.uid is not None and old.uid != new.uid and old.user_operator_id is None:
        return f".uid({_q(old.uid)})  (its old uid)"
    return f'.setUidHash("{old.state_id}")'


def _node(old: int, new: int | None = None) -> str:
    return f"node {old}" if new is None or new == old else f"node {old}->{new}"


def _n(count: int, singular: str, plural: str | None = None) -> str:
    return f"{count} {singular if count == 1 else (plural or singular + 's')}"


def _columns(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  " + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip()
        for row in rows
    ]


def _q(name: str) -> str:
    return json.dumps(name, ensure_ascii=False)


def _slug(name: str) -> str:
    slug = re.sub(r"[^0-9a-z]+", "-", name.lower()).strip("-")
    return slug or "my-operator"


# -- opid diff ----------------------------------------------------------------------------------


def cli_diff(args: Any) -> int:
    """``opid diff OLD NEW``: exit 1 when the change would lose state, 0 otherwise.

    ``args`` carries ``old`` and ``new`` (paths of topology documents, Flink plans, saved
    fingerprints or ``.opid`` snapshots), ``format`` (``None`` to detect) and ``json``. Bad input
    raises an :class:`~pytest_opid.errors.OpidError`, which the CLI prints (exit 2).
    """
    old = _load(args.old, args.format)
    new = _load(args.new, args.format)
    comparison = compare(old, new)
    if args.json:
        print(json.dumps(comparison.to_dict(), indent=2))
    else:
        print(render(comparison, Check.IDS, accept=None))
    return 1 if comparison.loses_state else 0


def _load(path: Any, format: str | None) -> Fingerprint:
    from pytest_opid.fingerprint import FORMATS, fingerprint

    if format is not None and format not in FORMATS:
        raise DocumentError(f"--format must be one of {', '.join(FORMATS)}, got {format!r}")
    if str(path) == "-":
        origin, text = "<stdin>", sys.stdin.read()
    else:
        origin, text = str(path), None
        if format is None and _is_snapshot(path):
            text = Path(path).read_text(encoding="utf-8")
    if text is not None and format is None and text.startswith(_SNAPSHOT_PREFIX):
        try:
            from pytest_opid.snapshot import loads
        except ModuleNotFoundError as exc:
            if (exc.name or "").split(".")[0] != "syrupy":
                raise
            raise DocumentError(
                f"{origin}: reading .opid snapshots needs syrupy: pip install 'pytest-opid[pytest]'"
            ) from None
        return loads(text, origin=origin)
    if text is None:
        return fingerprint(path, format=format)
    if not text.strip():
        raise DocumentError(f"{origin}: no input")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DocumentError(
            f"{origin}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    try:
        return fingerprint(data, format=format)
    except OpidError as exc:
        raise type(exc)(f"{origin}: {exc}") from None


def _is_snapshot(path: Any) -> bool:
    """An ``.opid`` snapshot, told apart by its first line (without importing syrupy)."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.readline().startswith(_SNAPSHOT_PREFIX)
    except (OSError, UnicodeDecodeError, TypeError):
        return False  # fingerprint() reports the problem with the file


#: The start of :data:`pytest_opid.snapshot.HEADER`.
_SNAPSHOT_PREFIX = "# pytest-opid topology snapshot"
