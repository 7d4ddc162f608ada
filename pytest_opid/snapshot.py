"""Topology snapshots: a text format for fingerprints and the syrupy extension that stores it.

A snapshot is meant to be read in a code review and diffed by git, so it is plain text with one
line per operator (its job vertex, OperatorID, user-defined ID, parallelism, node, uid and name),
one line per job vertex and, for Spark, one line per stateful operator. Every value that may hold
spaces is JSON-quoted, which keeps the format unambiguous and lets :func:`loads` read it back into
the :class:`~pytest_opid.fingerprint.Fingerprint` that :mod:`pytest_opid.diff` compares: a failing
check explains the change structurally instead of showing a text diff.

:class:`TopologySnapshotExtension` plugs the format into syrupy as a single-file extension
(``__snapshots__/<test module>/<test name>.opid``), so ``--snapshot-update``, unused-snapshot
detection and pytest-xdist all work as they do for syrupy's own extensions. Its comparison is
semantic (:meth:`TopologySnapshotExtension.matches`): names and other details may differ as long
as Flink would restore the same state, except under ``--snapshot-update``, where any difference
rewrites the file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from pytest_opid.diff import Check, compare, render
from pytest_opid.errors import DocumentError
from pytest_opid.fingerprint import (
    ChainedOperator,
    Fingerprint,
    JobVertex,
    OperatorFingerprint,
    StateOperator,
    fingerprint,
)

__all__ = ["HEADER", "TopologySnapshotExtension", "dumps", "loads"]

#: First line of every snapshot; :func:`loads` refuses text without it.
HEADER = "# pytest-opid topology snapshot, format 1"

_PREAMBLE = (
    HEADER,
    "# Flink restores an operator's state by its user_id (setUidHash) where set, else by its",
    "# operator_id. Names may change freely; IDs may not. Accept changes: pytest --snapshot-update",
)
_SPARK_PREAMBLE = (
    HEADER,
    "# Spark finds a stateful operator's state in state/<n> by its position n in the plan",
    "# ([state operators]); job vertices are Spark's stages. Accept: pytest --snapshot-update",
)
_OPERATORS = "[operators]"
_VERTICES = "[job vertices]"
_STATES = "[state operators]"
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|\S+')
_NONE = "-"


# -- writing ------------------------------------------------------------------------------------


def dumps(fp: Fingerprint) -> str:
    """The snapshot text of a fingerprint. Deterministic: the same fingerprint, the same bytes."""
    vertex_number = {v.id: f"v{i}" for i, v in enumerate(fp.job_vertices, 1)}
    preamble = _PREAMBLE if fp.state_operators is None else _SPARK_PREAMBLE
    lines = [*preamble, "", _OPERATORS]
    lines += _table(
        ("vertex", "operator_id", "user_id", "parallelism", "node", "uid", "name"),
        [
            (
                vertex_number.get(op.job_vertex or "", _NONE),
                op.operator_id,
                op.user_operator_id or _NONE,
                str(op.parallelism),
                str(op.node),
                _quote(op.uid),
                _quote(op.name),
            )
            for op in fp.operators
        ],
    )
    lines += ["", _VERTICES]
    lines += _table(
        ("vertex", "id", "parallelism", "name"),
        [(vertex_number[v.id], v.id, str(v.parallelism), _quote(v.name)) for v in fp.job_vertices],
    )
    if fp.state_operators is not None:
        lines += ["", _STATES]
        lines += _table(
            ("state", "operator_id", "kind", "name"),
            [
                (str(s.state_operator_id), s.operator_id, _quote(s.kind), _quote(s.name))
                for s in fp.state_operators
            ],
        )
    return "\n".join(lines) + "\n"


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    """Left-aligned columns; the header is a comment so it never parses as a row."""
    head = ("# " + header[0], *header[1:])
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(header))]
    out = []
    for row in [head, *rows]:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
        out.append("  ".join([*cells, row[-1]]).rstrip())
    return out


def _quote(value: str | None) -> str:
    return _NONE if value is None else json.dumps(value, ensure_ascii=False)


# -- reading ------------------------------------------------------------------------------------


def loads(text: str, *, origin: str = "the snapshot") -> Fingerprint:
    """Read :func:`dumps` output back. Raises :class:`DocumentError` naming the line at fault."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != HEADER:
        raise DocumentError(f"{origin}: not a pytest-opid topology snapshot (no {HEADER!r} line)")
    section = None
    ops: list[tuple[str, OperatorFingerprint]] = []
    vertices: list[tuple[str, str, int, str]] = []
    states: list[StateOperator] | None = None
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line in (_OPERATORS, _VERTICES, _STATES):
            section = line
            if section == _STATES:
                states = []
            continue
        where = f"{origin}, line {number}"
        cells = _cells(line, where)
        try:
            if section == _OPERATORS:
                vertex, op_id, user, par, node, uid, name = _arity(cells, 7, where)
                op = OperatorFingerprint(
                    node=int(node),
                    name=_string(name, where),
                    operator_id=_hex(op_id, where),
                    user_operator_id=None if user == _NONE else _hex(user, where),
                    uid=None if uid == _NONE else _string(uid, where),
                    parallelism=int(par),
                )
                ops.append((vertex, op))
            elif section == _VERTICES:
                vertex, vid, par, name = _arity(cells, 4, where)
                vertices.append((vertex, _hex(vid, where), int(par), _string(name, where)))
            elif section == _STATES and states is not None:
                number_, op_id, kind, name = _arity(cells, 4, where)
                states.append(
                    StateOperator(
                        int(number_), _hex(op_id, where), _string(name, where), _string(kind, where)
                    )
                )
            else:
                raise DocumentError(f"{where}: a row outside the [operators] section")
        except ValueError as exc:
            if isinstance(exc, DocumentError):
                raise
            raise DocumentError(f"{where}: {exc}") from None
    return _assemble(ops, vertices, states, origin)


def _assemble(
    ops: list[tuple[str, OperatorFingerprint]],
    vertices: list[tuple[str, str, int, str]],
    states: list[StateOperator] | None,
    origin: str,
) -> Fingerprint:
    ids = {number: vid for number, vid, _, _ in vertices}
    members: dict[str, list[OperatorFingerprint]] = {number: [] for number in ids}
    operators = []
    for number, op in ops:
        if number == _NONE:
            operators.append(op)
            continue
        if number not in ids:
            raise DocumentError(
                f"{origin}: operator {op.node} names job vertex {number}, "
                "which the [job vertices] section does not list"
            )
        members[number].append(op)
        operators.append(
            OperatorFingerprint(
                node=op.node,
                name=op.name,
                operator_id=op.operator_id,
                user_operator_id=op.user_operator_id,
                uid=op.uid,
                parallelism=op.parallelism,
                job_vertex=ids[number],
            )
        )
    job_vertices = tuple(
        JobVertex(
            id=vid,
            name=name,
            parallelism=par,
            operators=tuple(
                ChainedOperator(o.operator_id, o.user_operator_id) for o in members[number]
            ),
            nodes=tuple(o.node for o in members[number]),
        )
        for number, vid, par, name in vertices
    )
    return Fingerprint(tuple(operators), job_vertices, None if states is None else tuple(states))


def _cells(line: str, where: str) -> list[str]:
    cells = _TOKEN.findall(line)
    for cell in cells:
        if cell.startswith('"'):
            try:
                json.loads(cell)
            except json.JSONDecodeError:
                raise DocumentError(f"{where}: malformed quoted value {cell}") from None
    return cells


def _arity(cells: list[str], count: int, where: str) -> list[str]:
    if len(cells) != count:
        raise DocumentError(f"{where}: expected {count} columns, found {len(cells)}")
    return cells


def _string(cell: str, where: str) -> str:
    if not cell.startswith('"'):
        raise DocumentError(f"{where}: expected a quoted string, found {cell}")
    return json.loads(cell)


def _hex(cell: str, where: str) -> str:
    if len(cell) != 32 or not all(c in "0123456789abcdefABCDEF" for c in cell):
        raise DocumentError(f"{where}: {cell!r} is not a 32-digit hex ID")
    return cell.lower()


# -- syrupy -------------------------------------------------------------------------------------


class TopologySnapshotExtension(SingleFileSnapshotExtension):
    """syrupy extension for topology fingerprints: one ``.opid`` text file per snapshot.

    ``check`` says what must stay stable (:class:`~pytest_opid.diff.Check`); ``exact`` asks for
    byte equality instead, which the plugin sets under ``--snapshot-update`` so that renames are
    written back too. Both are instance attributes the plugin sets per test; syrupy itself
    creates the class without arguments (also on the pytest-xdist controller, to delete unused
    snapshots), which gives the defaults.
    """

    file_extension = "opid"
    _write_mode = WriteMode.TEXT
    check: Check = Check.BOTH
    exact: bool = False

    def serialize(self, data: Any, **kwargs: Any) -> str:
        """Anything :func:`pytest_opid.fingerprint` accepts, as snapshot text."""
        return dumps(fingerprint(data))

    def matches(self, *, serialized_data: Any, snapshot_data: Any) -> bool:
        if serialized_data == snapshot_data:
            return True
        if self.exact:
            return False
        try:
            old = loads(str(snapshot_data))
            new = loads(str(serialized_data))
        except DocumentError:
            return False  # an unreadable snapshot never matches; the plugin explains why
        return not compare(old, new).breaks(self.check)

    def diff_lines(self, serialized_data: Any, snapshot_data: Any) -> Iterator[str]:
        """What syrupy prints under a failed ``assert ... == snapshot``: the explanation."""
        try:
            old = loads(str(snapshot_data))
        except DocumentError as exc:
            yield f"{exc}; recreate it with pytest --snapshot-update"
            return
        yield from render(compare(old, loads(str(serialized_data))), self.check).splitlines()
