"""Table API and SQL jobs: a statement set as statement_set.execute() would submit it, and
tables turned into DataStreams on the environment; our IDs and chains equal Flink's JobGraph."""

from __future__ import annotations

import pytest

import pytest_opid
from pytest_opid.errors import OpidError

SOURCES = """
CREATE TEMPORARY TABLE orders (
    order_id BIGINT, customer_id BIGINT, amount DOUBLE, ts TIMESTAMP(3),
    WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH ('connector' = 'datagen', 'number-of-rows' = '10');
CREATE TEMPORARY TABLE customers (customer_id BIGINT, country STRING)
    WITH ('connector' = 'datagen', 'number-of-rows' = '10');
CREATE TEMPORARY TABLE totals (customer_id BIGINT, total DOUBLE, n BIGINT)
    WITH ('connector' = 'blackhole');
CREATE TEMPORARY TABLE per_country (country STRING, total DOUBLE) WITH ('connector' = 'blackhole');
CREATE TEMPORARY TABLE windows (window_start TIMESTAMP(3), customer_id BIGINT, total DOUBLE)
    WITH ('connector' = 'blackhole');
CREATE TEMPORARY TABLE printed (customer_id BIGINT, amount DOUBLE) WITH ('connector' = 'print');
"""

AGGREGATE = (
    "INSERT INTO totals SELECT customer_id, SUM(amount), COUNT(*) FROM orders GROUP BY customer_id"
)
JOIN = (
    "INSERT INTO per_country SELECT c.country, SUM(o.amount) FROM orders o "
    "JOIN customers c ON o.customer_id = c.customer_id GROUP BY c.country"
)
WINDOW_TVF = (
    "INSERT INTO windows SELECT window_start, customer_id, SUM(amount) FROM TABLE("
    "TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) "
    "GROUP BY window_start, window_end, customer_id"
)
HOP_TVF = (
    "INSERT INTO windows SELECT window_start, customer_id, MAX(amount) FROM TABLE("
    "HOP(TABLE orders, DESCRIPTOR(ts), INTERVAL '10' SECOND, INTERVAL '1' MINUTE)) "
    "GROUP BY window_start, window_end, customer_id"
)
FILTER = "INSERT INTO printed SELECT customer_id, amount FROM orders WHERE amount > 10"
DEDUP = (
    "INSERT INTO printed SELECT customer_id, amount FROM (SELECT *, ROW_NUMBER() OVER ("
    "PARTITION BY order_id ORDER BY ts) AS rn FROM orders) WHERE rn = 1"
)
STATEMENTS = {
    "aggregate": [AGGREGATE],
    "join": [JOIN],
    "window_tvf": [WINDOW_TVF],
    "hop_tvf": [HOP_TVF],
    "filter": [FILTER],
    "deduplicate": [DEDUP],
    "several": [AGGREGATE, JOIN, WINDOW_TVF, FILTER],
}


def table_env(flink_env_factory, parallelism=2, batch=False):
    from pyflink.table import EnvironmentSettings, StreamTableEnvironment

    env = flink_env_factory(parallelism, batch=batch)
    settings = (
        EnvironmentSettings.in_batch_mode() if batch else EnvironmentSettings.in_streaming_mode()
    )
    t_env = StreamTableEnvironment.create(env, environment_settings=settings)
    for ddl in SOURCES.split(";"):
        if ddl.strip():
            t_env.execute_sql(ddl)
    return env, t_env


def statement_set(flink_env_factory, sqls, *, batch=False, config=None):
    """A new table environment and a statement set of ``sqls``.

    Flink's SQL planner keeps Calcite's metadata provider in a thread-local that it sets on the
    JVM thread that built the planner; py4j may serve a later call on another of its threads,
    where planning then fails with ``NullPointerException: metadataHandlerProvider`` (seen once
    in 4 runs of this suite; not our code). Building the environment again on the thread in
    use is the known way round it, so this tries up to three times."""
    from py4j.protocol import Py4JJavaError

    for attempt in range(3):
        env, t_env = table_env(flink_env_factory, batch=batch)
        for key, value in (config or {}).items():
            t_env.get_config().set(key, value)
        statements = t_env.create_statement_set()
        try:
            for sql in sqls:
                statements.add_insert_sql(sql)
        except Py4JJavaError as exc:
            if "metadataHandlerProvider" not in str(exc) or attempt == 2:
                raise
            continue
        return env, statements
    raise AssertionError("unreachable")


@pytest.mark.parametrize("name", sorted(STATEMENTS))
def test_statement_set_equals_flink(name, flink_env_factory, cross_check):
    env, statements = statement_set(flink_env_factory, STATEMENTS[name])
    fp = cross_check(statements)
    assert fp.mode == "streaming"
    assert env._j_stream_execution_environment.getTransformations().isEmpty()


@pytest.mark.parametrize("name", ["aggregate", "filter", "window_tvf"])
def test_batch_statement_set_equals_flink(name, flink_env_factory, cross_check):
    _, statements = statement_set(flink_env_factory, STATEMENTS[name], batch=True)
    fp = cross_check(statements)
    assert fp.mode == "batch"


def test_batch_join_with_multiple_input_is_refused_or_equal(flink_env_factory, cross_check):
    """The batch planner may chain sources into a multiple-input operator, which our engine
    does not model: then fingerprinting says so in one line; otherwise it equals Flink."""
    _, statements = statement_set(flink_env_factory, [JOIN], batch=True)
    try:
        cross_check(statements)
    except OpidError as exc:
        assert "multiple-input" in str(exc) and "\n" not in str(exc)


def test_batch_join_without_multiple_input_equals_flink(flink_env_factory, cross_check):
    _, statements = statement_set(
        flink_env_factory,
        [JOIN],
        batch=True,
        config={"table.optimizer.multiple-input-enabled": "false"},
    )
    cross_check(statements)


def test_statement_set_attached_to_the_environment(flink_env_factory, cross_check):
    env, statements = statement_set(flink_env_factory, [AGGREGATE, FILTER])
    alone = pytest_opid.fingerprint(statements)
    statements.attach_as_datastream()
    attached = cross_check(env)
    # The same job, whichever way it is submitted.
    assert [v.id for v in attached.job_vertices] == [v.id for v in alone.job_vertices]


def test_table_to_datastream_and_back(flink_env_factory, cross_check):
    from pyflink.common import Types

    env, t_env = table_env(flink_env_factory)
    ds = env.from_collection(
        [(1, 2.0), (2, 3.0)], type_info=Types.ROW([Types.LONG(), Types.DOUBLE()])
    )
    table = t_env.from_data_stream(ds).alias("customer_id", "amount")
    t_env.create_temporary_view("payments", table)
    result = t_env.sql_query(
        "SELECT customer_id, SUM(amount) AS total FROM payments GROUP BY customer_id"
    )
    changelog = t_env.to_changelog_stream(result)
    changelog.map(lambda row: str(row), output_type=Types.STRING()).print()
    appended = t_env.to_data_stream(t_env.sql_query("SELECT * FROM orders WHERE amount > 1"))
    appended.key_by(lambda row: row[1]).map(lambda row: row[0]).uid("after-sql").print()
    cross_check(env)


def test_python_udf_in_sql(flink_env_factory, cross_check):
    from pyflink.table import DataTypes
    from pyflink.table.udf import udf

    _, t_env = table_env(flink_env_factory)
    t_env.create_temporary_function("twice", udf(lambda x: x * 2, result_type=DataTypes.DOUBLE()))
    t_env.create_temporary_function(
        "plus_one", udf(lambda x: x + 1, result_type=DataTypes.DOUBLE())
    )
    statements = t_env.create_statement_set()
    statements.add_insert_sql(
        "INSERT INTO printed SELECT customer_id, plus_one(twice(amount)) FROM orders"
    )
    cross_check(statements)


def test_an_empty_statement_set_is_one_clear_error(flink_env_factory):
    _, t_env = table_env(flink_env_factory)
    with pytest.raises(OpidError, match="holds no statements") as info:
        pytest_opid.fingerprint(t_env.create_statement_set())
    assert "\n" not in str(info.value)
