"""Mermaid flowcharts of a scene: text GitHub, GitLab and most wikis draw.

Chains are ``subgraph`` blocks, operators nodes with ``<br/>``-separated lines, edges labelled
by partitioner or exchange, statuses ``classDef`` colours. Every label is quoted, and
everything in it but letters, digits and a few harmless signs is written as a Mermaid entity
code (``#60;`` for ``<``), so no name can close a label, start a link, or become markup.
"""

from __future__ import annotations

from pytest_opid.render.scene import Scene

__all__ = ["mermaid_escape", "scene_mermaid"]

_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _.,:-/+=()@!?%*")

_CLASSES = {
    "unchanged": "fill:#f5f7fa,stroke:#8794a3",
    "changed": "fill:#fff5d6,stroke:#b7860b,stroke-width:2px",
    "lost": "fill:#fde3e1,stroke:#c0392b,stroke-width:3px",
    "misplaced": "fill:#f0e4fb,stroke:#7d3cb5,stroke-width:3px",
    "new": "fill:#e2f6e6,stroke:#2e7d32,stroke-width:2px",
    "removed": "fill:#ffffff,stroke:#8794a3,stroke-dasharray:5 4,color:#7b8794",
    "folded": "fill:#edf3fc,stroke:#5b84c4,stroke-dasharray:3 2",
    "more": "fill:#ffffff,stroke:#ffffff,color:#7b8794",
    "note": "fill:#ffffff,stroke:#d9e2ec,color:#52606d",
    "stateful": "stroke-width:3px",
}


def mermaid_escape(text: str) -> str:
    """``text`` for the inside of a double-quoted Mermaid label: anything but letters,
    digits, space and ``_.,:-/+=()@!?%*`` as an entity code (``#34;``)."""
    return "".join(ch if ch in _PLAIN else f"#{ord(ch)};" for ch in text)


def _label(lines: tuple[str, ...] | list[str]) -> str:
    return '"' + "<br/>".join(mermaid_escape(line) for line in lines) + '"'


def scene_mermaid(scene: Scene, *, direction: str = "TB") -> str:
    """The scene as a Mermaid ``flowchart``."""
    if direction not in ("TB", "LR"):
        raise ValueError(f"direction must be 'TB' or 'LR', got {direction!r}")
    out = [f"flowchart {direction}", f"  %% {mermaid_escape(scene.title)}"]
    if scene.title or scene.notes:
        out.append(f"  notes[{_label([scene.title, *scene.notes])}]:::note")
    members: dict[int | None, list[int]] = {}
    for i, n in enumerate(scene.nodes):
        members.setdefault(n.group, []).append(i)
    for g, group in enumerate(scene.groups):
        if g not in members:
            continue
        out.append(f"  subgraph c{g}[{_label([group.label])}]")
        out.append(f"    direction {direction}")
        out += [f"    n{i}[{_label(scene.nodes[i].lines)}]" for i in members[g]]
        out.append("  end")
    out += [f"  n{i}[{_label(scene.nodes[i].lines)}]" for i in members.get(None, ())]
    for e in scene.edges:
        if e.hidden:
            out.append(f"  n{e.source} ~~~ n{e.target}")
            continue
        arrow = "-.->" if e.kind else "-->"
        home = scene.nodes[e.source].group
        inside = home is not None and home == scene.nodes[e.target].group
        label = f'|"{mermaid_escape(e.label)}"|' if e.label and not inside else ""
        out.append(f"  n{e.source} {arrow}{label} n{e.target}")
    if scene.legend and scene.diff:
        out.append(f"  subgraph legend[{_label(['legend'])}]")
        out.append(f"    direction {direction}")
        for k, (status, text) in enumerate(scene.legend):
            if status in _CLASSES:
                out.append(f"    legend{k}[{_label([text])}]:::{status}")
        out.append("  end")
    used = {n.status for n in scene.nodes} | {"note"}
    if scene.diff:
        used |= {status for status, _ in scene.legend}
    for status, style in _CLASSES.items():
        if status in used or status == "stateful":
            out.append(f"  classDef {status} {style}")
    by_status: dict[str, list[str]] = {}
    for i, n in enumerate(scene.nodes):
        if n.status in _CLASSES:
            by_status.setdefault(n.status, []).append(f"n{i}")
    for status, ids in by_status.items():
        out.append(f"  class {','.join(ids)} {status}")
    stateful = [f"n{i}" for i, n in enumerate(scene.nodes) if n.stateful]
    if stateful:
        out.append(f"  class {','.join(stateful)} stateful")
    return "\n".join(out) + "\n"
