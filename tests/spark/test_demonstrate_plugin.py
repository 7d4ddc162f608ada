"""The fixture's ``opid.demonstrate_with(previous)``: where a marked test fails because the
function that updates a state changed (a prediction can only say "changed"), both versions run
and the failure shows what the restart does, rows included (tests/data/meaning-restart,
pandas_state_function_timeout_30_to_10_minutes: Spark 4.3 restarted it and emitted other
rows). The message is the one docs/pyspark-demonstrate.md shows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark_line("4.3", reason="one line is enough: the engine is Spark's own")

TEST = """
import sys
from datetime import timedelta

import pandas as pd
import pytest
from pyspark import cloudpickle
from pyspark.sql.streaming.state import GroupStateTimeout

# Spark's Python workers cannot import this module (pytester's folder): its functions go by value
cloudpickle.register_pickle_by_value(sys.modules[__name__])

SCHEMA = "user STRING, ts TIMESTAMP"
SESSION_TIMEOUT = timedelta(minutes={minutes})
WAS = timedelta(minutes=30)


def _count(key, pdfs, state, timeout):
    start, n = state.get if state.exists else (None, 0)
    for pdf in pdfs:
        for ts in sorted(pdf["ts"]):
            ms = int(pd.Timestamp(ts).value // 1_000_000)
            if start is None or ms - start > timeout // timedelta(milliseconds=1):
                start, n = ms, 0
            n += 1
    state.update((start, n))
    return pd.DataFrame({{"user": [key[0]], "start_ms": [start], "n": [n]}})


def sessions(key, pdfs, state):
    yield _count(key, pdfs, state, SESSION_TIMEOUT)


def sessions_as_deployed(key, pdfs, state):
    yield _count(key, pdfs, state, WAS)


def query(events, function):
    return events.groupBy("user").applyInPandasWithState(
        function, "user string, start_ms long, n long", "start_ms long, n long", "Update",
        GroupStateTimeout.NoTimeout,
    )


@pytest.mark.stable_topology
def test_sessions(spark, opid):
    events = spark.readStream.schema(SCHEMA).json({folder!r})
    deployed = query(events, sessions_as_deployed).writeStream.outputMode("update")
    opid.demonstrate_with(deployed, seed=43, shrink_seconds=10)
    opid.record(query(events, sessions))
"""


def test_a_changed_function_fails_with_the_rows(
    pytester: pytest.Pytester, spark: Any, tmp_path: Path
) -> None:
    folder = tmp_path / "events"
    folder.mkdir()
    pytester.makepyfile(test_job=TEST.format(minutes=30, folder=str(folder)))
    pytester.runpytest_inprocess("-p", "no:cacheprovider", "--snapshot-update").assert_outcomes(
        passed=1
    )
    pytester.makepyfile(test_job=TEST.format(minutes=10, folder=str(folder)))
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    print(text)  # the docs page shows this message
    assert "the function that updates state/0 changed" in text
    assert "Demonstrated restart:" in text
    assert "differs: restarted on the previous query's checkpoint" in text
    assert "emitted only by the restarted new query:" in text
    assert '"start_ms":' in text  # the rows themselves
