"""The ``--opid-report`` table: every recorded topology, its job vertices and OperatorIDs.

Plain text for a terminal or a CI log; one block per recorded topology, one line per job vertex
and, under it, one line per operator with the IDs Flink would use.
"""

from __future__ import annotations

from collections.abc import Iterable

from pytest_opid.result import Fingerprint
from pytest_opid.text import quote as _q

__all__ = ["render_report", "render_topology"]


def render_topology(title: str, fp: Fingerprint) -> str:
    """One recorded topology: a heading, then its job vertices with their operators."""
    vertices = len(fp.job_vertices)
    ops = len(fp.operators)
    lines = [
        f"{title}  ({vertices} job vert{'ex' if vertices == 1 else 'ices'}, "
        f"{ops} operator{'' if ops == 1 else 's'})"
    ]
    members: dict[str | None, list] = {}
    for op in fp.operators:
        members.setdefault(op.job_vertex, []).append(op)
    for number, vertex in enumerate(fp.job_vertices, 1):
        lines.append(
            f"  v{number:<3} {vertex.id}  parallelism {vertex.parallelism:<3} {_q(vertex.name)}"
        )
        for op in members.get(vertex.id, ()):
            lines.append(f"       {op.operator_id}  {_q(op.name)}{_pins(op)}")
    for op in members.get(None, ()):
        lines.append(f"  -    {op.operator_id}  {_q(op.name)}{_pins(op)}")
    if fp.state_operators is not None:
        for s in fp.state_operators:
            lines.append(f"  state/{s.state_operator_id:<3} {s.operator_id}  {s.kind} {_q(s.name)}")
    return "\n".join(lines)


def render_report(blocks: Iterable[tuple[str, str]]) -> str:
    """Rendered blocks keyed by ``(nodeid, snapshot name)``, in a stable order."""
    return "\n\n".join(text for _, text in sorted(blocks))


def _pins(op) -> str:
    pins = []
    if op.uid is not None:
        pins.append(f"uid {_q(op.uid)}")
    if op.user_operator_id is not None:
        pins.append(f"setUidHash {op.user_operator_id}")
    return f"  [{', '.join(pins)}]" if pins else ""
