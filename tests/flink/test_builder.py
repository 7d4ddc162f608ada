"""The fluent builder: structure of what it builds, Flink's defaults and rules, and programs that
reproduce IDs Flink itself computed (golden cases and the published jobs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pytest_opid
from pytest_opid.errors import OpidError, TopologyError
from pytest_opid.flink.builder import StreamEnvironment, legacy_source, source
from pytest_opid.flink.document import dump_document
from pytest_opid.model import ChainingStrategy, Partitioner, SourceKind, Topology

DATA = Path(__file__).resolve().parents[1] / "data"


def edges_of(topology: Topology) -> list[tuple[int, int, str, int]]:
    return [(e.source, e.target, e.partitioner.value, e.type_number) for e in topology.edges]


# -- structure ----------------------------------------------------------------------------------


def test_linear_pipeline_structure():
    job = source("Kafka").map().filter("Drop nulls").sink("Kafka")
    topology = job.to_topology()
    assert [(op.id, op.name) for op in topology.operators] == [
        (1, "Source: Kafka"),
        (2, "Map"),
        (3, "Drop nulls"),
        (4, "Kafka: Writer"),
    ]
    assert edges_of(topology) == [(1, 2, "FORWARD", 0), (2, 3, "FORWARD", 0), (3, 4, "FORWARD", 0)]
    src, _, _, writer = topology.operators
    assert src.source is SourceKind.NEW and src.chaining_strategy is ChainingStrategy.ALWAYS
    assert writer.yielding and writer.source is None
    assert all(op.parallelism == -1 for op in topology.operators)
    assert all(op.slot_sharing_group == "default" for op in topology.operators)


def test_partitioning_calls_take_an_id_and_set_the_next_edge():
    s = source("S")
    s.key_by().process().rebalance().map().rescale().map().shuffle().map().broadcast().map()
    topology = s.to_topology()
    assert [op.id for op in topology.operators] == [1, 3, 5, 7, 9, 11]
    assert [op.name for op in topology.operators][1] == "KeyedProcess"
    assert [e.partitioner for e in topology.edges] == [
        Partitioner.HASH,
        Partitioner.REBALANCE,
        Partitioner.RESCALE,
        Partitioner.SHUFFLE,
        Partitioner.BROADCAST,
    ]


def test_global_forward_and_custom_partitioners():
    s = source("S")
    s.global_().map("g").forward().map("f").partition_custom().map("c")
    assert [e.partitioner.value for e in s.to_topology().edges] == ["GLOBAL", "FORWARD", "CUSTOM"]


def test_partitioner_nearest_the_consumer_wins():
    s = source("S")
    s.rebalance().key_by().map()
    assert [e.partitioner for e in s.to_topology().edges] == [Partitioner.HASH]


def test_default_edge_is_resolved_when_the_topology_is_built():
    s = source("S")
    m = s.map()
    assert [e.partitioner for e in s.to_topology().edges] == [Partitioner.FORWARD]
    m.set_parallelism(3)  # after the edge was created: Flink decides at StreamGraph time
    assert [e.partitioner for e in s.to_topology().edges] == [Partitioner.REBALANCE]


def test_unset_parallelism_takes_the_environment_default_at_build_time():
    env = StreamEnvironment()
    first = env.source("S").map()
    env.set_parallelism(4)
    first.map().set_parallelism(2)
    ops = env.to_topology().operators
    assert [op.parallelism for op in ops] == [4, 4, 2]
    assert [e.partitioner for e in env.to_topology().edges] == [
        Partitioner.FORWARD,
        Partitioner.REBALANCE,
    ]


def test_explicit_forward_between_different_parallelism_is_an_error():
    s = source("Kafka")
    s.map("Parse").set_parallelism(2).forward().filter("Keep").set_parallelism(4)
    with pytest.raises(TopologyError, match=r"forward\(\).*'Parse' \(node 2\).*2.*'Keep'.*4"):
        s.to_topology()


def test_union_gives_the_consumer_every_input_in_order():
    env = StreamEnvironment()
    a, b, c = env.source("A"), env.source("B"), env.source("C")
    a.union(b.rebalance(), c).map("U")
    topology = env.to_topology()
    u = next(op for op in topology.operators if op.name == "U")
    assert u.id == 6  # 1-3 sources, 4 rebalance, 5 the union
    assert edges_of(topology) == [
        (1, 6, "FORWARD", 0),
        (2, 6, "REBALANCE", 0),
        (3, 6, "FORWARD", 0),
    ]


def test_connect_makes_a_two_input_operator():
    env = StreamEnvironment(2)
    a, b = env.source("A"), env.source("B")
    joined = a.key_by().connect(b.key_by()).process("Join")
    assert joined.node_id == 5
    assert edges_of(env.to_topology()) == [(1, 5, "HASH", 1), (2, 5, "HASH", 2)]
    env2 = StreamEnvironment()
    x, y = env2.source("X"), env2.source("Y")
    x.union(y).connect(y).key_by().map()
    assert edges_of(env2.to_topology()) == [
        (1, 6, "HASH", 1),
        (2, 6, "HASH", 1),
        (2, 6, "HASH", 2),
    ]  # ids: 1-2 sources, 3 the union, 4-5 one key_by per input
    assert env2.to_topology().operator(6).name == "Co-Map"


def test_side_output_takes_an_id_and_reads_from_the_operator():
    s = source("S")
    p = s.process()
    late = p.side_output("late").map("Late")
    assert late.node_id == 4
    assert edges_of(s.to_topology()) == [(1, 2, "FORWARD", 0), (2, 4, "FORWARD", 0)]


def test_settings_apply_to_the_operator_and_return_the_stream():
    s = source("S")
    m = s.map()
    same = (
        m.uid("m")
        .set_uid_hash("0123456789abcdef0123456789ABCDEF")
        .set_parallelism(3)
        .set_max_parallelism(128)
        .slot_sharing_group("heavy")
        .name("Parse")
    )
    assert same is m
    op = s.to_topology().operator(2)
    assert (op.uid, op.uid_hash, op.parallelism, op.max_parallelism, op.slot_sharing_group) == (
        "m",
        "0123456789abcdef0123456789ABCDEF",
        3,
        128,
        "heavy",
    )
    assert op.name == "Parse"


def test_transformations_return_new_handles():
    s = source("S")
    m = s.map()
    assert m is not s and m.node_id == 2 and s.node_id == 1


def test_chaining_strategies():
    s = source("S")
    s.map("a").disable_chaining().map("b").start_new_chain().map("c").set_chaining_strategy(
        "HEAD_WITH_SOURCES"
    )
    strategies = [op.chaining_strategy for op in s.to_topology().operators]
    assert strategies == [
        ChainingStrategy.ALWAYS,
        ChainingStrategy.NEVER,
        ChainingStrategy.HEAD,
        ChainingStrategy.HEAD_WITH_SOURCES,
    ]


def test_legacy_source_is_a_head_and_names_follow_flink():
    s = legacy_source()
    s.add_sink()
    s.print()
    s.sink("Files").name("Archive")
    ops = s.to_topology().operators
    assert [op.name for op in ops] == [
        "Source: Custom Source",
        "Sink: Unnamed",
        "Sink: Print to Std. Out",
        "Archive: Writer",
    ]
    assert ops[0].source is SourceKind.LEGACY and ops[0].chaining_strategy is ChainingStrategy.HEAD
    assert [op.yielding for op in ops] == [False, False, False, True]


def test_environment_options_reach_the_topology():
    env = StreamEnvironment(2, chain_different_max_parallelism=False)
    env.source("S").map()
    assert env.to_topology().chain_different_max_parallelism is False
    assert env.to_topology().chaining_enabled is True
    env.disable_operator_chaining().set_chain_different_max_parallelism(True)
    topology = env.to_topology()
    assert (topology.chaining_enabled, topology.chain_different_max_parallelism) == (False, True)
    fingerprint = pytest_opid.fingerprint(env.source("T").map().environment)
    assert len(fingerprint.job_vertices) == 4  # chaining disabled: one vertex per operator


def test_slot_sharing_group_is_inherited_when_inputs_agree():
    env = StreamEnvironment()
    a = env.source("A").slot_sharing_group("g1")
    b = env.source("B").slot_sharing_group("g1")
    c = env.source("C")
    a.map("inherits")
    a.union(b).map("agree")
    a.union(c).map("disagree")
    a.map("explicit").slot_sharing_group("g2").map("from explicit")
    groups = {op.name: op.slot_sharing_group for op in env.to_topology().operators}
    assert groups == {
        "Source: A": "g1",
        "Source: B": "g1",
        "Source: C": "default",
        "inherits": "g1",
        "agree": "g1",
        "disagree": "default",
        "explicit": "g2",
        "from explicit": "g2",
    }


def test_unconsumed_sources_are_left_out_like_flink():
    env = StreamEnvironment()
    env.source("unused")
    env.source("used").print()
    assert [op.name for op in env.to_topology().operators] == [
        "Source: used",
        "Sink: Print to Std. Out",
    ]
    with pytest.raises(TopologyError, match="no operators"):
        source("alone").to_topology()


def test_fingerprint_accepts_a_stream():
    job = source("Kafka").map().sink("Kafka")
    fp = pytest_opid.fingerprint(job)
    assert [v.name for v in fp.job_vertices] == ["Source: Kafka -> Map -> Kafka: Writer"]


# -- early, clear errors -----------------------------------------------------------------------


def test_duplicate_uid_names_the_uid_and_both_operators():
    s = source("S")
    s.map("first").uid("dedupe")
    with pytest.raises(TopologyError, match=r"duplicate uid 'dedupe'.*'first' \(node 2\).*node 3"):
        s.filter("second").uid("dedupe")


def test_reassigning_a_uid_frees_the_old_one():
    s = source("S")
    m = s.map().uid("a").uid("b")
    s.filter().uid("a")
    assert m.to_topology().operator(2).uid == "b"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.set_uid_hash("xyz"), r"uid hash of 'Map' \(node 2\).*32 hex.*'xyz'"),
        (lambda s: s.set_uid_hash("0" * 31), "32 hex"),
        (lambda s: s.set_parallelism(0), r"parallelism of 'Map' \(node 2\).*positive.*0"),
        (lambda s: s.set_parallelism(-1), "positive"),
        (lambda s: s.set_parallelism(True), "positive"),
        (lambda s: s.set_max_parallelism(0), "max parallelism"),
        (lambda s: s.set_max_parallelism(40000), "32768"),
        (lambda s: s.uid(7), "uid must be a string"),
        (lambda s: s.name(3), "name must be a string"),
        (lambda s: s.map(None), "name must be a string"),
        (lambda s: s.slot_sharing_group(None), "slot sharing group must be a string"),
        (lambda s: s.set_chaining_strategy("SOMETIMES"), "unknown chaining strategy 'SOMETIMES'"),
        (lambda s: s.key_by().uid("k"), r"cannot set a uid on .*key_by\(\)"),
        (lambda s: s.union(s).set_parallelism(2), "not an operator"),
        (lambda s: s.reduce(), r"reduce\(\) needs a keyed stream"),
        (lambda s: s.sink().map(), "a sink has no output"),
        (lambda s: s.sink().side_output("x"), "is a sink"),
        (lambda s: s.union(source("other")), "another environment"),
        (lambda s: s.connect("not a stream"), "takes streams"),
    ],
)
def test_builder_errors(call, message):
    mapped = source("S").map()
    with pytest.raises(TopologyError, match=message) as info:
        call(mapped)
    assert isinstance(info.value, OpidError)


def test_environment_errors():
    with pytest.raises(TopologyError, match="environment parallelism"):
        StreamEnvironment(0)
    with pytest.raises(TopologyError, match="chaining must be True or False"):
        StreamEnvironment(chaining="yes")
    with pytest.raises(TopologyError, match="environment parallelism"):
        StreamEnvironment().set_parallelism(-2)


# -- reproducing Flink -----------------------------------------------------------------------------


def assert_reproduces(job, case):
    """The builder's fingerprint equals what Flink computed for ``case``: every operator's ID
    (matched by ID and name, since node ids may differ), every user-defined ID, and the job
    vertices in Flink's order."""
    fp = pytest_opid.fingerprint(job)
    expected = case["expected"]
    names = {str(n["id"]): n["name"] for n in case["topology"]["nodes"]}
    assert {op.operator_id: op.name for op in fp.operators} == {
        generated: names[node] for node, generated in expected["operator_ids"].items()
    }
    assert sorted(op.user_operator_id for op in fp.operators if op.user_operator_id) == sorted(
        expected.get("user_operator_ids", {}).values()
    )
    assert _golden_form(fp.to_dict()["job_vertices"]) == expected["job_vertices"]


@pytest.fixture(scope="module")
def by_seed(golden_cases):
    return {case["case"]["seed"]: case for case in golden_cases}


def test_golden_1001_keyed_reduce_and_disabled_chaining(by_seed):
    env = StreamEnvironment(3)
    s = env.source("op31").set_parallelism(1).set_max_parallelism(128)
    s.key_by().reduce().map("op764").map().disable_chaining().filter().set_parallelism(2)
    assert_reproduces(env, by_seed[1001])


def test_golden_1009_keyed_connect_and_max_parallelism_option(by_seed):
    env = StreamEnvironment(3, chain_different_max_parallelism=False)
    first = env.source("Sequence Source")
    second = env.source("Sequence Source")
    mapped = second.map("op223").set_max_parallelism(128)
    mapped.key_by().connect(first.key_by()).process("op107")
    assert_reproduces(env, by_seed[1009])


def test_golden_1063_legacy_source_unicode_uid_fan_out(by_seed):
    env = StreamEnvironment(4)
    p = env.legacy_source("op670").process().uid("ünïcødé-ид-0")
    p.map("op274")
    p.sink()
    assert_reproduces(env, by_seed[1063])


def test_golden_1082_connect_uids_slot_sharing(by_seed):
    env = StreamEnvironment(3)
    a = env.legacy_source().slot_sharing_group("g1").uid("\U0001d6fc-stage-0")
    b = env.source("op732")
    a.connect(b).map().set_parallelism(1).slot_sharing_group("g1").uid("-1").sink()
    assert_reproduces(env, by_seed[1082])


def test_golden_1124_union_of_sources(by_seed):
    env = StreamEnvironment(4)
    legacy = env.legacy_source()
    seq = env.source("Sequence Source").set_parallelism(1)
    seq.union(legacy).map("op583").set_parallelism(2).process().set_max_parallelism(256)
    assert_reproduces(env, by_seed[1124])


def test_golden_1232_union_with_rebalance_and_sink(by_seed):
    env = StreamEnvironment(2)
    a = env.source("Sequence Source").uid("parse-0")
    b = env.source("Sequence Source").set_parallelism(1)
    a.union(b).map().filter().uid("src-1").sink()
    assert_reproduces(env, by_seed[1232])


def test_golden_1054_broadcast_and_sinks_in_creation_order(by_seed):
    env = StreamEnvironment(4)
    a = env.source("Sequence Source").uid("dedupe-0")
    b = env.source("op312").set_parallelism(1).uid("-1")
    f = a.filter().set_parallelism(1)
    m = f.rebalance().map().disable_chaining().uid("dedupe-2")
    op392 = b.broadcast().map("op392").slot_sharing_group("g1")
    merged = f.union(m).map()
    op392.sink()
    b.sink()
    merged.sink()
    assert_reproduces(env, by_seed[1054])


def test_golden_1000_everything_at_once(by_seed):
    """Unions, a two-input operator fed twice by one stream, side outputs, slot sharing groups
    inherited down a chain, user hashes and sinks created between other operators."""
    env = StreamEnvironment(3)
    s1 = env.source("Collection Source").set_parallelism(1).disable_chaining()
    s1.set_uid_hash("709688a0f5acdf5b239ff4f6fad51557")
    r3 = s1.key_by().reduce()
    s1.map().print()
    p6 = r3.process()
    m9 = p6.side_output("odd").broadcast().map().set_parallelism(1)
    r11 = p6.key_by().reduce()
    f12 = m9.filter().slot_sharing_group("g1").disable_chaining()
    m14 = f12.union(r11).map()
    op17 = m9.key_by().map("op424").set_parallelism(2).uid("-0").map("op197")
    op17.set_uid_hash("7583f9bc0dd7947a3aea40c3cc266a0e")
    m19 = op17.forward().map()
    op17.print().uid("sink-1")
    c21 = m19.connect(m19).map()
    m23 = m14.forward().map().uid("enrich-2")
    p27 = m23.union(c21).map("op807").slot_sharing_group("g1").filter().process()
    p29 = p27.forward().process().slot_sharing_group("g0").uid("\U0001d6fc-stage-3")
    p29.sink().uid("sink-4")
    p27.sink()
    p29.forward().map().forward().map("op91").sink()
    assert_reproduces(env, by_seed[1000])


def _published_form(doc: dict) -> dict:
    """A dumped document without the keys the published documents predate (the runtime mode,
    which parallelisms were configured, and which operators keep state)."""
    out = {k: v for k, v in doc.items() if k != "runtime_mode"}
    dropped = ("parallelism_configured", "state")
    out["nodes"] = [{k: v for k, v in n.items() if k not in dropped} for n in doc["nodes"]]
    return out


def test_published_jobs():
    published = json.loads((DATA / "published.json").read_text(encoding="utf-8"))
    with_uids, word_count = published

    env = StreamEnvironment(4)
    env.legacy_source().uid("source_uid").map().key_by().map().uid("count_uid").add_sink()
    assert _published_form(dump_document(env.to_topology())) == with_uids["topology"]
    fp = pytest_opid.fingerprint(env)
    expected = with_uids["expected"]
    assert {str(op.node): op.operator_id for op in fp.operators} == expected["operator_ids"]
    assert [v.id for v in fp.job_vertices] == expected["job_vertex_ids"]

    env = StreamEnvironment(4)
    env.legacy_source().map().key_by().map().add_sink().set_parallelism(1)
    doc = dump_document(env.to_topology())
    assert _published_form(doc) == word_count["topology"]
    assert [n["parallelism_configured"] for n in doc["nodes"]] == [False, False, False, True]
    fp = pytest_opid.fingerprint(env)
    assert {str(op.node): op.operator_id for op in fp.operators} == word_count["expected"][
        "operator_ids"
    ]


def _golden_form(vertices):
    """The job vertex keys the golden cases record (the saved form also has nodes and max
    parallelism)."""
    keys = ("id", "name", "parallelism", "operators")
    return [{k: v[k] for k in keys} for v in vertices]
