"""The syrupy extension that stores fingerprints as ``.opid`` snapshots.

:class:`TopologySnapshotExtension` plugs the text format of :mod:`pytest_opid.io.snapshot` into
syrupy as a single-file extension (``__snapshots__/<test module>/<test name>.opid``), so
``--snapshot-update``, unused-snapshot detection and pytest-xdist work as they do for syrupy's
own extensions. Its comparison is semantic (:meth:`TopologySnapshotExtension.matches`): names
and other details may differ as long as the engine would restore the same state, except under
``--snapshot-update``, where any difference rewrites the file.

A snapshot is the user's record of what runs in production, so the file handling is stricter
than syrupy's: every write is atomic (a temporary file in the same directory, fsync'ed, then
``os.replace``), a symbolic link or a directory at a snapshot path is refused instead of being
read, written through or deleted, and a file that is not UTF-8 is reported (and replaced by
``--snapshot-update``) instead of failing with a decoding traceback.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import warnings
from collections.abc import Iterator
from typing import Any, ClassVar

from syrupy.extensions.single_file import SingleFileSnapshotExtension

from pytest_opid.engine_rules import Check
from pytest_opid.engines import engine_rules
from pytest_opid.errors import OpidError
from pytest_opid.inputs import fingerprint
from pytest_opid.io.json import input_limit
from pytest_opid.io.snapshot import dumps
from pytest_opid.plugin.judge import Judgement, judge

__all__ = ["SnapshotPathError", "TopologySnapshotExtension", "Unreadable", "atomic_write"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_BINARY = getattr(os, "O_BINARY", 0)


class SnapshotPathError(OpidError):
    """Something at a snapshot path that pytest-opid will neither read nor replace (a link, a
    directory, a file it may not open). ``problem`` is the message without the path, for the
    plugin's one-line failure, which names the path itself."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


class Unreadable(str):
    """What a snapshot file that is not UTF-8 text reads as: the reason, as text that never
    matches, so that a normal run explains it and ``--snapshot-update`` replaces the file."""

    __slots__ = ()


class TopologySnapshotExtension(SingleFileSnapshotExtension):
    """syrupy extension for topology fingerprints: one ``.opid`` text file per snapshot.

    ``check`` says what must stay stable (:class:`~pytest_opid.engine_rules.Check`); ``exact``
    asks for byte equality instead, which the plugin sets under ``--snapshot-update`` so that
    renames are written back too. ``keep`` makes an assertion that reads, compares and writes
    nothing and only tells syrupy the snapshot is in use (the plugin's guard for failed tests).
    All three are instance attributes the plugin sets per test; syrupy itself creates the class
    without arguments (also on the pytest-xdist controller, to delete unused snapshots), which
    gives the defaults.
    """

    file_extension = "opid"
    #: what is held stable; ``None``: the job's own default (:meth:`Check.default_for`)
    check: Check | None = None
    exact: bool = False
    keep: bool = False
    allow_reinterpreted_state: bool = False
    #: the plugin's verdict, judged once before the assertion (``None``: compare here)
    verdict: bool | None = None
    #: the snapshot text the plugin serialized already (``None``: serialize here)
    text: str | None = None
    #: the last assertion's texts and their judgement, which :meth:`diff_lines` reuses
    _last: tuple[tuple[Any, ...], Judgement] | None = None
    #: unused snapshots syrupy asked to delete that could not be (the plugin reports them)
    delete_failures: ClassVar[list[str]] = []
    #: where those snapshots are: syrupy's summary must not count them as deleted
    kept_locations: ClassVar[list[str]] = []

    @classmethod
    def get_supported_dataclass(cls) -> type[str]:
        """Snapshots are text (syrupy's single-file extension asks; its default is bytes)."""
        return str

    @classmethod
    def get_write_encoding(cls) -> str:
        return "utf-8"

    def serialize(self, data: Any, **kwargs: Any) -> str:
        """Anything :func:`pytest_opid.fingerprint` accepts, as snapshot text."""
        if self.keep:
            return ""
        if self.text is not None:
            return self.text
        fp = fingerprint(data)
        rules = engine_rules(fp.engine, fp)
        # An engine that finds state by position (Spark) gets its operator IDs written once.
        ids_once = not rules.ids_find_state
        return dumps(rules.snapshot_form(fp), rules.snapshot_preamble(fp), ids_once=ids_once)

    def matches(self, *, serialized_data: Any, snapshot_data: Any) -> bool:
        if self.keep:
            return False
        if self.verdict is not None:
            return self.verdict
        return self._judgement(serialized_data, snapshot_data).passes

    def diff_lines(self, serialized_data: Any, snapshot_data: Any) -> Iterator[str]:
        """What syrupy prints under a failed ``assert ... == snapshot``: the explanation, from
        the judgement :meth:`matches` made (nothing is compared again)."""
        message = self._judgement(serialized_data, snapshot_data).message
        yield from (message or "").splitlines()

    def _judgement(self, serialized_data: Any, snapshot_data: Any) -> Judgement:
        """The judgement of one assertion, made once: syrupy asks :meth:`matches`, then, when
        it fails, :meth:`diff_lines` with the same two texts (and the same settings)."""
        key = (
            serialized_data,
            snapshot_data,
            self.check,
            self.allow_reinterpreted_state,
            self.exact,
        )
        if self._last is not None and self._last[0] == key:
            return self._last[1]
        judgement = judge(
            None if snapshot_data is None else str(snapshot_data),
            str(serialized_data),
            check=self.check,
            allow_reinterpreted_state=self.allow_reinterpreted_state,
            exact=self.exact,
            unreadable=isinstance(snapshot_data, Unreadable),
        )
        self._last = (key, judgement)
        return judgement

    # -- files --------------------------------------------------------------------------------

    def read_snapshot_data_from_location(
        self, *, snapshot_location: str, snapshot_name: str, session_id: str
    ) -> Any:
        """The snapshot's text, ``None`` if there is none, :class:`Unreadable` if it is not
        UTF-8; a link or a directory raises :class:`SnapshotPathError` (never followed)."""
        if self.keep:
            return ""  # nothing is read: the assertion only marks the snapshot as used
        if _existing(snapshot_location) is None:
            return None
        try:
            fd = os.open(snapshot_location, os.O_RDONLY | _NOFOLLOW | _BINARY)
        except FileNotFoundError:
            return None
        except OSError as exc:
            _existing(snapshot_location)  # a link or a directory that appeared meanwhile
            raise SnapshotPathError(
                snapshot_location, f"cannot be read ({exc.strerror or exc}); fix its permissions"
            ) from None
        # Checked before a file object wraps it: fdopen() of a directory (one that appeared
        # since _existing looked) raises naming the descriptor number and leaks it.
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise SnapshotPathError(snapshot_location, "is not a regular file")
        with os.fdopen(fd, "rb") as f:
            limit = input_limit()
            data = f.read(limit + 1)  # a snapshot is read to the limit of any input
        if len(data) > limit:
            return Unreadable(
                f"more than the {limit}-byte limit of an input (OPID_MAX_INPUT_BYTES), "
                "not a snapshot pytest-opid wrote"
            )
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            return Unreadable(f"not UTF-8 text (byte {exc.start} is {data[exc.start]:#04x})")

    @classmethod
    def write_snapshot_collection(cls, *, snapshot_collection: Any, name_order: Any = None) -> None:
        """Write atomically: readers (and a later run, after a crash or a SIGKILL at any
        moment) see the old file or the new one, never a part of it."""
        data = next(iter(snapshot_collection)).data
        if not isinstance(data, str):
            raise TypeError(f"can't write {type(data).__name__} data as an .opid snapshot")
        atomic_write(snapshot_collection.location, data.encode("utf-8"))

    def delete_snapshots(self, *, snapshot_location: str, snapshot_names: set[str]) -> None:
        """syrupy deletes unused snapshots under ``--snapshot-update``; never a directory, and a
        link is removed itself, never the file it points to."""
        try:
            mode = os.lstat(snapshot_location).st_mode
        except FileNotFoundError:
            return
        if stat.S_ISDIR(mode):
            warnings.warn(
                f"pytest-opid: {snapshot_location} is a directory, not a snapshot file; "
                "it is left in place (pytest-opid never deletes a directory)",
                stacklevel=1,
            )
            type(self).kept_locations.append(snapshot_location)
            return
        try:
            os.unlink(snapshot_location)
        except OSError as exc:  # a read-only folder: syrupy deletes at the session's end
            problem = f"{snapshot_location}: unused, but cannot be deleted ({exc.strerror or exc})"
            type(self).delete_failures.append(problem)
            type(self).kept_locations.append(snapshot_location)
            warnings.warn(f"pytest-opid: {problem}; it is left in place", stacklevel=1)


def _existing(path: str) -> os.stat_result | None:
    """``lstat`` of what is at ``path`` (``None``: nothing), refusing what a snapshot must
    not be: a link (a write through it changes another file), a directory, a device."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SnapshotPathError(path, f"cannot be examined ({exc.strerror or exc})") from None
    if stat.S_ISLNK(st.st_mode):
        raise SnapshotPathError(
            path,
            "is a symbolic link; pytest-opid never reads or writes a snapshot through a link "
            "(an update would change the file it points to): replace it with a regular file",
        )
    if stat.S_ISDIR(st.st_mode):
        raise SnapshotPathError(
            path,
            "is a directory, not a snapshot file; pytest-opid never deletes a directory: "
            "move it away, then run pytest --snapshot-update",
        )
    if not stat.S_ISREG(st.st_mode):
        raise SnapshotPathError(path, "is not a regular file; move it away")
    return st


def atomic_write(path: str, payload: bytes) -> None:
    """Replace the file at ``path`` with ``payload`` atomically: write a temporary file in the
    same directory (same file system, so the rename is atomic), flush and fsync it, then
    ``os.replace`` it over the old file. A crash leaves the old file and, at worst, a hidden
    ``.<name>.<random>.tmp`` file behind. Links, directories and devices at ``path`` are
    refused; the old file's permission bits are kept."""
    try:
        _replace(path, payload)
    except OSError as exc:  # a read-only folder, a full disk: the old file is untouched
        raise SnapshotPathError(
            path, f"cannot be written ({exc.strerror or exc}); the old file, if any, is unchanged"
        ) from None


def _replace(path: str, payload: bytes) -> None:
    old = _existing(path)
    directory, name = os.path.split(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _BINARY
    while True:
        # Hidden, so syrupy's snapshot discovery skips it; short enough for any file system.
        temporary = os.path.join(directory, f".{name[:120]}.{secrets.token_hex(8)}.tmp")
        try:
            fd = os.open(temporary, flags, 0o666)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        if old is not None:
            os.chmod(temporary, stat.S_IMODE(old.st_mode))
        _existing(path)  # a link or a directory put there meanwhile is refused, not replaced
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    _fsync_directory(directory)


def _fsync_directory(directory: str) -> None:
    """Make the rename itself durable (POSIX); a no-op where directories cannot be opened."""
    try:
        fd = os.open(directory or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)
