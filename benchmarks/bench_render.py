"""Render figures: the time to draw a topology (SVG with our own layout, Mermaid text) and a
diff, for 100, 1,000 and 10,000 operators.

``python benchmarks/run.py render`` (or ``python benchmarks/bench_render.py [sizes...]``).

Topologies are :func:`bench_core.random_topology` (seeded, shaped like real jobs). Each size is
drawn as the CLI draws it by default (at most 500 nodes: larger topologies fold their chains
and cap the rest, saying so in the picture) and in full (``max_nodes=None``,
``collapse=False``: every operator laid out). The diff changes one operator's uid in the
middle of the job; by default it shows that change's neighbourhood. Times are the best of a
few runs.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from pytest_opid import Comparison, Fingerprint, compare, compute  # noqa: E402
from pytest_opid.model import Topology  # noqa: E402
from pytest_opid.render.picture import render_diff, render_fingerprint  # noqa: E402

SIZES = (100, 1_000, 10_000)


def _random_topology(size: int) -> Topology:
    spec = importlib.util.spec_from_file_location("bench_core", HERE / "bench_core.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.random_topology(size)


def _changed(topology: Topology) -> Topology:
    """The same job with one operator in the middle given a new uid (its ID changes)."""
    ops = list(topology.operators)
    middle = len(ops) // 2
    ops[middle] = replace(ops[middle], uid="bench-changed-uid")
    return Topology(
        ops,
        topology.edges,
        topology.chaining_enabled,
        topology.chain_different_max_parallelism,
        topology.runtime_mode,
    )


def best(runs: int, fn: Callable[[], str]) -> tuple[float, int]:
    times = []
    size = 0
    for _ in range(runs):
        start = time.perf_counter()
        size = len(fn())
        times.append(time.perf_counter() - start)
    return min(times), size


def main(sizes: tuple[int, ...] = SIZES) -> None:
    print(f"{'operators':>9}  {'picture':<28} {'seconds':>8}  {'output':>10}")
    for size in sizes:
        topology = _random_topology(size)
        fp = compute(topology)
        comparison = compare(fp, compute(_changed(topology)))
        runs = 3 if size <= 1_000 else 1
        for label, fn in _cases(fp, comparison):
            seconds, length = best(runs, fn)
            print(f"{size:>9,}  {label:<28} {seconds:>8.3f}  {length / 1024:>8.0f} KiB", flush=True)


def _cases(fp: Fingerprint, comparison: Comparison) -> list[tuple[str, Callable[[], str]]]:
    return [
        ("svg (default: cap 500)", lambda: render_fingerprint(fp, "svg")),
        (
            "svg (every operator)",
            lambda: render_fingerprint(fp, "svg", max_nodes=None, collapse=False),
        ),
        ("mermaid (default)", lambda: render_fingerprint(fp, "mermaid")),
        (
            "mermaid (every operator)",
            lambda: render_fingerprint(fp, "mermaid", max_nodes=None, collapse=False),
        ),
        ("diff svg (default)", lambda: render_diff(comparison, "svg")),
        (
            "diff svg (whole job)",
            lambda: render_diff(comparison, "svg", hops=10**9, max_nodes=None, collapse=False),
        ),
    ]


if __name__ == "__main__":
    main(tuple(int(a) for a in sys.argv[1:]) or SIZES)
