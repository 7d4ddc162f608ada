"""Inputs and Spark-side observers for the PySpark frontend's tests.

Every test shares the session-scoped ``spark`` fixture of ``pytest_opid.plugin.spark``. The
observers here ask Spark itself what happened (which stages ran, which operator wrote which
state directory) so that the tests compare pytest-opid's predictions with Spark, not with
pytest-opid's own output.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session", autouse=True)
def _connect_sessions_closed_by_stop_only() -> Iterator[None]:
    """PySpark 4.0 and 4.1: a Spark Connect session's ``__del__`` closes its client, and closing
    shuts down the thread pool every Connect session of the process shares
    (``ExecutePlanResponseReattachableIterator``). When the garbage collector runs it during
    another session's request, that request fails ("cannot schedule new futures after
    shutdown", 4.0) or deadlocks (4.1); PySpark 4.2 shuts the pool down only when it is idle.
    The tests stop every Connect session they make; here the collector does not close a
    stopped one again."""
    from pytest_opid.spark.versions import SparkLine, installed_line

    try:
        from pyspark.sql.connect.session import SparkSession as ConnectSession
    except ImportError:  # no Connect client: nothing to guard
        yield
        return
    if installed_line() >= SparkLine(4, 2):
        yield
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ConnectSession, "__del__", lambda self: None)
        yield


@pytest.fixture(scope="session")
def tables(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Small batch inputs: ``orders`` as parquet, ``customers`` as JSON lines."""
    root = tmp_path_factory.mktemp("tables")
    orders = [(i, i % 7, float(i * 3 % 50), f"2024-01-01 00:{i % 60:02d}:00") for i in range(200)]
    (
        spark.createDataFrame(orders, "order_id long, customer_id long, amount double, ts string")
        .selectExpr("order_id", "customer_id", "amount", "cast(ts as timestamp) as ts")
        .coalesce(2)
        .write.parquet(str(root / "orders"))
    )
    customers = root / "customers"
    customers.mkdir()
    with (customers / "part-0.json").open("w", encoding="utf-8") as f:
        for i in range(7):
            f.write(json.dumps({"customer_id": i, "country": "DE" if i % 2 else "FR"}) + "\n")
    return {"orders": str(root / "orders"), "customers": str(customers)}


@pytest.fixture
def events_dir(tmp_path: Path) -> Path:
    """A directory of JSON event files for a file stream source (one micro-batch's worth)."""
    root = tmp_path / "events"
    root.mkdir()
    with (root / "events-0.json").open("w", encoding="utf-8") as f:
        for i in range(40):
            event = {"user": i % 5, "page": f"p{i % 3}", "ts": f"2024-01-01 00:00:{i:02d}"}
            f.write(json.dumps(event) + "\n")
    return root


def _seq(scala_seq: Any) -> list[Any]:
    return [scala_seq.apply(i) for i in range(scala_seq.size())]


@pytest.fixture
def executed_stages(spark: Any) -> Callable[[Any], list[tuple[int, tuple[str, ...]]]]:
    """Run a DataFrame's executed plan and report the stages Spark ran.

    Each stage is (number of tasks, sorted names of the operators in it). Operators are the
    RDD operation scopes Spark records per plan node (with whole-stage codegen off, one scope per
    operator, named by Spark's node name). A scope can show up in two stages: an exchange (map
    side and read side, left out here) and the operator that triggered a broadcast (the collect
    for the broadcast runs under its scope); it belongs to the stage of its last RDD. Stages that
    were skipped (their shuffle output existed already) did not run and are left out.
    """
    sc = spark.sparkContext

    def run(df: Any) -> list[tuple[int, tuple[str, ...]]]:
        group = f"opid-{uuid.uuid4().hex}"
        sc.setJobGroup(group, "pytest-opid stage check")
        try:
            df._jdf.queryExecution().toRdd().count()
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)
            sc.setLocalProperty("spark.job.description", None)
        sc._jsc.sc().listenerBus().waitUntilEmpty()
        tracker = sc.statusTracker()
        store = sc._jsc.sc().statusStore()
        ran = []
        for job in tracker.getJobIdsForGroup(group):
            for stage in tracker.getJobInfo(job).stageIds:
                info = tracker.getStageInfo(stage)
                if info is not None and info.numCompletedTasks > 0:
                    ran.append((stage, info.numTasks))
        home: dict[int, tuple[int, int, str]] = {}  # scope -> (last RDD id, stage, name)
        for stage, _ in ran:
            todo = [store.operationGraphForStage(stage).rootCluster()]
            while todo:
                cluster = todo.pop()
                todo.extend(_seq(cluster.childClusters()))
                rdds = [node.id() for node in _seq(cluster.childNodes())]
                if not rdds or cluster.id().startswith("stage_"):
                    continue
                last = max(rdds)
                if cluster.id() not in home or home[cluster.id()][0] < last:
                    home[cluster.id()] = (last, stage, cluster.name().strip())
        members: dict[int, list[str]] = {stage: [] for stage, _ in ran}
        for _, stage, name in home.values():
            if name != "Exchange":
                members[stage].append(name)
        return sorted((tasks, tuple(sorted(members[stage]))) for stage, tasks in ran)

    return run


@pytest.fixture
def run_available_now() -> Callable[..., Path]:
    """Start a streaming DataFrame on a fresh checkpoint, let it process everything available
    (one micro-batch of the file source) and stop; return the checkpoint directory."""

    def run(df: Any, checkpoint: Path, output_mode: str = "append") -> Path:
        query = (
            df.writeStream.format("noop")
            .outputMode(output_mode)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        try:
            query.awaitTermination(120)
            if query.exception() is not None:
                raise AssertionError(f"the streaming query failed: {query.exception()}")
            assert query.lastProgress is not None, "the query processed no batch"
        finally:
            query.stop()
        return checkpoint

    return run
