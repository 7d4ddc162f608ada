"""Real Spark restarts across versions for issue 29: query A runs on one PySpark, query B (the
same or changed) restarts on A's checkpoint on another, and Spark's answer is recorded.

Run by hand (not in CI), from the repository root, with any Python 3.11 (this driver imports
no PySpark; each engine runs in its own venv, as a subprocess):

    python tests/data/upgrade-restart/make.py                 # every pair, every B version
    python tests/data/upgrade-restart/make.py PAIR ...        # some pairs (replaces their records)
    python tests/data/upgrade-restart/make.py --records       # cases.jsonl again from the last runs
    python tests/data/upgrade-restart/make.py --survey 4.0.5  # the shared pair kinds on one version

The venvs are named by ``VENVS`` (override with ``UPGRADE_RESTART_VENV_<4_3_0>=/path``): one per
PySpark line, each with only pyspark (and pandas/pyarrow/numpy in that line's ranges).

A pair (``PAIRS``) says which version runs A and which run B. For each pair, in
``RUN_ROOT/<pair>/``:

1. A's process (A's venv, one JVM for every pair of the run): input batch 1 written, A runs with
   ``trigger(availableNow=True)``; batch 2 written, A runs again. A's checkpoint is then copied
   once per B version (``checkpoint-<version>``) and kept as it was (``checkpoint-a``).
2. Input batch 3 written. B's process, one per B version (that version's venv, a fresh JVM: a
   real restart), starts B on its copy of A's checkpoint with ``availableNow`` and records what
   Spark did; then, in the same process, B runs from scratch on its own checkpoint over the same
   three batches, one run per batch, as A did (so watermarks move the same way).

Every run's output is captured with ``foreachBatch``. From the emissions, the table a user ends
up with (upsert by key in update mode, replaced in complete mode, appended in append mode):
A's then B's after the restart (``table_restart``) against B's from scratch
(``table_scratch``); ``results_match`` compares them. Where the batch job fails, the failure is
caught inside ``foreachBatch`` so that the JVM's own cause chain (exception classes and error
conditions) is read, not only the Python text.

The inputs are those of ``../meaning-restart`` (its ``write_batch``: three batches of orders
``in0`` and clicks ``in1`` built for watermarks and joins); some query templates are its too.

``--survey VERSION`` runs the pair kinds of ``../spark-restart`` (Spark 4.3's shared set: A and
B with their own sinks, inputs and confs) with A and B both on VERSION, and writes
``survey-<version>.jsonl``: each pair's outcome there and on 4.3. The pairs whose outcome
differs on VERSION are the ones worth a case of their own (``SAME_VERSION`` pairs).
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
RUN_ROOT = Path(os.environ.get("UPGRADE_RESTART_ROOT", "/tmp/opid-upgrade-restart"))
SHARED = REPO / "tests" / "data" / "spark-restart"
STATE_DATA = ("*.delta", "*.snapshot", "*.zip", "*.sst", "*.changelog", "*.crc")
SPARK_ENV = {
    "spark.master": "local[2]",
    "spark.ui.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.streaming.stopTimeout": "60s",
    "spark.sql.shuffle.partitions": "2",
}
#: The venv of each PySpark version (pyspark, pandas, pyarrow, numpy; nothing else needed).
VENVS = {
    "3.5.9": "/work/venv-ud-spark35",
    "4.0.5": "/work/venv-ud-spark40",
    "4.3.0": "/work/venv-upgrade-data",
}


def _load_meaning() -> Any:
    spec = importlib.util.spec_from_file_location(
        "meaning_restart_make", HERE.parent / "meaning-restart" / "make.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MEANING = _load_meaning()
agg = MEANING.agg

# -- the pairs --------------------------------------------------------------------------------

WINDOWED = MEANING.WINDOWED.format(delay="10 minutes", window='F.window("ts", "5 minutes")')
SESSION = """
return (events.withWatermark("ts", "10 minutes")
        .groupBy(F.session_window("ts", "5 minutes"), "user")
        .agg(F.count("*").alias("n"), F.sum("v").alias("sum_v")))
"""
BY_USER = MEANING.BY_USER
DEDUP = 'return events.dropDuplicates(["id"]).select("id", "user", "v", "ts")'
DEDUP_WM = (
    'return events.withWatermark("ts", "10 minutes").dropDuplicates(["id", "ts"])'
    '.select("id", "user", "v", "ts")'
)
DEDUP_WITHIN = (
    'return events.withWatermark("ts", "10 minutes").dropDuplicatesWithinWatermark(["id"])'
    '.select("id", "user", "v", "ts")'
)
DEDUP_THEN_AGG = (
    'return events.dropDuplicates(["id"]).groupBy("user").agg(F.sum("v").alias("sum_v"))'
)
ONLY_AGG = 'return events.groupBy("user").agg(F.sum("v").alias("sum_v"))'
SUM_MAX = 'return events.groupBy("user").agg(F.sum("v").alias("sum_v"), F.max("v").alias("max_v"))'
MAX_SUM = 'return events.groupBy("user").agg(F.max("v").alias("max_v"), F.sum("v").alias("sum_v"))'


def join(how: str | None = None, sides: str = "impressions.join(clicks, condition{how})") -> str:
    return MEANING.JOIN.format(
        key="click_id = imp_id", join=sides.format(how=f', "{how}"' if how else "")
    )


PANDAS = MEANING.PANDAS.format(read="(n, total)", write="n, total", state="n long, total long")
UPGRADE = ("4.3.0", "4.0.5")


def pair(
    id: str,
    kind: str,
    description: str,
    a: str,
    b: str,
    mode: str,
    keys: list[str],
    *,
    keys_a: list[str] | None = None,
    mode_a: str | None = None,
    rename: dict[str, str] | None = None,
    by_design: str | None = None,
    version_a: str = "3.5.9",
    versions_b: tuple[str, ...] = UPGRADE,
) -> dict[str, Any]:
    """``keys``: B's output key columns (the upsert key in update mode), ``keys_a`` A's (after
    ``rename``, A's output column -> B's); ``by_design``: why B's table after the restart may
    differ from B's from scratch as the change intends."""
    conf = {"spark.sql.shuffle.partitions": "2"}
    return {
        "id": id,
        "kind": kind,
        "description": description,
        "before_code": a,
        "after_code": b,
        "output_mode_before": mode_a or mode,
        "output_mode_after": mode,
        "session_conf_before": dict(conf),
        "session_conf_after": dict(conf),
        "keys_before": keys_a if keys_a is not None else keys,
        "keys_after": keys,
        "rename": rename or {},
        "by_design_reason": by_design,
        "spark_version_a": version_a,
        "spark_versions_b": list(versions_b),
    }


PAIRS = [
    # -- the same query, upgraded ------------------------------------------------------------
    pair(
        "same_window_aggregation",
        "no_change",
        "windowed count and sum by cat with a 10-minute watermark, unchanged",
        agg(WINDOWED),
        agg(WINDOWED),
        "append",
        ["window", "cat"],
    ),
    pair(
        "same_aggregation",
        "no_change",
        "sum and count by user (no watermark), unchanged",
        agg(BY_USER),
        agg(BY_USER),
        "update",
        ["user"],
    ),
    pair(
        "same_dropDuplicates",
        "no_change",
        "dropDuplicates(id) without a watermark, unchanged",
        agg(DEDUP),
        agg(DEDUP),
        "append",
        [],
    ),
    pair(
        "same_dropDuplicates_watermark",
        "no_change",
        "dropDuplicates(id, ts) under a 10-minute watermark, unchanged",
        agg(DEDUP_WM),
        agg(DEDUP_WM),
        "append",
        [],
    ),
    pair(
        "same_dropDuplicatesWithinWatermark",
        "no_change",
        "dropDuplicatesWithinWatermark(id) under a 10-minute watermark, unchanged",
        agg(DEDUP_WITHIN),
        agg(DEDUP_WITHIN),
        "append",
        [],
    ),
    pair(
        "same_join_inner",
        "no_change",
        "stream-stream inner join of impressions and clicks (time-bounded), unchanged",
        join(),
        join(),
        "append",
        [],
    ),
    pair(
        "same_join_left_outer",
        "no_change",
        "stream-stream left outer join of impressions and clicks, unchanged",
        join("leftOuter"),
        join("leftOuter"),
        "append",
        [],
    ),
    pair(
        "same_applyInPandasWithState",
        "no_change",
        "applyInPandasWithState keeping (n, total) per user, unchanged",
        PANDAS,
        PANDAS,
        "update",
        ["user"],
    ),
    pair(
        "same_session_window",
        "no_change",
        "session windows (5-minute gap) by user with a 10-minute watermark, unchanged",
        agg(SESSION),
        agg(SESSION),
        "append",
        ["session_window", "user"],
    ),
    pair(
        "same_dedup_then_aggregation",
        "no_change",
        "dropDuplicates(id) then sum by user (two stateful operators), unchanged",
        agg(DEDUP_THEN_AGG),
        agg(DEDUP_THEN_AGG),
        "update",
        ["user"],
    ),
    # -- removed stateful operators -------------------------------------------------------------
    pair(
        "remove_aggregation_after_dedup",
        "remove_stateful_operator",
        "dropDuplicates(id) then sum by user -> dropDuplicates(id) only",
        agg(DEDUP_THEN_AGG),
        agg(DEDUP),
        "append",
        [],
        mode_a="update",
        keys_a=["user"],
        by_design="B emits rows, A emitted sums: the tables hold different things",
    ),
    pair(
        "remove_dedup_before_aggregation",
        "remove_deduplication",
        "dropDuplicates(id) then sum by user -> sum by user",
        agg(DEDUP_THEN_AGG),
        agg(ONLY_AGG),
        "update",
        ["user"],
        by_design="B no longer drops duplicates: rows A dropped stay out, new duplicates count",
    ),
    pair(
        "remove_all_state",
        "remove_stateful_operator",
        "sum by user -> a stateless projection",
        agg(BY_USER),
        agg('return events.select("user", "v")'),
        "append",
        [],
        mode_a="update",
        keys_a=["user"],
        by_design="B emits rows, A emitted sums: the tables hold different things",
    ),
    # -- changed stateful operators -------------------------------------------------------------
    pair(
        "reorder_aggregates_same_type",
        "change_aggregate_order_same_types",
        "sum(v), max(v) by user -> max(v), sum(v)",
        agg(SUM_MAX),
        agg(MAX_SUM),
        "update",
        ["user"],
    ),
    pair(
        "reorder_aggregates_sum_count",
        "change_aggregate_order_same_types",
        "sum(v), count(*) by user -> count(*), sum(v) (both long; a count is never null)",
        agg(BY_USER),
        agg(
            'return events.groupBy("user").agg(F.count("*").alias("n"), F.sum("v").alias("sum_v"))'
        ),
        "update",
        ["user"],
    ),
    pair(
        "reorder_aggregates_types_differ",
        "change_aggregate_order_other_types",
        "sum(v), sum(amount) by user -> sum(amount), sum(v)",
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
    ),
    pair(
        "change_aggregate_function_same_type",
        "change_aggregate_function_same_type",
        "max(v) by user -> sum(v) under the same name",
        agg('return events.groupBy("user").agg(F.max("v").alias("x"))'),
        agg('return events.groupBy("user").agg(F.sum("v").alias("x"))'),
        "update",
        ["user"],
    ),
    pair(
        "change_aggregate_type",
        "change_aggregate_type",
        "sum(v) by user -> sum(amount) (long -> double)",
        agg('return events.groupBy("user").agg(F.sum("v").alias("total"))'),
        agg('return events.groupBy("user").agg(F.sum("amount").alias("total"))'),
        "update",
        ["user"],
    ),
    pair(
        "add_aggregate",
        "add_aggregate",
        "sum(v) by user -> sum(v), max(v)",
        agg(ONLY_AGG),
        agg(SUM_MAX),
        "update",
        ["user"],
    ),
    pair(
        "change_grouping_key_same_type",
        "change_grouping_key_same_type",
        "sum by cat -> sum by user (both strings)",
        agg('return events.groupBy("cat").agg(F.sum("v").alias("sum_v"))'),
        agg(ONLY_AGG),
        "update",
        ["user"],
        keys_a=["cat"],
    ),
    pair(
        "rename_grouping_key",
        "rename_grouping_key",
        "sum by user -> sum by user AS u",
        agg(ONLY_AGG),
        agg('return events.groupBy(F.col("user").alias("u")).agg(F.sum("v").alias("sum_v"))'),
        "update",
        ["u"],
        rename={"user": "u"},
    ),
    pair(
        "add_filter_upstream",
        "add_filter_upstream",
        "sum and count by user -> the same over v >= 20",
        agg(BY_USER),
        agg(BY_USER.replace("events.", 'events.filter(F.col("v") >= 20).', 1)),
        "update",
        ["user"],
        by_design="the new filter applies from the restart on: rows A counted stay counted",
    ),
    pair(
        "add_dedup_before_aggregation",
        "add_dedup_before_aggregation",
        "sum by user -> dropDuplicates(id) then sum by user",
        agg(ONLY_AGG),
        agg(DEDUP_THEN_AGG),
        "update",
        ["user"],
    ),
    pair(
        "dropDuplicatesWithinWatermark_to_dropDuplicates",
        "change_dedup_operator",
        "dropDuplicatesWithinWatermark(id) -> dropDuplicates(id, ts), same watermark",
        agg(DEDUP_WITHIN),
        agg(DEDUP_WM),
        "append",
        [],
    ),
    pair(
        "dropDuplicates_to_dropDuplicatesWithinWatermark",
        "change_dedup_operator",
        "dropDuplicates(id, ts) -> dropDuplicatesWithinWatermark(id), same watermark",
        agg(DEDUP_WM),
        agg(DEDUP_WITHIN),
        "append",
        [],
    ),
    pair(
        "dedup_column_id_to_v",
        "change_dedup_column_same_type",
        "dropDuplicates(id) -> dropDuplicates(v)",
        agg(DEDUP),
        agg(DEDUP.replace('["id"]', '["v"]')),
        "append",
        [],
    ),
    # -- joins ----------------------------------------------------------------------------------
    pair(
        "join_inner_to_left_outer",
        "change_join_type",
        "stream-stream join inner -> left outer",
        join("inner"),
        join("leftOuter"),
        "append",
        [],
        by_design="the outer join pads the impressions still in the state at the restart; "
        "those A's inner join had already evicted unmatched are never padded",
    ),
    pair(
        "join_inner_to_full_outer",
        "change_join_type",
        "stream-stream join inner -> full outer",
        join("inner"),
        join("fullOuter"),
        "append",
        [],
        by_design="the outer join pads the rows still in the state at the restart; "
        "those A's inner join had already evicted unmatched are never padded",
    ),
    pair(
        "join_left_outer_to_inner",
        "change_join_type",
        "stream-stream join left outer -> inner",
        join("leftOuter"),
        join("inner"),
        "append",
        [],
        by_design="A padded the impressions it evicted unmatched; B pads none",
    ),
    pair(
        "join_sides_swapped",
        "swap_join_sides",
        "impressions.join(clicks) -> clicks.join(impressions), same condition",
        join(),
        join(sides="clicks.join(impressions, condition{how})"),
        "append",
        [],
    ),
]

#: Changes that Spark 4.0 refuses on its own checkpoints where 4.3 restarts (found by
#: ``--survey 4.0.5``: 4.0 compares the state schemas' nullability, 4.3 no longer does), and
#: the same from a 3.5 checkpoint.
COUNT = 'return events.groupBy("k").agg(F.count("*").alias("x"))'
VERSION_RULES = [
    (
        "count_to_sum_same_name",
        "change_aggregate_function_same_type",
        "count(*) by k -> sum(v) under the same name (both long; a count is never null)",
        agg(COUNT),
        agg(COUNT.replace('F.count("*")', 'F.sum("v")')),
        "update",
        ["k"],
        None,
    ),
    (
        "tumbling_to_sliding_window",
        "tumbling_to_sliding_window",
        "10-minute tumbling window -> 10-minute window sliding by 5 minutes",
        agg(MEANING.WINDOWED.format(delay="10 minutes", window='F.window("ts", "10 minutes")')),
        agg(
            MEANING.WINDOWED.format(
                delay="10 minutes", window='F.window("ts", "10 minutes", "5 minutes")'
            )
        ),
        "append",
        ["window", "cat"],
        None,
    ),
    (
        "join_left_outer_to_right_outer",
        "change_join_type",
        "stream-stream join left outer -> right outer",
        join("leftOuter"),
        join("rightOuter"),
        "append",
        [],
        "A padded the impressions it evicted unmatched, B pads clicks",
    ),
]
for _id, _kind, _text, _a, _b, _mode, _keys, _why in VERSION_RULES:
    PAIRS.append(pair(_id, _kind, _text, _a, _b, _mode, _keys, by_design=_why))
for _id, _kind, _text, _a, _b, _mode, _keys, _why in [
    *VERSION_RULES,
    next(
        (
            p["id"],
            p["kind"],
            p["description"],
            p["before_code"],
            p["after_code"],
            p["output_mode_after"],
            p["keys_after"],
            p["by_design_reason"],
        )
        for p in PAIRS
        if p["id"] == "join_inner_to_left_outer"
    ),
]:
    for _version in ("4.0.5", "4.3.0"):
        PAIRS.append(
            pair(
                f"{_id}_on_{_version[:3].replace('.', '_')}",
                _kind,
                f"{_text}; A and B on {_version}",
                _a,
                _b,
                _mode,
                _keys,
                by_design=_why,
                version_a=_version,
                versions_b=(_version,),
            )
        )
BY_ID = {p["id"]: p for p in PAIRS}

# -- running a query (in a worker process, in one version's venv) ------------------------------


def _value(value: Any) -> Any:
    return MEANING._value(value)


def _spark(version: str) -> Any:
    import pyspark
    from pyspark.sql import SparkSession

    if pyspark.__version__ != version:
        raise SystemExit(f"this venv has PySpark {pyspark.__version__}, not {version}")
    builder = SparkSession.builder.appName("upgrade-restart")
    for key, value in {**SPARK_ENV, "spark.driver.memory": "1g"}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def _session(spark: Any, conf: dict[str, str]) -> Any:
    session = spark.newSession()
    for key, value in conf.items():
        session.conf.set(key, value)
    return session


#: Conditions that wrap Spark's own: the query's, foreachBatch's, a Python worker's.
WRAPPERS = {"STREAM_FAILED", "FOREACH_BATCH_USER_FUNCTION_ERROR", "PYTHON_EXCEPTION"}


def _java_chain(exc: BaseException) -> list[dict[str, Any]]:
    """The JVM cause chain behind a PySpark exception (outermost first): class, error
    condition (4.x ``getCondition``, 3.5 ``getErrorClass``), message."""
    throwable = getattr(exc, "_origin", None) or getattr(exc, "java_exception", None)
    chain: list[dict[str, Any]] = []
    while throwable is not None and len(chain) < 30:
        condition = None
        for getter in ("getCondition", "getErrorClass"):
            try:
                condition = getattr(throwable, getter)()
                break
            except Exception:  # not a SparkThrowable, or this version lacks the getter
                continue
        message = throwable.getMessage()
        chain.append(
            {
                "class": throwable.getClass().getName(),
                "condition": condition,
                "message": (message or "")[:2000],
            }
        )
        throwable = throwable.getCause()
    return chain


def _failure(exc: BaseException) -> dict[str, Any]:
    """What a failed run ended with: the innermost error condition other than the wrappers,
    the root cause's class (``python:`` and the Python class when no JVM exception is behind
    it), the message of the exception that gave the condition."""
    chain = _java_chain(exc)
    text = str(exc)
    with_condition = [e for e in chain if e["condition"] and e["condition"] not in WRAPPERS]
    condition = with_condition[-1]["condition"] if with_condition else None
    if condition is None:  # a Python-side failure: the condition is only in the text
        for match in re.finditer(r"\[([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)\]", text):
            if match.group(1) not in WRAPPERS:
                condition = match.group(1)
                break
    root = chain[-1] if chain else {"class": f"python:{type(exc).__name__}", "message": text}
    source = with_condition[-1] if with_condition else root
    message = source["message"] or text
    if condition and condition != (source.get("condition")):
        start = message.find(f"[{condition}]")
        message = message[start:] if start >= 0 else message
    return {
        "error_class": condition,
        "exception_class": root["class"],
        "message": _trim(message),
        "error_chain": [
            {"class": e["class"], "condition": e["condition"], "message": _trim(e["message"], 300)}
            for e in chain
        ],
    }


def _trim(text: str, limit: int = 800) -> str:
    """The message's first lines (Spark appends the plan or a stack trace after a blank line)."""
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + "…"


def _run(
    spark: Any, code: str, folder: Path, checkpoint: Path, mode: str, emitted: Path
) -> dict[str, Any]:
    """Run a query with ``availableNow`` until it stops; append each micro-batch's rows to
    ``emitted``; return Spark's outcome. A batch job's failure is read inside foreachBatch
    (the JVM chain is lost once it crosses the Python function), then raised again."""
    namespace: dict[str, Any] = {}
    exec(code, namespace)
    paths = {name: str(folder / name) for name in ("in0", "in1", "in2", "out", "out2")}
    failed: list[dict[str, Any]] = []
    try:
        df = namespace["build"](spark, paths)
    except Exception as exc:  # the query cannot be built on this version
        return {"restarted": False, "phase": "build", **_failure(exc), "batches": []}

    def capture(batch: Any, batch_id: int) -> None:
        try:
            rows = [_value(r.asDict(recursive=True)) for r in batch.collect()]
        except Exception as exc:
            failed.append(_failure(exc))
            raise
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
        return {
            "restarted": True,
            "error_class": None,
            "exception_class": None,
            "message": None,
            "phase": None,
            "batches": progress,
        }
    except Exception as exc:  # the streaming query failed
        outcome = failed[0] if failed else _failure(exc)
        return {"restarted": False, "phase": "run", **outcome, "batches": []}
    finally:
        query.stop()


def _wm(progress: dict[str, Any]) -> str | None:
    return (progress.get("eventTime") or {}).get("watermark")


def worker_a(version: str, ids: list[str]) -> None:
    """A on batches 1 and 2, for each pair, in one JVM."""
    spark = _spark(version)
    for pair_id in ids:
        p = BY_ID[pair_id]
        root = RUN_ROOT / pair_id
        session = _session(spark, p["session_conf_before"])
        results: dict[str, Any] = {"spark_version": version}
        for number in (1, 2):
            MEANING.write_batch(root, number)
            results[f"a{number}"] = _run(
                session,
                p["before_code"],
                root,
                root / "checkpoint",
                p["output_mode_before"],
                root / f"emitted-a{number}.jsonl",
            )
        (root / "outcome-a.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
        print(pair_id, results["a1"]["restarted"], results["a2"]["restarted"], flush=True)


def worker_b(version: str, ids: list[str]) -> None:
    """B on A's checkpoint (batch 3 written), then B from scratch on batches 1-3; one JVM."""
    spark = _spark(version)
    for pair_id in ids:
        p = BY_ID[pair_id]
        root = RUN_ROOT / pair_id
        session = _session(spark, p["session_conf_after"])
        results: dict[str, Any] = {"spark_version": version}
        results["restart"] = _run(
            session,
            p["after_code"],
            root,
            root / f"checkpoint-{version}",
            p["output_mode_after"],
            root / f"emitted-restart-{version}.jsonl",
        )
        scratch = root / f"scratch-{version}"
        for number in (1, 2, 3):
            MEANING.write_batch(scratch, number)
            results[f"scratch{number}"] = _run(
                session,
                p["after_code"],
                scratch,
                scratch / "checkpoint",
                p["output_mode_after"],
                root / f"emitted-scratch{number}-{version}.jsonl",
            )
        (root / f"outcome-b-{version}.json").write_text(
            json.dumps(results, indent=1), encoding="utf-8"
        )
        print(
            pair_id, results["restart"]["restarted"], results["restart"]["error_class"], flush=True
        )


# -- the records --------------------------------------------------------------------------------


def _emissions(path: Path) -> list[list[dict[str, Any]]]:
    if not path.exists():
        return []
    return [json.loads(line)["rows"] for line in path.read_text(encoding="utf-8").splitlines()]


def _sorted(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True))


def _renamed(emissions: list[list[dict[str, Any]]], rename: dict[str, str]) -> list[Any]:
    return [[{rename.get(k, k): v for k, v in row.items()} for row in b] for b in emissions]


def case_id(pair_id: str, version_b: str) -> str:
    return f"{pair_id}__{version_b.replace('.', '')}"


def record(p: dict[str, Any], version_b: str) -> dict[str, Any]:
    root = RUN_ROOT / p["id"]
    first = json.loads((root / "outcome-a.json").read_text(encoding="utf-8"))
    second = json.loads((root / f"outcome-b-{version_b}.json").read_text(encoding="utf-8"))
    for outcomes in (first, second):
        for name, outcome in outcomes.items():
            if name != "spark_version" and name != "restart" and not outcome["restarted"]:
                raise SystemExit(f"{p['id']}: {name} failed: {outcome['message']}")
    spark = second["restart"]
    a = [e for n in (1, 2) for e in _emissions(root / f"emitted-a{n}.jsonl")]
    scratch = [
        e for n in (1, 2, 3) for e in _emissions(root / f"emitted-scratch{n}-{version_b}.jsonl")
    ]
    restart = _emissions(root / f"emitted-restart-{version_b}.jsonl")
    mode_a, mode_b = p["output_mode_before"], p["output_mode_after"]
    table_restart = MEANING.table(
        [(_renamed(a, p["rename"]), mode_a, p["keys_before"]), (restart, mode_b, p["keys_after"])]
    )
    table_scratch = MEANING.table([(scratch, mode_b, p["keys_after"])])
    b_restart = _sorted([r for batch in restart for r in batch])
    b_scratch = _sorted(
        [r for batch in _emissions(root / f"emitted-scratch3-{version_b}.jsonl") for r in batch]
    )
    restarted = spark["restarted"]
    return {
        "id": case_id(p["id"], version_b),
        "pair": p["id"],
        "kind": p["kind"],
        "description": p["description"],
        "spark_version_a": first["spark_version"],
        "spark_version_b": second["spark_version"],
        "before_code": p["before_code"],
        "after_code": p["after_code"],
        "session_conf_before": p["session_conf_before"],
        "session_conf_after": p["session_conf_after"],
        "output_mode_before": mode_a,
        "output_mode_after": mode_b,
        "keys_before": p["keys_before"],
        "keys_after": p["keys_after"],
        "rename": p["rename"],
        "restarted": restarted,
        "outcome": "restarted" if restarted else spark["error_class"] or spark["exception_class"],
        "error_class": spark["error_class"],
        "exception_class": spark["exception_class"],
        "message": spark["message"],
        "phase": spark["phase"],
        "error_chain": spark.get("error_chain", []),
        "batches": spark["batches"],
        "a_batches": first["a1"]["batches"] + first["a2"]["batches"],
        "results_match": (table_restart == table_scratch) if restarted else None,
        "b_output_matches": (b_restart == b_scratch) if restarted else None,
        "by_design_reason": p["by_design_reason"],
        "table_restart": table_restart if restarted else None,
        "table_scratch": table_scratch,
        "b_restart": b_restart if restarted else None,
        "b_scratch": b_scratch,
        "checkpoint": f"checkpoints/{p['id']}.tar.gz",
        "inputs": f"inputs/{p['id']}.tar.gz",
        "paths_at_run": {"checkpoint": str(root / "checkpoint")},
        "spark_env": SPARK_ENV,
    }


def _archive(p: dict[str, Any]) -> None:
    """A's checkpoint as it was before B started, without its state data files (slim); the
    inputs as B found them."""
    root = RUN_ROOT / p["id"]
    slim = root / "checkpoint-slim"
    shutil.rmtree(slim, ignore_errors=True)
    shutil.copytree(root / "checkpoint-a", slim)
    for pattern in STATE_DATA:
        for path in slim.rglob(pattern):
            path.unlink()
    (HERE / "checkpoints").mkdir(exist_ok=True)
    (HERE / "inputs").mkdir(exist_ok=True)
    with tarfile.open(HERE / "checkpoints" / f"{p['id']}.tar.gz", "w:gz") as tar:
        tar.add(slim, arcname="checkpoint", filter=_plain)
    with tarfile.open(HERE / "inputs" / f"{p['id']}.tar.gz", "w:gz") as tar:
        for name in ("in0", "in1"):
            tar.add(root / name, arcname=name, filter=_plain)


def _plain(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mtime = 0
    return info


def _worker(version: str, phase: str, ids: list[str], log: Path) -> subprocess.Popen[bytes]:
    """A worker process in ``version``'s venv (a JVM of its own)."""
    python = os.environ.get(f"UPGRADE_RESTART_VENV_{version.replace('.', '_')}", VENVS[version])
    interpreter = str(Path(python) / "bin" / "python")
    env = {**os.environ, "PYSPARK_PYTHON": interpreter, "PYSPARK_DRIVER_PYTHON": interpreter}
    env.pop("SPARK_HOME", None)
    return subprocess.Popen(
        [interpreter, __file__, "--worker", phase, version, *ids],
        env=env,
        cwd=REPO,
        stdout=sys.stdout,
        stderr=log.open("w"),
    )


def _wait(*workers: subprocess.Popen[bytes]) -> None:
    """The workers, run side by side, all ended well."""
    for worker in workers:
        if worker.wait() != 0:
            raise SystemExit(f"{worker.args}: exit {worker.returncode}")


def main(ids: list[str], rerun: bool = True) -> None:
    chosen = [BY_ID[i] for i in ids] if ids else PAIRS
    RUN_ROOT.mkdir(parents=True, exist_ok=True)
    if rerun:
        started = time.monotonic()
        for p in chosen:
            shutil.rmtree(RUN_ROOT / p["id"], ignore_errors=True)
            (RUN_ROOT / p["id"]).mkdir(parents=True)
        workers = []
        for version_a in sorted({p["spark_version_a"] for p in chosen}):
            group = [p["id"] for p in chosen if p["spark_version_a"] == version_a]
            workers.append(_worker(version_a, "a", group, RUN_ROOT / f"stderr-a-{version_a}.log"))
        _wait(*workers)
        for p in chosen:
            root = RUN_ROOT / p["id"]
            shutil.copytree(root / "checkpoint", root / "checkpoint-a")
            for version_b in p["spark_versions_b"]:
                shutil.copytree(root / "checkpoint", root / f"checkpoint-{version_b}")
            MEANING.write_batch(root, 3)
            _archive(p)
        workers = []
        for version_b in sorted({v for p in chosen for v in p["spark_versions_b"]}):
            group = [p["id"] for p in chosen if version_b in p["spark_versions_b"]]
            workers.append(_worker(version_b, "b", group, RUN_ROOT / f"stderr-b-{version_b}.log"))
        _wait(*workers)
        print(f"ran in {time.monotonic() - started:.0f}s", flush=True)
    out = HERE / "cases.jsonl"
    records = {}
    if out.exists():
        for line in out.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            records[rec["id"]] = rec
    for p in chosen:
        for version_b in p["spark_versions_b"]:
            rec = record(p, version_b)
            records[rec["id"]] = rec
            print(
                f"{rec['id']:58} {rec['outcome']:52} match={rec['results_match']!s:5}",
                flush=True,
            )
    order = [case_id(p["id"], v) for p in PAIRS for v in p["spark_versions_b"]]
    with out.open("w", encoding="utf-8") as f:
        for cid in [c for c in order if c in records]:
            f.write(json.dumps(records[cid], sort_keys=True) + "\n")


# -- the survey: the shared pair kinds on one version ----------------------------------------


def _shared() -> dict[str, dict[str, Any]]:
    with gzip.open(SHARED / "cases.jsonl.gz", "rt", encoding="utf-8") as f:
        return {rec["case"]["id"]: rec for rec in map(json.loads, f)}


def _shared_run(
    spark: Any, rec: dict[str, Any], which: str, folder: Path, checkpoint: Path
) -> dict[str, Any]:
    """One run of a shared pair's A or B with its own sink, as the shared set ran it."""
    namespace: dict[str, Any] = {}
    exec(rec[f"{which}_code"], namespace)
    sink = rec[f"sink_{which}"]
    session = _session(spark, rec[f"session_conf_{which}"])
    paths = {name: str(folder / name) for name in ("in0", "in1", "in2", "out", "out2")}
    try:
        df = namespace["build"](session, paths)
        writer = (
            df.writeStream.format(sink["format"])
            .outputMode(sink["output_mode"])
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
        )
        if sink["path_key"]:
            writer = writer.option("path", paths[sink["path_key"]])
        query = writer.start()
    except Exception as exc:  # this version cannot build or start the query
        return {"restarted": False, "phase": "build", **_failure(exc), "batches": []}
    try:
        query.awaitTermination(300)
        return {
            "restarted": True,
            "error_class": None,
            "exception_class": None,
            "phase": None,
            "message": None,
            "batches": [
                {"batchId": p["batchId"], "numInputRows": p["numInputRows"]}
                for p in query.recentProgress
            ],
        }
    except Exception as exc:
        return {"restarted": False, "phase": "run", **_failure(exc), "batches": []}
    finally:
        query.stop()


def _stage(folder: Path, number: int) -> None:
    """Input batch ``number`` moved into place from the staging folder."""
    for staged in sorted((folder / "staged").glob(f"*/batch{number}.*")):
        target = folder / staged.parent.name / staged.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(staged), str(target))


def worker_survey(version: str, phase: str, ids: list[str]) -> None:
    spark = _spark(version)
    shared = _shared()
    root = RUN_ROOT / f"survey-{version}"
    for cid in ids:
        rec = shared[cid]
        folder = root / cid
        results: dict[str, Any] = {}
        if phase == "survey-a":
            for number in (1, 2):
                _stage(folder, number)
                results[f"a{number}"] = _shared_run(
                    spark, rec, "before", folder, folder / "checkpoint"
                )
        else:
            _stage(folder, 3)
            results["restart"] = _shared_run(spark, rec, "after", folder, folder / "checkpoint")
            if not results["restart"]["restarted"]:  # the control: B on a fresh checkpoint
                results["control"] = _shared_run(
                    spark, rec, "after", folder, folder / "control-checkpoint"
                )
        (folder / f"outcome-{phase}.json").write_text(json.dumps(results, indent=1))
        print(cid, {k: v["restarted"] for k, v in results.items()}, flush=True)


def survey(version: str) -> None:
    shared = _shared()
    root = RUN_ROOT / f"survey-{version}"
    shutil.rmtree(root, ignore_errors=True)
    for cid, rec in shared.items():
        folder = root / cid
        with tarfile.open(SHARED / rec["inputs"], "r:gz") as tar:
            tar.extractall(folder / "extracted", filter="data")
        for name in ("in0", "in1", "in2"):
            for batch in sorted((folder / "extracted" / name).glob("batch*")):
                (folder / "staged" / name).mkdir(parents=True, exist_ok=True)
                shutil.move(str(batch), str(folder / "staged" / name / batch.name))
        shutil.rmtree(folder / "extracted")
    ids = list(shared)
    started = time.monotonic()
    _wait(_worker(version, "survey-a", ids, root / "stderr-a.log"))
    _wait(_worker(version, "survey-b", ids, root / "stderr-b.log"))
    lines = []
    for cid, rec in shared.items():
        folder = root / cid
        a = json.loads((folder / "outcome-survey-a.json").read_text())
        b = json.loads((folder / "outcome-survey-b.json").read_text())
        ran_a = all(o["restarted"] for o in a.values())
        restart = b["restart"]
        outcome = (
            "restarted"
            if restart["restarted"]
            else restart["error_class"] or restart["exception_class"]
        )
        lines.append(
            {
                "shared_id": cid,
                "refactor": rec["case"]["refactor"],
                "refactor_kind": rec["case"]["refactor_kind"],
                "spark_version": version,
                "a_ran": ran_a,
                "a_failure": None
                if ran_a
                else next(o["message"] for o in a.values() if not o["restarted"]),
                "outcome": outcome if ran_a else None,
                "outcome_4_3": rec["spark"]["outcome"],
                "differs_from_4_3": ran_a and outcome != rec["spark"]["outcome"],
                "control_ok": b.get("control", {}).get("restarted", True),
                "message": restart["message"],
            }
        )
    with (HERE / f"survey-{version}.jsonl").open("w", encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps(line, sort_keys=True) + "\n")
    for line in lines:
        if line["differs_from_4_3"] or not line["a_ran"]:
            print(
                line["shared_id"],
                line["outcome_4_3"],
                "->",
                line["outcome"],
                line["a_failure"] and line["a_failure"][:100],
            )
    print(f"survey ran in {time.monotonic() - started:.0f}s")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        phase, version, ids = sys.argv[2], sys.argv[3], sys.argv[4:]
        if phase == "a":
            worker_a(version, ids)
        elif phase == "b":
            worker_b(version, ids)
        else:
            worker_survey(version, phase, ids)
    elif sys.argv[1:2] == ["--records"]:
        main(sys.argv[2:], rerun=False)
    elif sys.argv[1:2] == ["--survey"]:
        survey(sys.argv[2])
    else:
        main(sys.argv[1:])
