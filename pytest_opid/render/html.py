"""Self-contained HTML: one picture with its legend and explanation, or a report of many.

The page is well-formed XML (it parses with :mod:`xml.etree.ElementTree`) with an inline SVG,
inline style, no scripts and no external resources; a Content-Security-Policy forbids both, so
even a browser that met a stray script would not run it. Text is XML-escaped.

:func:`write_html_report` writes the report ``pytest --opid-html=PATH`` asks for: every
recorded topology, failures first, each with its explanation and picture.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from pytest_opid.comparison import Comparison
from pytest_opid.render.folding import MAX_NODES, fold
from pytest_opid.render.scene import Scene, topology_scene
from pytest_opid.render.scene_diff import diff_scene
from pytest_opid.render.svg import scene_svg, xml_escape
from pytest_opid.render.table import render_table
from pytest_opid.result import Fingerprint
from pytest_opid.text import plural

__all__ = [
    "ReportEntry",
    "report_anchor",
    "scene_html",
    "scene_html_fragment",
    "write_html_report",
]

#: (title, fingerprint, failure text or None, comparison or None)
ReportEntry = tuple[str, Fingerprint, str | None, Comparison | None]

_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
_STYLE = """
body{font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;margin:24px;color:#1f2933;
background:#ffffff}
h1{font-size:20px}h2{font-size:16px;margin-top:32px}
.picture{overflow:auto;border:1px solid #d9e2ec;border-radius:6px;padding:8px;margin:8px 0}
pre{background:#f5f7fa;border:1px solid #d9e2ec;border-radius:6px;padding:10px;overflow:auto;
font-size:12px;white-space:pre}
pre.failure,pre.explanation{white-space:pre-wrap;overflow-wrap:break-word}
pre.failure{background:#fde3e1;border-color:#e4a7a1}
.badge{display:inline-block;border-radius:4px;padding:1px 6px;font-size:12px;margin-right:6px}
.failed{background:#fde3e1;color:#8a1c12}.passed{background:#e2f6e6;color:#1b5e20}
ul.index{font-size:13px}
"""


def _page(title: str, body: Iterable[str]) -> str:
    return (
        "\n".join(
            [
                "<!DOCTYPE html>",
                '<html lang="en">',
                "<head>",
                '<meta charset="utf-8"/>',
                f'<meta http-equiv="Content-Security-Policy" content="{_CSP}"/>',
                '<meta name="viewport" content="width=device-width, initial-scale=1"/>',
                f"<title>{xml_escape(title)}</title>",
                f"<style>{_STYLE}</style>",
                "</head>",
                "<body>",
                *body,
                "</body>",
                "</html>",
            ]
        )
        + "\n"
    )


def scene_html_fragment(scene: Scene, direction: str = "TB", *, id_prefix: str = "opid") -> str:
    """The picture, its notes and its explanation as one ``<div>`` (for a notebook or a
    larger page)."""
    parts = [
        '<div class="opid">',
        f'<div class="picture">{scene_svg(scene, direction=direction, id_prefix=id_prefix)}</div>',
    ]
    if scene.explanation:
        parts.append(f'<pre class="explanation">{xml_escape(scene.explanation)}</pre>')
    parts.append("</div>")
    return "\n".join(parts)


def scene_html(scene: Scene, *, direction: str = "TB") -> str:
    """The scene as a self-contained HTML page."""
    # The notes are in the picture (scene_svg draws them under its title): not again here.
    body = [f"<h1>{xml_escape(scene.title or 'topology')}</h1>"]
    body.append(scene_html_fragment(scene, direction))
    return _page(scene.title or "topology", body)


def report_anchor(title: str) -> str:
    """The fragment id of a recorded topology's section in the report, from its title alone
    (so a failing test can name ``PATH#anchor`` before the report is written)."""
    return "t-" + hashlib.sha256(title.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def write_html_report(
    path: str | os.PathLike[str],
    entries: Iterable[ReportEntry],
    *,
    direction: str = "TB",
    max_nodes: int | None = MAX_NODES,
    heading: str = "pytest-opid: recorded topologies",
) -> Path:
    """Write one self-contained HTML report of every recorded topology to ``path``.

    ``entries`` are ``(title, fingerprint, failure text or None, comparison or None)``:
    failures come first (then the given order), each with its failure text, its picture (the
    comparison's where there is one, else the fingerprint's topology) and, for a passing
    entry, its operator table. Each section's id is :func:`report_anchor` of its title. The
    file is replaced atomically; returns its path."""
    items = list(entries)
    order = sorted(range(len(items)), key=lambda i: (items[i][2] is None, i))
    failed = sum(1 for item in items if item[2] is not None)
    body = [
        f"<h1>{xml_escape(heading)}</h1>",
        f"<p>{plural(len(items), 'recorded topology', 'recorded topologies')}, "
        f"{failed} failed.</p>",
    ]
    if items:
        body.append('<ul class="index">')
        for i in order:
            title, _, failure, _ = items[i]
            badge = _badge(failure is not None)
            body.append(
                f'<li>{badge}<a href="#{report_anchor(title)}">{xml_escape(title)}</a></li>'
            )
        body.append("</ul>")
    for number, i in enumerate(order):
        body += _section(items[i], number, direction, max_nodes)
    target = Path(path)
    text = _page(heading, body)
    try:
        return _replace(target, text)
    except OSError as exc:  # a directory at PATH, a read-only folder, a full disk
        raise OSError(exc.errno, f"{target}: cannot write the report: {exc.strerror}") from None


def _replace(target: Path, text: str) -> Path:
    """Write ``text`` to a temporary file beside ``target``, then rename it over ``target``.
    ``mkstemp`` creates the file with mode 0600; a report is an ordinary file, so it gets the
    mode ``open()`` would give it (0666 less the umask), or the old report's mode."""
    if target.is_dir():
        raise IsADirectoryError(21, "it is a directory")
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    handle, temporary = tempfile.mkstemp(
        prefix=f".{target.name}.", suffix=".tmp", dir=target.parent
    )
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


def _umask() -> int:
    """The process's umask. POSIX has no call that only reads it: set it and set it back."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _badge(failed: bool) -> str:
    return (
        '<span class="badge failed">failed</span>'
        if failed
        else '<span class="badge passed">passed</span>'
    )


def _section(
    entry: Sequence[object], number: int, direction: str, max_nodes: int | None
) -> list[str]:
    title, fp, failure, comparison = entry
    assert isinstance(title, str) and isinstance(fp, Fingerprint)
    scene = diff_scene(comparison) if isinstance(comparison, Comparison) else topology_scene(fp)
    scene = fold(scene, max_nodes=max_nodes)
    out = [
        f'<section id="{report_anchor(title)}">',
        f"<h2>{_badge(failure is not None)}{xml_escape(title)}</h2>",
    ]
    if isinstance(failure, str):
        out.append(f'<pre class="failure">{xml_escape(failure)}</pre>')
    # The scene's notes are drawn in the picture, under its title: once is enough.
    svg = scene_svg(scene, direction=direction, id_prefix=f"s{number}")
    out.append(f'<div class="picture">{svg}</div>')
    if scene.explanation and not isinstance(failure, str):
        out.append(f'<pre class="explanation">{xml_escape(scene.explanation)}</pre>')
    if failure is None:
        out.append(
            f"<details><summary>operators</summary><pre>{xml_escape(render_table(fp))}</pre></details>"
        )
    out.append("</section>")
    return out
