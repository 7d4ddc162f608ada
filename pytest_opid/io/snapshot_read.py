"""The ``.opid`` snapshot read back: :func:`loads`, :func:`read_snapshot`, :func:`is_snapshot`.

One reader, line by line, every check naming the line at fault. It holds the text, one line and
that line's cells at a time (a few times the input at most) and does a bounded amount of work per
character: a quoted cell is decoded by the json module's C string scanner (no regular expression
with a repeated group, whose backtracking stack grows with the cell), a struct written over several
lines is collected as a list of its lines and joined once, and every duplicate check is a set or
dict lookup. Formats 1 to 6 are read.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from pytest_opid.errors import DocumentError
from pytest_opid.gc_pause import gc_paused
from pytest_opid.io.json import open_regular, read_text
from pytest_opid.io.saved_form import is_engine_version
from pytest_opid.io.schema import SchemaBudget, unclosed
from pytest_opid.io.snapshot_cells import (
    Cells,
    arity,
    bare_cell,
    cells,
    hex_cell,
    int_cell,
    string_cell,
)
from pytest_opid.io.snapshot_format import (
    DETAILS,
    END,
    ENDPOINTS,
    HEADER,
    HEADERS,
    IDS,
    JOB,
    MEANING,
    NONE,
    OPERATORS,
    PLAN,
    PREFIX,
    SECTIONS,
    SETTINGS,
    SINCE,
    SOURCES,
    STAGES,
    STATES,
    STORES,
    UNTIL,
    VERTICES,
)
from pytest_opid.io.snapshot_rows import (
    SchemaParts,
    meaning_row,
    operator_row,
    plan_line,
    state_row,
    store_row,
    store_schema,
    store_schema_row,
)
from pytest_opid.result import (
    ChainedOperator,
    Fingerprint,
    JobVertex,
    OperatorFingerprint,
    StateOperator,
    StateStore,
)
from pytest_opid.text import printable, quote

__all__ = ["is_snapshot", "loads", "read_snapshot"]


#: Format 6: a stateful operator's mark in [operators], ``state/0``.
_STATE_MARK = re.compile(r"state/(0|[1-9][0-9]{0,9})")

#: [job] keys of formats 1-4; format 5 adds the engine version that made the fingerprint.
_JOB_KEYS = ("engine", "mode")


def loads(text: str, *, origin: str = "the snapshot") -> Fingerprint:
    """Read :func:`dumps` output (formats 1 to 5) back. Raises :class:`DocumentError` naming
    the line at fault; a snapshot cut short, or with a section twice, is such an error."""
    with gc_paused():  # a few objects per operator: the collector's passes would cost more
        return _Reader(text, origin).read()


#: The sections every snapshot of a format has, even one of no operators: dumps() always writes
#: them, so a file without one was cut short (or mangled), not written so.
_REQUIRED = {
    1: (OPERATORS, VERTICES),
    2: (JOB, OPERATORS, VERTICES),
    3: (JOB, OPERATORS, VERTICES),
    4: (JOB, OPERATORS, VERTICES),
    5: (JOB, OPERATORS, VERTICES),
    6: (JOB, OPERATORS, STAGES, IDS),
}

_FLAGS: dict[str, bool | None] = {"true": True, "false": False, NONE: None}

_BOM = "\ufeff"

_BOM_UTF8 = _BOM.encode()


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
        self.endpoints: list[tuple[str, str, str]] | None = None
        self.settings: list[tuple[str, str]] = []
        self.setting_keys: set[str] = set()
        self.plan: list[str] | None = None
        self.schemas: SchemaParts = {}  # format 3's stores
        self.budget = SchemaBudget()  # what this file's schemas expand to, in all
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
        version = HEADERS.get(first.strip())
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
                    store_schema(self.schemas, *pending, runs=version >= 6, budget=self.budget)
                    pending = None
                continue
            if not line or line.startswith("#"):
                continue
            where = f"{origin}, line {number}"
            if self.ended:
                raise DocumentError(f"{where}: text after the [end] line ({self.ended})")
            if line == END:
                if version < 5:
                    raise DocumentError(f"{where}: {END} does not exist in format {version}")
                self.ended = number
                continue
            if line in SECTIONS:
                section = self._section(line, number, where)
                continue
            if section == PLAN and self.plan is not None:
                plan = self.plan
                plan.append(plan_line(raw, plan[-1] if plan else None, where))
                continue
            if section == STORES and version >= 3:
                state_no, store, part, schema = store_schema_row(line, where)
                if not schema.startswith('"') and unclosed(schema) > 0:
                    pending = [where, state_no, store, part, [schema]]
                    depth = unclosed(schema)
                else:
                    store_schema(
                        self.schemas,
                        where,
                        state_no,
                        store,
                        part,
                        schema,
                        runs=version >= 6,
                        budget=self.budget,
                    )
                continue
            self._row(section, cells(line, where), where, number)
        self.lines = number - (raw == "")
        if pending is not None:
            raise DocumentError(
                f"{pending[0]}: the schema's struct<...> is never closed (cut short after "
                f"line {self.lines}?)"
            )
        return self._finish()

    def _section(self, line: str, number: int, where: str) -> str:
        version = self.version
        if version == 1 and line not in (OPERATORS, VERTICES, STATES):
            raise DocumentError(f"{where}: section {line} does not exist in format 1")
        if not SINCE.get(line, 1) <= version <= UNTIL.get(line, version):
            raise DocumentError(f"{where}: section {line} does not exist in format {version}")
        first = self.seen.setdefault(line, number)
        if first != number:
            raise DocumentError(f"{where}: a second {line} section (the first is on line {first})")
        if line == PLAN:
            self.plan = []
        elif line == STATES:
            self.states = []
        elif line == SOURCES:
            self.sources = []
        elif line == ENDPOINTS:
            self.endpoints = []
        return line

    def _first_label(self, cells: Cells, number: int, where: str, what: str) -> str:
        """A [job vertices] or [stages] row's label, refused where an earlier row has it."""
        label = bare_cell(cells, 0, where)
        first = self.vertex_lines.setdefault(label, number)
        if first != number:
            raise DocumentError(
                f"{where}: a second {what} {printable(label[:40])} (the first is on line {first})"
            )
        return label

    def _row(self, section: str | None, cells: Cells, where: str, number: int) -> None:
        if self.version >= 6 and section in (OPERATORS, STAGES, STATES, IDS):
            self._row_ids_once(section, cells, where, number)
        elif section == OPERATORS:
            self.ops.append(operator_row(cells, where))
        elif section == JOB:
            arity(cells, 2, where)
            key = cells[0]
            known = ("engine", "mode", "engine_version") if self.version >= 5 else _JOB_KEYS
            if cells.quoted[0] or key not in known or key in self.job:
                raise DocumentError(f"{where}: unexpected [job] row {key[:40]!r}")
            value = string_cell(cells, 1, where)
            if key == "engine_version" and not is_engine_version(value):
                raise DocumentError(
                    f"{where}: engine_version {quote(value[:40])} is not a version number (3.5.9)"
                )
            self.job[key] = value
        elif section == DETAILS:
            arity(cells, 3, where)
            stateful = cells[2]
            if cells.quoted[2] or stateful not in _FLAGS:
                raise DocumentError(f"{where}: stateful must be true, false or -")
            node = int_cell(cells, 0, where)
            if node in self.details:
                raise DocumentError(f"{where}: a second [operator details] row for node {node}")
            self.details[node] = (int_cell(cells, 1, where), _FLAGS[stateful])
        elif section == VERTICES:
            arity(cells, 4, where)
            label = self._first_label(cells, number, where, "job vertex")
            self.vertices.append(
                (
                    label,
                    hex_cell(cells, 1, where),
                    int_cell(cells, 2, where),
                    string_cell(cells, 3, where),
                )
            )
        elif section == STATES and self.states is not None:
            self.states.append(state_row(cells, where))
        elif section == STORES:
            state, store = store_row(cells, where)
            self.stores.setdefault(state, []).append(store)
        elif section == MEANING:
            state, fact = meaning_row(cells, where)
            self.meaning.setdefault(state, []).append(fact)
        elif section == SETTINGS:
            arity(cells, 2, where)
            key, value = string_cell(cells, 0, where), string_cell(cells, 1, where)
            if key in self.setting_keys:
                raise DocumentError(f"{where}: setting {key[:60]!r} appears twice")
            self.setting_keys.add(key)
            self.settings.append((key, value))
        elif section == SOURCES and self.sources is not None:
            arity(cells, 2, where)
            if int_cell(cells, 0, where) != len(self.sources):
                raise DocumentError(f"{where}: sources must be numbered 0, 1, ... in order")
            self.sources.append(string_cell(cells, 1, where))
        elif section == ENDPOINTS and self.endpoints is not None:
            arity(cells, 3, where)
            self.endpoints.append(
                (
                    string_cell(cells, 0, where),
                    string_cell(cells, 1, where),
                    string_cell(cells, 2, where),
                )
            )
        else:
            raise DocumentError(f"{where}: a row outside the [operators] section")

    def _row_ids_once(self, section: str, cells: Cells, where: str, number: int) -> None:
        """Format 6's own rows: operators without IDs (node = row), stages, stateful operators
        marked in [operators], and the [ids] that the others' IDs are read from."""
        if section == OPERATORS:
            # One arity for the section: with the state column (a job with state) or without.
            self.arity = self.arity or (4 if len(cells) == 4 else 3)
            arity(cells, self.arity, where)
            node = len(self.ops) + 1
            mark = cells[2] if self.arity == 4 else NONE
            if mark != NONE or (self.arity == 4 and cells.quoted[2]):
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
                name=string_cell(cells, self.arity - 1, where),
                operator_id="",
                parallelism=int_cell(cells, 1, where),
            )
            self.ops.append((bare_cell(cells, 0, where), op))
        elif section == STAGES:
            arity(cells, 3, where)
            label = self._first_label(cells, number, where, "stage")
            self.vertices.append(
                (label, "", int_cell(cells, 1, where), string_cell(cells, 2, where))
            )
        elif section == STATES and self.states is not None:
            self.states.append(state_row(cells, where, with_id=False))
        elif section == IDS:
            what = "" if cells.quoted[0] else cells[0]  # a line has a cell
            if what not in ("operators", "stages") or what in self.ids:
                raise DocumentError(
                    f"{where}: expected an [ids] row of operators, then one of stages, each "
                    f"once; found {printable(cells[0][:40])!r}"
                )
            self.ids[what] = ([hex_cell(cells, i, where) for i in range(1, len(cells))], where)

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
                f"{self.origin}: snapshot file is damaged: it has no {END} line, which every "
                f"format {self.version} snapshot ends with {after}"
            )
        if 2 <= self.version <= 4 and self.states and self.sources is None:
            raise DocumentError(
                f"{self.origin}: snapshot file is damaged: it has stateful operators but no "
                f"{SOURCES} section {after}; recreate it with pytest --snapshot-update"
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
            for section_name, numbers in ((STORES, stores), (MEANING, meaning)):
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
            endpoints=None if self.endpoints is None else tuple(self.endpoints),
        )


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
        if number == NONE:
            operators.append(op)
            continue
        if number not in ids:
            raise DocumentError(
                f"{origin}: operator {op.node} names job vertex {number}, "
                "which the [job vertices] section does not list"
            )
        members[number].append(op)
        operators.append(op._replace(job_vertex=ids[number]))
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
