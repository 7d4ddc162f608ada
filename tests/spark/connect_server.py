"""A Spark Connect server in a Python process of its own: a remote server, as far as the test
process can tell (another JVM, its own catalog, temp views and registered functions).

``python -m tests.spark.connect_server`` starts a classic ``local[1]`` session with Spark's own
Connect plugin (``spark.plugins=org.apache.spark.sql.connect.SparkConnectPlugin``, as
``SparkSession.builder.remote("local")`` and ``start-connect-server.sh`` do) on loopback and an
ephemeral port, with the token given in ``SPARK_CONNECT_AUTHENTICATE_TOKEN``; prints the port
once it serves, and stops when its standard input closes. :func:`remote_server` runs it for a
test and stops it at the end.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
READY = "serving on port "


def main() -> int:
    from pyspark.sql import SparkSession

    from pytest_opid.plugin.spark import SPARK_CONF

    builder = SparkSession.builder.master("local[1]").appName("opid-remote-connect")
    settings = {
        **SPARK_CONF,
        "spark.driver.memory": "512m",
        "spark.plugins": "org.apache.spark.sql.connect.SparkConnectPlugin",
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": "0",
        "spark.connect.authenticate.token": os.environ["SPARK_CONNECT_AUTHENTICATE_TOKEN"],
    }
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    service = getattr(spark._jvm, "org.apache.spark.sql.connect.service.SparkConnectService$")
    print(READY + str(getattr(service, "MODULE$").localPort()), flush=True)
    sys.stdin.read()  # until the test closes it
    spark.stop()
    return 0


@contextmanager
def remote_server(log: Path, timeout: float = 300) -> Iterator[str]:
    """A running remote Connect server's ``sc://`` address (with its token); stopped after."""
    token = str(uuid.uuid4())
    env = {**os.environ, "SPARK_CONNECT_AUTHENTICATE_TOKEN": token, "PYTHONPATH": str(ROOT)}
    env.pop("SPARK_REMOTE", None)
    with log.open("w", encoding="utf-8") as errors:
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.spark.connect_server"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()  # blocks until it serves or dies
        if not line.startswith(READY):
            raise RuntimeError(f"the Connect server did not start: {log.read_text()[-2000:]}")
        # "localhost": the Python client sends a token over plain local gRPC only to that name.
        yield f"sc://localhost:{int(line[len(READY) :])}/;token={token}"
    finally:
        if child.stdin is not None:
            child.stdin.close()
        try:
            child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


if __name__ == "__main__":
    raise SystemExit(main())
