"""A snapshot row's cells as the reader takes them apart: bare words and JSON-quoted strings
(decoded by the json module's C string scanner), and each kind of cell read back strictly, the
message naming the line."""

from __future__ import annotations

import re
from json.decoder import scanstring  # type: ignore[attr-defined]

from pytest_opid.errors import DocumentError
from pytest_opid.io.snapshot_format import (
    SURROGATE,
)
from pytest_opid.text import printable, quote

__all__ = [
    "Cells",
    "arity",
    "bare_cell",
    "cells",
    "cells_and_rest",
    "hex_cell",
    "int_cell",
    "is_bare",
    "string_cell",
]


_SPACES = re.compile(r"\s*")

_BARE = re.compile(r"\S+")

_HEX_ID = re.compile(r"[0-9a-fA-F]{32}")

_INT = re.compile(r"-?[0-9]{1,10}")


class Cells(list[str]):
    """A row's cells, quoted ones already decoded; ``quoted[i]`` says which were."""

    quoted: list[bool]


def cells(line: str, where: str) -> Cells:
    return cells_and_rest(line, -1)[0]


def cells_and_rest(line: str, count: int) -> tuple[Cells, str]:
    """The first ``count`` cells of a stripped line (all where ``count`` is -1) and the rest of
    the line after them. A quoted cell is decoded by the json module's C scanner (strict: no raw
    control characters), in time and memory linear in the cell; a cell that is not valid JSON
    string text is kept as written, and :func:`string_cell` refuses it."""
    cells = Cells()
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


def arity(cells: list[str], count: int, where: str) -> None:
    if len(cells) != count:
        raise DocumentError(f"{where}: expected {count} columns, found {len(cells)}")


def is_bare(cells: Cells, i: int, word: str) -> bool:
    return not cells.quoted[i] and cells[i] == word


def bare_cell(cells: Cells, i: int, where: str) -> str:
    """A job vertex label (``v1``, or ``-``): written bare, never quoted."""
    if cells.quoted[i]:
        raise DocumentError(f"{where}: a job vertex label is written without quotes")
    return cells[i]


def string_cell(cells: Cells, i: int, where: str) -> str:
    cell = cells[i]
    if not cells.quoted[i]:
        if cell.startswith('"'):
            raise DocumentError(f"{where}: malformed quoted value {printable(cell[:40])}")
        raise DocumentError(f"{where}: expected a quoted string, found {printable(cell[:40])}")
    if SURROGATE.search(cell):
        raise DocumentError(f"{where}: malformed quoted value {quote(cell[:40])}")
    return cell


def hex_cell(cells: Cells, i: int, where: str) -> str:
    cell = cells[i]
    if cells.quoted[i] or not _HEX_ID.fullmatch(cell):
        raise DocumentError(f"{where}: {printable(cell[:40])!r} is not a 32-digit hex ID")
    return cell.lower()


def int_cell(cells: Cells, i: int, where: str) -> int:
    cell = cells[i]
    if cells.quoted[i] or not _INT.fullmatch(cell):
        raise DocumentError(f"{where}: invalid literal for an integer: {printable(cell[:40])!r}")
    return int(cell)
