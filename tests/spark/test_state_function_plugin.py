"""A marked streaming test fails when the function that updates a state changed under the same
name (issue 28, item 4): applyInPandasWithState whose session timeout went from 30 to 10
minutes restarts on Spark 4.3 and continues sessions under the other rule
(tests/data/meaning-restart, pandas_state_function_timeout_30_to_10_minutes). A rename of the
same code passes; ``--snapshot-update`` accepts the change; a snapshot from before the digest
was recorded passes and says so."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.fresh_module import write_module

TEST = """
from datetime import timedelta

import pandas as pd
import pytest
from pyspark.sql.streaming.state import GroupStateTimeout

SCHEMA = "id LONG, user STRING, v LONG, ts TIMESTAMP"
SESSION_TIMEOUT = timedelta(minutes={minutes})


def {name}(key, pdfs, state):
    start, n = state.get if state.exists else (None, 0)
    limit = SESSION_TIMEOUT // timedelta(milliseconds=1)
    for pdf in pdfs:
        for ts in sorted(pdf["ts"]):
            ms = int(pd.Timestamp(ts).value // 1_000_000)
            if start is None or ms - start > limit:
                start, n = ms, 0
            n += 1
    state.update((start, n))
    yield pd.DataFrame({{"user": [key[0]], "start_ms": [start], "n": [n]}})


@pytest.mark.stable_topology
def test_sessions(spark, opid):
    events = spark.readStream.schema(SCHEMA).json({folder!r})
    opid.record(
        events.groupBy("user").applyInPandasWithState(
            {name}, "user string, start_ms long, n long", "start_ms long, n long", "Update",
            GroupStateTimeout.NoTimeout,
        )
    )
"""


def _write(pytester: pytest.Pytester, minutes: int = 30, name: str = "sessions") -> None:
    folder = pytester.folder  # type: ignore[attr-defined]
    write_module(pytester, "test_job", TEST.format(minutes=minutes, name=name, folder=str(folder)))


def _snapshot(pytester: pytest.Pytester) -> Path:
    return next(pytester.path.rglob("*.opid"))


@pytest.fixture
def project(pytester: pytest.Pytester, spark: Any, tmp_path: Path) -> pytest.Pytester:
    """A project whose marked test's snapshot records the 30-minute function."""
    folder = tmp_path / "events"
    folder.mkdir()
    pytester.folder = folder  # type: ignore[attr-defined]
    _write(pytester)
    pytester.runpytest_inprocess("-p", "no:cacheprovider", "--snapshot-update").assert_outcomes(
        passed=1
    )
    text = _snapshot(pytester).read_text(encoding="utf-8")
    assert re.search(r'\n0 +"function digest" +"[0-9a-f]{16} \(source\)"\n', text), text
    return pytester


def test_a_changed_constant_fails_in_spark_words(project: pytest.Pytester) -> None:
    _write(project, minutes=10)
    result = project.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert "Spark restarts, but the results are wrong:" in text
    assert "the function that updates state/0 changed (function sessions:" in text
    assert "Spark will feed it the old state" in text
    assert "if the old state still means the same to the new code" in text
    assert "pytest --snapshot-update" in text and "new checkpoint location" in text
    assert "savepoint" not in text.lower()


def test_accepted_with_snapshot_update(project: pytest.Pytester) -> None:
    before = _snapshot(project).read_text(encoding="utf-8")
    _write(project, minutes=10)
    project.runpytest_inprocess("-p", "no:cacheprovider", "--snapshot-update").assert_outcomes(
        passed=1
    )
    assert _snapshot(project).read_text(encoding="utf-8") != before
    project.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_a_rename_of_the_same_code_passes(project: pytest.Pytester) -> None:
    _write(project, name="user_sessions")
    result = project.runpytest_inprocess("-p", "no:cacheprovider", "-W", "always")
    result.assert_outcomes(passed=1)
    assert "function that updates" not in result.stdout.str()


def test_a_snapshot_without_the_digest_passes_and_says_so(project: pytest.Pytester) -> None:
    """A snapshot written before the digest was recorded: the function was not compared, said
    once; the test does not fail because of it."""
    path = _snapshot(project)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(x for x in lines if '"function digest"' not in x), encoding="utf-8")
    _write(project, minutes=10)
    result = project.runpytest_inprocess("-p", "no:cacheprovider", "-W", "always")
    result.assert_outcomes(passed=1)
    text = result.stdout.str()
    assert text.count("records no digest of the function that updates the state") == 1, text
