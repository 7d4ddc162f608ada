"""Topology document, version 1: the JSON form of :class:`~pytest_opid.model.Topology`.

The format is the one the Flink golden cases use (see docs/flink-inputs.md). Loading is strict:
an unknown key, a wrong type or an unknown enum value is an error that names the node or edge at
fault, because a typo silently replaced by a default would change OperatorIDs without
anyone noticing.
"""

from __future__ import annotations

import enum
import json
import os
from collections.abc import Iterator, Mapping
from itertools import chain
from operator import attrgetter
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from pytest_opid.errors import DocumentError, TopologyError
from pytest_opid.gc_pause import gc_paused
from pytest_opid.io.json import (
    CountedDefaults,
    describe_json,
    has_lone_surrogate,
    joined,
    key_count,
    label,
    parse_json_bytes,
    read_bytes,
)
from pytest_opid.model import (
    ChainingStrategy,
    Edge,
    ExchangeMode,
    Operator,
    Partitioner,
    RuntimeMode,
    SourceKind,
    Topology,
)

__all__ = [
    "convert_document",
    "decode_document",
    "dump_document",
    "load_document",
    "read_document",
    "topology_from_document",
]

VERSION = 1

_NODE_KEYS = {
    "id",
    "name",
    "parallelism",
    "max_parallelism",
    "slot_sharing_group",
    "chaining_strategy",
    "uid",
    "uid_hash",
    "source",
    "yielding",
    "parallelism_configured",
    "state",
}
_EDGE_KEYS = {"source", "target", "partitioner", "type_number", "exchange_mode"}
_TOP_KEYS = {
    "version",
    "runtime_mode",
    "chaining_enabled",
    "chain_different_max_parallelism",
    "nodes",
    "edges",
}


def load_document(source: str | os.PathLike[str] | Mapping[str, Any]) -> Topology:
    """A topology from a document given as a mapping or a path to a JSON file."""
    if isinstance(source, Mapping):
        return read_document(source)
    raw = read_bytes(source)
    try:
        topology = decode_document(raw)
    except (DocumentError, TopologyError) as exc:
        raise type(exc)(f"{source}: {exc}") from None
    if topology is not None:
        return topology
    data = parse_json_bytes(raw, str(source))  # the precise path names what the fast one declined
    try:
        return topology_from_document(data)
    except (DocumentError, TopologyError) as exc:
        raise type(exc)(f"{source}: {exc}") from None


def read_document(doc: Any) -> Topology:
    """The topology of a parsed document: read in C where msgspec vouches for it
    (:func:`convert_document`), else by :func:`topology_from_document`, which names the fault."""
    topology = convert_document(doc)
    return topology if topology is not None else topology_from_document(doc)


def topology_from_document(doc: Any) -> Topology:
    """Validate a parsed document and build the :class:`Topology` it describes."""
    if not isinstance(doc, Mapping):
        raise DocumentError(
            "a topology document is a JSON object with 'nodes' and 'edges', "
            f"got {describe_json(doc)}"
        )
    _reject_unknown(doc, _TOP_KEYS, "the document")
    version = doc.get("version", VERSION)
    if version != VERSION:
        raise DocumentError(f"unsupported topology document version {label(version)} (expected 1)")
    for key in ("nodes", "edges"):
        if key not in doc:
            raise DocumentError(f"the document has no {key!r} list")
        if not isinstance(doc[key], list):
            raise DocumentError(f"{key!r} must be a list, got {describe_json(doc[key])}")
    runtime_mode = _enum(
        doc, "runtime_mode", "the document", RuntimeMode, "STREAMING", nullable=False
    )
    chaining_enabled = _flag(doc, "chaining_enabled", "the document")
    chain_different = _flag(doc, "chain_different_max_parallelism", "the document")
    operators = [_operator(node, i) for i, node in enumerate(doc["nodes"])]
    edges = [_edge(edge, i) for i, edge in enumerate(doc["edges"])]
    if not operators:
        # Flink refuses such a job too ("No operators defined in streaming topology").
        raise DocumentError("the document has no operators ('nodes' is empty)")
    return Topology(
        operators,
        edges,
        chaining_enabled=chaining_enabled,
        chain_different_max_parallelism=chain_different,
        runtime_mode=runtime_mode,
    )


def dump_document(topology: Topology) -> dict[str, Any]:
    """The document of a topology, every key spelled out (the golden cases' form); ``state``
    only where it is known (absent means unknown)."""
    return {
        "runtime_mode": topology.runtime_mode.value,
        "chaining_enabled": topology.chaining_enabled,
        "chain_different_max_parallelism": topology.chain_different_max_parallelism,
        "nodes": [
            {
                "id": op.id,
                "name": op.name,
                "parallelism": op.parallelism,
                "max_parallelism": op.max_parallelism,
                "parallelism_configured": op.parallelism_configured,
                "slot_sharing_group": op.slot_sharing_group,
                "chaining_strategy": _value(op.chaining_strategy),
                "uid": op.uid,
                "uid_hash": op.uid_hash,
                "source": _value(op.source),
                "yielding": op.yielding,
                **({} if op.stateful is None else {"state": op.stateful}),
            }
            for op in topology.operators
        ],
        "edges": [
            {
                "source": e.source,
                "target": e.target,
                "partitioner": e.partitioner.value,
                "type_number": e.type_number,
                "exchange_mode": e.exchange_mode.value,
            }
            for e in topology.edges
        ],
    }


# -- parsing helpers ----------------------------------------------------------------------------


def _operator(node: Any, position: int) -> Operator:
    where = f"node #{position}"
    if not isinstance(node, Mapping):
        raise DocumentError(f"{where} must be a JSON object, got {describe_json(node)}")
    if "id" in node:
        where = f"node {label(node['id'])} (#{position})"
    _check_keys(node, _NODE_KEYS, ("id", "name"), where)
    return Operator(
        id=_int(node, "id", where),
        name=_str(node, "name", where),
        parallelism=_int(node, "parallelism", where, -1),
        max_parallelism=_int(node, "max_parallelism", where, -1),
        slot_sharing_group=_str(node, "slot_sharing_group", where, "default", nullable=True),
        chaining_strategy=_enum(node, "chaining_strategy", where, ChainingStrategy, "ALWAYS"),
        uid=_str(node, "uid", where, None, nullable=True),
        uid_hash=_str(node, "uid_hash", where, None, nullable=True),
        source=_enum(node, "source", where, SourceKind, None),
        yielding=_flag(node, "yielding", where, False),
        parallelism_configured=_flag(node, "parallelism_configured", where, False),
        stateful=_state(node, where),
    )


def _edge(edge: Any, position: int) -> Edge:
    where = f"edge #{position}"
    if not isinstance(edge, Mapping):
        raise DocumentError(f"{where} must be a JSON object, got {describe_json(edge)}")
    if "source" in edge and "target" in edge:
        where = f"edge #{position} ({label(edge['source'])} -> {label(edge['target'])})"
    _check_keys(edge, _EDGE_KEYS, ("source", "target"), where)
    return Edge(
        source=_int(edge, "source", where),
        target=_int(edge, "target", where),
        partitioner=_enum(edge, "partitioner", where, Partitioner, "FORWARD", nullable=False),
        type_number=_int(edge, "type_number", where, 0),
        exchange_mode=_enum(
            edge, "exchange_mode", where, ExchangeMode, "UNDEFINED", nullable=False
        ),
    )


_MISSING = object()


def _int(obj: Mapping[str, Any], key: str, where: str, default: Any = _MISSING) -> int:
    value = obj.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise DocumentError(f"{where}: {key!r} must be an integer, got {_json_repr(value)}")
    return value


def _str(
    obj: Mapping[str, Any], key: str, where: str, default: Any = _MISSING, nullable: bool = False
) -> Any:
    value = obj.get(key, default)
    if value is None and nullable:
        return None
    if not isinstance(value, str):
        raise DocumentError(f"{where}: {key!r} must be a string, got {_json_repr(value)}")
    return value


def _state(node: Mapping[str, Any], where: str) -> bool | None:
    """The ``state`` key: true, false, or absent (or null) for "unknown"."""
    value = node.get("state")
    if value is not None and not isinstance(value, bool):
        raise DocumentError(
            f"{where}: 'state' must be true, false or null (unknown), got {_json_repr(value)}"
        )
    return value


def _flag(obj: Mapping[str, Any], key: str, where: str, default: bool = True) -> bool:
    value = obj.get(key, default)
    if not isinstance(value, bool):
        raise DocumentError(f"{where}: {key!r} must be true or false, got {_json_repr(value)}")
    return value


def _enum(
    obj: Mapping[str, Any],
    key: str,
    where: str,
    kind: type[enum.Enum],
    default: str | None,
    nullable: bool = True,
) -> Any:
    value = obj.get(key, default)
    if value is None and nullable:
        return None
    try:
        return kind(value)
    except (ValueError, TypeError, RecursionError):  # Enum's own message reprs the value
        allowed = ", ".join(m.value for m in kind)
        raise DocumentError(
            f"{where}: unknown {key} {_json_repr(value)} (expected one of {allowed}"
            f"{' or null' if nullable else ''})"
        ) from None


def _check_keys(
    obj: Mapping[str, Any], known: set[str], required: tuple[str, ...], where: str
) -> None:
    """A node or edge holds only keys the format knows, and the ones it cannot do without."""
    _reject_unknown(obj, known, where)
    for key in required:
        if key not in obj:
            raise DocumentError(f"{where} has no {key!r}")


def _reject_unknown(obj: Mapping[str, Any], known: set[str], where: str) -> None:
    unknown = [k for k in obj if k not in known]
    if unknown:
        raise DocumentError(
            f"{where}: unknown key {unknown[0]!r} (known keys: {', '.join(sorted(known))})"
        )


def _value(member: enum.Enum | None) -> Any:
    return None if member is None else member.value


def _json_repr(value: Any) -> str:
    if value is _MISSING:
        return "nothing"
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = label(value)
    except RecursionError:  # a parsed document (a dict) may nest deeper than the stack
        return f"{describe_json(value)} nested too deeply to show"
    return text if len(text) <= 60 else text[:57] + "..."


# -- the fast path: JSON bytes decoded and checked in C -----------------------------------------
#
# msgspec decodes a document straight into these structs and checks every type, range and enum
# member on the way. msgspec keeps the last of a repeated key, so the loader counts the keys the
# objects hold against the text's (``key_count``): a difference sends the input to the precise
# path, which names the repetition. A key the document leaves out takes a counted default
# (``io.json.CountedDefaults``), so the keys held are the fields decoded less the defaults taken,
# without a second look at any object.
# Any input the fast path does not vouch for is read again by ``topology_from_document``, so
# every error message is the precise path's.

#: 64-bit integers, which msgspec checks in C; the strict reader also takes larger literals of
#: up to 20 characters, and reads such (unlikely) documents on the precise path.
_Int = Annotated[int, Meta(ge=-(2**63), le=2**63 - 1)]
#: Parallelism: positive or -1; 0 is caught by a column check.
_Count = Annotated[int, Meta(ge=-1, le=2**63 - 1)]
_UidHash = Annotated[str, Meta(pattern=r"^[0-9A-Fa-f]{32}\Z")]

_DEFAULTS = CountedDefaults()
_default = _DEFAULTS.field


class _Node(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A node as the document spells it; field order is :class:`Operator`'s."""

    id: _Int
    name: str
    parallelism: _Count = _default(-1)
    max_parallelism: _Count = _default(-1)
    slot_sharing_group: str | None = _default("default")
    chaining_strategy: ChainingStrategy | None = _default(ChainingStrategy.ALWAYS)
    uid: str | None = _default(None)
    uid_hash: _UidHash | None = _default(None)
    source: SourceKind | None = _default(None)
    yielding: bool = _default(False)
    parallelism_configured: bool = _default(False)
    # "state": absent (or null) means unknown
    stateful: bool | None = _default(None, name="state")


class _Edge(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """An edge as the document spells it; field order is :class:`Edge`'s."""

    source: _Int
    target: _Int
    partitioner: Partitioner = _default(Partitioner.FORWARD)
    type_number: Annotated[int, Meta(ge=0, le=2**63 - 1)] = _default(0)
    exchange_mode: ExchangeMode = _default(ExchangeMode.UNDEFINED)


class _Document(msgspec.Struct, forbid_unknown_fields=True):
    nodes: list[_Node]
    edges: list[_Edge]
    version: Literal[1] = _default(1)
    runtime_mode: RuntimeMode = _default(RuntimeMode.STREAMING)
    chaining_enabled: bool = _default(True)
    chain_different_max_parallelism: bool = _default(True)


_DECODER = msgspec.json.Decoder(_Document)
_NODE_FIELDS = len(_Node.__struct_fields__)
_EDGE_FIELDS = len(_Edge.__struct_fields__)
_TOP_FIELDS = len(_Document.__struct_fields__)


def decode_document(raw: bytes) -> Topology | None:
    """The topology of a document given as JSON bytes, or ``None`` where the input is not a
    plainly valid document: the caller then reads it with :func:`topology_from_document`, whose
    messages name the fault. Structural errors (duplicate ids, cycles...) are raised here as
    they would be there."""
    with gc_paused():  # a few objects per operator: the collector's passes would cost more
        return _decode_document(raw)


def convert_document(doc: Any) -> Topology | None:
    """:func:`decode_document` for a document already parsed (a dict, as a program builds it):
    msgspec checks it in C as it converts it, and anything it does not vouch for (a tuple for a
    list, a lone surrogate, an integer beyond 64 bits...) is ``None``, for
    :func:`topology_from_document` to name."""
    # msgspec converts a tuple to a list, which the precise path refuses: only lists here.
    if type(doc) is not dict or not all(type(doc.get(k)) is list for k in ("nodes", "edges")):
        return None
    with gc_paused():
        try:
            parsed = _DEFAULTS.convert(doc, _Document)
        except (msgspec.MsgspecError, ValueError):  # a key with a lone surrogate: ValueError
            return None
        if has_lone_surrogate(joined(_strings(parsed.nodes))):
            return None  # JSON text cannot hold a lone surrogate; a str can
        return _topology(parsed)


def _decode_document(raw: bytes) -> Topology | None:
    try:
        doc, omitted = _DEFAULTS.decode(_DECODER, raw)
    except (msgspec.MsgspecError, UnicodeDecodeError):  # msgspec checks UTF-8 too
        return None
    nodes: list[Any] = doc.nodes
    keys = _TOP_FIELDS + len(nodes) * _NODE_FIELDS + len(doc.edges) * _EDGE_FIELDS - omitted
    if key_count(raw, _strings(nodes)) != keys:
        return None  # a repeated key
    del nodes
    return _topology(doc)


def _topology(doc: Any) -> Topology | None:
    """The topology of a checked ``_Document``; lets go of it as it converts it."""
    nodes: list[Any] = doc.nodes
    edges: list[Any] = doc.edges
    if not nodes:
        return None
    for column in (attrgetter("parallelism"), attrgetter("max_parallelism")):
        if 0 in set(map(column, nodes)):
            return None  # parallelism 0: the precise path names the node
    settings = (doc.chaining_enabled, doc.chain_different_max_parallelism, doc.runtime_mode)
    doc.nodes = doc.edges = []  # from here on, each reading is let go of as soon as it is used
    operators = msgspec.convert(nodes, list[Operator], from_attributes=True)
    del nodes
    links = msgspec.convert(edges, list[Edge], from_attributes=True)
    del edges
    return Topology.from_checked(operators, links, *settings)


def _strings(nodes: list[Any]) -> Iterator[str | None]:
    """The free text of the nodes: names, uids and slot sharing groups (the other strings are
    hex digits and enum names)."""
    return chain.from_iterable(map(column, nodes) for column in _TEXT_COLUMNS)


_TEXT_COLUMNS = (attrgetter("name"), attrgetter("uid"), attrgetter("slot_sharing_group"))
