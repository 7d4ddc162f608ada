"""What a picture shows, before any format draws it: nodes, boxes, edges, notes, a legend.

A :class:`Scene` is built from a fingerprint (:func:`topology_scene`, here) or a comparison
(:func:`pytest_opid.render.scene_diff.diff_scene`) in the engine's own words (a Flink picture
speaks of job vertices and savepoints, a Spark picture of stages and ``state/<n>``, never of
savepoints or uids), then folded to stay readable (:func:`pytest_opid.render.folding.fold`).
This module holds the scene's types and what an operator's box and a chain's box say, which
both pictures share. Every text in a scene is already printable
(:func:`pytest_opid.text.printable`: control characters, line separators and bidi overrides
escaped); each format still escapes it for its own syntax.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_opid.engine_rules import EngineRules, EngineWords
from pytest_opid.engines import engine_rules
from pytest_opid.errors import DocumentError
from pytest_opid.render.state_meaning import operator_meanings
from pytest_opid.result import Fingerprint, JobVertex, OperatorFingerprint
from pytest_opid.text import plural, printable

__all__ = [
    "DIFF_STATUSES",
    "NAME_LIMIT",
    "Scene",
    "SceneEdge",
    "SceneGroup",
    "SceneNode",
    "chain_groups",
    "drawing_rules",
    "operator_lines",
    "operator_title",
    "scene_edges",
    "short",
    "state_lines",
    "topology_scene",
]

#: What a diff says of an operator, in the order the legend lists them.
DIFF_STATUSES = ("unchanged", "changed", "lost", "misplaced", "new", "removed")
#: Longest name drawn in a node; the whole name is in the node's tooltip.
NAME_LIMIT = 44


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


def short(text: str, limit: int = NAME_LIMIT) -> str:
    """``text`` printable and cut to ``limit`` characters (an ellipsis says so)."""
    text = printable(text)
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def drawing_rules(engine: str, fp: Fingerprint | None) -> EngineRules[Any]:
    """The rules of the engine a picture draws, whose :attr:`~EngineRules.words` it speaks:
    ``engine``'s, or for a fingerprint without a tag, or of an engine not installed here, the
    engine that claims it untagged (render never tests an engine's name)."""
    try:
        return engine_rules(engine, fp)
    except DocumentError:
        return engine_rules("", fp)


# -- a topology -----------------------------------------------------------------------------


def topology_scene(fp: Fingerprint, title: str | None = None) -> Scene:
    """Every operator of ``fp`` in its chain, with its edges where the fingerprint has them."""
    engine = fp.engine
    rules = drawing_rules(engine, fp)
    words = rules.words
    states = state_lines(fp)
    meanings = operator_meanings(fp)
    groups, group_of = chain_groups(fp.job_vertices, words)
    nodes = [
        SceneNode(
            lines=operator_lines(words, op, states.get(op.operator_id))
            + meanings.get(op.operator_id, ()),
            title=operator_title(words, op, fp, states.get(op.operator_id)),
            stateful=op.operator_id in states or op.stateful is True,
            group=group_of.get(op.job_vertex),
            operator=op.node,
        )
        for op in fp.operators
    ]
    edges, notes = scene_edges(fp, {op.node: i for i, op in enumerate(fp.operators)}, nodes)
    kind = f"{engine.capitalize()} " if engine else ""
    chains = plural(len(fp.job_vertices), words.chain, words.chains)
    heading = title or (f"{kind}{fp.mode} job: {plural(len(fp.operators), 'operator')} in {chains}")
    return Scene(
        title=printable(heading),
        engine=engine,
        nodes=nodes,
        groups=groups,
        edges=edges,
        notes=notes,
        legend=_topology_legend(rules, fp),
        chain_word=words.chain,
    )


def chain_groups(
    vertices: Sequence[JobVertex], words: EngineWords
) -> tuple[list[SceneGroup], dict[str | None, int]]:
    """A box per chain (in the engine's ``words``), and each chain's box by its id."""
    groups: list[SceneGroup] = []
    group_of: dict[str | None, int] = {}
    chain = words.chain
    for number, v in enumerate(vertices, 1):
        group_of[v.id] = len(groups)
        count = len(v.operators)
        par = words.parallelism_text(v.parallelism, chain=True)
        label = f"{chain} {number} \u00b7 {v.id[:8]}" + (f" \u00b7 {par}" if par else "")
        groups.append(
            SceneGroup(
                label=label,
                title=f"{chain} {number}: {printable(v.name)} (id {v.id}, "
                f"{plural(count, 'operator')}{', ' + par if par else ''})",
            )
        )
    return groups, group_of


def state_lines(fp: Fingerprint) -> dict[str, str]:
    """Numbered state by operator ID: ``state/<n> kind``."""
    out: dict[str, str] = {}
    for s in fp.state_operators or ():
        text = f"state/{s.state_operator_id} {printable(s.kind)}"
        out[s.operator_id] = f"{out[s.operator_id]}, {text}" if s.operator_id in out else text
    return out


def operator_lines(
    words: EngineWords, op: OperatorFingerprint, state: str | None
) -> tuple[str, ...]:
    """What an operator's box says: name, ID and parallelism, a uid where the engine shows
    one, its state."""
    lines = [
        short(op.name),
        f"{op.operator_id[:8]} \u00b7 {words.parallelism_text(op.parallelism)}",
    ]
    if words.shows_uids:
        if op.uid is not None:
            lines.append(short(f"uid {printable(op.uid)}", NAME_LIMIT))
        if op.user_operator_id is not None:
            lines.append(f"uid hash {op.user_operator_id[:8]}")
    if state is not None:
        lines.append(short(state))
    elif op.stateful is True:
        lines.append("stateful")
    return tuple(lines)


def operator_title(
    words: EngineWords, op: OperatorFingerprint, fp: Fingerprint, state: str | None
) -> str:
    """An operator's tooltip: all its box says, whole, and what its state means."""
    parts = [printable(op.name), f"operator ID {op.operator_id}", f"node {op.node}"]
    if words.shows_uids:
        if op.uid is not None:
            parts.append(f"uid {printable(op.uid)}")
        if op.user_operator_id is not None:
            parts.append(f"user-defined ID {op.user_operator_id}")
    parts.append(words.parallelism_text(op.parallelism))
    if state is not None:
        parts.append(state)
        for s in fp.state_operators or ():
            if s.operator_id == op.operator_id:
                parts += (printable(f"{fact}: {value}") for fact, value in s.meaning)
    elif op.stateful is True:
        parts.append("stateful")
    return "\n".join(parts)


def scene_edges(
    fp: Fingerprint, index: dict[int, int], nodes: Sequence[SceneNode]
) -> tuple[list[SceneEdge], list[str]]:
    """``fp``'s edges between drawn nodes (``index``: node id to position), or, where it has
    none, each chain's members stacked in order and a note that says so."""
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


def _topology_legend(rules: EngineRules[Any], fp: Fingerprint) -> list[tuple[str, str]]:
    """The engine's legend, with its stateful item where ``fp`` has state: numbered state
    where the engine finds state by position, stateful operators where it finds it by ID."""
    words = rules.words
    stateful = (
        any(op.stateful for op in fp.operators) if rules.ids_find_state else fp.state_operators
    )
    return [*words.topology_legend, *((words.stateful_legend,) if stateful else ())]
