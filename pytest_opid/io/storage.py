"""Where previous state is read from: a local path, or a URL of the object store where a
production checkpoint or savepoint lives (``s3://``, ``s3a://``, ``gs://``, ``abfs(s)://``,
``hdfs://``, ``file://``, ``dbfs:/``).

A :class:`Location` is what the user wrote, parsed once: its store, its path there, and the
text every message shows (credentials in the URL replaced by ``***``). It lists a folder,
says whether a file or folder is there and reads a file's first bytes; nothing else, because a
restart verdict needs a handful of small files out of thousands. Remote stores go through
`fsspec <https://filesystem-spec.readthedocs.io>`_ and the file system package made for each
(s3fs, gcsfs, adlfs; pyarrow's HDFS client; fsspec's own Databricks one), imported only when a
URL names them, with each library's own credential chain (the environment, a profile, an
instance role; ``AWS_ENDPOINT_URL`` for an S3-compatible store). Every call to a store has a
deadline (``OPID_STORAGE_TIMEOUT`` seconds, 60 unless set) and few retries; whatever goes
wrong is one :class:`StorageError` line naming the URL and what the store said. A folder's
listing is kept for the Location's tree, so "is this a file" after a listing costs no request:
the requests and bytes read are counted (:attr:`Location.counters`, :func:`read_totals`).

A Databricks volume path (``/Volumes/...``) is a local path on a Databricks cluster (the
volume is mounted there); elsewhere ``dbfs:/Volumes/...`` reads it through the workspace's
API with ``DATABRICKS_HOST`` and ``DATABRICKS_TOKEN``.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from pytest_opid.errors import DocumentError
from pytest_opid.io.json import input_limit, not_regular
from pytest_opid.io.object_stores import (
    TIMEOUT_ENV,
    azure_options,
    is_sas,
    open_filesystem,
    sas_secrets,
    store_timeout,
    what_the_store_said,
)
from pytest_opid.text import MASK, printable, userinfo_span, without_userinfo

__all__ = [
    "TIMEOUT_ENV",
    "Counters",
    "Location",
    "StorageError",
    "is_url",
    "locate",
    "path_or_location",
    "read_totals",
    "read_url",
]


#: URL scheme -> (fsspec protocol, the extra that installs its package, the package)
_SCHEMES = {
    "s3": ("s3", "s3", "s3fs"),
    "s3a": ("s3", "s3", "s3fs"),
    "gs": ("gcs", "gcs", "gcsfs"),
    "gcs": ("gcs", "gcs", "gcsfs"),
    "abfs": ("abfs", "azure", "adlfs"),
    "abfss": ("abfs", "azure", "adlfs"),
    "az": ("abfs", "azure", "adlfs"),
    "hdfs": ("hdfs", "hdfs", "pyarrow"),
    "dbfs": ("dbfs", "", "fsspec"),
    "file": ("file", "", ""),
}


_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):(.*)", re.DOTALL)


#: Environment variables whose values are secrets: never in a message, whatever a store's
#: error text repeats.
_SECRET_ENV = (
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AZURE_STORAGE_KEY",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_STORAGE_CONNECTION_STRING",
    "AZURE_CLIENT_SECRET",
    "DATABRICKS_TOKEN",
    "GOOGLE_OAUTH_ACCESS_TOKEN",
)


class StorageError(DocumentError):
    """A location could not be read: one line naming it and what went wrong. ``what`` is that
    part without the location, for readers that name the file their own way."""

    def __init__(self, shown: str, what: str) -> None:
        super().__init__(f"{shown}: {what}")
        self.what = what


class Counters:
    """Requests sent to a store and bytes read from it (a listing is one request however many
    pages the store answers in; the server counts those)."""

    def __init__(self) -> None:
        self.requests = 0
        self.bytes = 0
        self._lock = threading.Lock()

    def add(self, requests: int, size: int = 0) -> None:
        with self._lock:
            self.requests += requests
            self.bytes += size
        if self is not _TOTALS:
            _TOTALS.add(requests, size)

    def __str__(self) -> str:
        return f"{self.requests} requests, {self.bytes} bytes"


_TOTALS = Counters()


def read_totals() -> tuple[int, int]:
    """Requests and bytes read from remote stores by this process so far."""
    return _TOTALS.requests, _TOTALS.bytes


class _Store:
    """What the Locations of one tree share: the file system (``None``: local files), the
    secrets to keep out of messages, the listings made so far and the counters."""

    def __init__(self, fs: Any, secrets: tuple[str, ...]) -> None:
        self.fs = fs
        self.secrets = secrets
        self.listings: dict[str, dict[str, tuple[str, int | None]]] = {}
        self.counters = Counters()

    def scrub(self, text: str) -> str:
        text = without_userinfo(text, MASK)  # a URL the store's own message repeats
        for secret in (*self.secrets, *_env_secrets()):
            if secret:
                text = text.replace(secret, "***")
        return text


def _env_secrets() -> tuple[str, ...]:
    found = [v for name in _SECRET_ENV if len(v := os.environ.get(name, "")) >= 4]
    # the key or token inside an Azure connection string, as a message might repeat it
    for item in os.environ.get("AZURE_STORAGE_CONNECTION_STRING", "").split(";"):
        key, _, value = item.partition("=")
        if key.strip().lower() in ("accountkey", "sharedaccesssignature") and len(value) >= 4:
            found.append(value.strip())
    return tuple(found)


@dataclass(frozen=True)
class Location:
    """One file or folder, local or in a store: ``shown`` is how messages name it (the URL as
    written, credentials replaced), ``path`` where the store finds it."""

    shown: str
    path: str
    scheme: str = ""
    _store: _Store = field(default_factory=lambda: _Store(None, ()), compare=False, repr=False)

    def __str__(self) -> str:
        return self.shown

    @property
    def is_local(self) -> bool:
        return self._store.fs is None

    @property
    def counters(self) -> Counters:
        return self._store.counters

    @property
    def name(self) -> str:
        return (
            self.path.rstrip("/").rpartition("/")[2] if not self.is_local else Path(self.path).name
        )

    def child(self, *names: str) -> Location:
        """The entry ``names`` down from here (each one path component)."""
        if self.is_local:
            return Location(os.path.join(self.path, *names), os.path.join(self.path, *names))
        tail = "/".join(names)
        return Location(
            self.shown.rstrip("/") + "/" + tail,
            self.path.rstrip("/") + "/" + tail,
            self.scheme,
            self._store,
        )

    def __truediv__(self, name: str) -> Location:
        return self.child(*name.split("/"))

    def _fail(self, what: str) -> StorageError:
        return StorageError(self.shown, self._store.scrub(what).replace("\n", " "))

    # -- what is there -------------------------------------------------------------------------

    def list(self) -> tuple[str, ...]:
        """The names in this folder, sorted."""
        if self.is_local:
            try:
                return tuple(sorted(os.listdir(self.path)))
            except OSError as exc:
                raise self._fail(
                    f"cannot list the folder ({exc.strerror or type(exc).__name__})"
                ) from None
        try:
            return tuple(sorted(self._listing()))
        except _Missing as exc:
            raise self._fail(f"no such folder ({exc})") from None

    def _listing(self) -> dict[str, tuple[str, int | None]]:
        key = self.path.rstrip("/")
        known = self._store.listings.get(key)
        if known is not None:
            return known
        fs = self._store.fs
        entries = self._call("list the folder", fs.ls, key, detail=True)
        found: dict[str, tuple[str, int | None]] = {}
        for entry in entries:
            full = str(entry.get("name", "")).rstrip("/")
            name = full.rpartition("/")[2]
            if not name or full == key:
                continue  # an S3 folder's own marker object
            kind = "dir" if entry.get("type") == "directory" else "file"
            size = entry.get("size")
            found[name] = (kind, size if isinstance(size, int) else None)
        self._store.listings[key] = found
        return found

    def _kind(self) -> tuple[str, int | None] | None:
        """("file"|"dir", size) or None when nothing is there; from the parent's listing when
        it was made."""
        parent, _, name = self.path.rstrip("/").rpartition("/")
        listed = self._store.listings.get(parent)
        if listed is not None:
            return listed.get(name)
        fs = self._store.fs
        try:
            info = self._call("examine it", fs.info, self.path.rstrip("/"))
        except _Missing:
            return None
        kind = "dir" if info.get("type") == "directory" else "file"
        size = info.get("size")
        return kind, size if isinstance(size, int) else None

    def exists(self) -> bool:
        if self.is_local:
            return os.path.exists(self.path)
        return self._kind() is not None

    def is_dir(self) -> bool:
        if self.is_local:
            return os.path.isdir(self.path)
        if not self._listed():  # listed now: the entries below are known for what follows
            try:
                return bool(self._listing())
            except _Missing:
                return False
        found = self._kind()
        return found is not None and found[0] == "dir"

    def is_file(self) -> bool:
        """Whether a regular file is here. Locally anything else there (a FIFO, a device) is
        an error naming it, never taken for a missing file: Spark's readers would fail on it."""
        if not self.is_local:
            found = self._kind()
            return found is not None and found[0] == "file"
        try:
            mode = os.stat(self.path).st_mode
        except (FileNotFoundError, NotADirectoryError):
            return False
        except (OSError, ValueError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise self._fail(f"cannot examine it ({reason})") from None
        if stat.S_ISREG(mode):
            return True
        raise self._fail(f"cannot read it: {not_regular(mode)}")

    # -- reading -------------------------------------------------------------------------------

    def read_bytes(self, max_bytes: int) -> bytes:
        """The file's bytes, at most ``max_bytes + 1`` of them (one more than allowed tells
        the caller the file is larger). Whole or not at all: a read that breaks off, or a
        file changed since its folder was listed, is an error, never a shorter file."""
        if self.is_local:
            return self._read_local(max_bytes)
        listed = self._kind() if self._listed() else None
        size = None if listed is None else listed[1]
        if size == 0:
            return b""
        fs = self._store.fs
        end = max_bytes + 1 if size is None or size > max_bytes else None
        try:
            data = self._call(
                "read the file", fs.cat_file, self.path, start=0 if end else None, end=end
            )
        except _Missing:
            how = "deleted since its folder was listed" if listed else "no such file"
            raise self._fail(f"{how}; read it again") from None
        if not isinstance(data, bytes):
            raise self._fail("the store answered no bytes")
        if size is not None and end is None and len(data) != size:
            raise self._fail(
                f"changed while it was read ({size} bytes listed, {len(data)} read); read it again"
            )
        self._store.counters.add(0, len(data))
        return data

    def write_bytes(self, data: bytes) -> None:
        """Put ``data`` at this remote file in one request (an object store's PUT replaces an
        object whole: a reader sees the old one or the new one, never a part). The only write
        this module makes: the deploy record (``opid record-deploy``) beside a checkpoint."""
        assert not self.is_local
        fs = self._store.fs
        try:
            self._call("write the file", fs.pipe_file, self.path, data)
        except _Missing as exc:
            raise self._fail(f"cannot write the file ({exc})") from None
        self._store.listings.pop(self.path.rstrip("/").rpartition("/")[0], None)

    def _listed(self) -> bool:
        return self.path.rstrip("/").rpartition("/")[0] in self._store.listings

    def _read_local(self, max_bytes: int) -> bytes:
        try:
            # Opened without blocking: a FIFO without a writer would keep open() waiting.
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except OSError as exc:
            raise self._fail(
                f"cannot read the file ({exc.strerror or type(exc).__name__})"
            ) from None
        # What it is, before a file object wraps it: fdopen() of a directory raises
        # IsADirectoryError naming the descriptor number, and leaves the descriptor open.
        try:
            mode = os.fstat(fd).st_mode
        except OSError as exc:
            os.close(fd)
            raise self._fail(
                f"cannot read the file ({exc.strerror or type(exc).__name__})"
            ) from None
        if not stat.S_ISREG(mode):
            os.close(fd)
            raise self._fail(f"cannot read it: {not_regular(mode)}")
        with os.fdopen(fd, "rb") as fh:
            os.set_blocking(fd, True)
            try:
                return fh.read(max_bytes + 1)
            except OSError as exc:
                raise self._fail(
                    f"cannot read the file ({exc.strerror or type(exc).__name__})"
                ) from None

    def walk(self) -> Iterator[tuple[str, int]]:
        """Every file under this folder, as (path relative to it with ``/``, size), from one
        recursive listing (a store answers it in pages)."""
        assert not self.is_local
        fs = self._store.fs
        root = self.path.rstrip("/")
        try:
            found = self._call("list the folder", fs.find, root, detail=True)
        except _Missing:
            return
        for full, entry in sorted(found.items()):
            if entry.get("type") == "directory":
                continue
            rel = str(full).rstrip("/")[len(root) + 1 :]
            size = entry.get("size")
            if rel:
                yield rel, size if isinstance(size, int) else 0

    def _call(self, doing: str, method: Any, *args: Any, **kwargs: Any) -> Any:
        """One request to the store, within the deadline, its failure one line; nothing at
        the path is :class:`_Missing` (but a missing bucket or container, an error)."""
        self._store.counters.add(1)
        try:
            try:
                return method(*args, timeout=store_timeout(), **kwargs)
            except TypeError as exc:  # a file system that runs no event loop: no deadline
                if "timeout" not in str(exc):
                    raise
            return method(*args, **kwargs)
        except FileNotFoundError as exc:
            said = what_the_store_said(exc)
            if said.startswith("no such bucket"):
                raise self._fail(said) from None
            raise _Missing(" ".join(str(exc).split())) from None
        except Exception as exc:
            raise self._fail(f"cannot {doing}: {what_the_store_said(exc)}") from None


class _Missing(Exception):
    """Nothing at the path (the store's FileNotFoundError, kept apart from real failures)."""


def is_url(text: str | os.PathLike[str]) -> bool:
    """Whether ``text`` is a URL of a store this module reads (a Windows drive letter is not)."""
    if not isinstance(text, str):
        return False
    m = _URL.fullmatch(text)
    return m is not None and len(m.group(1)) > 1 and m.group(1).lower() in _SCHEMES


def path_or_location(where: str | os.PathLike[str]) -> Path | Location:
    """A local path as a :class:`~pathlib.Path`, a URL as a :class:`Location`."""
    return locate(where) if is_url(where) else Path(where)


def locate(where: str | os.PathLike[str] | Location) -> Location:
    """The :class:`Location` of a local path or a URL."""
    if isinstance(where, Location):
        return where
    if not is_url(where):
        text = os.fspath(where)
        return Location(text, text)
    text = str(where)
    m = _URL.fullmatch(text)
    assert m is not None
    scheme, rest = m.group(1).lower(), m.group(2)
    protocol, extra, package = _SCHEMES[scheme]
    # credentials in the URL are taken out before anything else reads it: a secret may hold
    # a "/", "?" or "#" that would otherwise end the host or start a query in a message
    userinfo = ""
    span = userinfo_span(text)
    if span is not None:
        userinfo = text[span[0] : span[1] - 1]
        rest = rest[: span[0] - len(scheme) - 1] + rest[span[1] - len(scheme) - 1 :]
    sas = ""
    if "?" in rest or "#" in rest:
        cut = min(i for i in (rest.find("?"), rest.find("#")) if i >= 0)
        query = rest[cut + 1 :]
        if protocol == "abfs" and rest[cut] == "?" and "#" not in query and is_sas(query):
            sas, rest = query, rest[:cut]  # an Azure SAS token: the URL's own credential
        else:
            written = f"{m.group(1)}:{rest[:cut]}"
            if userinfo:
                written = written.replace("://", "://" + MASK, 1)
            raise DocumentError(
                f"{printable(written)}: a query or fragment in a URL is "
                "not read (but an Azure SAS token, ?sv=...&sig=...); give credentials through "
                "the store's usual environment or profile"
            )
    if protocol == "file":
        local = unquote(rest[2:] if rest.startswith("//") else rest)
        if local.startswith("localhost/"):
            local = local[len("localhost") :]
        return Location(local, local)
    options: dict[str, Any] = {}
    secrets: tuple[str, ...] = sas_secrets(sas)
    shown = f"{m.group(1)}:{rest}"  # without a SAS token
    host_and_path = rest[2:] if rest.startswith("//") else rest.lstrip("/")
    host, slash, tail = host_and_path.partition("/")
    if userinfo:  # user:password@ (for S3: access key id and secret)
        key, colon, secret = userinfo.partition(":")
        secrets = (userinfo, secret, unquote(secret)) if colon else (userinfo,)
        shown = f"{m.group(1)}://{MASK}{host}{slash}{tail}"
        if protocol == "s3" and colon:
            options.update(key=unquote(key), secret=unquote(secret))
        elif protocol != "s3":
            host = f"{userinfo}@{host}"
    if protocol == "dbfs":
        path = "/" + host_and_path.lstrip("/")
    elif protocol == "abfs":
        # container@account.dfs.core.windows.net/path: the account for adlfs, the container
        # as the first component of its paths
        container, at, account = host.partition("@")
        options.update(azure_options(account.partition(".")[0] if at else "", sas, shown))
        path = f"{container}/{tail}"
    else:
        path = f"{host}/{tail}"
    fs = open_filesystem(protocol, extra, package, options, text if not secrets else shown)
    return Location(printable(shown), path.rstrip("/") or path, scheme, _Store(fs, secrets))


def read_url(url: str) -> bytes:
    """The whole file at ``url``, within the input limit of every reader
    (``OPID_MAX_INPUT_BYTES``)."""
    limit = input_limit()
    where = locate(url)
    data = where.read_bytes(limit)
    if len(data) > limit:
        raise DocumentError(
            f"{where}: longer than the {limit}-byte limit of an input "
            "(set OPID_MAX_INPUT_BYTES to read a larger one)"
        )
    return data


@contextlib.contextmanager
def counting() -> Iterator[Counters]:
    """The requests and bytes read from stores inside the block."""
    before = read_totals()
    out = Counters()
    try:
        yield out
    finally:
        after = read_totals()
        out.requests, out.bytes = after[0] - before[0], after[1] - before[1]
