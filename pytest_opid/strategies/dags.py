"""Random valid topologies (:func:`topologies`): acyclic graphs of Flink operators.

Graphs are built from primitive draws (:mod:`pytest_opid.strategies.draws`): a node count, then
per node its inputs among the earlier nodes and a few attributes, so Hypothesis shrinks a
failing example to a graph of a few operators.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from pytest_opid.model import (
    ChainingStrategy,
    Edge,
    ExchangeMode,
    Operator,
    Partitioner,
    SourceKind,
    Topology,
)
from pytest_opid.strategies.draws import chance, either, events, pick, recent, some

__all__ = ["UID_WORDS", "topologies"]

# How often each optional feature shows up, per node, edge or topology. Chosen so that with no
# arguments every feature appears in a fair share of examples (tests/properties checks this).
_P_SOURCE = 0.15  # an operator after the first is another source
_P_UNION = 0.12  # a non-source operator reads a union of streams
_P_TWO_INPUT = 0.12  # a non-source operator is a two-input (connect) operator
_P_SAME_INPUT = 0.3  # a union member / second input repeats the previous one (side outputs)
_P_NEW_PARALLELISM = 0.25  # a non-source operator sets its own parallelism
_P_REPARTITION = 0.3  # an edge is not FORWARD
_P_EXCHANGE = 0.2  # an edge has an explicit exchange mode
_P_SLOT_SHARING = 0.12  # an operator picks a slot sharing group
_P_STRATEGY = 0.2  # an operator has a non-default chaining strategy
_P_BEHIND_SOURCE = 0.25  # an operator right behind a source is HEAD_WITH_SOURCES
_P_MAX_PARALLELISM = 0.1  # an operator sets its max parallelism
_P_YIELDING_SINK = 0.6  # an operator without outputs is a (yielding) sink writer
_P_CHAINING_DISABLED = 0.1  # env.disableOperatorChaining()
_P_SAME_MAX_PARALLELISM = 0.25  # chaining of different max parallelisms is forbidden
_P_TEXT_UID = 0.2  # a uid is arbitrary text rather than a readable word

_SOURCE_NAMES = ("Kafka", "Sequence Source", "Custom Source", "Files", "Datagen", "Quellé")
_OPERATOR_NAMES = (
    "Map",
    "Filter",
    "Flat Map",
    "Process",
    "Keyed Reduce",
    "Window(TumblingEventTimeWindows(60000))",
    "Timestamps/Watermarks",
    "Zählen",
    "集計",
)
_TWO_INPUT_NAMES = ("Co-Map", "Co-Process", "Join", "Enrich (broadcast)")
#: Readable uids (a uid is sometimes arbitrary text instead).
UID_WORDS = (
    "source",
    "parse",
    "dedup",
    "count_uid",
    "enrich-v2",
    "window.agg",
    "zählen",
    "集計",
    "sink 🙂",
)


def _check_range(name: str, low: int, high: int, minimum: int) -> None:
    if not (isinstance(low, int) and isinstance(high, int)) or not minimum <= low <= high:
        raise InvalidArgument(f"{name}: need {minimum} <= min <= max, got min={low}, max={high}")


def _check_probability(name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise InvalidArgument(f"{name} must be between 0 and 1, got {value!r}")


def _check_choices(name: str, values: Sequence, kind: type | None = None) -> tuple:
    values = tuple(values)
    if not values:
        raise InvalidArgument(f"{name} must not be empty")
    if kind is not None:
        for v in values:
            if not (isinstance(v, kind) or v is None):
                raise InvalidArgument(f"{name}: {v!r} is not a {kind.__name__}")
    return values


@dataclass(frozen=True)
class _Config:
    min_operators: int
    max_operators: int
    min_sources: int
    max_sources: int
    uid_probability: float
    uid_hash_probability: float
    parallelism: tuple[int, int]
    default_parallelism: bool
    max_parallelisms: tuple[int, ...]
    partitioners: tuple[Partitioner, ...]
    exchange_modes: tuple[ExchangeMode, ...]
    slot_sharing_groups: tuple[str | None, ...]
    chaining_strategies: tuple[ChainingStrategy | None, ...]
    chaining_disabled: bool | None
    chain_different_max_parallelism: bool | None
    unions: bool
    two_inputs: bool
    multi_edges: bool
    fan_out: bool
    source_kinds: tuple[SourceKind | None, ...]
    yielding_sinks: bool


def topologies(
    *,
    min_operators: int = 1,
    max_operators: int = 12,
    min_sources: int = 1,
    max_sources: int = 3,
    uid_probability: float = 0.2,
    uid_hash_probability: float = 0.08,
    parallelism: tuple[int, int] = (1, 4),
    default_parallelism: bool = True,
    max_parallelisms: Sequence[int] = (128, 256, 32768),
    partitioners: Sequence[Partitioner] = tuple(Partitioner),
    exchange_modes: Sequence[ExchangeMode] = tuple(ExchangeMode),
    slot_sharing_groups: Sequence[str | None] = ("default", "g1", "g2"),
    chaining_strategies: Sequence[ChainingStrategy | None] = (
        ChainingStrategy.ALWAYS,
        ChainingStrategy.HEAD,
        ChainingStrategy.NEVER,
        ChainingStrategy.HEAD_WITH_SOURCES,
        None,
    ),
    chaining_disabled: bool | None = None,
    chain_different_max_parallelism: bool | None = None,
    unions: bool = True,
    two_inputs: bool = True,
    multi_edges: bool = True,
    fan_out: bool = True,
    source_kinds: Sequence[SourceKind | None] = (SourceKind.NEW, SourceKind.LEGACY),
    yielding_sinks: bool = True,
) -> st.SearchStrategy[Topology]:
    """Random valid :class:`~pytest_opid.model.Topology` values.

    Every topology is acyclic, has unique ids and uids (also after Java's UTF-8 encoding, so no
    :class:`~pytest_opid.errors.HashCollisionError`) and consistent input positions: a
    one-input operator's edges have ``type_number`` 0 (several of them form a union), a
    two-input operator has edges at positions 1 and 2. A FORWARD edge always joins equal
    parallelisms; where a drawn FORWARD edge would not, it becomes REBALANCE, as in Flink.

    Knobs (the defaults exercise every feature regularly):

    * ``min_operators``/``max_operators``, ``min_sources``/``max_sources``: graph size.
    * ``uid_probability``, ``uid_hash_probability``: per operator, ``uid()`` / ``setUidHash()``.
    * ``parallelism``: (low, high) of explicit parallelisms; ``default_parallelism`` also allows
      -1. ``max_parallelisms``: values an operator's max parallelism is sometimes set to.
    * ``partitioners``, ``exchange_modes``, ``slot_sharing_groups``, ``chaining_strategies``,
      ``source_kinds``: the values that may appear. The first slot sharing group and the first
      chaining strategy are the common case, the rest appear now and then.
    * ``chaining_disabled``, ``chain_different_max_parallelism``: force the graph-wide switch, or
      ``None`` to draw it (chaining is disabled in some examples, max parallelism must match in
      some).
    * ``unions``, ``two_inputs``, ``multi_edges`` (several edges between the same pair, as side
      outputs give), ``fan_out`` (an operator feeding several), ``yielding_sinks``: features
      that can be switched off.
    """
    _check_range("operators", min_operators, max_operators, 1)
    _check_range("sources", min_sources, max_sources, 1)
    if min_sources > max_operators:
        raise InvalidArgument(f"min_sources={min_sources} exceeds max_operators={max_operators}")
    _check_probability("uid_probability", uid_probability)
    _check_probability("uid_hash_probability", uid_hash_probability)
    try:
        low, high = parallelism
    except (TypeError, ValueError):
        raise InvalidArgument(
            f"parallelism must be a (low, high) pair, got {parallelism!r}"
        ) from None
    _check_range("parallelism", low, high, 1)
    config = _Config(
        min_operators=min_operators,
        max_operators=max_operators,
        min_sources=min_sources,
        max_sources=max_sources,
        uid_probability=uid_probability,
        uid_hash_probability=uid_hash_probability,
        parallelism=(low, high),
        default_parallelism=bool(default_parallelism),
        max_parallelisms=_check_choices("max_parallelisms", max_parallelisms, int),
        partitioners=_check_choices("partitioners", partitioners, Partitioner),
        exchange_modes=_check_choices("exchange_modes", exchange_modes, ExchangeMode),
        slot_sharing_groups=_check_choices("slot_sharing_groups", slot_sharing_groups, str),
        chaining_strategies=_check_choices(
            "chaining_strategies", chaining_strategies, ChainingStrategy
        ),
        chaining_disabled=chaining_disabled,
        chain_different_max_parallelism=chain_different_max_parallelism,
        unions=bool(unions),
        two_inputs=bool(two_inputs),
        multi_edges=bool(multi_edges),
        fan_out=bool(fan_out),
        source_kinds=_check_choices("source_kinds", source_kinds, SourceKind),
        yielding_sinks=bool(yielding_sinks),
    )
    if None in config.partitioners or None in config.exchange_modes:
        raise InvalidArgument("partitioners and exchange_modes cannot contain None")
    return _topologies(config)


@st.composite
def _topologies(draw, cfg: _Config) -> Topology:
    count = draw(st.integers(cfg.min_operators, cfg.max_operators))
    chaining_enabled = (
        not cfg.chaining_disabled
        if cfg.chaining_disabled is not None
        else not chance(draw, _P_CHAINING_DISABLED)
    )
    chain_different = (
        cfg.chain_different_max_parallelism
        if cfg.chain_different_max_parallelism is not None
        else not chance(draw, _P_SAME_MAX_PARALLELISM)
    )
    low, high = cfg.parallelism
    parallelisms = ([-1] if cfg.default_parallelism else []) + list(range(low, high + 1))
    groups = cfg.slot_sharing_groups
    strategies = cfg.chaining_strategies
    node_events = (
        _P_SLOT_SHARING if len(groups) > 1 else 0.0,
        _P_STRATEGY if len(strategies) > 1 else 0.0,
        _P_MAX_PARALLELISM,
        cfg.uid_probability,
        cfg.uid_hash_probability,
    )
    forward_ok = Partitioner.FORWARD in cfg.partitioners
    other_partitioners = [p for p in cfg.partitioners if p is not Partitioner.FORWARD]
    p_partitioner = (_P_REPARTITION if other_partitioners else 0.0) if forward_ok else 1.0
    base_exchange = ExchangeMode.UNDEFINED if ExchangeMode.UNDEFINED in cfg.exchange_modes else None
    other_exchanges = [m for m in cfg.exchange_modes if m is not base_exchange]
    p_exchange = (_P_EXCHANGE if other_exchanges else 0.0) if base_exchange else 1.0
    p_multi_input = either(_P_TWO_INPUT if cfg.two_inputs else 0.0, _P_UNION if cfg.unions else 0.0)

    ops: list[dict] = []
    edges: list[Edge] = []
    has_output = [False] * count
    open_nodes: list[int] = []  # operators without outputs yet (when fan-out is off)
    sources = 0
    source_nodes: set[int] = set()
    seen_uids: set[bytes] = set()
    seen_hashes: set[str] = set()

    def edge(source: int, target: int, type_number: int) -> None:
        partitioner = Partitioner.FORWARD
        exchange = base_exchange
        repartition, explicit_exchange = events(draw, (p_partitioner, p_exchange))
        if repartition:
            partitioner = pick(draw, other_partitioners)
        if explicit_exchange:
            exchange = pick(draw, other_exchanges)
        if partitioner is Partitioner.FORWARD and (
            ops[source]["parallelism"] != ops[target]["parallelism"]
        ):
            partitioner = Partitioner.REBALANCE  # Flink's choice where FORWARD cannot be
        edges.append(
            Edge(source, target, partitioner, type_number, exchange or ExchangeMode.UNDEFINED)
        )

    for node in range(count):
        needed = cfg.min_sources - sources
        is_source = (
            node == 0
            or count - node <= needed
            or (sources < cfg.max_sources and chance(draw, _P_SOURCE))
        )
        inputs: list[tuple[int, int]] = []  # (upstream, type_number)
        if is_source:
            sources += 1
            source_nodes.add(node)
            kind = pick(draw, cfg.source_kinds)
            name = "Source: " + some(draw, _SOURCE_NAMES)
            par = pick(draw, parallelisms)
            group = groups[0]
            strategy = (
                ChainingStrategy.HEAD
                if kind is SourceKind.LEGACY and ChainingStrategy.HEAD in strategies
                else strategies[0]
            )
        else:
            kind = None
            candidates = list(range(node)) if cfg.fan_out else open_nodes
            first = recent(draw, candidates)
            inputs = [(first, 0)]
            names: tuple[str, ...] = _OPERATOR_NAMES
            if chance(draw, p_multi_input):
                if cfg.two_inputs and (
                    not cfg.unions or chance(draw, _P_TWO_INPUT / p_multi_input)
                ):
                    second = (
                        first
                        if cfg.multi_edges and chance(draw, _P_SAME_INPUT)
                        else recent(draw, candidates)
                    )
                    inputs = [(first, 1), (second, 2)]
                    names = _TWO_INPUT_NAMES
                else:
                    for _ in range(1 + chance(draw, 0.5)):
                        repeat = cfg.multi_edges and chance(draw, _P_SAME_INPUT)
                        upstream = inputs[-1][0] if repeat else recent(draw, candidates)
                        inputs.append((upstream, 0))
            name = some(draw, names)
            ups = [u for u, _ in inputs]
            if not cfg.multi_edges and len(set(ups)) < len(ups):
                inputs, ups = [(first, 0)], [first]  # no duplicate pairs: a plain input
            par = (
                pick(draw, parallelisms)
                if chance(draw, _P_NEW_PARALLELISM)
                else ops[first]["parallelism"]
            )
            # Flink places an operator in its inputs' group when they agree, else "default".
            up_groups = {ops[u]["slot_sharing_group"] for u in ups}
            group = up_groups.pop() if len(up_groups) == 1 else groups[0]
            strategy = strategies[0]
            if (
                ChainingStrategy.HEAD_WITH_SOURCES in strategies
                and ops[first]["source"] is not None
                and len(inputs) == 1
                and chance(draw, _P_BEHIND_SOURCE)
            ):
                strategy = ChainingStrategy.HEAD_WITH_SOURCES  # meant to chain to its source
        max_par = -1
        uid = None
        uid_hash = None
        new_group, new_strategy, new_max_par, has_uid, has_uid_hash = events(draw, node_events)
        if new_group:
            group = pick(draw, groups)
        if new_strategy:
            strategy = pick(draw, strategies)
        if new_max_par:
            max_par = pick(draw, cfg.max_parallelisms)
        if has_uid:
            uid = _uid(draw, seen_uids, node)
        if has_uid_hash:
            value = int.from_bytes(draw(st.binary(min_size=16, max_size=16)), "big")
            while f"{value:032x}" in seen_hashes:  # distinct, as user IDs of state must be
                value = (value + 1) % (1 << 128)
            uid_hash = f"{value:032x}"
            seen_hashes.add(uid_hash)
        ops.append(
            {
                "id": node,
                "name": name,
                "parallelism": par,
                "max_parallelism": max_par,
                "slot_sharing_group": group,
                "chaining_strategy": strategy,
                "uid": uid,
                "uid_hash": uid_hash,
                "source": kind,
            }
        )
        for upstream, type_number in inputs:
            edge(upstream, node, type_number)
            if not has_output[upstream]:
                has_output[upstream] = True
                open_nodes.remove(upstream)
        open_nodes.append(node)

    operators = []
    for node, op in enumerate(ops):
        yielding = False
        if (
            cfg.yielding_sinks
            and not has_output[node]
            and node not in source_nodes
            and chance(draw, _P_YIELDING_SINK)
        ):
            yielding = True
            op["name"] = "Sink: Writer"
        operators.append(Operator(yielding=yielding, **op))
    return Topology(
        operators,
        edges,
        chaining_enabled=chaining_enabled,
        chain_different_max_parallelism=chain_different,
    )


def _uid(draw, seen: set[bytes], node: int) -> str:
    """A readable or arbitrary uid, distinct from ``seen`` once encoded as Java would (UTF-8
    with lone surrogates as "?"), so the graph is a topology rather than a hash collision."""
    uid = (
        draw(st.text(min_size=1, max_size=8))
        if chance(draw, _P_TEXT_UID)
        else some(draw, UID_WORDS)
    )
    while uid.encode("utf-8", "replace") in seen:
        uid = f"{uid}-{node}"
    seen.add(uid.encode("utf-8", "replace"))
    return uid
