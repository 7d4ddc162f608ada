"""Real Spark 4.3 restarts for issue 18: does restarting query B on query A's checkpoint change
B's results, compared with B run from scratch on the same input?

Run by hand (not in CI), from the repository root, in the project's venv:

    python tests/data/meaning-restart/make.py            # every case
    python tests/data/meaning-restart/make.py CASE ...   # some cases (replaces their records)
    python tests/data/meaning-restart/make.py --records  # cases.jsonl again from the last runs

For each case, in fresh folders under ``RUN_ROOT/<case id>/``:

1. process 1 (a JVM): input batch 1 written, A runs with ``trigger(availableNow=True)``; batch 2
   written, A runs again (so the checkpoint holds state); A's checkpoint is archived (its state
   data files left out: only metadata, offsets, commits, source logs and state schemas). Then B
   runs from scratch on another checkpoint over the same batches, one run per batch, as A did
   (so watermarks move the same way): batch 1, batch 2, batch 3.
2. Input batch 3 written to A's inputs; process 2 (a fresh JVM: a real restart) starts B on A's
   checkpoint with ``availableNow`` and records what Spark did (restarted, or its error class).

Every run's output is captured with ``foreachBatch`` (each micro-batch collected to JSON rows).
From the emissions, the table a user ends up with (a sink that upserts by the output's key in
update mode, is replaced in complete mode, and is appended to in append mode):

- ``table_restart``: A's emissions (renamed by the case's declared rename) then B's after the
  restart; ``table_scratch``: B-from-scratch's emissions over batches 1-3;
- ``b_restart`` / ``b_scratch``: what B emitted for batch 3 after the restart vs from scratch
  (B's own output on the same input, fed A's state vs B's own state).

``results_differ`` compares the two tables (as sorted multisets of rows); ``by_design`` marks a
difference that the change intends (a new filter applies from now on, ...), with its reason.
Records go to ``cases.jsonl``; A's slimmed checkpoints and the inputs to ``checkpoints/`` and
``inputs/``.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
RUN_ROOT = Path(os.environ.get("MEANING_RESTART_ROOT", "/tmp/opid-meaning-restart"))
SCHEMA = "id LONG, user STRING, k INT, cat STRING, v LONG, amount DOUBLE, ts TIMESTAMP"
STATE_DATA = ("*.delta", "*.snapshot", "*.zip", "*.sst", "*.changelog", "*.crc")
SPARK_ENV = {
    "spark.master": "local[2]",
    "spark.ui.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.streaming.stopTimeout": "60s",
    "spark.sql.shuffle.partitions": "2",
}
START = datetime(2024, 1, 1)

# -- the input batches ------------------------------------------------------------------------


def batches(seed: int = 18) -> dict[str, list[list[dict[str, Any]]]]:
    """Three batches for ``in0`` (orders/impressions) and ``in1`` (clicks). Batch b has event
    times in minutes [10(b-1), 10b), plus, from batch 2 on, two late rows 3-8 minutes before the
    batch's start (a 10-minute watermark lets them in, a 5-minute one drops some). Every batch
    has every user u0..u5 and every cat a/b/c. Half of the impressions get a click: the same
    id, user, k, cat and v with a ts 1-4 minutes later, in the same batch, or in the next
    one when the impression is in the batch's last 5 minutes (so joins match across batches)."""
    rnd = random.Random(seed)
    in0: list[list[dict[str, Any]]] = [[], [], []]
    in1: list[list[dict[str, Any]]] = [[], [], []]
    users = [f"u{i}" for i in range(6)]
    cats = ["a", "b", "c"]
    for b in range(3):
        n = 18
        for i in range(n):
            minute = 10 * b + rnd.uniform(0, 9.98)
            late = b > 0 and i >= n - 2
            if late:
                minute = 10 * b - rnd.uniform(3, 8)
            row = {
                "id": rnd.randrange(0, 30),
                "user": users[i % 6] if i < 12 else rnd.choice(users),
                "k": rnd.randrange(0, 4),
                "cat": cats[i % 3] if i < 12 else rnd.choice(cats),
                "v": rnd.randrange(0, 60),
                "amount": round(rnd.uniform(0, 10), 3),
                "ts": START + timedelta(seconds=round(minute * 60)),
            }
            in0[b].append(row)
            if not late and rnd.random() < 0.5:
                click = dict(row, amount=round(rnd.uniform(0, 10), 3))
                click["ts"] = row["ts"] + timedelta(seconds=rnd.randrange(60, 240))
                target = b + 1 if minute >= 10 * b + 5 and b < 2 else b
                in1[target].append(click)
        for _ in range(4):  # clicks of no impression
            in1[b].append(
                {
                    "id": rnd.randrange(30, 40),
                    "user": rnd.choice(users),
                    "k": rnd.randrange(0, 4),
                    "cat": rnd.choice(cats),
                    "v": rnd.randrange(0, 60),
                    "amount": round(rnd.uniform(0, 10), 3),
                    "ts": START + timedelta(seconds=round((10 * b + rnd.uniform(0, 9.98)) * 60)),
                }
            )
    for side in (in0, in1):
        for rows in side:
            rnd.shuffle(rows)
            for row in rows:
                row["ts"] = row["ts"].strftime("%Y-%m-%dT%H:%M:%S")
    return {"in0": in0, "in1": in1}


def write_batch(folder: Path, number: int) -> None:
    data = batches()
    for name, rows in data.items():
        (folder / name).mkdir(parents=True, exist_ok=True)
        with (folder / name / f"batch{number}.json").open("w", encoding="utf-8") as f:
            for row in rows[number - 1]:
                f.write(json.dumps(row) + "\n")


# -- the cases ----------------------------------------------------------------------------------

HEAD = """\
def build(spark, paths):
    from pyspark.sql import functions as F
    schema = "id LONG, user STRING, k INT, cat STRING, v LONG, amount DOUBLE, ts TIMESTAMP"
    events = spark.readStream.schema(schema).json(paths["in0"])
"""


def agg(body: str) -> str:
    return HEAD + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ") + "\n"


JOIN = """\
def build(spark, paths):
    from pyspark.sql import functions as F
    schema = "id LONG, user STRING, k INT, cat STRING, v LONG, amount DOUBLE, ts TIMESTAMP"
    impressions = (spark.readStream.schema(schema).json(paths["in0"])
                   .select(F.col("id").alias("imp_id"), F.col("v").alias("imp_v"),
                           F.col("user").alias("imp_user"), F.col("ts").alias("imp_ts"))
                   .withWatermark("imp_ts", "10 minutes"))
    clicks = (spark.readStream.schema(schema).json(paths["in1"])
              .select(F.col("id").alias("click_id"), F.col("v").alias("click_v"),
                      F.col("user").alias("click_user"), F.col("ts").alias("click_ts"))
              .withWatermark("click_ts", "10 minutes"))
    condition = F.expr("{key} AND click_ts >= imp_ts AND click_ts <= imp_ts + interval 5 minutes")
    return {join}
"""

PANDAS = """\
def build(spark, paths):
    import pandas as pd
    from pyspark.sql.streaming.state import GroupStateTimeout
    schema = "id LONG, user STRING, k INT, cat STRING, v LONG, amount DOUBLE, ts TIMESTAMP"
    events = spark.readStream.schema(schema).json(paths["in0"])

    def running(key, pdfs, state):
        {read} = state.get if state.exists else (0, 0)
        for pdf in pdfs:
            n += len(pdf)
            total += int(pdf["v"].sum())
        state.update(({write}))
        yield pd.DataFrame({{"user": [key[0]], "n": [n], "total": [total]}})

    return (events
            .groupBy("user")
            .applyInPandasWithState(running, "user string, n long, total long", "{state}",
                                    "Update", GroupStateTimeout.NoTimeout))
"""

WINDOWED = """
    return (events
            .withWatermark("ts", "{delay}")
            .groupBy({window}, "cat")
            .agg(F.count("*").alias("n"), F.sum("v").alias("sum_v")))
"""

#: A session per user that lasts at most SESSION_TIMEOUT from its first event (issue 28, item
#: 4): the timeout is a module constant the function reads, not a part of the plan.
SESSIONS = """\
from datetime import timedelta

SESSION_TIMEOUT = timedelta(minutes={minutes})


def build(spark, paths):
    import pandas as pd
    from pyspark.sql.streaming.state import GroupStateTimeout
    schema = "id LONG, user STRING, k INT, cat STRING, v LONG, amount DOUBLE, ts TIMESTAMP"
    events = spark.readStream.schema(schema).json(paths["in0"])

    def {name}(key, pdfs, state):
        start, n, total = state.get if state.exists else (None, 0, 0)
        rows = pd.concat(list(pdfs)).sort_values(["ts", "id", "v"])
        limit = SESSION_TIMEOUT // timedelta(milliseconds=1)
        for ts, v in zip(rows["ts"], rows["v"]):
            ms = int(pd.Timestamp(ts).value // 1_000_000)
            if start is None or ms - start > limit:
                start, n, total = ms, 0, 0
            n += 1
            total += int(v)
        state.update((start, n, total))
        yield pd.DataFrame({{"user": [key[0]], "start_ms": [start], "n": [n], "total": [total]}})

    return (events
            .groupBy("user")
            .applyInPandasWithState({name}, "user string, start_ms long, n long, total long",
                                    "start_ms long, n long, total long", "Update",
                                    GroupStateTimeout.NoTimeout))
"""

BY_USER = 'return events.groupBy("user").agg(F.sum("v").alias("sum_v"), F.count("*").alias("n"))'

NESTED_KEY = """
nested = F.from_json(F.to_json(F.struct("user", "cat")), "user string, cat string")
return (events.select(nested.alias("s"), "v")
        .groupBy(F.col("s.{field}").alias("g")).agg(F.sum("v").alias("sum_v")))
"""
#: Keeps from_json(to_json(...)) in the plan: a struct column as a JSON source would give it.
KEEP_JSON = {"spark.sql.optimizer.enableJsonExpressionOptimization": "false"}

UDF_KEY = """
@F.udf("int")
def {name}(k):
    return None if k is None else k % {mod}

return events.groupBy({name}("k").alias("g")).agg(F.count("*").alias("n"))
"""


#: A rate source: ``rate-micro-batch`` (its offsets are a row count per batch) or ``rate``
#: (offsets are seconds since its start), under the same aggregation.
RATE = """\
def build(spark, paths):
    from pyspark.sql import functions as F
    events = {source}
    return (events.groupBy((F.col("value") % 5).alias("bucket"))
            .agg(F.count("*").alias("n"), F.sum("value").alias("total")))
"""
RATE_MICRO_BATCH = (
    'spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 20)'
    '.option("numPartitions", 2).option("startTimestamp", 0).load()'
)
RATE_PER_SECOND = (
    'spark.readStream.format("rate").option("rowsPerSecond", 20).option("numPartitions", 2).load()'
)

#: transformWithStateInPandas keeping a running count and sum per grouping key; the key is a
#: session id (user-cat) or the user id, both strings.
TWS = """\
def build(spark, paths):
    import pandas as pd
    from pyspark.sql import functions as F
    from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
    from pyspark.sql.types import LongType, StructField, StructType
    schema = "id LONG, user STRING, k INT, cat STRING, v LONG, amount DOUBLE, ts TIMESTAMP"
    events = (spark.readStream.schema(schema).json(paths["in0"])
              .withColumn("session_id", F.concat("user", F.lit("-"), "cat"))
              .withColumnRenamed("user", "user_id"))

    class RunningTotal(StatefulProcessor):
        def init(self, handle: StatefulProcessorHandle) -> None:
            fields = [StructField("n", LongType()), StructField("total", LongType())]
            self.running = handle.getValueState("running", StructType(fields))

        def handleInputRows(self, key, rows, timerValues):
            n, total = self.running.get() if self.running.exists() else (0, 0)
            for pdf in rows:
                n += len(pdf)
                total += int(pdf["v"].sum())
            self.running.update((n, total))
            yield pd.DataFrame({{"key": [str(key[0])], "n": [n], "total": [total]}})

        def close(self) -> None:
            pass

    return (events
            .groupBy("{key}")
            .transformWithStateInPandas(statefulProcessor=RunningTotal(),
                                        outputStructType="key string, n long, total long",
                                        outputMode="Update", timeMode="None"))
"""
ROCKSDB = {
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    )
}
SCHEMA_CHECK_OFF = {"spark.sql.streaming.stateStore.stateSchemaCheck": "false"}


def case(
    id: str,
    kind: str,
    a: str,
    b: str,
    mode: str,
    keys: list[str],
    *,
    keys_a: list[str] | None = None,
    mode_a: str | None = None,
    conf_a: dict[str, str] | None = None,
    conf_b: dict[str, str] | None = None,
    rename: dict[str, str] | None = None,
    by_design: str | None = None,
    expect: str = "",
) -> dict[str, Any]:
    """``keys``: B's output key columns (upsert key in update mode); ``keys_a`` A's, after
    ``rename`` (A's output column -> B's, the same data under B's name); ``by_design``: why a
    difference is what the change intends; ``expect``: what the issue says of the change."""
    return {
        "id": id,
        "kind": kind,
        "before_code": a,
        "after_code": b,
        "output_mode_before": mode_a or mode,
        "output_mode_after": mode,
        "session_conf_before": {"spark.sql.shuffle.partitions": "2", **(conf_a or {})},
        "session_conf_after": {"spark.sql.shuffle.partitions": "2", **(conf_b or {})},
        "keys_before": keys_a if keys_a is not None else keys,
        "keys_after": keys,
        "rename": rename or {},
        "by_design_reason": by_design,
        "issue_says": expect,
    }


def window(duration: str, slide: str | None = None) -> str:
    return f'F.window("ts", "{duration}"' + (f', "{slide}")' if slide else ")")


CASES = [
    # -- changes the issue calls not safe: Spark restarts, the state means something else ----
    case(
        "grouping_key_same_type",
        "change_grouping_key_same_type",
        agg('return events.groupBy("cat").agg(F.count("*").alias("n"), F.sum("v").alias("sum_v"))'),
        agg(
            'return events.groupBy("user").agg(F.count("*").alias("n"), F.sum("v").alias("sum_v"))'
        ),
        "complete",
        ["user"],
        keys_a=["cat"],
        expect="not safe",
    ),
    case(
        "grouping_key_order_swapped",
        "change_grouping_key_order",
        agg('return events.groupBy("cat", "user").agg(F.sum("v").alias("sum_v"))'),
        agg('return events.groupBy("user", "cat").agg(F.sum("v").alias("sum_v"))'),
        "update",
        ["user", "cat"],
        expect="not safe",
    ),
    case(
        "grouping_key_expression_same_type",
        "change_grouping_key_expression_same_type",
        agg('return events.groupBy("k").agg(F.count("*").alias("n"))'),
        agg('return events.groupBy((F.col("k") % 2).alias("k")).agg(F.count("*").alias("n"))'),
        "update",
        ["k"],
        expect="not safe",
    ),
    case(
        "grouping_key_udf_swapped",
        "change_grouping_key_udf_same_type",
        agg(UDF_KEY.format(name="bucket3", mod=3)),
        agg(UDF_KEY.format(name="bucket2", mod=2)),
        "update",
        ["g"],
        expect="not safe",
    ),
    case(
        "grouping_key_struct_field",
        "change_grouping_key_struct_field_same_type",
        agg(NESTED_KEY.format(field="user")),
        agg(NESTED_KEY.format(field="cat")),
        "update",
        ["g"],
        conf_a=KEEP_JSON,
        conf_b=KEEP_JSON,
        expect="not safe",
    ),
    case(
        "aggregate_function_same_type",
        "change_aggregate_function_same_type",
        agg('return events.groupBy("user").agg(F.max("v").alias("x"))'),
        agg('return events.groupBy("user").agg(F.sum("v").alias("x"))'),
        "update",
        ["user"],
        expect="not safe",
    ),
    case(
        "aggregate_input_same_type",
        "change_aggregate_input_same_type",
        agg('return events.groupBy("user").agg(F.sum("v").alias("total"))'),
        agg('return events.groupBy("user").agg(F.sum(F.col("k").cast("long")).alias("total"))'),
        "update",
        ["user"],
        expect="not safe",
    ),
    case(
        "aggregate_order_swapped",
        "change_aggregate_order_same_types",
        agg(
            'return events.groupBy("user").agg(F.sum("v").alias("sum_v"), '
            'F.max("v").alias("max_v"))'
        ),
        agg(
            'return events.groupBy("user").agg(F.max("v").alias("max_v"), '
            'F.sum("v").alias("sum_v"))'
        ),
        "update",
        ["user"],
        expect="not safe",
    ),
    case(
        "aggregate_order_swapped_types_differ",
        "change_aggregate_order_other_types",
        agg(
            'return events.groupBy("user").agg(F.sum("v").alias("sum_v"), '
            'F.sum("amount").alias("sum_amount"))'
        ),
        agg(
            'return events.groupBy("user").agg(F.sum("amount").alias("sum_amount"), '
            'F.sum("v").alias("sum_v"))'
        ),
        "update",
        ["user"],
        expect="not restorable (Spark refuses: the types differ by position)",
    ),
    case(
        "window_duration_5_to_10_minutes",
        "change_window_duration",
        agg(WINDOWED.format(delay="10 minutes", window=window("5 minutes"))),
        agg(WINDOWED.format(delay="10 minutes", window=window("10 minutes"))),
        "append",
        ["window", "cat"],
        expect="not safe",
    ),
    case(
        "tumbling_to_sliding_window",
        "tumbling_to_sliding_window",
        agg(WINDOWED.format(delay="10 minutes", window=window("10 minutes"))),
        agg(WINDOWED.format(delay="10 minutes", window=window("10 minutes", "5 minutes"))),
        "append",
        ["window", "cat"],
        expect="not safe",
    ),
    case(
        "session_window_gap_change",
        "change_session_gap",
        agg(
            'return (events.withWatermark("ts", "10 minutes")\n'
            '        .groupBy(F.session_window("ts", "3 minutes"), "user")\n'
            '        .agg(F.count("*").alias("n"), F.sum("v").alias("sum_v")))'
        ),
        agg(
            'return (events.withWatermark("ts", "10 minutes")\n'
            '        .groupBy(F.session_window("ts", "8 minutes"), "user")\n'
            '        .agg(F.count("*").alias("n"), F.sum("v").alias("sum_v")))'
        ),
        "append",
        ["session_window", "user"],
        expect="not safe",
    ),
    case(
        "dedup_column_id_to_v",
        "change_dedup_column_same_type",
        agg('return events.dropDuplicates(["id"]).select("id", "user", "v", "ts")'),
        agg('return events.dropDuplicates(["v"]).select("id", "user", "v", "ts")'),
        "append",
        [],
        expect="not safe",
    ),
    case(
        "join_keys_change",
        "change_join_keys_same_type",
        JOIN.format(key="click_id = imp_id", join="impressions.join(clicks, condition)"),
        JOIN.format(key="click_v = imp_v", join="impressions.join(clicks, condition)"),
        "append",
        [],
        expect="not safe",
    ),
    case(
        "join_sides_swapped",
        "swap_join_sides",
        JOIN.format(key="click_id = imp_id", join="impressions.join(clicks, condition)"),
        JOIN.format(key="click_id = imp_id", join="clicks.join(impressions, condition)"),
        "append",
        [],
        rename={},
        expect="not safe",
    ),
    case(
        "join_inner_to_left_outer",
        "change_join_type",
        JOIN.format(key="click_id = imp_id", join='impressions.join(clicks, condition, "inner")'),
        JOIN.format(
            key="click_id = imp_id", join='impressions.join(clicks, condition, "leftOuter")'
        ),
        "append",
        [],
        by_design="the outer join pads the impressions still in the state at the restart; "
        "those A's inner join had already evicted unmatched are never padded",
        expect="join type is a fact of item 1; not one of item 2's unsafe cases",
    ),
    case(
        "pandas_state_fields_reordered",
        "reorder_state_fields_same_types",
        PANDAS.format(read="(n, total)", write="n, total", state="n long, total long"),
        PANDAS.format(read="(total, n)", write="total, n", state="total long, n long"),
        "update",
        ["user"],
        expect="not safe",
    ),
    case(
        "added_aggregate_schema_check_off",
        "add_aggregate_schema_check_off",
        agg('return events.groupBy("user").agg(F.sum("v").alias("sum_v"))'),
        agg(
            'return events.groupBy("user").agg(F.sum("v").alias("sum_v"), '
            'F.max("v").alias("max_v"))'
        ),
        "update",
        ["user"],
        conf_a={"spark.sql.streaming.stateStore.stateSchemaCheck": "false"},
        conf_b={"spark.sql.streaming.stateStore.stateSchemaCheck": "false"},
        expect="restorable (only because stateSchemaCheck is false), not safe",
    ),
    case(
        "aggregate_type_change_schema_check_off",
        "change_aggregate_type_schema_check_off",
        agg('return events.groupBy("user").agg(F.sum("v").alias("total"))'),
        agg('return events.groupBy("user").agg(F.sum("amount").alias("total"))'),
        "update",
        ["user"],
        conf_a={"spark.sql.streaming.stateStore.stateSchemaCheck": "false"},
        conf_b={"spark.sql.streaming.stateStore.stateSchemaCheck": "false"},
        expect="restorable (only because stateSchemaCheck is false), not safe",
    ),
    case(
        "aggregate_type_change_schema_check_on",
        "change_aggregate_type",
        agg('return events.groupBy("user").agg(F.sum("v").alias("total"))'),
        agg('return events.groupBy("user").agg(F.sum("amount").alias("total"))'),
        "update",
        ["user"],
        expect="not restorable (the control of the case above)",
    ),
    case(
        "added_aggregate_schema_check_on",
        "add_aggregate",
        agg('return events.groupBy("user").agg(F.sum("v").alias("sum_v"))'),
        agg(
            'return events.groupBy("user").agg(F.sum("v").alias("sum_v"), '
            'F.max("v").alias("max_v"))'
        ),
        "update",
        ["user"],
        expect="not restorable (the control of the case above)",
    ),
    # -- issue 28: a removed aggregate without the schema check, a rate source's format, ------
    # -- transformWithState's grouping key ------------------------------------------------------
    case(
        "removed_last_aggregate_schema_check_off",
        "remove_last_aggregate_schema_check_off",
        agg(
            'return events.groupBy("user").agg(F.sum("v").alias("sum_v"), '
            'F.max("v").alias("max_v"))'
        ),
        agg('return events.groupBy("user").agg(F.sum("v").alias("sum_v"))'),
        "update",
        ["user"],
        conf_a=SCHEMA_CHECK_OFF,
        conf_b=SCHEMA_CHECK_OFF,
        expect="restarts (the stored rows are only longer than the new schema)",
    ),
    case(
        "removed_first_aggregate_schema_check_off",
        "remove_first_aggregate_schema_check_off",
        agg(
            'return events.groupBy("user").agg(F.sum("v").alias("sum_v"), '
            'F.max("v").alias("max_v"))'
        ),
        agg('return events.groupBy("user").agg(F.max("v").alias("max_v"))'),
        "update",
        ["user"],
        conf_a=SCHEMA_CHECK_OFF,
        conf_b=SCHEMA_CHECK_OFF,
        expect="restarts, and max(v) reads the stored sum(v)",
    ),
    case(
        "removed_last_aggregate_schema_check_on",
        "remove_last_aggregate",
        agg(
            'return events.groupBy("user").agg(F.sum("v").alias("sum_v"), '
            'F.max("v").alias("max_v"))'
        ),
        agg('return events.groupBy("user").agg(F.sum("v").alias("sum_v"))'),
        "update",
        ["user"],
        expect="not restorable (the control of the case above)",
    ),
    case(
        "rate_micro_batch_to_rate",
        "change_source_format",
        RATE.format(source=RATE_MICRO_BATCH),
        RATE.format(source=RATE_PER_SECOND),
        "update",
        ["bucket"],
        expect="not restorable (the rate source cannot read rate-micro-batch's offsets)",
    ),
    case(
        "tws_grouping_key_session_to_user",
        "change_tws_grouping_key_same_type",
        TWS.format(key="session_id"),
        TWS.format(key="user_id"),
        "update",
        ["key"],
        conf_a=ROCKSDB,
        conf_b=ROCKSDB,
        expect="not safe (issue 28 item 3)",
    ),
    # -- safe controls ------------------------------------------------------------------------
    case(
        "rename_grouping_key",
        "rename_grouping_key",
        agg('return events.groupBy("user").agg(F.sum("v").alias("sum_v"))'),
        agg('return events.groupBy(F.col("user").alias("u")).agg(F.sum("v").alias("sum_v"))'),
        "update",
        ["u"],
        rename={"user": "u"},
        expect="safe",
    ),
    case(
        "add_filter_upstream",
        "add_filter_upstream",
        agg(BY_USER),
        agg(BY_USER.replace("events.", 'events.filter(F.col("v") >= 20).', 1)),
        "update",
        ["user"],
        by_design="the new filter applies from the restart on: rows A counted stay counted",
        expect="safe",
    ),
    case(
        "add_projection_downstream",
        "add_projection_downstream",
        agg(BY_USER),
        agg(
            'return (events.groupBy("user").agg(F.sum("v").alias("sum_v"), '
            'F.count("*").alias("n"))\n'
            '        .withColumn("avg_v", F.round(F.col("sum_v") / F.col("n"), 3)))'
        ),
        "update",
        ["user"],
        by_design="the new column is computed for the rows emitted from the restart on",
        expect="safe",
    ),
    case(
        "output_mode_update_to_complete",
        "change_output_mode",
        agg(BY_USER),
        agg(BY_USER),
        "complete",
        ["user"],
        mode_a="update",
        expect="safe",
    ),
    case(
        "watermark_delay_10_to_5_minutes",
        "change_watermark_delay",
        agg(WINDOWED.format(delay="10 minutes", window=window("5 minutes"))),
        agg(WINDOWED.format(delay="5 minutes", window=window("5 minutes"))),
        "append",
        ["window", "cat"],
        by_design="the new delay decides from the restart on which late rows still count "
        "and when a window is emitted",
        expect="safe",
    ),
    case(
        "shuffle_partitions_2_to_4",
        "change_shuffle_partitions",
        agg(BY_USER),
        agg(BY_USER),
        "update",
        ["user"],
        conf_b={"spark.sql.shuffle.partitions": "4"},
        expect="safe (Spark keeps the checkpoint's 2 partitions)",
    ),
    case(
        "no_change",
        "no_change",
        agg(BY_USER),
        agg(BY_USER),
        "update",
        ["user"],
        expect="safe",
    ),    # -- issue 28, item 4: the function that updates the state -------------------------------
    case(
        "pandas_state_function_timeout_30_to_10_minutes",
        "change_state_function_constant",
        SESSIONS.format(minutes=30, name="sessions"),
        SESSIONS.format(minutes=10, name="sessions"),
        "update",
        ["user"],
        expect="not safe (the same function name and state schema, another session timeout)",
    ),
    case(
        "pandas_state_function_renamed",
        "rename_state_function",
        SESSIONS.format(minutes=30, name="sessions"),
        SESSIONS.format(minutes=30, name="user_sessions"),
        "update",
        ["user"],
        expect="safe (the same code under another name)",
    ),
]
BY_ID = {c["id"]: c for c in CASES}

# -- running a query (in a worker process) -----------------------------------------------------


def _value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%dT%H:%M:%S")
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, dict):
        return {k: _value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_value(v) for v in value]
    return value


def _session(conf: dict[str, str]) -> Any:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("meaning-restart")
    for key, value in {**SPARK_ENV, "spark.driver.memory": "1g"}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    session = spark.newSession()
    for key, value in conf.items():
        session.conf.set(key, value)
    return session


def _run(
    spark: Any, code: str, folder: Path, checkpoint: Path, mode: str, emitted: Path
) -> dict[str, Any]:
    """Run a query with ``availableNow`` until it stops; append each micro-batch's rows to
    ``emitted``; return Spark's outcome."""
    namespace: dict[str, Any] = {}
    exec(code, namespace)
    paths = {name: str(folder / name) for name in ("in0", "in1", "in2", "out", "out2")}
    df = namespace["build"](spark, paths)

    def capture(batch: Any, batch_id: int) -> None:
        rows = [_value(r.asDict(recursive=True)) for r in batch.collect()]
        rows.sort(key=lambda r: json.dumps(r, sort_keys=True))
        with emitted.open("a", encoding="utf-8") as f:
            f.write(json.dumps({"batch": batch_id, "rows": rows}, sort_keys=True) + "\n")

    query = (
        df.writeStream.foreachBatch(capture)
        .outputMode(mode)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(300)
        progress = [
            {"batchId": p["batchId"], "numInputRows": p["numInputRows"], "watermark": _wm(p)}
            for p in query.recentProgress
        ]
        return {"restarted": True, "error_class": None, "message": None, "batches": progress}
    except Exception as exc:  # the streaming query failed
        text = str(exc)
        condition = _condition(text)
        if condition is None:  # no error condition: Spark's innermost Java exception
            java = _innermost(exc)
            if java is not None:
                return {
                    "restarted": False,
                    "error_class": None,
                    "outcome": java[0],
                    "message": f"{java[0]}: {java[1]}"[:1500],
                    "batches": [],
                }
        start = text.find(f"[{condition}]") if condition else 0
        return {
            "restarted": False,
            "error_class": condition or type(exc).__name__,
            "message": text[start : start + 1500],
            "batches": [],
        }
    finally:
        query.stop()


#: Conditions that wrap Spark's own: the query's, and foreachBatch's (our capture runs the
#: batch's job, so a failure of the batch reaches Spark through it).
WRAPPERS = {"STREAM_FAILED", "FOREACH_BATCH_USER_FUNCTION_ERROR"}


def _condition(text: str) -> str | None:
    """The first error condition Spark named other than the wrappers."""
    for match in re.finditer(r"\[([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)\]", text):
        if match.group(1) not in WRAPPERS:
            return match.group(1)
    return None


def _innermost(exc: BaseException) -> tuple[str, str] | None:
    """The class and message of the innermost cause of the Java exception behind ``exc``
    (a StreamingQueryException wrapping, say, a NumberFormatException), if any."""
    throwable = getattr(exc, "_origin", None) or getattr(exc, "java_exception", None)
    if throwable is None:
        return None
    while throwable.getCause() is not None and throwable.getCause() != throwable:
        throwable = throwable.getCause()
    return throwable.getClass().getName(), str(throwable.getMessage())


def _wm(progress: dict[str, Any]) -> str | None:
    return (progress.get("eventTime") or {}).get("watermark")


def worker(phase: str, case_id: str) -> None:
    """``a``: A on batches 1 and 2, then B from scratch on batches 1, 2, 3 (one run each);
    ``restart``: B on A's checkpoint (batch 3 written)."""
    c = BY_ID[case_id]
    root = RUN_ROOT / case_id
    results: dict[str, Any] = {}
    if phase == "a":
        spark = _session(c["session_conf_before"])
        for number in (1, 2):
            write_batch(root, number)
            results[f"a{number}"] = _run(
                spark,
                c["before_code"],
                root,
                root / "checkpoint",
                c["output_mode_before"],
                root / f"emitted-a{number}.jsonl",
            )
        spark_b = spark.newSession()
        for key, value in c["session_conf_after"].items():
            spark_b.conf.set(key, value)
        for number in (1, 2, 3):
            write_batch(root / "scratch", number)
            results[f"scratch{number}"] = _run(
                spark_b,
                c["after_code"],
                root / "scratch",
                root / "scratch" / "checkpoint",
                c["output_mode_after"],
                root / f"emitted-scratch{number}.jsonl",
            )
    else:
        spark = _session(c["session_conf_after"])
        results["restart"] = _run(
            spark,
            c["after_code"],
            root,
            root / "checkpoint",
            c["output_mode_after"],
            root / "emitted-restart.jsonl",
        )
    (root / f"outcome-{phase}.json").write_text(json.dumps(results, indent=1), encoding="utf-8")


# -- the tables -------------------------------------------------------------------------------


def _emissions(path: Path) -> list[list[dict[str, Any]]]:
    if not path.exists():
        return []
    return [json.loads(line)["rows"] for line in path.read_text(encoding="utf-8").splitlines()]


def _key(row: dict[str, Any], keys: list[str]) -> str:
    return json.dumps([[k, row.get(k)] for k in keys], sort_keys=True)


def table(runs: list[tuple[list[list[dict[str, Any]]], str, list[str]]]) -> list[dict[str, Any]]:
    """The sink's table after the runs, in order: (emissions, output mode, key columns)."""
    rows: list[dict[str, Any]] = []
    by_key: dict[str, dict[str, Any]] = {}
    for emissions, mode, keys in runs:
        for batch in emissions:
            if mode == "append":
                rows.extend(batch)
            elif mode == "complete":
                by_key = {_key(r, keys): r for r in batch}  # the table is replaced
            else:
                by_key.update({_key(r, keys): r for r in batch})
    return _sorted(rows + list(by_key.values()))


def _sorted(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True))


def _renamed(emissions: list[list[dict[str, Any]]], rename: dict[str, str]) -> list[Any]:
    return [[{rename.get(k, k): v for k, v in row.items()} for row in b] for b in emissions]


def record(c: dict[str, Any]) -> dict[str, Any]:
    root = RUN_ROOT / c["id"]
    first = json.loads((root / "outcome-a.json").read_text(encoding="utf-8"))
    second = json.loads((root / "outcome-restart.json").read_text(encoding="utf-8"))
    for name, outcome in first.items():
        if not outcome["restarted"]:
            raise SystemExit(f"{c['id']}: {name} failed: {outcome['message']}")
    spark = second["restart"]
    a = [e for n in (1, 2) for e in _emissions(root / f"emitted-a{n}.jsonl")]
    scratch = [e for n in (1, 2, 3) for e in _emissions(root / f"emitted-scratch{n}.jsonl")]
    restart = _emissions(root / "emitted-restart.jsonl")
    mode_a, mode_b = c["output_mode_before"], c["output_mode_after"]
    table_restart = table(
        [(_renamed(a, c["rename"]), mode_a, c["keys_before"]), (restart, mode_b, c["keys_after"])]
    )
    table_scratch = table([(scratch, mode_b, c["keys_after"])])
    b_restart = _sorted([r for batch in restart for r in batch])
    b_scratch = _sorted([r for batch in _emissions(root / "emitted-scratch3.jsonl") for r in batch])
    differ = spark["restarted"] and table_restart != table_scratch
    by_design = bool(differ and c["by_design_reason"])
    return {
        "case": {"id": c["id"], "kind": c["kind"], "issue_says": c["issue_says"]},
        "before_code": c["before_code"],
        "after_code": c["after_code"],
        "session_conf_before": c["session_conf_before"],
        "session_conf_after": c["session_conf_after"],
        "output_mode_before": mode_a,
        "output_mode_after": mode_b,
        "keys_before": c["keys_before"],
        "keys_after": c["keys_after"],
        "rename": c["rename"],
        "spark": {
            "restarted": spark["restarted"],
            "outcome": (
                "restarted" if spark["restarted"] else spark.get("outcome") or spark["error_class"]
            ),
            "error_class": spark["error_class"],
            "message": spark["message"],
            "batches": spark["batches"],
        },
        "a_batches": first["a1"]["batches"] + first["a2"]["batches"],
        "table_restart": table_restart if spark["restarted"] else None,
        "table_scratch": table_scratch,
        "b_restart": b_restart if spark["restarted"] else None,
        "b_scratch": b_scratch,
        "results_differ": differ,
        "b_output_differs": spark["restarted"] and b_restart != b_scratch,
        "by_design": by_design,
        "by_design_reason": c["by_design_reason"] if by_design else None,
        "checkpoint": f"checkpoints/{c['id']}.tar.gz",
        "inputs": f"inputs/{c['id']}.tar.gz",
        "paths_at_run": {"checkpoint": str(root / "checkpoint")},
        "spark_env": SPARK_ENV,
    }


def _archive(c: dict[str, Any]) -> None:
    """A's checkpoint as it was before B started, without its state data files; the inputs
    as B found them."""
    root = RUN_ROOT / c["id"]
    kept = root / "checkpoint-a"
    for pattern in STATE_DATA:
        for path in kept.rglob(pattern):
            path.unlink()
    (HERE / "checkpoints").mkdir(exist_ok=True)
    (HERE / "inputs").mkdir(exist_ok=True)
    with tarfile.open(HERE / "checkpoints" / f"{c['id']}.tar.gz", "w:gz") as tar:
        tar.add(kept, arcname="checkpoint", filter=_plain)
    with tarfile.open(HERE / "inputs" / f"{c['id']}.tar.gz", "w:gz") as tar:
        for name in ("in0", "in1"):
            tar.add(root / name, arcname=name, filter=_plain)


def _plain(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mtime = 0
    return info


def main(ids: list[str], rerun: bool = True) -> None:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    records = {}
    out = HERE / "cases.jsonl"
    if out.exists():
        for line in out.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            records[rec["case"]["id"]] = rec
    for c in [BY_ID[i] for i in ids] if ids else CASES:
        started = time.monotonic()
        root = RUN_ROOT / c["id"]
        if rerun:
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir(parents=True)
        try:
            for phase in ("a", "restart") if rerun else ():
                if phase == "restart":
                    shutil.copytree(root / "checkpoint", root / "checkpoint-a")
                    write_batch(root, 3)
                subprocess.run(
                    [sys.executable, __file__, "--worker", phase, c["id"]],
                    check=True,
                    env=env,
                    cwd=REPO,
                    stdout=subprocess.DEVNULL,
                    stderr=(root / f"stderr-{phase}.log").open("w"),
                )
            if rerun:
                _archive(c)
            records[c["id"]] = record(c)
        except (subprocess.CalledProcessError, SystemExit) as exc:
            print(f"{c['id']}: FAILED: {exc}", flush=True)
            continue
        rec = records[c["id"]]
        print(
            f"{c['id']:40} {rec['spark']['outcome']:45} differ={rec['results_differ']!s:5} "
            f"b_differs={rec['b_output_differs']!s:5} by_design={rec['by_design']!s:5} "
            f"({time.monotonic() - started:.0f}s)",
            flush=True,
        )
        with out.open("w", encoding="utf-8") as f:
            for cid in [x["id"] for x in CASES if x["id"] in records]:
                f.write(json.dumps(records[cid], sort_keys=True) + "\n")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2], sys.argv[3])
    elif sys.argv[1:2] == ["--records"]:  # the records again from the runs' folders
        main(sys.argv[2:], rerun=False)
    else:
        main(sys.argv[1:])
