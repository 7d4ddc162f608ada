"""diff.compare / render on hand-built topologies whose effect on state follows from Flink's rules:
state is looked up by the user-defined ID (setUidHash) where set, else by the OperatorID; a uid()
fixes the OperatorID to murmur3_128(uid); generated IDs fold in every input's ID, so an operator
inserted upstream changes every generated ID downstream; names play no part."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import mmh3
import pytest

import pytest_opid
from pytest_opid.cli.commands import diff_command
from pytest_opid.comparison import compare
from pytest_opid.engine_rules import Check
from pytest_opid.errors import OpidError
from pytest_opid.model import Edge, Operator, Partitioner, SourceKind, Topology
from pytest_opid.render.explain import render
from pytest_opid.result import Fingerprint, JobVertex, OperatorFingerprint, StateOperator

DATA = Path(__file__).resolve().parents[1] / "data"


def job(
    *,
    insert_filter: bool = False,
    names: dict[int, str] | None = None,
    uids: dict[int, str] | None = None,
    hashes: dict[int, str] | None = None,
    parallelism: dict[int, int] | None = None,
    drop_window: bool = False,
) -> Topology:
    """Kafka source -> Parse -> keyBy -> Window -> Sink; optionally a Filter after the source."""
    names = {1: "Source: Kafka", 2: "Parse", 3: "Window", 4: "Sink: Postgres", 9: "Filter"} | (
        names or {}
    )
    uids = uids or {}
    hashes = hashes or {}
    parallelism = parallelism or {}

    def op(node: int, **kw) -> Operator:
        return Operator(
            node,
            names[node],
            parallelism=parallelism.get(node, 4),
            uid=uids.get(node),
            uid_hash=hashes.get(node),
            **kw,
        )

    ops = [op(1, source=SourceKind.NEW)]
    edges = []
    upstream = 1
    if insert_filter:
        ops.append(op(9))
        edges.append(Edge(1, 9))
        upstream = 9
    ops.append(op(2))
    edges.append(Edge(upstream, 2))
    if drop_window:
        ops.append(op(4))
        edges.append(Edge(2, 4, Partitioner.HASH))
    else:
        ops += [op(3), op(4)]
        edges += [Edge(2, 3, Partitioner.HASH), Edge(3, 4)]
    return Topology(ops, edges)


def fp(topology: Topology) -> Fingerprint:
    return pytest_opid.fingerprint(topology)


def by_name(ops) -> dict[str, OperatorFingerprint]:
    return {o.name: o for o in ops}


def murmur(uid: str) -> str:
    return mmh3.hash_bytes(uid.encode("utf-8"), 0).hex()


# -- Flink's rules ------------------------------------------------------------------------------


def test_identical_topologies_keep_all_state():
    c = compare(fp(job()), fp(job()))
    assert len(c.kept) == 4
    assert not (c.changed or c.orphaned or c.added or c.chain_changes)
    assert not c.loses_state
    assert not c.breaks(Check.BOTH)


def test_renaming_operators_keeps_state():
    old = fp(job())
    new = fp(job(names={2: "Parse JSON", 3: "Tumbling window 1 min"}))
    c = compare(old, new)
    assert not c.loses_state and not c.breaks("both")
    assert {(o.name, n.name) for o, n in c.renamed} == {
        ("Parse", "Parse JSON"),
        ("Window", "Tumbling window 1 min"),
    }
    assert "harmless" in render(c)


def test_inserting_upstream_changes_downstream_generated_ids():
    c = compare(fp(job()), fp(job(insert_filter=True)))
    # The source is hashed before the filter exists: same position, same chained-output count.
    assert [o.name for o, _ in c.kept] == ["Source: Kafka"]
    assert [(o.name, n.name) for o, n in c.changed] == [
        ("Parse", "Parse"),
        ("Window", "Window"),
        ("Sink: Postgres", "Sink: Postgres"),
    ]
    assert all(o.operator_id != n.operator_id for o, n in c.changed)
    assert {o.name for o in c.orphaned} == {"Parse", "Window", "Sink: Postgres"}
    assert [n.name for n in c.added] == ["Filter", "Parse", "Window", "Sink: Postgres"]
    assert c.loses_state and c.breaks(Check.IDS)


def test_uid_pinned_operators_keep_their_published_ids_when_an_operator_is_inserted():
    # A job whose IDs a running Flink published: source and counting map pinned with uid().
    case = json.loads((DATA / "published.json").read_text())[0]
    doc = case["topology"]
    published = case["expected"]["operator_ids"]
    changed = json.loads(json.dumps(doc))
    changed["nodes"].append({"id": 9, "name": "Filter", "parallelism": 4})
    changed["edges"][0]["target"] = 9
    changed["edges"].insert(1, {"source": 9, "target": 2})
    c = compare(pytest_opid.fingerprint(doc), pytest_opid.fingerprint(changed))
    kept = {o.node: n.operator_id for o, n in c.kept}
    assert kept == {1: published["1"], 4: published["4"]}
    assert kept[1] == murmur("source_uid") and kept[4] == murmur("count_uid")
    assert {o.node for o in c.orphaned} == {2, 5}
    assert {o.operator_id for o in c.orphaned} == {published["2"], published["5"]}


def test_uid_pins_the_id_whatever_changes_upstream():
    pins = {2: "parse", 3: "window", 4: "sink"}
    c = compare(fp(job(uids=pins)), fp(job(uids=pins, insert_filter=True)))
    assert not c.loses_state
    assert [n.name for n in c.added] == ["Filter"]
    assert by_name(n for _, n in c.kept)["Window"].operator_id == murmur("window")


def test_set_uid_hash_with_the_old_id_restores_state():
    old = fp(job())
    before = compare(old, fp(job(insert_filter=True)))
    pins = {o.node: o.state_id for o, _ in before.changed}
    pinned = fp(job(insert_filter=True, hashes=pins))
    c = compare(old, pinned)
    assert not c.orphaned and not c.loses_state
    # The generated IDs still differ; Flink restores by the user-defined ID.
    for o, n in c.kept:
        if o.node in pins:
            assert n.user_operator_id == o.operator_id != n.operator_id
    assert [n.name for n in c.added] == ["Filter"]
    assert not c.breaks(Check.BOTH)


def test_a_removed_uid_is_named_and_restored():
    pins = {2: "parse", 3: "window", 4: "sink"}
    c = compare(fp(job(uids=pins)), fp(job(uids={2: "parse", 4: "sink"})))
    ((old, new),) = c.changed
    assert (old.name, old.operator_id, new.uid) == ("Window", murmur("window"), None)
    text = render(c)
    assert '(uid "window" removed)' in text
    assert '"Window"  .uid("window")  (its old uid)' in text
    assert ".setUidHash" not in text and "pin every stateful operator" not in text


def test_removed_operator_is_orphaned_without_a_counterpart():
    c = compare(fp(job(uids={4: "sink"})), fp(job(uids={4: "sink"}, drop_window=True)))
    window = by_name(c.orphaned)["Window"]
    assert window.name not in {o.name for o, _ in c.changed}
    assert c.loses_state
    text = render(c)
    assert "gone" in text and window.state_id in text


def test_renamed_and_moved_operator_is_not_paired_with_a_stranger():
    # "Parse" renamed while a filter is inserted: pairing by position would suggest giving the
    # new Filter Parse's state. Only uid and name pair operators.
    c = compare(fp(job()), fp(job(insert_filter=True, names={2: "Parse JSON"})))
    assert "Parse" in {o.name for o in c.orphaned}
    assert all(o.name == n.name for o, n in c.changed)
    assert not any(n.name == "Filter" for _, n in c.changed)


def test_chain_split_fails_only_where_chains_are_held_stable():
    pins = {1: "source", 2: "parse", 3: "window", 4: "sink"}
    old = fp(job(uids=pins))
    new = fp(job(uids=pins, parallelism={4: 2}))  # Window -> Sink no longer chain
    c = compare(old, new)
    assert not c.loses_state
    assert [ch.kind for ch in c.chain_changes] == ["split"]
    (split,) = c.chain_changes
    assert split.old[0].name == "Window -> Sink: Postgres"
    assert [v.name for v in split.new] == ["Window", "Sink: Postgres"]
    assert not c.breaks(Check.IDS)
    assert c.breaks(Check.CHAINS) and c.breaks(Check.BOTH)
    assert "split" in render(c, "chains")


def test_chain_merge_is_reported():
    pins = {1: "source", 2: "parse", 3: "window", 4: "sink"}
    c = compare(fp(job(uids=pins, parallelism={4: 2})), fp(job(uids=pins)))
    assert [(ch.kind, len(ch.old), len(ch.new)) for ch in c.chain_changes] == [("merged", 2, 1)]


def test_spark_state_directories():
    def spark(*states: tuple[str, str]) -> Fingerprint:
        ops = tuple(
            OperatorFingerprint(i, name, f"{i:032x}", job_vertex=f"{0:032x}")
            for i, (name, _) in enumerate(states)
        )
        vertex = JobVertex(f"{0:032x}", "query", 1, ())
        return Fingerprint(
            ops,
            (vertex,),
            tuple(StateOperator(i, murmur(f"{k}:{n}"), n, k) for i, (n, k) in enumerate(states)),
        )

    old = spark(("dropDuplicates [user]", "dedupe"), ("count by window", "aggregate"))
    same = compare(
        old, spark(("dropDuplicates [user]", "dedupe"), ("count by window", "aggregate"))
    )
    assert not same.state_operator_changes and not same.loses_state
    swapped = compare(
        old, spark(("count by window", "aggregate"), ("dropDuplicates [user]", "dedupe"))
    )
    assert [s.state_operator_id for s in swapped.state_operator_changes] == [0, 1]
    assert swapped.loses_state and swapped.breaks("ids")
    text = render(swapped)
    assert 'state/0  was dedupe "dropDuplicates [user]", is now aggregate "count by window"' in text
    appended = compare(
        old,
        spark(
            ("dropDuplicates [user]", "dedupe"),
            ("count by window", "aggregate"),
            ("stream-stream join", "join"),
        ),
    )
    # A stateless operator added upstream moves the (shape-hashed) operator IDs, but Spark
    # still finds state/0 and state/1 by number, read by the same kind of operator.
    moved = spark(("dropDuplicates [user]", "dedupe"), ("count by window", "aggregate"))
    moved = Fingerprint(
        moved.operators,
        moved.job_vertices,
        tuple(
            StateOperator(s.state_operator_id, murmur(s.operator_id), s.name, s.kind)
            for s in moved.state_operators
        ),
    )
    assert not compare(old, moved).state_operator_changes
    (change,) = appended.state_operator_changes
    assert change.old is None and change.new.kind == "join"
    # A stateful operator more: Spark 4.3 compares the list of stateful operators with the
    # checkpoint's metadata and refuses to restart (STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_
    # STATE_METADATA; tests/data/spark-restart, join_inner__add_dedup_before_join). The first
    # release said "starts with empty state" here, which the engine contradicts.
    assert appended.loses_state
    assert any(p.kind == "state_operators" for p in appended.restore.problems)


# -- the message --------------------------------------------------------------------------------


def test_render_explains_lost_state_and_the_fix():
    old = fp(job())
    c = compare(old, fp(job(insert_filter=True)))
    text = render(c)
    lines = text.splitlines()
    assert lines[0] == "Topology not stable [check=both]: 3 operators would lose their state."
    for o, n in c.changed:
        assert f"{o.state_id} -> {n.state_id}" in text
        assert f'.setUidHash("{o.state_id}")' in text
    assert "Cannot map checkpoint/savepoint" in text and "--allowNonRestoredState" in text
    assert '.uid("' in text
    assert "pytest --snapshot-update" in text
    assert "New operators (start with empty state):" in text
    assert "pytest" not in render(c, accept=None)
    # Most important first: the changed IDs come before the hints.
    assert text.index("ID changed") < text.index("How to fix")


def test_render_of_a_harmless_change_has_no_fix():
    c = compare(fp(job()), fp(job(names={2: "Parse JSON"})))
    text = render(c)
    assert text.startswith("No state lost")
    assert "How to fix" not in text


def test_check_parse_rejects_unknown_values():
    assert Check.parse("ids") is Check.IDS
    with pytest.raises(ValueError, match="'ids', 'chains', 'both'"):
        Check.parse("everything")


def test_to_dict_is_json():
    c = compare(fp(job()), fp(job(insert_filter=True)))
    data = json.loads(json.dumps(c.to_dict()))
    assert data["loses_state"] is True
    assert [x["old"]["name"] for x in data["changed"]] == ["Parse", "Window", "Sink: Postgres"]


# -- opid diff ----------------------------------------------------------------------------------


def cli_diff(namespace: argparse.Namespace) -> int:
    """``opid diff`` in-process: print what it prints, return its exit status."""
    code, output = diff_command(namespace)
    print(output, end="")
    return code


def args(old, new, *, format=None, as_json=False) -> argparse.Namespace:
    return argparse.Namespace(old=str(old), new=str(new), format=format, json=as_json)


def write(path: Path, topology: Topology) -> Path:
    from pytest_opid.flink.document import dump_document

    path.write_text(json.dumps(dump_document(topology)))
    return path


def test_cli_diff_exit_codes(tmp_path, capsys):
    old = write(tmp_path / "old.json", job())
    renamed = write(tmp_path / "renamed.json", job(names={3: "Window 1m"}))
    inserted = write(tmp_path / "inserted.json", job(insert_filter=True))
    assert cli_diff(args(old, renamed)) == 0
    assert "No state lost" in capsys.readouterr().out
    assert cli_diff(args(old, inserted)) == 1
    out = capsys.readouterr().out
    assert "would lose their state" in out and "snapshot-update" not in out
    assert cli_diff(args(old, inserted, as_json=True)) == 1
    assert json.loads(capsys.readouterr().out)["loses_state"] is True


def test_cli_diff_reads_saved_fingerprints_and_snapshots(tmp_path, capsys):
    from pytest_opid.io.snapshot import dumps

    saved = tmp_path / "old.fingerprint.json"
    saved.write_text(fp(job()).to_json())
    snap = tmp_path / "test_job.opid"
    snap.write_text(dumps(fp(job(insert_filter=True))))
    assert cli_diff(args(saved, snap)) == 1
    assert cli_diff(args(snap, snap)) == 0
    capsys.readouterr()


def test_cli_diff_bad_input_raises_opid_errors(tmp_path):
    good = write(tmp_path / "good.json", job())
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(OpidError, match=r"broken\.json"):
        cli_diff(args(good, broken))
    with pytest.raises(OpidError, match=r"missing\.json"):
        cli_diff(args(tmp_path / "missing.json", good))
    bad_snapshot = tmp_path / "bad.opid"
    bad_snapshot.write_text("# pytest-opid topology snapshot, format 1\n[operators]\nv1 zz\n")
    with pytest.raises(OpidError, match=r"bad\.opid, line 3"):
        cli_diff(args(bad_snapshot, good))
    with pytest.raises(OpidError, match="--format"):
        cli_diff(args(good, good, format="yaml"))


def test_opid_diff_command(tmp_path, capsys, monkeypatch):
    """The `opid diff` command line (cli.py hands over to cli_diff)."""
    import io

    from pytest_opid.cli import main

    old = write(tmp_path / "old.json", job())
    new = write(tmp_path / "new.json", job(insert_filter=True))
    assert main(["diff", str(old), str(new)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("Topology not stable [check=ids]: 3 operators would lose their state.")
    monkeypatch.setattr("sys.stdin", io.StringIO(new.read_text()))
    assert main(["diff", str(old), "-", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["loses_state"] is True
    assert main(["diff", str(old), str(tmp_path / "nope.json")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: ") and "nope.json" in captured.err
    assert len(captured.err.strip().splitlines()) == 1


def test_operator_inserted_in_front_takes_over_the_old_id_and_its_state():
    """Source -> Parse -> Sink, all chained; a filter inserted before Parse sits where Parse sat
    in Flink's walk (position 1, one chained output, the source as input), so it gets Parse's
    old OperatorID and Flink would restore Parse's state into the filter. That is not a rename."""
    from pytest_opid.flink.builder import source

    old = pytest_opid.fingerprint(source("Kafka").map("Parse").sink("Print"))
    new = pytest_opid.fingerprint(source("Kafka").filter("Drop bots").map("Parse").sink("Print"))
    parse_old = next(op for op in old.operators if op.name == "Parse")
    drop = next(op for op in new.operators if op.name == "Drop bots")
    parse_new = next(op for op in new.operators if op.name == "Parse")
    assert drop.operator_id == parse_old.operator_id  # the premise, from Flink's hashing rule

    c = compare(old, new)
    assert [(o.name, n.name, a.name) for o, n, a in c.misplaced] == [
        ("Parse", "Drop bots", "Parse")
    ]
    assert c.misplaces_state and c.breaks("ids")
    assert not c.renamed  # not reported as a harmless rename
    text = render(c)
    assert "State restored into the wrong operator" in text
    assert f'"Parse"\'s state {parse_old.operator_id} goes to "Drop bots"' in text
    assert f"starts empty as {parse_new.operator_id}" in text
    assert f'.setUidHash("{parse_old.operator_id}")' in text


def test_a_real_rename_is_not_misplaced_state():
    from pytest_opid.flink.builder import source

    old = pytest_opid.fingerprint(source("Kafka").map("Parse").sink("Print"))
    new = pytest_opid.fingerprint(source("Kafka").map("Parse JSON").sink("Print"))
    c = compare(old, new)
    assert not c.misplaced and not c.breaks("both")
    assert [(o.name, n.name) for o, n in c.renamed] == [("Parse", "Parse JSON")]
