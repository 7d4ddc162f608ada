"""A Spark query's state schemas in its ``.opid`` snapshot: DDL a reviewer reads, one changed
line for a new aggregate column, and read back well enough for every restart check."""

from __future__ import annotations

import difflib

from pyspark.sql import functions as F

import pytest_opid
from pytest_opid.engines import engine_rules
from pytest_opid.io.snapshot import dumps, loads
from pytest_opid.spark.versions import WIDENING, feature_line, installed_line
from tests.spark.spark_checks import EVENTS_SCHEMA

#: Spark 4.3 widens state schemas to nullable; Spark 3.5 to 4.2 write them as planned, and a
#: count or a window column is never null (Spark 3.5.9's own schema files in
#: tests/data/spark-restart-35 say "nullable": false for both).
NOT_NULL = "" if installed_line() >= feature_line(WIDENING) else " NOT NULL"


def _snapshot(df) -> tuple[pytest_opid.Fingerprint, str]:
    fp = pytest_opid.fingerprint(df)
    rules = engine_rules(fp.engine, fp)
    return fp, dumps(rules.snapshot_form(fp), rules.snapshot_preamble(fp))


def _changed(before: str, after: str, section: str) -> list[str]:
    def part(text: str) -> list[str]:
        return text.split(f"{section}\n", 1)[1].split("\n\n", 1)[0].splitlines()

    return [
        line
        for line in difflib.unified_diff(part(before), part(after), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


def test_a_new_aggregate_column_is_one_short_line_of_the_snapshot_diff(spark, events_dir):
    stream = spark.readStream.schema(EVENTS_SCHEMA).json(str(events_dir))
    old_fp, old = _snapshot(stream.groupBy("page").agg(F.count("*").alias("views")))
    new_df = stream.groupBy("page").agg(F.count("*").alias("views"), F.max("user").alias("last"))
    new_fp, new = _snapshot(new_df)
    # Spark's aggregation buffer: count's "count", then max's "max" of the bigint column.
    assert _changed(old, new, "[state stores]") == [
        f'-0        "default"  value  struct<count: bigint{NOT_NULL}>',
        f'+0        "default"  value  struct<count: bigint{NOT_NULL}, max: bigint>',
    ]
    assert '0        "default"  key    struct<page: string>' in new
    # Read back, the snapshot judges the restart as the live fingerprint does.
    live = pytest_opid.check_restore(old_fp, new_fp)
    from_snapshot = pytest_opid.check_restore(loads(old), new_fp)
    assert [p.kind for p in from_snapshot.problems] == [p.kind for p in live.problems]
    assert [p.kind for p in live.problems] == ["value_schema"]
    assert from_snapshot.problems[0].message == live.problems[0].message


def test_a_window_key_loses_only_its_metadata_and_restarts_without_a_word(spark, events_dir):
    """The window column's metadata (spark.timeWindow, spark.watermarkDelayMs) is not in the
    snapshot: Spark does not compare it at restart, and neither does any check here."""
    stream = spark.readStream.schema(EVENTS_SCHEMA).json(str(events_dir))
    df = (
        stream.withWatermark("ts", "1 minute").groupBy(F.window("ts", "10 seconds"), "page").count()
    )
    fp, text = _snapshot(df)
    (key,) = {st.key_schema for s in fp.state_operators for st in s.stores}
    assert "spark.timeWindow" in key  # the live fingerprint has it ...
    assert "spark.timeWindow" not in text  # ... the snapshot does not
    if NOT_NULL:  # the key is then longer than a line: written one field per line
        assert "  window: struct<start: timestamp, end: timestamp> NOT NULL,\n" in text
        assert "  page: string\n" in text
    else:
        assert "struct<window: struct<start: timestamp, end: timestamp>, page: string>" in text
    check = pytest_opid.check_restore(loads(text), fp)
    assert check.restorable and check.safe
    assert not [w for w in check.warnings if w.kind in ("key_schema", "value_schema")]
    assert not pytest_opid.compare(loads(text), fp).breaks("both")
