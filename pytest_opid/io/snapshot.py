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
from collections.abc import Sequence
from itertools import repeat
from operator import itemgetter
from typing import Any

from pytest_opid.errors import DocumentError
from pytest_opid.io.json import open_regular, read_text
from pytest_opid.io.schema import fields_text, schema_json, schema_text, unclosed
from pytest_opid.model import gc_paused
from pytest_opid.result import (
    ChainedOperator,
    Fingerprint,
    JobVertex,
    OperatorFingerprint,
    StateOperator,
    StateStore,
)
from pytest_opid.text import escape_unsafe, quote, quote_all

__all__ = ["HEADER", "PREFIX", "dumps", "is_snapshot", "loads", "read_snapshot"]

#: The start of every snapshot's first line, whatever its format.
PREFIX = "# pytest-opid topology snapshot"
#: First line of the snapshots this release writes; :func:`loads` reads formats 1 to 4.
HEADER = f"{PREFIX}, format 4"
_HEADERS = {f"{PREFIX}, format {n}": n for n in (1, 2, 3, 4)}
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
)
#: Sections a format introduced (older formats do not have them).
_SINCE = {_SETTINGS: 4, _PLAN: 4}
#: In a [plan] line's text: what is written as an escape besides :func:`escape_unsafe`'s.
_PLAN_ESCAPED = re.compile(r"[\\\x00-\x1f]")
_HEX_ID = re.compile(r"[0-9a-fA-F]{32}")
_SURROGATE = re.compile("[\ud800-\udfff]")
_INT = re.compile(r"-?[0-9]{1,10}")
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|\S+')
_NONE = "-"


# -- writing ------------------------------------------------------------------------------------


def dumps(fp: Fingerprint, preamble: Sequence[str] = ()) -> str:
    """The snapshot text of a fingerprint, after ``preamble`` comment lines (the engine's
    explanation of what it checks). Deterministic: the same fingerprint, the same bytes.

    Built column by column (``zip``, ``map``, one ``json.dumps`` per column of names) rather
    than cell by cell: a 10k-operator job is written in a few milliseconds."""
    with gc_paused():  # a few objects per operator: the collector's passes would cost more
        return _dumps(fp, preamble)


def _dumps(fp: Fingerprint, preamble: Sequence[str]) -> str:
    vertex_number = {v.id: f"v{i}" for i, v in enumerate(fp.job_vertices, 1)}
    lines = [HEADER, *(f"# {line}" if line else "#" for line in preamble), "", _JOB]
    lines += _table(("key", "value"), [("engine", quote(fp.engine)), ("mode", quote(fp.mode))])
    if fp.settings:
        lines += ["", _SETTINGS]
        lines += _table(("setting", "value"), [(quote(k), quote(v)) for k, v in fp.settings])
    lines += ["", _OPERATORS]
    ops = fp.operators
    get = vertex_number.get
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
    lines += ["", _VERTICES]
    vertices = fp.job_vertices
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
        lines += _table(
            ("state", "operator_id", "kind", "name"),
            [
                (str(s.state_operator_id), s.operator_id, quote(s.kind), quote(s.name))
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
            lines += _store_rows(stores)
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
    return "\n".join(lines) + "\n"


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


def _store_rows(rows: list[tuple[str, str, str, str | None]]) -> list[str]:
    """Format 3's ``[state stores]``: a row per key or value schema, in DDL form where it has
    an exact one (else JSON-quoted), a long struct one field per line below its row."""
    cells = []
    below = []
    for state, store, part, schema in rows:
        text = None if schema is None else schema_text(schema)
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


def loads(text: str, *, origin: str = "the snapshot") -> Fingerprint:
    """Read :func:`dumps` output (format 1 or 2) back. Raises :class:`DocumentError` naming
    the line at fault."""
    # Split on "\n" only: str.splitlines() would also split inside a name holding U+2028 or
    # U+0085, which format 1 wrote raw.
    lines = text.split("\n")
    version = _HEADERS.get(lines[0].strip()) if lines else None
    if version is None:
        raise DocumentError(f"{origin}: not a pytest-opid topology snapshot (no {HEADER!r} line)")
    with gc_paused():  # a few objects per operator: the collector's passes would cost more
        fast = _fast_loads(text, version)
    if fast is not None:
        _check_whole(lines, version, origin, text)
        return fast
    return _precise_loads(lines, version, origin)


#: The sections every snapshot of a format has, even one of no operators: dumps() always writes
#: them, so a file without one was cut short (or mangled), not written so.
_REQUIRED = {
    1: (_OPERATORS, _VERTICES),
    2: (_JOB, _OPERATORS, _VERTICES),
    3: (_JOB, _OPERATORS, _VERTICES),
    4: (_JOB, _OPERATORS, _VERTICES),
}


def _check_whole(lines: list[str], version: int, origin: str, text: str = "") -> None:
    """A snapshot cut short (a crash of another tool, a bad merge, a truncated copy) must not
    read as a job of fewer operators, or of none: every change would pass against it.

    A cut inside a table leaves the sections after it missing ([job vertices] comes after the
    operators), or a row cut mid-cell, which the readers reject; a cut at a line end of the last
    table leaves an operator naming a job vertex no row lists, which :func:`_assemble` rejects.
    Each section title is found by one substring search (the usual case), else line by line.
    Checked once the rows have been read (a malformed row keeps its own message), before the
    tables are matched to each other (an operator naming a job vertex of a missing section)."""
    for title in _REQUIRED[version]:
        if f"\n{title}\n" in text or f"\n{title}\r\n" in text:
            continue
        if any(line.strip() == title for line in lines):
            continue
        raise DocumentError(
            f"{origin}: snapshot file is damaged: it has no {title} section (cut short after "
            f"line {len(lines) - (lines[-1] == '')}?)"
        )


def _precise_loads(lines: list[str], version: int, origin: str) -> Fingerprint:
    """The reference reader: line by line, every check naming the line at fault. It reads
    whatever :func:`_fast_loads` declines, and its messages are the ones users see."""
    section = None
    job: dict[str, str] = {}
    ops: list[tuple[str, OperatorFingerprint]] = []
    details: dict[int, tuple[int, bool | None]] = {}
    vertices: list[tuple[str, str, int, str]] = []
    states: list[StateOperator] | None = None
    stores: dict[int, list[StateStore]] = {}
    meaning: dict[int, list[tuple[str, str]]] = {}
    sources: list[str] | None = None
    settings: list[tuple[str, str]] = []
    plan: list[str] | None = None
    schemas: dict[tuple[int, str], dict[str, str | None]] = {}  # format 3's [state stores]
    pending: list[Any] | None = None  # a schema written over several lines, so far
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if pending is not None:
            pending[-1] += " " + line
            if unclosed(pending[-1]) <= 0:
                _store_schema(schemas, *pending)
                pending = None
            continue
        if not line or line.startswith("#"):
            continue
        where = f"{origin}, line {number}"
        if line in _SECTIONS:
            if version == 1 and line not in (_OPERATORS, _VERTICES, _STATES):
                raise DocumentError(f"{where}: section {line} does not exist in format 1")
            if version < _SINCE.get(line, 1):
                raise DocumentError(f"{where}: section {line} does not exist in format {version}")
            section = line
            if section == _PLAN:
                if plan is not None:
                    raise DocumentError(f"{where}: a second {_PLAN} section")
                plan = []
            if section == _STATES:
                states = []
            elif section == _SOURCES:
                sources = []
            continue
        if section == _PLAN and plan is not None:
            plan.append(_plan_line(raw, plan[-1] if plan else None, where))
            continue
        cells = _cells(line, where)
        if section == _OPERATORS:
            vertex, op_id, user, par, node, uid, name = _arity(cells, 7, where)
            op = OperatorFingerprint(
                node=_int(node, where),
                name=_string(name, where),
                operator_id=_hex(op_id, where),
                user_operator_id=None if user == _NONE else _hex(user, where),
                uid=None if uid == _NONE else _string(uid, where),
                parallelism=_int(par, where),
            )
            ops.append((vertex, op))
        elif section == _JOB:
            key, value = _arity(cells, 2, where)
            if key not in ("engine", "mode") or key in job:
                raise DocumentError(f"{where}: unexpected [job] row {key[:40]!r}")
            job[key] = _string(value, where)
        elif section == _DETAILS:
            node, max_par, stateful = _arity(cells, 3, where)
            flags = {"true": True, "false": False, _NONE: None}
            if stateful not in flags:
                raise DocumentError(f"{where}: stateful must be true, false or -")
            details[_int(node, where)] = (_int(max_par, where), flags[stateful])
        elif section == _VERTICES:
            vertex, vid, par, name = _arity(cells, 4, where)
            vertices.append((vertex, _hex(vid, where), _int(par, where), _string(name, where)))
        elif section == _STATES and states is not None:
            state_no, op_id, kind, name = _arity(cells, 4, where)
            states.append(
                StateOperator(
                    _int(state_no, where),
                    _hex(op_id, where),
                    _string(name, where),
                    _string(kind, where),
                )
            )
        elif section == _STORES and version >= 3:
            match = _STORE_ROW.fullmatch(line)
            if match is None:
                raise DocumentError(
                    f"{where}: expected state, store, key or value, and a schema (or -)"
                )
            state_no, store, part, schema = match.groups()
            row: list[Any] = [where, _int(state_no, where), _string(store, where), part, schema]
            if not schema.startswith('"') and unclosed(schema) > 0:
                pending = row
            else:
                _store_schema(schemas, *row)
        elif section == _STORES:
            state_no, store, key_schema, value_schema = _arity(cells, 4, where)
            stores.setdefault(_int(state_no, where), []).append(
                StateStore(
                    _string(store, where),
                    None if key_schema == _NONE else _string(key_schema, where),
                    None if value_schema == _NONE else _string(value_schema, where),
                )
            )
        elif section == _MEANING:
            state_no, fact, value = _arity(cells, 3, where)
            meaning.setdefault(_int(state_no, where), []).append(
                (_string(fact, where), _string(value, where))
            )
        elif section == _SETTINGS:
            key, value = (_string(c, where) for c in _arity(cells, 2, where))
            if any(key == k for k, _ in settings):
                raise DocumentError(f"{where}: setting {key[:60]!r} appears twice")
            settings.append((key, value))
        elif section == _SOURCES and sources is not None:
            position, name = _arity(cells, 2, where)
            if _int(position, where) != len(sources):
                raise DocumentError(f"{where}: sources must be numbered 0, 1, ... in order")
            sources.append(_string(name, where))
        else:
            raise DocumentError(f"{where}: a row outside the [operators] section")
    if pending is not None:
        raise DocumentError(f"{pending[0]}: the schema's struct<...> is never closed")
    for (state_number, store_name), parts in schemas.items():
        stores.setdefault(state_number, []).append(
            StateStore(store_name, parts.get("key"), parts.get("value"))
        )
    mode = job.get("mode", "streaming")
    if mode not in ("streaming", "batch"):
        raise DocumentError(f'{origin}: mode must be "streaming" or "batch"')
    engine = job.get("engine", "")  # format 1: none; the registry finds the engine claiming it
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
    _check_whole(lines, version, origin)
    fp = _assemble(ops, vertices, states, origin)
    operators = fp.operators
    job_vertices = fp.job_vertices
    if details:
        operators = tuple(
            op._replace(max_parallelism=details[op.node][0], stateful=details[op.node][1])
            if op.node in details
            else op
            for op in operators
        )
        # A chain's max parallelism is its head's; the head's ID is the chain's ID.
        head = {op.operator_id: op.max_parallelism for op in operators}
        job_vertices = tuple(v._replace(max_parallelism=head.get(v.id, -1)) for v in job_vertices)
    return Fingerprint(
        operators,
        job_vertices,
        fp.state_operators,
        engine,
        mode,
        None if sources is None else tuple(sources),
        None,
        None if plan is None else tuple(plan),
        tuple(settings),
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


# -- the fast path --------------------------------------------------------------------------------
#
# A snapshot written by dumps() (or edited by hand without surprises) is read a section at a
# time: one findall of a strict row pattern over the whole section tokenizes and checks every
# row in C, and columns are then converted with map and zip. The patterns accept a subset of
# what the precise reader accepts (single spaces or more between cells, lower-case IDs, strings
# without raw control characters), with the same tokens. Anything else makes the fast path
# return None, and the precise reader reads the text again, so every message and every corner
# of the format stay the precise reader's. The fast path never accepts a text the precise
# reader rejects, and reads what it accepts to the same value
# (tests/core/test_snapshot_speed_paths.py holds it to that).

_ID = "[0-9a-f]{32}"
_NUMBER = "-?[0-9]{1,10}"
#: The inside of a JSON string: no raw control character or lone surrogate (json.loads or the
#: precise reader rejects them), escapes left for json.loads to check.
_INSIDE = (
    r'[^"\\\x00-\x1f\ud800-\udfff]*(?:\\[^\x00-\x1f\ud800-\udfff][^"\\\x00-\x1f\ud800-\udfff]*)*'
)
#: Every line of a section matches one alternative: a row (groups), a comment or nothing.
_ROW_PATTERNS = {
    _JOB: re.compile(rf'^(?:(engine|mode) +"({_INSIDE})"|#.*|)$', re.MULTILINE),
    _OPERATORS: re.compile(
        rf'^(?:([^\s"#][^\s"]*) +({_ID}) +(-|{_ID}) +({_NUMBER}) +({_NUMBER}) +'
        rf'(-(?= )|"{_INSIDE}") *"({_INSIDE})"|#.*|)$',
        re.MULTILINE,
    ),
    _DETAILS: re.compile(rf"^(?:({_NUMBER}) +({_NUMBER}) +(true|false|-)|#.*|)$", re.MULTILINE),
    _VERTICES: re.compile(
        rf'^(?:([^\s"#][^\s"]*) +({_ID}) +({_NUMBER}) +"({_INSIDE})"|#.*|)$', re.MULTILINE
    ),
}
_FLAGS: dict[str, bool | None] = {"true": True, "false": False, _NONE: None}
_Rows = list[tuple[str, ...]]


def _fast_loads(text: str, version: int) -> Fingerprint | None:
    """:func:`loads` for well-formed text, or ``None`` for the precise reader to take over."""
    if "\r" in text:
        text = text.replace("\r\n", "\n")  # the precise reader strips each line
    chunks = text.split("\n[")
    if any(line and line[0] != "#" for line in chunks[0].split("\n")[1:]):
        return None  # a row before the first section
    sections: dict[str, _Rows] = {}
    for chunk in chunks[1:]:
        title, _, body = chunk.partition("\n")
        name = "[" + title.rstrip()
        pattern = _ROW_PATTERNS.get(name)
        if pattern is None or name in sections:
            return None  # [state operators], [sources], ...: the precise reader
        if version == 1 and name not in (_OPERATORS, _VERTICES):
            return None
        lines = pattern.findall(body)
        if len(lines) != body.count("\n") + 1:
            return None  # a line that is neither a plain row nor a comment
        sections[name] = [row for row in lines if row[1]]
    keys = [key for key, _ in sections.get(_JOB, [])]
    values = [value for _, value in sections.get(_JOB, [])]
    if len(set(keys)) != len(keys) or not _unescape(values):
        return None  # a repeated key (the precise reader names it), or a malformed escape
    job = dict(zip(keys, values, strict=True))
    mode = job.get("mode", "streaming")
    if mode not in ("streaming", "batch"):
        return None
    return _fast_assemble(
        _columns_of(sections.get(_OPERATORS, []), 7),
        _columns_of(sections.get(_VERTICES, []), 4),
        sections.get(_DETAILS, []),
        job.get("engine", ""),
        mode,
    )


def _columns_of(rows: _Rows, width: int) -> list[list[str]]:
    return [list(column) for column in zip(*rows, strict=True)] if rows else [[]] * width


def _fast_assemble(
    operators: list[list[str]],
    vertices: list[list[str]],
    details: _Rows,
    engine: str,
    mode: str,
) -> Fingerprint | None:
    """The :class:`Fingerprint` the precise reader builds from the same rows."""
    labels, ids, user_cells, par_cells, node_cells, uid_cells, names = operators
    v_labels, v_ids, v_pars, v_names = vertices
    if len(set(v_labels)) != len(v_labels):
        return None  # the precise reader's last-one-wins; rare enough to leave to it
    uids: list[str | None] = [None if c == _NONE else c[1:-1] for c in uid_cells]
    if not (_unescape(names) and _unescape(v_names) and _unescape(uids)):
        return None
    vertex_of: dict[str, str | None] = dict(zip(v_labels, v_ids, strict=True))
    vertex_of[_NONE] = None  # "-": in no job vertex, whatever [job vertices] lists
    if not vertex_of.keys() >= set(labels):
        return None
    job_vertex = list(map(vertex_of.__getitem__, labels))
    users = [None if u == _NONE else u for u in user_cells]
    nodes = list(map(int, node_cells))
    number = {cell: int(cell) for cell in set(par_cells)}  # a few distinct parallelisms
    pars = list(map(number.__getitem__, par_cells))
    count = len(ids)
    if details and count:
        # A repeated node: the last row wins, as in the precise reader.
        table = {int(n): (int(m), _FLAGS[f]) for n, m, f in details}
        unset = (-1, None)
        max_pars, stateful = (
            list(c) for c in zip(*map(table.get, nodes, repeat(unset)), strict=True)
        )
        head = dict(zip(ids, max_pars, strict=True))  # a chain's max parallelism is its head's
        v_max = [head.get(v, -1) for v in v_ids]
    else:
        max_pars, stateful = [-1] * count, [None] * count
        v_max = [-1] * len(v_ids)
    rows = zip(nodes, names, ids, users, uids, pars, job_vertex, max_pars, stateful, strict=True)
    ops = tuple(map(tuple.__new__, repeat(OperatorFingerprint), rows))
    chained = list(map(tuple.__new__, repeat(ChainedOperator), zip(ids, users, strict=True)))
    members: dict[str, list[int]] = {label: [] for label in v_labels}
    members[_NONE] = []
    # members[label].append(i) for every operator, in C.
    list(map(list.append, map(members.__getitem__, labels), range(count)))
    groups = [members[label] for label in v_labels]
    job_vertices = tuple(
        map(
            tuple.__new__,
            repeat(JobVertex),
            zip(
                v_ids,
                v_names,
                map(int, v_pars),
                [tuple(map(chained.__getitem__, g)) for g in groups],
                [tuple(map(nodes.__getitem__, g)) for g in groups],
                v_max,
                strict=True,
            ),
        )
    )
    return Fingerprint(ops, job_vertices, None, engine, mode, None)


def _unescape(values: list[Any]) -> bool:
    """Decode, in place, the values (strings, or ``None`` for ``-``) that hold escapes, as the
    precise reader decodes a cell; ``False`` where one is malformed. One join tells whether any
    value has an escape at all (the usual answer: none)."""
    if "\\" not in "".join(filter(None, values)):
        return True
    for i, value in enumerate(values):
        if value is not None and "\\" in value:
            decoded = _plain_string(f'"{value}"')
            if decoded is None:
                return False
            values[i] = decoded
    return True


def _plain_string(cell: str) -> str | None:
    """:func:`_string` without the message: the value, or ``None`` where it would raise."""
    if not cell.startswith('"'):
        return None
    try:
        value = json.loads(cell)
    except (json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(value, str) or _SURROGATE.search(value):
        return None
    return value


def is_snapshot(path: str | os.PathLike[str]) -> bool:
    """Whether the file at ``path`` is an ``.opid`` snapshot, by its first bytes. Only a
    regular file is opened (a FIFO without a writer would block ``open`` forever)."""
    try:
        with open_regular(path) as f:
            return f.read(len(PREFIX)) == PREFIX.encode()
    except (DocumentError, OSError, TypeError, ValueError):
        return False  # the caller's reader reports the problem with the file


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


#: A format 3 ``[state stores]`` row: state, store, part, and the schema (the rest of the line).
_STORE_ROW = re.compile(r'(-?[0-9]{1,10})\s+("(?:[^"\\]|\\.)*")\s+(key|value)\s+(\S.*)')


def _store_schema(
    schemas: dict[tuple[int, str], dict[str, str | None]],
    where: str,
    state: int,
    store: str,
    part: str,
    cell: str,
) -> None:
    """One format 3 schema cell (``-``, a JSON-quoted schema or DDL) into ``schemas``."""
    parts = schemas.setdefault((state, store), {})
    if part in parts:
        raise DocumentError(f"{where}: a second {part} schema for state {state}, store {store!r}")
    if cell == _NONE:
        parts[part] = None
    elif cell.startswith('"'):
        parts[part] = _string(cell, where)
    else:
        try:
            parts[part] = schema_json(cell)
        except ValueError as exc:
            raise DocumentError(f"{where}: malformed {part} schema: {exc}") from None


def _cells(line: str, where: str) -> list[str]:
    return _TOKEN.findall(line)


def _arity(cells: list[str], count: int, where: str) -> list[str]:
    if len(cells) != count:
        raise DocumentError(f"{where}: expected {count} columns, found {len(cells)}")
    return cells


def _string(cell: str, where: str) -> str:
    if not cell.startswith('"'):
        raise DocumentError(f"{where}: expected a quoted string, found {cell[:40]}")
    try:
        value = json.loads(cell)
    except (json.JSONDecodeError, RecursionError):
        raise DocumentError(f"{where}: malformed quoted value {cell[:40]}") from None
    if not isinstance(value, str) or _SURROGATE.search(value):
        raise DocumentError(f"{where}: malformed quoted value {cell[:40]}")
    return value


def _hex(cell: str, where: str) -> str:
    if not _HEX_ID.fullmatch(cell):
        raise DocumentError(f"{where}: {cell[:40]!r} is not a 32-digit hex ID")
    return cell.lower()


def _int(cell: str, where: str) -> int:
    if not _INT.fullmatch(cell):
        raise DocumentError(f"{where}: invalid literal for an integer: {cell[:40]!r}")
    return int(cell)
