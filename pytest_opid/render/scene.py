"""What a picture shows, before any format draws it: nodes, boxes, edges, notes, a legend.

A :class:`Scene` is built from a fingerprint (:func:`topology_scene`) or a comparison
(:func:`diff_scene`) in the engine's own words (a Flink picture speaks of job vertices and
savepoints, a Spark picture of stages and ``state/<n>``, never of savepoints or uids), then
folded to stay readable (:func:`fold`): a diff's neighbourhood, unchanged chains as one box,
a cap on the nodes drawn, each fold said in a note. Every text in a scene is already
printable (:func:`pytest_opid.text.printable`: control characters, line separators and bidi
overrides escaped); each format still escapes it for its own syntax.
"""

from __future__ import annotations

import itertools
import textwrap
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from pytest_opid.comparison import Comparison
from pytest_opid.engine_rules import Check
from pytest_opid.render.explain import render as explain
from pytest_opid.result import UNKNOWN, Fingerprint, JobVertex, OperatorFingerprint
from pytest_opid.text import plural, printable

__all__ = [
    "DIFF_STATUSES",
    "Scene",
    "SceneEdge",
    "SceneGroup",
    "SceneNode",
    "diff_scene",
    "fold",
    "topology_scene",
]

#: What a diff says of an operator, in the order the legend lists them.
DIFF_STATUSES = ("unchanged", "changed", "lost", "misplaced", "new", "removed")
#: Longest name drawn in a node; the whole name is in the node's tooltip.
NAME_LIMIT = 44
#: Default cap on the nodes of one picture, and sizes from which a picture folds by itself.
MAX_NODES = 500
AUTO_FOCUS = 120  # a diff with more nodes shows the neighbourhood of its changes
AUTO_COLLAPSE = 80  # a diff with more nodes draws unchanged chains as one box
DEFAULT_HOPS = 2


@dataclass(frozen=True)
class SceneNode:
    """One box: an operator (``operator`` is its node id; for a removed one, in the old
    fingerprint), a folded chain or an elision. ``lines`` are drawn, ``title`` is the
    tooltip."""

    lines: tuple[str, ...]
    title: str
    status: str = "plain"  # plain | one of DIFF_STATUSES | folded | more
    stateful: bool = False
    group: int | None = None
    operator: int | None = None


@dataclass(frozen=True)
class SceneGroup:
    """A chain (Flink job vertex, Spark stage) drawn as a box around its members."""

    label: str
    title: str
    status: str = "chain"  # chain | split | merged | added | changed | removed


@dataclass(frozen=True)
class SceneEdge:
    source: int
    target: int
    label: str = ""
    kind: str = ""  # "" | ghost (an edge of the old job, to or from a removed operator) | fold
    hidden: bool = False  # only orders a chain drawn without its edges


@dataclass
class Scene:
    title: str
    engine: str
    nodes: list[SceneNode]
    groups: list[SceneGroup]
    edges: list[SceneEdge]
    notes: list[str] = field(default_factory=list)
    legend: list[tuple[str, str]] = field(default_factory=list)
    explanation: str | None = None
    chain_word: str = "chain"
    diff: bool = False


def _short(text: str, limit: int = NAME_LIMIT) -> str:
    text = printable(text)
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _words(engine: str) -> tuple[str, str]:
    """The engine's name for a chain, and for its parallelism."""
    if engine == "spark":
        return "stage", "partitions"
    return "job vertex", "parallelism"


def _parallelism(engine: str, value: int) -> str:
    if engine == "spark":
        return f"{value} partitions" if value > 0 else "partitions: at run time"
    return f"p={value}" if value > 0 else "p=default"


# -- a topology -----------------------------------------------------------------------------


def topology_scene(fp: Fingerprint, title: str | None = None) -> Scene:
    """Every operator of ``fp`` in its chain, with its edges where the fingerprint has them."""
    engine = fp.engine
    chain, _ = _words(engine)
    states = _state_lines(fp)
    meanings = _meaning_lines(fp)
    groups, group_of = _groups(fp.job_vertices, chain)
    nodes = [
        SceneNode(
            lines=_operator_lines(engine, op, states.get(op.operator_id))
            + meanings.get(op.operator_id, ()),
            title=_operator_title(engine, op, fp, states.get(op.operator_id)),
            stateful=op.operator_id in states or op.stateful is True,
            group=group_of.get(op.job_vertex),
            operator=op.node,
        )
        for op in fp.operators
    ]
    edges, notes = _edges(fp, {op.node: i for i, op in enumerate(fp.operators)}, nodes)
    kind = f"{engine.capitalize()} " if engine else ""
    chains = plural(len(fp.job_vertices), chain, "job vertices" if chain == "job vertex" else None)
    heading = title or (f"{kind}{fp.mode} job: {plural(len(fp.operators), 'operator')} in {chains}")
    return Scene(
        title=printable(heading),
        engine=engine,
        nodes=nodes,
        groups=groups,
        edges=edges,
        notes=notes,
        legend=_topology_legend(engine, fp),
        chain_word=chain,
    )


def _groups(
    vertices: Sequence[JobVertex], chain: str
) -> tuple[list[SceneGroup], dict[str | None, int]]:
    groups: list[SceneGroup] = []
    group_of: dict[str | None, int] = {}
    engine_spark = chain == "stage"
    for number, v in enumerate(vertices, 1):
        group_of[v.id] = len(groups)
        count = len(v.operators)
        par = (
            (f"{v.parallelism} partitions" if v.parallelism > 0 else "")
            if engine_spark
            else (f"p={v.parallelism}" if v.parallelism > 0 else "p=default")
        )
        label = f"{chain} {number} \u00b7 {v.id[:8]}" + (f" \u00b7 {par}" if par else "")
        groups.append(
            SceneGroup(
                label=label,
                title=f"{chain} {number}: {printable(v.name)} (id {v.id}, "
                f"{plural(count, 'operator')}{', ' + par if par else ''})",
            )
        )
    return groups, group_of


def _state_lines(fp: Fingerprint) -> dict[str, str]:
    """Numbered state by operator ID: ``state/<n> kind``."""
    out: dict[str, str] = {}
    for s in fp.state_operators or ():
        text = f"state/{s.state_operator_id} {printable(s.kind)}"
        out[s.operator_id] = f"{out[s.operator_id]}, {text}" if s.operator_id in out else text
    return out


#: The longest line of what a state means on a stateful operator's box.
MEANING_LIMIT = 52
#: Lines of what a state means on one box; the tooltip has them all.
MEANING_LINES = 6


def _meaning_lines(
    fp: Fingerprint, before: Fingerprint | None = None
) -> dict[str, tuple[str, ...]]:
    """What each stateful operator's state means (its keys, window, aggregates), a few short
    lines by operator ID, from the fingerprint's state meaning: a reviewer sees on the box
    what the state holds, not only where it is. ``before``: the old job, whose state/<n> of
    the same number says which keys and aggregates are new (``+``) or gone (``-``)."""
    old = {s.state_operator_id: s.meaning for s in (before.state_operators or ())} if before else {}
    out: dict[str, tuple[str, ...]] = {}
    for s in fp.state_operators or ():
        if s.meaning:
            lines = meaning_lines(s.meaning, old.get(s.state_operator_id))
            out[s.operator_id] = out.get(s.operator_id, ()) + lines
    return out


def meaning_lines(
    meaning: Sequence[tuple[str, str]], before: Sequence[tuple[str, str]] | None = None
) -> tuple[str, ...]:
    """``keys: window(event_time, 5 minutes), page`` and ``aggregates: count(1), ...``: the
    numbered facts of one kind on one line, their types left out; other facts as they are,
    unknown ones (``?``) left out. Against ``before`` (the old meaning of this state/<n>), a
    key or aggregate it did not have is marked ``+``, one it had and this lacks ``-``. Long
    lines wrap; at most :data:`MEANING_LINES` lines in all."""
    now = _meaning_items(meaning)
    then = _meaning_items(before) if before else None
    lines = []
    for kind, items in now.items():
        if kind in ("key", "aggregate"):
            shown = list(items)
            if then is not None:
                old = then.get(kind, [])
                shown = [item if item in old else f"+{item}" for item in items]
                shown += [f"-{item}" for item in old if item not in items]
            word = kind if len(shown) == 1 else f"{kind}s"
            lines.append(f"{word}: {', '.join(shown)}")
        else:
            lines += (f"{kind}: {item}" for item in items)
    wrapped = [
        part
        for line in lines
        for part in textwrap.wrap(line, MEANING_LIMIT, subsequent_indent="\u00a0\u00a0") or [""]
    ]
    if len(wrapped) > MEANING_LINES:
        more = len(wrapped) - MEANING_LINES + 1
        wrapped = [*wrapped[: MEANING_LINES - 1], f"(+{more} more lines in the tooltip)"]
    return tuple(printable(line) for line in wrapped)


def _meaning_items(meaning: Sequence[tuple[str, str]]) -> dict[str, list[str]]:
    """Facts by kind: ``key 1``, ``key 2`` as ``key``; ``aggregate n`` as ``aggregate``;
    other facts under their own name. Unknown values are left out."""
    items: dict[str, list[str]] = {"key": [], "aggregate": []}
    for fact, value in meaning:
        if value == UNKNOWN:
            continue
        kind, _, number = fact.rpartition(" ")
        if number.isdigit() and kind in ("key", "aggregate"):
            items[kind].append(_untyped(value))
        else:
            items.setdefault(fact, []).append(value)
    return {kind: found for kind, found in items.items() if found}


def _untyped(value: str) -> str:
    """``page: string`` -> ``page``: the type is in the snapshot's schemas."""
    head, sep, _ = value.partition(": ")
    return head if sep else value


def _operator_lines(engine: str, op: OperatorFingerprint, state: str | None) -> tuple[str, ...]:
    lines = [_short(op.name), f"{op.operator_id[:8]} \u00b7 {_parallelism(engine, op.parallelism)}"]
    if engine != "spark":
        if op.uid is not None:
            lines.append(_short(f"uid {printable(op.uid)}", NAME_LIMIT))
        if op.user_operator_id is not None:
            lines.append(f"uid hash {op.user_operator_id[:8]}")
    if state is not None:
        lines.append(_short(state))
    elif op.stateful is True:
        lines.append("stateful")
    return tuple(lines)


def _operator_title(
    engine: str, op: OperatorFingerprint, fp: Fingerprint, state: str | None
) -> str:
    parts = [printable(op.name), f"operator ID {op.operator_id}", f"node {op.node}"]
    if engine != "spark":
        if op.uid is not None:
            parts.append(f"uid {printable(op.uid)}")
        if op.user_operator_id is not None:
            parts.append(f"user-defined ID {op.user_operator_id}")
    parts.append(_parallelism(engine, op.parallelism))
    if state is not None:
        parts.append(state)
        for s in fp.state_operators or ():
            if s.operator_id == op.operator_id:
                parts += (printable(f"{fact}: {value}") for fact, value in s.meaning)
    elif op.stateful is True:
        parts.append("stateful")
    return "\n".join(parts)


def _edges(
    fp: Fingerprint, index: dict[int, int], nodes: Sequence[SceneNode]
) -> tuple[list[SceneEdge], list[str]]:
    if fp.edges is not None:
        return [
            SceneEdge(index[s], index[t], printable(label))
            for s, t, label in fp.edges
            if s in index and t in index
        ], []
    # Without edges (a snapshot records none): each chain's members stacked in node order.
    members: dict[int | None, list[int]] = {}
    for i, node in enumerate(nodes):
        members.setdefault(node.group, []).append(i)
    hidden = []
    for group, ms in members.items():
        if group is None:
            continue
        ms.sort(key=lambda i: nodes[i].operator or 0)
        hidden += [SceneEdge(a, b, hidden=True) for a, b in itertools.pairwise(ms)]
    note = (
        "no edges: this fingerprint was read without them (a snapshot records none), so its "
        "chains are drawn without their connections"
    )
    return hidden, [note]


def _topology_legend(engine: str, fp: Fingerprint) -> list[tuple[str, str]]:
    if engine == "spark":
        items = [
            ("chain", "box: a stage (operators pipelined in one task; an exchange ends it)"),
            ("plain", "operator: name, operator ID (first 8 hex digits), partitions"),
            ("edge", "arrow label: the exchange between stages"),
        ]
        if fp.state_operators:
            items.append(("stateful", "state/<n>: the checkpoint directory of its state"))
        return items
    items = [
        ("chain", "box: a job vertex (operators chained into one task)"),
        ("plain", "operator: name, OperatorID (first 8 hex digits), parallelism, uid"),
        ("edge", "arrow label: the partitioner"),
    ]
    if any(op.stateful for op in fp.operators):
        items.append(("stateful", "stateful operator"))
    return items


# -- a comparison ---------------------------------------------------------------------------


def diff_scene(comparison: Comparison, check: Check | str | None = None) -> Scene:
    """The new topology with what the change does to every operator's state, removed
    operators as ghosts (placed by the old job's edges where it has them), and a legend."""
    c = comparison
    new, old = c.new, c.old
    engine = c.engine
    chain, _ = _words(engine)
    check = Check.default_for(new) if check is None else Check.parse(check)
    states = _state_lines(new)
    groups, group_of = _groups(new.job_vertices, chain)
    for change in c.real_chain_changes:
        before = " + ".join(printable(v.name) for v in change.old)
        for v in change.new:
            g = group_of.get(v.id)
            if g is not None:
                groups[g] = replace(
                    groups[g],
                    label=f"{groups[g].label} \u00b7 {change.kind}",
                    title=f"{groups[g].title}\n{change.kind}: was {before}",
                    status=change.kind,
                )
    _mark_stage_changes(c, groups, group_of)
    status: dict[int, tuple[str, str, str]] = {}  # id(new op) -> (status, line, tooltip)
    counterpart: dict[int, int] = {}  # id(old op) -> index of the new operator drawn for it
    index_new = {id(op): i for i, op in enumerate(new.operators)}
    spark = engine == "spark"
    for o, n in c.kept:
        counterpart[id(o)] = index_new[id(n)]
        if o.name != n.name:
            status[id(n)] = ("unchanged", _short(f"renamed from {printable(o.name)}"), "")
    # A new ID that harms no state is drawn as unchanged, its box quiet (the tooltip and one
    # note say it): a filter added upstream gives every Spark operator below it a new ID, and
    # ten yellow boxes would drown the one whose state breaks.
    quiet = 0
    for o, n in c.changed:
        counterpart[id(o)] = index_new[id(n)]
        was = f" (was {printable(o.name)})" if o.name != n.name else ""
        if spark:
            quiet += 1
            status[id(n)] = (
                "unchanged",
                "",
                f"operator ID {o.operator_id} -> {n.operator_id}{was}: harmless on its own, "
                "Spark finds state by state/<n>, not by ID",
            )
        elif o.stateful is False:
            quiet += 1
            status[id(n)] = (
                "unchanged",
                "",
                f"ID {o.state_id} -> {n.state_id}; stateless, nothing to restore",
            )
        else:
            status[id(n)] = (
                "lost",
                f"STATE LOST: ID was {o.state_id[:8]}",
                f"the savepoint's state of {printable(o.name)} under its old ID {o.state_id} "
                f"finds no operator (the ID is now {n.state_id})",
            )
    if not spark:
        for o, n, a in c.misplaced:
            counterpart[id(o)] = index_new[id(a)]
            status[id(n)] = (
                "misplaced",
                _short(f"WRONG STATE: gets {printable(o.name)}'s"),
                f"restores the state of the old {printable(o.name)} ({o.state_id}): this "
                "operator took over its ID, and Flink maps state by ID, not by name",
            )
            status[id(a)] = (
                "lost",
                _short(f"STATE LOST: goes to {printable(n.name)}"),
                f"its state ({o.state_id}) is restored into {printable(n.name)} instead; it "
                f"starts empty under {a.state_id}",
            )
    for n in c.added:
        if id(n) not in status:
            status[id(n)] = ("new", "NEW: empty state" if not spark else "NEW", "new operator")
    orphan_changed = {id(o) for o, _ in c.changed}
    removed = [o for o in c.orphaned if id(o) not in orphan_changed]
    if not spark and c.misplaced:
        # An operator that took over another's ID lost its own: its old self is no ghost.
        receivers: dict[str, list[OperatorFingerprint]] = {}
        for _, n, _ in c.misplaced:
            receivers.setdefault(n.name, []).append(n)
        ghosts = []
        for o in removed:
            waiting = receivers.get(o.name)
            if not waiting:
                ghosts.append(o)
                continue
            n = waiting.pop(0)
            counterpart[id(o)] = index_new[id(n)]
            state, line, tip = status[id(n)]
            status[id(n)] = (
                state,
                line,
                f"{tip}; its own old state ({o.state_id}) finds no operator",
            )
        removed = ghosts
    ghost_line: dict[int, tuple[str, str]] = {}
    for o in removed:
        if spark:
            ghost_line[id(o)] = ("REMOVED", "removed operator")
        elif o.stateful is False:
            ghost_line[id(o)] = ("REMOVED (stateless)", "removed; it kept no state")
        else:
            ghost_line[id(o)] = (
                "REMOVED: state lost",
                f"removed: its state in the savepoint ({o.state_id}) finds no operator",
            )
    # Spark: what happens to each state/<n> decides the stateful operators' fate.
    extra_line: dict[int, str] = {}
    if spark:
        by_id_new = {op.operator_id: op for op in new.operators}
        by_id_old = {op.operator_id: op for op in old.operators}
        for s in c.state_operator_changes:
            number = s.state_operator_id
            if s.old is not None and s.new is not None:
                reader = by_id_new.get(s.new.operator_id)
                if reader is not None:
                    status[id(reader)] = (
                        "misplaced",
                        f"WRONG STATE: state/{number}",
                        f"reads state/{number}, which {printable(s.old.kind)} "
                        f"{printable(s.old.name)} wrote",
                    )
            elif s.old is not None:
                gone = by_id_old.get(s.old.operator_id)
                if gone is None:
                    continue
                if id(gone) in ghost_line:
                    ghost_line[id(gone)] = (
                        f"REMOVED: state/{number} unread",
                        f"removed: no operator reads its state/{number} any more",
                    )
                elif id(gone) in counterpart:
                    kept_op = new.operators[counterpart[id(gone)]]
                    status[id(kept_op)] = (
                        "lost",
                        f"STATE LOST: state/{number}",
                        f"no operator reads state/{number} ({printable(s.old.kind)} "
                        f"{printable(s.old.name)}) any more",
                    )
            elif s.new is not None:
                starter = by_id_new.get(s.new.operator_id)
                if starter is not None:
                    extra_line[id(starter)] = f"state/{number} starts empty"
        if c.mode == "streaming":
            _mark_state_findings(c, by_id_new, status)
    nodes = []
    meanings = _meaning_lines(new, old if c.mode == "streaming" else None)
    for op in new.operators:
        state, line, tip = status.get(id(op), ("unchanged", "", ""))
        lines = _operator_lines(engine, op, states.get(op.operator_id))
        title = _operator_title(engine, op, new, states.get(op.operator_id))
        if line and state in _ALARMS:
            lines = (lines[0], line, *lines[1:])  # what breaks leads, under the name
        elif line:
            lines += (line,)
        lines += meanings.get(op.operator_id, ())
        if id(op) in extra_line:
            lines += (extra_line[id(op)],)
            tip = f"{tip}; {extra_line[id(op)]}" if tip else extra_line[id(op)]
        nodes.append(
            SceneNode(
                lines=lines,
                title=f"{title}\n{state}: {tip}" if tip else f"{title}\n{state}",
                status=state,
                stateful=op.operator_id in states or op.stateful is True,
                group=group_of.get(op.job_vertex),
                operator=op.node,
            )
        )
    index = {op.node: i for i, op in enumerate(new.operators)}
    edges, notes = _edges(new, index, nodes)
    if quiet:
        why = (
            "harmless, Spark finds state by state/<n>, not by ID"
            if spark
            else "stateless, nothing to restore"
        )
        notes.insert(0, f"{plural(quiet, 'operator')} with a new ID drawn as unchanged: {why}")
    # Ghosts: removed operators, wired by the old job's edges to what they became.
    old_states = _state_lines(old)
    ghost_of: dict[int, int] = {}
    ghost_group: int | None = None
    if removed and old.edges is None:
        ghost_group = len(groups)
        groups.append(
            SceneGroup("removed operators", "operators of the old job that are gone", "removed")
        )
    for o in removed:
        ghost_of[id(o)] = len(nodes)
        line, tip = ghost_line[id(o)]
        lines = (*_operator_lines(engine, o, old_states.get(o.operator_id))[:2], line)
        nodes.append(
            SceneNode(
                lines=lines,
                title=f"{_operator_title(engine, o, old, old_states.get(o.operator_id))}\n{tip}",
                status="removed",
                stateful=o.operator_id in old_states or o.stateful is True,
                group=ghost_group,
                operator=o.node,
            )
        )
    if removed and old.edges is not None:
        drawn = {id(op): counterpart.get(id(op), ghost_of.get(id(op))) for op in old.operators}
        by_node = {op.node: drawn[id(op)] for op in old.operators}
        ghost_nodes = set(ghost_of.values())
        seen = {(e.source, e.target) for e in edges}
        for src, dst, label in old.edges:
            tail, head = by_node.get(src), by_node.get(dst)
            if tail is None or head is None or tail == head:
                continue
            if tail not in ghost_nodes and head not in ghost_nodes:
                continue
            if (tail, head) not in seen:
                seen.add((tail, head))
                edges.append(SceneEdge(tail, head, printable(label), kind="ghost"))
    elif removed:
        notes.append("the old job's edges are not known: removed operators are drawn apart")
    verdict = explain(c, check, accept=None)
    return Scene(
        title=printable(verdict.splitlines()[0]) if verdict else "",
        engine=engine,
        nodes=nodes,
        groups=groups,
        edges=edges,
        notes=notes,
        legend=_diff_legend(engine, c.mode),
        explanation=verdict,
        chain_word=chain,
        diff=True,
    )


#: Statuses that say the state breaks: drawn first on the box, and strongest.
_ALARMS = ("lost", "misplaced")


def _mark_stage_changes(
    c: Comparison, groups: list[SceneGroup], group_of: dict[str | None, int]
) -> None:
    """Chains the engine itself compared (its ``stage_changes``, :attr:`Comparison.
    engine_changes`; a Spark batch job's stages, known by what they scan and end in): an
    added one, and one that holds other operators, marked so. A removed one has no box."""
    for change in c.engine_changes.get("stage_changes", ()):
        kind, vertex, was = change.get("kind"), change.get("new"), change.get("old")
        g = group_of.get(vertex.get("id")) if isinstance(vertex, dict) else None
        if g is None or kind not in ("added", "changed"):
            continue
        what = [f"{name} added" for name in change.get("gained", ())]
        what += [f"{name} removed" for name in change.get("lost", ())]
        if kind == "added":
            note = "added: a stage the old job did not have"
        else:
            before = printable(was.get("name", "")) if isinstance(was, dict) else ""
            note = f"changed: was {before}" + (f" ({printable(', '.join(what))})" if what else "")
        groups[g] = replace(
            groups[g],
            label=f"{groups[g].label} \u00b7 {kind}",
            title=f"{groups[g].title}\n{note}",
            status=kind,
        )


#: A restore finding's kind (spark.restart), as an operator's line says it.
_FINDING_WORDS = {
    "key_schema": "key schema changed",
    "value_schema": "value schema changed",
    "state_config": "state settings changed",
}


def _mark_state_findings(
    c: Comparison,
    by_id: dict[str, OperatorFingerprint],
    status: dict[int, tuple[str, str, str]],
) -> None:
    """Spark: a stateful operator whose own state/<n> Spark would refuse to read (its key or
    value schema, its settings) is drawn as losing it; one that would read it under another
    meaning (a reinterpreted restart), as getting the wrong state. Operators already marked by
    their position (another operator's state/<n>, none) keep that mark."""
    numbered = {str(s.state_operator_id): s for s in c.new.state_operators or ()}
    for state, items in (("lost", c.restore.problems), ("misplaced", c.restore.reinterpreted)):
        for item in items:
            stateful = numbered.get(item.state_id or "")
            op = by_id.get(stateful.operator_id) if stateful is not None else None
            if op is None or status.get(id(op), ("unchanged",))[0] in ("lost", "misplaced"):
                continue
            words = _FINDING_WORDS.get(item.kind, item.kind.replace("_", " "))
            head = "CANNOT RESTART" if state == "lost" else "WRONG STATE"
            first = item.message.split("\n", 1)[0]
            status[id(op)] = (
                state,
                _short(f"{head}: state/{item.state_id} {words}"),
                printable(first if len(first) <= 400 else first[:399] + "\u2026"),
            )


def _diff_legend(engine: str, mode: str) -> list[tuple[str, str]]:
    if engine == "spark":
        if mode == "batch":
            return [
                ("new", "new operator"),
                ("removed", "removed operator (dashed)"),
                ("unchanged", "unchanged, or only its ID changed (a batch job keeps no state)"),
                ("chain", "box: a stage; marked added or changed where that changed"),
            ]
        return [
            (
                "lost",
                "state lost: no operator reads its state/<n> any more, or Spark refuses it "
                "(its key or value schema changed)",
            ),
            (
                "misplaced",
                "wrong state: reads a state/<n> another operator wrote, or one written under "
                "another definition",
            ),
            ("new", "new operator (a new state/<n> starts empty)"),
            ("removed", "removed operator (dashed)"),
            (
                "unchanged",
                "unchanged, or only its operator ID changed: harmless, state is found by state/<n>",
            ),
            ("chain", "box: a stage; marked split or merged where that changed"),
        ]
    return [
        ("lost", "state lost: the savepoint's state under its old ID finds no operator"),
        ("misplaced", "wrong state: restores the state of another operator"),
        ("new", "new: starts with empty state"),
        ("removed", "removed (dashed): its state finds no operator"),
        ("unchanged", "unchanged: restores its own state (or stateless, only its ID changed)"),
        ("chain", "box: a job vertex; marked split or merged where that changed"),
    ]


# -- folding ----------------------------------------------------------------------------------


def fold(
    scene: Scene,
    *,
    hops: int | None = None,
    collapse: bool | None = None,
    max_nodes: int | None = MAX_NODES,
) -> Scene:
    """A scene that stays readable: for a diff, only the operators within ``hops`` edges of a
    change (``None``: all of them, unless the picture is large); chains whose operators are
    all unchanged drawn as one box (``collapse``; ``None``: when the picture is large); at
    most ``max_nodes`` nodes (``None``: no cap). Each fold adds a note saying what it hid."""
    nodes, edges, groups = list(scene.nodes), list(scene.edges), list(scene.groups)
    notes = list(scene.notes)
    calm = ("plain", "unchanged")
    if scene.diff and hops is None and len(nodes) > AUTO_FOCUS:
        hops = DEFAULT_HOPS
    if scene.diff and hops is not None and any(n.status not in calm for n in nodes):
        nodes, edges, groups, note = _neighbourhood(nodes, edges, groups, hops)
        if note:
            notes.append(note)
    if collapse is None:
        limit = AUTO_COLLAPSE if scene.diff else (max_nodes or len(nodes))
        collapse = len(nodes) > limit
    if collapse:
        nodes, edges, note = _collapse(nodes, edges, groups, scene.diff)
        if note:
            notes.append(note)
    if max_nodes is not None and len(nodes) > max_nodes:
        nodes, edges, note = _cap(nodes, edges, max_nodes)
        notes.append(note)
    used = {n.group for n in nodes if n.group is not None}
    if len(used) < len(groups):
        renumber = {g: k for k, g in enumerate(sorted(used))}
        groups = [groups[g] for g in sorted(used)]
        nodes = [replace(n, group=renumber[n.group]) if n.group is not None else n for n in nodes]
    return replace(scene, nodes=nodes, edges=edges, groups=groups, notes=notes)


def _keep(
    nodes: Sequence[SceneNode], edges: Sequence[SceneEdge], keep: Sequence[int]
) -> tuple[list[SceneNode], list[SceneEdge], dict[int, int]]:
    where = {old: new for new, old in enumerate(keep)}
    kept_edges = [
        replace(e, source=where[e.source], target=where[e.target])
        for e in edges
        if e.source in where and e.target in where
    ]
    return [nodes[i] for i in keep], kept_edges, where


def _neighbourhood(
    nodes: list[SceneNode], edges: list[SceneEdge], groups: list[SceneGroup], hops: int
) -> tuple[list[SceneNode], list[SceneEdge], list[SceneGroup], str]:
    near: list[list[int]] = [[] for _ in nodes]
    for e in edges:
        if not e.hidden:
            near[e.source].append(e.target)
            near[e.target].append(e.source)
    distance = {i: 0 for i, n in enumerate(nodes) if n.status not in ("plain", "unchanged")}
    queue = deque(distance)
    while queue:
        i = queue.popleft()
        if distance[i] >= hops:
            continue
        for j in near[i]:
            if j not in distance:
                distance[j] = distance[i] + 1
                queue.append(j)
    keep = sorted(distance)
    dropped = len(nodes) - len(keep)
    if not dropped:
        return nodes, edges, groups, ""
    inside = set(keep)
    upstream: dict[int, int] = {}
    downstream: dict[int, int] = {}
    for e in edges:
        if e.hidden:
            continue
        if e.source not in inside and e.target in inside:
            upstream[e.target] = upstream.get(e.target, 0) + 1
        elif e.source in inside and e.target not in inside:
            downstream[e.source] = downstream.get(e.source, 0) + 1
    hidden_in_group: dict[int, int] = {}
    for i, n in enumerate(nodes):
        if i not in inside and n.group is not None:
            hidden_in_group[n.group] = hidden_in_group.get(n.group, 0) + 1
    kept_nodes, kept_edges, where = _keep(nodes, edges, keep)
    for i, count in upstream.items():
        kept_edges.append(SceneEdge(len(kept_nodes), where[i], kind="fold"))
        kept_nodes.append(
            SceneNode(
                ("\u22ef",),
                f"{plural(count, 'unchanged input')} and what feeds "
                f"{'it' if count == 1 else 'them'}: not drawn",
                status="more",
            )
        )
    for i, count in downstream.items():
        kept_edges.append(SceneEdge(where[i], len(kept_nodes), kind="fold"))
        kept_nodes.append(
            SceneNode(
                ("\u22ef",),
                f"{plural(count, 'unchanged output')} and what follows: not drawn",
                status="more",
            )
        )
    groups = [
        replace(g, label=f"{g.label} \u00b7 +{hidden_in_group[k]} not drawn")
        if k in hidden_in_group
        else g
        for k, g in enumerate(groups)
    ]
    note = (
        f"{plural(dropped, 'unchanged operator')} more than {plural(hops, 'hop')} from a "
        "change not drawn (\u22ef marks where they are)"
    )
    return kept_nodes, kept_edges, groups, note


def _collapse(
    nodes: list[SceneNode], edges: list[SceneEdge], groups: list[SceneGroup], diff: bool
) -> tuple[list[SceneNode], list[SceneEdge], str]:
    members: dict[int, list[int]] = {}
    for i, n in enumerate(nodes):
        if n.group is not None:
            members.setdefault(n.group, []).append(i)
    quiet = {
        g
        for g, ms in members.items()
        if len(ms) > 1
        and groups[g].status == "chain"
        and all(nodes[i].status in ("plain", "unchanged") for i in ms)
    }
    if not quiet:
        return nodes, edges, ""
    out: list[SceneNode] = []
    where: dict[int, int] = {}
    box_of: dict[int, int] = {}
    folded = 0
    for i, n in enumerate(nodes):
        g = n.group
        if g in quiet:
            assert g is not None
            if g not in box_of:
                count = len(members[g])
                stateful = sum(1 for m in members[g] if nodes[m].stateful)
                box_of[g] = len(out)
                lines: tuple[str, ...] = (
                    _short(groups[g].label),
                    f"{count} operators{', unchanged' if diff else ''}",
                )
                if stateful:
                    lines += (f"{stateful} stateful",)
                out.append(
                    SceneNode(
                        lines,
                        f"{groups[g].title}\n{plural(count, 'operator')} folded into one box",
                        status="folded",
                        stateful=bool(stateful),
                    )
                )
            folded += 1
            where[i] = box_of[g]
        else:
            where[i] = len(out)
            out.append(n)
    seen: set[tuple[int, int, str]] = set()
    new_edges = []
    for e in edges:
        a, b = where[e.source], where[e.target]
        if a == b or (a, b, e.label) in seen:
            continue
        seen.add((a, b, e.label))
        new_edges.append(replace(e, source=a, target=b))
    word = "unchanged chain" if diff else "chain"
    note = (
        f"{plural(len(quiet), word)} ({plural(folded, 'operator')}) drawn as one box each, "
        "with the count of their operators"
    )
    return out, new_edges, note


def _cap(
    nodes: list[SceneNode], edges: list[SceneEdge], max_nodes: int
) -> tuple[list[SceneNode], list[SceneEdge], str]:
    calm = ("plain", "unchanged", "folded", "more")
    first = [i for i, n in enumerate(nodes) if n.status not in calm]
    rest = [i for i, n in enumerate(nodes) if n.status in calm]
    keep = sorted((first + rest)[:max_nodes])
    kept_nodes, kept_edges, _ = _keep(nodes, edges, keep)
    dropped = len(nodes) - len(keep)
    return (
        kept_nodes,
        kept_edges,
        f"{plural(dropped, 'more node')} not drawn: a picture shows at most {max_nodes} "
        "(raise --max-nodes, or see the text output for all of them)",
    )
