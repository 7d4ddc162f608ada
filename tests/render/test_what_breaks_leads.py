"""A diff picture leads with what breaks (issue 32).

A filter added upstream gives every Spark operator below it a new operator ID; Spark finds state
by ``state/<n>``, so those IDs harm nothing. They are drawn as unchanged, with one note, and the
operator whose state breaks is the one box that stands out: its alarm right under its name,
the strongest border, first in the legend. A stateful operator's box says what its state holds
(keys, window, aggregates) and, in a diff, which of them are new. A scene's notes are printed
once on an HTML page.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import replace

from pytest_opid.comparison import compare
from pytest_opid.render.html import write_html_report
from pytest_opid.render.picture import render_diff, render_fingerprint
from pytest_opid.render.scene import topology_scene
from pytest_opid.render.scene_diff import diff_scene
from pytest_opid.render.state_meaning import meaning_lines
from pytest_opid.render.svg import STYLE
from pytest_opid.result import (
    ChainedOperator,
    Fingerprint,
    JobVertex,
    OperatorFingerprint,
    StateStore,
)
from tests.render.fixtures import flink_fp, spark_fp, without_edges
from tests.render.test_pictures import SVG, _statuses, check_diff, groups, texts

MEANING = (
    ("key 1", "tumbling window(event_time, 5 minutes)"),
    ("key 2", "page: string"),
    ("aggregate 1", "count(1): bigint"),
    ("output mode", "?"),
    ("watermark", "event_time, delay 10 minutes"),
)


def with_meaning(fp: Fingerprint, state: int, meaning) -> Fingerprint:
    states = tuple(
        replace(s, meaning=tuple(meaning)) if s.state_operator_id == state else s
        for s in fp.state_operators
    )
    return replace(fp, state_operators=states)


def with_store(fp: Fingerprint, *fields: str) -> Fingerprint:
    """state/0 with one store whose value schema has ``fields`` (bigint each)."""
    value = ",".join(
        f'{{"name":"{f}","type":"long","nullable":true,"metadata":{{}}}}' for f in fields
    )
    store = StateStore("default", KEY, f'{{"type":"struct","fields":[{value}]}}')
    state = replace(fp.state_operators[0], stores=(store,))
    return replace(fp, state_operators=(state, *fp.state_operators[1:]))


KEY = '{"type":"struct","fields":[{"name":"page","type":"string","nullable":true,"metadata":{}}]}'


def test_harmless_id_changes_are_quiet_and_said_once():
    old, new = spark_fp(), spark_fp(filter_first=True)
    c = compare(old, new)
    assert len(c.changed) >= 5 and not c.breaks("ids")  # every ID above the filter moved
    root = check_diff(c, ghosts=0)
    status = _statuses(root)
    assert "changed" not in status.values()
    assert status["Filter"] == "new"
    assert set(status.values()) == {"unchanged", "new"}
    drawn = texts(root)
    assert not any(line.startswith("ID changed") for line in drawn)
    note = f"{len(c.changed)} operators with a new ID drawn as unchanged: harmless, Spark finds"
    assert sum(note in line for line in drawn) == 1
    titles = ["".join(t.itertext()) for t in root.iter(f"{SVG}title")]
    assert sum("harmless on its own" in t for t in titles) == len(c.changed)


def test_flink_stateless_id_changes_are_quiet_too():
    def job(map_id: str) -> Fingerprint:
        ops = (
            OperatorFingerprint(1, "Source", "a" * 32, job_vertex="a" * 32, stateful=True),
            OperatorFingerprint(2, "Map", map_id, job_vertex="a" * 32, stateful=False),
        )
        chained = tuple(ChainedOperator(op.operator_id) for op in ops)
        return Fingerprint(ops, (JobVertex("a" * 32, "Source -> Map", 2, chained, (1, 2)),))

    c = compare(job("b" * 32), job("c" * 32))
    assert len(c.changed) == 1
    scene = diff_scene(c)
    assert [n.status for n in scene.nodes] == ["unchanged", "unchanged"]
    assert "stateless, nothing to restore" in scene.nodes[1].title
    assert scene.notes[0] == (
        "1 operator with a new ID drawn as unchanged: stateless, nothing to restore"
    )


def test_the_broken_state_leads_its_box_and_the_legend():
    old = with_meaning(with_store(spark_fp(), "count"), 0, MEANING)
    new = with_meaning(
        with_store(spark_fp(filter_first=True), "count", "max"),
        0,
        (*MEANING[:3], ("aggregate 2", "max(event_time): timestamp"), *MEANING[3:]),
    )
    c = compare(old, new)
    assert c.breaks("ids")
    root = check_diff(c, ghosts=0)
    status = _statuses(root)
    assert [name for name, s in status.items() if s == "lost"] == ["StateStoreSave"]
    assert "changed" not in status.values()
    lost = next(iter(groups(root, "status-lost")))
    lines = [("".join(t.itertext()), t.attrib["class"]) for t in lost.iter(f"{SVG}text")]
    assert lines[0] == ("StateStoreSave", "name")
    assert lines[1] == ("CANNOT RESTART: state/0 value schema changed", "alarm")
    assert ("aggregates: count(1), +max(event_time)", "detail") in lines
    assert ("keys: tumbling window(event_time, 5 minutes), page", "detail") in lines
    legend = groups(root, "legend")[0]
    first = next(t for t in legend.iter(f"{SVG}text"))
    assert "".join(first.itertext()).startswith("state lost")
    widths = dict(re.findall(r"\.status-(\w+) \.node\{[^}]*stroke-width:([0-9.]+)", STYLE))
    assert float(widths["lost"]) == max(map(float, widths.values()))
    assert float(widths["misplaced"]) == float(widths["lost"])


def test_a_stateful_box_says_what_its_state_holds():
    fp = with_meaning(spark_fp(), 0, MEANING)
    scene = topology_scene(fp)
    box = next(n for n in scene.nodes if "state/0 stateStoreSave" in n.lines)
    assert box.lines[-3:] == (
        "keys: tumbling window(event_time, 5 minutes), page",
        "aggregate: count(1)",
        "watermark: event_time, delay 10 minutes",
    )
    assert "page: string" in box.title and "count(1): bigint" in box.title  # all, typed
    svg = render_fingerprint(fp)
    assert "keys: tumbling window(event_time, 5 minutes), page" in svg


def test_meaning_lines_mark_what_came_and_went_and_stay_short():
    before = (
        ("key 1", "a: int"),
        ("aggregate 1", "sum(x): bigint"),
        ("aggregate 2", "max(y): int"),
    )
    after = (("key 1", "a: int"), ("aggregate 1", "sum(x): bigint"), ("aggregate 2", "min(y): int"))
    assert meaning_lines(after, before) == ("key: a", "aggregates: sum(x), +min(y), -max(y)")
    many = tuple(
        (f"aggregate {i}", f"some_long_function_name_{i}(column): bigint") for i in range(9)
    )
    lines = meaning_lines(many)
    assert len(lines) == 6 and lines[-1].endswith("more lines in the tooltip)")
    assert all(len(line) <= 52 for line in lines)
    assert meaning_lines((("output mode", "?"),)) == ()


def test_a_note_is_printed_once_on_the_page(tmp_path):
    fp = without_edges(flink_fp())
    old = without_edges(flink_fp(insert=True))
    c = compare(old, fp)
    scene = diff_scene(c)
    assert scene.notes
    target = write_html_report(tmp_path / "report.html", [("t", fp, "failed", c)])
    root = ET.fromstring(target.read_text(encoding="utf-8"))
    shown = [
        "".join(e.itertext())
        for e in root.iter()
        if e.tag in ("li", "p", "pre") or e.tag == f"{SVG}text"
    ]
    for note in scene.notes:
        first_words = note[:40]
        assert sum(first_words in text for text in shown) == 1, note
    page = render_diff(c, "html")
    for note in scene.notes:
        assert page.count(note[:40]) <= 2  # the picture's text, and its <desc> for readers
