"""Chaining invariants: the JobVertices we compute are the chains Flink's rules allow."""

from __future__ import annotations

import dataclasses

from flink_reference import FlinkRules
from hypothesis import HealthCheck, Phase, given, settings

from pytest_opid import compute
from pytest_opid.flink.chaining import ChainingRule, flink_chaining, job_vertices
from pytest_opid.model import Topology
from pytest_opid.strategies import topologies


def check_chain_invariants(t: Topology, rule: ChainingRule = flink_chaining) -> None:
    """Every invariant of operator chains, checked against the independent reference rules."""
    fp = compute(t, rule)
    ref = FlinkRules(t)
    ids = {op.node: op.operator_id for op in fp.operators}
    by_id = {op.id: op for op in t.operators}
    chain_of: dict[int, int] = {}
    for v, vertex in enumerate(fp.job_vertices):
        for node in vertex.nodes:
            assert node not in chain_of, f"operator {node} is in two chains"
            chain_of[node] = v
    assert set(chain_of) == set(by_id), "the chains do not cover every operator"

    for k, e in enumerate(t.edges):
        inside = chain_of[e.source] == chain_of[e.target]
        failed = ref.failed(k)
        if inside:
            assert not failed, (
                f"edge {e.source} -> {e.target} is inside a chain but fails Flink's "
                f"condition(s): {', '.join(failed)}"
            )
        else:
            assert failed, (
                f"edge {e.source} -> {e.target} joins two chains but satisfies every "
                "chaining condition"
            )

    for vertex in fp.job_vertices:
        members = set(vertex.nodes)
        head = vertex.nodes[-1]
        heads = [
            n
            for n in vertex.nodes
            if not any(e.target == n and chain_of[e.source] == chain_of[n] for e in t.edges)
        ]
        assert heads == [head], f"chain {vertex.name!r} has heads {heads}, expected [{head}]"
        for node in vertex.nodes:
            if node == head:
                continue
            ins = [e for e in t.edges if e.target == node]
            assert len(ins) == 1 and ins[0].source in members, (
                f"chain member {node} must have exactly one input, from inside its chain"
            )
        assert vertex.id == ids[head], "a JobVertex's ID is its head's OperatorID"
        assert list(vertex.nodes) == ref.post_order(head), "operators not in post-order"
        assert [o.generated for o in vertex.operators] == [ids[n] for n in vertex.nodes]
        assert vertex.name == ref.chained_name(head)
        assert vertex.parallelism == by_id[head].parallelism
        assert len({by_id[n].parallelism for n in members}) == 1, "members differ in parallelism"
        assert len({by_id[n].slot_sharing_group for n in members}) == 1, (
            "members differ in slot sharing group"
        )


@given(topologies())
def test_chains_obey_flinks_chaining_conditions(t):
    """Chains partition the operators; every edge inside a chain satisfies all of Flink's
    chaining conditions and every edge between chains fails at least one; each chain has one
    head and every other member exactly one input, from inside the chain; a JobVertex's ID is
    its head's OperatorID; its operators are in depth-first post-order, head last; its name is
    Flink's chained name (``A -> B``, ``A -> (B, C)``); members share parallelism and slot
    sharing group."""
    check_chain_invariants(t)


@given(topologies())
def test_chaining_rule_matches_the_reference_edge_by_edge(t):
    """``flink_chaining`` flags exactly the edges the reference finds chainable, and the chain
    builder sees the same chains whatever order the JobVertices come in."""
    ref = FlinkRules(t)
    assert list(flink_chaining(t)) == [ref.chainable(k) for k in range(len(t.edges))]
    chains = job_vertices(t, flink_chaining(t))
    assert sorted(t.operators[c.head].id for c in chains) == sorted(
        n for n in (op.id for op in t.operators) if ref.head_of(n) == n
    )


def ignore_slot_sharing(topology: Topology) -> list[bool]:
    """A deliberately broken chaining rule: Flink's, but blind to slot sharing groups."""
    same_group = Topology(
        [dataclasses.replace(op, slot_sharing_group="default") for op in topology.operators],
        topology.edges,
        topology.chaining_enabled,
        topology.chain_different_max_parallelism,
    )
    return flink_chaining(same_group)


def test_a_broken_chaining_rule_is_caught_with_a_small_counterexample():
    """The chaining property catches a rule that ignores slot sharing groups, and Hypothesis
    shrinks the counterexample to a graph of at most 4 operators (a short FORWARD pipeline that
    crosses into another slot sharing group)."""
    failing: list[Topology] = []

    @settings(
        max_examples=500,
        derandomize=True,
        database=None,
        phases=[Phase.generate, Phase.shrink],
        deadline=None,
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )
    @given(topologies())
    def property_under_broken_rule(t):
        try:
            check_chain_invariants(t, ignore_slot_sharing)
        except AssertionError:
            failing.append(t)
            raise

    try:
        property_under_broken_rule()
    except AssertionError as failure:
        message = str(failure)
        notes = "\n".join(getattr(failure, "__notes__", []))
    else:
        raise AssertionError("the property did not notice the broken chaining rule")
    # Hypothesis reports the shrunk example as "Falsifying example" (before 6.16x) or
    # "Failing test case" (newer releases).
    assert "Falsifying example" in notes or "Failing test case" in notes
    assert "same slot sharing group" in message
    shrunk = failing[-1]  # Hypothesis replays the minimal example last
    assert len(shrunk.operators) <= 4, shrunk
    groups = {op.slot_sharing_group for op in shrunk.operators}
    assert len(groups) > 1, "the counterexample must involve two slot sharing groups"
    # The same graph is fine under the real rule: the counterexample is about the bug.
    check_chain_invariants(shrunk)
