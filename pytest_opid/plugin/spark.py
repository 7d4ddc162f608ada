"""Spark fixtures for pytest: one small local SparkSession for the whole test session.

Registered as the ``opid_spark`` pytest11 entry point. PySpark is imported only when a test asks
for the ``spark`` fixture, so the plugin costs nothing where PySpark is not installed. A
``spark`` fixture in the user's conftest simply overrides this one; a SparkSession that is
already active (built by the user's own session fixture or plugin) is reused and left running.

The JVM it starts is quiet: its log4j2 configuration (:data:`LOG4J2`, passed with
``spark.driver.extraJavaOptions``) logs errors only, so neither Spark's start-up lines ("Using
Spark's default log4j profile", "Setting default log level", WARN lines about the host name or
native libraries) nor its warnings during the tests end up in a test's output, while an ERROR
still does. The one line the JVM itself prints at start-up (``WARNING: Using incubator modules``)
is dropped on its way: the JVM's stderr goes through a pipe whose lines a thread passes on to
this process's stderr, wherever pytest points it at that moment.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

__all__ = ["LOG4J2", "SPARK_CONF", "spark", "spark_connect"]

#: The settings of the session the fixture builds. Adaptive execution is off so plans are the
#: static ones pytest-opid fingerprints; few shuffle partitions keep local runs fast (``opid
#: fingerprint --spark`` uses the same number unless given another: spark.query.program.BASE_CONF).
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

#: The JVM's log4j2 configuration: errors only, on stderr. Every logger under org.apache.spark
#: is set too, so that Spark, finding a configured logger, does not announce a default level.
LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
logger.spark.name = org.apache.spark
logger.spark.level = error
"""

#: Lines the JVM prints at start-up whatever its logging configuration says.
_JVM_NOISE = (b"WARNING: Using incubator modules:",)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("opid").addoption(
        "--opid-spark-version",
        metavar="X.Y",
        default=None,
        help="judge Spark restarts (previous=, opid.check_restore) as that Spark line restarts "
        "(3.5, 4.0 ... 4.3; default: the installed PySpark's); a stable_topology marker's "
        "spark_version= overrides it for its test",
    )


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Restart checks in the test and in its marker's ``previous=`` check judge for the Spark
    line asked for: the marker's ``spark_version=``, else ``--opid-spark-version``."""
    marker = item.get_closest_marker("stable_topology")
    version = marker.kwargs.get("spark_version") if marker is not None else None
    version = version or item.config.getoption("opid_spark_version", None)
    if version is None:
        return (yield)
    from pytest_opid.errors import OpidError
    from pytest_opid.spark import judged_for

    try:
        scope = judged_for(str(version))
        scope.__enter__()
    except OpidError as exc:
        pytest.fail(f"{item.nodeid}: {exc}", pytrace=False)
    try:
        return (yield)
    finally:
        scope.__exit__(None, None, None)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A ``local[2]`` SparkSession shared by every test of the session (or the active one)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        pytest.fail(
            "the spark fixture needs PySpark (and Java 17): "
            "pip install -e '.[spark]' in the pytest-opid clone",
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
    log4j2 = tmp_path_factory.mktemp("spark-conf") / "log4j2.properties"
    log4j2.write_text(LOG4J2, encoding="utf-8")
    builder = builder.config(
        "spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={log4j2.as_uri()}"
    )
    with _filtered_stderr():
        session = builder.config("spark.sql.warehouse.dir", str(warehouse)).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def spark_connect(spark: Any) -> Iterator[Any]:
    """A Spark Connect session on loopback, served by the ``spark`` fixture's own JVM (one
    JVM for classic and Connect code), stopped at the end of the test session. Its temp views
    and confs are its own, as on any Connect server; its DataFrames and streaming queries are
    fingerprinted in that server-side session."""
    try:
        from pyspark.sql.connect.session import SparkSession as ConnectSession
    except ImportError:
        pytest.fail(
            "the spark_connect fixture needs the Spark Connect client: "
            "pip install 'pyspark[connect]'",
            pytrace=False,
        )
    from pytest_opid.spark import serve, stop_serving

    server = serve(spark)
    client = ConnectSession.builder.remote(server.url).create()
    try:
        yield client
    finally:
        try:
            client.stop()
        finally:
            stop_serving(spark, server)


@contextmanager
def _filtered_stderr() -> Iterator[None]:
    """A process started inside (the JVM) gets a pipe as its stderr, for good; a daemon thread
    passes every line on to file descriptor 2 as it is when the line arrives (pytest's capture
    of the running test, or the terminal), except :data:`_JVM_NOISE`. POSIX only."""
    if os.name != "posix":
        yield
        return
    read, write = os.pipe()
    saved = os.dup(2)
    threading.Thread(target=_forward, args=(read,), name="opid-jvm-stderr", daemon=True).start()
    os.dup2(write, 2)
    os.close(write)
    try:
        yield
    finally:
        os.dup2(saved, 2)  # this process's stderr is its own again; the JVM keeps the pipe
        os.close(saved)


def _forward(read: int) -> None:
    """Read the pipe to its end (the JVM's exit) and never stop early: a full pipe would
    block the JVM's next write."""
    with open(read, "rb") as pipe:
        for line in pipe:
            if line.startswith(_JVM_NOISE):
                continue
            with contextlib.suppress(OSError):  # no stderr: the line is lost, not the pipe
                os.write(2, line)
