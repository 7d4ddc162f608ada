"""SVG pictures of a scene, laid out by :mod:`pytest_opid.render.graph`: no system packages.

The document is self-contained (inline style, no scripts, no external references) and
well-formed XML. Operators are ``<g class="operator status-...">`` groups inside their chain's
``<g class="chain">``; each carries its whole name and IDs in a ``<title>`` tooltip. Every text
comes from a :class:`~pytest_opid.render.scene.Scene` (already printable) and is XML-escaped
here, so an operator named ``<script>`` is a label, never markup.

Notebooks: ``IPython.display.SVG(to_svg(fp))``, or ``picture(fp)``
(:func:`pytest_opid.render.picture.picture`), which displays itself.
"""

from __future__ import annotations

import re
import textwrap

from pytest_opid.comparison import Comparison
from pytest_opid.render.folding import MAX_NODES, fold
from pytest_opid.render.graph import Layout, Rect, layout
from pytest_opid.render.scene import Scene, SceneNode, topology_scene
from pytest_opid.render.scene_diff import diff_scene
from pytest_opid.result import Fingerprint

__all__ = ["scene_svg", "to_svg", "xml_escape"]

#: Approximate glyph widths (pixels) of the name font and of the detail font.
NAME_CHAR = 7.1
DETAIL_CHAR = 6.7
LINE = 15.0
NODE_PAD_X = 10.0
NODE_PAD_Y = 7.0
MIN_NODE_WIDTH = 96.0
MARGIN = 20.0
TITLE_CHAR = 8.8
TITLE_WRAP = 90
NOTE_WRAP = 120
GROUP_HEADER = 16.0

#: Characters XML 1.0 forbids, and those that would disguise a line (they are already
#: escaped in scene text; this is the last line of defence for any other text).
_NOT_XML = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e"
    "\u2066-\u2069\ufeff\ufffe\uffff\ud800-\udfff]"
)
_XML = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"})

STYLE = """
.opid-picture{font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;font-size:12px}
.opid-picture .bg{fill:#ffffff}
.opid-picture .title{font-size:15px;font-weight:600;fill:#1f2933}
.opid-picture .note{font-size:11px;fill:#52606d}
.opid-picture .chain-box{fill:#f7f9fb;stroke:#aab4bf;stroke-width:1}
.opid-picture .chain-label{font-size:10.5px;fill:#52606d}
.opid-picture .chain-split .chain-box,.opid-picture .chain-merged .chain-box{stroke:#c25e00;\
stroke-width:1.6;stroke-dasharray:6 3}
.opid-picture .chain-removed .chain-box{fill:none;stroke-dasharray:4 4}
.opid-picture .node{fill:#ffffff;stroke:#5f6b7a;stroke-width:1.2}
.opid-picture .name{font-weight:600;fill:#1f2933}
.opid-picture .detail{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:10.5px;\
fill:#3e4c59}
.opid-picture .state-mark{fill:#334e68}
.opid-picture .status-unchanged .node{fill:#f5f7fa;stroke:#8794a3}
.opid-picture .status-unchanged .detail{fill:#7b8794}
.opid-picture .status-changed .node{fill:#fff5d6;stroke:#b7860b;stroke-width:1.6}
.opid-picture .status-lost .node{fill:#fde3e1;stroke:#c0392b;stroke-width:3}
.opid-picture .status-misplaced .node{fill:#f0e4fb;stroke:#7d3cb5;stroke-width:3}
.opid-picture .alarm{font-size:11px;font-weight:700}
.opid-picture .status-lost .alarm{fill:#a61b1b}
.opid-picture .status-misplaced .alarm{fill:#5b2a86}
.opid-picture .status-new .node{fill:#e2f6e6;stroke:#2e7d32;stroke-width:1.6}
.opid-picture .status-removed .node{fill:none;stroke:#8794a3;stroke-dasharray:5 4}
.opid-picture .status-removed text{fill:#7b8794}
.opid-picture .status-folded .node{fill:#edf3fc;stroke:#5b84c4;stroke-dasharray:3 2}
.opid-picture .status-more .node{fill:none;stroke:none}
.opid-picture .status-more text{font-size:16px;fill:#7b8794}
.opid-picture .edge{fill:none;stroke:#616e7c;stroke-width:1.3}
.opid-picture .edge-ghost{stroke:#9aa5b1;stroke-dasharray:5 4}
.opid-picture .edge-fold{stroke:#9aa5b1;stroke-dasharray:2 3}
.opid-picture .chain-label-bg{fill:#f7f9fb}
.opid-picture .edge-label{font-size:10px;fill:#243b53}
.opid-picture .edge-label-bg{fill:#ffffff;fill-opacity:0.9;stroke:#d9e2ec;stroke-width:0.8}
.opid-picture .legend-text{font-size:11px;fill:#3e4c59}
"""


def xml_escape(text: str) -> str:
    """``text`` for XML content or a double- or single-quoted attribute: markup characters
    as entities, characters XML forbids (and line or bidi controls) as ``\\uXXXX``."""
    text = _NOT_XML.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text.translate(_XML)


def text_width(text: str, char: float = DETAIL_CHAR) -> float:
    return len(text) * char


def node_size(node: SceneNode) -> tuple[float, float]:
    widths = [
        text_width(line, NAME_CHAR if i == 0 else DETAIL_CHAR) for i, line in enumerate(node.lines)
    ]
    width = max([MIN_NODE_WIDTH if node.status != "more" else 40.0, *widths]) + 2 * NODE_PAD_X
    height = len(node.lines) * LINE + 2 * NODE_PAD_Y
    return round(width, 1), round(height, 1)


def scene_layout(scene: Scene, direction: str = "TB") -> Layout:
    """Where the scene's nodes, chains and edges go."""
    sizes = [node_size(n) for n in scene.nodes]
    group_min = {g: text_width(group.label) + 24.0 for g, group in enumerate(scene.groups)}
    drawn_edges = [e for e in scene.edges if not e.hidden]
    grid = 0
    if not drawn_edges:
        units = len({n.group for n in scene.nodes if n.group is not None}) + sum(
            1 for n in scene.nodes if n.group is None
        )
        grid = max(1, round(units**0.5))
    return layout(
        sizes,
        [n.group for n in scene.nodes],
        [(e.source, e.target) for e in scene.edges],
        direction=direction,
        group_header=GROUP_HEADER,
        group_min=group_min,
        grid=grid,
    )


def scene_svg(scene: Scene, *, direction: str = "TB", id_prefix: str = "opid") -> str:
    """The scene as a standalone SVG document (``id_prefix`` keeps ids unique when several
    pictures share an HTML page)."""
    placed = scene_layout(scene, direction)
    prefix = re.sub(r"[^A-Za-z0-9_-]", "_", id_prefix) or "opid"
    title_lines = textwrap.wrap(scene.title, TITLE_WRAP) if scene.title else []
    note_lines = [
        line
        for note in scene.notes
        for line in textwrap.wrap(note, NOTE_WRAP, subsequent_indent="  ")
    ]
    out_head = []
    y = MARGIN
    for line in title_lines:
        y += 18
        out_head.append(f'<text class="title" x="{MARGIN}" y="{y}">{xml_escape(line)}</text>')
    y += 6 if title_lines else 0
    for line in note_lines:
        y += 15
        out_head.append(f'<text class="note" x="{MARGIN}" y="{y}">{xml_escape(line)}</text>')
    head_h = y + 14
    legend_lines, legend_w, legend_h = _legend(scene)
    width = max(
        placed.width + 2 * MARGIN,
        max((text_width(t, TITLE_CHAR) for t in title_lines), default=0.0) + 2 * MARGIN,
        max((text_width(n, 6.4) for n in note_lines), default=0.0) + 2 * MARGIN,
        legend_w + 2 * MARGIN,
    )
    height = head_h + placed.height + (legend_h + MARGIN if legend_lines else 0) + MARGIN
    width, height = round(width, 1), round(height, 1)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="opid-picture" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-labelledby="{prefix}-title">',
        f'<title id="{prefix}-title">{xml_escape(scene.title or "topology")}</title>',
    ]
    if scene.notes:
        out.append(f"<desc>{xml_escape(' / '.join(scene.notes))}</desc>")
    out += [
        f"<style>{STYLE}</style>",
        "<defs>",
        _marker(f"{prefix}-arrow", "#616e7c"),
        _marker(f"{prefix}-arrow-ghost", "#9aa5b1"),
        "</defs>",
        f'<rect class="bg" x="0" y="0" width="{width}" height="{height}"/>',
        '<g class="header">',
        *out_head,
        "</g>",
        f'<g class="graph" transform="translate({MARGIN},{round(head_h, 1)})">',
    ]
    members: dict[int | None, list[int]] = {}
    for i, n in enumerate(scene.nodes):
        members.setdefault(n.group, []).append(i)
    for g, group in enumerate(scene.groups):
        rect = placed.groups.get(g)
        if rect is None:
            continue
        out.append(f'<g class="chain chain-{group.status}" data-chain="{g}">')
        out.append(f"<title>{xml_escape(group.title)}</title>")
        out.append(_rect(rect, "chain-box", 8))
        out += [_node(scene.nodes[i], placed.nodes[i]) for i in members.get(g, ())]
        out.append("</g>")
    out += [_node(scene.nodes[i], placed.nodes[i]) for i in members.get(None, ())]
    # Edges over the boxes, labels over the edges (a chain's label stays legible where an
    # edge enters the chain under it).
    out.append('<g class="edges">')
    labels = []
    for e, route, anchor in zip(scene.edges, placed.routes, placed.labels, strict=True):
        if e.hidden or len(route) < 2:
            continue
        kind = f" edge-{e.kind}" if e.kind else ""
        marker = f"{prefix}-arrow-ghost" if e.kind else f"{prefix}-arrow"
        d = "M" + " L".join(f"{x},{y}" for x, y in route)
        out.append(f'<path class="edge{kind}" d="{d}" marker-end="url(#{marker})"/>')
        if e.label and anchor is not None:
            w = round(text_width(e.label, 6.1) + 8, 1)
            x, y = anchor
            labels.append(
                f'<rect class="edge-label-bg" x="{round(x - w / 2, 1)}" y="{round(y - 8, 1)}" '
                f'width="{w}" height="15" rx="3"/>'
                f'<text class="edge-label" x="{x}" y="{round(y + 3.5, 1)}" '
                f'text-anchor="middle">{xml_escape(e.label)}</text>'
            )
    out.append("</g>")
    out.append('<g class="labels">')
    for g, group in enumerate(scene.groups):
        rect = placed.groups.get(g)
        if rect is None:
            continue
        w = round(text_width(group.label, 6.3) + 8, 1)
        out.append(
            f'<rect class="chain-label-bg" x="{round(rect.x + 6, 1)}" y="{round(rect.y + 4, 1)}" '
            f'width="{w}" height="15" rx="3"/>'
            f'<text class="chain-label" data-chain="{g}" x="{round(rect.x + 10, 1)}" '
            f'y="{round(rect.y + 15, 1)}">{xml_escape(group.label)}</text>'
        )
    out += labels
    out.append("</g>")
    out.append("</g>")
    if legend_lines:
        top = round(head_h + placed.height + MARGIN, 1)
        out.append(f'<g class="legend" transform="translate({MARGIN},{top})">')
        out += legend_lines
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _marker(name: str, colour: str) -> str:
    return (
        f'<marker id="{name}" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        f'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
        f'fill="{colour}"/></marker>'
    )


def _rect(rect: Rect, cls: str, radius: float) -> str:
    return (
        f'<rect class="{cls}" x="{rect.x}" y="{rect.y}" width="{rect.width}" '
        f'height="{rect.height}" rx="{radius}"/>'
    )


def _node(node: SceneNode, rect: Rect) -> str:
    classes = f"operator status-{node.status}" + (" stateful" if node.stateful else "")
    data = f' data-node="{node.operator}"' if node.operator is not None else ""
    parts = [f'<g class="{classes}"{data}>', f"<title>{xml_escape(node.title)}</title>"]
    parts.append(_rect(rect, "node", 5))
    if node.stateful:
        parts.append(
            f'<rect class="state-mark" x="{rect.x}" y="{rect.y + 3}" width="4" '
            f'height="{round(rect.height - 6, 1)}"/>'
        )
    x = round(rect.x + NODE_PAD_X, 1)
    if node.status == "more":
        x = round(rect.cx - 6, 1)
    for i, line in enumerate(node.lines):
        y = round(rect.y + NODE_PAD_Y + LINE * i + 11.5, 1)
        cls = "name" if i == 0 else "detail"
        if i == 1 and node.status in ("lost", "misplaced"):
            cls = "alarm"  # what breaks, right under the name
        parts.append(f'<text class="{cls}" x="{x}" y="{y}">{xml_escape(line)}</text>')
    parts.append("</g>")
    return "".join(parts)


def _legend(scene: Scene) -> tuple[list[str], float, float]:
    lines: list[str] = []
    width = 0.0
    y = 0.0
    for status, text in scene.legend:
        if status == "chain":
            swatch = '<rect class="chain-box" x="0" y="{y}" width="26" height="14" rx="4"/>'
        elif status == "edge":
            swatch = '<path d="M0,{m} L26,{m}" style="stroke:#616e7c;stroke-width:1.3"/>'
        elif status == "stateful":
            swatch = (
                '<rect class="node" x="0" y="{y}" width="26" height="14" rx="3"/>'
                '<rect class="state-mark" x="0" y="{y1}" width="4" height="10"/>'
            )
        else:
            swatch = (
                f'<g class="status-{status}"><rect class="node" x="0" y="{{y}}" width="26" '
                'height="14" rx="3"/></g>'
            )
        lines.append(swatch.format(y=round(y, 1), y1=round(y + 2, 1), m=round(y + 7, 1)))
        lines.append(
            f'<text class="legend-text" x="36" y="{round(y + 11, 1)}">{xml_escape(text)}</text>'
        )
        width = max(width, 36 + text_width(text, 6.2))
        y += 20
    return lines, width, y


def to_svg(
    source: Fingerprint | Comparison,
    *,
    direction: str = "TB",
    hops: int | None = None,
    collapse: bool | None = None,
    max_nodes: int | None = MAX_NODES,
) -> str:
    """The SVG picture of a fingerprint (its topology) or a comparison (the new topology with
    what the change does to each operator's state). In a notebook:
    ``IPython.display.SVG(to_svg(fp))``."""
    scene = diff_scene(source) if isinstance(source, Comparison) else topology_scene(source)
    scene = fold(scene, hops=hops, collapse=collapse, max_nodes=max_nodes)
    return scene_svg(scene, direction=direction)
