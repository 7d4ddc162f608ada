"""Fingerprint real Spark Connect objects; run as a script by ``test_spark_connect.py``.

It runs in a process of its own: a Connect server is a driver started with the
SparkConnectPlugin, and the test process's one driver is the classic ``spark`` fixture's. The
server is such a driver, as ``start-connect-server.sh`` runs it, here on a free loopback port so
that parallel runs do not collide on Spark's default port 15002. The client is a real Spark
Connect client talking gRPC to it. The last line printed is
``RESULT <json>``: what the client's objects are, and what ``pytest_opid.fingerprint`` made of
each of them.
"""

from __future__ import annotations

import json
import socket
from typing import Any

MARKER = "RESULT "


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _class_name(obj: Any) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def _fingerprint(obj: Any) -> dict[str, str | None]:
    import pytest_opid

    try:
        pytest_opid.fingerprint(obj)
    except Exception as error:  # reported, judged by the test
        return {"error": type(error).__name__, "message": str(error)}
    return {"error": None, "message": None}


def main() -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    import pytest_opid

    port = _free_port()
    server = (
        SparkSession.builder.master("local[1]")
        .appName("pytest-opid-connect-server")
        .config("spark.plugins", "org.apache.spark.sql.connect.SparkConnectPlugin")
        .config("spark.connect.grpc.binding.address", "127.0.0.1")
        .config("spark.connect.grpc.binding.port", str(port))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    server.sparkContext.setLogLevel("ERROR")
    try:
        client = ConnectSession.builder.remote(f"sc://127.0.0.1:{port}").getOrCreate()
        try:
            frame = client.range(5).selectExpr("id % 2 AS parity").groupBy("parity").count()
            rows = sorted((row["parity"], row["count"]) for row in frame.collect())
            query = client.readStream.format("rate").load().writeStream.format("noop").start()
            try:
                result = {
                    "pytest_opid": pytest_opid.__file__,
                    "rows": rows,
                    "dataframe": {"class": _class_name(frame), **_fingerprint(frame)},
                    "query": {"class": _class_name(query), **_fingerprint(query)},
                }
            finally:
                query.stop()
        finally:
            client.stop()
    finally:
        server.stop()
    print(MARKER + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
