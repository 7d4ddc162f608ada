"""Structured Streaming state: the state operator ids pytest-opid predicts from a DataFrame that
never ran are the ``state/<n>`` directories Spark writes when the query really runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import pytest_opid
from pytest_opid.comparison import compare
from pytest_opid.render.explain import render
from tests.spark.spark_checks import EVENTS_SCHEMA, state_directories, state_key_fields


def _events(spark: Any, path: Path) -> Any:
    return spark.readStream.schema(EVENTS_SCHEMA).json(str(path))


def _predicted(df: Any) -> dict[int, str]:
    states = pytest_opid.fingerprint(df).state_operators
    assert states is not None, "a streaming DataFrame must list its stateful operators"
    return {s.state_operator_id: s.kind for s in states}


def _queries(spark: Any, events: Path, more: Path) -> dict[str, tuple[Any, str]]:
    stream = _events(spark, events)
    watermarked = stream.withWatermark("ts", "1 minute")
    clicks = _events(spark, more).withWatermark("ts", "1 minute")
    return {
        "aggregation": (stream.groupBy("page").count(), "update"),
        "dedup": (stream.dropDuplicates(["user", "page"]), "append"),
        "dedup_watermark": (watermarked.dropDuplicates(["user", "ts"]), "append"),
        "dedup_within_watermark": (watermarked.dropDuplicatesWithinWatermark(["user"]), "append"),
        "windowed_aggregation": (
            watermarked.groupBy(_window(watermarked), "page").count(),
            "append",
        ),
        "stream_stream_join": (
            watermarked.selectExpr("user AS viewer", "ts AS viewed").join(
                clicks.selectExpr("user AS clicker", "ts AS clicked"),
                _join_condition(),
            ),
            "append",
        ),
        "dedup_then_aggregation": (
            stream.dropDuplicates(["user", "page"]).groupBy("page").count(),
            "update",
        ),
    }


def _window(df: Any) -> Any:
    from pyspark.sql import functions as F

    return F.window(df.ts, "10 seconds")


def _join_condition() -> Any:
    from pyspark.sql import functions as F

    return F.expr("viewer = clicker AND clicked BETWEEN viewed AND viewed + INTERVAL 30 SECONDS")


@pytest.fixture
def more_events(tmp_path: Path, events_dir: Path) -> Path:
    other = tmp_path / "clicks"
    other.mkdir()
    (other / "clicks-0.json").write_text(
        (events_dir / "events-0.json").read_text(encoding="utf-8"), encoding="utf-8"
    )
    return other


#: state_directories reads the operator names from the operator metadata, which Spark writes
#: from 4.0 on (3.5's checkpoints have none).
OPERATOR_METADATA = pytest.mark.spark_line(
    "4.0", reason="reads the operator metadata Spark writes from 4.0 on"
)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("aggregation", {0: "stateStoreSave"}),
        ("dedup", {0: "dedupe"}),
        ("dedup_watermark", {0: "dedupe"}),
        ("dedup_within_watermark", {0: "dedupeWithinWatermark"}),
        ("windowed_aggregation", {0: "stateStoreSave"}),
        ("stream_stream_join", {0: "symmetricHashJoin"}),
        ("dedup_then_aggregation", {0: "stateStoreSave", 1: "dedupe"}),
    ],
)
@OPERATOR_METADATA
def test_state_operator_ids_match_a_real_checkpoint(
    spark, events_dir, more_events, tmp_path, run_available_now, query, expected
):
    df, mode = _queries(spark, events_dir, more_events)[query]
    predicted = _predicted(df)  # before the query ever runs
    checkpoint = run_available_now(df, tmp_path / "checkpoint", mode)
    written = state_directories(checkpoint)
    assert predicted == written
    assert written == expected  # the scenario really has the stateful operators it claims


@OPERATOR_METADATA
def test_numbering_is_pre_order_parent_first_left_before_right(
    spark, events_dir, more_events, tmp_path, run_available_now
):
    # Three stateful operators of the same kinds on both sides: only their keys tell the two
    # deduplications apart, so check each predicted directory against the key schema Spark
    # stored in it.
    views = _events(spark, events_dir).withWatermark("ts", "1 minute")
    clicks = _events(spark, more_events).withWatermark("ts", "1 minute")
    left = views.dropDuplicates(["user", "page", "ts"]).selectExpr("user AS viewer", "ts AS viewed")
    right = clicks.dropDuplicates(["user", "ts"]).selectExpr("user AS clicker", "ts AS clicked")
    df = left.join(right, _join_condition())

    fp = pytest_opid.fingerprint(df)
    graph = pytest_opid.spark.plan_graph(df)
    names = {op.id: op.name for op in graph.topology.operators}
    by_id = {s.state_operator_id: s for s in graph.state_operators}
    assert [names[by_id[i].node] for i in sorted(by_id)] == [
        "StreamingSymmetricHashJoin",
        "StreamingDeduplicate",
        "StreamingDeduplicate",
    ]
    # The left deduplication reads an earlier source (smaller node id) than the right one.
    assert by_id[1].node < by_id[2].node
    assert [s.state_operator_id for s in fp.state_operators] == [0, 1, 2]

    checkpoint = run_available_now(df, tmp_path / "checkpoint")
    assert state_directories(checkpoint) == {0: "symmetricHashJoin", 1: "dedupe", 2: "dedupe"}
    assert state_key_fields(checkpoint, 1) == {"user", "page", "ts"}
    assert state_key_fields(checkpoint, 2) == {"user", "ts"}


def test_streaming_query_has_the_fingerprint_of_its_dataframe(spark, events_dir, tmp_path):
    df = _events(spark, events_dir).dropDuplicates(["user", "page"]).groupBy("page").count()
    expected = pytest_opid.fingerprint(df)
    query = (
        df.writeStream.format("noop")
        .outputMode("update")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(120)
        assert query.lastProgress is not None
        started = pytest_opid.fingerprint(query)
        # The same fingerprint, except that the query knows its output mode: a DataFrame's is
        # chosen later, at writeStream, and recorded as unknown.
        modes = [dict(s.meaning).get("output mode") for s in started.state_operators or ()]
        assert modes == ["update", None]  # the aggregation's; a deduplication has none
        assert [dict(s.meaning).get("output mode") for s in expected.state_operators or ()] == [
            "?",
            None,
        ]
        assert _without_output_mode(started) == _without_output_mode(expected)
    finally:
        query.stop()
    # ... and still after it stopped
    assert _without_output_mode(pytest_opid.fingerprint(query)) == _without_output_mode(expected)


def _without_output_mode(fp: Any) -> dict[str, Any]:
    data = fp.to_dict()
    for state in data["state_operators"]:
        state["meaning"] = [f for f in state.get("meaning", []) if f[0] != "output mode"]
    return data


def test_filter_upstream_changes_the_ids_below_it_not_the_state_numbering(spark, events_dir):
    stream = _events(spark, events_dir)
    before = pytest_opid.fingerprint(stream.dropDuplicates(["user"]).groupBy("page").count())
    after = pytest_opid.fingerprint(
        stream.filter("page <> 'admin'").dropDuplicates(["user"]).groupBy("page").count()
    )
    old = {o.name: o.operator_id for o in before.operators}
    new = {o.name: o.operator_id for o in after.operators}
    assert "Filter" in new and "Filter" not in old
    # The source's ID depends on nothing upstream, so it stays; everything the filter feeds,
    # the stateful operators included, gets another ID.
    assert old["StreamingRelation FileSource"] == new["StreamingRelation FileSource"]
    for name in ("StreamingDeduplicate", "StateStoreRestore", "StateStoreSave"):
        assert old[name] != new[name], name
    # Spark still files both stateful operators under the same numbers.
    assert [(s.state_operator_id, s.kind) for s in before.state_operators] == [
        (s.state_operator_id, s.kind) for s in after.state_operators
    ]


@OPERATOR_METADATA
def test_a_new_stateful_operator_in_front_shifts_the_state_ids(
    spark, events_dir, tmp_path, run_available_now
):
    stream = _events(spark, events_dir)
    old_df = stream.dropDuplicates(["user", "page"])
    new_df = old_df.groupBy("page").count()  # an aggregation after (in front of) the dedup
    old, new = pytest_opid.fingerprint(old_df), pytest_opid.fingerprint(new_df)
    assert [(s.state_operator_id, s.kind) for s in old.state_operators] == [(0, "dedupe")]
    assert [(s.state_operator_id, s.kind) for s in new.state_operators] == [
        (0, "stateStoreSave"),
        (1, "dedupe"),
    ]

    comparison = compare(old, new)
    assert comparison.loses_state
    message = render(comparison)
    assert "state/0" in message and "state/1" in message
    line0 = next(line for line in message.splitlines() if "state/0" in line)
    assert "dedupe" in line0 and "stateStoreSave" in line0

    # Spark agrees: restarting the new query on the old query's checkpoint fails.
    checkpoint = run_available_now(old_df, tmp_path / "checkpoint")
    assert state_directories(checkpoint) == {0: "dedupe"}
    (events_dir / "events-1.json").write_text(
        '{"user": 9, "page": "p9", "ts": "2024-01-01 00:01:00"}\n', encoding="utf-8"
    )
    query = (
        new_df.writeStream.format("noop")
        .outputMode("update")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        with pytest.raises(Exception) as failure:
            query.awaitTermination(120)
    finally:
        query.stop()
    assert "dedupe" in str(failure.value) and "stateStoreSave" in str(failure.value)


def test_batch_dataframes_have_no_state_operators(spark, tables):
    df = spark.read.parquet(tables["orders"]).groupBy("customer_id").count()
    fp = pytest_opid.fingerprint(df)
    assert fp.state_operators is None
    assert "state_operators" not in fp.to_dict()


def test_stateless_stream_lists_no_state_operators(spark, events_dir):
    fp = pytest_opid.fingerprint(_events(spark, events_dir).filter("user > 1"))
    assert fp.state_operators == ()
    assert fp.to_dict()["state_operators"] == []


def test_same_kind_with_another_state_key_is_caught_as_spark_refuses_it(
    spark, events_dir, tmp_path, run_available_now
):
    stream = _events(spark, events_dir)
    old_df = stream.dropDuplicates(["user", "page"])
    new_df = stream.dropDuplicates(["user", "ts"])  # same operator, another key type
    old, new = pytest_opid.fingerprint(old_df), pytest_opid.fingerprint(new_df)
    assert [s.name for s in old.state_operators] == ["StreamingDeduplicate(long, string)"]
    assert [s.name for s in new.state_operators] == ["StreamingDeduplicate(long, timestamp)"]
    comparison = compare(old, new)
    assert comparison.loses_state
    assert "state/0" in render(comparison)

    checkpoint = run_available_now(old_df, tmp_path / "checkpoint")
    (events_dir / "events-1.json").write_text(
        '{"user": 9, "page": "p9", "ts": "2024-01-01 00:01:00"}\n', encoding="utf-8"
    )
    query = (
        new_df.writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        with pytest.raises(Exception, match=r"(?i)schema"):
            query.awaitTermination(120)
    finally:
        query.stop()
