"""``opid diff --json`` and the diff picture of a Spark batch job say what Spark's stages and
plan did (``stage_changes``, ``join_strategies``, ``plan_changes``, ``settings_changes``), never
the splits and merges that pairing stages by operator IDs invents (``chain_changes`` is empty).
Each pair of real PySpark queries is compared as the snapshots hold them, through the CLI."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest_opid
from pytest_opid.cli import main
from pytest_opid.io.snapshot import dumps, loads
from pytest_opid.render.picture import render_diff
from tests.core.test_comparison_json import NEUTRAL
from tests.render.test_pictures import SVG, groups
from tests.spark.test_spark_stage_changes import _inputs, filter_removed

KEYS = [
    *NEUTRAL,
    "stage_changes",
    "join_strategies",
    "plan_changes",
    "settings_changes",
    "check",
    "stable",
]


def _snapshots(tmp_path: Path, old: Any, new: Any) -> tuple[Path, Path]:
    """Both queries saved as ``.opid`` snapshots (names, parallelism, plan; no edges)."""
    paths = tmp_path / "old.opid", tmp_path / "new.opid"
    for path, df in zip(paths, (old, new), strict=True):
        path.write_text(dumps(pytest_opid.fingerprint(df)), encoding="utf-8")
    return paths


def _diff_json(capsys: Any, old: Path, new: Path) -> tuple[int, dict[str, Any]]:
    code = main(["diff", str(old), str(new), "--check", "chains", "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_a_filter_removed_has_no_split_or_merge_in_the_json(spark, tables, tmp_path, capsys):
    old, new = _snapshots(tmp_path, *filter_removed(spark, tables))
    comparison = pytest_opid.compare(loads(old.read_text("utf-8")), loads(new.read_text("utf-8")))
    # The engine-neutral pairing still invents them; the JSON no longer says so.
    assert {change.kind for change in comparison.chain_changes} == {"split", "merged"}
    assert comparison.real_chain_changes == ()
    code, data = _diff_json(capsys, old, new)
    assert code == 0 and data["stable"] is True
    assert list(data) == KEYS
    assert (data["engine"], data["mode"]) == ("spark", "batch")
    assert data["chain_changes"] == []
    assert data["stage_changes"] == [] and data["join_strategies"] == []
    assert data["settings_changes"] == []
    assert data["plan_changes"], "the Filter line went away"
    assert all(not change["structural"] for change in data["plan_changes"])
    # Row-wise only: the Filter gone, projections and a scan reading other columns.
    assert {change["operator"] for change in data["plan_changes"]} <= {"Filter", "Project", "Scan"}
    filters = [c for c in data["plan_changes"] if c["operator"] == "Filter"]
    assert [c["kind"] for c in filters] == ["changed"]
    assert "country" in filters[0]["old"] and "country" not in filters[0]["new"]
    assert comparison.to_dict() == {k: v for k, v in data.items() if k not in ("check", "stable")}


def test_a_filter_removed_draws_no_split_or_merge(spark, tables):
    old, new = filter_removed(spark, tables)
    a, b = pytest_opid.fingerprint(old), pytest_opid.fingerprint(new)
    comparison = pytest_opid.compare(loads(dumps(a)), loads(dumps(b)))
    assert comparison.chain_changes  # what the picture used to draw
    root = ET.fromstring(render_diff(comparison))
    # Every stage a plain box; the removed Project drawn apart (a snapshot has no edges).
    chains = [g.attrib["class"] for g in groups(root, "chain")]
    assert chains == ["chain chain-chain"] * len(b.job_vertices) + ["chain chain-removed"]
    drawn = " ".join(el.text or "" for el in root.iter() if el.tag != f"{SVG}style")
    assert "stage 1" in drawn  # the boxes' labels and tooltips are read
    assert "split" not in drawn and "merged" not in drawn
    dot = render_diff(comparison, "dot")
    assert "split" not in dot and "merged" not in dot


def test_a_broadcast_join_added_is_a_stage_added_in_the_json(spark, tables, tmp_path, capsys):
    from pyspark.sql import functions as F

    orders, customers = _inputs(spark, tables)
    old = orders.join(F.broadcast(customers), "customer_id").groupBy("country").count()
    more = customers.withColumnRenamed("country", "home")
    new = orders.join(F.broadcast(customers), "customer_id")
    new = new.join(F.broadcast(more), "customer_id").groupBy("country").count()
    paths = _snapshots(tmp_path, old, new)
    code, data = _diff_json(capsys, *paths)
    assert code == 1 and data["stable"] is False
    assert data["chain_changes"] == []
    added = [c for c in data["stage_changes"] if c["kind"] == "added"]
    assert len(added) == 1
    assert added[0]["old"] is None
    assert added[0]["new"]["name"] == "FileScan json -> Filter"
    assert added[0]["new"]["id"] in {v.id for v in pytest_opid.fingerprint(new).job_vertices}
    changed = [c for c in data["stage_changes"] if c["kind"] == "changed"]
    assert [(c["gained"], c["lost"]) for c in changed] == [(["BroadcastHashJoin"], [])]
    assert changed[0]["old"]["name"] != changed[0]["new"]["name"]
    assert data["join_strategies"] == []
    scans = [c for c in data["plan_changes"] if c["operator"] == "Scan"]
    assert [(c["kind"], c["old"], c["structural"]) for c in scans] == [("added", None, True)]
    # The picture marks the added and the changed stage, not a split or merge.
    comparison = pytest_opid.compare(*(loads(p.read_text("utf-8")) for p in paths))
    root = ET.fromstring(render_diff(comparison))
    classes = [g.attrib["class"] for g in groups(root, "chain")]
    assert not {"chain chain-split", "chain chain-merged"} & set(classes)
    assert classes.count("chain chain-added") == 1
    assert classes.count("chain chain-changed") == 1


def test_a_group_by_column_added_names_the_new_key(spark, tables, tmp_path, capsys):
    orders = spark.read.parquet(tables["orders"])
    old = orders.groupBy("customer_id").count()
    new = orders.groupBy("customer_id", "amount").count()
    code, data = _diff_json(capsys, *_snapshots(tmp_path, old, new))
    assert code == 1 and data["stable"] is False
    assert data["chain_changes"] == [] and data["stage_changes"] == []
    structural = [c for c in data["plan_changes"] if c["structural"]]
    exchanges = [c for c in structural if c["operator"].endswith("Exchange")]
    assert len(exchanges) == 1
    (exchange,) = exchanges
    assert exchange["kind"] == "changed"
    assert "amount" not in exchange["old"] and "customer_id" in exchange["old"]
    assert "amount" in exchange["new"] and "customer_id" in exchange["new"]
    assert any("Aggregate" in c["operator"] and "amount" in c["new"] for c in structural)


def test_a_join_strategy_change_is_in_the_json(spark, tables, tmp_path, capsys):
    from pyspark.sql import functions as F

    orders, customers = _inputs(spark, tables)
    old = orders.join(F.broadcast(customers), "customer_id").groupBy("country").count()
    new = orders.hint("merge").join(customers, "customer_id").groupBy("country").count()
    code, data = _diff_json(capsys, *_snapshots(tmp_path, old, new))
    assert code == 1
    assert data["join_strategies"] == [{"old": "BroadcastHashJoin", "new": "SortMergeJoin"}]
    assert data["chain_changes"] == []


def test_a_conf_changed_is_a_settings_change(spark, tables):
    df = spark.read.parquet(tables["orders"]).groupBy("customer_id").count()
    a = pytest_opid.fingerprint(df)
    settings = dict(a.settings)
    assert settings, "a batch fingerprint records its settings"
    name = next(iter(settings))
    b = replace(a, settings=tuple((k, v + "0" if k == name else v) for k, v in a.settings))
    data = pytest_opid.compare(a, b).to_dict()
    assert data["settings_changes"] == [
        {"name": name, "old": settings[name], "new": settings[name] + "0"}
    ]
    assert data["stage_changes"] == [] and data["plan_changes"] == []
    # A snapshot from before settings were recorded: nothing is known to have changed.
    assert pytest_opid.compare(replace(a, settings=()), b).to_dict()["settings_changes"] == []
