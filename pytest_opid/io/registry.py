"""Where engines plug in: frontends, data formats and restore rules, found by entry point.

An engine package's ``register()`` registers the Python objects it can fingerprint
(:class:`Frontend`), the JSON inputs it reads (:class:`DataFormat`) and the rules that decide
what a change means for it (:class:`~pytest_opid.engine_rules.EngineRules`). Nothing here names
an engine: engines are discovered through the ``pytest_opid.engines`` entry-point group, the
first time something is looked up, so a third-party package can add one the same way the
built-in ones are added:
``[project.entry-points."pytest_opid.engines"] myengine = "my_package:register"``.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from pytest_opid.engine_rules import EngineRules
from pytest_opid.errors import DocumentError, OpidError
from pytest_opid.io.json import parse_json, parse_json_bytes, read_bytes, read_stream
from pytest_opid.io.snapshot import PREFIX, is_snapshot, loads, read_snapshot
from pytest_opid.io.storage import Location, is_url, read_url
from pytest_opid.result import Fingerprint, RestoreCheck

__all__ = [
    "DataFormat",
    "Frontend",
    "RestoreSource",
    "data_formats",
    "engine_rules",
    "fingerprint",
    "load_input",
    "register_engine",
    "register_format",
    "register_frontend",
    "register_hint",
    "register_restore_source",
    "restore_source",
]

ENTRY_POINT_GROUP = "pytest_opid.engines"


@dataclass(frozen=True)
class Frontend:
    """Fingerprints one kind of Python object (a DataFrame, a builder stream...)."""

    name: str
    accepts: Callable[[Any], bool]
    fingerprint: Callable[[Any, Any], Fingerprint]  # (object, chaining rule or None)
    description: str  # what it accepts, for the error that lists them all


@dataclass(frozen=True)
class DataFormat:
    """One kind of JSON input: its ``--format`` name, how to recognise it, how to read it."""

    name: str
    recognises: Callable[[Mapping[str, Any]], bool]
    read: Callable[[Any, Any], Fingerprint]  # (parsed JSON, chaining rule or None)
    description: str
    #: Optional fast path from a file's bytes, (bytes, chaining rule or None): a function
    #: that finishes the fingerprint once the bytes are let go of (a large file's bytes weigh
    #: as much as its topology), or None where the bytes are not plainly this format (then they
    #: are parsed and ``read`` names the fault). It must accept exactly what ``read`` accepts,
    #: with the same results.
    decode: Callable[[bytes, Any], Callable[[], Fingerprint] | None] | None = None


@dataclass(frozen=True)
class RestoreSource:
    """Previous state an engine restores from, on disk (a savepoint, a checkpoint): how to
    recognise its path and how to check a new fingerprint against it."""

    name: str
    recognises: Callable[[Path | Location], bool]
    #: (path, new fingerprint, allow_non_restored_state) -> the engine's verdict
    check: Callable[[Path | Location, Fingerprint, bool], RestoreCheck]
    #: the same for a program not yet fingerprinted, where the engine plans a restarted job
    #: with settings the state pins (Spark's checkpoint confs); ``None``: fingerprint, check
    check_program: Callable[[Path | Location, Any, bool], RestoreCheck] | None = None
    #: (path, program or its fingerprint, allow_non_restored_state, the fingerprint of the job
    #: that wrote the state) -> the verdict, for what the state on
    #: disk does not keep (a Spark checkpoint keeps no plan); None: the source keeps it all.
    check_with_previous: (
        Callable[[Path | Location, Any, bool, Fingerprint], RestoreCheck] | None
    ) = None


class _Registry:
    def __init__(self) -> None:
        self.frontends: list[Frontend] = []
        self.formats: dict[str, DataFormat] = {}
        self.engines: dict[str, EngineRules[Any]] = {}
        self.hints: list[Callable[[Any], str | None]] = []
        self.restore_sources: list[RestoreSource] = []
        self.loaded = False

    def load(self) -> None:
        """Call every engine's ``register()`` named in the entry-point group, once per
        registry (a test harness that re-imports this module gets a fresh, complete one)."""
        if self.loaded:
            return
        self.loaded = True
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            ep.load()()


_REGISTRY = _Registry()


def register_frontend(frontend: Frontend) -> None:
    _REGISTRY.frontends.append(frontend)


def register_restore_source(source: RestoreSource) -> None:
    _REGISTRY.restore_sources.append(source)


def restore_source(path: Path | Location) -> RestoreSource | None:
    """The registered kind of previous state at ``path``, if any recognises it."""
    _REGISTRY.load()
    return next((s for s in _REGISTRY.restore_sources if s.recognises(path)), None)


def register_hint(hint: Callable[[Any], str | None]) -> None:
    """Add a hint for an object no frontend accepts (say, how to turn it into one that is)."""
    _REGISTRY.hints.append(hint)


def register_format(data_format: DataFormat) -> None:
    _REGISTRY.formats[data_format.name] = data_format


def register_engine(rules: EngineRules[Any]) -> None:
    _REGISTRY.engines[rules.name] = rules


def data_formats() -> tuple[str, ...]:
    """The ``--format`` names, saved fingerprints included."""
    _REGISTRY.load()
    return ("fingerprint", *_REGISTRY.formats)


def engine_rules(engine: str, fp: Fingerprint | None = None) -> EngineRules[Any]:
    """The rules of ``engine``; for an untagged fingerprint ``fp``, the engine that claims it."""
    _REGISTRY.load()
    if not engine:
        engine = _untagged_engine(fp)
    try:
        return _REGISTRY.engines[engine]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY.engines)) or "none: is pytest-opid installed?"
        raise DocumentError(f"unknown engine {engine!r} (known: {known})") from None


def _untagged_engine(fp: Fingerprint | None) -> str:
    for name, rules in _REGISTRY.engines.items():
        if fp is not None and rules.claims_untagged(fp):
            return name
    return next(iter(_REGISTRY.engines), "")


# -- fingerprint() --------------------------------------------------------------------------------


def fingerprint(source: Any, *, chaining: Any = None, format: str | None = None) -> Fingerprint:
    """Compute the fingerprint of anything a registered frontend or data format understands:
    a Python object (a topology, a builder stream, a DataFrame, ...), a parsed JSON input, JSON
    text, or the path of a JSON file or ``.opid`` snapshot. ``format`` forces how JSON is read;
    ``chaining`` replaces the engine's chaining rule where the engine has one."""
    _REGISTRY.load()
    if format is not None and format not in data_formats():
        raise ValueError(f"format must be one of {', '.join(data_formats())}, got {format!r}")
    if isinstance(source, Fingerprint):
        return source
    for frontend in _REGISTRY.frontends:
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
    accepted = "; ".join(f.description for f in _REGISTRY.frontends if f.description)
    kinds = "; ".join(f.description for f in _REGISTRY.formats.values())
    module = type(source).__module__ or ""
    hint = next((h for h in map(lambda f: f(source), _REGISTRY.hints) if h), "")
    raise TypeError(
        f"pytest_opid.fingerprint() accepts {accepted}; {kinds}; a saved fingerprint (a dict, "
        f"JSON text or a path); got {module}.{type(source).__qualname__}"
        + (f" ({hint})" if hint else "")
    )


def load_input(path: str, format: str | None = None) -> Fingerprint:
    """The fingerprint of one command-line input: the file at ``path`` (always a path, never
    JSON text), or stdin for ``-``; an ``.opid`` snapshot or a JSON input."""
    _REGISTRY.load()
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
    for f in _REGISTRY.formats.values():
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
            kind = next(iter(_REGISTRY.formats), "fingerprint")  # its reader names the problem
        if kind == "fingerprint":
            return Fingerprint.from_dict(data)
        return _REGISTRY.formats[kind].read(data, chaining)
    except OpidError as exc:
        if origin is None:
            raise
        raise type(exc)(f"{origin}: {exc}") from None


def detect_format(data: Mapping[str, Any]) -> str:
    """The name of the format a parsed JSON object is in (the last registered format that
    recognises it, else the first registered one)."""
    _REGISTRY.load()
    if "job_vertices" in data and "operators" in data:
        return "fingerprint"
    names = list(_REGISTRY.formats)
    for name in reversed(names):
        if _REGISTRY.formats[name].recognises(data):
            return name
    if not names:
        raise DocumentError("no data formats are registered: is pytest-opid installed?")
    return names[0]
