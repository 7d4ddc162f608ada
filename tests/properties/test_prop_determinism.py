"""Determinism: a fingerprint depends on the topology and on nothing else."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_opid import compute, fingerprint
from pytest_opid.flink.document import dump_document, topology_from_document
from pytest_opid.model import Edge, Topology
from pytest_opid.result import Fingerprint
from pytest_opid.strategies import topologies


def per_node(fp: Fingerprint) -> dict[int, tuple[str, str | None, str | None]]:
    return {o.node: (o.operator_id, o.user_operator_id, o.job_vertex) for o in fp.operators}


@given(topologies())
def test_the_same_topology_gives_the_same_fingerprint(t):
    """Fingerprinting twice, or fingerprinting an equal topology built separately, gives the
    same result."""
    copy = Topology(
        list(t.operators), list(t.edges), t.chaining_enabled, t.chain_different_max_parallelism
    )
    assert copy == t
    first = compute(t)
    assert compute(t) == first
    assert compute(copy) == first
    assert fingerprint(t).to_json() == first.to_json()


@given(topologies())
def test_a_json_round_trip_keeps_the_fingerprint(t):
    """Writing the topology document to JSON text and reading it back changes nothing."""
    text = json.dumps(dump_document(t))
    assert topology_from_document(json.loads(text)) == t
    assert fingerprint(text) == compute(t)


def shuffled_keys(value, rng):
    """The same JSON value with the keys of every object in another order (lists keep theirs,
    because edge order is meaningful)."""
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {k: shuffled_keys(value[k], rng) for k in keys}
    if isinstance(value, list):
        return [shuffled_keys(v, rng) for v in value]
    return value


@given(topologies(), st.randoms(use_true_random=False))
def test_reordered_json_keys_keep_the_fingerprint(t, rng):
    """The order of keys inside the document's objects is irrelevant."""
    text = json.dumps(shuffled_keys(dump_document(t), rng))
    assert fingerprint(text).to_dict() == compute(t).to_dict()


@st.composite
def renumbered(draw, t: Topology):
    """``t`` with new node ids (the sources keep their relative order, nothing else does) and
    its operators listed in another order; edges keep their order. Returns (new, old -> new)."""
    count = len(t.operators)
    fresh = draw(
        st.lists(st.integers(-(10**9), 10**9), min_size=count, max_size=count, unique=True)
    )
    sources = [t.operators[i].id for i in t.sources]  # ascending old id
    others = [op.id for op in t.operators if op.id not in set(sources)]
    mapping = dict(zip(sources, sorted(fresh[: len(sources)]), strict=True))
    mapping.update(zip(others, fresh[len(sources) :], strict=True))
    order = draw(st.permutations(range(count)))
    ops = [dataclasses.replace(t.operators[i], id=mapping[t.operators[i].id]) for i in order]
    edges = [
        Edge(mapping[e.source], mapping[e.target], e.partitioner, e.type_number, e.exchange_mode)
        for e in t.edges
    ]
    return Topology(ops, edges, t.chaining_enabled, t.chain_different_max_parallelism), mapping


@given(topologies().flatmap(lambda t: st.tuples(st.just(t), renumbered(t))))
def test_renumbering_node_ids_keeps_the_fingerprint(pair):
    """Node ids matter only through the order of the sources: any renumbering that keeps it,
    with the operators listed in any order, gives every operator the same OperatorID and
    the same JobVertex, and the same JobVertices in the same order."""
    t, (moved, mapping) = pair
    before, after = compute(t), compute(moved)
    old = per_node(before)
    new = per_node(after)
    assert {mapping[n]: ids for n, ids in old.items()} == new

    # Node ids are renumbered on purpose: compare the vertices without them.
    def without_nodes(fp):
        return [
            {k: v for k, v in vertex.items() if k != "nodes"}
            for vertex in fp.to_dict()["job_vertices"]
        ]

    assert without_nodes(before) == without_nodes(after)
    assert [tuple(mapping[n] for n in v.nodes) for v in before.job_vertices] == [
        v.nodes for v in after.job_vertices
    ]


_CHILD = """
import json, sys
from pytest_opid import fingerprint
docs = json.load(sys.stdin)
json.dump([fingerprint(d).to_dict() for d in docs], sys.stdout)
"""


@settings(max_examples=10)
@given(st.lists(topologies(), min_size=6, max_size=6), st.integers(0, 2**32 - 1))
def test_another_interpreter_and_hash_seed_give_the_same_fingerprints(batch, seed):
    """A fresh interpreter with another ``PYTHONHASHSEED`` (set, dict and str hashing order)
    computes the same fingerprints (a few topologies per subprocess, to stay fast)."""
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    result = subprocess.run(
        [sys.executable, "-c", _CHILD],
        input=json.dumps([dump_document(t) for t in batch]),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [compute(t).to_dict() for t in batch]
