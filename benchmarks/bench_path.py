"""The whole path, from a document on disk to a fingerprint's JSON, step by step, next to a plain
reading of the same work.

``python benchmarks/run.py path`` (or ``python benchmarks/bench_path.py [--docs] [--no-1m]``).

The program is the golden 9,820-operator Flink job (``tests/data/large_10k.jsonl.gz``) ten times
over, 98,200 operators: the IDs and chains of real Flink output, at the scale of the largest
jobs. Each step is timed (best of 3, garbage collector on, as in a user's process) next to a
*reference reading*: the least plain Python that does the same work without our checks and
types.

* read: the file to a validated ``Topology`` (``load_document``), next to ``json.loads``; and
  the same document already parsed (a dict, as a program builds it), next to the plain
  script's own reading of the graph (nodes by id, edges by end);
* IDs + chains: ``compute``, next to a plain ``StreamGraphHasherV2`` over the parsed dict (IDs
  only, no chains; its IDs are checked equal to ours, so the reference is also a cross-check);
* JSON: ``Fingerprint.to_json``, next to ``json.dumps`` of a plain list of the same operators;
* whole: file (or dict) to JSON text, next to the references in a row.

The ratio (ours / reference) is the figure to watch: the machine's speed changes from day to
day, the ratio much less. Peak memory is tracemalloc's, in a separate run. Last, ``opid
fingerprint --json`` of a seeded 1,000,000-operator pipeline runs as a command, with its wall
time and the process's peak RSS, next to a process that only does ``json.loads`` and
``json.dumps`` of the same file.

``--docs`` rewrites the table between ``<!-- bench:path -->`` markers in docs/benchmarks.md.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mmh3

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from bench_core import best_of, peak_memory  # noqa: E402  (the core benchmark's measuring)

from pytest_opid.flink.compute import compute  # noqa: E402
from pytest_opid.flink.document import load_document  # noqa: E402

LARGE = ROOT / "tests" / "data" / "large_10k.jsonl.gz"
COPIES = 10
MARKERS = ("<!-- bench:path -->", "<!-- /bench:path -->")


def big_document(copies: int = COPIES) -> dict[str, Any]:
    """The golden 9,820-operator document, ``copies`` times, ids shifted and uids suffixed."""
    with gzip.open(LARGE, "rt", encoding="utf-8") as f:
        doc = json.loads(f.readline())["topology"]
    span = max(n["id"] for n in doc["nodes"]) + 1
    nodes, edges = [], []
    for k in range(copies):
        for n in doc["nodes"]:
            nodes.append({**n, "id": n["id"] + k * span, "uid": n["uid"] and f"{n['uid']}-{k}"})
        for e in doc["edges"]:
            edges.append({**e, "source": e["source"] + k * span, "target": e["target"] + k * span})
    rest = {key: value for key, value in doc.items() if key not in ("nodes", "edges")}
    return {**rest, "nodes": nodes, "edges": edges}


# -- the reference reading ---------------------------------------------------------------------


def plain_graph(doc: dict[str, Any]) -> tuple[dict[int, dict], dict[int, list], dict[int, list]]:
    """The graph a plain script reads from a parsed document before hashing: nodes by id, each
    node's out edges and input ids. The reference for reading a document given as a dict."""
    nodes = {n["id"]: n for n in doc["nodes"]}
    outs: dict[int, list[dict]] = {i: [] for i in nodes}
    ins: dict[int, list[int]] = {i: [] for i in nodes}
    for e in doc["edges"]:
        outs[e["source"]].append(e)
        ins[e["target"]].append(e["source"])
    return nodes, outs, ins


def plain_ids(doc: dict[str, Any]) -> dict[int, str]:
    """OperatorIDs the plain way: Flink's rule and walk over the parsed dict, nothing checked.

    This is what a careful script would do: chainability per edge (one input, forward, same
    slot sharing group and parallelism, strategies), then the breadth-first walk with the
    counter, the chained outputs and the inputs folded in."""
    nodes, outs, ins = plain_graph(doc)

    def chainable(e: dict) -> bool:
        up, down = nodes[e["source"]], nodes[e["target"]]
        if not doc.get("chaining_enabled", True) or len(ins[e["target"]]) != 1:
            return False
        if e.get("partitioner", "FORWARD") != "FORWARD" or e.get("exchange_mode") == "BATCH":
            return False
        if up.get("slot_sharing_group") != down.get("slot_sharing_group"):
            return False
        if up.get("parallelism") != down.get("parallelism"):
            return False
        if not doc.get("chain_different_max_parallelism", True) and up.get(
            "max_parallelism"
        ) != down.get("max_parallelism"):
            return False
        a, b = up.get("chaining_strategy", "ALWAYS"), down.get("chaining_strategy", "ALWAYS")
        if a is None or b is None or a == "NEVER":
            return False
        return b == "ALWAYS" or (b == "HEAD_WITH_SOURCES" and up.get("source") == "new")

    hashes: dict[int, bytes] = {}
    queue = deque(sorted(i for i in nodes if not ins[i]))
    visited = set(queue)
    while queue:
        node = queue.popleft()
        n = nodes[node]
        if n.get("uid") is not None:
            h = mmh3.hash_bytes(n["uid"].encode(), 0)
        elif any(i not in hashes for i in ins[node]):
            visited.discard(node)
            continue
        else:
            counter = len(hashes).to_bytes(4, "little", signed=True)
            h = mmh3.hash_bytes(counter * (1 + sum(map(chainable, outs[node]))), 0)
            for i in ins[node]:
                h = bytes(((b * 37) & 0xFF) ^ x for b, x in zip(h, hashes[i], strict=True))
        hashes[node] = h
        for e in outs[node]:
            if e["target"] not in visited:
                visited.add(e["target"])
                queue.append(e["target"])
    return {i: h.hex() for i, h in hashes.items()}


def plain_json(doc: dict[str, Any], ids: dict[int, str]) -> str:
    return json.dumps(
        [{"node": n["id"], "name": n["name"], "id": ids[n["id"]]} for n in doc["nodes"]]
    )


def plain_whole(path: str) -> str:
    with open(path, "rb") as f:
        doc = json.loads(f.read())
    return plain_json(doc, plain_ids(doc))


# -- measuring ---------------------------------------------------------------------------------


def best(fn: Callable[[], object], runs: int = 3) -> float:
    """The fastest of ``runs`` calls, in wall seconds (``bench_core.best_of``)."""
    return best_of(runs, fn)[0]


def peak_mib(fn: Callable[[], object]) -> float:
    return peak_memory(fn) / 2**20


def ours_whole(source: str | dict[str, Any]) -> str:
    return compute(load_document(source)).to_json()


def plain_dict(doc: dict[str, Any]) -> str:
    return plain_json(doc, plain_ids(doc))


def run_with_rss(args: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB) of a fresh Python process running the script ``args[0]``;
    the peak is the child's own, as ``wait4`` reports it."""
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, *args], stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{args[0]} exited with {child.returncode}")
    return wall, usage.ru_maxrss / 1024


def million(tmp: Path) -> dict[str, float]:
    """``opid fingerprint --json`` of a seeded 1,000,000-operator pipeline, as a command.

    Runs first, and the document is written by a process of its own: a child's peak RSS, as
    Linux keeps it, starts from what its parent held when it forked."""
    path = tmp / "million.json"
    write = tmp / "write_million.py"
    write.write_text(
        "import json, sys\n"
        f"sys.path.insert(0, {str(HERE)!r})\n"
        "from bench_core import random_topology  # the core benchmark's seeded jobs\n"
        "from pytest_opid.flink.document import dump_document\n"
        f"with open({str(path)!r}, 'w', encoding='utf-8') as f:\n"
        "    json.dump(dump_document(random_topology(1_000_000, seed=1_000_000)), f)\n",
        encoding="utf-8",
    )
    subprocess.run([sys.executable, str(write)], check=True)
    cli = tmp / "opid_json.py"
    cli.write_text(
        # What the installed `opid` command runs (pytest_opid.cli:run).
        "import sys\nfrom pytest_opid.cli import run\n"
        f"sys.argv = ['opid', 'fingerprint', {str(path)!r}, '--json']\nrun()\n",
        encoding="utf-8",
    )
    plain = tmp / "plain_json.py"
    plain.write_text(
        "import json, sys\n"
        f"doc = json.loads(open({str(path)!r}, 'rb').read())\n"
        "sys.stdout.write(json.dumps(doc))\n",
        encoding="utf-8",
    )
    ours = min((run_with_rss([str(cli)]) for _ in range(2)), key=lambda r: r[0])
    reference = min((run_with_rss([str(plain)]) for _ in range(2)), key=lambda r: r[0])
    return {
        "mib": path.stat().st_size / 2**20,
        "ours_s": ours[0],
        "ours_rss": ours[1],
        "ref_s": reference[0],
        "ref_rss": reference[1],
    }


def main(argv: list[str] | None = None) -> None:
    argv = list(argv or [])
    with tempfile.TemporaryDirectory() as tmp:
        big = None if "--no-1m" in argv else million(Path(tmp))
        doc = big_document()
        operators = len(doc["nodes"])
        path = os.path.join(tmp, "program.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(doc, f)
        size = os.path.getsize(path) / 2**20
        with open(path, "rb") as f:
            raw = f.read()

        topology = load_document(path)
        fp = compute(topology)
        parsed = json.loads(raw)
        reference_ids = plain_ids(parsed)
        mismatches = sum(reference_ids[op.node] != op.operator_id for op in fp.operators)
        assert mismatches == 0, f"the reference hasher disagrees on {mismatches} operators"

        rows = [
            ("read: file -> Topology", lambda: load_document(path), lambda: json.loads(raw)),
            ("read: dict -> Topology", lambda: load_document(parsed), lambda: plain_graph(parsed)),
            ("IDs + chains", lambda: compute(topology), lambda: plain_ids(parsed)),
            ("JSON text", fp.to_json, lambda: plain_json(parsed, reference_ids)),
            ("whole: dict -> JSON text", lambda: ours_whole(parsed), lambda: plain_dict(parsed)),
            ("whole: file -> JSON text", lambda: ours_whole(path), lambda: plain_whole(path)),
        ]
        print(
            f"{operators:,} operators, {len(doc['edges']):,} edges, "
            f"{len(fp.job_vertices):,} job vertices; document {size:.1f} MiB"
        )
        print(f"  {'step':<26} {'ours':>9} {'reference':>10} {'ratio':>6} {'peak MiB':>9}")
        results = []
        for label, ours, reference in rows:
            mine, theirs = best(ours), best(reference)
            peak = peak_mib(ours)
            results.append((label, mine, theirs, peak))
            print(
                f"  {label:<26} {mine * 1000:7.0f} ms {theirs * 1000:8.0f} ms "
                f"{mine / theirs:6.2f} {peak:9.0f}",
                flush=True,
            )
        small = os.path.join(tmp, "golden.json")
        with open(small, "w", encoding="utf-8") as f:
            json.dump(big_document(1), f)
        small_ops = operators // COPIES
        per_op = [
            (small_ops, best(lambda: ours_whole(small), 5), best(lambda: plain_whole(small), 5)),
            (operators, results[-1][1], results[-1][2]),
        ]
        for count, mine, theirs in per_op:
            print(
                f"  whole path per operator at {count:,}: {mine / count * 1e6:.1f} µs "
                f"(reference {theirs / count * 1e6:.1f} µs)"
            )
    if big is not None:
        print(
            f"opid fingerprint --json, 1,000,000 operators ({big['mib']:.0f} MiB document): "
            f"{big['ours_s']:.1f} s, peak RSS {big['ours_rss']:.0f} MiB; json.loads + "
            f"json.dumps of it: {big['ref_s']:.1f} s, {big['ref_rss']:.0f} MiB"
        )
    table = render_table(operators, size, results, per_op, big)
    print()
    print(table)
    if "--docs" in argv:
        write_docs(table)


def render_table(
    operators: int,
    size: float,
    results: list[tuple[str, float, float, float]],
    per_op: list[tuple[int, float, float]],
    big: Any,
) -> str:
    lines = [
        f"`python benchmarks/run.py path`: the {operators:,}-operator program ({size:.0f} MiB "
        "document), best of 3; reference = plain Python doing the same work without checks "
        "(see the script).",
        "",
        "| step | ours | reference | ours / reference | peak memory |",
        "|---|---|---|---|---|",
    ]
    for label, mine, theirs, peak in results:
        lines.append(
            f"| {label} | {mine * 1000:,.0f} ms | {theirs * 1000:,.0f} ms | "
            f"{mine / theirs:.2f} | {peak:,.0f} MiB |"
        )
    for count, mine, theirs in per_op:
        lines.append(
            f"| whole path per operator, {count:,} operators | {mine / count * 1e6:.1f} µs | "
            f"{theirs / count * 1e6:.1f} µs | {mine / theirs:.2f} | |"
        )
    if big is not None:
        lines.append(
            f"| `opid fingerprint --json`, 1,000,000 operators ({big['mib']:.0f} MiB; a new "
            f"process) | {big['ours_s']:.1f} s ({big['ours_s']:.1f} µs per operator), "
            f"{big['ours_rss']:,.0f} MiB peak RSS | {big['ref_s']:.1f} s, "
            f"{big['ref_rss']:,.0f} MiB (json.loads + json.dumps) | "
            f"{big['ours_s'] / big['ref_s']:.2f} | |"
        )
    return "\n".join(lines)


def write_docs(table: str) -> None:
    page = ROOT / "docs" / "benchmarks.md"
    text = page.read_text(encoding="utf-8")
    start, end = MARKERS
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise SystemExit(f"docs/benchmarks.md has no {start} ... {end} section")
    page.write_text(pattern.sub(lambda _: f"{start}\n{table}\n{end}", text), encoding="utf-8")
    print("docs/benchmarks.md updated")


if __name__ == "__main__":
    main(sys.argv[1:])
