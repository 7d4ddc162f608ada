"""The saved form read strictly: every message names the entry at fault.

This is the precise path. The fast reader (:mod:`pytest_opid.io.saved_fast`) accepts exactly
what this one accepts and hands everything else here, so every fault of a saved fingerprint is
named in these words. The common case of an operator or a chain member is checked in one pass of
cheap tests; anything unusual takes the field-by-field path that names the field.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from pytest_opid.errors import DocumentError
from pytest_opid.gc_pause import gc_paused
from pytest_opid.io.json import check_hex_id, describe_json, short
from pytest_opid.io.saved_form import KEYS, SAVED_VERSION, Kinds, is_engine_version

__all__ = ["read"]


def read(data: Any, kinds: Kinds) -> Any:
    """Read back :func:`to_dict` output (a saved fingerprint, version 1 or 2), strictly:
    anything it cannot represent exactly is a :class:`DocumentError` naming the place."""
    try:
        with gc_paused():
            return _Reader(kinds).fingerprint(data)
    except DocumentError as exc:
        raise DocumentError(f"not a valid saved fingerprint: {exc}") from None


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
        self._known(top, KEYS.fingerprint, "")
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
        endpoints = None
        if top.get("endpoints") is not None:
            endpoints = []
            for i, row in enumerate(self._list(top, "endpoints", "")):
                if not (type(row) is list and len(row) == 3 and all(type(x) is str for x in row)):
                    raise DocumentError(
                        f"endpoints[{i}]: expected [endpoint, fact, value], three strings"
                    )
                endpoints.append((row[0], row[1], row[2]))
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
            endpoints=None if endpoints is None else tuple(endpoints),
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
        if type(o) is dict and o.keys() <= KEYS.operator:
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
        obj = self._entry(o, where, KEYS.operator)
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
        obj = self._entry(v, where, KEYS.vertex)
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
            entry = self._entry(o, at, KEYS.member)
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
        obj = self._entry(s, where, KEYS.state)
        stores = []
        if obj.get("stores") is not None:
            for k, st in enumerate(self._list(obj, "stores", where)):
                at = f"{where}.stores[{k}]"
                entry = self._entry(st, at, KEYS.store)
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

    def _entry(self, value: Any, where: str, known: frozenset[str]) -> Mapping[str, Any]:
        """An object of the saved form holding only the ``known`` keys its declaration lists."""
        obj = self._object(value, where)
        self._known(obj, known, where)
        return obj

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
        value: Sequence[Any] = _field(obj, key, where, _MISSING, _LIST)
        return value

    @staticmethod
    def _int(obj: Mapping[str, Any], key: str, where: str, default: Any = _MISSING) -> int:
        value: int = _field(obj, key, where, default, _INT32)
        return value

    @staticmethod
    def _str(obj: Mapping[str, Any], key: str, where: str, default: Any = _MISSING) -> Any:
        return _field(obj, key, where, default, _STR)

    @staticmethod
    def _hex(obj: Mapping[str, Any], key: str, where: str, optional: bool = False) -> Any:
        if _absent(obj, key, where, None if optional else _MISSING, null_too=True):
            return None
        return check_hex_id(obj[key], f"{where}.{key}" if where else key)


_HEX_ID = re.compile(r"[0-9a-f]{32}")


def _is_int32(value: Any) -> bool:
    return type(value) is int and -(2**31) <= value < 2**31


def _at(where: str) -> str:
    return f"{where}: " if where else ""


def _absent(
    obj: Mapping[str, Any], key: str, where: str, default: Any = _MISSING, null_too: bool = False
) -> bool:
    """Whether ``key`` is missing from ``obj`` (or null, where ``null_too``) and its
    ``default`` stands in; missing without a default is the error naming the key."""
    if key in obj and not (null_too and obj[key] is None):
        return False
    if default is _MISSING:
        raise DocumentError(f"{_at(where)}missing key {key!r}")
    return True


class _Expected(NamedTuple):
    """What a field must hold: the test, its words, and how the wrong value is shown."""

    accepts: Callable[[Any], bool]
    what: str
    shown: Callable[[Any], str]


_LIST = _Expected(lambda value: isinstance(value, list), "a list", describe_json)
_INT32 = _Expected(_is_int32, "a 32-bit integer", short)
_STR = _Expected(lambda value: isinstance(value, str), "a string", describe_json)


def _field(obj: Mapping[str, Any], key: str, where: str, default: Any, expected: _Expected) -> Any:
    """The value under ``key`` where it is what is ``expected``; ``default`` where it is absent
    (or null, where the default is ``None``: see :func:`_absent`)."""
    if _absent(obj, key, where, default, null_too=default is None):
        return default
    value = obj[key]
    if not expected.accepts(value):
        raise DocumentError(
            f"{_at(where)}{key!r} must be {expected.what}, got {expected.shown(value)}"
        )
    return value
