"""The saved form of a fingerprint: the JSON that ``opid fingerprint --json`` writes and every
command and :func:`pytest_opid.fingerprint` read back, losslessly.

Two readers accept exactly the same inputs: a strict one over parsed JSON that names the entry at
fault, and a fast one that decodes typed rows with msgspec in C and vouches for the input or hands
it to the strict one (a 100,000-operator file is read in a fraction of ``json.loads``). The writer
encodes typed rows in chunks and lays them out as ``json.dumps(indent=2)`` does.

This module knows the form, not the classes: :mod:`pytest_opid.result` hands in the types it is
read into (:class:`Kinds`), since it imports this module for ``Fingerprint.to_dict`` and
``Fingerprint.from_dict``, and naming them here would make the two import each other. The
declarations below (msgspec structs) are the one list of each object's keys: the strict reader's
known keys and the fast reader's key counts are derived from them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import accumulate, chain, islice, repeat, starmap
from operator import attrgetter, itemgetter, methodcaller
from typing import Annotated, Any, BinaryIO, Literal, NamedTuple

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType
from msgspec.structs import astuple

from pytest_opid.errors import DocumentError
from pytest_opid.gc_pause import gc_paused
from pytest_opid.io.json import (
    CountedDefaults,
    check_hex_id,
    describe_json,
    key_count,
    parse_json,
    short,
)

__all__ = [
    "CHUNK_ROWS",
    "ENGINE_VERSION",
    "SAVED_VERSION",
    "Kinds",
    "decode_fast",
    "is_engine_version",
    "read",
    "read_json",
    "to_dict",
    "to_json",
    "write_json",
]

#: Version of the saved form :func:`to_dict` writes where the fingerprint names the engine
#: version that made it (``engine_version``, since version 3); version 2 is written where it
#: names none (Flink), byte for byte as before. Version 1 (no ``version`` key, no engine tag) is
#: still read.
SAVED_VERSION = 3
#: The version written without an ``engine_version``.
_UNVERSIONED = 2
#: An engine version as its package spells it (PySpark's ``3.5.9``, ``4.1.0.dev1``).
ENGINE_VERSION = re.compile(r"[0-9]{1,4}(?:\.[0-9]{1,4}){1,3}(?:[.+\-]?[0-9A-Za-z]{1,16}){0,4}")
_VERSION_CHARS = 48

#: List entries per piece of the saved form's text (:func:`to_json`, :func:`write_json`): a
#: piece of about a megabyte stays in the processor's cache from its rows to its text; 2,000
#: measured faster than 500 or 10,000.
CHUNK_ROWS = 2000


class Kinds(NamedTuple):
    """The types a saved fingerprint is read into (:mod:`pytest_opid.result`'s), in the
    order of their fields there."""

    fingerprint: Callable[..., Any]
    operator: Any  # a NamedTuple class: built with ``_make`` and ``tuple.__new__`` too
    chained: Any
    vertex: Any
    state: Callable[..., Any]
    store: Callable[..., Any]


def to_dict(fp: Any) -> dict[str, Any]:
    """The saved form of ``fp``: everything a comparison or an explanation uses."""
    with gc_paused():
        saved: dict[str, Any] = msgspec.to_builtins(_saved(fp))
    return saved


def to_json(fp: Any) -> str:
    """The saved form as JSON text, laid out as ``json.dumps(indent=2)`` lays it out.

    msgspec encodes the typed rows and re-indents the result in C, a few thousand entries at a
    time (:func:`_json_pieces`): a 100,000-operator fingerprint in about 0.17 s, where building
    dicts for ``json.dumps`` took 2.4 s and one pass over the whole text 0.28 s."""
    try:
        with gc_paused():
            return "".join(map(_decode, _json_pieces(fp, CHUNK_ROWS, "strict")))
    except UnicodeEncodeError:  # a lone surrogate: only the standard library writes it
        return json.dumps(to_dict(fp), indent=2, ensure_ascii=False)


def write_json(fp: Any, stream: BinaryIO, rows_per_chunk: int = CHUNK_ROWS) -> None:
    """Write :func:`to_json`'s text to a binary stream in UTF-8, a few thousand entries at a
    time: the text of a million-operator job is half a gigabyte, and holding it whole (and then
    its bytes) would double what the fingerprint itself needs. A lone surrogate, which
    :func:`to_json` keeps, is written as a backslash escape."""
    with gc_paused():
        for piece in _json_pieces(fp, rows_per_chunk, "backslashreplace"):
            stream.write(piece)


def read(data: Any, kinds: Kinds) -> Any:
    """Read back :func:`to_dict` output (a saved fingerprint, version 1 or 2), strictly:
    anything it cannot represent exactly is a :class:`DocumentError` naming the place."""
    try:
        with gc_paused():
            return _Reader(kinds).fingerprint(data)
    except DocumentError as exc:
        raise DocumentError(f"not a valid saved fingerprint: {exc}") from None


def read_json(raw: bytes | str, origin: str, kinds: Kinds) -> Any:
    """Read a saved fingerprint from its JSON text (or the file's bytes), as strictly as
    :func:`read` of :func:`~pytest_opid.io.json.parse_json`: typed decoding in C where it can
    vouch for the input (:func:`decode_fast`), else the precise path, whose
    :class:`DocumentError` names ``origin`` and the place at fault."""
    fast = decode_fast(raw, kinds)
    if fast is not None:
        return fast
    if isinstance(raw, bytes):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DocumentError(
                f"{origin}: cannot read: not UTF-8 text (byte {exc.start} is {raw[exc.start]:#04x})"
            ) from None
    else:
        text = raw
    data = parse_json(text, origin)
    try:
        return read(data, kinds)
    except DocumentError as exc:
        raise DocumentError(f"{origin}: {exc}") from None


def decode_fast(raw: bytes | str, kinds: Kinds) -> Any:
    """The saved fingerprint ``raw`` spells, decoded and validated by msgspec in C (a
    100,000-operator file in a fraction of ``json.loads``), or ``None`` wherever this path
    cannot vouch for the input: anything msgspec refuses, a repeated key (which msgspec would
    let pass), a repeated node or an edge to no operator. The caller then reads the input on
    the precise path (:func:`read_json`, :func:`read`), which names the fault exactly as it
    always has."""
    with gc_paused():  # a few objects per operator: the collector's passes would cost more
        try:
            saved, omitted = _DEFAULTS.decode(_DECODER, raw)
        except (msgspec.MsgspecError, ValueError):  # UnicodeDecodeError is a ValueError
            return None
        return _from_saved(saved, raw, omitted, kinds)


# -- the saved form, declared: encoded and decoded by msgspec ----------------------------------
#
# msgspec keeps the last of a repeated key, so the reader counts the keys the objects hold against
# the text's (``key_count``): a difference sends the input to the precise path, which names the
# repetition. A key the text leaves out takes a counted default (``io.json.CountedDefaults``), so
# the keys held are the fields decoded less the defaults taken, with no second look at any
# object. Every constraint the precise reader checks is a type or a Meta here, or a check in
# _from_saved.

_Int32 = Annotated[int, Meta(ge=-(2**31), le=2**31 - 1)]
#: 32 characters here; that they are lowercase hex digits is checked in _from_saved, all IDs of
#: a file at once (a pattern per string cost msgspec more than half of its decoding time).
_HexId = Annotated[str, Meta(min_length=32, max_length=32)]
_HEX_DIGITS = b"0123456789abcdef"

_DEFAULTS = CountedDefaults()
_default = _DEFAULTS.field


class _Op(Struct, forbid_unknown_fields=True, gc=False):
    node: _Int32
    name: str
    operator_id: _HexId
    user_operator_id: _HexId | None = _default(None)
    uid: str | None = _default(None)
    parallelism: _Int32 = _default(-1)
    max_parallelism: _Int32 = _default(-1)
    stateful: bool | None = _default(None)


class _Member(Struct, forbid_unknown_fields=True, gc=False):
    generated: _HexId
    user_defined: _HexId | None = _default(None)


class _Vertex(Struct, forbid_unknown_fields=True, gc=False, kw_only=True):
    id: _HexId
    name: str
    parallelism: _Int32
    max_parallelism: _Int32 = _default(-1)
    operators: list[_Member]
    nodes: list[_Int32] = _default(())  # a tuple: read as it is


class _Store(Struct, forbid_unknown_fields=True, gc=False):
    name: str
    key_schema: str | None = _default(None)
    value_schema: str | None = _default(None)


class _State(Struct, forbid_unknown_fields=True, gc=False):
    state_operator_id: _Int32
    operator_id: _HexId
    name: str
    kind: str
    stores: list[_Store] | None = _default(None)
    meaning: list[tuple[str, str]] | None = _default(None)


class _OutState(Struct, gc=False):
    """A stateful operator as written: ``meaning`` only where there is one, so fingerprints
    that record none are written as before."""

    state_operator_id: int
    operator_id: str
    name: str
    kind: str
    stores: list[_Store]
    meaning: list[list[str]] | UnsetType = UNSET


class _Saved(Struct, forbid_unknown_fields=True, gc=False):
    operators: list[_Op]
    job_vertices: list[_Vertex]
    version: Literal[1, 2, 3] = _default(1)
    engine: str = _default("")
    mode: Literal["streaming", "batch"] = _default("streaming")
    engine_version: Annotated[str, Meta(max_length=_VERSION_CHARS)] | None = _default(None)
    state_operators: list[_State] | None = _default(None)
    sources: list[str] | None = _default(None)
    edges: list[tuple[_Int32, _Int32, str]] | None = _default(None)
    plan: list[str] | None = _default(None)
    settings: list[tuple[str, str]] = _default(())


#: The keys each object of the saved form may hold, as its declaration lists them.
_KEYS: dict[type[Struct], frozenset[str]] = {
    s: frozenset(s.__struct_fields__) for s in (_Op, _Member, _Vertex, _Store, _State, _Saved)
}

_DECODER = msgspec.json.Decoder(_Saved)
_ENCODER = msgspec.json.Encoder()
_new = tuple.__new__
_decode = methodcaller("decode", "utf-8")


class _OutVertex(Struct, gc=False):
    """A chain as written, its fields in the saved form's order (``_Vertex`` reads them by
    keyword): built positionally, by ``map`` in C."""

    id: str
    name: str
    parallelism: int
    max_parallelism: int
    operators: list[_Member]
    nodes: tuple[int, ...] | list[int]


class _Out(Struct, gc=False):
    """The saved form's top level in the order it is written (``version`` first)."""

    version: int
    engine: str
    mode: str
    engine_version: str | UnsetType
    operators: list[_Op]
    job_vertices: list[_OutVertex]
    state_operators: list[_OutState] | UnsetType = UNSET
    sources: list[str] | UnsetType = UNSET
    edges: list[list[int | str]] | UnsetType = UNSET
    plan: list[str] | UnsetType = UNSET
    settings: list[list[str]] | UnsetType = UNSET


# -- the strict reader --------------------------------------------------------------------------


_MISSING = object()


class _Reader:
    """Strict reader of the saved form; every message names the entry at fault."""

    def __init__(self, kinds: Kinds) -> None:
        self.kinds = kinds

    def fingerprint(self, data: Any) -> Any:
        top = self._object(data, "")
        version = top.get("version", 1)
        if type(version) is not int or not 1 <= version <= SAVED_VERSION:
            raise DocumentError(
                f"unsupported saved fingerprint version {short(version)} "
                f"(this release reads 1 to {SAVED_VERSION})"
            )
        for key in ("operators", "job_vertices"):
            if key not in top:
                raise DocumentError(f"missing key {key!r}")
        self._known(top, _KEYS[_Saved], "")
        engine = self._str(top, "engine", "", default="")
        mode = self._str(top, "mode", "", default="streaming")
        engine_version = self._str(top, "engine_version", "", default=None)
        if engine_version is not None and (
            version < SAVED_VERSION or not is_engine_version(engine_version)
        ):
            raise DocumentError(
                f"engine_version {short(engine_version)} "
                + (
                    f"is not a version number (as {engine or 'the engine'} spells one: 3.5.9)"
                    if version >= SAVED_VERSION
                    else f"needs version {SAVED_VERSION}, the file says {version}"
                )
            )
        if mode not in ("streaming", "batch"):
            raise DocumentError(
                f"the saved fingerprint: mode must be 'streaming' or 'batch', got {short(mode)}"
            )
        vertices = tuple(
            self._vertex(v, i) for i, v in enumerate(self._list(top, "job_vertices", ""))
        )
        vertex_of: dict[str, str] = {}
        for v in vertices:
            for o in v.operators:
                vertex_of[o.generated] = v.id
        operators = tuple(
            self._operator(o, i, vertex_of) for i, o in enumerate(self._list(top, "operators", ""))
        )
        seen: set[int] = set()
        for op in operators:
            if op.node in seen:
                raise DocumentError(f"the saved fingerprint: node {op.node} appears twice")
            seen.add(op.node)
        states = None
        if top.get("state_operators") is not None:
            states = tuple(
                self._state(s, i) for i, s in enumerate(self._list(top, "state_operators", ""))
            )
        sources = self._strings(top, "sources")
        edges = None
        if top.get("edges") is not None:
            edges = self._edges(self._list(top, "edges", ""), seen)
        plan = self._strings(top, "plan")
        settings = []
        for i, pair in enumerate(self._list(top, "settings", "") if "settings" in top else ()):
            if not (type(pair) is list and len(pair) == 2 and all(type(x) is str for x in pair)):
                raise DocumentError(f"settings[{i}]: expected [name, value], two strings")
            settings.append((pair[0], pair[1]))
        return self.kinds.fingerprint(
            operators,
            vertices,
            states,
            engine,
            mode,
            sources,
            edges,
            plan,
            tuple(settings),
            engine_version=engine_version,
        )

    def _strings(self, top: Mapping[str, Any], key: str) -> tuple[str, ...] | None:
        """A list of strings under ``key``; ``None`` where it is missing or null."""
        if top.get(key) is None:
            return None
        raw = self._list(top, key, "")
        for i, s in enumerate(raw):
            if not isinstance(s, str):
                raise DocumentError(f"{key}[{i}]: expected a string, got {describe_json(s)}")
        return tuple(raw)

    @staticmethod
    def _edges(raw: Sequence[Any], nodes: set[int]) -> tuple[tuple[int, int, str], ...]:
        """``[source, target, label]`` triples between operators the fingerprint lists."""
        edges = []
        for i, e in enumerate(raw):
            if not (
                type(e) is list
                and len(e) == 3
                and _is_int32(e[0])
                and _is_int32(e[1])
                and type(e[2]) is str
            ):
                raise DocumentError(
                    f"edges[{i}]: expected [source node, target node, label], got {short(e)}"
                )
            for end in (e[0], e[1]):
                if end not in nodes:
                    raise DocumentError(f"edges[{i}]: node {end} is not an operator")
            edges.append((e[0], e[1], e[2]))
        return tuple(edges)

    def _operator(self, o: Any, i: int, vertex_of: Mapping[str, str]) -> Any:
        # The common case in one pass of cheap checks; anything unusual takes the slow path,
        # which names the field at fault.
        if type(o) is dict and o.keys() <= _KEYS[_Op]:
            node, name, oid = o.get("node"), o.get("name"), o.get("operator_id")
            user, uid = o.get("user_operator_id"), o.get("uid")
            par, max_par = o.get("parallelism", -1), o.get("max_parallelism", -1)
            stateful = o.get("stateful")
            if (
                _is_int32(node)
                and type(name) is str
                and type(oid) is str
                and _HEX_ID.fullmatch(oid)
                and (user is None or (type(user) is str and _HEX_ID.fullmatch(user)))
                and (uid is None or type(uid) is str)
                and _is_int32(par)
                and _is_int32(max_par)
                and (stateful is None or type(stateful) is bool)
            ):
                # Every value was checked just above; the NamedTuple takes them as they are.
                row = (node, name, oid, user, uid, par, vertex_of.get(oid), max_par, stateful)
                return self.kinds.operator._make(row)
        return self._checked_operator(o, i, vertex_of)

    def _checked_operator(self, o: Any, i: int, vertex_of: Mapping[str, str]) -> Any:
        where = f"operators[{i}]"
        obj = self._object(o, where)
        self._known(obj, _KEYS[_Op], where)
        operator_id = self._hex(obj, "operator_id", where)
        stateful = obj.get("stateful")
        if stateful is not None and type(stateful) is not bool:
            raise DocumentError(
                f"{_at(where)}'stateful' must be true, false or null, got {describe_json(stateful)}"
            )
        return self.kinds.operator(
            node=self._int(obj, "node", where),
            name=self._str(obj, "name", where),
            operator_id=operator_id,
            user_operator_id=self._hex(obj, "user_operator_id", where, optional=True),
            uid=self._str(obj, "uid", where, default=None),
            parallelism=self._int(obj, "parallelism", where, default=-1),
            job_vertex=vertex_of.get(operator_id),
            max_parallelism=self._int(obj, "max_parallelism", where, default=-1),
            stateful=stateful,
        )

    def _vertex(self, v: Any, i: int) -> Any:
        where = f"job_vertices[{i}]"
        obj = self._object(v, where)
        self._known(obj, _KEYS[_Vertex], where)
        self._hex(obj, "id", where)
        members = []
        for k, o in enumerate(self._list(obj, "operators", where)):
            if type(o) is dict and len(o) == 2:  # the common case, checked cheaply
                generated, user = o.get("generated", 0), o.get("user_defined", 0)
                if (
                    type(generated) is str
                    and _HEX_ID.fullmatch(generated)
                    and (user is None or (type(user) is str and _HEX_ID.fullmatch(user)))
                ):
                    members.append(self.kinds.chained(generated, user))
                    continue
            at = f"{where}.operators[{k}]"
            entry = self._object(o, at)
            self._known(entry, _KEYS[_Member], at)
            members.append(
                self.kinds.chained(
                    self._hex(entry, "generated", at),
                    self._hex(entry, "user_defined", at, optional=True),
                )
            )
        nodes: list[int] = []
        if "nodes" in obj:
            for k, n in enumerate(self._list(obj, "nodes", where)):
                if not _is_int32(n):
                    raise DocumentError(
                        f"{where}.nodes[{k}]: expected an integer, got {describe_json(n)}"
                    )
                nodes.append(n)
        vertex_id = self._hex(obj, "id", where)
        return self.kinds.vertex(
            id=vertex_id,
            name=self._str(obj, "name", where),
            parallelism=self._int(obj, "parallelism", where),
            operators=tuple(members),
            nodes=tuple(nodes),
            max_parallelism=self._int(obj, "max_parallelism", where, default=-1),
        )

    def _state(self, s: Any, i: int) -> Any:
        where = f"state_operators[{i}]"
        obj = self._object(s, where)
        self._known(obj, _KEYS[_State], where)
        stores = []
        if obj.get("stores") is not None:
            for k, st in enumerate(self._list(obj, "stores", where)):
                at = f"{where}.stores[{k}]"
                entry = self._object(st, at)
                self._known(entry, _KEYS[_Store], at)
                stores.append(
                    self.kinds.store(
                        self._str(entry, "name", at),
                        self._str(entry, "key_schema", at, default=None),
                        self._str(entry, "value_schema", at, default=None),
                    )
                )
        meaning = []
        if obj.get("meaning") is not None:
            for k, fact in enumerate(self._list(obj, "meaning", where)):
                at = f"{where}.meaning[{k}]"
                if (
                    not isinstance(fact, list)
                    or len(fact) != 2
                    or not all(isinstance(x, str) for x in fact)
                ):
                    raise DocumentError(
                        f"{at}: expected a [fact, value] pair of strings, got {describe_json(fact)}"
                    )
                meaning.append((fact[0], fact[1]))
        return self.kinds.state(
            self._int(obj, "state_operator_id", where),
            self._hex(obj, "operator_id", where),
            self._str(obj, "name", where),
            self._str(obj, "kind", where),
            tuple(stores),
            tuple(meaning),
        )

    # -- typed fields --

    @staticmethod
    def _object(value: Any, where: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise DocumentError(f"{_at(where)}expected a JSON object, got {describe_json(value)}")
        return value

    @staticmethod
    def _known(obj: Mapping[str, Any], known: frozenset[str], where: str) -> None:
        for key in obj:
            if key not in known:
                raise DocumentError(f"{_at(where)}unknown key {short(key)}")

    @staticmethod
    def _list(obj: Mapping[str, Any], key: str, where: str) -> Sequence[Any]:
        if key not in obj:
            raise DocumentError(f"{_at(where)}missing key {key!r}")
        value = obj[key]
        if not isinstance(value, list):
            raise DocumentError(f"{_at(where)}{key!r} must be a list, got {describe_json(value)}")
        return value

    @staticmethod
    def _int(obj: Mapping[str, Any], key: str, where: str, default: Any = _MISSING) -> int:
        if key not in obj:
            if default is _MISSING:
                raise DocumentError(f"{_at(where)}missing key {key!r}")
            return int(default)
        value = obj[key]
        if type(value) is not int or not -(2**31) <= value < 2**31:
            raise DocumentError(f"{_at(where)}{key!r} must be a 32-bit integer, got {short(value)}")
        return value

    @staticmethod
    def _str(obj: Mapping[str, Any], key: str, where: str, default: Any = _MISSING) -> Any:
        if key not in obj or (obj[key] is None and default is None):
            if default is _MISSING:
                raise DocumentError(f"{_at(where)}missing key {key!r}")
            return default
        value = obj[key]
        if not isinstance(value, str):
            raise DocumentError(f"{_at(where)}{key!r} must be a string, got {describe_json(value)}")
        return value

    @staticmethod
    def _hex(obj: Mapping[str, Any], key: str, where: str, optional: bool = False) -> Any:
        if key not in obj or obj[key] is None:
            if optional:
                return None
            raise DocumentError(f"{_at(where)}missing key {key!r}")
        return check_hex_id(obj[key], f"{where}.{key}" if where else key)


_HEX_ID = re.compile(r"[0-9a-f]{32}")


def _is_int32(value: Any) -> bool:
    return type(value) is int and -(2**31) <= value < 2**31


def _at(where: str) -> str:
    return f"{where}: " if where else ""


# -- writing -------------------------------------------------------------------------------------


def _op_rows(operators: Sequence[Any]) -> list[_Op]:
    """An operator's fields as written, by the names ``_Op`` declares: all but ``job_vertex``
    (its chain lists it instead), picked by position from the operators' NamedTuple."""
    if not operators:
        return []
    fields = itemgetter(*map(type(operators[0])._fields.index, _Op.__struct_fields__))
    return list(starmap(_Op, map(fields, operators)))


def _vertex_rows(vertices: Sequence[Any], lists: bool = False) -> list[_OutVertex]:
    """One row per chain, its members made in one run (``starmap``) and sliced a chain's
    length at a time: no Python code per chain or member. msgspec writes a chain's ``nodes``
    tuple as it is; ``lists`` makes them lists (for :func:`to_dict`)."""
    if not vertices:
        return []
    ids, names, pars, members, nodes, max_pars = zip(*vertices, strict=True)
    made = list(starmap(_Member, chain.from_iterable(members)))
    ends = list(accumulate(map(len, members)))
    groups = map(made.__getitem__, map(slice, [0, *ends], ends))
    return list(
        map(_OutVertex, ids, names, pars, max_pars, groups, map(list, nodes) if lists else nodes)
    )


def _state_rows(states: Sequence[Any]) -> list[_OutState]:
    return [
        _OutState(
            s.state_operator_id,
            s.operator_id,
            s.name,
            s.kind,
            [_Store(st.name, st.key_schema, st.value_schema) for st in s.stores],
            [list(f) for f in s.meaning] if s.meaning else UNSET,
        )
        for s in states
    ]


def _as_is(entries: Sequence[Any]) -> Sequence[Any]:
    """Entries msgspec writes as they are: strings, and edges (tuples, written as arrays)."""
    return entries


def _edge_rows(edges: Sequence[tuple[int, int, str]]) -> list[list[int | str]]:
    return list(map(list, edges))


def _pair_rows(pairs: Sequence[tuple[str, str]]) -> list[list[str]]:
    return list(map(list, pairs))


#: The saved form's lists after the scalars, in the order they are written: (key, the
#: fingerprint's value, its rows for msgspec to write). A list that is None is left out.
_LISTS: tuple[tuple[str, Any, Any], ...] = (
    ("operators", attrgetter("operators"), _op_rows),
    ("job_vertices", attrgetter("job_vertices"), _vertex_rows),
    ("state_operators", attrgetter("state_operators"), _state_rows),
    ("sources", attrgetter("sources"), _as_is),
    ("edges", attrgetter("edges"), _as_is),
    ("plan", attrgetter("plan"), _as_is),
    ("settings", lambda fp: fp.settings or None, _pair_rows),
)


def _saved(fp: Any) -> _Out:
    """``fp`` as typed rows for :func:`to_dict`: the rows written, with lists
    where those keep the fingerprint's tuples (``msgspec.to_builtins`` keeps a tuple a tuple)."""

    def rows(make: Any, entries: Any) -> Any:
        return UNSET if entries is None else make(entries)

    return _Out(
        _UNVERSIONED if fp.engine_version is None else SAVED_VERSION,
        fp.engine,
        fp.mode,
        UNSET if fp.engine_version is None else fp.engine_version,
        _op_rows(fp.operators),
        _vertex_rows(fp.job_vertices, lists=True),
        rows(_state_rows, fp.state_operators),
        rows(list, fp.sources),
        rows(_edge_rows, fp.edges),
        rows(list, fp.plan),
        rows(_pair_rows, fp.settings or None),
    )


#: ``msgspec.json.format`` of a list inside a list puts the inner list's entries four spaces
#: in, where the saved form has them: what is between these is the run of entries, laid out.
_NESTED_HEAD, _NESTED_TAIL = b"[\n  [\n", b"\n  ]\n]"


def _json_pieces(fp: Any, rows_per_chunk: int, errors: str) -> Iterator[bytes]:
    """The saved form's JSON text, as ``json.dumps(indent=2)`` lays it out, in UTF-8 pieces
    of at most ``rows_per_chunk`` list entries each: a chunk's rows are made, encoded and laid
    out while they are in the processor's cache, and let go before the next chunk's.

    A lone surrogate (which UTF-8 cannot hold) raises ``UnicodeEncodeError`` where ``errors``
    is ``"strict"``; with ``"backslashreplace"`` the standard library writes that chunk and
    the surrogate is written as a backslash escape."""
    yield b'{\n  "version": %d,\n  "engine": %s,\n  "mode": %s' % (
        _UNVERSIONED if fp.engine_version is None else SAVED_VERSION,
        json.dumps(fp.engine, ensure_ascii=False).encode("utf-8", errors),
        json.dumps(fp.mode, ensure_ascii=False).encode("utf-8", errors),
    )
    if fp.engine_version is not None:
        yield b',\n  "engine_version": %s' % json.dumps(fp.engine_version).encode("ascii", errors)
    head, tail = len(_NESTED_HEAD), -len(_NESTED_TAIL)
    for key, value, make in _LISTS:
        entries = value(fp)
        if entries is None:
            continue
        if not entries:
            yield b',\n  "%s": []' % key.encode()
            continue
        yield b',\n  "%s": [\n' % key.encode()
        for start in range(0, len(entries), rows_per_chunk):
            rows = [make(entries[start : start + rows_per_chunk])]
            try:
                text = msgspec.json.format(_ENCODER.encode(rows), indent=2)
            except UnicodeEncodeError:  # a lone surrogate: only the standard library writes it
                if errors == "strict":
                    raise
                plain = json.dumps(msgspec.to_builtins(rows), indent=2, ensure_ascii=False)
                text = plain.encode("utf-8", errors)
            if start:
                yield b",\n"
            yield text[head:tail]
        yield b"\n  ]"
    yield b"\n}"


# -- the fast reader ----------------------------------------------------------------------------


def _all_hex(ids: Any) -> bool:
    """Whether the (str or None) values ``ids`` are lowercase hex digits only (msgspec
    checked their length): one join and one ``bytes.translate`` for a whole file."""
    joined = "".join(filter(None, ids))
    return joined.isascii() and not joined.encode("ascii").translate(None, _HEX_DIGITS)


def _columns(rows: list[tuple[Any, ...]], struct: type[Struct]) -> list[tuple[Any, ...]]:
    """``rows`` of ``struct`` as its columns (``zip`` in C), also where there are no rows."""
    return list(zip(*rows, strict=True)) if rows else [()] * len(_KEYS[struct])


def _from_saved(saved: _Saved, raw: bytes | str, omitted: int, kinds: Kinds) -> Any:
    """The fingerprint a decoded saved form holds, or ``None`` where the text held a repeated
    key, an ID that is not lowercase hex, a repeated node or an edge to no operator (the
    precise path names them). ``omitted`` is how many keys the text left out (defaults taken).
    Rows are taken apart into columns and built again with ``map`` and ``zip``: no Python code
    per operator."""
    if saved.engine_version is not None and (
        saved.version < SAVED_VERSION or not is_engine_version(saved.engine_version)
    ):
        return None  # the precise path names it
    raw_bytes = raw.encode("utf-8") if isinstance(raw, str) else raw
    ops = list(map(astuple, saved.operators))
    vertices = list(map(astuple, saved.job_vertices))
    sizes = list(map(len, map(itemgetter(4), vertices)))
    members = list(map(astuple, chain.from_iterable(map(itemgetter(4), vertices))))
    states = list(map(astuple, saved.state_operators or ()))
    stores = list(map(astuple, chain.from_iterable(filter(None, map(itemgetter(4), states)))))
    node, name, oid, user, uid, par, max_par, stateful = _columns(ops, _Op)
    ids, names, pars, max_pars, _, vertex_nodes = _columns(vertices, _Vertex)
    generated, user_defined = _columns(members, _Member)
    # The keys the objects hold: each object's declared fields, less the defaults taken.
    held = ((_Op, ops), (_Vertex, vertices), (_Member, members), (_State, states), (_Store, stores))
    keys = sum(len(_KEYS[s]) * len(rows) for s, rows in held) + len(_KEYS[_Saved]) - omitted
    strings = chain(
        name,
        uid,
        names,
        (saved.engine,),
        () if saved.engine_version is None else (saved.engine_version,),
        map(itemgetter(2), states),
        map(itemgetter(3), states),
        chain.from_iterable(stores),  # names and schemas (or None): all strings
        chain.from_iterable(chain.from_iterable(filter(None, map(itemgetter(5), states)))),
        saved.sources or (),
        map(itemgetter(2), saved.edges or ()),
        saved.plan or (),
        chain.from_iterable(saved.settings),
    )
    # More keys in the text than the decoded objects hold means a repeated key.
    if key_count(raw_bytes, strings) != keys:
        return None
    if not _all_hex(chain(oid, user, generated, user_defined, ids, map(itemgetter(1), states))):
        return None
    nodes = set(node)
    if len(nodes) != len(ops):
        return None  # a node appears twice
    edges = None
    if saved.edges is not None:
        edges = tuple(saved.edges)
        ends = set(map(itemgetter(0), edges))
        ends.update(map(itemgetter(1), edges))
        if not ends <= nodes:
            return None  # an edge to no operator
    chained = iter(map(_new, repeat(kinds.chained), zip(generated, user_defined, strict=True)))
    # Later vertices win, as in the precise reader.
    vertex_of = dict(zip(generated, chain.from_iterable(map(repeat, ids, sizes)), strict=True))
    groups = map(tuple, map(islice, repeat(chained), sizes))  # each vertex's run of members
    job_vertices = tuple(
        map(
            _new,
            repeat(kinds.vertex),
            zip(
                ids,
                names,
                pars,
                groups,
                map(tuple, vertex_nodes),
                max_pars,
                strict=True,
            ),
        )
    )
    operators = tuple(
        map(
            _new,
            repeat(kinds.operator),
            zip(
                node,
                name,
                oid,
                user,
                uid,
                par,
                map(vertex_of.get, oid),
                max_par,
                stateful,
                strict=True,
            ),
        )
    )
    state_operators = None
    if saved.state_operators is not None:
        state_operators = tuple(
            kinds.state(
                s.state_operator_id,
                s.operator_id,
                s.name,
                s.kind,
                tuple(
                    kinds.store(st.name, st.key_schema, st.value_schema) for st in s.stores or ()
                ),
                tuple(map(tuple, s.meaning or ())),  # type: ignore[arg-type]
            )
            for s in saved.state_operators
        )
    return kinds.fingerprint(
        operators,
        job_vertices,
        state_operators,
        saved.engine,
        saved.mode,
        None if saved.sources is None else tuple(saved.sources),
        edges,
        None if saved.plan is None else tuple(saved.plan),
        tuple(map(tuple, saved.settings)),  # type: ignore[arg-type]
        engine_version=saved.engine_version,
    )


def is_engine_version(text: str) -> bool:
    """Whether ``text`` is an engine version as its package spells it (``3.5.9``)."""
    return len(text) <= _VERSION_CHARS and ENGINE_VERSION.fullmatch(text) is not None
