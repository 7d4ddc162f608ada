"""``--opid-html=PATH``: one self-contained report of every recorded topology, failures first,
each named in its failing test's message."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

TESTS = """
import pytest
from pytest_opid.flink.builder import source

INSERT = open(__file__.replace(".py", ".txt")).read() == "insert"


def job():
    stream = source("Kafka <clicks>").map("Parse")
    if INSERT:
        stream = stream.filter("Drop bots")
    return stream.key_by().process("Count").sink("Out")


@pytest.mark.stable_topology
def test_changes(opid):
    opid.record(job())


@pytest.mark.stable_topology
def test_stays(opid):
    opid.record(source("Kafka").map("Same").sink("Out"))
"""


@pytest.mark.parametrize("workers", [None, "2"])
def test_the_report_puts_failures_first_and_failures_name_it(pytester: pytest.Pytester, workers):
    if workers:
        pytest.importorskip("xdist")
    pytester.makepyfile(test_jobs=TESTS)
    (pytester.path / "test_jobs.txt").write_text("")
    assert pytester.runpytest_subprocess("--snapshot-update").ret == 0
    (pytester.path / "test_jobs.txt").write_text("insert")
    args = ["--opid-html", "report.html", "-p", "no:cacheprovider"]
    if workers:
        args += ["-n", workers]
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*picture: report.html#t-*"])
    html = (pytester.path / "report.html").read_text(encoding="utf-8")
    ET.fromstring(html.removeprefix("<!DOCTYPE html>").strip())  # well-formed
    assert html.index("test_changes") < html.index("test_stays")  # the failure comes first
    assert "Kafka &lt;clicks&gt;" in html and "<clicks>" not in html  # names are text
    assert "<script" not in html.lower()
