"""The arithmetic of a layered layout, apart from any picture: ranks by longest path (cycles
broken where Kahn's walk gets stuck), positions along a layer closest to the wanted ones (least
squares, by pool-adjacent-violators), and unions of intervals (what a box's members cover).
Each is a plain loop over plain numbers, so :mod:`pytest_opid.render.graph` reads as its steps.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

__all__ = ["longest_path_ranks", "merge_intervals", "overlaps", "place"]


def longest_path_ranks(
    nodes: Sequence[int] | range,
    preds: Sequence[Sequence[int]],
    succs: Sequence[Sequence[int]],
    pull_sources: bool = False,
) -> dict[int, int]:
    """Longest-path ranks by Kahn's walk; where a cycle stops it, the waiting node listed
    first goes next as if its remaining inputs were done. ``pull_sources`` moves a source
    down to just above its nearest consumer."""
    members = set(nodes)
    order = list(nodes)
    waiting = {m: sum(1 for p in preds[m] if p in members and p != m) for m in order}
    rank = dict.fromkeys(order, 0)
    ready = [m for m in reversed(order) if waiting[m] == 0]
    done: set[int] = set()
    sequence = []
    cursor = 0
    while len(done) < len(order):
        if not ready:
            while order[cursor] in done:
                cursor += 1
            ready.append(order[cursor])
        m = ready.pop()
        if m in done:
            continue
        done.add(m)
        sequence.append(m)
        for t in succs[m]:
            if t not in members or t in done or t == m:
                continue
            if rank[t] < rank[m] + 1:
                rank[t] = rank[m] + 1
            waiting[t] -= 1
            if waiting[t] == 0:
                ready.append(t)
    if pull_sources:
        for m in reversed(sequence):
            if any(p in members and p != m for p in preds[m]):
                continue
            below = [rank[t] for t in succs[m] if t in members and t != m]
            if below:
                rank[m] = max(rank[m], min(below) - 1)
    return rank


def place(desired: Sequence[float], sizes: Sequence[float], gaps: Sequence[float]) -> list[float]:
    """Centers in the given order, no two closer than half their sizes plus the gap between
    them, as close as possible (least squares) to ``desired``: isotonic regression of the
    desired positions less the minimal offsets, by pool-adjacent-violators."""
    count = len(desired)
    offsets = [0.0] * count
    for i in range(1, count):
        offsets[i] = offsets[i - 1] + sizes[i - 1] / 2 + gaps[i - 1] + sizes[i] / 2
    blocks: list[list[float]] = []  # [sum, count]
    for i in range(count):
        blocks.append([desired[i] - offsets[i], 1.0])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            total, n = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += n
    out = []
    i = 0
    for total, n in blocks:
        value = total / n
        for _ in range(int(n)):
            out.append(value + offsets[i])
            i += 1
    return out


def overlaps(union: list[tuple[float, float]], lo: float, hi: float) -> bool:
    """Whether [lo, hi] overlaps a sorted list of disjoint intervals (by more than a pixel)."""
    k = bisect_left(union, (lo, lo))
    for j in (k - 1, k):
        if 0 <= j < len(union) and union[j][0] < hi - 1 and union[j][1] > lo + 1:
            return True
    return False


def merge_intervals(
    union: list[tuple[float, float]], more: list[tuple[float, float]]
) -> list[tuple[float, float]]:
    """The union of ``union`` (sorted, disjoint) and ``more``, sorted and disjoint again."""
    merged: list[tuple[float, float]] = []
    for lo, hi in sorted(union + more):
        if merged and lo <= merged[-1][1]:
            if hi > merged[-1][1]:
                merged[-1] = (merged[-1][0], hi)
        else:
            merged.append((lo, hi))
    return merged
