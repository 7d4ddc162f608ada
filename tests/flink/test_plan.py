"""Importing Flink's execution plan JSON: structure, the golden cases (whose plans Flink
printed), the measured reproduction rate, and malformed plans."""

from __future__ import annotations

import json

import pytest

import pytest_opid
from pytest_opid.errors import DocumentError
from pytest_opid.flink.plan import load_plan, topology_from_plan
from pytest_opid.model import ChainingStrategy, Partitioner, SourceKind

# A plan as Flink 2.3 prints it (getExecutionPlan): sinks of the legacy kind come last.
PLAN = {
    "nodes": [
        {"id": 1, "type": "Source: Custom Source", "pact": "Data Source",
         "contents": "Source: Custom Source", "parallelism": 2},
        {"id": 2, "type": "Source: Kafka", "pact": "Data Source", "contents": "Source: Kafka",
         "parallelism": 2},
        {"id": 4, "type": "Co-Map", "pact": "Operator", "contents": "Co-Map", "parallelism": 2,
         "predecessors": [{"id": 2, "ship_strategy": "HASH", "side": "second"},
                          {"id": 1, "ship_strategy": "HASH", "side": "second"}]},
        {"id": 6, "type": "Map", "pact": "Operator", "contents": "Map", "parallelism": 2,
         "predecessors": [{"id": 4, "ship_strategy": "FORWARD", "side": "second"},
                          {"id": 1, "ship_strategy": "FORWARD", "side": "second"}]},
        {"id": 9, "type": "Sink: Writer", "pact": "Operator", "contents": "Sink: Writer",
         "parallelism": 1,
         "predecessors": [{"id": 4, "ship_strategy": "REBALANCE", "side": "second"}]},
        {"id": 7, "type": "Sink: Print to Std. Out", "pact": "Data Sink",
         "contents": "Sink: Print to Std. Out", "parallelism": 2,
         "predecessors": [{"id": 6, "ship_strategy": "FORWARD", "side": "second"}]},
    ]
}  # fmt: skip


def test_structure_of_an_imported_plan():
    topology = topology_from_plan(PLAN)
    ops = {op.id: op for op in topology.operators}
    assert [op.id for op in topology.operators] == [1, 2, 4, 6, 9, 7]
    assert ops[1].source is SourceKind.LEGACY and ops[1].chaining_strategy is ChainingStrategy.HEAD
    assert ops[2].source is SourceKind.NEW and ops[2].chaining_strategy is ChainingStrategy.ALWAYS
    assert ops[9].yielding and not ops[7].yielding  # a Sink V2 writer, a legacy sink
    assert all(op.slot_sharing_group == "default" and op.uid is None for op in ops.values())
    assert [op.parallelism for op in topology.operators] == [2, 2, 2, 2, 1, 2]
    # Edges: each node's inputs in plan order; each node's outputs by target id.
    assert [(e.source, e.target, e.partitioner, e.type_number) for e in topology.edges] == [
        (2, 4, Partitioner.HASH, 1),
        (1, 4, Partitioner.HASH, 2),
        (4, 6, Partitioner.FORWARD, 0),
        (1, 6, Partitioner.FORWARD, 0),
        (6, 7, Partitioner.FORWARD, 0),
        (4, 9, Partitioner.REBALANCE, 0),
    ]
    assert [topology.operators[topology.edge_ends[e][1]].id for e in topology.out_edges[2]] == [
        6,
        9,
    ]


def test_caller_supplies_what_the_plan_lacks():
    topology = topology_from_plan(
        PLAN,
        uids={6: "enrich"},
        uid_hashes={4: "0123456789abcdef0123456789abcdef"},
        slot_sharing_groups={9: "sinks"},
        chaining_strategies={6: "NEVER", 2: ChainingStrategy.HEAD},
        max_parallelisms={4: 128},
        source_kinds={1: "new"},
        type_numbers={6: [1, 2]},
        output_order={4: [9, 6]},
        chaining_enabled=False,
        chain_different_max_parallelism=False,
    )
    ops = {op.id: op for op in topology.operators}
    assert ops[6].uid == "enrich" and ops[6].chaining_strategy is ChainingStrategy.NEVER
    assert ops[4].uid_hash == "0123456789abcdef0123456789abcdef" and ops[4].max_parallelism == 128
    assert ops[9].slot_sharing_group == "sinks"
    assert ops[2].chaining_strategy is ChainingStrategy.HEAD
    assert ops[1].source is SourceKind.NEW and ops[1].chaining_strategy is ChainingStrategy.ALWAYS
    assert [topology.edges[e].type_number for e in topology.in_edges[topology.index_of(6)]] == [
        1,
        2,
    ]
    assert [topology.edges[e].target for e in topology.out_edges[topology.index_of(4)]] == [9, 6]
    # The per-target input order stays the plan's.
    assert [topology.edges[e].source for e in topology.in_edges[topology.index_of(6)]] == [4, 1]
    assert not topology.chaining_enabled and not topology.chain_different_max_parallelism


def test_load_plan_from_text_path_and_mapping(tmp_path):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(PLAN), encoding="utf-8")
    from_text = load_plan(json.dumps(PLAN))
    assert load_plan(path) == from_text == load_plan(str(path)) == load_plan(PLAN)
    # fingerprint() tells a plan from a document by its keys.
    assert pytest_opid.fingerprint(PLAN) == pytest_opid.compute(from_text)
    assert pytest_opid.fingerprint(path) == pytest_opid.compute(from_text)


# -- golden cases -------------------------------------------------------------------------------


def options(case, level):
    """What a caller who knows the job supplies, in three levels (plan alone, plus uids and
    uid hashes, plus every node attribute the plan lacks), and at level 3 also the outputs'
    creation order, which makes the topology complete."""
    topology = case["topology"]
    nodes = topology["nodes"]
    opts: dict = {}
    if level >= 1:
        opts["uids"] = {n["id"]: n["uid"] for n in nodes if n["uid"] is not None}
        opts["uid_hashes"] = {n["id"]: n["uid_hash"] for n in nodes if n["uid_hash"] is not None}
    if level >= 2:
        opts["chaining_strategies"] = {n["id"]: n["chaining_strategy"] for n in nodes}
        opts["slot_sharing_groups"] = {n["id"]: n["slot_sharing_group"] for n in nodes}
        opts["max_parallelisms"] = {n["id"]: n["max_parallelism"] for n in nodes}
        opts["source_kinds"] = {n["id"]: n["source"] for n in nodes}
        opts["chaining_enabled"] = topology["chaining_enabled"]
        opts["chain_different_max_parallelism"] = topology["chain_different_max_parallelism"]
    if level >= 3:
        outputs: dict[int, list[int]] = {}
        for edge in topology["edges"]:
            outputs.setdefault(edge["source"], []).append(edge["target"])
        opts["output_order"] = outputs
    return opts


def reproduced(case, level):
    fp = pytest_opid.compute(load_plan(case["flink_plan"], **options(case, level)))
    expected = case["expected"]
    ids = all(op.operator_id == expected["operator_ids"][str(op.node)] for op in fp.operators)
    vertices = _golden_form(fp.to_dict()["job_vertices"]) == expected["job_vertices"]
    return ids, vertices


@pytest.fixture(scope="module")
def planned(golden_cases):
    cases = [c for c in golden_cases if c["flink_plan"] is not None]
    assert len(cases) == 290
    return cases


def test_plan_with_every_missing_fact_supplied_reproduces_flink(planned):
    """With the plan's gaps filled from the golden topology, the import must give Flink's IDs
    for every case and Flink's job vertices for every STREAMING case: this checks that the
    plan's nodes, predecessors and ship strategies are read right (the golden topologies are
    Flink's StreamGraph; the BATCH job vertices are a limit of the core, not of the import)."""
    for case in planned:
        ids, vertices = reproduced(case, 3)
        assert ids, case["case"]
        if case["case"]["runtime_mode"] == "STREAMING":
            assert vertices, case["case"]


def test_plan_topology_matches_flinks_stream_graph(planned):
    """Nodes and per-node edge orders equal the golden StreamGraph (level 3)."""
    for case in planned:
        topology = load_plan(case["flink_plan"], **options(case, 3))
        golden = case["topology"]
        nodes = {n["id"]: n for n in golden["nodes"]}
        for op in topology.operators:
            node = nodes[op.id]
            assert (op.name, op.parallelism, op.yielding) == (
                node["name"],
                node["parallelism"],
                node["yielding"],
            )
        outputs: dict[int, list[tuple[int, str]]] = {}
        for e in golden["edges"]:
            outputs.setdefault(e["source"], []).append((e["target"], e["partitioner"]))
        for position, out in enumerate(topology.out_edges):
            edges = [topology.edges[e] for e in out]
            assert [(e.target, e.partitioner.value) for e in edges] == outputs.get(
                topology.operators[position].id, []
            )


# Measured on the 290 golden cases (see benchmarks/bench_core.py and docs/flink-inputs.md); a
# drop means the import got worse.
MEASURED = {0: (10, 10), 1: (120, 83), 2: (260, 240)}


@pytest.mark.parametrize("level", sorted(MEASURED))
def test_reproduction_rate_does_not_drop(planned, level):
    ids = vertices = 0
    for case in planned:
        i, v = reproduced(case, level)
        ids += i
        vertices += v
    print(f"level {level}: IDs {ids}/{len(planned)}, job vertices {vertices}/{len(planned)}")
    assert ids >= MEASURED[level][0] and vertices >= MEASURED[level][1]


# -- malformed plans ------------------------------------------------------------------------------


def node(i, **kw):
    return {"id": i, "type": f"n{i}", "pact": "Operator", "contents": f"n{i}", "parallelism": 1,
            **kw}  # fmt: skip


def pred(i, strategy="FORWARD"):
    return {"id": i, "ship_strategy": strategy, "side": "second"}


SOURCE = node(1, pact="Data Source")


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        ([], "JSON object with a 'nodes' list, got a list"),
        ({"operators": []}, "no 'nodes' list"),
        ({"nodes": {}}, "'nodes' must be a list, got an object"),
        ({"nodes": [1]}, "plan node #0 must be a JSON object"),
        ({"nodes": [{"type": "x"}]}, "plan node #0 has no 'id'"),
        ({"nodes": [node("1")]}, "plan node #0: 'id' must be an integer, got '1'"),
        ({"nodes": [node(True)]}, "plan node #0: 'id' must be an integer"),
        ({"nodes": [SOURCE, SOURCE]}, "duplicate plan node id 1"),
        ({"nodes": [{"id": 3, "pact": "Operator"}]}, "plan node 3 has no 'type'"),
        ({"nodes": [node(3, type=7)]}, "plan node 3: 'type' must be a string"),
        ({"nodes": [node(3, pact="Data Lake")]}, "plan node 3: unknown pact 'Data Lake'"),
        ({"nodes": [node(3, pact="IterativeDataStream")]}, "plan node 3: stream iterations"),
        ({"nodes": [node(3, parallelism="4")]}, "plan node 3: 'parallelism' must be an integer"),
        ({"nodes": [node(3, predecessors={})]}, "plan node 3: 'predecessors' must be a list"),
        (
            {"nodes": [node(1, pact="Data Source", predecessors=[pred(2)]), node(2)]},
            "plan node 1 is a Data Source but has predecessors",
        ),
        (
            {"nodes": [SOURCE, node(2, predecessors=[pred(9)])]},
            "plan node 2, predecessor #0 names node 9, which is not in the plan",
        ),
        (
            {"nodes": [SOURCE, node(2, predecessors=[pred(1, "ROUND_ROBIN")])]},
            "plan node 2, predecessor #0 \\(from node 1\\): unknown ship_strategy 'ROUND_ROBIN'",
        ),
        (
            {"nodes": [SOURCE, node(2, predecessors=[pred(1, None)])]},
            "plan node 2, predecessor #0 \\(from node 1\\): unknown ship_strategy None",
        ),
        ({"nodes": [SOURCE, node(2, predecessors=["1"])]}, "plan node 2, predecessor #0 must be"),
        (
            {"nodes": [SOURCE, node(2, predecessors=[{}])]},
            "plan node 2, predecessor #0 has no 'id'",
        ),
        (
            {"nodes": [SOURCE, node(2, predecessors=[{"id": "1"}])]},
            "plan node 2, predecessor #0: 'id' must be an integer",
        ),
    ],
)
def test_malformed_plans(plan, message):
    with pytest.raises(DocumentError, match=message):
        topology_from_plan(plan)


def test_cycle_in_a_plan_is_a_topology_error():
    plan = {
        "nodes": [SOURCE, node(2, predecessors=[pred(1), pred(3)]), node(3, predecessors=[pred(2)])]
    }
    with pytest.raises(pytest_opid.TopologyError, match=r"cycle: (2 -> 3 -> 2|3 -> 2 -> 3)"):
        topology_from_plan(plan)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"uids": {99: "x"}}, "uids names node 99, which is not in the plan"),
        ({"chaining_strategies": {4: "SOMETIMES"}}, "plan node 4: unknown chaining strategy"),
        ({"source_kinds": {1: "old"}}, "plan node 1: unknown source kind 'old'"),
        ({"type_numbers": {4: [1]}}, "type_numbers for plan node 4 must list one"),
        ({"output_order": {4: [6]}}, "output_order for plan node 4 must list the nodes it feeds"),
        ({"output_order": {4: "69"}}, "output_order for plan node 4 must be a list"),
        (
            {"output_order": {1: [6, 4], 2: [4]}, "type_numbers": {4: [2, 1]}},
            None,  # valid: a different but consistent order
        ),
    ],
)
def test_bad_caller_options(kwargs, message):
    if message is None:
        topology_from_plan(PLAN, **kwargs)
        return
    with pytest.raises(DocumentError, match=message):
        topology_from_plan(PLAN, **kwargs)


def test_contradictory_output_order_is_reported():
    # Two nodes fed by both sources in opposite orders: no edge creation order can also make
    # source 1 feed 4 first and source 2 feed 3 first.
    plan = {
        "nodes": [
            node(1, pact="Data Source"),
            node(2, pact="Data Source"),
            node(3, predecessors=[pred(1), pred(2)]),
            node(4, predecessors=[pred(2), pred(1)]),
        ]
    }
    topology_from_plan(plan)  # fine without an output order
    with pytest.raises(DocumentError, match="output_order contradicts"):
        topology_from_plan(plan, output_order={1: [4, 3], 2: [3, 4]})


def test_bad_plan_file_names_the_file(tmp_path):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"nodes": [SOURCE, node(2, predecessors=[pred(5)])]}))
    with pytest.raises(
        DocumentError, match=r"plan\.json: plan node 2, predecessor #0 names node 5"
    ):
        load_plan(path)
    with pytest.raises(DocumentError, match="the plan: not valid JSON"):
        load_plan("{nodes")
    with pytest.raises(DocumentError, match="no such file"):
        load_plan(tmp_path / "missing.json")
    with pytest.raises(TypeError, match="load_plan"):
        load_plan(42)


def _golden_form(vertices):
    """The job vertex keys the golden cases record (the saved form also has nodes and max
    parallelism)."""
    keys = ("id", "name", "parallelism", "operators")
    return [{k: v[k] for k in keys} for v in vertices]
