"""Fingerprints depend on the pipeline's shape: not on the session, the process, adaptive
execution, column names or literals (only the state stores' schemas carry column names, as Spark
writes them)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest_opid
from tests.spark.spark_checks import events_pipeline, orders_pipeline, sql_conf

ROOT = Path(__file__).resolve().parents[3]

# Built in a fresh interpreter with its own SparkSession; argv: tables JSON, events dir, master,
# adaptive execution on/off. Prints the pieces the plan text came in too (whole, or 7,500
# characters where Nagle stays on: without PySpark's pinned threads).
SCRIPT = """
import json, sys
from pyspark.sql import SparkSession
import pytest_opid
from tests.spark.spark_checks import events_pipeline, orders_pipeline

tables, events, master, adaptive = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
spark = (
    SparkSession.builder.master(master)
    .config("spark.ui.enabled", "false")
    .config("spark.sql.shuffle.partitions", "4")
    .config("spark.sql.adaptive.enabled", adaptive)
    .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1")  # faster JVM start
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")
batch = pytest_opid.fingerprint(orders_pipeline(spark, tables))
stream = pytest_opid.fingerprint(events_pipeline(spark, events))
from pytest_opid.spark.query.jvm import Jvm
print("FINGERPRINTS " + json.dumps([batch.to_dict(), stream.to_dict(), Jvm.get()._piece]))
spark.stop()
"""


def _fingerprints_in_subprocesses(tables, events, variants):
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SCRIPT, json.dumps(tables), str(events), master, adaptive],
            cwd=ROOT,
            env={**env, "PYSPARK_PIN_THREAD": pinned},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for master, adaptive, pinned in variants
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        line = next(line for line in out.splitlines() if line.startswith("FINGERPRINTS "))
        results.append(json.loads(line[len("FINGERPRINTS ") :]))
    return results


def test_same_dataframe_in_two_fresh_processes(spark, tables, events_dir):
    here = [
        pytest_opid.fingerprint(orders_pipeline(spark, tables)).to_dict(),
        pytest_opid.fingerprint(events_pipeline(spark, str(events_dir))).to_dict(),
    ]
    # two more SparkSessions: one core with adaptive execution on and py4j without pinned
    # threads (plan text in pieces), two cores with it off (plan text whole)
    first, second = _fingerprints_in_subprocesses(
        tables, events_dir, [("local[1]", "true", "false"), ("local[2]", "false", "true")]
    )
    assert (first.pop(), second.pop()) == (7_500, 2**31 - 1)
    assert first == second == here
    assert here[1]["state_operators"]  # the streaming job's state ids were compared too


def test_renamed_columns_keep_the_fingerprint_and_changed_literals_only_filter_lines(
    spark, tables, events_dir
):
    batch = pytest_opid.fingerprint(orders_pipeline(spark, tables))
    renamed = pytest_opid.fingerprint(
        orders_pipeline(spark, tables, key="cust", value="eur", total="revenue")
    )
    assert renamed.to_dict() == batch.to_dict()
    rebuilt = pytest_opid.fingerprint(
        orders_pipeline(
            spark, tables, key="cust", value="eur", total="revenue", threshold=99.5, country="DE"
        )
    )
    # Another query: the plan tree says so in its Filter lines, and nowhere else.
    assert rebuilt.plan is not None and batch.plan is not None
    differ = [(a, b) for a, b in zip(batch.plan, rebuilt.plan, strict=True) if a != b]
    assert [(a.split()[0], b.split()[0]) for a, b in differ] == [("Filter", "Filter")] * 2
    assert "10.0" in differ[0][0] and "99.5" in differ[0][1]
    assert {**rebuilt.to_dict(), "plan": None} == {**batch.to_dict(), "plan": None}
    assert not pytest_opid.compare(batch, rebuilt).breaks("chains")  # row-wise: it passes

    stream = pytest_opid.fingerprint(events_pipeline(spark, str(events_dir)))
    restream = pytest_opid.fingerprint(
        events_pipeline(
            spark, str(events_dir), user="uid", page="path", delay="5 minutes", window="1 hour"
        )
    )
    # The state stores' schemas are recorded as Spark writes them, column names included;
    # Spark ignores those names at restart, and so does the check.
    assert _shape(restream) == _shape(stream)
    check = pytest_opid.check_restore(stream, restream)
    assert check.restorable
    # Renamed columns keep their meaning (the keys are the same columns of the source); the
    # window grew from 10 seconds to 1 hour, which Spark restarts on and mixes with the old.
    assert [r.kind for r in check.reinterpreted] == ["window_meaning"], check.reinterpreted
    assert "10 seconds" in check.reinterpreted[0].message


def _shape(fp) -> dict:
    """A fingerprint's saved form without what Spark writes verbatim from the query: the state
    stores' schemas (they carry column names), the sources (they carry paths) and what the
    state means (column names and window sizes, which a restart check compares on purpose)."""
    data = fp.to_dict()
    data.pop("sources", None)
    for state in data.get("state_operators") or ():
        state["stores"] = [store["name"] for store in state["stores"]]
        state.pop("meaning", None)
    return data


def test_adaptive_execution_does_not_change_the_fingerprint(spark, tables):
    expected = pytest_opid.fingerprint(orders_pipeline(spark, tables)).to_dict()
    with sql_conf(spark, {"spark.sql.adaptive.enabled": "true"}):
        df = orders_pipeline(spark, tables)
        assert df._jdf.queryExecution().executedPlan().nodeName() == "AdaptiveSparkPlan"
        assert pytest_opid.fingerprint(df).to_dict() == expected
        df.collect()  # AQE re-optimises at run time; the fingerprint keeps the static plan
        assert pytest_opid.fingerprint(df).to_dict() == expected
        assert spark.conf.get("spark.sql.adaptive.enabled") == "true"  # restored


def test_nothing_session_specific_reaches_the_snapshot(spark, tables, events_dir):
    texts = [
        json.dumps(_shape(pytest_opid.fingerprint(orders_pipeline(spark, tables, key="zz_key"))))
        + pytest_opid.fingerprint(orders_pipeline(spark, tables, key="zz_key_column")).to_json(),
        json.dumps(
            _shape(pytest_opid.fingerprint(events_pipeline(spark, str(events_dir), page="zz_p")))
        ),
    ]
    uuid = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
    for text in texts:
        assert "zz_" not in text  # column names
        assert "#" not in text  # expression ids such as id#12L
        assert "plan_id" not in text
        assert str(Path(tables["orders"]).parent) not in text and str(events_dir) not in text
        assert not uuid.search(text)  # watermark node ids, run ids
    # Literals are the query's own: only a batch plan's Filter lines hold them.
    batch = pytest_opid.fingerprint(orders_pipeline(spark, tables, key="zz_key"))
    assert "FR" not in json.dumps({**batch.to_dict(), "plan": None})
    assert "10.0" not in json.dumps({**batch.to_dict(), "plan": None})
    holding = [line.split()[0] for line in batch.plan or () if "'FR'" in line or "10.0" in line]
    assert holding == ["Filter", "Filter"]


def test_the_sessions_cache_does_not_change_the_fingerprint(spark, tables):
    """Spark plans a query over whatever equal sub-plan is cached; the fingerprint does not:
    it is the same before and after other code caches part of the query, and for the user's
    own cached DataFrame."""
    from pytest_opid.spark.query.jvm import Jvm

    expected = pytest_opid.fingerprint(orders_pipeline(spark, tables)).to_dict()
    part = spark.read.parquet(tables["orders"]).select("customer_id", "amount")
    part.cache().count()
    own = orders_pipeline(spark, tables)
    own.cache().count()
    try:
        rebuilt = orders_pipeline(spark, tables)
        plan = Jvm.get().plan_json(rebuilt._jdf.queryExecution().executedPlan())
        assert "InMemoryTableScan" in plan  # Spark's own plan does read the cache
        assert pytest_opid.fingerprint(rebuilt).to_dict() == expected
        assert pytest_opid.fingerprint(own).to_dict() == expected
    finally:
        part.unpersist()
        own.unpersist()
