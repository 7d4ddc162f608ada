"""Spark Connect objects are refused with a TypeError that says what is accepted.

The objects are real: ``connect_probe.py`` starts a local Spark Connect server and client in a
subprocess (the test process's driver is the classic ``spark`` fixture's) and reports what
``pytest_opid.fingerprint`` did with a Connect DataFrame and a Connect StreamingQuery.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import pytest_opid

PROBE = Path(__file__).with_name("connect_probe.py")
MARKER = "RESULT "
ACCEPTED = "a PySpark DataFrame (batch or streaming) or StreamingQuery of a classic SparkSession"

# What would make the child join another Spark: a Connect URL, or the gateway of a driver that
# launched this Python (pytest run under spark-submit).
_INHERITED = (
    "SPARK_REMOTE",
    "SPARK_CONNECT_MODE_ENABLED",
    "SPARK_LOCAL_REMOTE",
    "PYSPARK_GATEWAY_PORT",
    "PYSPARK_GATEWAY_SECRET",
)


@pytest.fixture(scope="module")
def connect_result(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    env = {key: value for key, value in os.environ.items() if key not in _INHERITED}
    # The child imports the very pytest_opid this test imported.
    package_root = str(Path(pytest_opid.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, str(PROBE)],
        cwd=tmp_path_factory.mktemp("spark-connect"),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith(MARKER)]
    if done.returncode != 0 or not lines:
        pytest.fail(
            f"the Spark Connect probe exited {done.returncode} without a result; stderr ends:\n"
            + done.stderr[-4000:],
            pytrace=False,
        )
    return json.loads(lines[-1][len(MARKER) :])


def test_the_probe_ran_a_real_connect_session(connect_result):
    # The server computed the query, so the client's DataFrame is a live Connect one.
    assert connect_result["rows"] == [[0, 3], [1, 2]]
    assert connect_result["dataframe"]["class"] == "pyspark.sql.connect.dataframe.DataFrame"
    assert connect_result["query"]["class"].startswith("pyspark.sql.connect.streaming.")
    assert connect_result["query"]["class"].endswith("StreamingQuery")
    assert Path(connect_result["pytest_opid"]).resolve() == Path(pytest_opid.__file__).resolve()


@pytest.mark.parametrize("kind", ["dataframe", "query"])
def test_connect_objects_are_refused_with_what_is_accepted(connect_result, kind):
    outcome = connect_result[kind]
    assert outcome["error"] == "TypeError", outcome
    message = outcome["message"]
    assert "does not support Spark Connect" in message
    assert f"got {outcome['class']}" in message
    assert ACCEPTED in message
    assert "classic SparkSession" in message and 'master("local[2]")' in message
