"""The engines, one object each: what an engine fingerprints, reads, judges and says.

An engine package's ``register()`` (named in the ``pytest_opid.engines`` entry-point group)
hands :func:`register_engine` one :class:`Engine`: its frontends (the Python objects it
fingerprints), its data formats (the JSON inputs it reads), its rules (what a change means
there, :class:`~pytest_opid.engine_rules.EngineRules`) and its :class:`RestoreEntrance`, the one
place its restore verdict is decided. Every route that asks "would the new version start from
the old one's state?" (the marker's ``previous=``, the fixture's ``check_restore``, the Python
API, ``opid check-restore``) reaches that entrance through :func:`pytest_opid.check_restore`.

Nothing here names an engine: a third-party package adds one the same way the built-in ones are
added, ``[project.entry-points."pytest_opid.engines"] myengine = "my_package:register"``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Protocol

from pytest_opid.engine_rules import EngineRules
from pytest_opid.errors import DocumentError
from pytest_opid.io.storage import Location
from pytest_opid.result import Fingerprint, RestoreCheck

__all__ = [
    "DataFormat",
    "Engine",
    "Frontend",
    "RestoreEntrance",
    "RestoreOptions",
    "engine",
    "engine_for_state",
    "engine_rules",
    "engines",
    "register_engine",
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
class RestoreOptions:
    """What a user may say about a restore besides the previous state and the program."""

    #: Flink's ``--allowNonRestoredState``: state that maps to no operator is dropped
    allow_non_restored_state: bool = False
    #: the fingerprint of the job that wrote previous state on disk, for what that state does
    #: not keep (a Spark checkpoint keeps no window or key expression)
    previous_fingerprint: Fingerprint | None = None
    #: the program restarts on the previous state given, whatever location it names itself
    #: (a test's writer names a test folder; the marker's previous= is a copy of production's
    #: Spark checkpoint, the one it restarts on)
    restarts_on_previous: bool = False


class RestoreEntrance(Protocol):
    """The one place an engine decides whether a program starts from previous state.

    ``previous`` is either a path the entrance :meth:`recognises` (a savepoint, a checkpoint)
    or a fingerprint of this engine's (a snapshot, a saved fingerprint). ``program`` is a live
    program (what a frontend accepts), which the entrance plans as the engine plans a restarted
    job (Spark: with the settings the checkpoint pins), or a fingerprint."""

    #: what previous state on disk this engine restores from, for messages ("a Spark
    #: checkpoint directory")
    state_kind: str
    #: whether that state keeps everything the verdict needs; ``False``: a previous
    #: fingerprint (:attr:`RestoreOptions.previous_fingerprint`) adds what it does not keep
    keeps_plan: bool

    def recognises(self, path: Path | Location) -> bool:
        """Whether ``path`` is previous state of this engine's on disk."""

    def check(
        self, previous: Path | Location | Fingerprint, program: Any, options: RestoreOptions
    ) -> RestoreCheck:
        """The engine's verdict on restoring ``program`` from ``previous``."""


@dataclass(frozen=True)
class Engine:
    """Everything one engine contributes, registered as one object."""

    name: str
    rules: EngineRules[Any]
    restore: RestoreEntrance
    frontends: tuple[Frontend, ...] = ()
    formats: tuple[DataFormat, ...] = ()
    #: hints for an object no frontend accepts (say, how to turn it into one that is)
    hints: tuple[Callable[[Any], str | None], ...] = ()


class _Registry:
    def __init__(self) -> None:
        self.engines: dict[str, Engine] = {}
        self.loaded = False

    def load(self) -> dict[str, Engine]:
        """Call every ``register()`` named in the entry-point group, once per registry (a
        test harness that re-imports this module gets a fresh, complete one)."""
        if not self.loaded:
            self.loaded = True
            for ep in entry_points(group=ENTRY_POINT_GROUP):
                ep.load()()
        return self.engines


_REGISTRY = _Registry()


def register_engine(new: Engine) -> None:
    """Register ``new`` (again under its name: the later one wins)."""
    _REGISTRY.engines[new.name] = new


def engines() -> tuple[Engine, ...]:
    """Every registered engine, in registration order."""
    return tuple(_REGISTRY.load().values())


def engine(name: str, fp: Fingerprint | None = None) -> Engine:
    """The engine ``name``; for an untagged fingerprint ``fp`` (``name`` empty), the engine
    that claims it."""
    known = _REGISTRY.load()
    if not name:
        name = next(
            (n for n, e in known.items() if fp is not None and e.rules.claims_untagged(fp)),
            next(iter(known), ""),
        )
    try:
        return known[name]
    except KeyError:
        names = ", ".join(sorted(known)) or "none: is pytest-opid installed?"
        raise DocumentError(f"unknown engine {name!r} (known: {names})") from None


def engine_rules(name: str, fp: Fingerprint | None = None) -> EngineRules[Any]:
    """The rules of the engine ``name`` (see :func:`engine`)."""
    return engine(name, fp).rules


def engine_for_state(path: Path | Location) -> Engine | None:
    """The engine whose previous state on disk ``path`` is, if any recognises it."""
    return next((e for e in engines() if e.restore.recognises(path)), None)
