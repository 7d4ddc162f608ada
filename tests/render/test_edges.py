"""``Fingerprint.edges``: the dataflow a picture draws, in the saved form when known, never
part of a fingerprint's identity (snapshots record no edges)."""

from __future__ import annotations

import json

import pytest

import pytest_opid
from pytest_opid.errors import DocumentError
from pytest_opid.io.snapshot import dumps, loads
from pytest_opid.result import Fingerprint
from tests.render.fixtures import EXAMPLE, spark_batch_fp, spark_fp


def test_flink_edges_carry_the_partitioner_and_a_blocking_exchange():
    fp = pytest_opid.fingerprint(EXAMPLE)
    assert fp.edges == (
        (1, 3, "FORWARD"),
        (3, 5, "HASH"),
        (2, 5, "BROADCAST"),
        (5, 6, "FORWARD"),
        (5, 8, "REBALANCE"),
    )
    with open(EXAMPLE, encoding="utf-8") as stream:
        doc = json.load(stream)
    doc["edges"][1]["exchange_mode"] = "BATCH"
    assert pytest_opid.fingerprint(doc).edges[1] == (3, 5, "HASH (BATCH)")


def test_spark_edges_name_the_exchange():
    assert {label for _, _, label in spark_fp().edges} == {"", "hash exchange"}
    assert {label for _, _, label in spark_batch_fp().edges} == {"", "broadcast exchange"}


def test_edges_round_trip_and_take_no_part_in_equality():
    fp = pytest_opid.fingerprint(EXAMPLE)
    back = Fingerprint.from_dict(json.loads(fp.to_json()))
    assert back.edges == fp.edges and back == fp
    assert back == Fingerprint(**{**vars(fp), "edges": None})  # edges are no part of equality
    snapshot = loads(dumps(fp))
    assert snapshot.edges is None and snapshot.operators == fp.operators
    data = fp.to_dict()
    del data["edges"]
    assert Fingerprint.from_dict(data).edges is None
    data["edges"] = None
    assert Fingerprint.from_dict(data).edges is None
    data["edges"] = []
    assert Fingerprint.from_dict(data).edges == ()
    assert "edges" not in loads(dumps(fp)).to_dict()


@pytest.mark.parametrize(
    ("edges", "message"),
    [
        ({"a": 1}, "'edges' must be a list"),
        ([[1, 3]], "edges[0]: expected [source node, target node, label]"),
        ([[1, 3, 4]], "edges[0]: expected"),
        ([[1, "3", "HASH"]], "edges[0]: expected"),
        ([[1, 3, "FORWARD"], [1, 2**31, "HASH"]], "edges[1]: expected"),
        ([[1, 99, "HASH"]], "edges[0]: node 99 is not an operator"),
        ([{"source": 1, "target": 3, "label": "HASH"}], "edges[0]: expected"),
        ([[True, 3, "HASH"]], "edges[0]: expected"),
    ],
)
def test_bad_edges_name_the_entry(edges, message):
    data = pytest_opid.fingerprint(EXAMPLE).to_dict()
    data["edges"] = edges
    with pytest.raises(DocumentError) as error:
        Fingerprint.from_dict(data)
    assert message in str(error.value)
