"""Pictures of a topology, its chains and what a change does to its state.

:func:`render_fingerprint` draws a fingerprint (operators in their chains, edges labelled by
partitioner or exchange, stateful operators marked); :func:`render_diff` draws a comparison
(the new topology, each operator marked unchanged, ID changed, state lost, wrong state, new,
and removed operators as dashed ghosts). Formats: ``svg`` (our own layered layout, no system
packages), ``mermaid`` and ``dot`` (text for other tools), ``html`` (one self-contained page:
the SVG, its legend and the explanation). :func:`picture` returns a :class:`Picture`, which a
notebook displays by itself (``_repr_svg_``, ``_repr_html_``).

Large topologies stay readable: a diff shows the neighbourhood of its changes (``hops``),
unchanged chains fold into one box (``collapse``) and at most ``max_nodes`` nodes are drawn;
the picture says what it folded away.
"""

from __future__ import annotations

from pathlib import Path

from pytest_opid.comparison import Comparison
from pytest_opid.engine_rules import Check
from pytest_opid.render.dot import scene_dot
from pytest_opid.render.folding import MAX_NODES, fold
from pytest_opid.render.html import scene_html, scene_html_fragment
from pytest_opid.render.mermaid import scene_mermaid
from pytest_opid.render.scene import Scene, topology_scene
from pytest_opid.render.scene_diff import diff_scene
from pytest_opid.render.svg import scene_svg
from pytest_opid.result import Fingerprint

__all__ = ["FORMATS", "Picture", "picture", "render_diff", "render_fingerprint"]

#: The formats of a picture.
FORMATS = ("svg", "mermaid", "dot", "html")
_SUFFIXES = {
    ".svg": "svg",
    ".mmd": "mermaid",
    ".mermaid": "mermaid",
    ".dot": "dot",
    ".gv": "dot",
    ".html": "html",
    ".htm": "html",
}


class Picture:
    """A picture of a fingerprint or a comparison, in any format; displays itself in a
    notebook. Build one with :func:`picture`."""

    def __init__(self, scene: Scene, direction: str = "TB") -> None:
        if direction not in ("TB", "LR"):
            raise ValueError(f"direction must be 'TB' or 'LR', got {direction!r}")
        self.scene = scene
        self.direction = direction

    def svg(self, id_prefix: str = "opid") -> str:
        return scene_svg(self.scene, direction=self.direction, id_prefix=id_prefix)

    def mermaid(self) -> str:
        return scene_mermaid(self.scene, direction=self.direction)

    def dot(self) -> str:
        return scene_dot(self.scene, direction=self.direction)

    def html(self) -> str:
        return scene_html(self.scene, direction=self.direction)

    def render(self, format: str = "svg") -> str:
        """The picture in ``format`` (one of :data:`FORMATS`)."""
        if format not in FORMATS:
            raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {format!r}")
        return getattr(self, format)()

    def save(self, path: str | Path, format: str | None = None) -> Path:
        """Write the picture to ``path``, in ``format`` or the one its suffix names."""
        path = Path(path)
        if format is None:
            format = _SUFFIXES.get(path.suffix.lower())
            if format is None:
                raise ValueError(
                    f"cannot tell the format of {path.name!r}: give format= ({', '.join(FORMATS)})"
                )
        path.write_text(self.render(format), encoding="utf-8")
        return path

    def _repr_svg_(self) -> str:
        return self.svg(id_prefix=f"opid{id(self):x}")

    def _repr_html_(self) -> str:
        return scene_html_fragment(self.scene, self.direction, id_prefix=f"opid{id(self):x}")

    def __repr__(self) -> str:
        return f"<Picture {self.scene.title!r}: {len(self.scene.nodes)} nodes>"


def picture(
    source: Fingerprint | Comparison,
    *,
    direction: str = "TB",
    check: Check | str | None = None,
    hops: int | None = None,
    collapse: bool | None = None,
    max_nodes: int | None = MAX_NODES,
    title: str | None = None,
) -> Picture:
    """The picture of a fingerprint or of a comparison (``check``: what the verdict in its
    title holds stable, by default what the job's own default check holds). ``hops`` (a
    diff's neighbourhood), ``collapse`` (unchanged chains as one box) and ``max_nodes``: see
    :func:`pytest_opid.render.folding.fold`; ``None`` decides by the picture's size."""
    if isinstance(source, Comparison):
        scene = diff_scene(source, check)
        if title:
            scene.title = title
    elif isinstance(source, Fingerprint):
        scene = topology_scene(source, title)
    else:
        raise TypeError(
            f"picture() draws a Fingerprint or a Comparison, got {type(source).__qualname__}"
        )
    return Picture(fold(scene, hops=hops, collapse=collapse, max_nodes=max_nodes), direction)


def render_fingerprint(
    fp: Fingerprint,
    format: str = "svg",
    *,
    direction: str = "TB",
    collapse: bool | None = None,
    max_nodes: int | None = MAX_NODES,
    title: str | None = None,
) -> str:
    """A picture of ``fp``'s topology in ``format`` (``svg``, ``mermaid``, ``dot``, ``html``)."""
    return picture(
        fp, direction=direction, collapse=collapse, max_nodes=max_nodes, title=title
    ).render(format)


def render_diff(
    comparison: Comparison,
    format: str = "svg",
    *,
    check: Check | str | None = None,
    direction: str = "TB",
    hops: int | None = None,
    collapse: bool | None = None,
    max_nodes: int | None = MAX_NODES,
) -> str:
    """A picture of what ``comparison``'s change does: the new topology, every operator
    marked by what happens to its state, removed operators as ghosts, and a legend."""
    return picture(
        comparison,
        direction=direction,
        check=check,
        hops=hops,
        collapse=collapse,
        max_nodes=max_nodes,
    ).render(format)
