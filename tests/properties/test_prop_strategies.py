"""The strategies themselves: what they generate is valid, covers every feature, obeys its knobs."""

from __future__ import annotations

from collections import Counter

import pytest
from flink_reference import FlinkRules, java_utf8
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from pytest_opid import compute
from pytest_opid.model import (
    ChainingStrategy,
    ExchangeMode,
    Partitioner,
    SourceKind,
    Topology,
)
from pytest_opid.strategies import REFACTORING_KINDS, refactorings, topologies


def assert_valid(t: Topology) -> None:
    """Acyclic, unique ids and uids, consistent input positions, FORWARD at equal parallelism."""
    ids = [op.id for op in t.operators]
    assert len(set(ids)) == len(ids)
    uids = [java_utf8(op.uid) for op in t.operators if op.uid is not None]
    assert len(set(uids)) == len(uids)
    # Acyclic: repeatedly remove operators without remaining inputs.
    remaining = set(ids)
    edges = list(t.edges)
    while remaining:
        free = {
            n for n in remaining if not any(e.target == n and e.source in remaining for e in edges)
        }
        assert free, f"cycle among {sorted(remaining)}"
        remaining -= free
    for op in t.operators:
        positions = sorted(e.type_number for e in t.edges if e.target == op.id)
        if positions and positions[0] == 0:
            assert set(positions) == {0}, f"operator {op.id} mixes input positions {positions}"
        elif positions:
            assert set(positions) == {1, 2}, f"operator {op.id} has input positions {positions}"
    by_id = {op.id: op for op in t.operators}
    for e in t.edges:
        if e.partitioner is Partitioner.FORWARD:
            assert by_id[e.source].parallelism == by_id[e.target].parallelism
    # It is a Topology: rebuilding it from its parts validates again.
    assert Topology(t.operators, t.edges, t.chaining_enabled) is not None


@given(topologies())
def test_every_generated_topology_is_valid(t):
    """Generated topologies are acyclic, with unique ids and uids (also as Java encodes them),
    consistent input positions (0 only, or 1 and 2), FORWARD only between equal parallelisms."""
    assert_valid(t)
    assert 1 <= len(t.operators) <= 12
    assert 1 <= len(t.sources) <= 3


def features(t: Topology) -> set[str]:
    """The features the strategy promises, as seen in one topology."""
    found: set[str] = set()
    rules = FlinkRules(t)
    ops = t.operators
    ends = [(e.source, e.target) for e in t.edges]
    if any(op.uid is not None for op in ops):
        found.add("uid")
    if any(op.uid is None for op in ops[1:]):
        found.add("no uid")
    if any(op.uid_hash is not None for op in ops):
        found.add("uid hash")
    if len(t.sources) > 1:
        found.add("several sources")
    for op in ops:
        ins = [e for e in t.edges if e.target == op.id]
        if sum(e.type_number == 0 for e in ins) > 1:
            found.add("union")
        if any(e.type_number == 2 for e in ins):
            found.add("two-input operator")
        if len({e.target for e in t.edges if e.source == op.id}) > 1:
            found.add("fan-out")
        if op.yielding:
            found.add("yielding sink")
        if op.max_parallelism != -1:
            found.add("max parallelism")
        if op.slot_sharing_group != "default":
            found.add("slot sharing group")
        if op.source is not None:
            found.add(f"source {op.source.value}")
        if op.parallelism == -1:
            found.add("default parallelism")
        found.add(f"strategy {op.chaining_strategy.value if op.chaining_strategy else None}")
    if len(set(ends)) < len(ends):
        found.add("multi-edge")
    if len({op.parallelism for op in ops}) > 1:
        found.add("mixed parallelism")
    if not t.chaining_enabled:
        found.add("chaining disabled")
    if not t.chain_different_max_parallelism:
        found.add("same max parallelism required")
    for k, e in enumerate(t.edges):
        found.add(f"partitioner {e.partitioner.value}")
        if e.exchange_mode is not ExchangeMode.UNDEFINED:
            found.add(f"exchange {e.exchange_mode.value}")
        failed = rules.failed(k)
        if not failed:
            found.add("chained edge")
            if ops[t.index_of(e.target)].chaining_strategy is ChainingStrategy.HEAD_WITH_SOURCES:
                found.add("HEAD_WITH_SOURCES chained behind a new source")
        elif len(failed) == 1:
            found.add(f"only fails: {failed[0]}")
    if any(len(v.operators) > 2 for v in compute(t).job_vertices):
        found.add("chain of 3+")
    return found


EXPECTED_FEATURES = {
    "uid",
    "no uid",
    "uid hash",
    "several sources",
    "union",
    "two-input operator",
    "fan-out",
    "multi-edge",
    "yielding sink",
    "max parallelism",
    "slot sharing group",
    "default parallelism",
    "mixed parallelism",
    "chaining disabled",
    "same max parallelism required",
    "chained edge",
    "chain of 3+",
    "HEAD_WITH_SOURCES chained behind a new source",
    *(f"source {k.value}" for k in SourceKind),
    *(f"strategy {s.value}" for s in ChainingStrategy),
    "strategy None",
    *(f"partitioner {p.value}" for p in Partitioner),
    *(f"exchange {m.value}" for m in ExchangeMode if m is not ExchangeMode.UNDEFINED),
    # Each chaining condition is, in some examples, the only reason an edge is not chained.
    # Except equal parallelism: a FORWARD edge between different parallelisms does not exist
    # in Flink (it becomes REBALANCE), so that condition always fails with the partitioner's.
    "only fails: same slot sharing group",
    "only fails: both operators have a factory",
    "only fails: upstream strategy is not NEVER",
    "only fails: downstream strategy allows chaining",
    "only fails: no yielding operator behind a legacy source head",
    "only fails: equal max parallelism where required",
    "only fails: forward partitioner",
    "only fails: exchange is not BATCH",
    "only fails: target has a single input",
    "only fails: chaining enabled",
}


def test_defaults_exercise_every_feature_regularly():
    """With no arguments, every feature shows up in a fair share of 400 examples, so users get
    coverage without tuning: the headline features in 8% to 92% (absent often enough too),
    combinations such as "an edge only the BATCH exchange keeps from chaining" in at least 1%."""
    seen: Counter[str] = Counter()
    runs = []

    @settings(
        max_examples=400,
        derandomize=True,
        database=None,
        phases=[Phase.generate],
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(topologies())
    def collect(t):
        runs.append(len(t.operators))
        seen.update(features(t))

    collect()
    total = len(runs)
    share = {f: seen[f] / total for f in EXPECTED_FEATURES}
    rare = {f: round(s, 3) for f, s in share.items() if s < 0.01}
    assert not rare, f"features in under 1% of examples: {rare}"
    core = [
        "uid",
        "uid hash",
        "several sources",
        "union",
        "two-input operator",
        "fan-out",
        "multi-edge",
        "yielding sink",
        "slot sharing group",
        "chaining disabled",
        "mixed parallelism",
        "chained edge",
    ]
    lopsided = {f: round(share[f], 3) for f in core if not 0.08 <= share[f] <= 0.92}
    assert not lopsided, f"features outside 8%..92% of examples: {lopsided}"
    assert min(runs) == 1 and max(runs) == 12


@given(
    topologies(
        min_operators=3,
        max_operators=8,
        min_sources=2,
        max_sources=2,
        uid_probability=0.0,
        uid_hash_probability=0.0,
        parallelism=(2, 3),
        default_parallelism=False,
        partitioners=(Partitioner.FORWARD, Partitioner.HASH),
        exchange_modes=(ExchangeMode.UNDEFINED,),
        slot_sharing_groups=("default",),
        chaining_strategies=(ChainingStrategy.ALWAYS,),
        chaining_disabled=False,
        chain_different_max_parallelism=True,
        unions=False,
        two_inputs=False,
        multi_edges=False,
        fan_out=False,
        source_kinds=(SourceKind.NEW,),
        yielding_sinks=False,
    )
)
def test_knobs_switch_features_off(t):
    """Each knob bounds what appears: sizes, uids, parallelisms, partitioners, groups,
    strategies, switches, unions, two-input operators, multi-edges, fan-out, sinks."""
    assert_valid(t)
    assert 3 <= len(t.operators) <= 8
    assert len(t.sources) == 2
    assert t.chaining_enabled and t.chain_different_max_parallelism
    for op in t.operators:
        assert op.uid is None and op.uid_hash is None and not op.yielding
        assert op.parallelism in (2, 3)
        assert op.slot_sharing_group == "default"
        assert op.chaining_strategy is ChainingStrategy.ALWAYS
        assert op.source in (None, SourceKind.NEW)
        ins = [e for e in t.edges if e.target == op.id]
        assert len(ins) <= 1, "no unions, two-input operators or multi-edges"
        assert len([e for e in t.edges if e.source == op.id]) <= 1, "no fan-out"
    for e in t.edges:
        assert e.exchange_mode is ExchangeMode.UNDEFINED
        assert e.partitioner in (Partitioner.FORWARD, Partitioner.HASH, Partitioner.REBALANCE)


@given(topologies(uid_probability=1.0, uid_hash_probability=1.0, chaining_disabled=True))
def test_knobs_switch_features_on(t):
    """Probability 1 gives every operator a uid and a uid hash; chaining_disabled=True
    disables chaining everywhere."""
    assert all(op.uid is not None and op.uid_hash is not None for op in t.operators)
    assert not t.chaining_enabled


@pytest.mark.parametrize(
    "kwargs",
    [
        {"min_operators": 0},
        {"min_operators": 5, "max_operators": 4},
        {"min_sources": 3, "max_operators": 2},
        {"uid_probability": 1.5},
        {"parallelism": (0, 2)},
        {"parallelism": 4},
        {"partitioners": ()},
        {"chaining_strategies": ("ALWAYS",)},
    ],
)
def test_bad_knobs_are_rejected(kwargs):
    """A bad knob is Hypothesis' InvalidArgument, naming it, not a late odd failure."""
    with pytest.raises(InvalidArgument):
        topologies(**kwargs).validate()


def test_unknown_refactoring_kind_is_rejected():
    t = Topology([], [])
    with pytest.raises(InvalidArgument, match="teleport"):
        refactorings(t, kinds=("teleport",))


@given(topologies().flatmap(lambda t: st.tuples(st.just(t), refactorings(t))))
def test_refactorings_are_valid_edits(pair):
    """A refactoring's ``before`` is the topology it was drawn for, ``after`` is valid, every
    old operator survives with its id, ``added`` are exactly the new ids, and the declared
    ``may_change`` names old operators only."""
    t, r = pair
    assert r.before is t
    assert r.kind in REFACTORING_KINDS
    assert_valid(r.after)
    old_ids = {op.id for op in t.operators}
    new_ids = {op.id for op in r.after.operators}
    assert old_ids <= new_ids
    assert new_ids - old_ids == r.added
    assert r.may_change <= old_ids
    assert r.description
