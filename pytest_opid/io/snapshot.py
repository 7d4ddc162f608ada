"""The ``.opid`` snapshot: a fingerprint as text a reviewer reads and git diffs.

Plain text with one line per operator (its chain, ID, user-defined ID, parallelism, node, uid
and name), one line per chain and, where the engine numbers its state, one line per stateful
operator and per state store. Every value that may hold spaces is JSON-quoted and every unsafe
character escaped (:func:`pytest_opid.text.quote`), which keeps the format one line per row and
unambiguous, so :func:`loads` reads back exactly the :class:`Fingerprint` that was written.

Format 2 adds a ``[job]`` section (engine and mode) and optional sections for what restore
checks use (max parallelism, statefulness, state store schemas, sources). Format 3 writes each
state store's key and value schema on a row of its own, in DDL form (``struct<count: bigint>``,
:mod:`pytest_opid.io.schema`), one field per line where the type is long; a schema without an
exact DDL form stays JSON-quoted. Format 4 adds ``[settings]`` (job-level settings such as
Spark's shuffle partitions, recorded once instead of as every stage's parallelism) and
``[plan]``, the engine's plan as an indented tree, one operator per line, its children two
spaces further in (the line's text with backslashes, control and other unsafe characters as
JSON escapes). Formats 1 (no engine tag), 2 (schemas as quoted JSON) and 3 are still read.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import replace
from itertools import repeat
from json.decoder import scanstring  # type: ignore[attr-defined]
from operator import itemgetter
from typing import Any

from pytest_opid.errors import DocumentError
from pytest_opid.gc_pause import gc_paused
from pytest_opid.io.json import open_regular, read_text
from pytest_opid.io.saved_fingerprint import is_engine_version
from pytest_opid.io.schema import fields_text, schema_json, schema_text, unclosed
from pytest_opid.result import (
    ChainedOperator,
    Fingerprint,
    JobVertex,
    OperatorFingerprint,
    StateOperator,
    StateStore,
)
from pytest_opid.text import escape_unsafe, printable, quote, quote_all

__all__ = ["HEADER", "PREFIX", "dumps", "is_snapshot", "loads", "read_snapshot"]

#: The start of every snapshot's first line, whatever its format.
PREFIX = "# pytest-opid topology snapshot"
#: First line of the snapshots whose operator IDs find state (Flink's): one ID per operator.
HEADER = f"{PREFIX}, format 5"
#: First line of the snapshots whose engine finds state by position (Spark's): IDs once.
HEADER_IDS_ONCE = f"{PREFIX}, format 6"
_HEADERS = {f"{PREFIX}, format {n}": n for n in (1, 2, 3, 4, 5, 6)}
#: A schema's DDL longer than this is written one field per line.
_LONG_SCHEMA = 72

_JOB = "[job]"
_OPERATORS = "[operators]"
_DETAILS = "[operator details]"
_VERTICES = "[job vertices]"
_STATES = "[state operators]"
_STORES = "[state stores]"
_MEANING = "[state meaning]"
_SOURCES = "[sources]"
_SETTINGS = "[settings]"
_PLAN = "[plan]"
_STAGES = "[stages]"
_IDS = "[ids]"
#: Format 5's last line: a snapshot without it was cut short.
_END = "[end]"
_SECTIONS = (
    _JOB,
    _SETTINGS,
    _OPERATORS,
    _DETAILS,
    _VERTICES,
    _STATES,
    _STORES,
    _MEANING,
    _SOURCES,
    _PLAN,
    _STAGES,
    _IDS,
)
#: Sections a format introduced (older formats do not have them).
_SINCE = {_SETTINGS: 4, _PLAN: 4, _STAGES: 6, _IDS: 6}
#: Sections format 6 no longer has (its [stages] and [ids] say it).
_UNTIL = {_VERTICES: 5}
#: Format 6: a stateful operator's mark in [operators], ``state/0``.
_STATE_MARK = re.compile(r"state/(0|[1-9][0-9]{0,9})")
#: In a [plan] line's text: what is written as an escape besides :func:`escape_unsafe`'s.
_PLAN_ESCAPED = re.compile(r"[\\\x00-\x1f]")
_HEX_ID = re.compile(r"[0-9a-fA-F]{32}")
_SURROGATE = re.compile("[\ud800-\udfff]")
_INT = re.compile(r"-?[0-9]{1,10}")
_NONE = "-"
#: [job] keys of formats 1-4; format 5 adds the engine version that made the fingerprint.
_JOB_KEYS = ("engine", "mode")


# -- writing ------------------------------------------------------------------------------------


def dumps(fp: Fingerprint, preamble: Sequence[str] = (), *, ids_once: bool = False) -> str:
    """The snapshot text of a fingerprint, after ``preamble`` comment lines (the engine's
    explanation of what it checks). Deterministic: the same fingerprint, the same bytes.

    ``ids_once``: the engine finds state by position, not by operator ID (Spark), so the IDs
    mean nothing to a reviewer and one harmless operator upstream changes all of them. Format
    6 then writes them once, on one line of ``[ids]``, marks the stateful operators in
    ``[operators]`` instead of naming their IDs, leaves out the user-defined ID and uid columns
    and the node numbers (1, 2, ... in order) and writes runs of indexed state fields
    (``MS[0]``..``MS[51]``) as one. Where that would lose something (a uid set, nodes not in
    order, a stage listing other operators than its own), format 5 is written as before.

    Built column by column (``zip``, ``map``, one ``json.dumps`` per column of names) rather
    than cell by cell: a 10k-operator job is written in a few milliseconds."""
    with gc_paused():  # a few objects per operator: the collector's passes would cost more
        if ids_once:
            marks = _state_rows(fp)
            if marks is not None:
                return _dumps(fp, preamble, marks)
        return _dumps(fp, preamble, None)


def _state_rows(fp: Fingerprint) -> list[int] | None:
    """Format 6: the row (0-based) of the operator each stateful operator is, in
    ``fp.state_operators``' order; ``None`` where format 6 cannot say ``fp`` exactly."""
    ops = fp.operators
    if any(op.user_operator_id is not None or op.uid is not None for op in ops):
        return None
    if [op.node for op in ops] != list(range(1, len(ops) + 1)):
        return None
    known = {v.id for v in fp.job_vertices}
    if len(known) != len(fp.job_vertices):
        return None
    if any(op.job_vertex is not None and op.job_vertex not in known for op in ops):
        return None
    for v, own in zip(fp.job_vertices, _members(fp), strict=True):
        if v.operators != tuple(ChainedOperator(o.operator_id) for o in own):
            return None
        if v.nodes != tuple(o.node for o in own):
            return None
    row_of: dict[str, int] = {}
    for i, op in enumerate(ops):
        if row_of.setdefault(op.operator_id, i) != i:
            row_of[op.operator_id] = -1  # two operators of one ID: a mark would not say which
    rows = [row_of.get(s.operator_id, -1) for s in fp.state_operators or ()]
    if -1 in rows or len(set(rows)) != len(rows):
        return None
    return rows


def _dumps(fp: Fingerprint, preamble: Sequence[str], marks: list[int] | None) -> str:
    once = marks is not None
    vertex_number = {v.id: f"{'s' if once else 'v'}{i}" for i, v in enumerate(fp.job_vertices, 1)}
    lines = [HEADER_IDS_ONCE if once else HEADER]
    lines += [*(f"# {line}" if line else "#" for line in preamble), "", _JOB]
    job = [("engine", quote(fp.engine)), ("mode", quote(fp.mode))]
    if fp.engine_version is not None:  # the engine's rules differ between its versions
        job.append(("engine_version", quote(fp.engine_version)))
    lines += _table(("key", "value"), job)
    if fp.settings:
        lines += ["", _SETTINGS]
        lines += _table(("setting", "value"), [(quote(k), quote(v)) for k, v in fp.settings])
    ops = fp.operators
    get = vertex_number.get
    vertices = fp.job_vertices
    if marks is not None:
        lines += ["", _STAGES]
        lines += _columns(
            ("stage", "parallelism", "name"),
            [
                [vertex_number[v.id] for v in vertices],
                [str(v.parallelism) for v in vertices],
                quote_all([v.name for v in vertices]),
            ],
        )
        header: tuple[str, ...] = ("stage", "parallelism", "name")
        columns = [
            [get(j or "", _NONE) for j in map(_JOB_VERTEX, ops)],
            list(map(str, map(_PARALLELISM, ops))),
            quote_all(list(map(_NAME, ops))),
        ]
        if fp.state_operators is not None:  # a job without state has no state column
            state_of = [_NONE] * len(ops)
            for s, row in zip(fp.state_operators, marks, strict=True):
                state_of[row] = f"state/{s.state_operator_id}"
            header = ("stage", "parallelism", "state", "name")
            columns.insert(2, state_of)
        lines += ["", _OPERATORS]
        lines += _columns(header, columns)
    else:
        lines += ["", _OPERATORS]
        lines += _columns(
            ("vertex", "operator_id", "user_id", "parallelism", "node", "uid", "name"),
            [
                [get(j or "", _NONE) for j in map(_JOB_VERTEX, ops)],
                list(map(_OPERATOR_ID, ops)),
                [u or _NONE for u in map(_USER_ID, ops)],
                list(map(str, map(_PARALLELISM, ops))),
                list(map(str, map(_NODE, ops))),
                quote_all(list(map(_UID, ops)), _NONE),
                quote_all(list(map(_NAME, ops))),
            ],
        )
    details = [
        (str(op.node), str(op.max_parallelism), _flag(op.stateful))
        for op in ops
        if op.max_parallelism != -1 or op.stateful is not None
    ]
    if details:
        lines += ["", _DETAILS]
        lines += _table(("node", "max_parallelism", "stateful"), details)
    if marks is None:
        lines += ["", _VERTICES]
        lines += _columns(
            ("vertex", "id", "parallelism", "name"),
            [
                [vertex_number[v.id] for v in vertices],
                [v.id for v in vertices],
                [str(v.parallelism) for v in vertices],
                quote_all([v.name for v in vertices]),
            ],
        )
    if fp.state_operators is not None:
        lines += ["", _STATES]
        if marks is None:
            lines += _table(
                ("state", "operator_id", "kind", "name"),
                [
                    (str(s.state_operator_id), s.operator_id, quote(s.kind), quote(s.name))
                    for s in fp.state_operators
                ],
            )
        else:
            lines += _table(
                ("state", "kind", "name"),
                [
                    (str(s.state_operator_id), quote(s.kind), quote(s.name))
                    for s in fp.state_operators
                ],
            )
        stores = [
            (str(s.state_operator_id), quote(st.name), part, schema)
            for s in fp.state_operators
            for st in s.stores
            for part, schema in (("key", st.key_schema), ("value", st.value_schema))
        ]
        if stores:
            lines += ["", _STORES]
            lines += _store_rows(stores, runs=once)
        facts = [
            (str(s.state_operator_id), quote(fact), quote(value))
            for s in fp.state_operators
            for fact, value in s.meaning
        ]
        if facts:
            lines += ["", _MEANING]
            lines += _table(("state", "fact", "value"), facts)
    if fp.sources is not None:
        lines += ["", _SOURCES]
        lines += _table(
            ("position", "source"), [(str(i), quote(name)) for i, name in enumerate(fp.sources)]
        )
    if fp.plan is not None:
        lines += ["", _PLAN, "# one operator per line, its inputs indented below it"]
        lines += map(_plan_text, fp.plan)
    if marks is not None:
        lines += ["", _IDS, *_IDS_NOTE, " ".join(["operators", *map(_OPERATOR_ID, ops)])]
        heads = [members[-1].operator_id if members else None for members in _members(fp)]
        if any(v.id != head for v, head in zip(vertices, heads, strict=True)):
            lines.append(" ".join(["stages", *(v.id for v in vertices)]))
    lines += ["", _END]
    return "\n".join(lines) + "\n"


#: The comment over format 6's [ids].
_IDS_NOTE = (
    "# operator IDs in [operators] order (a stage's is its last operator's): they pair",
    "# operators across versions in diffs and pictures; state is found by position",
)


def _members(fp: Fingerprint) -> list[list[OperatorFingerprint]]:
    """Each job vertex's operators, in operator order."""
    members: dict[str, list[OperatorFingerprint]] = {v.id: [] for v in fp.job_vertices}
    for op in fp.operators:
        if op.job_vertex is not None:
            members[op.job_vertex].append(op)
    return [members[v.id] for v in fp.job_vertices]


def _plan_text(line: str) -> str:
    """A plan line as written: its indentation, then its text with backslashes and unsafe
    characters escaped, so that it stays one line and reads back exactly."""
    content = line.lstrip(" ")
    if _PLAN_ESCAPED.search(content):
        content = _PLAN_ESCAPED.sub(_plan_escape, content)
    return " " * (len(line) - len(line.lstrip(" "))) + escape_unsafe(content)


def _plan_escape(match: re.Match[str]) -> str:
    char = match.group()
    return "\\\\" if char == "\\" else f"\\u{ord(char):04x}"


_NODE, _NAME, _OPERATOR_ID, _USER_ID, _UID, _PARALLELISM, _JOB_VERTEX = (
    itemgetter(OperatorFingerprint._fields.index(field))
    for field in (
        "node",
        "name",
        "operator_id",
        "user_operator_id",
        "uid",
        "parallelism",
        "job_vertex",
    )
)


def _flag(value: bool | None) -> str:
    return _NONE if value is None else ("true" if value else "false")


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> list[str]:
    """Left-aligned columns; the header is a comment so it never parses as a row."""
    return _columns(
        header, [list(column) for column in zip(*rows, strict=True)] or [[] for _ in header]
    )


def _columns(header: tuple[str, ...], columns: list[list[str]]) -> list[str]:
    """:func:`_table` from columns, padded a column at a time (``map`` over ``str.ljust``)."""
    head = ("# " + header[0], *header[1:])
    cells = [[h, *c] for h, c in zip(head, columns, strict=True)]
    padded = [list(map(str.ljust, c, repeat(max(map(len, c))))) for c in cells[:-1]]
    return list(map(str.rstrip, map("  ".join, zip(*padded, cells[-1], strict=True))))


def _store_rows(rows: list[tuple[str, str, str, str | None]], runs: bool) -> list[str]:
    """Format 3's ``[state stores]``: a row per key or value schema, in DDL form where it has
    an exact one (else JSON-quoted), a long struct one field per line below its row; format 6
    writes runs of indexed fields as one (``runs``)."""
    cells = []
    below = []
    for state, store, part, schema in rows:
        text = None if schema is None else schema_text(schema, runs=runs)
        fields = fields_text(text) if text is not None and len(text) > _LONG_SCHEMA else None
        if schema is None:
            cells.append((state, store, part, _NONE))
        elif text is None:
            cells.append((state, store, part, quote(schema)))
        elif fields is None or len(fields) < 2:
            cells.append((state, store, part, text))
        else:
            cells.append((state, store, part, "struct<"))
            below.append((len(cells), [*(f + "," for f in fields[:-1]), fields[-1]]))
    lines = _table(("state", "store", "part", "schema"), cells)
    for row, fields in reversed(below):  # the header is lines[0]: row n is lines[n]
        indent = " " * (len(lines[row]) - len("struct<"))
        lines[row + 1 : row + 1] = [*(f"{indent}  {f}" for f in fields), f"{indent}>"]
    return lines


# -- reading ------------------------------------------------------------------------------------
#
# One reader, line by line, every check naming the line at fault. It holds the text, one line
# and that line's cells at a time (a few times the input at most) and does a bounded amount of
# work per character: a quoted cell is decoded by the json module's C string scanner (no regular
# expression with a repeated group, whose backtracking stack grows with the cell), a struct
# written over several lines is collected as a list of its lines and joined once, and every
# duplicate check is a set or dict lookup.


def loads(text: str, *, origin: str = "the snapshot") -> Fingerprint:
    """Read :func:`dumps` output (formats 1 to 5) back. Raises :class:`DocumentError` naming
    the line at fault; a snapshot cut short, or with a section twice, is such an error."""
    with gc_paused():  # a few objects per operator: the collector's passes would cost more
        return _Reader(text, origin).read()


#: The sections every snapshot of a format has, even one of no operators: dumps() always writes
#: them, so a file without one was cut short (or mangled), not written so.
_REQUIRED = {
    1: (_OPERATORS, _VERTICES),
    2: (_JOB, _OPERATORS, _VERTICES),
    3: (_JOB, _OPERATORS, _VERTICES),
    4: (_JOB, _OPERATORS, _VERTICES),
    5: (_JOB, _OPERATORS, _VERTICES),
    6: (_JOB, _OPERATORS, _STAGES, _IDS),
}
_FLAGS: dict[str, bool | None] = {"true": True, "false": False, _NONE: None}
_SPACES = re.compile(r"\s*")
_BARE = re.compile(r"\S+")
_BOM = "\ufeff"
_BOM_UTF8 = _BOM.encode()


class _Cells(list[str]):
    """A row's cells, quoted ones already decoded; ``quoted[i]`` says which were."""

    quoted: list[bool]


class _Reader:
    def __init__(self, text: str, origin: str) -> None:
        self.text = text
        self.origin = origin
        self.job: dict[str, str] = {}
        self.ops: list[tuple[str, OperatorFingerprint]] = []
        self.details: dict[int, tuple[int, bool | None]] = {}
        self.vertices: list[tuple[str, str, int, str]] = []
        self.vertex_lines: dict[str, int] = {}
        self.states: list[StateOperator] | None = None
        self.stores: dict[int, list[StateStore]] = {}
        self.meaning: dict[int, list[tuple[str, str]]] = {}
        self.sources: list[str] | None = None
        self.settings: list[tuple[str, str]] = []
        self.setting_keys: set[str] = set()
        self.plan: list[str] | None = None
        self.schemas: dict[tuple[int, str], dict[str, str | None]] = {}  # format 3's stores
        self.seen: dict[str, int] = {}  # section title -> its line
        self.lines = 0
        self.ended = 0  # format 5: the line of [end]
        self.arity = 0  # format 6: [operators] with a state column (4) or without (3)
        self.marks: dict[int, tuple[int, str]] = {}  # format 6: state -> (row, its line)
        self.ids: dict[str, tuple[list[str], str]] = {}  # format 6: [ids] rows, their lines

    def _lines(self, start: int) -> Iterator[str]:
        """The text's lines from ``start``, split on "\\n" only: str.splitlines() would also
        split inside a name holding U+2028 or U+0085, which format 1 wrote raw."""
        text = self.text
        while True:
            end = text.find("\n", start)
            if end < 0:
                yield text[start:]
                return
            yield text[start:end]
            start = end + 1

    def read(self) -> Fingerprint:
        origin = self.origin
        # A byte order mark (an editor on Windows adds one) is read past, never kept.
        start = 1 if self.text.startswith(_BOM) else 0
        lines = self._lines(start)
        first = next(lines)
        version = _HEADERS.get(first.strip())
        if version is None:
            raise DocumentError(
                f"{origin}: not a pytest-opid topology snapshot (no {HEADER!r} line)"
            )
        self.version = version
        section: str | None = None
        pending: list[Any] | None = None  # a schema written over several lines, so far
        depth = 0  # its struct<...>s still open
        number, raw = 1, first
        for number, raw in enumerate(lines, 2):
            line = raw.strip()
            if pending is not None:
                pending[-1].append(line)
                depth += unclosed(line)
                if depth <= 0:
                    pending[-1] = " ".join(pending[-1])
                    _store_schema(self.schemas, *pending, runs=version >= 6)
                    pending = None
                continue
            if not line or line.startswith("#"):
                continue
            where = f"{origin}, line {number}"
            if self.ended:
                raise DocumentError(f"{where}: text after the [end] line ({self.ended})")
            if line == _END:
                if version < 5:
                    raise DocumentError(f"{where}: {_END} does not exist in format {version}")
                self.ended = number
                continue
            if line in _SECTIONS:
                section = self._section(line, number, where)
                continue
            if section == _PLAN and self.plan is not None:
                plan = self.plan
                plan.append(_plan_line(raw, plan[-1] if plan else None, where))
                continue
            if section == _STORES and version >= 3:
                state_no, store, part, schema = self._store_row(line, where)
                if not schema.startswith('"') and unclosed(schema) > 0:
                    pending = [where, state_no, store, part, [schema]]
                    depth = unclosed(schema)
                else:
                    _store_schema(
                        self.schemas, where, state_no, store, part, schema, runs=version >= 6
                    )
                continue
            self._row(section, _cells(line, where), where, number)
        self.lines = number - (raw == "")
        if pending is not None:
            raise DocumentError(
                f"{pending[0]}: the schema's struct<...> is never closed (cut short after "
                f"line {self.lines}?)"
            )
        return self._finish()

    def _section(self, line: str, number: int, where: str) -> str:
        version = self.version
        if version == 1 and line not in (_OPERATORS, _VERTICES, _STATES):
            raise DocumentError(f"{where}: section {line} does not exist in format 1")
        if not _SINCE.get(line, 1) <= version <= _UNTIL.get(line, version):
            raise DocumentError(f"{where}: section {line} does not exist in format {version}")
        first = self.seen.setdefault(line, number)
        if first != number:
            raise DocumentError(f"{where}: a second {line} section (the first is on line {first})")
        if line == _PLAN:
            self.plan = []
        elif line == _STATES:
            self.states = []
        elif line == _SOURCES:
            self.sources = []
        return line

    def _store_row(self, line: str, where: str) -> tuple[int, str, str, str]:
        """A format 3 ``[state stores]`` row: state, store, part, and the schema (the rest of
        the line)."""
        cells, rest = _cells_and_rest(line, 3)
        if len(cells) < 3 or cells[2] not in ("key", "value") or not rest:
            raise DocumentError(
                f"{where}: expected state, store, key or value, and a schema (or -)"
            )
        return _int(cells, 0, where), _string(cells, 1, where), cells[2], rest

    def _row(self, section: str | None, cells: _Cells, where: str, number: int) -> None:
        if self.version >= 6 and section in (_OPERATORS, _STAGES, _STATES, _IDS):
            self._row_ids_once(section, cells, where, number)
        elif section == _OPERATORS:
            _arity(cells, 7, where)
            op = OperatorFingerprint(
                node=_int(cells, 4, where),
                name=_string(cells, 6, where),
                operator_id=_hex(cells, 1, where),
                user_operator_id=None if _bare(cells, 2, _NONE) else _hex(cells, 2, where),
                uid=None if _bare(cells, 5, _NONE) else _string(cells, 5, where),
                parallelism=_int(cells, 3, where),
            )
            self.ops.append((_bare_cell(cells, 0, where), op))
        elif section == _JOB:
            _arity(cells, 2, where)
            key = cells[0]
            known = ("engine", "mode", "engine_version") if self.version >= 5 else _JOB_KEYS
            if cells.quoted[0] or key not in known or key in self.job:
                raise DocumentError(f"{where}: unexpected [job] row {key[:40]!r}")
            value = _string(cells, 1, where)
            if key == "engine_version" and not is_engine_version(value):
                raise DocumentError(
                    f"{where}: engine_version {quote(value[:40])} is not a version number (3.5.9)"
                )
            self.job[key] = value
        elif section == _DETAILS:
            _arity(cells, 3, where)
            stateful = cells[2]
            if cells.quoted[2] or stateful not in _FLAGS:
                raise DocumentError(f"{where}: stateful must be true, false or -")
            node = _int(cells, 0, where)
            if node in self.details:
                raise DocumentError(f"{where}: a second [operator details] row for node {node}")
            self.details[node] = (_int(cells, 1, where), _FLAGS[stateful])
        elif section == _VERTICES:
            _arity(cells, 4, where)
            label = _bare_cell(cells, 0, where)
            first = self.vertex_lines.setdefault(label, number)
            if first != number:
                raise DocumentError(
                    f"{where}: a second job vertex {printable(label[:40])} (the first is on "
                    f"line {first})"
                )
            self.vertices.append(
                (label, _hex(cells, 1, where), _int(cells, 2, where), _string(cells, 3, where))
            )
        elif section == _STATES and self.states is not None:
            _arity(cells, 4, where)
            self.states.append(
                StateOperator(
                    _int(cells, 0, where),
                    _hex(cells, 1, where),
                    _string(cells, 3, where),
                    _string(cells, 2, where),
                )
            )
        elif section == _STORES:
            _arity(cells, 4, where)
            self.stores.setdefault(_int(cells, 0, where), []).append(
                StateStore(
                    _string(cells, 1, where),
                    None if _bare(cells, 2, _NONE) else _string(cells, 2, where),
                    None if _bare(cells, 3, _NONE) else _string(cells, 3, where),
                )
            )
        elif section == _MEANING:
            _arity(cells, 3, where)
            self.meaning.setdefault(_int(cells, 0, where), []).append(
                (_string(cells, 1, where), _string(cells, 2, where))
            )
        elif section == _SETTINGS:
            _arity(cells, 2, where)
            key, value = _string(cells, 0, where), _string(cells, 1, where)
            if key in self.setting_keys:
                raise DocumentError(f"{where}: setting {key[:60]!r} appears twice")
            self.setting_keys.add(key)
            self.settings.append((key, value))
        elif section == _SOURCES and self.sources is not None:
            _arity(cells, 2, where)
            if _int(cells, 0, where) != len(self.sources):
                raise DocumentError(f"{where}: sources must be numbered 0, 1, ... in order")
            self.sources.append(_string(cells, 1, where))
        else:
            raise DocumentError(f"{where}: a row outside the [operators] section")

    def _row_ids_once(self, section: str, cells: _Cells, where: str, number: int) -> None:
        """Format 6's own rows: operators without IDs (node = row), stages, stateful operators
        marked in [operators], and the [ids] that the others' IDs are read from."""
        if section == _OPERATORS:
            # One arity for the section: with the state column (a job with state) or without.
            self.arity = self.arity or (4 if len(cells) == 4 else 3)
            _arity(cells, self.arity, where)
            node = len(self.ops) + 1
            mark = cells[2] if self.arity == 4 else _NONE
            if mark != _NONE or (self.arity == 4 and cells.quoted[2]):
                found = None if cells.quoted[2] else _STATE_MARK.fullmatch(mark)
                if found is None:
                    raise DocumentError(
                        f"{where}: the state column must be state/<n> or -, found "
                        f"{printable(mark[:40])}"
                    )
                state = int(found.group(1))
                if state in self.marks:
                    raise DocumentError(
                        f"{where}: a second operator marked state/{state} (the first is on "
                        f"{self.marks[state][1]})"
                    )
                self.marks[state] = (node - 1, where)
            op = OperatorFingerprint(
                node=node,
                name=_string(cells, self.arity - 1, where),
                operator_id="",
                parallelism=_int(cells, 1, where),
            )
            self.ops.append((_bare_cell(cells, 0, where), op))
        elif section == _STAGES:
            _arity(cells, 3, where)
            label = _bare_cell(cells, 0, where)
            first = self.vertex_lines.setdefault(label, number)
            if first != number:
                raise DocumentError(
                    f"{where}: a second stage {printable(label[:40])} (the first is on "
                    f"line {first})"
                )
            self.vertices.append((label, "", _int(cells, 1, where), _string(cells, 2, where)))
        elif section == _STATES and self.states is not None:
            _arity(cells, 3, where)
            self.states.append(
                StateOperator(
                    _int(cells, 0, where), "", _string(cells, 2, where), _string(cells, 1, where)
                )
            )
        elif section == _IDS:
            what = "" if cells.quoted[0] else cells[0]  # a line has a cell
            if what not in ("operators", "stages") or what in self.ids:
                raise DocumentError(
                    f"{where}: expected an [ids] row of operators, then one of stages, each "
                    f"once; found {printable(cells[0][:40])!r}"
                )
            self.ids[what] = ([_hex(cells, i, where) for i in range(1, len(cells))], where)

    def _resolve_ids(self) -> None:
        """Format 6: put the IDs of [ids] where format 5 wrote them, each operator's on its
        row, each stage's (its last operator's, unless [ids] lists the stages'), each stateful
        operator's (the operator marked with its state/<n>)."""
        origin = self.origin
        ids, where = self.ids.get("operators", ([], origin))
        if len(ids) != len(self.ops):
            raise DocumentError(
                f"{where}: {len(ids)} operator IDs for the {len(self.ops)} operators of [operators]"
            )
        self.ops = [
            (label, op._replace(operator_id=i))
            for (label, op), i in zip(self.ops, ids, strict=True)
        ]
        stage_ids, where = self.ids.get("stages", (None, origin))
        if stage_ids is not None and len(stage_ids) != len(self.vertices):
            raise DocumentError(
                f"{where}: {len(stage_ids)} stage IDs for the {len(self.vertices)} stages of "
                "[stages]"
            )
        last = {label: op.operator_id for label, op in self.ops}
        vertices = []
        for i, (label, _, parallelism, name) in enumerate(self.vertices):
            vid = stage_ids[i] if stage_ids is not None else last.get(label)
            if vid is None:
                raise DocumentError(
                    f"{origin}: stage {printable(label[:40])} has no operators, and [ids] "
                    "lists no stage IDs"
                )
            vertices.append((label, vid, parallelism, name))
        self.vertices = vertices
        listed = {s.state_operator_id for s in self.states or ()}
        for state, (_, where) in sorted(self.marks.items()):
            if state not in listed:
                raise DocumentError(f"{where}: state/{state} is not in [state operators]")
        if self.states is not None:
            states = []
            for s in self.states:
                mark = self.marks.pop(s.state_operator_id, None)
                if mark is None:
                    raise DocumentError(
                        f"{origin}: no operator in [operators] is marked "
                        f"state/{s.state_operator_id}"
                    )
                states.append(replace(s, operator_id=ids[mark[0]]))
            self.states = states

    def _check_whole(self) -> None:
        """A snapshot cut short (a crash of another tool, a bad merge, a truncated copy) must
        not read as a job of fewer operators, or of none: every change would pass against it.

        Format 5 ends with an ``[end]`` line, so a cut anywhere is found. Older formats have
        none: a cut inside a table leaves the sections after it missing ([job vertices] comes
        after the operators), or a row cut mid-cell, which the rows' checks reject, and a cut
        at a line end of the last table an operator naming a job vertex no row lists. A
        stateful job's snapshot (``[state operators]``) was always written with ``[sources]``
        last, so one without it was cut before its schemas, meaning or sources."""
        after = f"(cut short after line {self.lines}?)"
        for title in _REQUIRED[self.version]:
            if title not in self.seen:
                raise DocumentError(
                    f"{self.origin}: snapshot file is damaged: it has no {title} section {after}"
                )
        if self.version >= 5 and not self.ended:
            raise DocumentError(
                f"{self.origin}: snapshot file is damaged: it has no {_END} line, which every "
                f"format {self.version} snapshot ends with {after}"
            )
        if 2 <= self.version <= 4 and self.states and self.sources is None:
            raise DocumentError(
                f"{self.origin}: snapshot file is damaged: it has stateful operators but no "
                f"{_SOURCES} section {after}; recreate it with pytest --snapshot-update"
            )

    def _finish(self) -> Fingerprint:
        origin = self.origin
        stores = self.stores
        meaning = self.meaning
        if self.version >= 6:
            self._check_whole()  # a file cut short lacks the [ids] the others need
            self._resolve_ids()
        for (state_number, store_name), parts in self.schemas.items():
            stores.setdefault(state_number, []).append(
                StateStore(store_name, parts.get("key"), parts.get("value"))
            )
        mode = self.job.get("mode", "streaming")
        if mode not in ("streaming", "batch"):
            raise DocumentError(f'{origin}: mode must be "streaming" or "batch"')
        engine = self.job.get("engine", "")  # format 1: none; the registry finds the engine
        states = self.states
        if (stores or meaning) and states is None:
            raise DocumentError(f"{origin}: state stores or meaning without [state operators]")
        if states is not None and (stores or meaning):
            known = {s.state_operator_id for s in states}
            for section_name, numbers in ((_STORES, stores), (_MEANING, meaning)):
                for state_number in numbers:
                    if state_number not in known:
                        raise DocumentError(
                            f"{origin}: {section_name} names state {state_number}, "
                            "which [state operators] does not list"
                        )
            states = [
                StateOperator(
                    s.state_operator_id,
                    s.operator_id,
                    s.name,
                    s.kind,
                    tuple(stores.get(s.state_operator_id, ())),
                    tuple(meaning.get(s.state_operator_id, ())),
                )
                for s in states
            ]
        self._check_whole()
        fp = _assemble(self.ops, self.vertices, states, origin)
        operators = fp.operators
        job_vertices = fp.job_vertices
        details = self.details
        if details:
            operators = tuple(
                op._replace(max_parallelism=details[op.node][0], stateful=details[op.node][1])
                if op.node in details
                else op
                for op in operators
            )
            # A chain's max parallelism is its head's; the head's ID is the chain's ID.
            head = {op.operator_id: op.max_parallelism for op in operators}
            job_vertices = tuple(
                v._replace(max_parallelism=head.get(v.id, -1)) for v in job_vertices
            )
        return Fingerprint(
            operators,
            job_vertices,
            fp.state_operators,
            engine,
            mode,
            None if self.sources is None else tuple(self.sources),
            None,
            None if self.plan is None else tuple(self.plan),
            tuple(self.settings),
            engine_version=self.job.get("engine_version"),
        )


def _plan_line(raw: str, above: str | None, where: str) -> str:
    """A ``[plan]`` line read back: its indentation (two spaces a level, at most one level
    deeper than the line above, none on the first) and its text, escapes decoded."""
    text = raw.rstrip("\r")
    content = text.lstrip(" ")
    depth = len(text) - len(content)
    deepest = 0 if above is None else len(above) - len(above.lstrip(" ")) + 2
    if depth % 2 or depth > deepest:
        raise DocumentError(
            f"{where}: a [plan] line indented by {depth} spaces; expected an even number, "
            f"at most {deepest}"
        )
    if content[:1].isspace():
        raise DocumentError(f"{where}: a [plan] line indented with a tab or other white space")
    try:
        value = json.loads('"' + content.replace('"', '\\"') + '"')
    except (json.JSONDecodeError, RecursionError):
        raise DocumentError(f"{where}: malformed escape in the [plan] line") from None
    if not isinstance(value, str) or _SURROGATE.search(value):
        raise DocumentError(f"{where}: malformed escape in the [plan] line")
    return " " * depth + value


def is_snapshot(path: str | os.PathLike[str]) -> bool:
    """Whether the file at ``path`` is an ``.opid`` snapshot, by its first bytes. Only a
    regular file is opened (a FIFO without a writer would block ``open`` forever)."""
    try:
        with open_regular(path) as f:
            head = f.read(len(PREFIX) + len(_BOM_UTF8))
    except (DocumentError, OSError, TypeError, ValueError):
        return False  # the caller's reader reports the problem with the file
    return head.removeprefix(_BOM_UTF8).startswith(PREFIX.encode())


def read_snapshot(path: str | os.PathLike[str]) -> Fingerprint:
    """The fingerprint stored in the snapshot file at ``path``."""
    return loads(read_text(path), origin=str(path))


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


def _store_schema(
    schemas: dict[tuple[int, str], dict[str, str | None]],
    where: str,
    state: int,
    store: str,
    part: str,
    cell: str,
    *,
    runs: bool = False,
) -> None:
    """One format 3 schema cell (``-``, a JSON-quoted schema or DDL) into ``schemas``."""
    parts = schemas.setdefault((state, store), {})
    if part in parts:
        raise DocumentError(f"{where}: a second {part} schema for state {state}, store {store!r}")
    if cell == _NONE:
        parts[part] = None
    elif cell.startswith('"'):
        quoted = _cells(cell, where)
        _arity(quoted, 1, where)
        parts[part] = _string(quoted, 0, where)
    else:
        try:
            parts[part] = schema_json(cell, runs=runs)
        except ValueError as exc:
            raise DocumentError(f"{where}: malformed {part} schema: {exc}") from None


def _cells(line: str, where: str) -> _Cells:
    return _cells_and_rest(line, -1)[0]


def _cells_and_rest(line: str, count: int) -> tuple[_Cells, str]:
    """The first ``count`` cells of a stripped line (all where ``count`` is -1) and the rest of
    the line after them. A quoted cell is decoded by the json module's C scanner (strict: no raw
    control characters), in time and memory linear in the cell; a cell that is not valid JSON
    string text is kept as written, and :func:`_string` refuses it."""
    cells = _Cells()
    quoted: list[bool] = []
    cells.quoted = quoted
    at = 0
    end = len(line)
    while at < end and len(cells) != count:
        if line[at] == '"':
            try:
                value, after = scanstring(line, at + 1, True)
            except ValueError:  # unterminated, a raw control character, a bad escape
                match = _BARE.match(line, at)
                assert match is not None
                cells.append(match.group())
                quoted.append(False)
                at = _SPACES.match(line, match.end()).end()  # type: ignore[union-attr]
                continue
            cells.append(value)
            quoted.append(True)
            at = _SPACES.match(line, after).end()  # type: ignore[union-attr]
            continue
        match = _BARE.match(line, at)
        assert match is not None  # the line is stripped and ``at`` is past white space
        cells.append(match.group())
        quoted.append(False)
        at = _SPACES.match(line, match.end()).end()  # type: ignore[union-attr]
    return cells, line[at:]


def _arity(cells: list[str], count: int, where: str) -> None:
    if len(cells) != count:
        raise DocumentError(f"{where}: expected {count} columns, found {len(cells)}")


def _bare(cells: _Cells, i: int, word: str) -> bool:
    return not cells.quoted[i] and cells[i] == word


def _bare_cell(cells: _Cells, i: int, where: str) -> str:
    """A job vertex label (``v1``, or ``-``): written bare, never quoted."""
    if cells.quoted[i]:
        raise DocumentError(f"{where}: a job vertex label is written without quotes")
    return cells[i]


def _string(cells: _Cells, i: int, where: str) -> str:
    cell = cells[i]
    if not cells.quoted[i]:
        if cell.startswith('"'):
            raise DocumentError(f"{where}: malformed quoted value {printable(cell[:40])}")
        raise DocumentError(f"{where}: expected a quoted string, found {printable(cell[:40])}")
    if _SURROGATE.search(cell):
        raise DocumentError(f"{where}: malformed quoted value {quote(cell[:40])}")
    return cell


def _hex(cells: _Cells, i: int, where: str) -> str:
    cell = cells[i]
    if cells.quoted[i] or not _HEX_ID.fullmatch(cell):
        raise DocumentError(f"{where}: {printable(cell[:40])!r} is not a 32-digit hex ID")
    return cell.lower()


def _int(cells: _Cells, i: int, where: str) -> int:
    cell = cells[i]
    if cells.quoted[i] or not _INT.fullmatch(cell):
        raise DocumentError(f"{where}: invalid literal for an integer: {printable(cell[:40])!r}")
    return int(cell)
