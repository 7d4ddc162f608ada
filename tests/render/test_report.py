"""The HTML report of every recorded topology (what ``--opid-html=PATH`` writes)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest_opid
from pytest_opid.comparison import compare
from pytest_opid.render.html import report_anchor, write_html_report
from tests.render.fixtures import EXAMPLE, HOSTILE, flink_fp, misplaced, spark_fp, without_edges
from tests.render.test_pictures import SVG, check_html, groups


def test_failures_come_first_each_with_its_text_and_picture(tmp_path):
    fraud = pytest_opid.fingerprint(EXAMPLE)
    c = misplaced()
    spark_change = compare(spark_fp(), spark_fp(dedupe=False))
    entries = [
        ("tests/test_jobs.py::test_fraud[fraud]", fraud, None, None),
        ("tests/test_jobs.py::test_orders[orders]", c.new, "Topology not stable: <script>", c),
        ("tests/test_spark.py::test_stream[stream]", spark_change.new, None, spark_change),
        ("tests/test_x.py::test_saved[saved]", without_edges(fraud), "failed\u202e too", None),
    ]
    path = write_html_report(tmp_path / "out" / "opid.html", entries)
    text = path.read_text(encoding="utf-8")
    root = check_html(text)
    sections = list(root.iter("section"))
    assert [s.attrib["id"] for s in sections] == [
        report_anchor(entries[1][0]),
        report_anchor(entries[3][0]),
        report_anchor(entries[0][0]),
        report_anchor(entries[2][0]),
    ]
    failures = [
        "".join(p.itertext()) for p in root.iter("pre") if p.attrib.get("class") == "failure"
    ]
    assert failures == ["Topology not stable: <script>", "failed\\u202e too"]
    for section in sections:
        assert section.find(f".//{SVG}svg") is not None
    # the index links every section, failures first
    links = [a.attrib["href"] for a in root.iter("a")]
    assert links == ["#" + s.attrib["id"] for s in sections]
    first = sections[0]
    statuses = {g.attrib["class"] for g in groups(first, "operator")}
    assert any("status-misplaced" in s for s in statuses)
    # every picture's ids are its own
    ids = [e.attrib["id"] for e in root.iter() if "id" in e.attrib]
    assert len(ids) == len(set(ids))
    assert "1 failed" not in text and "2 failed" in text
    assert not list(tmp_path.glob("out/.*tmp"))


def test_an_empty_report_and_hostile_titles(tmp_path):
    path = write_html_report(tmp_path / "empty.html", [])
    root = check_html_without_picture(path.read_text(encoding="utf-8"))
    assert "0 recorded topologies" in "".join(root.itertext())
    fp = flink_fp(names=True)
    entries = [(name, fp, name, None) for name in HOSTILE]
    text = write_html_report(tmp_path / "hostile.html", entries).read_text(encoding="utf-8")
    check_html(text)
    assert len({report_anchor(name) for name in HOSTILE}) == len(HOSTILE)


def check_html_without_picture(text: str) -> ET.Element:
    root = ET.fromstring(text)
    assert root.tag == "html" and "<script" not in text
    return root


def test_the_anchor_is_known_before_the_report_is_written():
    title = "tests/test_jobs.py::test_fraud[fraud]"
    assert report_anchor(title) == report_anchor(title)
    assert report_anchor(title).startswith("t-") and len(report_anchor(title)) == 18


def test_the_fingerprint_table_speaks_the_engine_s_words() -> None:
    from pytest_opid.render.table import render_table
    from pytest_opid.result import ChainedOperator, Fingerprint, JobVertex, OperatorFingerprint

    zero = "0" * 32
    ops = (OperatorFingerprint(1, "HashAggregate", zero, job_vertex=zero),)
    vertices = (JobVertex(zero, "HashAggregate", 4, (ChainedOperator(zero),), (1,)),)
    spark = render_table(Fingerprint(ops, vertices, None, "spark", "batch"))
    assert spark.startswith("1 operator in 1 stage") and "stage 1: HashAggregate" in spark
    assert "job vertex" not in spark and "OperatorID" not in spark
    flink = render_table(Fingerprint(ops, vertices, None, "flink", "streaming"))
    assert "1 job vertex" in flink and "OperatorID" in flink


def test_the_table_ends_with_the_settings_and_plan_tree_where_a_fingerprint_has_them():
    from pytest_opid.render.table import render_table
    from pytest_opid.result import Fingerprint

    plan = ("HashAggregate keys [a]", "  Exchange hashpartitioning [a]", "    Scan t \u202e")
    fp = Fingerprint((), (), None, "spark", "batch", None, None, plan, (("conf.x", "4"),))
    text = render_table(fp)
    assert "setting conf.x = 4" in text
    tail = text.split("plan (one operator per line, its inputs indented below it):\n", 1)[1]
    assert tail.splitlines() == [
        "    HashAggregate keys [a]",
        "      Exchange hashpartitioning [a]",
        "        Scan t \\u202e",  # a bidi override escaped, never raw in a terminal
    ]
    assert "plan" not in render_table(Fingerprint((), (), None, "spark", "batch"))
