"""The copy of a Spark streaming checkpoint to keep in a repository: what a restart is judged
by, without the state data.

:func:`slim_copy` copies the checkpoint's ``metadata``, ``offsets/``, ``commits/`` and
``sources/`` and, under ``state/``, the operator metadata (``state/<op>/_metadata``), the state
schema files (``state/<op>/_stateSchema``, ``state/<op>/<partition>[/<store>]/_metadata``) and
the partition folders themselves; it leaves out the state stores' data (``*.delta``,
``*.snapshot``, RocksDB's ``*.zip``, ``*.sst``, ``*.changelog``), Hadoop's ``.crc`` checksum
files, and anything else (a sink's output kept inside the checkpoint folder, say). The copy is
read back before the command succeeds: it must read exactly as the original
(:func:`~pytest_opid.spark.checkpoint.read_checkpoint`), so every verdict on it is the same.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pytest_opid.errors import DocumentError
from pytest_opid.spark.checkpoint import read_checkpoint

__all__ = ["SlimCopy", "slim_copy"]

#: Top-level entries of a checkpoint that the reader uses, copied whole (but their .crc files).
_KEPT = ("metadata", "offsets", "commits", "sources")
#: Folders under ``state/<op>/...`` whose files are metadata and schemas, never state data.
_SCHEMA_FOLDERS = ("_metadata", "_stateSchema")


@dataclass(frozen=True)
class SlimCopy:
    """What :func:`slim_copy` wrote: files and bytes kept, and of the whole checkpoint."""

    dest: str
    files: int
    size: int
    source_files: int
    source_size: int

    def summary(self) -> str:
        """One line for the shell."""
        return (
            f"wrote {self.dest}: {self.files} files, {_size(self.size)} (the checkpoint: "
            f"{self.source_files} files, {_size(self.source_size)}); no state data, and "
            "opid checkpoint and opid check-restore read it as the checkpoint itself"
        )


def slim_copy(src: str | os.PathLike[str], dest: str | os.PathLike[str]) -> SlimCopy:
    """Write the trimmed copy of the checkpoint ``src`` to the new directory ``dest``.

    Raises :class:`DocumentError` (one line naming the path) when ``src`` is not a readable
    Spark checkpoint, when ``dest`` exists (it is never overwritten), or when the copy would
    not read as the original (``dest`` is then removed again)."""
    source, target = Path(src), Path(dest)
    original = read_checkpoint(source)  # names the fault of anything that is not a checkpoint
    if target.exists() or target.is_symlink():
        raise DocumentError(f"{target}: already exists; give a new directory to write the copy to")
    if target.resolve().is_relative_to(source.resolve()):
        raise DocumentError(f"{target}: inside the checkpoint {source}; give a folder outside it")
    try:
        target.mkdir(parents=True)
    except OSError as exc:
        raise DocumentError(f"{target}: cannot create it: {exc.strerror or exc}") from None
    try:
        kept = _copy(source, target)
        copy = read_checkpoint(target)
        if _comparable(copy.to_dict()) != _comparable(original.to_dict()):
            raise DocumentError(
                f"{source}: the copy without state data does not read as the checkpoint; "
                "keep the whole checkpoint instead"
            )
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    every = _sizes(source, lambda _rel: True)
    return SlimCopy(str(target), len(kept), sum(kept.values()), len(every), sum(every.values()))


def _comparable(data: dict[str, object]) -> dict[str, object]:
    return {key: value for key, value in data.items() if key != "path"}


def _keeps(rel: tuple[str, ...]) -> bool:
    """Whether the file at ``rel`` (path parts from the checkpoint's root) belongs in the copy."""
    if rel[-1].endswith(".crc"):
        return False
    if rel[0] in _KEPT:
        return True
    return rel[0] == "state" and any(part in _SCHEMA_FOLDERS for part in rel[2:-1])


def _sizes(root: Path, wanted: Callable[[tuple[str, ...]], bool]) -> dict[tuple[str, ...], int]:
    """The regular files under ``root`` that ``wanted`` takes, with their sizes; symbolic links
    are not followed."""
    found: dict[tuple[str, ...], int] = {}
    for folder, dirs, files in os.walk(root):
        here = Path(folder).relative_to(root).parts
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d))]
        for name in files:
            path = os.path.join(folder, name)
            rel = (*here, name)
            if not os.path.islink(path) and wanted(rel):
                found[rel] = os.path.getsize(path)
    return found


def _copy(source: Path, target: Path) -> dict[tuple[str, ...], int]:
    kept = _sizes(source, _keeps)
    # The partition folders too (state/<op>/<partition>): a checkpoint without operator
    # metadata (before Spark 3.5) counts its partitions by them.
    state = source / "state"
    if state.is_dir() and not state.is_symlink():
        for op in sorted(state.iterdir()):
            if op.is_dir() and not op.is_symlink():
                for part in sorted(op.iterdir()):
                    if part.is_dir() and not part.is_symlink() and part.name.isdigit():
                        (target / "state" / op.name / part.name).mkdir(parents=True, exist_ok=True)
    for rel in sorted(kept):
        destination = target.joinpath(*rel)
        destination.parent.mkdir(parents=True, exist_ok=True)
        try:
            shutil.copyfile(source.joinpath(*rel), destination)
        except OSError as exc:
            raise DocumentError(
                f"{source.joinpath(*rel)}: cannot copy it: {exc.strerror or exc}"
            ) from None
    return kept


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KB"
    return f"{n / 1024 / 1024:.1f} MB"
