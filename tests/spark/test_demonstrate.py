"""``pytest_opid.demonstrate`` on a sample of the real restarts in tests/data (the whole corpus:
tests/spark/demonstrate_corpus.py, by hand). Truth is what Spark 4.3.0 did when the pairs were
made: its refusal and error class (spark-restart), whether the restarted B emitted other rows
than B from scratch (meaning-restart's ``b_output_differs``). The function-changed pairs are
a change of an applyInPandasWithState function that only adds an output column (the state is
kept as before: "same"); its session timeout changed from 30 to 10 minutes ("differs", as the
meaning-restart case pandas_state_function_timeout_30_to_10_minutes did in Spark 4.3) runs in
test_demonstrate_cli.py and test_demonstrate_plugin.py."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.spark.demonstrate_corpus import dataframe, pairs

pytestmark = pytest.mark.spark_line(
    "4.3", reason="the data's truth is Spark 4.3.0's restarts (tests/data/*-restart)"
)

#: Small budgets: a difference these pairs have shows in the first example of seed 41.
KNOBS = {"seed": 41, "examples": 1, "shrink_seconds": 0.0}


def _pair(case_id: str) -> dict[str, Any]:
    return next(p for p in pairs() if p["id"] == case_id)


def _demonstrate(spark: Any, tmp_path: Path, case_id: str, **knobs: Any) -> Any:
    import pytest_opid

    pair = _pair(case_id)
    a = dataframe(spark, pair, "before", tmp_path / "inputs")
    b = dataframe(spark, pair, "after", tmp_path / "inputs")
    return pytest_opid.demonstrate(a, b, **{**KNOBS, **knobs})


def test_refused_where_spark_refused(spark: Any, tmp_path: Path) -> None:
    case_id = "agg_user_sum__add_aggregate__100001"
    truth = _pair(case_id)["rec"]["spark"]
    assert not truth["restarted"]
    result = _demonstrate(spark, tmp_path, case_id)
    assert result.outcome == "refused"
    assert result.error_class == truth["error_class"]
    assert result.to_dict()["error_class"] == truth["error_class"]
    assert result.examples == 1
    assert f"[{truth['error_class']}]" in result.render()


def test_differs_where_the_restart_emitted_other_rows(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    case_id = "grouping_key_same_type"
    assert _pair(case_id)["truth"] == "differs"
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where the runs' folder goes
    result = _demonstrate(spark, tmp_path, case_id, examples=3)
    assert result.outcome == "differs"
    assert result.only_restarted or result.only_scratch
    text = result.render()
    assert "emitted only by the restarted new query:" in text
    for row in result.only_restarted:
        assert row in text
    # the rows named are the shrunk example's input, batch by batch (3 batches, one source)
    assert [batch for batch, _, _ in result.inputs] == [1, 2, 3]
    assert json.loads(json.dumps(result.to_dict()))["outcome"] == "differs"
    assert os.listdir(scratch) == []  # nothing of the runs is left


def test_same_where_the_restart_emitted_the_same(spark: Any, tmp_path: Path) -> None:
    case_id = "add_projection_downstream"
    assert _pair(case_id)["truth"] == "same"
    result = _demonstrate(spark, tmp_path, case_id, examples=1)
    assert result.outcome == "same"
    assert result.examples == 1
    assert "no difference found in 1 example of 3 batches" in result.render()
    assert "proved" not in result.render() and "not a proof" in result.render()


# -- a changed function that updates state: the prediction can only say "changed" -----------

SESSIONS = """
def build(spark, paths):
    from datetime import timedelta

    import pandas as pd
    from pyspark.sql.streaming.state import GroupStateTimeout

    limit = timedelta(minutes={minutes}) // timedelta(milliseconds=1)

    def sessions(key, pdfs, state):
        start, n = state.get if state.exists else (None, 0)
        for pdf in pdfs:
            for ts in sorted(pdf["ts"]):
                ms = int(pd.Timestamp(ts).value // 1_000_000)
                if start is None or ms - start > limit:
                    start, n = ms, 0
                n += 1
        state.update((start, n))
        yield pd.DataFrame({{"user": [key[0]], "start_ms": [start], "n": [n]{extra}}})

    events = spark.readStream.schema("id LONG, user STRING, v LONG, ts TIMESTAMP").json(
        paths["in0"]
    )
    return events.groupBy("user").applyInPandasWithState(
        sessions, "user string, start_ms long, n long{extra_type}", "start_ms long, n long",
        "Update", GroupStateTimeout.NoTimeout,
    )
"""


def _sessions(spark: Any, folder: Path, minutes: int, extra: bool = False) -> Any:
    code = SESSIONS.format(
        minutes=minutes,
        extra=', "label": [f"{n} events"]' if extra else "",
        extra_type=", label string" if extra else "",
    )
    namespace: dict[str, Any] = {}
    exec(code, namespace)
    (folder / "in0").mkdir(parents=True, exist_ok=True)
    df = namespace["build"](spark.newSession(), {"in0": str(folder / "in0")})
    return df.writeStream.outputMode("update")


def test_output_only_change_of_the_function_is_same(spark: Any, tmp_path: Path) -> None:
    import pytest_opid

    result = pytest_opid.demonstrate(
        _sessions(spark, tmp_path, 30),
        _sessions(spark, tmp_path, 30, extra=True),
        **KNOBS,
    )
    assert result.outcome == "same"
    assert result.examples == 1


def test_bad_input_is_one_line(spark: Any, tmp_path: Path) -> None:
    import pytest_opid
    from pytest_opid.errors import DocumentError

    batch = spark.range(3)
    with pytest.raises(DocumentError, match="previous: expected a streaming DataFrame"):
        pytest_opid.demonstrate(batch, batch)
    stream = _sessions(spark, tmp_path, 30)
    with pytest.raises(DocumentError, match="restart_after=3"):
        pytest_opid.demonstrate(stream, stream, batches=3, restart_after=3)


# -- sources that are not files: rate-micro-batch runs as it is, a clock rate shows a refusal --


def test_rate_micro_batch_runs_as_it_is(spark: Any, tmp_path: Path) -> None:
    refused = _pair("rate_agg__add_union_source__100064")
    result = _demonstrate(spark, tmp_path, refused["id"])
    assert result.outcome == "refused"
    assert result.error_class == refused["rec"]["spark"]["outcome"]  # java.lang.AssertionError
    added_filter = "rate_agg__add_filter_upstream__100065"
    assert _pair(added_filter)["truth"] == "restarted"
    result = _demonstrate(spark, tmp_path, added_filter)
    assert result.outcome == "differs" and not result.inputs
    assert "input rows: none drawn" in result.render()
    # the restarted query's counts still hold the rows the old query counted before the filter
    restarted = {r["bucket"]: r["n"] for r in map(json.loads, result.only_restarted)}
    scratch = {r["bucket"]: r["n"] for r in map(json.loads, result.only_scratch)}
    assert restarted.keys() == scratch.keys() and restarted
    assert all(restarted[b] > scratch[b] for b in restarted)


def test_a_clock_rate_source_shows_only_a_refusal(spark: Any, tmp_path: Path) -> None:
    import pytest_opid
    from pytest_opid.errors import DocumentError

    pair = _pair("rate_micro_batch_to_rate")
    result = _demonstrate(spark, tmp_path, pair["id"])
    assert result.outcome == "refused"
    assert result.error_class == pair["rec"]["spark"]["outcome"]  # NumberFormatException
    b = dataframe(spark, pair, "after", tmp_path / "inputs")
    with pytest.raises(DocumentError, match="follow the wall clock"):
        pytest_opid.demonstrate(b, b, **KNOBS)


def test_processing_time_timers_end_and_the_time_mode_change_is_refused(
    spark: Any, tmp_path: Path
) -> None:
    # availableNow runs a batch for every due processing-time timer: the run from scratch never
    # ends by itself; Spark refuses the restart (STATE_STORE_INVALID_CONFIG_AFTER_RESTART)
    pair = _pair("transform_with_state_pandas__change_time_mode__100056")
    result = _demonstrate(spark, tmp_path, pair["id"], run_timeout=120.0)
    assert result.outcome == "refused"
    assert result.error_class == pair["rec"]["spark"]["error_class"]
