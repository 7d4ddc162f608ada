"""The durations a demonstration aims event times at: read from the plan (a window, a session
gap, a watermark delay) and from the Python function that updates a state (a timedelta it
reads, an interval string, whole minutes in milliseconds), each as the query's own code names
it; and the steps drawn around them."""

from __future__ import annotations

import contextlib
from datetime import timedelta
from pathlib import Path
from typing import Any

from pytest_opid.spark.demonstration.durations import durations
from pytest_opid.spark.demonstration.rows import CHANGED_WEIGHT, EDGE, Step, steps

MINUTE = timedelta(minutes=1)

FUNCTION = """
from datetime import timedelta

import pandas as pd
from pyspark.sql.streaming.state import GroupStateTimeout

SESSION = timedelta(minutes=25)


def limit_ms():
    return 45 * 60 * 1000


def sessions(key, pdfs, state):
    state.setTimeoutDuration("7 minutes")
    gap = SESSION // timedelta(milliseconds=1) + limit_ms()
    n = sum(len(pdf) for pdf in pdfs) + (gap > 0)
    yield pd.DataFrame({"user": [key[0]], "n": [n]})


def build(events):
    return events.groupBy("user").applyInPandasWithState(
        sessions, "user string, n long", "n long", "Update",
        GroupStateTimeout.ProcessingTimeTimeout,
    )
"""


def _events(spark: Any, folder: Path) -> Any:
    folder.mkdir(parents=True, exist_ok=True)
    return spark.readStream.schema("user STRING, v LONG, ts TIMESTAMP").json(str(folder))


def test_the_plan_names_its_window_session_gap_and_watermark(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    events = _events(spark, tmp_path / "in").withWatermark("ts", "10 minutes")
    windowed = events.groupBy(F.window("ts", "5 minutes", "150 seconds"), "user").count()
    assert durations(windowed) == {10 * MINUTE, 5 * MINUTE, timedelta(seconds=150)}
    sessions = events.groupBy(F.session_window("ts", "3 minutes"), "user").count()
    assert durations(sessions) == {10 * MINUTE, 3 * MINUTE}
    assert durations(_events(spark, tmp_path / "in").groupBy("user").count()) == set()


def test_the_state_function_names_its_timeouts(spark: Any, tmp_path: Path) -> None:
    namespace: dict[str, Any] = {}
    exec(compile(FUNCTION, str(tmp_path / "job.py"), "exec"), namespace)
    query = namespace["build"](_events(spark, tmp_path / "in"))
    # the global it reads, the interval string it passes, the milliseconds of the function it calls
    assert durations(query) == {25 * MINUTE, 7 * MINUTE, 45 * MINUTE}


def test_steps_aim_inside_and_outside_each_duration_most_at_the_changed() -> None:
    base = 10 * MINUTE
    named = ({30 * MINUTE, 5 * MINUTE, 20 * MINUTE}, {10 * MINUTE, 20 * MINUTE})
    drawn = steps(base, *named)
    marks = (5 * MINUTE, 10 * MINUTE, 20 * MINUTE, 30 * MINUTE)
    assert drawn[0] == Step(base, marks)  # Hypothesis shrinks towards the first
    assert all(s.marks == marks for s in drawn)
    sizes = [s.size for s in drawn[1:]]
    # changed: 30 and 10 minutes (5 too, but below the base step); both name 20 minutes
    assert sizes.count(30 * MINUTE - EDGE) == sizes.count(30 * MINUTE + EDGE) == CHANGED_WEIGHT
    assert sizes.count(10 * MINUTE + EDGE) == CHANGED_WEIGHT
    assert sizes.count(20 * MINUTE - EDGE) == sizes.count(20 * MINUTE + EDGE) == 1
    assert min(sizes) > base
    assert len(sizes) == 3 * CHANGED_WEIGHT + 2
    assert steps(base, set(), set()) == (Step(base),)


def test_rows_sit_on_the_beat_and_one_mark_before_it() -> None:
    import random

    from hypothesis import HealthCheck, Phase, find, settings
    from hypothesis.errors import NoSuchExample
    from pyspark.sql.types import StringType, StructField, StructType, TimestampType

    from pytest_opid.spark.demonstration.rows import START, batches_strategy

    schema = StructType([StructField("user", StringType()), StructField("ts", TimestampType())])
    step = Step(10 * MINUTE + EDGE, (30 * MINUTE,))
    seen: list[Any] = []

    def keep(value: Any) -> bool:
        seen.append(value)
        return False

    config = settings(
        max_examples=40,
        database=None,
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
    )
    with contextlib.suppress(NoSuchExample):
        find(
            batches_strategy({"in": schema}, 3, 6, [step]),
            keep,
            settings=config,
            random=random.Random(3),
        )
    times = [(n, r["ts"]) for d in seen for n, b in enumerate(d) for r in b["in"] if r["ts"]]
    beats = {n: START + step.size * n for n in range(3)}
    assert any(t == beats[n] for n, t in times)
    assert any(t == beats[n] - 30 * MINUTE - EDGE for n, t in times)
    assert any(t == beats[n] - 30 * MINUTE + EDGE for n, t in times)
