"""A snapshot's rows read from their cells: the checks that need the row alone.

The reader (:mod:`pytest_opid.io.snapshot_read`) keeps what needs the rows before (a label or a
setting met twice, sources numbered in order, a section's arity) and calls these for the rest:
an operator, a stateful operator, a store, a meaning fact, a ``[plan]`` line and a format 3
schema, each checked cell by cell, the message naming the line.
"""

from __future__ import annotations

import json

from pytest_opid.errors import DocumentError
from pytest_opid.io.schema import SchemaBudget, json_schema_checked, schema_json
from pytest_opid.io.snapshot_cells import (
    Cells,
    arity,
    bare_cell,
    cells,
    cells_and_rest,
    hex_cell,
    int_cell,
    is_bare,
    string_cell,
)
from pytest_opid.io.snapshot_format import NONE, SURROGATE
from pytest_opid.result import OperatorFingerprint, StateOperator, StateStore

__all__ = [
    "SchemaParts",
    "meaning_row",
    "operator_row",
    "plan_line",
    "state_row",
    "store_row",
    "store_schema",
    "store_schema_row",
]

#: Format 3's schemas so far: (state, store) -> {"key" or "value": the schema, or None}.
SchemaParts = dict[tuple[int, str], dict[str, str | None]]


def operator_row(cells: Cells, where: str) -> tuple[str, OperatorFingerprint]:
    """An ``[operators]`` row of formats 1 to 5: its job vertex label and the operator."""
    arity(cells, 7, where)
    op = OperatorFingerprint(
        node=int_cell(cells, 4, where),
        name=string_cell(cells, 6, where),
        operator_id=hex_cell(cells, 1, where),
        user_operator_id=None if is_bare(cells, 2, NONE) else hex_cell(cells, 2, where),
        uid=None if is_bare(cells, 5, NONE) else string_cell(cells, 5, where),
        parallelism=int_cell(cells, 3, where),
    )
    return bare_cell(cells, 0, where), op


def state_row(cells: Cells, where: str, *, with_id: bool = True) -> StateOperator:
    """A ``[state operators]`` row: number, ID (not in format 6, where [ids] holds it), kind
    and name."""
    shift = 1 if with_id else 0
    arity(cells, 3 + shift, where)
    return StateOperator(
        int_cell(cells, 0, where),
        hex_cell(cells, 1, where) if with_id else "",
        string_cell(cells, 2 + shift, where),
        string_cell(cells, 1 + shift, where),
    )


def store_row(cells: Cells, where: str) -> tuple[int, StateStore]:
    """A ``[state stores]`` row of format 2: the state's number and one store."""
    arity(cells, 4, where)
    return int_cell(cells, 0, where), StateStore(
        string_cell(cells, 1, where),
        None if is_bare(cells, 2, NONE) else string_cell(cells, 2, where),
        None if is_bare(cells, 3, NONE) else string_cell(cells, 3, where),
    )


def meaning_row(cells: Cells, where: str) -> tuple[int, tuple[str, str]]:
    """A ``[state meaning]`` row: the state's number and one ``(fact, value)``."""
    arity(cells, 3, where)
    return int_cell(cells, 0, where), (string_cell(cells, 1, where), string_cell(cells, 2, where))


def store_schema_row(line: str, where: str) -> tuple[int, str, str, str]:
    """A format 3 ``[state stores]`` row: state, store, part, and the schema (the rest of
    the line)."""
    cells, rest = cells_and_rest(line, 3)
    if len(cells) < 3 or cells[2] not in ("key", "value") or not rest:
        raise DocumentError(f"{where}: expected state, store, key or value, and a schema (or -)")
    return int_cell(cells, 0, where), string_cell(cells, 1, where), cells[2], rest


def store_schema(
    schemas: SchemaParts,
    where: str,
    state: int,
    store: str,
    part: str,
    cell: str,
    *,
    runs: bool = False,
    budget: SchemaBudget | None = None,
) -> None:
    """One format 3 schema cell (``-``, a JSON-quoted schema or DDL) into ``schemas``; what
    it expands to is charged to the file's ``budget``, and a JSON one nested too deeply for
    the checks is refused here, naming the row."""
    parts = schemas.setdefault((state, store), {})
    if part in parts:
        raise DocumentError(f"{where}: a second {part} schema for state {state}, store {store!r}")
    if cell == NONE:
        parts[part] = None
    elif cell.startswith('"'):
        quoted = cells(cell, where)
        arity(quoted, 1, where)
        value = string_cell(quoted, 0, where)
        try:
            json_schema_checked(value, budget)
        except ValueError as exc:
            raise DocumentError(f"{where}: malformed {part} schema: {exc}") from None
        parts[part] = value
    else:
        try:
            parts[part] = schema_json(cell, runs=runs, budget=budget)
        except ValueError as exc:
            raise DocumentError(f"{where}: malformed {part} schema: {exc}") from None


def plan_line(raw: str, above: str | None, where: str) -> str:
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
    if not isinstance(value, str) or SURROGATE.search(value):
        raise DocumentError(f"{where}: malformed escape in the [plan] line")
    return " " * depth + value
