"""Spark fingerprints are judged by Spark's rules, in Spark's words (never Flink's)."""

from __future__ import annotations

from pyspark.sql import functions as F

import pytest_opid
from pytest_opid.engines import engine_rules
from pytest_opid.io.snapshot import dumps, loads
from tests.spark.spark_checks import orders_pipeline

FLINK_WORDS = ("setUidHash", "savepoint", "uid(", "allowNonRestoredState", "Flink")


def test_a_batch_dataframe_is_tagged_spark_batch(spark, tables):
    fp = pytest_opid.fingerprint(orders_pipeline(spark, tables))
    assert (fp.engine, fp.mode) == ("spark", "batch")
    assert fp.state_operators is None


def test_a_batch_filter_added_is_judged_by_stages(spark, tables):
    """Adding a filter inside a stage moves operator IDs but no stage: a batch job keeps no
    state, so the check passes and says so in Spark's words."""
    old = pytest_opid.fingerprint(orders_pipeline(spark, tables))
    new = pytest_opid.fingerprint(orders_pipeline(spark, tables).filter(F.col("total") > 0))
    comparison = pytest_opid.compare(old, new)
    assert comparison.changed or comparison.added  # IDs did move
    assert not comparison.loses_state
    assert not comparison.breaks("both") and not comparison.breaks("ids")
    text = pytest_opid.explain(comparison, "both")
    moved = len(comparison.changed) + len(comparison.added)
    assert text.startswith(f"Stages unchanged [checked: stages]: {moved} operator")
    assert "batch job keeps no state" in text
    assert not any(word in text for word in FLINK_WORDS)


def test_a_batch_stage_change_fails_with_a_stage_message(spark, tables):
    """A repartition adds an exchange, hence a stage: the change Spark batch users care about."""
    old = pytest_opid.fingerprint(orders_pipeline(spark, tables))
    new = pytest_opid.fingerprint(orders_pipeline(spark, tables).repartition(3))
    comparison = pytest_opid.compare(old, new)
    for check in ("ids", "chains", "both"):
        assert comparison.breaks(check)
    text = pytest_opid.explain(comparison, "ids")
    assert text.startswith("Stages changed [checked: stages]")
    assert "a stage ends at every exchange" in text
    assert not any(word in text for word in FLINK_WORDS)


def test_a_batch_snapshot_speaks_of_stages(spark, tables):
    fp = pytest_opid.fingerprint(orders_pipeline(spark, tables))
    text = dumps(fp, engine_rules(fp.engine).snapshot_preamble(fp))
    header = [line for line in text.splitlines() if line.startswith("#")][:3]
    assert "stages" in " ".join(header)
    assert not any(word in text for word in FLINK_WORDS)
    back = loads(text)
    assert (back.engine, back.mode) == ("spark", "batch")
    assert back == fp


def test_a_batch_and_a_flink_fingerprint_do_not_compare(spark, tables):
    spark_fp = pytest_opid.fingerprint(orders_pipeline(spark, tables))
    flink_fp = pytest_opid.fingerprint({"nodes": [{"id": 1, "name": "Source: x"}], "edges": []})
    try:
        pytest_opid.compare(flink_fp, spark_fp)
    except pytest_opid.DocumentError as exc:
        assert "cannot compare a flink streaming fingerprint with a spark batch one" in str(exc)
    else:
        raise AssertionError("comparing two engines must be an error")


def test_a_streaming_snapshot_keeps_no_machine_specific_path(spark, events_dir):
    from tests.spark.spark_checks import events_pipeline

    fp = pytest_opid.fingerprint(events_pipeline(spark, str(events_dir)))
    rules = engine_rules(fp.engine, fp)
    assert any(str(events_dir) in s for s in fp.sources)  # the live fingerprint has the path
    text = dumps(rules.snapshot_form(fp), rules.snapshot_preamble(fp))
    assert str(events_dir) not in text and f"…/{events_dir.name}" in text
    back = loads(text)
    # From the snapshot, the same query over another temporary folder of the same name still
    # restores without a word about its sources.
    check = pytest_opid.check_restore(back, fp)
    assert check.restorable
    assert not [w for w in check.warnings if w.kind == "sources"]
