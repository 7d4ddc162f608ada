"""Huge and deep graphs fingerprint without recursion limits, and a uid whose hash collides.

These build the Topology directly (no documents, no builder) to stay fast; timings live in
benchmarks/bench_core.py, not here.
"""

from __future__ import annotations

import json

import pytest

from pytest_opid import compute, fingerprint
from pytest_opid.errors import HashCollisionError
from pytest_opid.flink.document import dump_document, load_document
from pytest_opid.flink.hasher import uid_operator_id
from pytest_opid.model import Edge, Operator, Partitioner, SourceKind, Topology


def test_million_operator_pipeline():
    """A linear pipeline of 1,000,000 operators, a key_by every 1,000: 1,000 chains."""
    size = 1_000_000
    operators = [Operator(0, "Source: S", 2, source=SourceKind.NEW)]
    operators += [Operator(i, "Map", 2) for i in range(1, size)]
    forward, hashed = Partitioner.FORWARD, Partitioner.HASH
    edges = [Edge(i, i + 1, hashed if i % 1000 == 999 else forward) for i in range(size - 1)]
    fp = compute(Topology(operators, edges))
    assert len(fp.operators) == size
    assert len(fp.job_vertices) == 1000
    first, last = fp.job_vertices[0], fp.job_vertices[-1]
    assert first.nodes == tuple(range(999, -1, -1))  # Flink's order: post-order, head last
    assert first.name == "Source: S" + " -> Map" * 999
    assert last.nodes[-1] == 999_000 and len(last.operators) == 1000
    assert len({op.operator_id for op in fp.operators}) == size  # no accidental repeats
    assert all(op.job_vertex == fp.job_vertices[op.node // 1000].id for op in fp.operators[::997])


def test_hundred_thousand_way_fan_out():
    """One source feeding 100,000 operators, every one chained to it: one chain whose name
    lists them all."""
    width = 100_000
    operators = [Operator(0, "Source: S", 4, source=SourceKind.NEW)]
    operators += [Operator(i, f"Map {i}", 4) for i in range(1, width + 1)]
    edges = [Edge(0, i) for i in range(1, width + 1)]
    fp = compute(Topology(operators, edges))
    assert len(fp.job_vertices) == 1
    vertex = fp.job_vertices[0]
    assert len(vertex.operators) == width + 1
    assert vertex.nodes[-1] == 0 and vertex.nodes[0] == 1
    assert vertex.name.startswith("Source: S -> (Map 1, Map 2, ")
    assert vertex.name.endswith(f", Map {width})")
    assert len({op.operator_id for op in fp.operators}) == width + 1


def test_deep_document(tmp_path):
    """A document is shallow JSON, but its graph may be 100,000 operators deep."""
    depth = 100_000
    operators = [Operator(i, f"op{i}", 1) for i in range(depth)]
    operators[0] = Operator(0, "Source: S", 1, source=SourceKind.NEW)
    edges = [
        Edge(i, i + 1, Partitioner.REBALANCE if i % 2 else Partitioner.FORWARD)
        for i in range(depth - 1)
    ]
    topology = Topology(operators, edges)
    path = tmp_path / "deep.json"
    path.write_text(json.dumps(dump_document(topology)), encoding="utf-8")
    loaded = load_document(path)
    assert loaded == topology
    fp = fingerprint(path)
    assert len(fp.job_vertices) == depth // 2
    assert fp.job_vertices[-1].name == f"op{depth - 2} -> op{depth - 1}"
    assert len({op.operator_id for op in fp.operators}) == depth


def test_uid_hash_collision():
    """A uid whose bytes equal the hash input of an operator hashed before it: node 1 (no uid,
    first in the walk, node-local counter 0, no chainable output) hashes the four bytes of the
    little-endian int 0; the uid of four NUL characters hashes the same bytes. Flink's hasher
    rejects a uid whose hash is taken, and so do we."""
    collider = "\x00\x00\x00\x00"
    operators = [
        Operator(1, "Source: A", 1, source=SourceKind.NEW),
        Operator(2, "Source: B", 1, source=SourceKind.NEW, uid=collider),
    ]
    topology = Topology(operators, [])
    generated = compute(Topology(operators[:1], [])).operators[0].operator_id
    assert uid_operator_id(collider).hex() == generated
    with pytest.raises(HashCollisionError) as info:
        compute(topology)
    message = str(info.value)
    assert repr(collider) in message and "operator 2" in message and "operator 1" in message
    assert generated in message


def test_generated_hash_equal_to_an_earlier_uid_s_is_not_refused():
    """Flink checks only user-specified hashes against those assigned before: node 2 (no uid,
    second in the walk, counter 1) hashes the bytes of the little-endian int 1, which node 1's
    uid spells. Both IDs are the same, and no error is raised, as in Flink's hasher."""
    operators = [
        Operator(1, "Source: A", 1, source=SourceKind.NEW, uid="\x01\x00\x00\x00"),
        Operator(2, "Source: B", 1, source=SourceKind.NEW),
    ]
    fp = compute(Topology(operators, []))
    assert fp.operators[0].operator_id == fp.operators[1].operator_id
