"""The example jobs' topologies, held stable by their committed snapshots.

``pytest examples/spark`` checks them; after an intended change, ``pytest examples/spark
--snapshot-update`` records the new ones. The PySpark guide (docs/pyspark.md) walks through a
refactor that these tests catch.
"""

from __future__ import annotations

import pytest

from examples.spark.jobs import daily_revenue, page_view_stats


@pytest.mark.stable_topology
def test_daily_revenue(opid, spark, inputs):
    opid.record(daily_revenue(spark, inputs["orders"], inputs["customers"]))


@pytest.mark.stable_topology
def test_page_view_stats(opid, spark, inputs):
    # The snapshot also holds the state directories: the window aggregation's state/0 and
    # the deduplication's state/1 (Spark numbers parents before children).
    opid.record(page_view_stats(spark, inputs["events"]))
