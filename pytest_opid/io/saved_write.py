"""The saved form written: :func:`to_dict`, and the JSON text of :func:`to_json` and
:func:`write_json`, laid out as ``json.dumps(indent=2)`` lays it out.

msgspec encodes typed rows (the declarations of :mod:`pytest_opid.io.saved_form`, and the
writer's own where the order written differs from the order read) and re-indents them in C, a
few thousand entries at a time: a chunk's rows are made, encoded and laid out while they are in
the processor's cache, and a large job's text is never held whole.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from itertools import accumulate, chain, starmap
from operator import attrgetter, itemgetter, methodcaller
from typing import Any, BinaryIO

import msgspec
from msgspec import UNSET, Struct, UnsetType

from pytest_opid.gc_pause import gc_paused
from pytest_opid.io.saved_form import SavedMember, SavedOperator, SavedStore, version_written

__all__ = ["CHUNK_ROWS", "to_dict", "to_json", "write_json"]

#: List entries per piece of the saved form's text (:func:`to_json`, :func:`write_json`): a
#: piece of about a megabyte stays in the processor's cache from its rows to its text; 2,000
#: measured faster than 500 or 10,000.
CHUNK_ROWS = 2000

_ENCODER = msgspec.json.Encoder()
_decode = methodcaller("decode", "utf-8")


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


class _OutState(Struct, gc=False):
    """A stateful operator as written: ``meaning`` only where there is one, so fingerprints
    that record none are written as before."""

    state_operator_id: int
    operator_id: str
    name: str
    kind: str
    stores: list[SavedStore]
    meaning: list[list[str]] | UnsetType = UNSET


class _OutVertex(Struct, gc=False):
    """A chain as written, its fields in the saved form's order (``SavedVertex`` reads them by
    keyword): built positionally, by ``map`` in C."""

    id: str
    name: str
    parallelism: int
    max_parallelism: int
    operators: list[SavedMember]
    nodes: tuple[int, ...] | list[int]


class _Out(Struct, gc=False):
    """The saved form's top level in the order it is written (``version`` first)."""

    version: int
    engine: str
    mode: str
    engine_version: str | UnsetType
    operators: list[SavedOperator]
    job_vertices: list[_OutVertex]
    state_operators: list[_OutState] | UnsetType = UNSET
    sources: list[str] | UnsetType = UNSET
    edges: list[list[int | str]] | UnsetType = UNSET
    plan: list[str] | UnsetType = UNSET
    settings: list[list[str]] | UnsetType = UNSET
    endpoints: list[list[str]] | UnsetType = UNSET


def _op_rows(operators: Sequence[Any]) -> list[SavedOperator]:
    """An operator's fields as written, by the names ``SavedOperator`` declares: all but
    ``job_vertex`` (its chain lists it instead), picked by position from the operators'
    NamedTuple."""
    if not operators:
        return []
    fields = itemgetter(*map(type(operators[0])._fields.index, SavedOperator.__struct_fields__))
    return list(starmap(SavedOperator, map(fields, operators)))


def _vertex_rows(vertices: Sequence[Any], lists: bool = False) -> list[_OutVertex]:
    """One row per chain, its members made in one run (``starmap``) and sliced a chain's
    length at a time: no Python code per chain or member. msgspec writes a chain's ``nodes``
    tuple as it is; ``lists`` makes them lists (for :func:`to_dict`)."""
    if not vertices:
        return []
    ids, names, pars, members, nodes, max_pars = zip(*vertices, strict=True)
    made = list(starmap(SavedMember, chain.from_iterable(members)))
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
            [SavedStore(st.name, st.key_schema, st.value_schema) for st in s.stores],
            [list(f) for f in s.meaning] if s.meaning else UNSET,
        )
        for s in states
    ]


def _as_is(entries: Sequence[Any]) -> Sequence[Any]:
    """Entries msgspec writes as they are: strings, and edges (tuples, written as arrays)."""
    return entries


def _edge_rows(edges: Sequence[tuple[int, int, str]]) -> list[list[int | str]]:
    return list(map(list, edges))


def _pair_rows(pairs: Sequence[tuple[str, ...]]) -> list[list[str]]:
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
    ("endpoints", attrgetter("endpoints"), _pair_rows),
)


def _saved(fp: Any) -> _Out:
    """``fp`` as typed rows for :func:`to_dict`: the rows written, with lists
    where those keep the fingerprint's tuples (``msgspec.to_builtins`` keeps a tuple a tuple)."""

    def rows(make: Any, entries: Any) -> Any:
        return UNSET if entries is None else make(entries)

    return _Out(
        version_written(fp),
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
        rows(_pair_rows, fp.endpoints),
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
        version_written(fp),
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
