"""Reading what a user hands over: a Python object, JSON text, a file or stdin, into a
:class:`~pytest_opid.result.Fingerprint`, through the registered engines' frontends and data
formats (:mod:`pytest_opid.engines`), or as a saved fingerprint or ``.opid`` snapshot."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from pytest_opid.engines import DataFormat, Frontend, engines
from pytest_opid.errors import DocumentError, OpidError
from pytest_opid.io.json import parse_json, parse_json_bytes, read_bytes, read_stream
from pytest_opid.io.snapshot import PREFIX, is_snapshot, loads, read_snapshot
from pytest_opid.io.storage import is_url, read_url
from pytest_opid.result import Fingerprint

__all__ = ["data_formats", "detect_format", "fingerprint", "load_input", "read_data", "read_file"]


def _frontends() -> Iterator[Frontend]:
    for known in engines():
        yield from known.frontends


def _formats() -> dict[str, DataFormat]:
    return {f.name: f for known in engines() for f in known.formats}


def data_formats() -> tuple[str, ...]:
    """The ``--format`` names, saved fingerprints included."""
    return ("fingerprint", *_formats())


def fingerprint(source: Any, *, chaining: Any = None, format: str | None = None) -> Fingerprint:
    """Compute the fingerprint of anything a registered frontend or data format understands:
    a Python object (a topology, a builder stream, a DataFrame, ...), a parsed JSON input, JSON
    text, or the path of a JSON file or ``.opid`` snapshot. ``format`` forces how JSON is read;
    ``chaining`` replaces the engine's chaining rule where the engine has one."""
    if format is not None and format not in data_formats():
        raise ValueError(f"format must be one of {', '.join(data_formats())}, got {format!r}")
    if isinstance(source, Fingerprint):
        return source
    for frontend in _frontends():
        if frontend.accepts(source):
            return frontend.fingerprint(source, chaining)
    if isinstance(source, str) and source.lstrip().startswith(("{", "[")):
        return read_data(parse_json(source, "the JSON text"), format, chaining, "the JSON text")
    if isinstance(source, (str, os.PathLike)):
        if format is None and is_snapshot(source):
            return read_snapshot(source)
        return read_file(os.fspath(source), format, chaining)
    if isinstance(source, Mapping):
        return read_data(source, format, chaining, None)
    accepted = "; ".join(f.description for f in _frontends() if f.description)
    kinds = "; ".join(f.description for f in _formats().values())
    module = type(source).__module__ or ""
    hints = (hint(source) for known in engines() for hint in known.hints)
    hint = next((h for h in hints if h), "")
    raise TypeError(
        f"pytest_opid.fingerprint() accepts {accepted}; {kinds}; a saved fingerprint (a dict, "
        f"JSON text or a path); got {module}.{type(source).__qualname__}"
        + (f" ({hint})" if hint else "")
    )


def load_input(path: str, format: str | None = None) -> Fingerprint:
    """The fingerprint of one command-line input: the file at ``path`` (always a path, never
    JSON text), or stdin for ``-``; an ``.opid`` snapshot or a JSON input."""
    if format is not None and format not in data_formats():
        raise DocumentError(f"--format must be one of {', '.join(data_formats())}, got {format!r}")
    origin = "<stdin>"
    if is_url(path):  # a saved fingerprint or snapshot kept in a store
        origin, raw = path, read_url(path)
    elif path != "-":
        if format is None and is_snapshot(path):
            return read_snapshot(path)
        return read_file(path, format, None)
    elif (stdin := getattr(sys.stdin, "buffer", None)) is None:
        # a text stream put in place of stdin (a test harness)
        raw = read_stream(io.BytesIO(sys.stdin.read().encode()), "<stdin>")
    else:
        raw = read_stream(stdin, "<stdin>")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DocumentError(f"{origin}: not UTF-8 text (byte {exc.start})") from None
    if format is None and text.removeprefix("\ufeff").startswith(PREFIX):
        return loads(text, origin=origin)
    return read_data(parse_json(text, origin), format, None, origin)


def read_file(path: str, format: str | None, chaining: Any) -> Fingerprint:
    """The fingerprint of a JSON file: decoded from its bytes by the first format whose fast
    path vouches for them (a saved fingerprint, then the formats that have one), else parsed
    strictly and read by :func:`read_data`, whose errors name the fault."""
    raw = read_bytes(path)
    try:
        finish = _decode(raw, format, chaining)
        if finish is not None:
            del raw
            return finish()
    except OpidError as exc:
        raise type(exc)(f"{path}: {exc}") from None
    return read_data(parse_json_bytes(raw, path), format, chaining, path)


def _decode(raw: bytes, format: str | None, chaining: Any) -> Callable[[], Fingerprint] | None:
    if format in (None, "fingerprint"):
        fp = Fingerprint.decode_fast(raw)
        if fp is not None:
            return lambda: fp
    for f in _formats().values():
        if f.decode is not None and format in (None, f.name):
            finish = f.decode(raw, chaining)
            if finish is not None:
                return finish
    return None


def read_data(data: Any, format: str | None, chaining: Any, origin: str | None) -> Fingerprint:
    """A parsed JSON input read as ``format`` (or the format it is recognised as); errors
    name ``origin``."""
    try:
        kind = format or (detect_format(data) if isinstance(data, Mapping) else "")
        if not kind:
            kind = next(iter(_formats()), "fingerprint")  # its reader names the problem
        if kind == "fingerprint":
            return Fingerprint.from_dict(data)
        return _formats()[kind].read(data, chaining)
    except OpidError as exc:
        if origin is None:
            raise
        raise type(exc)(f"{origin}: {exc}") from None


def detect_format(data: Mapping[str, Any]) -> str:
    """The name of the format a parsed JSON object is in (the last registered format that
    recognises it, else the first registered one)."""
    if "job_vertices" in data and "operators" in data:
        return "fingerprint"
    formats = _formats()
    names = list(formats)
    for name in reversed(names):
        if formats[name].recognises(data):
            return name
    if not names:
        raise DocumentError("no data formats are registered: is pytest-opid installed?")
    return names[0]
