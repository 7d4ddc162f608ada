"""The ``opid fingerprint`` table: job vertices in the engine's order, each with its operators."""

from __future__ import annotations

from pytest_opid.render.scene import drawing_rules
from pytest_opid.result import Fingerprint
from pytest_opid.text import plural, printable

__all__ = ["render_table"]


def render_table(fingerprint: Fingerprint) -> str:
    """Job vertices (a Spark job's stages) in the engine's order, each with its operators (ID,
    user-defined ID, uid, parallelism, name), then the job's settings and plan tree where the
    fingerprint has them. Operators are listed in node order within their vertex."""
    # What the engine calls a chain (one, many) and an operator's ID (a Spark job's chains are
    # its stages, its operator IDs pytest-opid's, not Spark's).
    words = drawing_rules(fingerprint.engine, fingerprint).words
    one, many, ident = words.chain, words.chains, words.operator_id
    members: dict[str | None, list] = {}
    for op in fingerprint.operators:
        members.setdefault(op.job_vertex, []).append(op)
    vertices = list(fingerprint.job_vertices)
    lines = [
        f"{plural(len(fingerprint.operators), 'operator')} in {plural(len(vertices), one, many)}",
    ]
    header = (ident, "user-defined ID", "uid", "parallelism", "name")
    rows_by_vertex = []
    for vertex in vertices:
        rows_by_vertex.append(
            [
                (
                    op.operator_id,
                    op.user_operator_id or "-",
                    "-" if op.uid is None else printable(op.uid),
                    str(vertex.parallelism),
                    printable(op.name),
                )
                for op in members.get(vertex.id, [])
            ]
        )
    all_rows = [header] + [row for rows in rows_by_vertex for row in rows]
    widths = [max(len(row[i]) for row in all_rows) for i in range(len(header) - 1)]

    def fmt(row: tuple[str, ...]) -> str:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        return "    " + "  ".join([*cells, row[-1]])

    for number, (vertex, rows) in enumerate(zip(vertices, rows_by_vertex, strict=True), start=1):
        lines.append("")
        lines.append(
            f"{one} {number}: {printable(vertex.name)}  "
            f"(id {vertex.id}, parallelism {vertex.parallelism})"
        )
        lines.append(fmt(header))
        lines.extend(fmt(row) for row in rows)
    orphans = members.get(None, [])
    if orphans:
        lines.append("")
        lines.append(f"operators in no {one}")
        lines.extend(
            fmt((op.operator_id, op.user_operator_id or "-", "-", "", printable(op.name)))
            for op in orphans
        )
    if fingerprint.settings:
        lines.append("")
        lines += [f"setting {printable(k)} = {printable(v)}" for k, v in fingerprint.settings]
    if fingerprint.plan is not None:
        lines += ["", "plan (one operator per line, its inputs indented below it):"]
        lines += ["    " + printable(line) for line in fingerprint.plan]
    return "\n".join(lines) + "\n"
