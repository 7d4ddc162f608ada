"""The snapshot text format and its syrupy extension."""

from __future__ import annotations

import pytest

import pytest_opid
from pytest_opid.engine_rules import Check
from pytest_opid.errors import DocumentError
from pytest_opid.io.snapshot import HEADER, dumps, loads
from pytest_opid.plugin.extension import TopologySnapshotExtension
from pytest_opid.result import Fingerprint, JobVertex, OperatorFingerprint, StateOperator

DOC = {
    "nodes": [
        {"id": 1, "name": "Source: Kafka", "parallelism": 4, "source": "new", "uid": "orders in"},
        {"id": 2, "name": 'Parse "JSON"\tv2', "parallelism": 4},
        {
            "id": 3,
            "name": "Fenêtre 1 min",
            "parallelism": 4,
            "uid_hash": "0123456789ABCDEF0123456789abcdef",
        },
        {"id": 4, "name": "Sink: Postgres", "parallelism": 2, "uid": "-"},
    ],
    "edges": [
        {"source": 1, "target": 2},
        {"source": 2, "target": 3, "partitioner": "HASH"},
        {"source": 3, "target": 4, "partitioner": "REBALANCE"},
    ],
}


def same_vertices(a: Fingerprint, b: Fingerprint) -> bool:
    def key(fp):
        return [
            (v.id, v.name, v.parallelism, sorted(v.operators, key=repr)) for v in fp.job_vertices
        ]

    return key(a) == key(b)


def test_round_trip_keeps_everything_the_comparison_needs():
    fp = pytest_opid.fingerprint(DOC)
    back = loads(dumps(fp))
    assert back.operators == fp.operators  # node, name, ids, uid, parallelism, job vertex
    assert same_vertices(back, fp)
    assert back.state_operators is None
    assert dumps(back) == dumps(fp)


def test_round_trip_of_every_golden_case(golden_cases):
    for case in golden_cases:
        fp = pytest_opid.fingerprint(case["topology"])
        back = loads(dumps(fp), origin=str(case["case"]))
        assert back.operators == fp.operators, case["case"]
        assert same_vertices(back, fp), case["case"]


def test_the_text_is_one_line_per_operator_and_deterministic():
    fp = pytest_opid.fingerprint(DOC)
    text = dumps(fp)
    assert text == dumps(pytest_opid.fingerprint(DOC))
    assert text.startswith(HEADER + "\n") and text.endswith("\n")
    rows = text.split("[operators]\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(rows) == 1 + len(fp.operators)  # a commented header, then one row per operator
    for op, row in zip(fp.operators, rows[1:], strict=True):
        assert op.operator_id in row and row.startswith("v")
    assert '"orders in"' in text and '"Fenêtre 1 min"' in text
    assert "0123456789abcdef0123456789abcdef" in text


def test_spark_state_operators_round_trip():
    ops = (OperatorFingerprint(0, "dedupe", "a" * 32, job_vertex="b" * 32),)
    fp = Fingerprint(
        ops,
        (JobVertex("b" * 32, "query", 1, ()),),
        (StateOperator(0, "c" * 32, "dropDuplicates [user id]", "dedupe"),),
    )
    back = loads(dumps(fp))
    assert back.state_operators == fp.state_operators
    assert "[state operators]" in dumps(fp)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "not a pytest-opid topology snapshot"),
        ("hello\n", "not a pytest-opid topology snapshot"),
        (f"{HEADER}\nv1 x\n", "line 2: a row outside"),
        (f'{HEADER}\n[operators]\nv1 abc - 4 1 - "x"\n', "line 3: 'abc' is not a 32-digit"),
        (f"{HEADER}\n[operators]\nv1 {'a' * 32} - 4 1 -\n", "line 3: expected 7 columns"),
        (f'{HEADER}\n[operators]\nv1 {"a" * 32} - four 1 - "x"\n', "line 3: invalid literal"),
        (f"{HEADER}\n[operators]\nv1 {'a' * 32} - 4 1 - x\n", "line 3: expected a quoted"),
        (
            f'{HEADER}\n[job]\n[operators]\nv9 {"a" * 32} - 4 1 - "x"\n[job vertices]\n[end]\n',
            "vertex v9",
        ),
    ],
)
def test_unreadable_snapshots_name_the_line(text, message):
    with pytest.raises(DocumentError, match=message):
        loads(text, origin="snap.opid")


def test_extension_matches_semantically():
    ext = TopologySnapshotExtension()
    old = ext.serialize(DOC)
    renamed = dict(DOC, nodes=[dict(n, name=n["name"] + "!") for n in DOC["nodes"]])
    assert ext.matches(serialized_data=ext.serialize(renamed), snapshot_data=old)
    moved = dict(DOC, nodes=[*DOC["nodes"], {"id": 0, "name": "Source: Other"}])
    moved["edges"] = [*DOC["edges"], {"source": 0, "target": 2}]
    assert not ext.matches(serialized_data=ext.serialize(moved), snapshot_data=old)
    assert not ext.matches(serialized_data="garbage", snapshot_data=old)
    ext.exact = True
    assert not ext.matches(serialized_data=ext.serialize(renamed), snapshot_data=old)
    assert ext.matches(serialized_data=old, snapshot_data=old)


def test_extension_check_chains_ignores_id_changes():
    ext = TopologySnapshotExtension()
    ext.check = Check.CHAINS
    old = ext.serialize(DOC)
    moved = dict(DOC, nodes=[*DOC["nodes"], {"id": 0, "name": "Source: Other"}])
    # A new first source feeding the (unchained) sink shifts every generated ID, no chain.
    moved["edges"] = [*DOC["edges"], {"source": 0, "target": 4, "partitioner": "REBALANCE"}]
    assert ext.matches(serialized_data=ext.serialize(moved), snapshot_data=old)
    ext.check = Check.BOTH
    assert not ext.matches(serialized_data=ext.serialize(moved), snapshot_data=old)


def test_extension_diff_lines_explain_the_change():
    ext = TopologySnapshotExtension()
    old = ext.serialize(DOC)
    moved = dict(DOC, nodes=[*DOC["nodes"], {"id": 0, "name": "Source: Other"}])
    moved["edges"] = [*DOC["edges"], {"source": 0, "target": 2}]
    lines = list(ext.diff_lines(ext.serialize(moved), old))
    assert lines[0].startswith("Topology not stable")
    assert next(iter(ext.diff_lines(old, "garbage"))).endswith("pytest --snapshot-update")
