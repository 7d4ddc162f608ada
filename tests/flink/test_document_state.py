"""Topology document v1's optional keys (``runtime_mode``, ``parallelism_configured``,
``state``), the model attributes behind them, and what compute and the builder make of them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_opid import fingerprint
from pytest_opid.errors import DocumentError, TopologyError
from pytest_opid.flink.builder import StreamEnvironment, source
from pytest_opid.flink.document import dump_document, topology_from_document
from pytest_opid.model import Edge, Operator, Partitioner, RuntimeMode, Topology

DATA = Path(__file__).resolve().parent.parent / "data"


def doc(**top: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "nodes": [
            {"id": 1, "name": "Source: S", "parallelism": 2, "source": "new"},
            {"id": 2, "name": "Counts", "parallelism": 2},
        ],
        "edges": [{"source": 1, "target": 2, "partitioner": "HASH"}],
    }
    base.update(top)
    return base


def test_defaults_keep_what_documents_meant_before() -> None:
    t = topology_from_document(doc())
    assert t.runtime_mode is RuntimeMode.STREAMING
    assert [(op.parallelism_configured, op.stateful) for op in t.operators] == [
        (False, None),
        (False, None),
    ]
    fp = fingerprint(t)
    assert fp.mode == "streaming"
    assert [op.stateful for op in fp.operators] == [None, None]


def test_the_new_keys_are_read_and_written() -> None:
    d = doc(runtime_mode="BATCH")
    d["nodes"][0].update(parallelism_configured=True, state=True)
    d["nodes"][1].update(state=False)
    t = topology_from_document(d)
    assert t.runtime_mode is RuntimeMode.BATCH
    assert [(op.parallelism_configured, op.stateful) for op in t.operators] == [
        (True, True),
        (False, False),
    ]
    out = dump_document(t)
    assert out["runtime_mode"] == "BATCH"
    assert [(n["parallelism_configured"], n["state"]) for n in out["nodes"]] == [
        (True, True),
        (False, False),
    ]
    assert topology_from_document(json.loads(json.dumps(out))) == t


def test_state_absent_or_null_is_unknown_and_dumped_as_absent() -> None:
    d = doc()
    d["nodes"][1]["state"] = None
    t = topology_from_document(d)
    assert t.operators[1].stateful is None
    assert "state" not in dump_document(t)["nodes"][1]


def test_golden_documents_round_trip_exactly() -> None:
    with (DATA / "cases.jsonl").open(encoding="utf-8") as f:
        cases = [json.loads(line) for line in f]
    for case in cases:
        assert dump_document(topology_from_document(case["topology"])) == case["topology"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"runtime_mode": "batch"}, 'unknown runtime_mode "batch"'),
        ({"runtime_mode": None}, "unknown runtime_mode null"),
        ({"node": {"parallelism_configured": "yes"}}, "node 2 .*'parallelism_configured'"),
        ({"node": {"parallelism_configured": None}}, "'parallelism_configured' must be true"),
        ({"node": {"state": "true"}}, "node 2 .*'state' must be true, false or null"),
        ({"node": {"state": 1}}, "'state' must be true, false or null"),
        ({"node": {"stateful": True}}, "unknown key 'stateful'"),
    ],
)
def test_strict_loading(change: dict[str, Any], message: str) -> None:
    d = doc()
    node = change.pop("node", None)
    d.update(change)
    if node:
        d["nodes"][1].update(node)
    with pytest.raises(DocumentError, match=message):
        topology_from_document(d)


def test_the_model_validates_the_new_attributes() -> None:
    with pytest.raises(TopologyError, match="parallelism_configured must be true or false"):
        Topology([Operator(1, "S", parallelism_configured=1)], [])  # type: ignore[arg-type]
    with pytest.raises(TopologyError, match="stateful must be true, false or None"):
        Topology([Operator(1, "S", stateful="yes")], [])  # type: ignore[arg-type]
    with pytest.raises(TopologyError, match="runtime_mode must be"):
        Topology([Operator(1, "S")], [], runtime_mode="BATCH")  # type: ignore[arg-type]


def test_new_attributes_change_no_id() -> None:
    plain = topology_from_document(doc())
    d = doc(runtime_mode="BATCH")
    for node in d["nodes"]:
        node.update(parallelism_configured=True, state=True)
    marked = topology_from_document(d)
    assert [o.operator_id for o in fingerprint(plain).operators] == [
        o.operator_id for o in fingerprint(marked).operators
    ]


def test_job_vertex_max_parallelism_is_the_chain_heads() -> None:
    t = Topology(
        [
            Operator(1, "Source: S", 2, max_parallelism=64, source=None),
            Operator(2, "Map", 2, max_parallelism=256),
        ],
        [Edge(1, 2)],
    )
    (vertex,) = fingerprint(t).job_vertices
    assert vertex.max_parallelism == 64


# -- BATCH job vertex parallelism --------------------------------------------------------------


def batch(*configured: bool, forward_into_configured: bool = True) -> Topology:
    """Source -> Map (own vertex: another slot sharing group) -> Sink, all parallelism 3."""
    partitioner = Partitioner.FORWARD if forward_into_configured else Partitioner.REBALANCE
    return Topology(
        [
            Operator(1, "Source: S", 3, parallelism_configured=configured[0]),
            Operator(2, "Map", 3, slot_sharing_group="g", parallelism_configured=configured[1]),
            Operator(3, "Sink: X", 3, parallelism_configured=configured[2]),
        ],
        [Edge(1, 2, partitioner), Edge(2, 3, Partitioner.REBALANCE)],
        runtime_mode=RuntimeMode.BATCH,
    )


def test_batch_vertices_without_configured_parallelism_are_decided_at_run_time() -> None:
    fp = fingerprint(batch(False, False, False))
    assert fp.mode == "batch"
    assert [v.parallelism for v in fp.job_vertices] == [-1, -1, -1]
    fp = fingerprint(batch(True, False, True))
    assert [v.parallelism for v in fp.job_vertices] == [3, -1, 3]


def test_batch_forward_groups_share_a_configured_parallelism() -> None:
    fp = fingerprint(batch(False, True, False))
    assert [v.parallelism for v in fp.job_vertices] == [3, 3, -1]
    fp = fingerprint(batch(False, True, False, forward_into_configured=False))
    assert [v.parallelism for v in fp.job_vertices] == [-1, 3, -1]


def test_golden_batch_vertices() -> None:
    """119 of the 200 job vertices of the 17 BATCH golden programs are left to the scheduler
    (-1); 4 of the others had no configured parallelism of their own but a forward() into an
    operator that had."""
    with (DATA / "cases.jsonl").open(encoding="utf-8") as f:
        cases = [json.loads(line) for line in f]
    batch_cases = [c for c in cases if c["topology"]["runtime_mode"] == "BATCH"]
    assert len(batch_cases) == 17
    total = undecided = by_group = 0
    for case in batch_cases:
        t = topology_from_document(case["topology"])
        fp = fingerprint(t)
        assert [v.parallelism for v in fp.job_vertices] == [
            v["parallelism"] for v in case["expected"]["job_vertices"]
        ]
        configured = {op.id: op.parallelism_configured for op in t.operators}
        for v in fp.job_vertices:
            total += 1
            undecided += v.parallelism == -1
            by_group += v.parallelism != -1 and not any(configured[n] for n in v.nodes)
    assert (total, undecided, by_group) == (200, 119, 4)


# -- the builder -------------------------------------------------------------------------------


def test_builder_marks_what_it_knows_to_keep_state() -> None:
    env = StreamEnvironment(2)
    s = env.source("Kafka")
    legacy = env.legacy_source("Old")
    keyed = s.union(legacy).map("Parse").key_by()
    keyed.reduce("Sum").print()
    keyed.process("Dedupe").sink("Out")
    keyed.window().add_sink("Audit")
    s.process("Plain").filter("F")
    marks = {op.name: op.stateful for op in env.to_topology().operators}
    assert marks == {
        "Source: Kafka": True,
        "Source: Old": None,
        "Parse": None,
        "Sum": True,
        "Sink: Print to Std. Out": False,
        "Dedupe": True,
        "Out: Writer": None,
        "Window": True,
        "Sink: Audit": None,
        "Plain": None,
        "F": None,
    }
    assert {op.name: op.stateful for op in fingerprint(env).operators} == marks


def test_builder_set_stateful_and_window_checks() -> None:
    s = source("S").map("M").set_stateful(False)
    assert s.to_topology().operators[1].stateful is False
    with pytest.raises(TopologyError, match="must be True, False or None"):
        s.set_stateful("no")  # type: ignore[arg-type]
    with pytest.raises(TopologyError, match="window\\(\\) needs a keyed stream"):
        source("S").window()


def test_builder_records_configured_parallelism_and_runtime_mode() -> None:
    env = StreamEnvironment(4, runtime_mode="BATCH")
    env.source("S").map("A").set_parallelism(2).map("B").print()
    t = env.to_topology()
    assert t.runtime_mode is RuntimeMode.BATCH
    assert [op.parallelism_configured for op in t.operators] == [False, True, False, False]
    assert env.set_runtime_mode(RuntimeMode.STREAMING).to_topology().runtime_mode is (
        RuntimeMode.STREAMING
    )
    with pytest.raises(TopologyError, match="runtime_mode must be 'STREAMING' or 'BATCH'"):
        StreamEnvironment(runtime_mode="batch")
