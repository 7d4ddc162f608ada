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

import re
from collections.abc import Sequence
from itertools import repeat
from operator import itemgetter

from pytest_opid.gc_pause import gc_paused
from pytest_opid.io.schema import fields_text, schema_text
from pytest_opid.io.snapshot_format import (
    DETAILS,
    END,
    ENDPOINTS,
    HEADER,
    HEADER_IDS_ONCE,
    IDS,
    JOB,
    MEANING,
    NONE,
    OPERATORS,
    PLAN,
    PREFIX,
    SETTINGS,
    SOURCES,
    STAGES,
    STATES,
    STORES,
    VERTICES,
)
from pytest_opid.io.snapshot_read import is_snapshot, loads, read_snapshot
from pytest_opid.result import (
    ChainedOperator,
    Fingerprint,
    OperatorFingerprint,
)
from pytest_opid.text import escape_unsafe, quote, quote_all

__all__ = ["HEADER", "PREFIX", "dumps", "is_snapshot", "loads", "read_snapshot"]

#: A schema's DDL longer than this is written one field per line.
_LONG_SCHEMA = 72

#: In a [plan] line's text: what is written as an escape besides :func:`escape_unsafe`'s.
_PLAN_ESCAPED = re.compile(r"[\\\x00-\x1f]")


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
    lines += [*(f"# {line}" if line else "#" for line in preamble), "", JOB]
    job = [("engine", quote(fp.engine)), ("mode", quote(fp.mode))]
    if fp.engine_version is not None:  # the engine's rules differ between its versions
        job.append(("engine_version", quote(fp.engine_version)))
    lines += _table(("key", "value"), job)
    if fp.settings:
        lines += ["", SETTINGS]
        lines += _table(("setting", "value"), [(quote(k), quote(v)) for k, v in fp.settings])
    ops = fp.operators
    get = vertex_number.get
    vertices = fp.job_vertices
    if marks is not None:
        lines += ["", STAGES]
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
            [get(j or "", NONE) for j in map(_JOB_VERTEX, ops)],
            list(map(str, map(_PARALLELISM, ops))),
            quote_all(list(map(_NAME, ops))),
        ]
        if fp.state_operators is not None:  # a job without state has no state column
            state_of = [NONE] * len(ops)
            for s, row in zip(fp.state_operators, marks, strict=True):
                state_of[row] = f"state/{s.state_operator_id}"
            header = ("stage", "parallelism", "state", "name")
            columns.insert(2, state_of)
        lines += ["", OPERATORS]
        lines += _columns(header, columns)
    else:
        lines += ["", OPERATORS]
        lines += _columns(
            ("vertex", "operator_id", "user_id", "parallelism", "node", "uid", "name"),
            [
                [get(j or "", NONE) for j in map(_JOB_VERTEX, ops)],
                list(map(_OPERATOR_ID, ops)),
                [u or NONE for u in map(_USER_ID, ops)],
                list(map(str, map(_PARALLELISM, ops))),
                list(map(str, map(_NODE, ops))),
                quote_all(list(map(_UID, ops)), NONE),
                quote_all(list(map(_NAME, ops))),
            ],
        )
    details = [
        (str(op.node), str(op.max_parallelism), _flag(op.stateful))
        for op in ops
        if op.max_parallelism != -1 or op.stateful is not None
    ]
    if details:
        lines += ["", DETAILS]
        lines += _table(("node", "max_parallelism", "stateful"), details)
    if marks is None:
        lines += ["", VERTICES]
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
        lines += ["", STATES]
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
            lines += ["", STORES]
            lines += _store_rows(stores, runs=once)
        facts = [
            (str(s.state_operator_id), quote(fact), quote(value))
            for s in fp.state_operators
            for fact, value in s.meaning
        ]
        if facts:
            lines += ["", MEANING]
            lines += _table(("state", "fact", "value"), facts)
    if fp.sources is not None:
        lines += ["", SOURCES]
        lines += _table(
            ("position", "source"), [(str(i), quote(name)) for i, name in enumerate(fp.sources)]
        )
    if fp.endpoints is not None:
        lines += ["", ENDPOINTS]
        lines += _table(("endpoint", "fact", "value"), [tuple(map(quote, r)) for r in fp.endpoints])
    if fp.plan is not None:
        lines += ["", PLAN, "# one operator per line, its inputs indented below it"]
        lines += map(_plan_text, fp.plan)
    if marks is not None:
        lines += ["", IDS, *_IDS_NOTE, " ".join(["operators", *map(_OPERATOR_ID, ops)])]
        heads = [members[-1].operator_id if members else None for members in _members(fp)]
        if any(v.id != head for v, head in zip(vertices, heads, strict=True)):
            lines.append(" ".join(["stages", *(v.id for v in vertices)]))
    lines += ["", END]
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
    return NONE if value is None else ("true" if value else "false")


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
            cells.append((state, store, part, NONE))
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
