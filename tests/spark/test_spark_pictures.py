"""The diff picture of a Spark streaming change marks the stateful operator whose state Spark
would refuse (a changed key or value schema) or read under another meaning; the ``--opid-html``
report wraps its failure text instead of scrolling sideways."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
from pyspark.sql import functions as F

import pytest_opid
from pytest_opid.render.picture import render_diff
from tests.render.test_pictures import SPARK_WORDS, SVG, groups
from tests.spark.test_spark_wording import MODULE, _run

SCHEMA = "user long, page string, n double, ts timestamp"


def _operators(svg: str) -> dict[str, list[tuple[str, str]]]:
    """Every drawn operator by name (its first line): (status, tooltip)."""
    root = ET.fromstring(svg)
    out: dict[str, list[tuple[str, str]]] = {}
    for g in groups(root, "operator"):
        status = next(c for c in g.attrib["class"].split() if c.startswith("status-"))
        name = "".join(next(t for t in g.iter(f"{SVG}text")).itertext())
        tip = "".join(g.find(f"{SVG}title").itertext())
        out.setdefault(name, []).append((status.removeprefix("status-"), tip))
    return out


def _diff(spark, events_dir, old_aggregates, new_aggregates):
    stream = spark.readStream.schema(SCHEMA).json(str(events_dir))
    old = stream.groupBy("page").agg(*old_aggregates)
    new = stream.groupBy("page").agg(*new_aggregates)
    return pytest_opid.compare(pytest_opid.fingerprint(old), pytest_opid.fingerprint(new))


@pytest.mark.spark_line(
    "4.0", reason="asserts Spark 4.x's error classes (3.5's words: tests/data/spark-restart-35)"
)
def test_a_new_aggregate_column_marks_the_aggregation_that_cannot_restart(spark, events_dir):
    c = _diff(
        spark,
        events_dir,
        [F.count("*").alias("views")],
        [F.count("*").alias("views"), F.sum("n").alias("total")],
    )
    assert [p.kind for p in c.restore.problems] == ["value_schema"]
    assert not c.state_operator_changes  # the same operators in the same places
    drawn = _operators(render_diff(c))
    ((status, tip),) = drawn["StateStoreSave"]
    assert status == "lost"
    assert "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE" in tip
    others = {s for name, marks in drawn.items() if name != "StateStoreSave" for s, _ in marks}
    assert others == {"unchanged"}
    assert not any(word in tip.lower() for word in SPARK_WORDS)


def test_the_changed_operator_says_so_on_its_own_lines(spark, events_dir):
    c = _diff(
        spark,
        events_dir,
        [F.count("*").alias("views")],
        [F.count("*").alias("views"), F.sum("n").alias("total")],
    )
    root = ET.fromstring(render_diff(c))
    (save,) = [
        g
        for g in groups(root, "operator")
        if "".join(next(t for t in g.iter(f"{SVG}text")).itertext()) == "StateStoreSave"
    ]
    lines = ["".join(t.itertext()) for t in save.iter(f"{SVG}text")]
    assert "CANNOT RESTART: state/0 value schema changed" in " ".join(lines)


def test_state_read_under_another_meaning_is_marked_wrong_state(spark, events_dir):
    """sum(n) -> max(n): a double buffer either way, so Spark restarts, and the running sums
    are continued as maxima."""
    c = _diff(spark, events_dir, [F.sum("n").alias("v")], [F.max("n").alias("v")])
    assert c.restore.restorable and c.restore.reinterpreted
    drawn = _operators(render_diff(c))
    ((status, tip),) = drawn["StateStoreSave"]
    assert status == "misplaced"
    assert "state/0" in tip


def test_the_report_wraps_a_spark_failure_and_marks_the_operator(pytester, spark):
    pytester.makepyfile(test_views=MODULE)
    _run(pytester, "--snapshot-update").assert_outcomes(passed=1)
    result = _run(pytester, "--opid-html", "report.html", total=True)
    result.assert_outcomes(failed=1)
    html = (pytester.path / "report.html").read_text(encoding="utf-8")
    root = ET.fromstring(html.removeprefix("<!DOCTYPE html>").strip())
    # The failure text is a <pre class="failure"> whose style wraps long lines ...
    (failure,) = [p for p in root.iter("pre") if p.attrib.get("class") == "failure"]
    text = "".join(failure.itertext())
    headline = next(line for line in text.splitlines() if "[checked: state]" in line)
    assert len(headline) > 120  # a line that would need a horizontal scroll bar unwrapped
    style = "".join(root.find("head/style").itertext())
    rules = {sel.strip(): body for sel, body in re.findall(r"([^{}]+)\{([^{}]*)\}", style)}
    wrapping = [sel for sel, body in rules.items() if "white-space:pre-wrap" in body]
    assert any("pre.failure" in sel.split(",") for sel in wrapping), rules
    # ... while the plain <pre> (operator tables) keeps its columns.
    assert rules["pre"].replace("\n", "").endswith("white-space:pre")
    # The picture marks the aggregation whose value schema changed.
    svg = ET.tostring(next(root.iter(f"{SVG}svg")), encoding="unicode")
    drawn = _operators(svg)
    assert drawn["StateStoreSave"][0][0] == "lost"
    others = {s for name, marks in drawn.items() if name != "StateStoreSave" for s, _ in marks}
    assert others == {"unchanged"}
