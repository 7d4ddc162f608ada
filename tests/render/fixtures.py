"""Topologies and comparisons to draw: Flink jobs from the builder, Spark plans as Spark's
plan JSON (no JVM), fingerprints read back without edges, and hostile names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest_opid
from pytest_opid.comparison import Comparison, compare
from pytest_opid.flink.builder import StreamEnvironment, source
from pytest_opid.result import Fingerprint
from pytest_opid.spark.query.fingerprint import fingerprint_graph
from pytest_opid.spark.query.graph import graph_from_plan

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "topologies" / "fraud_detection.json")
PICTURES = ROOT / "docs" / "pictures"

HOSTILE = (
    "<script>alert(1)</script>",
    '"]; x',
    "line\nbreak\rand\ttab",
    "\u202eevil\u202c bidi",
    "para\u2028graph\u2029sep",
    "`md` #35; [x] {y} |z| &amp; %% end",
)

_EXEC = "org.apache.spark.sql.execution."


def _node(cls: str, children: int, **fields: object) -> dict:
    return {"class": _EXEC + cls, "num-children": children, **fields}


def _hash(n: int = 200) -> dict:
    return _node(
        "exchange.ShuffleExchangeExec",
        1,
        outputPartitioning=[
            {
                "class": "org.apache.spark.sql.catalyst.plans.physical.HashPartitioning",
                "numPartitions": n,
            }
        ],
    )


def spark_plan(*, dedupe: bool = True, filter_first: bool = False) -> list[dict]:
    """A streaming aggregation over a deduplicated stream, as Spark's plan JSON (pre-order)."""
    plan = [
        _node("aggregate.HashAggregateExec", 1),
        _node("streaming.StateStoreSaveExec", 1),
        _node("aggregate.HashAggregateExec", 1),
        _node("streaming.StateStoreRestoreExec", 1),
        _node("aggregate.HashAggregateExec", 1),
        _hash(),
        _node("aggregate.HashAggregateExec", 1),
        _node("ProjectExec", 1),
    ]
    if dedupe:
        plan += [_node("streaming.StreamingDeduplicateExec", 1), _hash(4)]
    if filter_first:
        plan.append(_node("FilterExec", 1))
    plan.append(_node("streaming.StreamingRelationExec", 0, sourceName="FileSource[/x]"))
    return plan


def spark_fp(**kwargs: bool) -> Fingerprint:
    return fingerprint_graph(graph_from_plan(json.dumps(spark_plan(**kwargs)), streaming=True))


def spark_batch_fp() -> Fingerprint:
    plan = [
        _node("ProjectExec", 1),
        _node("joins.BroadcastHashJoinExec", 2),
        _node("FilterExec", 1),
        _node("RangeExec", 0),
        _node("exchange.BroadcastExchangeExec", 1),
        _node("RangeExec", 0),
    ]
    return fingerprint_graph(graph_from_plan(json.dumps(plan)))


def flink_job(*, insert: bool = False, remove_audit: bool = False, names: bool = False):
    env = StreamEnvironment(4)
    clicks = env.source("Clicks").uid("clicks")
    rules = env.source("Rules").uid("rules")
    parsed = clicks.map("Parse")
    if insert:
        parsed = parsed.filter("Drop bots")
    keyed = parsed.key_by().connect(rules.broadcast()).process("Score").uid("score")
    keyed.sink("Alerts")
    if not remove_audit:
        keyed.rebalance().map("Audit").set_parallelism(2).add_sink("Audit log")
    if names:
        for hostile in HOSTILE:
            keyed.map(hostile).add_sink(hostile[:3] + " sink")
    return env


def flink_fp(**kwargs: bool) -> Fingerprint:
    return pytest_opid.fingerprint(flink_job(**kwargs))


def misplaced() -> Comparison:
    """A filter inserted in front of Parse takes over Parse's ID (and would get its state)."""
    old = pytest_opid.fingerprint(source("Kafka").map("Parse").sink("Print"))
    new = pytest_opid.fingerprint(source("Kafka").filter("Drop bots").map("Parse").sink("Print"))
    return compare(old, new)


def without_edges(fp: Fingerprint) -> Fingerprint:
    """The fingerprint as a snapshot gives it back: no edges."""
    data = fp.to_dict()
    data.pop("edges", None)
    return Fingerprint.from_dict(data)
