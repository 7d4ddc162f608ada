"""Graphviz DOT of a scene, for ``dot -Tsvg`` and every tool that reads DOT.

Chains are ``cluster`` subgraphs, operators boxes coloured by status, edges labelled by
partitioner or exchange. Every string is double-quoted with backslashes and quotes escaped,
so no name ends a string or forms a Graphviz escape (``\\N``, ``\\G``), and ``&``, ``<``,
``>`` become entities, which Graphviz decodes back to the characters in its labels.
"""

from __future__ import annotations

from pytest_opid.render.scene import Scene

__all__ = ["dot_escape", "scene_dot"]

_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "&": "&amp;", "<": "&lt;", ">": "&gt;"})

#: fill, border and border width by status
_STYLES = {
    "plain": ("#ffffff", "#5f6b7a", "1.2", "rounded,filled"),
    "unchanged": ("#f5f7fa", "#8794a3", "1.2", "rounded,filled"),
    "changed": ("#fff5d6", "#b7860b", "1.6", "rounded,filled"),
    "lost": ("#fde3e1", "#c0392b", "2.4", "rounded,filled"),
    "misplaced": ("#f0e4fb", "#7d3cb5", "2.4", "rounded,filled"),
    "new": ("#e2f6e6", "#2e7d32", "1.6", "rounded,filled"),
    "removed": ("#ffffff", "#8794a3", "1.2", "rounded,dashed"),
    "folded": ("#edf3fc", "#5b84c4", "1.2", "rounded,filled,dashed"),
    "more": ("#ffffff", "#ffffff", "0", "rounded"),
}


def dot_escape(text: str) -> str:
    """``text`` for the inside of a double-quoted DOT string."""
    return text.translate(_ESCAPES)


def _quoted(lines: tuple[str, ...] | list[str]) -> str:
    """Lines as one DOT string; a line that holds line breaks (a tooltip) is split there."""
    parts = [part for line in lines for part in line.split("\n")]
    return '"' + "\\n".join(dot_escape(part) for part in parts) + '"'


def scene_dot(scene: Scene, *, direction: str = "TB") -> str:
    """The scene as a DOT ``digraph``."""
    if direction not in ("TB", "LR"):
        raise ValueError(f"direction must be 'TB' or 'LR', got {direction!r}")
    out = [
        "digraph opid {",
        f"  graph [rankdir={direction}, labelloc=t, labeljust=l, fontname=Helvetica, "
        f"fontsize=13, label={_quoted([scene.title, *scene.notes])}];",
        '  node [shape=box, fontname=Helvetica, fontsize=10, margin="0.15,0.06"];',
        '  edge [fontname=Helvetica, fontsize=9, color="#616e7c"];',
    ]
    members: dict[int | None, list[int]] = {}
    for i, n in enumerate(scene.nodes):
        members.setdefault(n.group, []).append(i)

    def node(i: int, indent: str) -> str:
        n = scene.nodes[i]
        fill, colour, width, style = _STYLES.get(n.status, _STYLES["plain"])
        if n.stateful:
            width = str(max(float(width), 2.0))
        return (
            f"{indent}n{i} [label={_quoted(n.lines)}, tooltip={_quoted([n.title])}, "
            f'style="{style}", fillcolor="{fill}", color="{colour}", penwidth={width}, '
            f'class="{n.status}{" stateful" if n.stateful else ""}"];'
        )

    for g, group in enumerate(scene.groups):
        if g not in members:
            continue
        dashed = "dashed," if group.status != "chain" else ""
        marked = ("split", "merged", "added", "changed")
        colour = "#c25e00" if group.status in marked else "#aab4bf"
        out += [
            f"  subgraph cluster_{g} {{",
            f"    label={_quoted([group.label])}; tooltip={_quoted([group.title])};",
            f'    style="{dashed}rounded,filled"; fillcolor="#f7f9fb"; color="{colour}"; '
            "fontsize=10;",
            *(node(i, "    ") for i in members[g]),
            "  }",
        ]
    out += [node(i, "  ") for i in members.get(None, ())]
    for e in scene.edges:
        attrs = []
        if e.label and not _inside(scene, e.source, e.target):
            attrs.append(f"label={_quoted([e.label])}")
        if e.hidden:
            attrs.append("style=invis")
        elif e.kind == "ghost":
            attrs.append('style=dashed, color="#9aa5b1"')
        elif e.kind == "fold":
            attrs.append('style=dotted, color="#9aa5b1"')
        suffix = f" [{', '.join(attrs)}]" if attrs else ""
        out.append(f"  n{e.source} -> n{e.target}{suffix};")
    if scene.legend and scene.diff:
        out.append("  subgraph cluster_legend {")
        out.append('    label="legend"; style="rounded"; color="#d9e2ec"; fontsize=10;')
        for k, (status, text) in enumerate(scene.legend):
            if status in _STYLES:
                fill, colour, width, style = _STYLES[status]
                out.append(
                    f'    legend{k} [label={_quoted([text])}, style="{style}", '
                    f'fillcolor="{fill}", color="{colour}", penwidth={width}];'
                )
        out.append("  }")
    out.append("}")
    return "\n".join(out) + "\n"


def _inside(scene: Scene, source: int, target: int) -> bool:
    """Whether an edge runs inside one chain (its partitioner goes without saying)."""
    group = scene.nodes[source].group
    return group is not None and group == scene.nodes[target].group
