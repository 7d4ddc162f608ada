"""Fingerprints: the identity of every operator and chain of a job, tagged with its engine.

A :class:`Fingerprint` is what an engine package computes from a topology and what everything
above (comparison, snapshots, the CLI, restore checks) reads. It is plain immutable data. It
says which engine and mode it came from (``engine``, ``mode``), so every message about it can be
worded in that engine's terms, and it round-trips losslessly through :meth:`Fingerprint.to_dict`
and :meth:`Fingerprint.from_dict`: a saved fingerprint explains a change exactly as the live one
does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO, NamedTuple

from pytest_opid.io import saved_fingerprint
from pytest_opid.io.endpoint_values import safe_endpoints
from pytest_opid.io.saved_fingerprint import CHUNK_ROWS
from pytest_opid.text import plural, without_userinfo

__all__ = [
    "ChainedOperator",
    "Fingerprint",
    "JobVertex",
    "OperatorFingerprint",
    "RestoreCheck",
    "RestoreProblem",
    "StateOperator",
    "StateStore",
    "parts_broken",
    "what_breaks",
]

#: The value of a :attr:`StateOperator.meaning` fact that could not be known.
UNKNOWN = "?"


class OperatorFingerprint(NamedTuple):
    """One operator's identity. ``operator_id`` is the generated ID (or the uid's);
    ``user_operator_id`` is a user-defined ID the engine restores state from, where set.
    ``stateful`` says whether the operator keeps state: ``None`` where that is unknown."""

    node: int
    name: str
    operator_id: str
    user_operator_id: str | None = None
    uid: str | None = None
    parallelism: int = -1
    job_vertex: str | None = None  # id of the chain (job vertex, stage) the operator runs in
    max_parallelism: int = -1
    stateful: bool | None = None

    @property
    def state_id(self) -> str:
        """The ID an engine looks up this operator's state under."""
        return self.user_operator_id or self.operator_id


class ChainedOperator(NamedTuple):
    """An operator as a chain lists it: its generated and user-defined IDs."""

    generated: str
    user_defined: str | None = None


class JobVertex(NamedTuple):
    """One chain of operators that runs as one task. ``id`` is the head's ID; ``operators``
    are in the engine's own order; ``nodes`` are the same operators' node ids."""

    id: str
    name: str
    parallelism: int
    operators: tuple[ChainedOperator, ...]
    nodes: tuple[int, ...] = ()
    max_parallelism: int = -1


@dataclass(frozen=True)
class StateStore:
    """One store of a stateful operator, with the schemas the engine checks at restart.
    Schemas are kept as the engine writes them (JSON text), compared as the engine compares."""

    name: str
    key_schema: str | None = None
    value_schema: str | None = None


@dataclass(frozen=True)
class StateOperator:
    """A stateful operator as an engine numbers its state (``state_operator_id``)."""

    state_operator_id: int
    operator_id: str
    name: str
    kind: str
    stores: tuple[StateStore, ...] = ()
    #: What the operator's state means, as ``(fact, value)`` pairs in the engine's order
    #: (grouping keys, aggregates, window, deduplication columns, join keys...): two operators
    #: whose state the engine accepts may still read it as something else. A fact the engine
    #: package could not know has the value :data:`UNKNOWN`; an empty tuple records nothing.
    meaning: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Fingerprint:
    """The identities of a job: operators, chains and, where the engine numbers them, its
    stateful operators. ``engine`` names the engine package that computed it (``""`` where a
    saved form did not say), ``mode`` is ``"streaming"`` or ``"batch"``."""

    operators: tuple[OperatorFingerprint, ...]
    job_vertices: tuple[JobVertex, ...]
    state_operators: tuple[StateOperator, ...] | None = None
    engine: str = ""
    mode: str = "streaming"
    #: what the job reads, by position, where the engine checks it (as the engine names them)
    sources: tuple[str, ...] | None = None
    #: the dataflow: ``(source node, target node, label)`` per edge, in the engine's order, the
    #: label naming how records travel (a partitioner, an exchange) in the engine's words.
    #: ``None`` where unknown (snapshots do not record edges). Pictures only: no identity
    #: depends on it, so it takes no part in equality.
    edges: tuple[tuple[int, int, str], ...] | None = field(default=None, compare=False, repr=False)
    #: the engine's plan as a reviewer reads it: one line per operator, its children below it
    #: indented by two spaces per level, each line the operator's name and what it works on
    #: (tables, keys, functions) in the engine's words. ``None`` where the engine package
    #: records none (streaming jobs, Flink). Part of the identity: two different queries of one
    #: shape differ here.
    plan: tuple[str, ...] | None = None
    #: job-level settings that decide what the operators' parallelism leaves open, as
    #: ``(name, value)`` pairs: an operator whose parallelism comes from one records ``-1``, so
    #: that changing the setting changes one line, not every stage.
    settings: tuple[tuple[str, str], ...] = ()
    #: how the fingerprint was made where that is not the engine's own plan of the object in
    #: its own session (a Spark Connect plan replayed in a local session says "replayed
    #: locally" and for which engine version). Not part of the identity, not saved.
    note: str | None = field(default=None, compare=False)
    #: the engine version that made it (PySpark's ``3.5.9``), where known: restart rules
    #: differ between versions. Saved; not part of the identity.
    engine_version: str | None = field(default=None, compare=False)
    #: what the job reads and writes as a restart acts on it, as ``(endpoint, fact, value)``
    #: rows in the engine's order: ``("sink", "path", "/data/out")``, ``("source 0",
    #: "maxFileAge", "7d")``. A restart can lose or repeat rows at a sink or a source that
    #: no state check sees. ``None`` where nothing was recorded (a job recorded without its
    #: sink); the engine package says which facts it could not see.
    endpoints: tuple[tuple[str, str, str], ...] | None = None

    def __post_init__(self) -> None:
        """No secret is kept, whoever made the fingerprint or wrote the file it was read from:
        option values as facts that cannot carry one, URLs without their credentials
        (:mod:`pytest_opid.io.endpoint_values`). An old file's value is kept as the new one
        would be, so that the two compare equal where the value did not change."""
        if self.endpoints:
            object.__setattr__(self, "endpoints", safe_endpoints(self.endpoints))
        if self.sources and any("://" in s for s in self.sources):
            object.__setattr__(self, "sources", tuple(map(without_userinfo, self.sources)))
        if self.plan and any("://" in line for line in self.plan):
            object.__setattr__(self, "plan", tuple(map(without_userinfo, self.plan)))

    def to_dict(self) -> dict[str, Any]:
        """The saved form: everything a comparison or an explanation uses
        (:mod:`pytest_opid.io.saved_fingerprint`)."""
        return saved_fingerprint.to_dict(self)

    def to_json(self) -> str:
        """The saved form as JSON text, laid out as ``json.dumps(indent=2)`` lays it out."""
        return saved_fingerprint.to_json(self)

    def write_json(self, stream: BinaryIO, rows_per_chunk: int = CHUNK_ROWS) -> None:
        """Write :meth:`to_json`'s text to a binary stream in UTF-8, a few thousand entries
        at a time (a large job's text is never held whole)."""
        saved_fingerprint.write_json(self, stream, rows_per_chunk)

    @classmethod
    def from_dict(cls, data: Any) -> Fingerprint:
        """Read back :meth:`to_dict` output (a saved fingerprint, version 1 or 2), strictly:
        anything it cannot represent exactly is a :class:`DocumentError` naming the place."""
        fp: Fingerprint = saved_fingerprint.read(data, _KINDS)
        return fp

    @classmethod
    def from_json(cls, raw: bytes | str, origin: str = "the JSON text") -> Fingerprint:
        """Read a saved fingerprint from its JSON text (or the file's bytes), as strictly as
        :meth:`from_dict`; a :class:`DocumentError` names ``origin`` and the place at fault."""
        fp: Fingerprint = saved_fingerprint.read_json(raw, origin, _KINDS)
        return fp

    @classmethod
    def decode_fast(cls, raw: bytes | str) -> Fingerprint | None:
        """The saved fingerprint ``raw`` spells, decoded in C, or ``None`` wherever that path
        cannot vouch for the input (then :meth:`from_json` names the fault)."""
        fp: Fingerprint | None = saved_fingerprint.decode_fast(raw, _KINDS)
        return fp


# -- restore checks -----------------------------------------------------------------------------


@dataclass(frozen=True)
class RestoreProblem:
    """One reason the engine would refuse (a problem) or mishandle (a warning) a restore.

    ``kind`` is the engine's category (e.g. ``unmapped_state``, ``key_schema``);
    ``state_id`` is where the old state is filed (an operator ID, or a state directory
    number as text); ``operator_id`` the new operator concerned, where there is one; ``name``
    the operator's name as the previous state records it. ``message`` says what the engine will
    do and how to fix it, in that engine's words."""

    kind: str
    message: str
    state_id: str | None = None
    operator_id: str | None = None
    name: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "operator_id": self.operator_id,
            "state_id": self.state_id,
            "name": self.name,
            "message": self.message,
        }


@dataclass(frozen=True)
class RestoreCheck:
    """Whether a new version of a job starts from the previous one's state, as its engine
    would decide at restore: every problem (the engine stops at the first), and warnings for
    restores that succeed but hand state to the wrong place or ignore a setting."""

    engine: str
    restorable: bool
    problems: tuple[RestoreProblem, ...] = ()
    warnings: tuple[RestoreProblem, ...] = ()
    #: Restores the engine accepts but that hand a stateful operator state written under
    #: another definition (another grouping key, aggregate, window...): results go wrong.
    reinterpreted: tuple[RestoreProblem, ...] = ()
    #: The facts the verdict rests on, checked (``sources``, ``state schemas``, ``state
    #: meaning``...): what the previous state's source could show.
    verified: tuple[str, ...] = ()
    #: What decides whether the restored state means the same and could not be checked from
    #: the previous state's source (a checkpoint keeps no window or key expression), each
    #: saying how to check it. The restore may be safe or not: nobody knows.
    unverified: tuple[RestoreProblem, ...] = ()
    #: How the engine says the restore goes ahead, in its own words ("Spark 4.3 restarts the
    #: new query from the checkpoint"); empty: "the new job starts from the previous state".
    resumes: str = ""

    @property
    def safe(self) -> bool | None:
        """``True``: restorable, and every stateful operator was shown to read its state with
        the meaning it was written with. ``False``: not restorable, or some operator would read
        its state as something else. ``None``: restorable, but what the state means could not
        be checked from the previous state given (:attr:`unverified` says how to check it):
        never "safe" without evidence."""
        if not self.restorable or self.reinterpreted:
            return False
        return None if self.unverified else True

    @property
    def meaning_verified(self) -> bool:
        """Nothing that decides the restored state's meaning was left unchecked."""
        return not self.unverified

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "restorable": self.restorable,
            "safe": self.safe,
            "meaning_verified": self.meaning_verified,
            "verified": list(self.verified),
            "problems": [p.to_dict() for p in self.problems],
            "reinterpreted": [r.to_dict() for r in self.reinterpreted],
            "unverified": [u.to_dict() for u in self.unverified],
            "warnings": [w.to_dict() for w in self.warnings],
        }


#: What the saved form is read into.
_KINDS = saved_fingerprint.Kinds(
    Fingerprint, OperatorFingerprint, ChainedOperator, JobVertex, StateOperator, StateStore
)


def parts_broken(items: Sequence[RestoreProblem]) -> list[str]:
    """The parts of the job the findings ``items`` concern, other than a stateful operator's
    state (a finding about state names where it is filed: ``state_id``): the engine names
    them (``sink``, ``output mode``, a source's position...)."""
    parts: dict[str, None] = {}
    for item in items:
        if item.state_id is not None or item.operator_id is not None:
            continue
        name = item.name or "output"
        parts[f"source {name}" if name.isdigit() else f"the {name}"] = None
    return list(parts)


def what_breaks(items: Sequence[RestoreProblem]) -> str:
    """The verdict's reason, naming what breaks: the stateful operators that read state under
    another meaning, and the other parts by name (where no state is involved, no operator)."""
    operators = {(r.state_id, r.operator_id) for r in items if r.state_id or r.operator_id}
    said = []
    if operators:
        reads = plural(len(operators), "stateful operator reads", "stateful operators read")
        said.append(f"{reads} the previous state under another meaning")
    parts = parts_broken(items)
    if parts:
        kinds = ", ".join(
            dict.fromkeys(
                r.kind.replace("_", " ") for r in items if not (r.state_id or r.operator_id)
            )
        )
        said.append(f"a change at {_joined(parts)} ({kinds})")
    return " and ".join(said) + ", and the results would be wrong"


def _joined(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
