"""Pictures of topologies and of changes: SVG and HTML parse as XML, every operator is drawn,
chains are groups, names are labels (never markup), Spark pictures speak Spark."""

from __future__ import annotations

import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

import pytest_opid
from pytest_opid.comparison import Comparison, compare
from pytest_opid.render.picture import FORMATS, Picture, picture, render_diff, render_fingerprint
from pytest_opid.render.scene import NAME_LIMIT
from pytest_opid.result import Fingerprint
from pytest_opid.text import printable
from tests.render.fixtures import (
    EXAMPLE,
    HOSTILE,
    flink_fp,
    misplaced,
    spark_batch_fp,
    spark_fp,
    without_edges,
)

SVG = "{http://www.w3.org/2000/svg}"
SPARK_WORDS = ("savepoint", "uid", "setuidhash", "flink", "allownonrestoredstate")


def _short(name: str) -> str:
    text = printable(name)
    return text if len(text) <= NAME_LIMIT else text[: NAME_LIMIT - 1]


def check_markup(text: str) -> ET.Element:
    """Well-formed XML with no script, no event handler, no external reference, and no raw
    control or bidi character anywhere."""
    root = ET.fromstring(text)
    for element in root.iter():
        tag = element.tag.rsplit("}", 1)[-1].lower()
        assert tag not in ("script", "foreignobject", "iframe", "object", "embed", "image")
        for key, value in element.attrib.items():
            name = key.rsplit("}", 1)[-1].lower()
            assert not name.startswith("on"), key
            if name in ("href", "src"):
                assert value.startswith("#"), value
    assert "<script" not in text.lower()
    assert "javascript:" not in text.lower()
    for ch in "\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\r\x00\x1b":
        assert ch not in text
    return root


def texts(root: ET.Element) -> list[str]:
    return ["".join(e.itertext()) for e in root.iter() if e.tag.endswith("}text")]


def groups(root: ET.Element, cls: str) -> list[ET.Element]:
    return [g for g in root.iter(f"{SVG}g") if cls in g.attrib.get("class", "").split()]


def check_svg(text: str, fp: Fingerprint, *, ghosts: int = 0) -> ET.Element:
    """Every operator of ``fp`` drawn with its name, short ID and node; its chains as
    ``<g class="chain">`` groups holding them."""
    root = check_markup(text)
    assert root.tag == f"{SVG}svg"
    drawn = texts(root)
    for text_line in drawn:
        assert "\n" not in text_line
    operators = groups(root, "operator")
    assert len([g for g in operators if "data-node" in g.attrib]) == len(fp.operators) + ghosts
    nodes = {
        int(g.attrib["data-node"]) for g in operators if "status-removed" not in g.attrib["class"]
    }
    assert nodes == {op.node for op in fp.operators}
    for op in fp.operators:
        assert any(_short(op.name) in line for line in drawn), op.name
        assert any(line.startswith(op.operator_id[:8]) for line in drawn), op.operator_id
    chains = groups(root, "chain")
    assert len(chains) == len(fp.job_vertices)
    members = sorted(
        int(g.attrib["data-node"]) for chain in chains for g in groups(chain, "operator")
    )
    assert members == sorted(op.node for op in fp.operators)
    return root


def check_html(text: str) -> ET.Element:
    assert text.startswith("<!DOCTYPE html>")
    root = check_markup(text)
    assert root.tag == "html"
    csp = [m for m in root.iter("meta") if m.attrib.get("http-equiv") == "Content-Security-Policy"]
    assert csp and "default-src 'none'" in csp[0].attrib["content"]
    assert root.find(f".//{SVG}svg") is not None
    return root


def mermaid_ids(text: str) -> set[str]:
    return set(re.findall(r"^\s*(n\d+)\[", text, re.M))


def check_mermaid(text: str, count: int) -> None:
    assert text.startswith("flowchart ")
    node_lines = [line for line in text.splitlines() if re.match(r"\s*n\d+\[", line)]
    assert len(node_lines) == count
    for line in text.splitlines():
        for label in re.findall(r'"([^"]*)"', line):
            # only harmless characters and entity codes; our own line breaks
            assert re.fullmatch(r"(?:[A-Za-z0-9 _.,:\-/+=()@!?%*]|#\d+;|<br/>)*", label), label
        assert line.count('"') % 2 == 0, line
    assert "<script" not in text.lower()


DOT_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def check_dot(text: str, count: int) -> None:
    assert text.startswith("digraph opid {") and text.rstrip().endswith("}")
    outside = DOT_STRING.sub("S", text)
    assert '"' not in outside
    assert outside.count("{") == outside.count("}")
    assert len(re.findall(r"^\s*n\d+ \[label=", text, re.M)) == count
    if shutil.which("dot"):
        result = subprocess.run(
            ["dot", "-Tsvg"], input=text.encode(), capture_output=True, timeout=60, check=False
        )
        assert result.returncode == 0, result.stderr.decode()
        assert b"<script" not in result.stdout.lower()


# -- topologies -------------------------------------------------------------------------------


TOPOLOGIES = {
    "example": lambda: pytest_opid.fingerprint(EXAMPLE),
    "flink-builder": lambda: flink_fp(),
    "flink-hostile-names": lambda: flink_fp(names=True),
    "spark-streaming": lambda: spark_fp(),
    "spark-batch": lambda: spark_batch_fp(),
    "snapshot-without-edges": lambda: without_edges(pytest_opid.fingerprint(EXAMPLE)),
}


@pytest.mark.parametrize("name", sorted(TOPOLOGIES))
@pytest.mark.parametrize("direction", ["TB", "LR"])
def test_every_format_draws_every_operator(name, direction):
    fp = TOPOLOGIES[name]()
    check_svg(render_fingerprint(fp, "svg", direction=direction), fp)
    html = check_html(render_fingerprint(fp, "html", direction=direction))
    assert len(groups(html, "operator")) == len(fp.operators)
    check_mermaid(render_fingerprint(fp, "mermaid", direction=direction), len(fp.operators))
    check_dot(render_fingerprint(fp, "dot", direction=direction), len(fp.operators))


def test_edges_are_labelled_by_partitioner_and_only_between_chains():
    fp = pytest_opid.fingerprint(EXAMPLE)
    root = check_svg(render_fingerprint(fp), fp)
    labels = sorted(
        "".join(t.itertext())
        for t in root.iter(f"{SVG}text")
        if t.attrib.get("class") == "edge-label"
    )
    assert labels == ["BROADCAST", "HASH", "REBALANCE"]  # FORWARD inside chains goes unsaid
    assert len(root.findall(f".//{SVG}path[@class='edge']")) == len(fp.edges)
    mermaid = render_fingerprint(fp, "mermaid")
    assert '-->|"HASH"|' in mermaid and '-->|"BROADCAST"|' in mermaid
    assert "FORWARD" not in mermaid


def test_spark_pictures_say_stage_exchange_and_state_never_savepoint_or_uid():
    fp = spark_fp()
    for fmt in FORMATS:
        text = render_fingerprint(fp, fmt)
        assert not any(word in text.lower() for word in SPARK_WORDS), fmt
        assert "stage 1" in text
    root = check_svg(render_fingerprint(fp), fp)
    drawn = texts(root)
    assert "hash exchange" in drawn
    assert any(line.startswith("state/0 stateStoreSave") for line in drawn)
    assert any(line.startswith("state/1 dedupe") for line in drawn)
    stateful = {int(g.attrib["data-node"]) for g in groups(root, "stateful")}
    names = {op.node: op.name for op in fp.operators}
    assert sorted(names[n] for n in stateful) == ["StateStoreSave", "StreamingDeduplicate"]


def test_a_fingerprint_without_edges_says_so_and_stacks_its_chains():
    fp = without_edges(pytest_opid.fingerprint(EXAMPLE))
    assert fp.edges is None
    svg = render_fingerprint(fp)
    root = check_svg(svg, fp)
    assert not root.findall(f".//{SVG}path[@class='edge']")
    assert "no edges" in " ".join(texts(root))
    assert "no edges" in render_fingerprint(fp, "mermaid")


def test_a_saved_snapshot_draws_from_the_cli(tmp_path, capsys):
    from pytest_opid.cli import main
    from pytest_opid.io.snapshot import dumps

    fp = pytest_opid.fingerprint(EXAMPLE)
    path = tmp_path / "job.opid"
    path.write_text(dumps(fp), encoding="utf-8")
    assert main(["render", str(path)]) == 0
    out = capsys.readouterr().out
    check_svg(out, fp)
    assert "no edges" in out


# -- hostile names --------------------------------------------------------------------------


def test_hostile_names_are_labels_in_every_format():
    fp = flink_fp(names=True)
    svg = render_fingerprint(fp)
    root = check_svg(svg, fp)
    drawn = texts(root)
    assert "<script>alert(1)</script>" in drawn  # text, read back by the XML parser
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in svg
    assert "line\\nbreak\\rand\\ttab" in drawn
    assert "\\u202eevil\\u202c bidi" in drawn
    for name in HOSTILE:
        assert _short(name) in drawn
    titles = ["".join(t.itertext()) for t in root.iter(f"{SVG}title")]
    assert any("<script>alert(1)</script>" in t for t in titles)
    mermaid = render_fingerprint(fp, "mermaid")
    check_mermaid(mermaid, len(fp.operators))
    assert "#60;script#62;alert(1)#60;/script#62;" in mermaid
    assert "#34;#93;#59; x" in mermaid  # "]; x
    dot = render_fingerprint(fp, "dot")
    check_dot(dot, len(fp.operators))
    assert '\\"]; x' in dot
    assert "&lt;script&gt;" in dot
    assert "line\\\\nbreak" in dot  # the escaped name's backslash, doubled: no DOT line break
    check_html(render_fingerprint(fp, "html"))


def test_hostile_chain_and_edge_labels_are_escaped_too():
    fp = pytest_opid.fingerprint(EXAMPLE)
    data = fp.to_dict()
    data["edges"][1][2] = "<script>x</script>"
    data["job_vertices"][0]["name"] = '"]; <b>\u202e'
    hostile = Fingerprint.from_dict(data)
    for fmt in FORMATS:
        text = render_fingerprint(hostile, fmt)
        assert "<script" not in text.lower() and "\u202e" not in text
    check_svg(render_fingerprint(hostile), hostile)
    check_mermaid(render_fingerprint(hostile, "mermaid"), len(hostile.operators))
    check_dot(render_fingerprint(hostile, "dot"), len(hostile.operators))


# -- diffs --------------------------------------------------------------------------------


def _statuses(root: ET.Element) -> dict[str, str]:
    """Status by operator name (the node's first line)."""
    out = {}
    for g in groups(root, "operator"):
        status = next(c for c in g.attrib["class"].split() if c.startswith("status-"))
        name = "".join(next(t for t in g.iter(f"{SVG}text")).itertext())
        out[name] = status.removeprefix("status-")
    return out


def check_diff(comparison: Comparison, ghosts: int) -> ET.Element:
    root = check_svg(render_diff(comparison), comparison.new, ghosts=ghosts)
    check_html(render_diff(comparison, "html"))
    count = len(comparison.new.operators) + ghosts
    check_mermaid(render_diff(comparison, "mermaid"), count)
    check_dot(render_diff(comparison, "dot"), count)
    legend = groups(root, "legend")
    assert legend and "state lost" in " ".join("".join(t.itertext()) for t in legend[0].iter())
    return root


def test_an_inserted_operator_is_new_and_what_moved_is_marked():
    c = compare(flink_fp(), flink_fp(insert=True))
    root = check_diff(c, ghosts=0)
    status = _statuses(root)
    assert status["Drop bots"] == "new"
    assert status["Source: Clicks"] == "unchanged"
    assert status["Parse"] == "lost"  # its chain changed, so did its ID
    # The Alerts writer took over the old Audit operator's ID: it gets Audit's state, and its
    # own old state is lost; it is not drawn again as a removed ghost.
    assert status["Alerts: Writer"] == "misplaced"
    assert status["Audit"] == "lost"
    alerts = next(g for g in groups(root, "status-misplaced"))
    title = "".join(alerts.find(f"{SVG}title").itertext())
    assert "restores the state of the old Audit" in title and "its own old state" in title
    html = render_diff(c, "html")
    assert "Topology not stable" in html and "setUidHash" in html  # the explanation


def test_a_removed_operator_is_a_ghost_wired_by_the_old_edges():
    c = compare(flink_fp(), flink_fp(remove_audit=True))
    root = check_diff(c, ghosts=2)
    status = _statuses(root)
    assert status["Audit"] == "removed" and status["Sink: Audit log"] == "removed"
    ghost_paths = root.findall(f".//{SVG}path[@class='edge edge-ghost']")
    assert len(ghost_paths) == 2  # Score -> Audit -> Sink, as the old job had them
    assert "REMOVED: state lost" in texts(root)
    assert render_diff(c, "mermaid").count("-.->") == 2


def test_misplaced_state_names_the_operator_it_belonged_to():
    c = misplaced()
    root = check_diff(c, ghosts=0)
    status = _statuses(root)
    assert status == {
        "Source: Kafka": "unchanged",
        "Drop bots": "misplaced",
        "Parse": "lost",
        "Print: Writer": "lost",
    }
    drawn = texts(root)
    assert "WRONG STATE: gets Parse's" in drawn
    assert "STATE LOST: goes to Drop bots" in drawn
    title = next(
        "".join(g.find(f"{SVG}title").itertext()) for g in groups(root, "status-misplaced")
    )
    assert "restores the state of the old Parse" in title


def test_a_spark_diff_marks_state_directories_in_spark_words():
    c = compare(spark_fp(), spark_fp(dedupe=False, filter_first=True))
    root = check_diff(c, ghosts=1)
    for fmt in FORMATS:
        text = render_diff(c, fmt)
        assert not any(word in text.lower() for word in SPARK_WORDS), fmt
    status = _statuses(root)
    assert status["StreamingDeduplicate"] == "removed"
    assert status["Filter"] == "new"
    assert "REMOVED: state/1 unread" in texts(root)
    merged = [g for g in groups(root, "chain") if "chain-merged" in g.attrib["class"]]
    assert len(merged) == 1


def test_a_spark_state_directory_read_by_another_operator_is_wrong_state():
    old = spark_fp()
    data = old.to_dict()
    # state/1 now read by an operator of another kind: Spark would hand it the old state
    data["state_operators"][1]["kind"] = "symmetricHashJoin"
    c = compare(old, Fingerprint.from_dict(data))
    root = check_diff(c, ghosts=0)
    assert _statuses(root)["StreamingDeduplicate"] == "misplaced"
    assert "WRONG STATE: state/1" in texts(root)


def test_a_diff_of_saved_fingerprints_without_edges_puts_ghosts_apart():
    old = without_edges(flink_fp())
    new = without_edges(flink_fp(remove_audit=True))
    c = compare(old, new)
    svg = render_diff(c)
    root = check_markup(svg)
    chains = groups(root, "chain")
    assert any("chain-removed" in g.attrib["class"] for g in chains)
    assert "the old job's edges are not known" in " ".join(texts(root))


# -- large topologies -----------------------------------------------------------------------


def _long_job(chains: int, length: int = 4):
    from pytest_opid.flink.builder import StreamEnvironment

    env = StreamEnvironment(2)
    stream = env.source("Events").uid("events")
    for k in range(chains):
        stream = stream.key_by().process(f"Step {k}").uid(f"step-{k}")
        for j in range(length - 1):
            stream = stream.map(f"Map {k}.{j}")
    stream.sink("Out")
    return env


def test_a_large_topology_folds_its_chains_and_caps_the_nodes_it_draws():
    fp = pytest_opid.fingerprint(_long_job(300))  # 1,202 operators in 302 chains
    svg = render_fingerprint(fp, max_nodes=100)
    root = check_markup(svg)
    operators = groups(root, "operator")
    assert len(operators) == 100
    notes = " ".join(texts(root))
    assert "drawn as one box each" in notes and "not drawn: a picture shows at most 100" in notes
    assert all("status-folded" in g.attrib["class"] for g in operators[1:-1])
    mermaid = render_fingerprint(fp, "mermaid", max_nodes=100)
    assert len(mermaid_ids(mermaid)) == 100
    full = render_fingerprint(fp, max_nodes=None, collapse=False)
    check_svg(full, fp)


def test_a_large_diff_shows_the_neighbourhood_of_its_change():
    from pytest_opid.flink.builder import StreamEnvironment

    old = pytest_opid.fingerprint(_long_job(100))
    env = _long_job(100)
    assert isinstance(env, StreamEnvironment)
    data = old.to_dict()
    # one operator in the middle gets a new ID
    middle = data["operators"][200]
    middle["operator_id"] = "f" * 32
    for v in data["job_vertices"]:
        for o in v["operators"]:
            if o["generated"] == old.operators[200].operator_id:
                o["generated"] = "f" * 32
            if v["id"] == old.operators[200].operator_id:
                v["id"] = "f" * 32
    c = compare(old, Fingerprint.from_dict(data))
    assert len(c.changed) == 1
    svg = render_diff(c)
    root = check_markup(svg)
    operators = [g for g in groups(root, "operator") if "data-node" in g.attrib]
    assert 1 < len(operators) <= 5  # the change and two hops around it
    notes = " ".join(texts(root))
    assert "more than 2 hops from a change not drawn" in notes
    assert len(groups(root, "status-more")) == 2  # where the rest is, up and down
    wide = render_diff(c, hops=5)
    assert len(
        [g for g in groups(check_markup(wide), "operator") if "data-node" in g.attrib]
    ) > len(operators)


# -- the API --------------------------------------------------------------------------------


def test_picture_displays_itself_in_a_notebook(tmp_path):
    fp = pytest_opid.fingerprint(EXAMPLE)
    drawn = picture(fp)
    assert isinstance(drawn, Picture)
    check_svg(drawn._repr_svg_(), fp)
    fragment = drawn._repr_html_()
    check_markup(fragment)
    for suffix, marker in (
        (".svg", "<svg"),
        (".mmd", "flowchart"),
        (".dot", "digraph"),
        (".html", "<!DOCTYPE"),
    ):
        path = drawn.save(tmp_path / f"p{suffix}")
        assert marker in path.read_text(encoding="utf-8")
    with pytest.raises(ValueError, match="cannot tell the format"):
        drawn.save(tmp_path / "p.png")
    with pytest.raises(ValueError, match="format must be one of"):
        drawn.render("png")
    with pytest.raises(ValueError, match="direction"):
        picture(fp, direction="BT")
    with pytest.raises(TypeError, match="Fingerprint or a Comparison"):
        picture("job.json")  # type: ignore[arg-type]


def test_to_svg_for_notebooks():
    from pytest_opid.render.svg import to_svg

    fp = pytest_opid.fingerprint(EXAMPLE)
    check_svg(to_svg(fp), fp)
    c = misplaced()
    check_svg(to_svg(c), c.new)


def test_two_pictures_on_one_page_have_their_own_ids():
    fp = pytest_opid.fingerprint(EXAMPLE)
    a, b = picture(fp).svg(id_prefix="a"), picture(fp).svg(id_prefix="b")
    ids_a = set(re.findall(r'id="([^"]+)"', a))
    ids_b = set(re.findall(r'id="([^"]+)"', b))
    assert ids_a and not ids_a & ids_b
