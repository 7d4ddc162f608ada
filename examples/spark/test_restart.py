"""The example streaming query against a real checkpoint of it, kept in the repository.

``checkpoints/page_view_stats`` is what ``opid checkpoint --slim`` kept of the checkpoint that
``python -m examples.spark.run`` left (the walkthrough of docs/pyspark-checkpoints.md): no state
data, only what Spark compares at a restart. The next version is checked against it as
production would run it, with production's ``spark.sql.shuffle.partitions``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import pytest_opid
from examples.spark.jobs import page_view_stats, page_view_stats_with_last_view
from examples.spark.run import PRODUCTION_CONF
from pytest_opid.plugin import OpidRestoreWarning

CHECKPOINT = "checkpoints/page_view_stats"  # beside this file


@pytest.fixture
def production(spark):
    """A session with production's settings (the fixture's own session keeps its own)."""
    session = spark.newSession()
    for key, value in PRODUCTION_CONF.items():
        session.conf.set(key, value)
    return session


def test_the_next_version_restarts_on_production_state(opid, production, inputs):
    # The checkpoint records the window column, not the window's duration: the check says so.
    with pytest.warns(OpidRestoreWarning, match="window"):
        opid.check_restore(page_view_stats(production, inputs["events"]), previous=CHECKPOINT)


def test_a_new_aggregate_column_would_not_restart(production, inputs):
    changed = page_view_stats_with_last_view(production, inputs["events"])
    result = pytest_opid.check_restore(Path(__file__).parent / CHECKPOINT, changed)
    assert not result.restorable
    assert [p.kind for p in result.problems] == ["value_schema"]
    # in the words of the Spark that restarts (the installed PySpark's): 4.x names an error
    # class, 3.5 an exception
    message = result.problems[0].message
    assert "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE" in message or (
        message.startswith("Spark 3.5 ") and "StateSchemaNotCompatible" in message
    )
