"""One identity for a storage location (a checkpoint location, a sink's or a source's folder):
two spellings of one folder compare equal, as the store resolves them.

Two levels, because the engines compare them at two levels:

* :func:`qualified_location`: the location as Hadoop's ``Path`` spells it once qualified (the
  scheme in lower case, as ``java.net.URI`` compares it; ``//`` collapsed, ``.`` and ``..``
  resolved and a trailing ``/`` dropped, as ``Path.normalizePath`` and ``URI.normalize`` do; a
  plain or relative path, ``file:/x``, ``file:///x`` as ``file:/x`` against the working
  folder, as ``FileSystem.makeQualified`` does). Where an engine keeps a location as text and
  compares the text (a file source's log of the files it read), this is what it compares.
* :func:`location_identity`: the objects the location reaches. On top of the above, the
  scheme aliases of one store: ``s3``, ``s3a`` and ``s3n`` name one bucket; ``gs`` and
  ``gcs`` one Cloud Storage bucket; ``abfs``, ``abfss``, ``wasb`` and ``wasbs`` one Azure
  storage account's container (the Blob and the Data Lake endpoints,
  ``<account>.blob.core.windows.net`` and ``<account>.dfs.core.windows.net``, serve the same
  containers); and credentials in the URL (``s3a://KEY:SECRET@bucket``) are no part of it
  (Azure's ``container@account`` is: the container is what comes before the ``@``).

Nothing here reads the store: a symbolic link between two local folders is resolved by
:func:`same_location` only.
"""

from __future__ import annotations

import os
import posixpath
import re

from pytest_opid.text import without_userinfo

#: ``scheme:`` at the start of a URI (RFC 3986); one letter is a Windows drive, not a scheme.
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+):(.*)", re.DOTALL)

#: Schemes that name the same objects, by the one this module writes for them.
_ALIASES = {
    "s3a": "s3",
    "s3n": "s3",
    "gcs": "gs",
    "abfss": "abfs",
    "wasb": "abfs",
    "wasbs": "abfs",
}

#: Schemes whose ``user@`` is the container, not a credential (Azure's ``container@account``).
_CONTAINER_SCHEMES = frozenset({"abfs", "abfss", "wasb", "wasbs"})


def split_location(text: str) -> tuple[str | None, str | None, str]:
    """``(scheme, authority, path)`` of a location as written; ``None`` where it has none (a
    plain path has neither)."""
    match = _SCHEME.fullmatch(text)
    if match is None:
        return None, None, text
    scheme, rest = match.group(1), match.group(2)
    if rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        return scheme, authority, slash + path
    return scheme, None, rest


def _normalized(path: str) -> str:
    """A URI path as ``Path``/``URI.normalize`` leave it: no empty or ``.`` segments, ``..``
    resolved, no trailing ``/`` (the root stays ``/``)."""
    collapsed = re.sub(r"/{2,}", "/", path)
    if not collapsed:
        return ""
    normal = posixpath.normpath(collapsed)
    return "" if normal == "." else normal


def qualified_location(text: str) -> str:
    """``text`` as Hadoop's ``Path`` spells it qualified (see the module's docstring)."""
    scheme, authority, path = split_location(text)
    if scheme is None or scheme.lower() == "file":
        if scheme is not None and authority:  # file://host/x: not this machine's folder
            return f"file://{authority}{_normalized(path) or '/'}"
        local = path if scheme is not None else os.path.abspath(path)
        return "file:" + (_normalized(local) or "/")
    lowered = scheme.lower()
    if authority is None:
        return f"{lowered}:{_normalized(path)}"
    return f"{lowered}://{authority}{_normalized(path)}"


def location_identity(text: str) -> str:
    """The objects ``text`` reaches, as one string: equal for every spelling of one folder
    (see the module's docstring), without credentials."""
    # credentials out first: a secret may hold a "/" that would end the authority early
    qualified = qualified_location(without_userinfo(text))
    scheme, authority, path = split_location(qualified)
    if scheme is None or authority is None:
        return qualified
    scheme = scheme.lower()
    user, at, host = authority.rpartition("@")
    if scheme in _CONTAINER_SCHEMES:
        account = host.lower().replace(".blob.core.", ".dfs.core.")
        return f"abfs://{user}@{account}{path}" if at else f"abfs://{account}{path}"
    return f"{_ALIASES.get(scheme, scheme)}://{host}{path}"


def local_folder(text: str) -> str | None:
    """The local file system path of ``text`` (a plain path or a ``file:`` URI without a host);
    ``None`` for a location in another store."""
    qualified = qualified_location(text)
    if qualified.startswith("file:/") and not qualified.startswith("file://"):
        return qualified[len("file:") :]
    return None


def same_location(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` reach the same objects: the same :func:`location_identity`, or
    two local paths of one folder through a symbolic link."""
    if location_identity(a) == location_identity(b):
        return True
    la, lb = local_folder(a), local_folder(b)
    return la is not None and lb is not None and os.path.realpath(la) == os.path.realpath(lb)
