"""``Comparison.to_dict()`` (``opid diff --json``): the engine-neutral keys, then the engine's
own account (``EngineRules.changes``). Flink and Spark streaming add nothing: their JSON is what
it was, ``chain_changes`` included; an engine registered before the hook still works."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from pytest_opid.comparison import compare
from pytest_opid.engines import engine_rules
from pytest_opid.flink.rules import FlinkRules
from pytest_opid.result import Fingerprint, JobVertex, OperatorFingerprint, StateOperator
from tests.plugin.test_diff import fp, job

#: The keys ``opid diff --json`` printed before engines had their own (the CLI adds two more).
NEUTRAL = [
    "engine",
    "mode",
    "loses_state",
    "changed",
    "orphaned",
    "added",
    "renamed",
    "misplaced",
    "chain_changes",
    "state_operator_changes",
]
PINS = {1: "source", 2: "parse", 3: "window", 4: "sink"}


def _vertices(vertices: tuple[JobVertex, ...]) -> list[dict[str, Any]]:
    return [{"id": v.id, "name": v.name} for v in vertices]


def test_a_flink_split_is_in_the_json_as_before():
    old, new = fp(job(uids=PINS)), fp(job(uids=PINS, parallelism={4: 2}))
    c = compare(old, new)
    assert isinstance(c.rules, FlinkRules)
    assert c.rules.changes(c) == {} and c.engine_changes == {}
    assert c.real_chain_changes == c.chain_changes
    data = json.loads(json.dumps(c.to_dict()))
    assert list(data) == NEUTRAL
    (split,) = c.chain_changes
    assert data["chain_changes"] == [
        {"kind": "split", "old": _vertices(split.old), "new": _vertices(split.new)}
    ]
    assert [v["name"] for v in data["chain_changes"][0]["new"]] == ["Window", "Sink: Postgres"]
    assert data["state_operator_changes"] == []
    assert (data["engine"], data["mode"], data["loses_state"]) == ("flink", "streaming", False)


def test_a_flink_merge_and_lost_state_keep_their_keys():
    merged = compare(fp(job(uids=PINS, parallelism={4: 2})), fp(job(uids=PINS)))
    assert list(merged.to_dict()) == NEUTRAL
    assert [c["kind"] for c in merged.to_dict()["chain_changes"]] == ["merged"]
    lost = compare(fp(job()), fp(job(insert_filter=True))).to_dict()
    assert list(lost) == NEUTRAL and lost["loses_state"] is True


def _spark_streaming(*states: tuple[str, str]) -> Fingerprint:
    ops = tuple(
        OperatorFingerprint(i, name, f"{i:032x}", job_vertex=f"{i % 2:032x}")
        for i, (name, _) in enumerate(states)
    )
    vertices = tuple(JobVertex(f"{i:032x}", f"stage {i}", 1, ()) for i in range(2))
    return Fingerprint(
        ops,
        vertices,
        tuple(StateOperator(i, f"{i:032x}", n, k) for i, (n, k) in enumerate(states)),
        engine="spark",
        mode="streaming",
    )


def test_a_spark_streaming_query_adds_nothing():
    old = _spark_streaming(("dropDuplicates [user]", "dedupe"), ("count", "aggregate"))
    new = _spark_streaming(("count", "aggregate"), ("dropDuplicates [user]", "dedupe"))
    c = compare(old, new)
    assert c.engine == "spark" and c.mode == "streaming"
    assert c.engine_changes == {}
    data = c.to_dict()
    assert list(data) == NEUTRAL
    assert [s["state_operator_id"] for s in data["state_operator_changes"]] == [0, 1]


def test_an_engine_without_the_hook_keeps_the_neutral_form(monkeypatch):
    """A third-party engine registered before ``EngineRules.changes`` existed."""

    class Older:
        name = "flink"

        def __getattr__(self, attr: str) -> Any:
            if attr == "changes":
                raise AttributeError(attr)
            return getattr(engine_rules("flink"), attr)

    c = compare(fp(job(uids=PINS)), fp(job(uids=PINS, parallelism={4: 2})))
    monkeypatch.setattr(type(c), "rules", property(lambda self: Older()))
    assert c.engine_changes == {}
    assert list(c.to_dict()) == NEUTRAL and c.to_dict()["chain_changes"]


def test_an_engine_key_replaces_the_neutral_one_in_place():
    c = replace(compare(fp(job(uids=PINS)), fp(job(uids=PINS, parallelism={4: 2}))))
    c.__dict__["engine_changes"] = {"chain_changes": [], "extra": [1]}
    data = c.to_dict()
    assert list(data) == [*NEUTRAL, "extra"]
    assert data["chain_changes"] == [] and c.real_chain_changes == ()
