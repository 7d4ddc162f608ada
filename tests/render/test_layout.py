"""The layered layout: boxes never overlap, chains hold their operators, edges run from
their source to their target, and nothing recurses (deep topologies draw)."""

from __future__ import annotations

import random
import sys

import pytest

import pytest_opid
from pytest_opid.model import Edge, Operator, Partitioner, Topology
from pytest_opid.render.folding import fold
from pytest_opid.render.graph import Rect, layout
from pytest_opid.render.picture import picture, render_diff, render_fingerprint
from pytest_opid.render.scene import topology_scene
from pytest_opid.render.svg import scene_layout
from tests.render.fixtures import EXAMPLE, flink_fp


def random_topology(size: int, seed: int) -> Topology:
    """A random DAG shaped like a job: chains of forward edges, shuffles, fan-outs, joins."""
    rng = random.Random(seed)
    ops = [Operator(1, "Source: A", parallelism=2, source=None)]
    edges = []
    for node in range(2, size + 1):
        ops.append(Operator(node, f"Op {node}", parallelism=rng.choice((2, 2, 2, 4))))
        inputs = rng.sample(range(1, node), k=min(node - 1, rng.choice((1, 1, 1, 2))))
        for k, source in enumerate(sorted(inputs)):
            partitioner = rng.choice((Partitioner.FORWARD,) * 3 + (Partitioner.HASH,))
            if ops[source - 1].parallelism != ops[-1].parallelism:
                partitioner = Partitioner.REBALANCE
            edges.append(Edge(source, node, partitioner, k + 1 if len(inputs) > 1 else 0))
    return Topology(ops, edges)


def _overlap(a: Rect, b: Rect) -> bool:
    return (
        a.x < b.x + b.width - 0.5
        and b.x < a.x + a.width - 0.5
        and a.y < b.y + b.height - 0.5
        and b.y < a.y + a.height - 0.5
    )


def _inside(inner: Rect, outer: Rect) -> bool:
    return (
        inner.x >= outer.x - 0.5
        and inner.y >= outer.y - 0.5
        and inner.x + inner.width <= outer.x + outer.width + 0.5
        and inner.y + inner.height <= outer.y + outer.height + 0.5
    )


def _on_border(point: tuple[float, float], rect: Rect) -> bool:
    x, y = point
    within = (
        rect.x - 1 <= x <= rect.x + rect.width + 1 and rect.y - 1 <= y <= rect.y + rect.height + 1
    )
    near = min(
        abs(x - rect.x),
        abs(x - rect.x - rect.width),
        abs(y - rect.y),
        abs(y - rect.y - rect.height),
    )
    return within and near <= 1


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("direction", ["TB", "LR"])
def test_boxes_do_not_overlap_and_edges_join_their_ends(seed, direction):
    fp = pytest_opid.fingerprint(random_topology(60, seed))
    scene = topology_scene(fp)
    placed = scene_layout(scene, direction)
    nodes = placed.nodes
    for i, a in enumerate(nodes):
        assert a.x >= -0.5 and a.y >= -0.5
        assert a.x + a.width <= placed.width + 0.5 and a.y + a.height <= placed.height + 0.5
        for b in nodes[i + 1 :]:
            assert not _overlap(a, b)
    boxes = list(placed.groups.values())
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert not _overlap(a, b)
    for node, rect in zip(scene.nodes, nodes, strict=True):
        if node.group is not None:
            assert _inside(rect, placed.groups[node.group])
        else:
            for box in boxes:
                assert not _overlap(rect, box)
    for edge, route in zip(scene.edges, placed.routes, strict=True):
        assert len(route) >= 2
        assert _on_border(route[0], nodes[edge.source]), (edge, route)
        assert _on_border(route[-1], nodes[edge.target]), (edge, route)


def test_sources_run_top_down_or_left_to_right():
    fp = pytest_opid.fingerprint(EXAMPLE)
    scene = topology_scene(fp)
    for direction, axis in (("TB", 1), ("LR", 0)):
        placed = scene_layout(scene, direction)
        for edge in scene.edges:
            a, b = placed.nodes[edge.source], placed.nodes[edge.target]
            assert (b.y if axis else b.x) > (a.y if axis else a.x)


def test_a_chain_lines_up_straight():
    fp = flink_fp()
    placed = scene_layout(topology_scene(fp))
    by_name = {op.name: placed.nodes[i] for i, op in enumerate(fp.operators)}
    assert by_name["Source: Clicks"].cx == pytest.approx(by_name["Parse"].cx, abs=1)


def _depth() -> int:
    frame, depth = sys._getframe(), 0
    while frame is not None:
        frame, depth = frame.f_back, depth + 1
    return depth


def test_deep_topologies_draw_without_recursion():
    """5,000 operators in one chain and 2,000 single-operator chains in a line, under a
    recursion limit a recursive walk would hit at once."""
    from pytest_opid.flink.builder import StreamEnvironment

    one_chain = StreamEnvironment(2)
    stream = one_chain.source("S")
    for k in range(5_000):
        stream = stream.map(f"M{k}")
    separate = StreamEnvironment(2)
    line = separate.source("S")
    for k in range(2_000):
        line = line.rebalance().map(f"M{k}")
    fps = [pytest_opid.fingerprint(one_chain), pytest_opid.fingerprint(separate)]
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(_depth() + 80)
    try:
        outputs = [
            render_fingerprint(fp, fmt, max_nodes=None, collapse=False)
            for fp in fps
            for fmt in ("svg", "mermaid", "dot")
        ]
    finally:
        sys.setrecursionlimit(limit)
    assert all(out for out in outputs)
    assert outputs[0].count('class="operator') == 5_001


def test_layout_of_nothing_and_of_one():
    empty = layout([], [], [])
    assert (empty.width, empty.height, empty.nodes) == (0.0, 0.0, ())
    one = layout([(100.0, 40.0)], [0], [])
    assert one.nodes[0].width == 100.0 and 0 in one.groups
    with pytest.raises(ValueError, match="direction"):
        layout([], [], [], direction="RL")


def test_cycles_in_a_picture_of_a_change_still_lay_out():
    """Ghost edges (the old job's) can close a cycle with the new job's edges."""
    placed = layout([(80.0, 30.0)] * 3, [None, None, None], [(0, 1), (1, 2), (2, 0)])
    assert len(placed.routes) == 3 and all(len(r) >= 2 for r in placed.routes)
    assert len({(r.x, r.y) for r in placed.nodes}) == 3


def test_folding_keeps_the_picture_consistent():
    fp = pytest_opid.fingerprint(random_topology(400, 3))
    scene = fold(topology_scene(fp), collapse=True, max_nodes=50)
    assert len(scene.nodes) == 50
    for e in scene.edges:
        assert 0 <= e.source < 50 and 0 <= e.target < 50 and e.source != e.target
    for n in scene.nodes:
        assert n.group is None or 0 <= n.group < len(scene.groups)
    assert picture(fp, max_nodes=50).svg().count('class="operator') == 50


def test_a_diff_draws_in_both_directions():
    from pytest_opid.comparison import compare

    c = compare(flink_fp(), flink_fp(insert=True, remove_audit=True))
    assert render_diff(c, direction="LR") != render_diff(c)
