"""Pipelines written once against the PySpark API, built on a classic SparkSession and on a
Spark Connect one alike (``test_spark_connect.py`` compares their fingerprints).

Each builder takes a session and the input paths, sets the session confs and temp views it
needs through that session (on Connect they live in the server-side session only) and returns
a DataFrame. Every stateful operator kind PySpark can build is here at least once (Spark's
flatMapGroupsWithState and the Scala transformWithState are JVM APIs only: Python's are
applyInPandasWithState and transformWithState / transformWithStateInPandas).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pyspark.sql import Row
from pyspark.sql.streaming.state import GroupStateTimeout
from pyspark.sql.types import LongType, StructField, StructType

try:
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor
except ImportError:  # PySpark 3.5 has no transformWithState: tests using it need 4.0
    StatefulProcessor = object  # type: ignore[assignment,misc]

EVENTS = "user LONG, page STRING, ts TIMESTAMP"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
ALWAYS_NULLABLE = "spark.sql.streaming.statefulOperator.alwaysNullableOutput.enabled"


def write_events(root: Path) -> dict[str, str]:
    """Two folders of JSON events (``events`` and ``clicks``) under ``root``: their paths."""
    out = {}
    for name in ("events", "clicks"):
        folder = root / name
        folder.mkdir()
        with (folder / "part-0.json").open("w", encoding="utf-8") as f:
            for i in range(30):
                row = {"user": i % 4, "page": f"p{i % 3}", "ts": f"2024-01-01 00:00:{i:02d}"}
                f.write(json.dumps(row) + "\n")
        out[name] = str(folder)
    return out


def functions(spark: Any) -> Any:
    """The functions module of ``spark``'s API: ``pyspark.sql.functions`` makes classic
    columns in a process whose Connect session is not the default one (the environment's
    ``SPARK_CONNECT_MODE_ENABLED`` decides), and a Connect plan takes Connect columns."""
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        from pyspark.sql.connect import functions as connect_functions

        return connect_functions
    from pyspark.sql import functions as classic_functions

    return classic_functions


def _events(spark: Any, paths: dict[str, str], name: str = "events") -> Any:
    return spark.readStream.schema(EVENTS).json(paths[name])


def join_aggregate(spark: Any, paths: dict[str, str]) -> Any:
    F = functions(spark)
    orders = spark.read.parquet(paths["orders"])
    customers = spark.read.schema("customer_id LONG, country STRING").json(paths["customers"])
    return (
        orders.join(customers, "customer_id")
        .groupBy("country")
        .agg(F.sum("amount").alias("total"), F.countDistinct("order_id").alias("orders"))
    )


def view_sql_conf_udf(spark: Any, paths: dict[str, str]) -> Any:
    spark.conf.set("spark.sql.shuffle.partitions", "3")
    spark.read.parquet(paths["orders"]).createOrReplaceTempView("orders")
    spark.udf.register("bucket", lambda c: c % 3, "long")
    return spark.sql(
        "SELECT bucket(customer_id) AS b, count(*) AS n, max(amount) AS top "
        "FROM orders WHERE amount > 10 GROUP BY bucket(customer_id)"
    )


def windowed_count(spark: Any, paths: dict[str, str]) -> Any:
    F = functions(spark)
    spark.conf.set("spark.sql.shuffle.partitions", "3")
    events = _events(spark, paths).withWatermark("ts", "1 minute")
    return events.groupBy(F.window("ts", "10 seconds"), "page").count()


def session_windows(spark: Any, paths: dict[str, str]) -> Any:
    F = functions(spark)
    events = _events(spark, paths).withWatermark("ts", "1 minute")
    return events.groupBy(F.session_window("ts", "5 seconds"), "user").count()


def dedupe(spark: Any, paths: dict[str, str]) -> Any:
    return _events(spark, paths).dropDuplicates(["user", "page"])


def dedupe_within_watermark(spark: Any, paths: dict[str, str]) -> Any:
    events = _events(spark, paths).withWatermark("ts", "1 minute")
    return events.dropDuplicatesWithinWatermark(["user"])


def stream_join(spark: Any, paths: dict[str, str]) -> Any:
    F = functions(spark)
    views = _events(spark, paths).withWatermark("ts", "1 minute")
    clicks = _events(spark, paths, "clicks").withWatermark("ts", "1 minute")
    return views.selectExpr("user AS viewer", "ts AS viewed").join(
        clicks.selectExpr("user AS clicker", "ts AS clicked"),
        F.expr("viewer = clicker AND clicked BETWEEN viewed AND viewed + INTERVAL 30 SECONDS"),
    )


def dedupe_then_count(spark: Any, paths: dict[str, str]) -> Any:
    """Two stateful operators in a row: a deduplication, then an aggregation."""
    F = functions(spark)
    events = _events(spark, paths).withWatermark("ts", "1 minute").dropDuplicates(["user", "ts"])
    return events.groupBy(F.window("ts", "10 seconds")).agg(F.max("user").alias("top"))


def stream_static_join(spark: Any, paths: dict[str, str]) -> Any:
    """A batch join inside a streaming query (the static side read from parquet), then an
    aggregation."""
    F = functions(spark)
    orders = spark.read.parquet(paths["orders"]).selectExpr("customer_id AS user", "amount")
    joined = _events(spark, paths).join(orders, "user", "left")
    return joined.groupBy("page").agg(F.sum("amount").alias("spent"))


def streaming_view_sql(spark: Any, paths: dict[str, str]) -> Any:
    """A streaming temp view and SQL over it, with a session conf, all through the session."""
    spark.conf.set("spark.sql.shuffle.partitions", "5")
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
    _events(spark, paths).withWatermark("ts", "1 minute").createOrReplaceTempView("live_events")
    return spark.sql(
        "SELECT page, window(ts, '20 seconds') AS w, count(*) AS n, max(user) AS top "
        "FROM live_events GROUP BY page, window(ts, '20 seconds')"
    )


def global_limit(spark: Any, paths: dict[str, str]) -> Any:
    return _events(spark, paths).limit(5)


def _running(key: Any, frames: Iterator[pd.DataFrame], state: Any) -> Iterator[pd.DataFrame]:
    (n,) = state.get if state.exists else (0,)
    for frame in frames:
        n += len(frame)
    state.update((n,))
    yield pd.DataFrame({"user": [key[0]], "n": [n]})


def pandas_with_state(spark: Any, paths: dict[str, str]) -> Any:
    return (
        _events(spark, paths)
        .groupBy("user")
        .applyInPandasWithState(
            _running, "user LONG, n LONG", "n LONG", "Update", GroupStateTimeout.NoTimeout
        )
    )


class Counter(StatefulProcessor):
    """Counts rows per key in a ValueState."""

    def init(self, handle: Any) -> None:
        self.count = handle.getValueState("count", StructType([StructField("n", LongType())]))

    def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Iterator[pd.DataFrame]:
        n = self.count.get()[0] if self.count.exists() else 0
        for frame in rows:
            n += len(frame)
        self.count.update((n,))
        yield pd.DataFrame({"user": [key[0]], "n": [n]})

    def close(self) -> None:
        pass


def transform_with_state(spark: Any, paths: dict[str, str]) -> Any:
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
    return (
        _events(spark, paths)
        .groupBy("user")
        .transformWithStateInPandas(
            statefulProcessor=Counter(),
            outputStructType="user LONG, n LONG",
            outputMode="Update",
            timeMode="None",
        )
    )


def totals(spark: Any, paths: dict[str, str], swapped: bool = False) -> Any:
    """A sum and a count per page, or (``swapped``) the count first: a refactor Spark refuses
    on a checkpoint started without the state schema widening (every one before Spark 4.3)."""
    spark.conf.set("spark.sql.shuffle.partitions", "3")
    F = functions(spark)
    aggregates = [F.sum("user").alias("s"), F.count("*").alias("n")]
    events = _events(spark, paths)
    return events.groupBy("page").agg(*(aggregates[::-1] if swapped else aggregates))


def start_unwidened(spark: Any, paths: dict[str, str], checkpoint: str) -> None:
    """Run :func:`totals` to its end on ``checkpoint`` in a new session of ``spark`` (classic)
    without the state schema widening, as Spark before 4.3 starts a query."""
    starter = spark.newSession()
    starter.conf.set(ALWAYS_NULLABLE, "false")
    query = (
        totals(starter, paths)
        .writeStream.format("noop")
        .outputMode("update")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    query.stop()


class RowCounter(StatefulProcessor):
    """Counts rows per key in a ValueState, on Rows (transformWithState, not the pandas one)."""

    def init(self, handle: Any) -> None:
        self.count = handle.getValueState("count", StructType([StructField("n", LongType())]))

    def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Iterator[Row]:
        n = self.count.get()[0] if self.count.exists() else 0
        for _ in rows:
            n += 1
        self.count.update((n,))
        yield Row(user=key[0], n=n)

    def close(self) -> None:
        pass


def transform_with_state_rows(spark: Any, paths: dict[str, str]) -> Any:
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
    return (
        _events(spark, paths)
        .groupBy("user")
        .transformWithState(
            statefulProcessor=RowCounter(),
            outputStructType="user LONG, n LONG",
            outputMode="Update",
            timeMode="None",
        )
    )


#: name -> (builder, the stateful operator kinds its fingerprint must list, in state id order)
CORPUS: dict[str, tuple[Callable[[Any, dict[str, str]], Any], tuple[str, ...]]] = {
    "join_aggregate": (join_aggregate, ()),
    "view_sql_conf_udf": (view_sql_conf_udf, ()),
    "windowed_count": (windowed_count, ("stateStoreSave",)),
    "session_windows": (session_windows, ("sessionWindowStateStoreSaveExec",)),
    "dedupe": (dedupe, ("dedupe",)),
    "dedupe_within_watermark": (dedupe_within_watermark, ("dedupeWithinWatermark",)),
    "stream_join": (stream_join, ("symmetricHashJoin",)),
    "global_limit": (global_limit, ("globalLimit",)),
    "pandas_with_state": (pandas_with_state, ("applyInPandasWithState",)),
    "transform_with_state": (transform_with_state, ("transformWithStateInPandasExec",)),
    "transform_with_state_rows": (transform_with_state_rows, ("transformWithStateInPySparkExec",)),
    # Spark numbers state top-down (IncrementalExecution's state rule): the aggregation is 0.
    "dedupe_then_count": (dedupe_then_count, ("stateStoreSave", "dedupe")),
    "stream_static_join": (stream_static_join, ("stateStoreSave",)),
    "streaming_view_sql": (streaming_view_sql, ("stateStoreSave",)),
}

#: PySpark 4.0's Connect client has no transformWithStateInPandas nor transformWithState on its
#: GroupedData (4.0's classic API has only the pandas one; the Connect API gained both in 4.1).
NEEDS_41 = frozenset({"transform_with_state", "transform_with_state_rows"})


def cases(names: list[str]) -> list[Any]:
    """``names`` as parameters, those a line's Connect client cannot build marked with it."""
    reason = "transformWithState through Spark Connect is PySpark 4.1's"
    return [
        pytest.param(name, marks=pytest.mark.spark_line("4.1", reason=reason))
        if name in NEEDS_41
        else name
        for name in names
    ]
