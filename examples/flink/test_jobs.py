"""The example Flink jobs' OperatorIDs and chains, held stable by committed snapshots.

``tox -e flink`` (or ``pytest examples/flink`` with PyFlink installed) checks them; after an
intended change, ``pytest examples/flink --snapshot-update``. The snapshots come from the real
jobs: PyFlink builds the StreamGraph ``env.execute()`` would submit, and a Java job is run from
its jar as ``flink run`` would, up to ``execute()``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import pytest_opid
from examples.flink.jars import build_jar
from examples.flink.jobs import orders_job, revenue_sql_job
from pytest_opid.comparison import compare
from pytest_opid.flink.jar import fingerprint_jar

HERE = Path(__file__).resolve().parent


@pytest.mark.stable_topology
def test_orders_job(opid, flink_env_factory):
    env = flink_env_factory(4)
    orders_job(env)
    opid.record(env)


@pytest.mark.stable_topology
def test_revenue_sql_job(opid, flink_env_factory):
    from pyflink.table import StreamTableEnvironment

    t_env = StreamTableEnvironment.create(flink_env_factory(2))
    opid.record(revenue_sql_job(t_env))


@pytest.mark.stable_topology
def test_click_stats_jar(opid, tmp_path, flink_jvm):
    jar = build_jar(HERE / "java", tmp_path / "click-stats.jar", "com.example.clicks.ClickStatsJob")
    opid.record(fingerprint_jar(jar))


def test_dropping_validation_keeps_the_state(flink_env_factory):
    """Replacing the validating process function by a plain map changes the stateless
    operator's ID, but every operator with state keeps its uid-pinned ID."""
    before, after = flink_env_factory(4), flink_env_factory(4)
    orders_job(before)
    orders_job(after, validate=False)
    comparison = compare(pytest_opid.fingerprint(before), pytest_opid.fingerprint(after))
    kept = {o.uid for o, _ in comparison.kept}
    assert {"orders-source", "running-total", "totals-sink"} <= kept
