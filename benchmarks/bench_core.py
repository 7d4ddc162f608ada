"""Core figures: fingerprint time and memory on random topologies, document loading, and how
often a Flink execution plan alone reproduces Flink's IDs.

``python benchmarks/run.py core`` (or ``python benchmarks/bench_core.py [sizes...]``).

Topologies are random but seeded and shaped like real jobs: mostly chains of one-input
operators, with key_by shuffles, parallelism changes behind rebalances, fan-outs, unions,
two-input operators, sinks, uids on some operators and the odd slot sharing group or disabled
chain. Timing and peak memory (tracemalloc) are measured in separate passes, because tracing
allocations slows Python down several times.
"""

from __future__ import annotations

import gc
import json
import random
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from pytest_opid import compute  # noqa: E402
from pytest_opid.flink.document import (  # noqa: E402
    dump_document,
    load_document,
    topology_from_document,
)
from pytest_opid.flink.plan import load_plan  # noqa: E402
from pytest_opid.io.json import parse_json  # noqa: E402
from pytest_opid.model import (  # noqa: E402
    ChainingStrategy,
    Edge,
    Operator,
    Partitioner,
    SourceKind,
    Topology,
)

SIZES = (1_000, 10_000, 100_000, 1_000_000)
CASES = HERE.parent / "tests" / "data" / "cases.jsonl"


def random_topology(size: int, seed: int = 0) -> Topology:
    """A seeded random job of ``size`` operators (see the module docstring for the mix)."""
    rng = random.Random(seed)
    choice, rand = rng.choice, rng.random
    operators: list[Operator] = []
    edges: list[Edge] = []
    parallelism: list[int] = []
    open_streams: list[int] = []  # operators that may still get consumers (recent ones)

    def add(name: str, p: int, **kw) -> int:
        node = len(operators)
        uid = f"{name.lower()}-{node}" if rand() < 0.1 else None
        strategy = kw.pop("chaining_strategy", ChainingStrategy.ALWAYS)
        if strategy is ChainingStrategy.ALWAYS and rand() < 0.02:
            strategy = ChainingStrategy.NEVER
        group = "heavy" if rand() < 0.02 else "default"
        operators.append(
            Operator(
                node, name, p, slot_sharing_group=group, uid=uid, chaining_strategy=strategy, **kw
            )
        )
        parallelism.append(p)
        return node

    def source() -> int:
        node = add("Source: Kafka", choice((1, 2, 4)), source=SourceKind.NEW)
        open_streams.append(node)
        return node

    def upstream() -> int:
        # Mostly the newest stream (long chains), sometimes an older one (fan-out).
        if rand() < 0.8:
            return open_streams[-1]
        return choice(open_streams[-50:])

    source()
    while len(operators) < size:
        r = rand()
        if r < 0.01 or not open_streams:
            source()
            continue
        up = upstream()
        if r < 0.60:  # chain
            node = add(choice(("Map", "Filter", "Flat Map", "Process")), parallelism[up])
            edges.append(Edge(up, node, Partitioner.FORWARD))
        elif r < 0.75:  # key_by + keyed operator
            node = add("Keyed Reduce", choice((2, 4, 8)))
            edges.append(Edge(up, node, Partitioner.HASH))
        elif r < 0.82:  # parallelism change
            p = choice((1, 2, 4, 8))
            node = add("Map", p)
            edges.append(
                Edge(
                    up, node, Partitioner.REBALANCE if p != parallelism[up] else Partitioner.FORWARD
                )
            )
        elif r < 0.88:  # union of two or three streams
            ups = {up, *(choice(open_streams[-50:]) for _ in range(rng.randint(1, 2)))}
            p = parallelism[up]
            node = add("Union Map", p)
            for u in sorted(ups):
                edges.append(
                    Edge(
                        u,
                        node,
                        Partitioner.FORWARD if parallelism[u] == p else Partitioner.REBALANCE,
                    )
                )
        elif r < 0.92:  # two-input operator
            other = choice(open_streams[-50:])
            node = add("Co-Process", parallelism[up])
            edges.append(Edge(up, node, Partitioner.HASH, 1))
            edges.append(Edge(other, node, Partitioner.HASH, 2))
        else:  # sink: closes the stream
            node = add("Sink: Writer", parallelism[up], yielding=True)
            edges.append(Edge(up, node, Partitioner.FORWARD))
            if up in open_streams[-50:] and len(open_streams) > 1:
                open_streams.remove(up)
            continue
        open_streams.append(node)
        if len(open_streams) > 200:
            del open_streams[:100]
    return Topology(operators, edges)


def best_of(runs: int, fn: Callable[[], object]) -> tuple[float, float]:
    """The fastest of ``runs`` calls: (wall seconds, CPU seconds of this process). CPU time is
    the fairer figure on a machine shared with other jobs; wall time is what a user waits."""
    wall = cpu = float("inf")
    for _ in range(runs):
        gc.collect()
        start, start_cpu = time.perf_counter(), time.process_time()
        result = fn()
        wall = min(wall, time.perf_counter() - start)
        cpu = min(cpu, time.process_time() - start_cpu)
        del result  # freeing the result is not part of computing it
    return wall, cpu


def peak_memory(fn: Callable[[], object]) -> int:
    """Peak bytes allocated while ``fn`` runs (tracemalloc), the result included."""
    gc.collect()
    tracemalloc.start()
    try:
        result = fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del result
    return peak


def fresh(topology: Topology) -> Topology:
    """The same topology without its cached adjacency, so a timing includes building it."""
    return Topology(
        topology.operators,
        topology.edges,
        topology.chaining_enabled,
        topology.chain_different_max_parallelism,
    )


def bench_fingerprint(sizes=SIZES) -> list[dict]:
    return [_fingerprint_row(size) for size in sizes]


def _fingerprint_row(size: int) -> dict:
    topology = random_topology(size, seed=size)
    runs = 3 if size <= 100_000 else 2
    # compute() only: a Topology caches its adjacency after the first use, so every run gets a
    # fresh, validated copy; building such a copy is timed on its own ("build").
    copies = [fresh(topology) for _ in range(runs)]
    build, _ = best_of(runs, lambda: fresh(topology))
    seconds, cpu = best_of(runs, lambda: compute(copies.pop()))
    peak = peak_memory(lambda: compute(fresh(topology)))
    return {
        "operators": size,
        "edges": len(topology.edges),
        "job_vertices": len(compute(topology).job_vertices),
        "build_ms": build * 1000,
        "fingerprint_ms": seconds * 1000,
        "fingerprint_cpu_ms": cpu * 1000,
        "nodes_per_s": size / seconds,
        "peak_mib": peak / 2**20,
    }


def bench_documents(sizes=SIZES[:3]) -> list[dict]:
    return [_document_row(size) for size in sizes]


def _document_row(size: int) -> dict:
    """``load_document`` of a file (the fast path), next to ``json.loads`` of its text and to
    the precise path (strict ``parse_json`` + ``topology_from_document``), which reads what
    the fast path declines."""
    text = json.dumps(dump_document(random_topology(size, seed=size)))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "topology.json"
        path.write_text(text, encoding="utf-8")
        load, cpu = best_of(3, lambda: load_document(path))
    precise, _ = best_of(3, lambda: topology_from_document(parse_json(text, "text")))
    plain, _ = best_of(3, lambda: json.loads(text))
    return {
        "operators": size,
        "json_mib": len(text) / 2**20,
        "load_ms": load * 1000,
        "load_cpu_ms": cpu * 1000,
        "precise_ms": precise * 1000,
        "json_loads_ms": plain * 1000,
        "nodes_per_s": size / load,
    }


def plan_import_rates(path: Path = CASES) -> dict:
    """How often ``load_plan`` reproduces all of a golden case's OperatorIDs / its job
    vertices, from the plan alone, with the uids and uid hashes, and with every node
    attribute the plan lacks (which leaves only the output order to the import)."""
    cases = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    cases = [c for c in cases if c["flink_plan"] is not None]
    levels = ("plan only", "plus uids", "plus all node attributes")
    ids = dict.fromkeys(levels, 0)
    vertices = dict.fromkeys(levels, 0)
    for case in cases:
        for level, options in zip(levels, plan_options(case), strict=True):
            fp = compute(load_plan(case["flink_plan"], **options))
            expected = case["expected"]
            ids[level] += all(
                op.operator_id == expected["operator_ids"][str(op.node)] for op in fp.operators
            )
            # The saved form's vertices also hold nodes and max parallelism: compare the keys
            # the golden cases record.
            golden_keys = ("id", "name", "parallelism", "operators")
            vertices[level] += [
                {k: v[k] for k in golden_keys} for v in fp.to_dict()["job_vertices"]
            ] == expected["job_vertices"]
    streaming = sum(c["case"]["runtime_mode"] == "STREAMING" for c in cases)
    return {"cases": len(cases), "streaming": streaming, "ids": ids, "job_vertices": vertices}


def plan_options(case: dict) -> list[dict]:
    """Keyword arguments of ``load_plan`` for the three levels of ``plan_import_rates``."""
    topology = case["topology"]
    nodes = topology["nodes"]
    uids = {
        "uids": {n["id"]: n["uid"] for n in nodes if n["uid"] is not None},
        "uid_hashes": {n["id"]: n["uid_hash"] for n in nodes if n["uid_hash"] is not None},
    }
    everything = {
        **uids,
        "chaining_strategies": {n["id"]: n["chaining_strategy"] for n in nodes},
        "slot_sharing_groups": {n["id"]: n["slot_sharing_group"] for n in nodes},
        "max_parallelisms": {n["id"]: n["max_parallelism"] for n in nodes},
        "source_kinds": {n["id"]: n["source"] for n in nodes},
        "chaining_enabled": topology["chaining_enabled"],
        "chain_different_max_parallelism": topology["chain_different_max_parallelism"],
    }
    return [{}, uids, everything]


def main(argv: list[str] | None = None) -> None:
    sizes = tuple(int(a) for a in (argv or [])) or SIZES
    print("fingerprint of random topologies (compute: chaining rule + OperatorIDs + chains)")
    print(
        f"{'operators':>10} {'edges':>10} {'vertices':>9} {'build ms':>9} "
        f"{'fingerprint ms':>15} {'(cpu ms)':>9} {'nodes/s':>10} {'peak MiB':>9}"
    )
    for row in map(_fingerprint_row, sizes):
        print(
            f"{row['operators']:>10,} {row['edges']:>10,} {row['job_vertices']:>9,} "
            f"{row['build_ms']:>9.0f} {row['fingerprint_ms']:>15.0f} "
            f"{row['fingerprint_cpu_ms']:>9.0f} "
            f"{row['nodes_per_s']:>10,.0f} {row['peak_mib']:>9.1f}",
            flush=True,
        )
    print()
    print(
        "loading a topology document file (load_document), next to the precise path and to "
        "json.loads of the text"
    )
    print(
        f"{'operators':>10} {'JSON MiB':>9} {'load ms':>9} {'(cpu ms)':>9} {'nodes/s':>10} "
        f"{'precise ms':>11} {'json.loads ms':>14}"
    )
    for row in map(_document_row, [s for s in sizes if s <= 100_000]):
        print(
            f"{row['operators']:>10,} {row['json_mib']:>9.1f} {row['load_ms']:>9.0f} "
            f"{row['load_cpu_ms']:>9.0f} "
            f"{row['nodes_per_s']:>10,.0f} {row['precise_ms']:>11.0f} "
            f"{row['json_loads_ms']:>14.0f}",
            flush=True,
        )
    print()
    rates = plan_import_rates()
    print(
        f"Flink plan import on {rates['cases']} golden cases with a plan "
        f"({rates['streaming']} STREAMING): all OperatorIDs / all job vertices reproduced"
    )
    for level in rates["ids"]:
        ids, vertices = rates["ids"][level], rates["job_vertices"][level]
        print(
            f"  {level:<26} IDs {ids:>3} ({ids / rates['cases']:.1%})   "
            f"job vertices {vertices:>3} ({vertices / rates['cases']:.1%})"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
