"""The ``spark`` fixture's JVM keeps its start-up lines and warnings out of the test output,
and still shows its errors. A fresh JVM is needed: the inner session runs in a subprocess."""

from __future__ import annotations

import pytest

MODULE = """
import time

import pytest


@pytest.mark.stable_topology
def test_views(opid, spark, tmp_path):
    events = tmp_path / "events"
    events.mkdir()
    (events / "e.json").write_text('{"page": "/"}\\\\n')
    stream = spark.readStream.schema("page string").json(str(events))
    opid.record(stream.groupBy("page").count())  # no snapshot yet: this test fails


def test_a_jvm_error_is_shown(spark):
    logs = spark._jvm.org.apache.logging.log4j.LogManager
    logs.getLogger("opid.check").error("a real error from the JVM")
    logs.getLogger("org.apache.spark.opid").warn("a Spark warning")
    time.sleep(1)  # the fixture's thread passes the JVM's lines on as they come
    raise AssertionError("failed on purpose")
"""

#: What Spark's JVM prints when left to its defaults (see the fixture's docstring).
NOISE = (
    "Using Spark's default log4j profile",
    "Setting default log level",
    "To adjust logging level",
    "WARN",
    "incubator modules",
    "NativeCodeLoader",
)


def test_the_jvm_is_quiet_but_its_errors_show(pytester: pytest.Pytester):
    pytester.makepyfile(test_quiet=MODULE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=300)
    result.assert_outcomes(failed=2)
    output = "\n".join(result.outlines + result.errlines)
    assert "no snapshot yet; create it with pytest --snapshot-update" in output
    assert "failed on purpose" in output
    for noise in NOISE:
        assert noise not in output, noise
    # An error the JVM logs while a test runs is in that test's captured stderr.
    captured = output[output.index("test_a_jvm_error_is_shown") :]
    assert "ERROR check: a real error from the JVM" in captured
