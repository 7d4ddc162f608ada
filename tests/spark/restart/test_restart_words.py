"""Spark's words chosen by what changed (issue 28 item 5): a group state's timeout change names
the timeout, a replaced aggregate is a replacement, a verdict on a Spark restart speaks of
restarting from the checkpoint, and no message speaks of a snapshot's checkpoint."""

from __future__ import annotations

import os
import sys

# applyInPandasWithState's Python workers import pandas: run them with this interpreter.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pathlib import Path
from typing import Any

import pytest

import pytest_opid
from pytest_opid.render.restore import render_restore
from pytest_opid.result import RestoreCheck

SCHEMA = "id LONG, user STRING, k INT, cat STRING, v LONG, amount DOUBLE, ts TIMESTAMP"
REPO = Path(__file__).resolve().parents[3]


def _events(spark: Any, folder: Path) -> Any:
    return spark.readStream.schema(SCHEMA).json(str(folder))


def _emit(key: Any, pdfs: Any, state: Any) -> Any:
    import pandas as pd

    n = state.get[0] if state.exists else 0
    for pdf in pdfs:
        n += len(pdf)
    state.update((n,))
    yield pd.DataFrame({"user": [key[0]], "n": [n]})


def _grouped(spark: Any, folder: Path, timeout: str) -> Any:
    return (
        _events(spark, folder)
        .groupBy("user")
        .applyInPandasWithState(_emit, "user string, n long", "n long", "Update", timeout)
    )


@pytest.mark.spark_line("4.0", reason="Spark 4's error conditions")
def test_a_timeout_change_names_the_timeout_and_its_fix(spark: Any, tmp_path: Path) -> None:
    """ProcessingTimeTimeout -> NoTimeout: the stored row loses its timeoutTimestamp; the user
    touched the timeout, not the state schema."""
    a = pytest_opid.fingerprint(_grouped(spark, tmp_path, "ProcessingTimeTimeout"))
    b = pytest_opid.fingerprint(_grouped(spark, tmp_path, "NoTimeout"))
    check = pytest_opid.check_restore(a, b)
    assert not check.restorable
    (problem,) = check.problems
    text = problem.message
    assert "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE" in text
    assert "The timeout changed (ProcessingTimeTimeout -> NoTimeout)" in text, text
    assert "timeoutTimestamp" in text
    assert "keep the timeout as it was (GroupStateTimeout.ProcessingTimeTimeout)" in text, text
    assert "stateStructType" not in text
    # the other way round: a timeout added
    back = pytest_opid.check_restore(b, a).problems[0].message
    assert "The timeout changed (NoTimeout -> ProcessingTimeTimeout)" in back, back
    assert "keep GroupStateTimeout.NoTimeout on this checkpoint" in back


@pytest.mark.spark_line("4.0", reason="Spark 4's error conditions")
def test_max_to_avg_is_a_replaced_aggregate(spark: Any, tmp_path: Path) -> None:
    """max(v) -> avg(v): the buffer becomes (sum, count) instead of (max); nothing was added."""
    from pyspark.sql import functions as F

    def query(aggregate: Any) -> Any:
        return _events(spark, tmp_path).groupBy("user").agg(aggregate.alias("x"))

    a = pytest_opid.fingerprint(query(F.max("v")))
    b = pytest_opid.fingerprint(query(F.avg("v")))
    check = pytest_opid.check_restore(a, b)
    assert not check.restorable
    text = check.problems[0].message
    # the state meaning names Spark's Average class as average(v)
    assert "the aggregate max(v) became average(v)" in text, text
    assert "add the new aggregate column" not in text, text
    # an aggregate really added keeps its own fix
    c = pytest_opid.fingerprint(
        _events(spark, tmp_path).groupBy("user").agg(F.max("v").alias("x"), F.sum("v"))
    )
    added = pytest_opid.check_restore(a, c).problems[0].message
    assert "add the new aggregate column in a new query" in added, added
    assert "became" not in added


def test_a_restore_verdict_keeps_the_neutral_words_where_the_engine_gives_none() -> None:
    """Flink's verdicts set no words of their own: unchanged."""
    plain = render_restore(RestoreCheck("flink", True))
    assert plain.startswith("Restorable: the new job starts from the previous state."), plain
    spark = render_restore(
        RestoreCheck("spark", True, resumes="Spark 4.3 restarts the new query from the checkpoint")
    )
    assert spark.startswith(
        "Restarts from the checkpoint: Spark 4.3 restarts the new query from the checkpoint."
    ), spark


def test_no_message_speaks_of_a_snapshots_checkpoint() -> None:
    """A snapshot records a query, not a checkpoint: the restart warnings of a marked test
    speak of the checkpoint the snapshotted query wrote."""
    said = [
        str(path.relative_to(REPO))
        for folder in ("pytest_opid", "docs")
        for path in (REPO / folder).rglob("*")
        if path.suffix in (".py", ".md", ".rst")
        and "snapshot's checkpoint" in path.read_text(encoding="utf-8")
    ]
    assert said == []
