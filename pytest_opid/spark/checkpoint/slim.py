"""The copy of a Spark streaming checkpoint to keep in a repository: what a restart is judged
by, without the state data.

:func:`slim_copy` copies the checkpoint's ``metadata``, ``offsets/``, ``commits/`` and
``sources/`` and, under ``state/``, the operator metadata (``state/<op>/_metadata``), the state
schema files (``state/<op>/_stateSchema``, ``state/<op>/<partition>[/<store>]/_metadata``) and
the partition folders themselves; it leaves out the state stores' data (``*.delta``,
``*.snapshot``, RocksDB's ``*.zip``, ``*.sst``, ``*.changelog``), Hadoop's ``.crc`` checksum
files, and anything else (a sink's output kept inside the checkpoint folder, say). The copy is
read back before the command succeeds: it must read exactly as the original
(:func:`~pytest_opid.spark.checkpoint.read.read_checkpoint`), so every verdict on it is the same.
The copy keeps the location it was copied from (``_opid_slim.json``, without credentials; a copy
of a copy keeps the first one's): the writer a CI job judges against it names that location,
and restarts on the state the copy holds.

Only regular files are copied: a device, a FIFO or a socket where a kept file should be is
refused, naming it (a character device under ``sources/``, which ``tar x`` as root creates, was
copied without end), and symbolic links are skipped and listed. Every file is within a budget
(:data:`DEFAULT_BUDGET` in all, each file also within the input limit of every reader,
``OPID_MAX_INPUT_BYTES``), checked before a byte is copied and again while copying. The copy is
written into a hidden temporary folder beside DEST and renamed to DEST once it reads as the
checkpoint, so DEST exists only when complete; an error, Ctrl-C or SIGTERM removes the
temporary folder and is one line.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import stat
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from pytest_opid.errors import DocumentError
from pytest_opid.io.json import input_limit, not_regular, open_regular
from pytest_opid.io.storage import Location, is_url, locate
from pytest_opid.spark.checkpoint.files import ORIGIN_NAME, RECORD_NAME
from pytest_opid.spark.checkpoint.model import Checkpoint
from pytest_opid.spark.checkpoint.read import read_checkpoint
from pytest_opid.text import MASK, printable, without_userinfo

#: Bytes the copy may hold in all unless ``--max-bytes`` says more: a checkpoint's metadata,
#: logs and schemas are kilobytes to a few megabytes; a compacted file-source log of a large
#: table can reach tens of megabytes.
DEFAULT_BUDGET = 256 * 1024 * 1024


_CHUNK = 1024 * 1024


#: Top-level entries of a checkpoint that the reader uses, copied whole (but their .crc files).
_KEPT = ("metadata", "offsets", "commits", "sources", RECORD_NAME)


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
    #: kept paths that were symbolic links, not copied (relative to the checkpoint)
    skipped: tuple[str, ...] = ()

    def summary(self) -> str:
        """One line for the shell (two where links were skipped)."""
        line = (
            f"wrote {printable(self.dest)}: {self.files} files, {_size(self.size)} (the "
            f"checkpoint: {self.source_files} files, {_size(self.source_size)}); no state "
            "data, and opid checkpoint and opid check-restore read it as the checkpoint itself"
        )
        if self.skipped:
            names = ", ".join(printable(s) for s in self.skipped[:5])
            more = f" and {len(self.skipped) - 5} more" if len(self.skipped) > 5 else ""
            line += f"\nskipped {len(self.skipped)} symbolic links (not followed): {names}{more}"
        return line


def slim_copy(
    src: str | os.PathLike[str], dest: str | os.PathLike[str], budget: int = DEFAULT_BUDGET
) -> SlimCopy:
    """Write the trimmed copy of the checkpoint ``src`` to the new directory ``dest``.

    Raises :class:`DocumentError` (one line naming the path) when ``src`` is not a readable
    Spark checkpoint, when ``dest`` exists (it is never overwritten), when a kept entry is not a
    regular file or the copy would exceed ``budget`` bytes, when the copy would not read as
    the original, or on an interrupt; ``dest`` then does not exist."""
    if is_url(src):  # a checkpoint in a store: SRC as a URL, DEST a local folder
        return _slim_remote(locate(src), Path(dest), budget)
    source, target = Path(src), Path(dest)
    original = read_checkpoint(source)  # names the fault of anything that is not a checkpoint
    _check_target(target)
    if target.resolve().is_relative_to(source.resolve()):
        raise DocumentError(
            f"{printable(str(target))}: inside the checkpoint {printable(str(source))}; give a "
            "folder outside it"
        )
    kept, skipped = _plan(source, budget)
    origin = original.copied_from or os.path.abspath(source)
    _write(target, lambda temporary: _copy(source, temporary, kept, budget), original, origin)
    every = _sizes(source, lambda _rel: True)
    return SlimCopy(
        str(target),
        len(kept),
        sum(kept.values()),
        len(every),
        sum(every.values()),
        tuple("/".join(rel) for rel in skipped),
    )


def _check_target(target: Path) -> None:
    if target.exists() or target.is_symlink():
        raise DocumentError(
            f"{printable(str(target))}: already exists; give a new directory to write the copy to"
        )


def _slim_remote(source: Location, target: Path, budget: int) -> SlimCopy:
    """The slim copy of a checkpoint in a store: one recursive listing, then only the kept
    files read (each whole, within the budget), written and read back as for a local one."""
    original = read_checkpoint(source)
    _check_target(target)
    every = {tuple(rel.split("/")): size for rel, size in source.walk()}
    kept: dict[tuple[str, ...], int] = {}
    per_file, total = min(budget, input_limit()), 0
    for rel, size in sorted(every.items()):
        if not _keeps(rel):
            continue
        where = source.child(*rel)
        if size > per_file:
            raise DocumentError(
                f"{where}: {_size(size)}, over the {_size(per_file)} a kept file may hold "
                "(--max-bytes, OPID_MAX_INPUT_BYTES); not a file Spark wrote as metadata?"
            )
        total += size
        if total > budget:
            raise DocumentError(
                f"{where}: the copy would exceed {_size(budget)} in all; raise it with "
                "--max-bytes if the checkpoint's metadata is really that large"
            )
        kept[rel] = size

    def copy(temporary: Path) -> None:
        for rel in every:  # the partition folders (a checkpoint before Spark 3.5 counts them)
            if len(rel) > 3 and rel[0] == "state" and rel[2].isdigit():
                (temporary / "state" / rel[1] / rel[2]).mkdir(parents=True, exist_ok=True)
        for rel, size in sorted(kept.items()):
            data = source.child(*rel).read_bytes(size)
            if len(data) != size:
                raise DocumentError(f"{source.child(*rel)}: changed while it was copied")
            destination = temporary.joinpath(*rel)
            destination.parent.mkdir(parents=True, exist_ok=True)
            with open(destination, "xb") as out:
                out.write(data)

    # the store's location as shown has its credentials masked (s3a://***@b/q): the origin
    # names the location alone, without the mark
    origin = without_userinfo(source.shown).replace("://" + MASK, "://", 1)
    _write(target, copy, original, original.copied_from or origin)
    return SlimCopy(str(target), len(kept), sum(kept.values()), len(every), sum(every.values()))


def _write(target: Path, copy: Callable[[Path], None], original: Checkpoint, origin: str) -> None:
    """Write the copy into a hidden folder beside ``target`` with ``copy`` and the location
    it is copied from (``origin``), check that it reads as ``original``, and rename it to
    ``target``; nothing is left on failure."""
    source = original.path
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.parent / f".{target.name[:100]}.{secrets.token_hex(6)}.tmp"
        temporary.mkdir()
    except OSError as exc:
        raise DocumentError(
            f"{printable(str(target))}: cannot create it: {exc.strerror or exc}"
        ) from None
    try:
        with _terminate_as_interrupt():
            copy(temporary)
            with open(temporary / ORIGIN_NAME, "x", encoding="utf-8") as out:
                json.dump({"copied_from": origin}, out)
            copied = read_checkpoint(temporary)
            if _comparable(copied.to_dict()) != _comparable(original.to_dict()):
                raise DocumentError(
                    f"{printable(str(source))}: the copy without state data does not read as "
                    "the checkpoint; keep the whole checkpoint instead"
                )
            if target.exists() or target.is_symlink():
                raise DocumentError(
                    f"{printable(str(target))}: appeared while the copy was written; the copy "
                    "was removed"
                )
            os.rename(temporary, target)
    except KeyboardInterrupt:
        shutil.rmtree(temporary, ignore_errors=True)
        raise DocumentError(
            f"{printable(str(target))}: interrupted; the partial copy was removed, nothing was "
            "written"
        ) from None
    except OSError as exc:
        shutil.rmtree(temporary, ignore_errors=True)
        raise DocumentError(
            f"{printable(str(target))}: cannot write the copy: {exc.strerror or exc}"
        ) from None
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (a CI runner's timeout, ``kill``) raises :class:`KeyboardInterrupt` while the
    copy is written, so that it is cleaned up as after Ctrl-C; the old handler comes back after.
    Only the main thread may set handlers: elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _plan(source: Path, budget: int) -> tuple[dict[tuple[str, ...], int], list[tuple[str, ...]]]:
    """The files to copy with their sizes, and the kept paths skipped as links. A kept entry
    that is neither a regular file nor a link, or sizes past the budget, are refused before
    anything is written."""
    kept: dict[tuple[str, ...], int] = {}
    skipped: list[tuple[str, ...]] = []
    per_file = min(budget, input_limit())
    total = 0
    for rel, st in _entries(source):
        if not _keeps(rel):
            continue
        path = printable(str(source.joinpath(*rel)))
        if stat.S_ISLNK(st.st_mode):
            skipped.append(rel)
            continue
        if not stat.S_ISREG(st.st_mode):
            raise DocumentError(
                f"{path}: {not_regular(st.st_mode)}; a checkpoint holds regular files only: "
                "remove it, then run opid checkpoint --slim again"
            )
        if st.st_size > per_file:
            raise DocumentError(
                f"{path}: {_size(st.st_size)}, over the {_size(per_file)} a kept file may hold "
                "(--max-bytes, OPID_MAX_INPUT_BYTES); not a file Spark wrote as metadata?"
            )
        total += st.st_size
        if total > budget:
            raise DocumentError(
                f"{path}: the copy would exceed {_size(budget)} in all; raise it with "
                "--max-bytes if the checkpoint's metadata is really that large"
            )
        kept[rel] = st.st_size
    return kept, skipped


def _entries(root: Path) -> Iterator[tuple[tuple[str, ...], os.stat_result]]:
    """Every entry under ``root`` but directories, with its ``lstat``; links to directories
    are not followed."""
    for folder, dirs, files in os.walk(root):
        here = Path(folder).relative_to(root).parts
        links = [d for d in dirs if os.path.islink(os.path.join(folder, d))]
        dirs[:] = [d for d in dirs if d not in links]
        for name in (*files, *links):
            try:
                st = os.lstat(os.path.join(folder, name))
            except OSError:
                continue  # gone meanwhile
            yield (*here, name), st


def _comparable(data: dict[str, object]) -> dict[str, object]:
    return {key: value for key, value in data.items() if key not in ("path", "copied_from")}


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
    return {
        rel: st.st_size for rel, st in _entries(root) if stat.S_ISREG(st.st_mode) and wanted(rel)
    }


def _copy(source: Path, target: Path, kept: dict[tuple[str, ...], int], budget: int) -> None:
    # The partition folders too (state/<op>/<partition>): a checkpoint without operator
    # metadata (before Spark 3.5) counts its partitions by them.
    state = source / "state"
    if state.is_dir() and not state.is_symlink():
        for op in sorted(state.iterdir()):
            if op.is_dir() and not op.is_symlink():
                for part in sorted(op.iterdir()):
                    if part.is_dir() and not part.is_symlink() and part.name.isdigit():
                        (target / "state" / op.name / part.name).mkdir(parents=True, exist_ok=True)
    left = budget
    for rel in sorted(kept):
        destination = target.joinpath(*rel)
        destination.parent.mkdir(parents=True, exist_ok=True)
        left -= _copy_file(source.joinpath(*rel), destination, min(left, kept[rel]))


def _copy_file(path: Path, destination: Path, most: int) -> int:
    """Copy one regular file (opened as one: a FIFO or device put there meanwhile is refused,
    never read), at most ``most`` bytes; a file that grew past it since it was measured is an
    error. The bytes copied."""
    where = printable(str(path))
    try:
        with open_regular(path) as f, open(destination, "xb") as out:
            copied = 0
            while True:
                chunk = f.read(min(_CHUNK, most - copied + 1))
                if not chunk:
                    return copied
                copied += len(chunk)
                if copied > most:
                    raise DocumentError(f"{where}: grew while it was copied; copy it again")
                out.write(chunk)
    except OSError as exc:
        raise DocumentError(f"{where}: cannot copy it: {exc.strerror or exc}") from None


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KB"
    return f"{n / 1024 / 1024:.1f} MB"
