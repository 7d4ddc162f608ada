"""Where a test's snapshot files are and what they are called: a file's snapshot index, one
spelling per file, and the message for two recordings that map to one file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_opid.io.storage import Location, is_url, locate

if TYPE_CHECKING:
    pass

__all__ = [
    "beside_test",
    "collision",
    "path_key",
    "relative",
    "snapshot_index",
]


def snapshot_index(filename: str, base: str) -> int | str | None:
    """The snapshot index whose file is ``filename`` for a test whose index-0 snapshot name is
    ``base`` (``test_x``, ``test_x.2``, ``test_x[name]``), or None."""
    if not filename.endswith(".opid"):
        return None
    stem = filename[: -len(".opid")]
    if stem == base:
        return 0
    if not stem.startswith(base):
        return None
    rest = stem[len(base) :]
    if rest[:1] == "." and rest[1:].isascii() and rest[1:].isdigit() and rest[1] != "0":
        return int(rest[1:])
    if rest[:1] == "[" and rest.endswith("]") and len(rest) > 2:
        return rest[1:-1]
    return None


def beside_test(item: pytest.Item, path: Any) -> Path | Location:
    """A path as the test wrote it: relative ones from the test file's folder; a URL (the
    store a production checkpoint lives in) as a :class:`Location`."""
    if is_url(path):
        return locate(path)
    path = Path(path)
    return path if path.is_absolute() else Path(item.path).parent / path


def relative(location: str, root: Path) -> str:
    try:
        return str(Path(location).relative_to(root))
    except ValueError:
        return location


def path_key(location: str) -> str:
    """One spelling per snapshot file: the directory resolved (a symlinked ``__snapshots__``),
    the file name as is (a link at the file itself is refused, not followed)."""
    directory, name = os.path.split(os.path.abspath(location))
    return os.path.normcase(os.path.join(os.path.realpath(directory), name))


def collision(mine: tuple[str, int | str], other: tuple[str, int | str], where: str) -> str:
    if mine[0] == other[0]:
        who = f"{mine[0]} records two topologies ({other[1]!r} and {mine[1]!r}) that map"
    else:
        who = f"{other[0]} and {mine[0]} map"
    return (
        f"{who} to one snapshot file, {where}, and would overwrite each other's snapshot: "
        'syrupy drops \\/?*:|"<> and control characters from snapshot file names and cuts them '
        "at 250 characters; give them ids (pytest.param(..., id=...)) or name= values that "
        "stay distinct"
    )
