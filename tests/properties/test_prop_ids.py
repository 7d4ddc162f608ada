"""What an OperatorID depends on, and what it does not."""

from __future__ import annotations

import dataclasses

import pytest
from flink_reference import FlinkRules, uid_hash
from hypothesis import assume, given
from hypothesis import strategies as st

from pytest_opid import compute
from pytest_opid.errors import TopologyError
from pytest_opid.flink.document import dump_document, topology_from_document
from pytest_opid.flink.hasher import uid_operator_id
from pytest_opid.model import Topology
from pytest_opid.strategies import topologies


def with_operators(t: Topology, operators) -> Topology:
    return Topology(operators, t.edges, t.chaining_enabled, t.chain_different_max_parallelism)


@given(topologies(uid_probability=0.5))
def test_a_uid_alone_decides_the_id(t):
    """An operator with a uid has murmur3_128 of the uid's UTF-8 bytes as its OperatorID,
    whatever the graph around it."""
    fp = compute(t)
    for op, got in zip(t.operators, fp.operators, strict=True):
        if op.uid is not None:
            assert got.operator_id == uid_hash(op.uid).hex()
            assert got.operator_id == uid_operator_id(op.uid).hex()


@given(topologies(), topologies(), st.text(min_size=1), st.data())
def test_the_same_uid_gives_the_same_id_in_any_two_graphs(a, b, uid, data):
    """Pinning one operator of two unrelated graphs with the same uid gives both the same ID."""
    ids = []
    for t in (a, b):
        at = data.draw(st.integers(0, len(t.operators) - 1))
        ops = [dataclasses.replace(op, uid=None) for op in t.operators]
        ops[at] = dataclasses.replace(ops[at], uid=uid)
        ids.append(compute(with_operators(t, ops)).operators[at].operator_id)
    assert ids[0] == ids[1] == uid_hash(uid).hex()


@given(topologies())
def test_ids_follow_the_reference_walk(t):
    """An operator without a uid has the ID the reference model derives from its place in the
    breadth-first walk, its number of chainable outputs and its inputs' IDs (in input order);
    user IDs are the uid hash, lower-cased."""
    fp = compute(t)
    expected = FlinkRules(t).operator_ids()
    for op, got in zip(t.operators, fp.operators, strict=True):
        assert got.operator_id == expected[op.id].hex(), f"operator {op.id}"
        assert got.user_operator_id == (op.uid_hash.lower() if op.uid_hash else None)


@given(topologies(), st.data())
def test_renaming_never_changes_an_id(t, data):
    """Names take no part in any ID: renaming any operators keeps every OperatorID and every
    JobVertex ID."""
    names = data.draw(st.lists(st.text(), min_size=len(t.operators), max_size=len(t.operators)))
    renamed = with_operators(
        t, [dataclasses.replace(op, name=n) for op, n in zip(t.operators, names, strict=True)]
    )
    before, after = compute(t), compute(renamed)
    assert [o.operator_id for o in before.operators] == [o.operator_id for o in after.operators]
    assert [v.id for v in before.job_vertices] == [v.id for v in after.job_vertices]


@given(topologies(min_operators=2), st.data())
def test_duplicate_uids_always_raise(t, data):
    """Two operators with the same uid are a TopologyError, both when the model is built and
    when a document is loaded."""
    first = data.draw(st.integers(0, len(t.operators) - 1))
    second = data.draw(st.integers(0, len(t.operators) - 1))
    assume(first != second)
    uid = t.operators[first].uid or data.draw(st.text(min_size=1))
    ops = list(t.operators)
    ops[first] = dataclasses.replace(ops[first], uid=uid)
    ops[second] = dataclasses.replace(ops[second], uid=uid)
    with pytest.raises(TopologyError, match="duplicate uid"):
        with_operators(t, ops)
    doc = dump_document(t)
    doc["nodes"][first]["uid"] = uid
    doc["nodes"][second]["uid"] = uid
    with pytest.raises(TopologyError, match="duplicate uid"):
        topology_from_document(doc)


def test_the_reference_model_agrees_with_flink(golden_cases):
    """The oracle itself is right: on all golden cases it reproduces the OperatorIDs Flink 2.3
    computed and, in STREAMING mode, the JobVertices (ID, name, operators in order)."""
    for case in golden_cases:
        t = topology_from_document(case["topology"])
        ref = FlinkRules(t)
        ids = {node: h.hex() for node, h in ref.operator_ids().items()}
        assert {str(n): h for n, h in ids.items()} == case["expected"]["operator_ids"]
        if case["case"].get("runtime_mode") != "STREAMING":
            continue  # BATCH vertices depend on rules outside the chaining model
        heads = [op.id for op in t.operators if ref.head_of(op.id) == op.id]
        got = sorted(
            (ids[h], ref.chained_name(h), [ids[n] for n in ref.post_order(h)]) for h in heads
        )
        expected = sorted(
            (v["id"], v["name"], [o["generated"] for o in v["operators"]])
            for v in case["expected"]["job_vertices"]
        )
        assert got == expected, case["case"]
