"""What changed in a Spark batch job's stages, read from what a snapshot holds.

A snapshot records each stage (job vertex) with its name, parallelism and operators, but no
edges and no exchanges. Operator IDs are shapes: one filter removed upstream moves them all, so
pairing stages by ID invents splits and merges that never happened. Here a stage is known by
its boundaries instead: the tables it scans and the operator it ends in (where an exchange or
the result follows). Old and new stages pair, in order, first by their whole name, then by
their operators less the row-wise ones (``Filter``, ``Project``: they never start or end a
stage), then by what they scan and end in, then by what they scan. A stage left without a
counterpart was added or removed; a paired stage whose exchange-relevant operators differ
changed. A join whose kind changed while the number of joins stayed is a join strategy change.
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pytest_opid.comparison import align
from pytest_opid.result import Fingerprint, JobVertex
from pytest_opid.text import plural, quote

#: Operators that work row by row inside a stage: adding or removing one moves operator IDs but
#: no exchange, so it never makes or removes a stage.
ROW_WISE = frozenset({"Filter", "Project", "ColumnarToRow", "RowToColumnar", "InputAdapter"})


@dataclass(frozen=True)
class StageChange:
    """One stage ``added`` (``old`` is ``None``), ``removed`` (``new`` is ``None``) or
    ``changed`` (both set: the same stage, by what it scans or ends in, with other operators)."""

    kind: str  # "added" | "removed" | "changed"
    old: JobVertex | None
    new: JobVertex | None
    #: ``changed``: the exchange-relevant operators that came (``+``) and went (``-``)
    gained: tuple[str, ...] = ()
    lost: tuple[str, ...] = ()

    def describe(self) -> str:
        """One line, Spark's stage names quoted and escaped."""
        if self.old is None:
            assert self.new is not None
            return f"added: {quote(self.new.name)}"
        if self.new is None:
            return f"removed: {quote(self.old.name)}"
        return f"changed: {quote(self.old.name)} is now {quote(self.new.name)} ({self.what()})"

    def what(self) -> str:
        """``BroadcastHashJoin added, HashAggregate removed``."""
        parts = [f"{name} added" for name in self.gained]
        parts += [f"{name} removed" for name in self.lost]
        return ", ".join(parts) or "other operators"


@dataclass(frozen=True)
class StageDiff:
    """The stage-level difference of two batch fingerprints of one job."""

    changes: tuple[StageChange, ...]
    #: pairs of stages that differ only in row-wise operators (the same stage to Spark)
    inside: tuple[tuple[JobVertex, JobVertex], ...]
    #: ``(old join, new join)``: a join strategy that changed, the number of joins the same
    strategies: tuple[tuple[str, str], ...]

    def __bool__(self) -> bool:
        return bool(self.changes or self.strategies)

    def of_kind(self, kind: str) -> tuple[StageChange, ...]:
        return tuple(c for c in self.changes if c.kind == kind)

    def problems(self) -> list[str]:
        """What changed, for a verdict's headline: join strategies, then stages by kind."""
        out = [f"a join strategy changed ({o} -> {n})" for o, n in self.strategies]
        for kind in ("added", "removed"):
            found = self.of_kind(kind)
            if found:
                vertices = [c.new if kind == "added" else c.old for c in found]
                names = ", ".join(quote(v.name) for v in vertices[:3] if v is not None)
                more = ", ..." if len(found) > 3 else ""
                out.append(f"{plural(len(found), 'stage')} {kind} ({names}{more})")
        changed = self.of_kind("changed")
        if changed:
            what = "; ".join(c.what() for c in changed[:3])
            more = "; ..." if len(changed) > 3 else ""
            out.append(f"{plural(len(changed), 'stage')} changed ({what}{more})")
        return out


def stage_diff(old: Fingerprint, new: Fingerprint) -> StageDiff:
    """Pair ``old``'s stages with ``new``'s by what they are, not by operator IDs."""
    old_ops, new_ops = _operators(old), _operators(new)
    olds, news = list(old.job_vertices), list(new.job_vertices)
    pairs: list[tuple[int, int]] = []
    keys: list[Callable[[JobVertex, dict[str, tuple[str, ...]]], str]] = [
        lambda v, ops: v.name,
        lambda v, ops: repr(_skeleton(ops.get(v.id, ()))),
        lambda v, ops: repr((_scans(ops.get(v.id, ())), _end(v))),
        lambda v, ops: repr(_scans(ops.get(v.id, ()))) if _scans(ops.get(v.id, ())) else "",
    ]
    free_old, free_new = list(range(len(olds))), list(range(len(news)))
    for key in keys:
        old_keys = [key(olds[i], old_ops) for i in free_old]
        new_keys = [key(news[j], new_ops) for j in free_new]
        found = [(free_old[i], free_new[j]) for i, j in align(old_keys, new_keys) if old_keys[i]]
        pairs += found
        taken_old = {i for i, _ in found}
        taken_new = {j for _, j in found}
        free_old = [i for i in free_old if i not in taken_old]
        free_new = [j for j in free_new if j not in taken_new]
    changes: list[StageChange] = []
    inside: list[tuple[JobVertex, JobVertex]] = []
    for i, j in sorted(pairs):
        o, n = olds[i], news[j]
        if o.name == n.name:
            continue
        before = Counter(_skeleton(old_ops.get(o.id, ())))
        after = Counter(_skeleton(new_ops.get(n.id, ())))
        if before == after:
            inside.append((o, n))
        else:
            gained = tuple(sorted((after - before).elements()))
            lost = tuple(sorted((before - after).elements()))
            changes.append(StageChange("changed", o, n, gained, lost))
    changes += [StageChange("removed", olds[i], None) for i in free_old]
    changes += [StageChange("added", None, news[j]) for j in free_new]
    return StageDiff(tuple(changes), tuple(inside), _strategies(old_ops, new_ops))


def _operators(fp: Fingerprint) -> dict[str, tuple[str, ...]]:
    """Each stage's operator names, in the fingerprint's order, by stage ID."""
    found: dict[str, list[str]] = defaultdict(list)
    for op in fp.operators:
        if op.job_vertex is not None:
            found[op.job_vertex].append(op.name)
    return {k: tuple(v) for k, v in found.items()}


def _skeleton(names: Sequence[str]) -> tuple[str, ...]:
    """The operators that matter to the stage boundaries, sorted."""
    return tuple(sorted(n for n in names if n not in ROW_WISE))


def _scans(names: Sequence[str]) -> tuple[str, ...]:
    """What the stage reads from storage (``FileScan parquet``, ``Scan ...``, ``Range``)."""
    return tuple(sorted(n for n in names if "Scan" in n or n == "Range"))


def _end(vertex: JobVertex) -> str:
    """The operator the stage ends in: the last one its name lists."""
    return vertex.name.rsplit(" -> ", 1)[-1]


def _joins(ops: dict[str, tuple[str, ...]]) -> Counter[str]:
    return Counter(n for names in ops.values() for n in names if n.endswith("Join"))


def _strategies(
    old: dict[str, tuple[str, ...]], new: dict[str, tuple[str, ...]]
) -> tuple[tuple[str, str], ...]:
    """Joins whose kind changed while their number stayed, paired in name order."""
    before, after = _joins(old), _joins(new)
    if before == after or before.total() != after.total():
        return ()
    went = sorted((before - after).elements())
    came = sorted((after - before).elements())
    return tuple(zip(went, came, strict=True))


#: Plan operators that work row by row: what their lines say (a filter's columns, a
#: projection's expressions, the Python UDFs a projection calls, a mapInPandas function)
#: changes no stage, exchange, join or aggregate.
ROW_WISE_LINES = frozenset(
    {"Filter", "Project", "ArrowEvalPython", "BatchEvalPython", "MapInPandas", "MapInArrow"}
)


@dataclass(frozen=True)
class PlanChange:
    """One line of the plan tree (:mod:`pytest_opid.spark.query.plan_tree`) that ``changed``
    (both set: the same operator, saying something else), was ``added`` (``old`` is ``None``) or
    ``removed``. Lines are compared without their indentation."""

    old: str | None
    new: str | None

    @property
    def kind(self) -> str:
        return "added" if self.old is None else "removed" if self.new is None else "changed"

    @property
    def operator(self) -> str:
        return _operator(self.new if self.old is None else self.old)

    @property
    def structural(self) -> bool:
        """Whether the change reaches beyond row-wise work: a table, an exchange or its keys,
        a join, an aggregate, a sort, a subquery. A scan reading other columns of the same
        table is row-wise too."""
        if self.operator in ROW_WISE_LINES:
            return False
        if self.operator == "Scan" and self.old is not None and self.new is not None:
            return _scanned(self.old) != _scanned(self.new)
        return True

    def describe(self) -> str:
        """``Exchange changed: hashpartitioning [a] -> hashpartitioning [a, b]``."""
        if self.old is None:
            assert self.new is not None
            return f"{self.operator} added: {_rest(self.new)}".rstrip(": ")
        if self.new is None:
            return f"{self.operator} removed: {_rest(self.old)}".rstrip(": ")
        return f"{self.operator} changed: {_rest(self.old)} -> {_rest(self.new)}"


@dataclass(frozen=True)
class PlanDiff:
    """The lines of two plan trees that differ; empty where either fingerprint has none."""

    changes: tuple[PlanChange, ...] = ()

    @property
    def structural(self) -> tuple[PlanChange, ...]:
        return tuple(c for c in self.changes if c.structural)

    @property
    def row_wise(self) -> tuple[PlanChange, ...]:
        return tuple(c for c in self.changes if not c.structural)

    def problems(self, tables_only: bool = False) -> list[str]:
        """For a verdict's headline: the first structural changes, one each, what a reviewer
        needs first leading (tables read, subqueries, exchanges, joins, aggregates, the rest).
        ``tables_only``: only tables and subqueries (the stages already say the rest)."""
        found = sorted(self.structural, key=lambda c: _rank(c.operator))
        if tables_only:
            found = [c for c in found if _rank(c.operator) < 2]
        out = [c.describe() for c in found[:3]]
        if len(found) > 3:
            out.append(plural(len(found) - 3, "more plan change"))
        return out


def plan_diff(old: Fingerprint, new: Fingerprint) -> PlanDiff:
    """The plan lines that differ: equal lines pair first (:func:`align`, indentation
    ignored), then the rest by operator, in order; what is left was added or removed."""
    if old.plan is None or new.plan is None or old.plan == new.plan:
        return PlanDiff()
    before = [line.lstrip(" ") for line in old.plan]
    after = [line.lstrip(" ") for line in new.plan]
    pairs = align(before, after)
    taken_old = {i for i, _ in pairs}
    taken_new = {j for _, j in pairs}
    left: dict[str, deque[int]] = defaultdict(deque)  # unpaired old lines by operator
    for i, line in enumerate(before):
        if i not in taken_old:
            left[_operator(line)].append(i)
    changes: list[PlanChange] = []
    for j, line in enumerate(after):
        if j not in taken_new:
            waiting = left.get(_operator(line))
            old_line = before[waiting.popleft()] if waiting else None
            changes.append(PlanChange(old_line, line))
    gone = sorted(i for waiting in left.values() for i in waiting)
    changes += [PlanChange(before[i], None) for i in gone]
    return PlanDiff(tuple(changes))


def _rank(operator: str) -> int:
    """How early a changed plan line is named: tables, subqueries, exchanges, joins,
    aggregates, the rest."""
    if operator == "Scan":
        return 0
    if operator.endswith(("Subquery", "SubqueryBroadcast")):
        return 1
    if operator.endswith("Exchange"):
        return 2
    if operator.endswith("Join") or operator == "CartesianProduct":
        return 3
    if operator.endswith("Aggregate"):
        return 4
    return 5


def _operator(line: str | None) -> str:
    return (line or "").split(" ", 1)[0]


def _rest(line: str) -> str:
    return line.split(" ", 1)[1] if " " in line else ""


def _scanned(line: str) -> str:
    """What a scan line reads, less the columns: its format and table."""
    return line.rsplit(" [", 1)[0] if line.endswith("]") else line
