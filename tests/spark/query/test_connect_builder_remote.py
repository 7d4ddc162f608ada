"""``SparkSession.builder.remote("local[...]")``: PySpark starts the Connect server in the
process's own JVM, and the replay finds the client's session there, as with the
``spark_connect`` fixture. Run in a Python process of its own (a JVM of its own: the test
process's ``spark`` fixture already owns this one), its fingerprint sent back as saved JSON and
compared with the classic fingerprint of the same code here.

The server takes a free port (issue 48, item 6): it bound Spark's fixed 15002, so two runs of
the suite on one machine collided. ``SPARK_TESTING`` in the child's environment is PySpark's
own switch for it (SPARK-42272: ``_start_connect_server`` binds port 0 and the client asks the
JVM for the port it got); the test holds 15002 meanwhile, as another run would."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("pyspark.sql.connect.session")

import pytest_opid
from tests.spark.connect_corpus import CORPUS, cases, write_events

pytestmark = pytest.mark.spark_line("4.0", reason="Connect replay is Spark 4's")

ROOT = Path(__file__).resolve().parents[3]

CHILD = """
import json, sys
from pyspark.sql import SparkSession
import pytest_opid
from pytest_opid.plugin.spark import SPARK_CONF
from tests.spark.connect_corpus import CORPUS

builder = SparkSession.builder.remote("local[1]")
for key in ("spark.sql.shuffle.partitions", "spark.sql.session.timeZone"):
    builder = builder.config(key, SPARK_CONF[key])
spark = builder.getOrCreate()
assert type(spark).__module__.startswith("pyspark.sql.connect"), type(spark)
paths = json.loads(sys.argv[1])
fp = pytest_opid.fingerprint(CORPUS[sys.argv[2]][0](spark, paths))
print("NOTE", fp.note)
print("FINGERPRINT", fp.to_json().replace("\\n", " "))
spark.stop()
"""


@contextlib.contextmanager
def _held(port: int) -> Iterator[None]:
    """``port`` on loopback listened on (and never answered) for the block; where another
    process holds it already, that process does the same."""
    with socket.socket() as held:
        with contextlib.suppress(OSError):
            held.bind(("127.0.0.1", port))
            held.listen()
        yield


@pytest.mark.parametrize("case", cases(["windowed_count", "transform_with_state"]))
def test_builder_remote_local_is_replayed_in_its_own_server_session(case, spark, tmp_path):
    import json

    paths = write_events(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SPARK_TESTING": "1"}
    env.pop("SPARK_REMOTE", None)
    with _held(15002):  # Spark's default port, taken as by another run (or taken already)
        done = subprocess.run(
            [sys.executable, "-c", CHILD, json.dumps(paths), case],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    assert lines["NOTE"] == "None"  # the server's own session, not "replayed locally"
    theirs = pytest_opid.fingerprint(CORPUS[case][0](spark.newSession(), paths))
    ours = pytest_opid.Fingerprint.from_json(lines["FINGERPRINT"])
    assert ours.to_json() == theirs.to_json()
    assert [state.kind for state in ours.state_operators or ()] == list(CORPUS[case][1])
