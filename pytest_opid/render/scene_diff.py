"""The picture of a change (:func:`diff_scene`): the new topology with what the change does to
every operator's state, removed operators as ghosts, in the engine's words."""

from __future__ import annotations

from dataclasses import replace

from pytest_opid.comparison import Comparison
from pytest_opid.engine_rules import Check
from pytest_opid.render.explain import render as explain
from pytest_opid.render.scene import (
    Scene,
    SceneEdge,
    SceneGroup,
    SceneNode,
    chain_groups,
    operator_lines,
    operator_title,
    scene_edges,
    short,
    state_lines,
)
from pytest_opid.render.state_meaning import operator_meanings
from pytest_opid.result import OperatorFingerprint
from pytest_opid.text import plural, printable

__all__ = ["diff_scene"]


def diff_scene(comparison: Comparison, check: Check | str | None = None) -> Scene:
    """The new topology with what the change does to every operator's state, removed
    operators as ghosts (placed by the old job's edges where it has them), and a legend."""
    c = comparison
    new, old = c.new, c.old
    engine = c.engine
    rules = c.rules
    words = rules.words
    check = Check.default_for(new) if check is None else Check.parse(check)
    states = state_lines(new)
    groups, group_of = chain_groups(new.job_vertices, words)
    _mark_chain_changes(c, groups, group_of)
    _mark_stage_changes(c, groups, group_of)
    index_new = {id(op): i for i, op in enumerate(new.operators)}
    status, counterpart, quiet = _operator_marks(c, index_new)
    removed, ghost_line = _removed(c, status, counterpart, index_new)
    # State found by position (Spark's state/<n>): what happens to each numbered state
    # decides the stateful operators' fate.
    by_position = not rules.ids_find_state
    extra_line = _mark_state_changes(c, status, counterpart, ghost_line) if by_position else {}
    nodes = []
    meanings = operator_meanings(new, old if c.mode == "streaming" else None)
    for op in new.operators:
        state, line, tip = status.get(id(op), ("unchanged", "", ""))
        lines = operator_lines(words, op, states.get(op.operator_id))
        title = operator_title(words, op, new, states.get(op.operator_id))
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
    edges, notes = scene_edges(new, index, nodes)
    if quiet:
        why = f"harmless, {words.state_rule}" if by_position else "stateless, nothing to restore"
        notes.insert(0, f"{plural(quiet, 'operator')} with a new ID drawn as unchanged: {why}")
    # Ghosts: removed operators, wired by the old job's edges to what they became.
    old_states = state_lines(old)
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
        lines = (*operator_lines(words, o, old_states.get(o.operator_id))[:2], line)
        nodes.append(
            SceneNode(
                lines=lines,
                title=f"{operator_title(words, o, old, old_states.get(o.operator_id))}\n{tip}",
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
        legend=list(words.batch_diff_legend if c.mode == "batch" else words.diff_legend),
        explanation=verdict,
        chain_word=words.chain,
        diff=True,
    )


def _operator_marks(
    c: Comparison, index_new: dict[int, int]
) -> tuple[dict[int, tuple[str, str, str]], dict[int, int], int]:
    """What the change does to each new operator by its ID alone (kept, renamed, a new ID,
    taken over, new): its status, the line on its box and its tooltip, by ``id()``; the new
    operator drawn for each old one (``index_new``: a new operator's position, by ``id()``);
    and how many new IDs are drawn quiet."""
    status: dict[int, tuple[str, str, str]] = {}  # id(new op) -> (status, line, tooltip)
    counterpart: dict[int, int] = {}  # id(old op) -> index of the new operator drawn for it
    words = c.rules.words
    by_position = not c.rules.ids_find_state
    for o, n in c.kept:
        counterpart[id(o)] = index_new[id(n)]
        if o.name != n.name:
            status[id(n)] = ("unchanged", short(f"renamed from {printable(o.name)}"), "")
    # A new ID that harms no state is drawn as unchanged, its box quiet (the tooltip and one
    # note say it): a filter added upstream gives every Spark operator below it a new ID, and
    # ten yellow boxes would drown the one whose state breaks.
    quiet = 0
    for o, n in c.changed:
        counterpart[id(o)] = index_new[id(n)]
        was = f" (was {printable(o.name)})" if o.name != n.name else ""
        if by_position:
            quiet += 1
            status[id(n)] = (
                "unchanged",
                "",
                f"operator ID {o.operator_id} -> {n.operator_id}{was}: harmless on its own, "
                f"{words.state_rule}",
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
                f"the {words.saved_state}'s state of {printable(o.name)} under its old ID "
                f"{o.state_id} "
                f"finds no operator (the ID is now {n.state_id})",
            )
    if not by_position:
        for o, n, a in c.misplaced:
            counterpart[id(o)] = index_new[id(a)]
            status[id(n)] = (
                "misplaced",
                short(f"WRONG STATE: gets {printable(o.name)}'s"),
                f"restores the state of the old {printable(o.name)} ({o.state_id}): this "
                f"operator took over its ID, and {words.state_rule}",
            )
            status[id(a)] = (
                "lost",
                short(f"STATE LOST: goes to {printable(n.name)}"),
                f"its state ({o.state_id}) is restored into {printable(n.name)} instead; it "
                f"starts empty under {a.state_id}",
            )
    for n in c.added:
        if id(n) not in status:
            status[id(n)] = ("new", words.new_operator, "new operator")
    return status, counterpart, quiet


def _removed(
    c: Comparison,
    status: dict[int, tuple[str, str, str]],
    counterpart: dict[int, int],
    index_new: dict[int, int],
) -> tuple[list[OperatorFingerprint], dict[int, tuple[str, str]]]:
    """The old operators drawn as ghosts, and each one's line and tooltip by ``id()``. In
    Flink an operator that took over another's ID lost its own, so its old self is no ghost:
    its tooltip says what became of its old state instead."""
    by_position = not c.rules.ids_find_state
    saved_state = c.rules.words.saved_state
    orphan_changed = {id(o) for o, _ in c.changed}
    removed = [o for o in c.orphaned if id(o) not in orphan_changed]
    if not by_position and c.misplaced:
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
        if by_position:
            ghost_line[id(o)] = ("REMOVED", "removed operator")
        elif o.stateful is False:
            ghost_line[id(o)] = ("REMOVED (stateless)", "removed; it kept no state")
        else:
            ghost_line[id(o)] = (
                "REMOVED: state lost",
                f"removed: its state in the {saved_state} ({o.state_id}) finds no operator",
            )
    return removed, ghost_line


def _mark_state_changes(
    c: Comparison,
    status: dict[int, tuple[str, str, str]],
    counterpart: dict[int, int],
    ghost_line: dict[int, tuple[str, str]],
) -> dict[int, str]:
    """Spark finds state by state/<n>: an operator that reads a state/<n> another wrote gets
    the wrong state, one whose state/<n> no one reads any more loses it (a removed one says
    so on its ghost), and a new state/<n> starts empty (the extra line returned, by ``id()``
    of its operator). A streaming job's restore findings come last."""
    new, old = c.new, c.old
    extra_line: dict[int, str] = {}
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
    return extra_line


#: Statuses that say the state breaks: drawn first on the box, and strongest.
_ALARMS = ("lost", "misplaced")


def _mark_chain_changes(
    c: Comparison, groups: list[SceneGroup], group_of: dict[str | None, int]
) -> None:
    """Chains split or merged by the change (:attr:`Comparison.real_chain_changes`): each new
    chain's box says so and what it was."""
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
                short(f"{head}: state/{item.state_id} {words}"),
                printable(first if len(first) <= 400 else first[:399] + "\u2026"),
            )
