"""A layered layout for pictures of topologies, in pure Python and without recursion.

Sugiyama-lite, with groups (chains, stages) kept as boxes:

1. every group is laid out on its own (longest-path rows of its members, the members of a row
   ordered by their inputs), which gives its box; an operator in no group is a box of one;
2. the boxes are layered by longest path over the edges between them (cycles, which a
   picture of a change can have, are broken where Kahn's walk gets stuck), sources pulled down
   next to their first consumer; an edge that spans several layers gets a dummy in each layer
   it crosses;
3. a few barycenter sweeps order each layer; coordinates along a layer are the positions
   closest (least squares, by pool-adjacent-violators) to the positions the neighbours ask
   for, ports included, so a chain of boxes lines up straight;
4. edges leave a box at its bottom (through the box's margin where another member sits
   below), cross the gaps between layers and the layers through their dummies, so they never
   cut through a box of another layer.

Everything works on abstract coordinates, *breadth* along a layer and *depth* across layers,
so top-down (``TB``) and left-to-right (``LR``) pictures are the same computation.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from pytest_opid.render.layering import longest_path_ranks, merge_intervals, overlaps, place

__all__ = ["Layout", "Rect", "layout"]

#: Space between the members of a group, along and across rows.
NODE_GAP = 18.0
ROW_GAP = 26.0
#: Space between boxes of one layer, and between layers (edge labels live there).
BOX_GAP = 28.0
LAYER_GAP = 54.0
#: Breadth of an edge's dummy in a layer it crosses, and its gap to its neighbours.
DUMMY_SIZE = 6.0
DUMMY_GAP = 8.0
#: A group's margin around its members, and the space its label takes above them.
GROUP_PAD = 12.0
ORDER_SWEEPS = 6
COORDINATE_PASSES = 6
#: More dummies than this (edges spanning many layers of a huge picture) and the remaining
#: long edges are drawn straight instead.
MAX_DUMMIES = 60_000

Point = tuple[float, float]


@dataclass(frozen=True)
class Rect:
    x: float
    y: float
    width: float
    height: float

    @property
    def cx(self) -> float:
        return self.x + self.width / 2

    @property
    def cy(self) -> float:
        return self.y + self.height / 2


@dataclass(frozen=True)
class Layout:
    """Where everything goes: ``nodes`` and ``routes`` (polylines, first point at the source)
    parallel to the inputs, ``groups`` by group number, ``labels`` the anchor of each edge's
    label (``None`` for an edge inside a group), all within ``width`` x ``height``."""

    nodes: tuple[Rect, ...]
    groups: dict[int, Rect]
    routes: tuple[tuple[Point, ...], ...]
    labels: tuple[Point | None, ...]
    width: float
    height: float


def layout(
    sizes: Sequence[tuple[float, float]],
    group_of: Sequence[int | None],
    edges: Sequence[tuple[int, int]],
    *,
    direction: str = "TB",
    group_header: float = 18.0,
    group_min: dict[int, float] | None = None,
    grid: int = 0,
) -> Layout:
    """Lay out nodes (``sizes``: width and height in pixels) in groups (``group_of``: a group
    number or ``None``) with ``edges`` between node positions, from sources to sinks top-down
    (``TB``) or left to right (``LR``). ``grid`` > 0 lays boxes without any edge between
    them out in rows of that many (a picture without edges) instead of one long layer.
    ``group_min`` is the least width of a group's box (its label's), by group number."""
    if direction not in ("TB", "LR"):
        raise ValueError(f"direction must be 'TB' or 'LR', got {direction!r}")
    return _Layout(
        sizes, group_of, edges, direction == "LR", group_header, group_min or {}, grid
    ).run()


class _Layout:
    def __init__(
        self,
        sizes: Sequence[tuple[float, float]],
        group_of: Sequence[int | None],
        edges: Sequence[tuple[int, int]],
        lr: bool,
        header: float,
        group_min: dict[int, float],
        grid: int,
    ) -> None:
        self.n = len(sizes)
        self.lr = lr
        self.grid = grid
        self.group_min = group_min
        # abstract sizes: breadth along a layer, depth across layers
        self.bsize = [h if lr else w for w, h in sizes]
        self.dsize = [w if lr else h for w, h in sizes]
        self.edges = [(s, t) for s, t in edges]
        # Units: one per group, one per node in no group; a group's label sits at its top.
        self.unit_of = [0] * self.n
        self.members: list[list[int]] = []
        self.unit_group: list[int | None] = []
        first: dict[int, int] = {}
        for i, g in enumerate(group_of):
            if g is None:
                self.unit_of[i] = len(self.members)
                self.members.append([i])
                self.unit_group.append(None)
            else:
                u = first.get(g)
                if u is None:
                    u = first[g] = len(self.members)
                    self.members.append([])
                    self.unit_group.append(g)
                self.unit_of[i] = u
                self.members[u].append(i)
        # padding of a grouped unit: (breadth before, breadth after, depth before, after)
        self.pads: list[tuple[float, float, float, float]] = []
        for g in self.unit_group:
            if g is None:
                self.pads.append((0.0, 0.0, 0.0, 0.0))
            elif lr:  # the label is above: before along the breadth (screen y)
                self.pads.append((GROUP_PAD + header, GROUP_PAD, GROUP_PAD, GROUP_PAD))
            else:
                self.pads.append((GROUP_PAD, GROUP_PAD, GROUP_PAD + header, GROUP_PAD))

    # -- 1. inside the units ----------------------------------------------------------------

    def run(self) -> Layout:
        self._inner()
        self._layers()
        self._order()
        self._coordinates()
        return self._result()

    def _inner(self) -> None:
        n = self.n
        self.row = [0] * n  # a node's row inside its unit
        self.ib = [0.0] * n  # its breadth center inside its unit's content
        self.id = [0.0] * n  # its depth top inside its unit's content
        self.row_top = [0.0] * n  # depth of the top and bottom of its row, inside its unit
        self.row_end = [0.0] * n
        preds: list[list[int]] = [[] for _ in range(n)]
        succs: list[list[int]] = [[] for _ in range(n)]
        unit_of = self.unit_of
        for s, t in self.edges:
            if unit_of[s] == unit_of[t] and s != t:
                succs[s].append(t)
                preds[t].append(s)
        self.ubsize: list[float] = []
        self.udsize: list[float] = []
        self.rows_of: list[list[list[int]]] = []
        for u, members in enumerate(self.members):
            if len(members) == 1:
                rows = [members]
                self.row[members[0]] = 0
            else:
                rank = longest_path_ranks(members, preds, succs)
                depth = max(rank.values()) + 1
                rows = [[] for _ in range(depth)]
                for m in members:
                    rows[rank[m]].append(m)
                    self.row[m] = rank[m]
                # one ordering pass down: by the mean position of the inputs in the row above
                position = {m: i for i, m in enumerate(rows[0])}
                for r in range(1, depth):
                    row = rows[r]
                    key = {}
                    for i, m in enumerate(row):
                        above = [position[p] for p in preds[m] if p in position]
                        key[m] = (sum(above) / len(above), i) if above else (float(i), i)
                    row.sort(key=key.__getitem__)
                    position = {m: i for i, m in enumerate(row)}
            self.rows_of.append(rows)
            d = 0.0
            left = right = 0.0
            placed: dict[int, float] = {}
            for r, row in enumerate(rows):
                height = max(self.dsize[m] for m in row)
                sizes = [self.bsize[m] for m in row]
                desired: list[float] = []
                cursor = 0.0
                for m, size in zip(row, sizes, strict=True):
                    over = [placed[p] for p in preds[m] if p in placed]
                    desired.append(sum(over) / len(over) if over else cursor + size / 2)
                    cursor += size + NODE_GAP
                centers = place(desired, sizes, [NODE_GAP] * len(row))
                for m, c in zip(row, centers, strict=True):
                    placed[m] = c
                    self.ib[m] = c
                    self.id[m] = d
                    self.row_top[m] = d
                    self.row_end[m] = d + height
                if r == 0 or centers[0] - sizes[0] / 2 < left:
                    left = centers[0] - sizes[0] / 2
                if r == 0 or centers[-1] + sizes[-1] / 2 > right:
                    right = centers[-1] + sizes[-1] / 2
                d += height + ROW_GAP
            content_d = d - ROW_GAP
            b0, b1, d0, d1 = self.pads[u]
            for m in members:
                self.ib[m] += b0 - left
                self.id[m] += d0
                self.row_top[m] += d0
                self.row_end[m] += d0
            bsize, dsize = right - left + b0 + b1, content_d + d0 + d1
            g = self.unit_group[u]
            least = self.group_min.get(g, 0.0) if g is not None else 0.0
            if self.lr:
                dsize = max(dsize, least)
            elif bsize < least:
                for m in members:
                    self.ib[m] += (least - bsize) / 2
                bsize = least
            self.ubsize.append(bsize)
            self.udsize.append(dsize)

    # -- 2. layers --------------------------------------------------------------------------

    def _layers(self) -> None:
        units = len(self.members)
        unit_of = self.unit_of
        seen: set[tuple[int, int]] = set()
        self.pairs: list[tuple[int, int]] = []  # unit edges, first occurrence order
        for s, t in self.edges:
            us, ut = unit_of[s], unit_of[t]
            if us != ut and (us, ut) not in seen:
                seen.add((us, ut))
                self.pairs.append((us, ut))
        preds: list[list[int]] = [[] for _ in range(units)]
        succs: list[list[int]] = [[] for _ in range(units)]
        for us, ut in self.pairs:
            succs[us].append(ut)
            preds[ut].append(us)
        if not self.pairs and self.grid > 0:
            self.rank = {u: u // self.grid for u in range(units)}
        else:
            self.rank = longest_path_ranks(range(units), preds, succs, pull_sources=True)
        self.layers = max(self.rank.values(), default=-1) + 1
        # Items of a layer: units, then dummies (numbered from ``units`` on).
        self.items: list[list[int]] = [[] for _ in range(self.layers)]
        self.key: list[float] = []
        first_node = [min(m) for m in self.members]
        for u in range(units):
            self.items[self.rank[u]].append(u)
            self.key.append(float(first_node[u]))
        self.item_b = list(self.ubsize)  # breadth size of every item
        self.item_layer = [self.rank[u] for u in range(units)]
        self.path: dict[tuple[int, int], list[int]] = {}  # unit pair -> its dummies
        self.up: list[list[int]] = [[] for _ in range(units)]  # neighbours one layer up
        self.down: list[list[int]] = [[] for _ in range(units)]
        dummies = 0
        for us, ut in self.pairs:
            span = self.rank[ut] - self.rank[us]
            if span < 1:
                continue  # a back edge or one within a layer: drawn straight
            if span > 1 and dummies + span - 1 > MAX_DUMMIES:
                continue
            chain = [us]
            for layer in range(self.rank[us] + 1, self.rank[ut]):
                d = len(self.item_b)
                self.item_b.append(DUMMY_SIZE)
                self.item_layer.append(layer)
                self.key.append(self.key[us] + 0.5)
                self.up.append([])
                self.down.append([])
                self.items[layer].append(d)
                chain.append(d)
                dummies += 1
            chain.append(ut)
            self.path[(us, ut)] = chain[1:-1]
            for a, b in itertools.pairwise(chain):
                self.down[a].append(b)
                self.up[b].append(a)
        self.units = units
        # Port offsets for the coordinates: where along a unit its edge to a neighbour
        # attaches, from the unit's center (dummies: 0).
        self.offset: dict[tuple[int, int], float] = {}
        for s, t in self.edges:
            us, ut = unit_of[s], unit_of[t]
            if us == ut:
                continue
            hops = self.path.get((us, ut))
            if hops is None:
                continue
            first_hop = hops[0] if hops else ut
            last_hop = hops[-1] if hops else us
            self.offset.setdefault((us, first_hop), self.ib[s] - self.ubsize[us] / 2)
            self.offset.setdefault((ut, last_hop), self.ib[t] - self.ubsize[ut] / 2)

    # -- 3. order and coordinates -------------------------------------------------------------

    def _order(self) -> None:
        position = [0.0] * len(self.item_b)
        for layer in self.items:
            layer.sort(key=self.key.__getitem__)
            for i, item in enumerate(layer):
                position[item] = float(i)
        for layer, near in self._sweeps(ORDER_SWEEPS):
            bary = {}
            for item in layer:
                ns = near[item]
                value = sum(position[x] for x in ns) / len(ns) if ns else position[item]
                bary[item] = (value, position[item])
            layer.sort(key=bary.__getitem__)
            for i, item in enumerate(layer):
                position[item] = float(i)

    def _sweeps(self, passes: int) -> Iterator[tuple[list[int], list[list[int]]]]:
        """Layers in alternate sweeps, down from the second then up from the last but one,
        each with the neighbours it is set against (the layer above, then the one below)."""
        for sweep in range(passes):
            downward = sweep % 2 == 0
            order = range(1, self.layers) if downward else range(self.layers - 2, -1, -1)
            near = self.up if downward else self.down
            for layer_index in order:
                yield self.items[layer_index], near

    def _coordinates(self) -> None:
        center = [0.0] * len(self.item_b)
        for layer in self.items:
            cursor = 0.0
            for item in layer:
                center[item] = cursor + self.item_b[item] / 2
                cursor += self.item_b[item] + self._gap(item)
        offset = self.offset
        for layer, near in self._sweeps(COORDINATE_PASSES):
            if not layer:
                continue
            desired = []
            for item in layer:
                ns = near[item]
                if not ns:
                    desired.append(center[item])
                    continue
                total = 0.0
                for x in ns:
                    total += center[x] + offset.get((x, item), 0.0) - offset.get((item, x), 0.0)
                desired.append(total / len(ns))
            sizes = [self.item_b[item] for item in layer]
            gaps = [max(self._gap(a), self._gap(b)) for a, b in itertools.pairwise(layer)]
            for item, c in zip(layer, place(desired, sizes, gaps), strict=True):
                center[item] = c
        left = min(
            (center[item] - self.item_b[item] / 2 for layer in self.items for item in layer),
            default=0.0,
        )
        self.center = [c - left for c in center]
        # depth of each layer
        self.top = [0.0] * self.layers
        self.bottom = [0.0] * self.layers
        d = 0.0
        for layer_index, layer in enumerate(self.items):
            depth = max((self.udsize[i] for i in layer if i < self.units), default=0.0)
            self.top[layer_index] = d
            self.bottom[layer_index] = d + depth
            d += depth + LAYER_GAP
        self.total_d = max(d - LAYER_GAP, 0.0)

    def _gap(self, item: int) -> float:
        return BOX_GAP if item < self.units else DUMMY_GAP

    # -- 4. positions and routes ----------------------------------------------------------------

    def _result(self) -> Layout:
        n = self.n
        ub_left = [self.center[u] - self.ubsize[u] / 2 for u in range(self.units)]
        ud_top = [self.top[self.rank[u]] for u in range(self.units)]
        nb = [0.0] * n  # node breadth center
        nd = [0.0] * n  # node depth top
        for i in range(n):
            u = self.unit_of[i]
            nb[i] = ub_left[u] + self.ib[i]
            nd[i] = ud_top[u] + self.id[i]
        blocked_below, blocked_above = self._blocked(nb)
        lr = self.lr

        def point(b: float, d: float) -> Point:
            return (round(d, 1), round(b, 1)) if lr else (round(b, 1), round(d, 1))

        rects = []
        for i in range(n):
            b0, d0 = nb[i] - self.bsize[i] / 2, nd[i]
            if lr:
                rects.append(Rect(round(d0, 1), round(b0, 1), self.dsize[i], self.bsize[i]))
            else:
                rects.append(Rect(round(b0, 1), round(d0, 1), self.bsize[i], self.dsize[i]))
        groups = {}
        for u in range(self.units):
            g = self.unit_group[u]
            if g is None:
                continue
            b0, d0, bs, ds = ub_left[u], ud_top[u], self.ubsize[u], self.udsize[u]
            groups[g] = Rect(d0, b0, ds, bs) if lr else Rect(b0, d0, bs, ds)
        # Ports: edges leaving (entering) one node spread along its bottom (top), ordered by
        # where they go (come from).
        out_edges: dict[int, list[int]] = {}
        in_edges: dict[int, list[int]] = {}
        for e, (s, t) in enumerate(self.edges):
            if self.unit_of[s] != self.unit_of[t]:
                out_edges.setdefault(s, []).append(e)
                in_edges.setdefault(t, []).append(e)
        port_out = [0.0] * len(self.edges)
        port_in = [0.0] * len(self.edges)
        for ports, table, far in ((port_out, out_edges, 1), (port_in, in_edges, 0)):
            for node, es in table.items():
                if len(es) < 2:
                    continue
                es[:] = [e for _, e in sorted((nb[self.edges[e][far]], e) for e in es)]
                span = self.bsize[node] * 0.6
                for k, e in enumerate(es):
                    ports[e] = span * ((k + 1) / (len(es) + 1) - 0.5)
        routes = []
        used: dict[tuple[int, bool], int] = {}  # edges already in a box's margin, by side
        labels: list[Point | None] = []
        for e, (s, t) in enumerate(self.edges):
            us, ut = self.unit_of[s], self.unit_of[t]
            s_bottom = nd[s] + self.dsize[s]
            if us == ut or (us, ut) not in self.path:
                pts = [(nb[s], s_bottom), (nb[t], nd[t])]
                if s == t:
                    pts = []
                routes.append(tuple(point(b, d) for b, d in pts))
                if us == ut or len(pts) < 2:
                    labels.append(None)
                else:
                    labels.append(point((pts[0][0] + pts[1][0]) / 2, (pts[0][1] + pts[1][1]) / 2))
                continue
            rs, rt = self.rank[us], self.rank[ut]
            pts = []
            b = nb[s] + port_out[e]
            if blocked_below[s]:
                # down into the gap under its row, along it to the box's margin, down that
                gap = ud_top[us] + self.row_end[s] + ROW_GAP / 2
                gutter = self._gutter(us, ub_left[us], nb[s], used)
                pts += [(b, s_bottom), (b, gap), (gutter, gap), (gutter, self.bottom[rs])]
            else:
                pts += [(b, s_bottom), (b, self.bottom[rs])]
            exit_index = len(pts) - 1
            for d in self.path[(us, ut)]:
                layer = self.item_layer[d]
                pts += [(self.center[d], self.top[layer]), (self.center[d], self.bottom[layer])]
            b = nb[t] + port_in[e]
            if blocked_above[t]:
                gap = ud_top[ut] + self.row_top[t] - ROW_GAP / 2
                gutter = self._gutter(ut, ub_left[ut], nb[t], used)
                pts += [(gutter, self.top[rt]), (gutter, gap), (b, gap), (b, nd[t])]
            else:
                pts += [(b, self.top[rt]), (b, nd[t])]
            a, z = pts[exit_index], pts[exit_index + 1]
            labels.append(point((a[0] + z[0]) / 2, (a[1] + z[1]) / 2))
            routes.append(_dedupe(tuple(point(b, d) for b, d in pts)))
        breadth = max(
            (self.center[i] + self.item_b[i] / 2 for lay in self.items for i in lay), default=0.0
        )
        width, height = (self.total_d, breadth) if lr else (breadth, self.total_d)
        return Layout(tuple(rects), groups, tuple(routes), tuple(labels), width, height)

    def _gutter(self, unit: int, left: float, b: float, used: dict[tuple[int, bool], int]) -> float:
        """A line in the margin of a group's box, on the side nearer to ``b``; successive
        edges on one side are drawn a little apart."""
        right = b >= left + self.ubsize[unit] / 2
        k = used.get((unit, right), 0)
        used[(unit, right)] = k + 1
        inset = GROUP_PAD / 2 - 3.0 + 3.0 * (k % 3)
        return left + self.ubsize[unit] - inset if right else left + inset

    def _blocked(self, nb: Sequence[float]) -> tuple[list[bool], list[bool]]:
        """Per node: whether another member of its group sits below (above) it, overlapping
        its breadth, so an edge leaving (entering) straight would cut through it."""
        below = [False] * self.n
        above = [False] * self.n
        for rows in self.rows_of:
            if len(rows) < 2:
                continue
            for flags, sequence in ((below, rows[::-1]), (above, rows)):
                union: list[tuple[float, float]] = []
                for row in sequence:
                    for m in row:
                        lo, hi = nb[m] - self.bsize[m] / 2, nb[m] + self.bsize[m] / 2
                        flags[m] = overlaps(union, lo, hi)
                    union = merge_intervals(
                        union,
                        [(nb[m] - self.bsize[m] / 2, nb[m] + self.bsize[m] / 2) for m in row],
                    )
        return below, above


def _dedupe(points: tuple[Point, ...]) -> tuple[Point, ...]:
    out: list[Point] = []
    for p in points:
        if not out or out[-1] != p:
            out.append(p)
    return tuple(out)
