"""The saved form of a fingerprint, declared: its versions and the keys of each of its objects.

The declarations (msgspec structs) are the one list of each object's keys. The fast reader
(:mod:`pytest_opid.io.saved_fast`) decodes them in C, the strict one
(:mod:`pytest_opid.io.saved_read`) takes its known keys from them, and the writer
(:mod:`pytest_opid.io.saved_write`) writes the same rows: the three cannot drift apart.

The form knows no result class: :mod:`pytest_opid.result` hands in the types it is read into
(:class:`Kinds`), since it imports the saved form for ``Fingerprint.to_dict`` and
``Fingerprint.from_dict``, and naming them here would make the two import each other.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, Literal, NamedTuple

from msgspec import Meta, Struct

from pytest_opid.io.json import CountedDefaults

__all__ = [
    "DEFAULTS",
    "ENGINE_VERSION",
    "KEYS",
    "SAVED_VERSION",
    "UNVERSIONED",
    "Kinds",
    "SavedForm",
    "SavedKeys",
    "SavedMember",
    "SavedOperator",
    "SavedState",
    "SavedStore",
    "SavedVertex",
    "is_engine_version",
    "version_written",
]

#: Version of the saved form the writer writes where the fingerprint names the engine version
#: that made it (``engine_version``, since version 3); version 2 is written where it names none
#: (Flink), byte for byte as before. Version 1 (no ``version`` key, no engine tag) is still read.
SAVED_VERSION = 3
#: The version written without an ``engine_version``.
UNVERSIONED = 2
#: An engine version as its package spells it (PySpark's ``3.5.9``, ``4.1.0.dev1``).
ENGINE_VERSION = re.compile(r"[0-9]{1,4}(?:\.[0-9]{1,4}){1,3}(?:[.+\-]?[0-9A-Za-z]{1,16}){0,4}")
_VERSION_CHARS = 48


class Kinds(NamedTuple):
    """The types a saved fingerprint is read into (:mod:`pytest_opid.result`'s), in the
    order of their fields there."""

    fingerprint: Callable[..., Any]
    operator: Any  # a NamedTuple class: built with ``_make`` and ``tuple.__new__`` too
    chained: Any
    vertex: Any
    state: Callable[..., Any]
    store: Callable[..., Any]


def is_engine_version(text: str) -> bool:
    """Whether ``text`` is an engine version as its package spells it (``3.5.9``)."""
    return len(text) <= _VERSION_CHARS and ENGINE_VERSION.fullmatch(text) is not None


def version_written(fp: Any) -> int:
    """The version the saved form of ``fp`` says: 3 where it names its engine version."""
    return UNVERSIONED if fp.engine_version is None else SAVED_VERSION


# msgspec keeps the last of a repeated key, so the fast reader counts the keys the objects hold
# against the text's (``key_count``): a difference sends the input to the precise path, which
# names the repetition. A key the text leaves out takes a counted default
# (``io.json.CountedDefaults``), so the keys held are the fields decoded less the defaults taken,
# with no second look at any object. Every constraint the precise reader checks is a type or a
# Meta here, or a check in the fast reader.

_Int32 = Annotated[int, Meta(ge=-(2**31), le=2**31 - 1)]
#: 32 characters here; that they are lowercase hex digits the fast reader checks, all IDs of a
#: file at once (a pattern per string cost msgspec more than half of its decoding time).
_HexId = Annotated[str, Meta(min_length=32, max_length=32)]

#: The defaults the declarations take, counted for the fast reader.
DEFAULTS = CountedDefaults()
_default = DEFAULTS.field


class SavedOperator(Struct, forbid_unknown_fields=True, gc=False):
    node: _Int32
    name: str
    operator_id: _HexId
    user_operator_id: _HexId | None = _default(None)
    uid: str | None = _default(None)
    parallelism: _Int32 = _default(-1)
    max_parallelism: _Int32 = _default(-1)
    stateful: bool | None = _default(None)


class SavedMember(Struct, forbid_unknown_fields=True, gc=False):
    generated: _HexId
    user_defined: _HexId | None = _default(None)


class SavedVertex(Struct, forbid_unknown_fields=True, gc=False, kw_only=True):
    id: _HexId
    name: str
    parallelism: _Int32
    max_parallelism: _Int32 = _default(-1)
    operators: list[SavedMember]
    nodes: list[_Int32] = _default(())  # a tuple: read as it is


class SavedStore(Struct, forbid_unknown_fields=True, gc=False):
    name: str
    key_schema: str | None = _default(None)
    value_schema: str | None = _default(None)


class SavedState(Struct, forbid_unknown_fields=True, gc=False):
    state_operator_id: _Int32
    operator_id: _HexId
    name: str
    kind: str
    stores: list[SavedStore] | None = _default(None)
    meaning: list[tuple[str, str]] | None = _default(None)


class SavedForm(Struct, forbid_unknown_fields=True, gc=False):
    operators: list[SavedOperator]
    job_vertices: list[SavedVertex]
    version: Literal[1, 2, 3] = _default(1)
    engine: str = _default("")
    mode: Literal["streaming", "batch"] = _default("streaming")
    engine_version: Annotated[str, Meta(max_length=_VERSION_CHARS)] | None = _default(None)
    state_operators: list[SavedState] | None = _default(None)
    sources: list[str] | None = _default(None)
    edges: list[tuple[_Int32, _Int32, str]] | None = _default(None)
    plan: list[str] | None = _default(None)
    settings: list[tuple[str, str]] = _default(())
    endpoints: list[tuple[str, str, str]] | None = _default(None)


class SavedKeys(NamedTuple):
    """The keys each object of the saved form may hold, as its declaration lists them."""

    fingerprint: frozenset[str]
    operator: frozenset[str]
    member: frozenset[str]
    vertex: frozenset[str]
    state: frozenset[str]
    store: frozenset[str]


KEYS = SavedKeys(
    *(
        frozenset(s.__struct_fields__)
        for s in (SavedForm, SavedOperator, SavedMember, SavedVertex, SavedState, SavedStore)
    )
)
