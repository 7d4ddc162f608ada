"""Folding a scene so it stays readable (:func:`fold`): a diff's neighbourhood, unchanged chains
as one box, a cap on the nodes drawn, each fold said in a note."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import replace

from pytest_opid.render.scene import Scene, SceneEdge, SceneGroup, SceneNode, short
from pytest_opid.text import plural

__all__ = ["AUTO_COLLAPSE", "AUTO_FOCUS", "DEFAULT_HOPS", "MAX_NODES", "fold"]

#: Default cap on the nodes of one picture, and sizes from which a picture folds by itself.
MAX_NODES = 500
AUTO_FOCUS = 120  # a diff with more nodes shows the neighbourhood of its changes
AUTO_COLLAPSE = 80  # a diff with more nodes draws unchanged chains as one box
DEFAULT_HOPS = 2


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
                    short(groups[g].label),
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
