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

CHECKPOINT = "checkpoints/page_view_stats"  # beside this file
#: the snapshot of the query that wrote it (examples/spark/test_jobs.py's marked test)
WRITTEN_BY = "__snapshots__/test_jobs/test_page_view_stats.opid"


@pytest.fixture
def production(spark):
    """A session with production's settings (the fixture's own session keeps its own)."""
    session = spark.newSession()
    for key, value in PRODUCTION_CONF.items():
        session.conf.set(key, value)
    return session


def test_the_next_version_restarts_on_production_state(opid, production, inputs):
    # The checkpoint records the window column, not the window's duration: the snapshot of the
    # query that wrote it says what its state means, so the restart is shown safe, not assumed.
    result = opid.check_restore(
        page_view_stats(production, inputs["events"]),
        previous=CHECKPOINT,
        previous_fingerprint=WRITTEN_BY,
    )
    assert result.safe is True


def test_without_the_writer_the_meaning_is_not_verified(production, inputs):
    # From the checkpoint alone Spark restarts, but the window's duration is in no file of it:
    # "not verified" (the fixture's check_restore fails on it unless allow_unverified=True).
    query = page_view_stats(production, inputs["events"])
    result = pytest_opid.check_restore(Path(__file__).parent / CHECKPOINT, query)
    assert result.restorable and result.safe is not True


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
