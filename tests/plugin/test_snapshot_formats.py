"""Snapshots written by the first release (format 1) still load, and judge as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_opid.comparison import compare
from pytest_opid.engine_rules import Check
from pytest_opid.engines import engine_rules
from pytest_opid.io.snapshot import HEADER, dumps, loads

FORMAT1 = Path(__file__).resolve().parents[1] / "data" / "snapshots-format1"


@pytest.mark.parametrize(
    ("name", "engine"),
    [
        ("test_orders_job.opid", "flink"),  # a Flink builder job
        ("test_page_view_stats.opid", "spark"),  # a Spark streaming query (state operators)
        ("test_daily_revenue.opid", "flink"),  # a Spark batch job: format 1 could not tell
    ],
)
def test_format_1_loads_and_round_trips_through_format_2(name, engine):
    text = (FORMAT1 / name).read_text(encoding="utf-8")
    assert text.startswith("# pytest-opid topology snapshot, format 1\n")
    old = loads(text)
    assert old.engine == ""  # format 1 had no tag ...
    comparison = compare(old, old)
    assert comparison.rules.name == engine  # ... the engine that claims it judges it
    assert not comparison.breaks(Check.BOTH)
    again = loads(dumps(old, engine_rules(engine, old).snapshot_preamble(old)))
    assert again.operators == old.operators and again.job_vertices == old.job_vertices
    assert again.state_operators == old.state_operators
    assert dumps(old).startswith(HEADER + "\n")


def test_a_format_1_snapshot_against_a_tagged_fingerprint_uses_the_tag():
    old = loads((FORMAT1 / "test_daily_revenue.opid").read_text(encoding="utf-8"))
    tagged = type(old)(old.operators, old.job_vertices, None, "spark", "batch")
    comparison = compare(old, tagged)
    assert comparison.rules.name == "spark" and comparison.mode == "batch"
    assert not comparison.breaks(Check.BOTH)
