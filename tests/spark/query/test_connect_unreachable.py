"""A Connect DataFrame whose server is down (a closed port) or hung (a socket that accepts and
never answers) is refused within the Connect time limit, in one line naming the server; PySpark's
own client would retry the first for about ten minutes and wait on the second for ever."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("pyspark.sql.connect.session")

import pytest_opid
from pytest_opid.errors import OpidError

pytestmark = pytest.mark.spark_line("4.0", reason="Connect replay is Spark 4's")

LIMIT = 3.0


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def hung_port() -> Iterator[int]:
    """A port that accepts connections and never sends a byte (nor reads one)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def hold() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    try:
        yield int(server.getsockname()[1])
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        server.close()


def _refused_in_time(spark: Any, port: int, monkeypatch: pytest.MonkeyPatch) -> str:
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    monkeypatch.setenv("PYTEST_OPID_CONNECT_TIMEOUT", str(LIMIT))
    session = ConnectSession.builder.remote(f"sc://localhost:{port}").create()
    try:
        frame = session.range(10).groupBy().count()
        start = time.monotonic()
        with pytest.raises(OpidError) as error:
            pytest_opid.fingerprint(frame)
        took = time.monotonic() - start
    finally:
        session.client.close()  # no release request: nobody would answer it
    message = str(error.value)
    assert took < LIMIT + 5, f"gave up after {took:.1f} s"
    assert "\n" not in message and "Traceback" not in message
    assert f"the Spark Connect server at sc://localhost:{port} did not answer" in message
    return message


def test_a_down_server_is_refused_within_the_limit(spark, monkeypatch):
    _refused_in_time(spark, _closed_port(), monkeypatch)


def test_a_hung_server_is_refused_within_the_limit_naming_it(spark, hung_port, monkeypatch):
    message = _refused_in_time(spark, hung_port, monkeypatch)
    assert f"within {LIMIT:g} s (PYTEST_OPID_CONNECT_TIMEOUT sets the limit)" in message


def test_a_malformed_limit_is_one_line(spark, monkeypatch):
    monkeypatch.setenv("PYTEST_OPID_CONNECT_TIMEOUT", "soon")
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    session = ConnectSession.builder.remote(f"sc://localhost:{_closed_port()}").create()
    try:
        with pytest.raises(OpidError, match=r"PYTEST_OPID_CONNECT_TIMEOUT='soon' is not a number"):
            pytest_opid.fingerprint(session.range(3))
    finally:
        session.client.close()


@pytest.mark.parametrize(
    ("key", "copied"),
    [
        ("spark.sql.shuffle.partitions", True),
        ("spark.sql.session.timeZone", True),
        ("spark.sql.streaming.stateStore.stateSchemaCheck", True),
        ("spark.sql.catalog.spark_catalog", False),
        ("spark.sql.catalog.mine", False),
        ("spark.sql.catalogImplementation", False),
        ("spark.sql.extensions", False),
        ("spark.sql.warehouse.dir", False),
        ("spark.sql.streaming.stateStore.providerClass", False),
        ("spark.sql.streaming.checkpointFileManagerClass", False),
        ("spark.sql.sources.default", False),
        ("spark.sql.execution.python.udf.buffer.size", False),
        ("spark.jars", False),
        ("spark.driver.extraClassPath", False),
        ("spark.sql.hive.metastore.jars", False),
    ],
)
def test_the_settings_a_replay_copies_are_an_allow_list(key, copied):
    from pytest_opid.spark.query.connect import copied_setting

    assert copied_setting(key) is copied
