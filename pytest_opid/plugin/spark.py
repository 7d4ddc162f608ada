"""Spark fixtures for pytest: one small local SparkSession for the whole test session.

Registered as the ``opid_spark`` pytest11 entry point. PySpark is imported only when a test asks
for the ``spark`` fixture, so the plugin costs nothing where PySpark is not installed. A
``spark`` fixture in the user's conftest simply overrides this one; a SparkSession that is
already active (built by the user's own session fixture or plugin) is reused and left running.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

__all__ = ["SPARK_CONF", "spark"]

#: The settings of the session the fixture builds. Adaptive execution is off so plans are the
#: static ones pytest-opid fingerprints; few shuffle partitions keep local runs fast.
SPARK_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "2",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "1g",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
}


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A ``local[2]`` SparkSession shared by every test of the session (or the active one)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        pytest.fail(
            "the spark fixture needs PySpark (and Java 17): pip install 'pytest-opid[spark]'",
            pytrace=False,
        )
    active = SparkSession.getActiveSession()
    if active is not None:
        yield active
        return
    builder = SparkSession.builder.master("local[2]").appName("pytest-opid")
    for key, value in SPARK_CONF.items():
        builder = builder.config(key, value)
    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = builder.config("spark.sql.warehouse.dir", str(warehouse)).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
