"""A Spark snapshot diff is as small as the change (issue 32).

The example streaming job (examples/spark/jobs.py) given a harmless upstream filter: Spark
restarts it on the old checkpoint, and its snapshot (as the plugin writes it) changes in a few
lines, every one meaningful: the new operator, the stage that holds it, and the one line of
operator IDs. In format 5 the same change touched 31 lines (every operator's, stage's and
stateful operator's ID). A new aggregate changes the aggregation's value schema (one line, the
HyperLogLog++ buffer written as one run) and its meaning (one line). Lines are counted by
difflib on the two snapshot texts: one per added or removed line.
"""

from __future__ import annotations

import difflib
import importlib
from pathlib import Path

import pytest

from pytest_opid import fingerprint
from pytest_opid.comparison import Check, compare
from pytest_opid.io.snapshot import HEADER, HEADER_IDS_ONCE, dumps, loads
from pytest_opid.plugin.extension import TopologySnapshotExtension
from pytest_opid.spark.versions import WIDENING, feature_line, installed_line

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def jobs():
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(ROOT))  # examples/ is imported as pytest examples does
        yield importlib.import_module("examples.spark.jobs")


def changed_lines(old: str, new: str) -> list[str]:
    return [
        line
        for line in difflib.unified_diff(old.splitlines(), new.splitlines(), n=0, lineterm="")
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


def snapshots(spark, jobs, events, change):
    write = TopologySnapshotExtension().serialize
    before = fingerprint(jobs.page_view_stats(spark, str(events)))
    after = fingerprint(getattr(jobs, change)(spark, str(events)))
    return before, after, write(before), write(after)


def test_a_harmless_upstream_filter_changes_a_few_lines(spark, jobs, events_dir):
    before, after, old, new = snapshots(
        spark, jobs, events_dir, "page_view_stats_without_health_checks"
    )
    assert old.startswith(HEADER_IDS_ONCE + "\n") and new.startswith(HEADER_IDS_ONCE + "\n")
    comparison = compare(loads(old), after)
    assert len(comparison.changed) >= 9  # every operator ID below the filter moved ...
    assert not comparison.breaks(Check.BOTH)  # ... and Spark restarts: nothing to fail
    lines = changed_lines(old, new)
    assert len(lines) <= 5, "\n".join(lines)
    assert [line for line in lines if line.startswith("+") and '"Filter"' in line]
    assert sum(line.startswith(("-operators ", "+operators ")) for line in lines) == 2
    # Format 5 wrote an ID per operator, stage and stateful operator: 31 lines for this.
    format5 = changed_lines(dumps(before), dumps(after))
    assert dumps(before).startswith(HEADER + "\n") and len(format5) >= 25


def test_a_new_aggregate_changes_its_schema_and_meaning_lines(spark, jobs, events_dir):
    _, after, old, new = snapshots(spark, jobs, events_dir, "page_view_stats_with_last_view")
    lines = changed_lines(old, new)
    if installed_line() >= feature_line(WIDENING):
        assert len(lines) <= 4, "\n".join(lines)
        assert any("`MS[0]`..`MS[51]`: bigint, max: timestamp>" in line for line in lines)
    else:
        # Spark 3.5 to 4.2 do not widen state schemas: the count is "bigint NOT NULL" (as
        # Spark 3.5.9 writes it, tests/data/spark-restart-35), and the new value schema passes
        # the one-line limit: its row, its three fields and ">" replace the old line.
        assert len(lines) <= 7, "\n".join(lines)
        assert '+0        "default"  value  struct<' in lines
        assert any(line[1:].strip() == "max: timestamp" for line in lines)
    assert any('"max(event_time): timestamp"' in line for line in lines)
    assert compare(loads(old), after).breaks(Check.IDS)  # Spark refuses the value schema
