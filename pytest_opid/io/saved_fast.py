"""The saved form read fast: typed rows decoded and validated by msgspec in C.

A 100,000-operator file is read in a fraction of ``json.loads``. This path accepts exactly what
the strict reader (:mod:`pytest_opid.io.saved_read`) accepts: wherever it cannot vouch for the
input (anything msgspec refuses, a repeated key, which msgspec would let pass, an ID that is not
lowercase hex, a repeated node, an edge to no operator) it returns ``None`` and the caller reads
the input on the precise path, which names the fault. Rows are taken apart into columns and built
again with ``map`` and ``zip``: no Python code per operator.
"""

from __future__ import annotations

from itertools import chain, islice, repeat
from operator import itemgetter
from typing import Any

import msgspec
from msgspec.structs import astuple

from pytest_opid.gc_pause import gc_paused
from pytest_opid.io.json import key_count
from pytest_opid.io.saved_form import (
    DEFAULTS,
    KEYS,
    SAVED_VERSION,
    Kinds,
    SavedForm,
    is_engine_version,
)

__all__ = ["decode_fast"]

_DECODER = msgspec.json.Decoder(SavedForm)
_HEX_DIGITS = b"0123456789abcdef"
_new = tuple.__new__


def decode_fast(raw: bytes | str, kinds: Kinds) -> Any:
    """The saved fingerprint ``raw`` spells, decoded and validated by msgspec in C (a
    100,000-operator file in a fraction of ``json.loads``), or ``None`` wherever this path
    cannot vouch for the input: anything msgspec refuses, a repeated key (which msgspec would
    let pass), a repeated node or an edge to no operator. The caller then reads the input on
    the precise path (:func:`~pytest_opid.io.saved_fingerprint.read_json`,
    :func:`~pytest_opid.io.saved_read.read`), which names the fault exactly as it always has."""
    with gc_paused():  # a few objects per operator: the collector's passes would cost more
        try:
            saved, omitted = DEFAULTS.decode(_DECODER, raw)
        except (msgspec.MsgspecError, ValueError):  # UnicodeDecodeError is a ValueError
            return None
        return _from_saved(saved, raw, omitted, kinds)


def _all_hex(ids: Any) -> bool:
    """Whether the (str or None) values ``ids`` are lowercase hex digits only (msgspec
    checked their length): one join and one ``bytes.translate`` for a whole file."""
    joined = "".join(filter(None, ids))
    return joined.isascii() and not joined.encode("ascii").translate(None, _HEX_DIGITS)


def _columns(rows: list[tuple[Any, ...]], keys: frozenset[str]) -> list[tuple[Any, ...]]:
    """``rows`` of an object of ``keys`` as its columns (``zip`` in C), also where there are
    no rows."""
    return list(zip(*rows, strict=True)) if rows else [()] * len(keys)


def _from_saved(saved: SavedForm, raw: bytes | str, omitted: int, kinds: Kinds) -> Any:
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
    node, name, oid, user, uid, par, max_par, stateful = _columns(ops, KEYS.operator)
    ids, names, pars, max_pars, _, vertex_nodes = _columns(vertices, KEYS.vertex)
    generated, user_defined = _columns(members, KEYS.member)
    # The keys the objects hold: each object's declared fields, less the defaults taken.
    held = (
        (KEYS.operator, ops),
        (KEYS.vertex, vertices),
        (KEYS.member, members),
        (KEYS.state, states),
        (KEYS.store, stores),
    )
    keys = sum(len(k) * len(rows) for k, rows in held) + len(KEYS.fingerprint) - omitted
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
        chain.from_iterable(saved.endpoints or ()),
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
        endpoints=None if saved.endpoints is None else tuple(map(tuple, saved.endpoints)),  # type: ignore[arg-type]
    )
