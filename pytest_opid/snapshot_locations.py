"""The locations a committed snapshot keeps (a sink's folder, a checkpoint location, a file
source's folder): byte-stable across runs and machines, and still a move where the location
really moved.

* A folder under a temporary folder of the test run (pytest's ``tmp_path`` and ``--basetemp``,
  the system's temporary folder) is new on every run: the snapshot keeps its last folder's name,
  ``…/out``, which matches any location ending in that folder.
* A local folder under the project's root (pytest's rootdir) is kept relative to it,
  ``<rootdir>/data/out``: the same on every checkout.
* Anything else (``s3a://bucket/warehouse/v1/out``, ``/warehouse/v1/out``) is kept whole,
  without credentials: a move from ``/warehouse/v1/out`` to ``/warehouse/v2/out`` is a change
  against the snapshot, as it is against the whole fingerprint.

Snapshots written before this kept every location as ``…/<last folder>``: such a location still
matches any location ending in that folder (a move between two folders of one name is not seen
until the snapshot is written again with ``--snapshot-update``), so that an old snapshot does not
fail every test that writes outside a temporary folder.
"""

from __future__ import annotations

import os
import posixpath
import tempfile
from collections.abc import Iterable

from pytest_opid.io.location_identity import (
    local_folder,
    qualified_location,
)
from pytest_opid.text import without_userinfo

#: How a snapshot marks a location it kept by its last folder's name (``…/out``).
SHORTENED = "…/"

#: How a snapshot marks a local location it kept relative to the project's root.
PROJECT = "<rootdir>/"

_roots: dict[str, tuple[str, ...]] = {}


def set_roots(temporary: Iterable[str], project: str | None) -> tuple[tuple[str, ...], str | None]:
    """The test run's temporary folders (beside the system's) and the project's root: the
    plugin sets them when pytest starts (``--basetemp``, the rootdir), and puts the ones it
    returns (those before) back when it ends (a pytest run inside a test)."""
    before = _roots.get("temporary", ()), next(iter(_roots.get("project", ())), None)
    _roots["temporary"] = tuple(str(t) for t in temporary)
    _roots["project"] = (project,) if project else ()
    return before


def _temporary_roots() -> tuple[str, ...]:
    given = _roots.get("temporary", ())
    env = os.environ.get("PYTEST_DEBUG_TEMPROOT")
    found = [*given, tempfile.gettempdir(), *([env] if env else [])]
    roots: list[str] = []
    for root in found:
        for spelling in (os.path.abspath(root), os.path.realpath(root)):
            if spelling not in roots:
                roots.append(spelling)
    return tuple(roots)


def _project_root() -> str:
    given = _roots.get("project", ())
    return os.path.abspath(given[0] if given else os.getcwd())


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def snapshot_location(value: str) -> str:
    """``value`` as a committed snapshot keeps it (see the module's docstring)."""
    if not value or is_kept_form(value):
        return value
    local = local_folder(value)
    if local is None:
        return without_userinfo(value)
    for root in _temporary_roots():
        if _under(local, root) or _under(os.path.realpath(local), root):
            name = local.rstrip("/").rsplit("/", 1)[-1]
            return SHORTENED + name
    project = _project_root()
    for spelling in (local, os.path.realpath(local)):
        if _under(spelling, project) and spelling != project:
            return PROJECT + os.path.relpath(spelling, project).replace(os.sep, "/")
    return value


def is_kept_form(value: str) -> bool:
    """``value`` is a snapshot's shortened or project-relative form, not a location."""
    return value.startswith((SHORTENED, PROJECT))


def matches_kept(kept: str, location: str) -> bool | None:
    """Whether a location of a snapshot (``kept``) stands for ``location``; ``None`` where
    ``kept`` is a location itself (compare the two as locations). A ``…/<folder>`` matches
    any location ending in that folder, a ``<rootdir>/<path>`` any ending in that path."""
    if kept.startswith(SHORTENED):
        tail = kept[len(SHORTENED) :]
        if location.startswith(SHORTENED):
            return location[len(SHORTENED) :] == tail
        return _ends_with(location, tail)
    if kept.startswith(PROJECT):
        tail = kept[len(PROJECT) :]
        if location.startswith(PROJECT):
            return location[len(PROJECT) :] == tail
        if location.startswith(SHORTENED):
            return _ends_with(tail, location[len(SHORTENED) :])
        return _ends_with(location, tail)
    return None


def _ends_with(location: str, tail: str) -> bool:
    """``location`` (a location or a relative path) ends in the folders of ``tail``."""
    path = location if is_kept_form(location) else qualified_location(location)
    parts = path.rstrip("/").split("/")
    wanted = [p for p in posixpath.normpath(tail).split("/") if p not in ("", ".")]
    return bool(wanted) and parts[-len(wanted) :] == wanted


__all__ = [
    "PROJECT",
    "SHORTENED",
    "is_kept_form",
    "matches_kept",
    "set_roots",
    "snapshot_location",
]
