"""Plugin figures: what the installed plugin adds to ``pytest --collect-only`` of a suite that does
not use it, and what a snapshot check costs on a large job.

``python benchmarks/run.py plugin`` (or ``python benchmarks/bench_plugin.py [repetitions]``;
``python benchmarks/bench_plugin.py check`` runs part 3 alone, ``... judge [CHECKOUT]`` part 4).

1. Collection overhead. A generated suite of 40 modules x 25 tests that never touches
   pytest-opid is collected in fresh interpreters, interleaving three configurations: everything
   installed on; ``-p no:opid`` (the plugin blocked, the Spark fixtures plugin still loading the
   package); and ``-p no:opid -p no:opid_spark`` (pytest-opid not imported at all). The added
   time is the median of the differences between runs made back to back, in wall time and in
   the child's CPU time (less sensitive to a busy machine); the target for the plugin is
   <= 50 ms. Hypothesis's and pytest-benchmark's plugins, the same in every configuration, are
   left out to cut the noise.
2. Import cost of ``pytest_opid.plugin`` alone, from ``python -X importtime`` (median).
3. A snapshot check on the 9,820-operator golden job, as the plugin runs it for a marked test:
   writing the live fingerprint's snapshot text (dumps), reading the stored text back (loads)
   and comparing the two (compare); each step alone and the whole ("check", target <= 60 ms),
   next to a plain-Python reference (split the lines and cells, compare operator IDs through a
   dict) and the ratio of the two; best of 15 runs, and tracemalloc's peak.
4. A snapshot judged in a real pytest run, on the same golden job (``judge``): how long a
   test's call phase takes (a conftest times it, around the plugin's check) when a marked test
   passes with a harmless change (a rename), when ``--snapshot-update`` writes that change, and
   when a test asserts with the extension alone and fails (syrupy asks ``matches``, then
   ``diff_lines``); with the number of comparisons each made. Median of 7 runs in fresh
   processes. Given the path of another checkout (``judge CHECKOUT``), its code runs the same
   tests first (``PYTHONPATH``), for a before/after.
"""

from __future__ import annotations

import gc
import gzip
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

LARGE = HERE.parent / "tests" / "data" / "large_10k.jsonl.gz"
MODULES, TESTS = 40, 25
COMMAND = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
#: Unrelated plugins that cost the same in every configuration, left out to cut the noise.
QUIET = ["-p", "no:hypothesispytest", "-p", "no:benchmark"]
CONFIGS = {
    "plugin on": [],
    "-p no:opid": ["-p", "no:opid"],
    "pytest-opid off": ["-p", "no:opid", "-p", "no:opid_spark"],
}


def make_suite(root: Path) -> None:
    for m in range(MODULES):
        body = "\n\n".join(
            f"def test_{t}(tmp_path):\n    assert tmp_path.exists()" for t in range(TESTS)
        )
        (root / f"test_mod_{m}.py").write_text(body + "\n")
    (root / "pytest.ini").write_text("[pytest]\n")


def collect_ms(root: Path, extra: list[str]) -> tuple[float, float]:
    """Wall time and CPU time (user + system of the child) of one collection, in ms."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [*COMMAND, *QUIET, *extra],
        cwd=root,
        capture_output=True,
        text=True,
    )
    wall = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    if done.returncode != 0 or f"{MODULES * TESTS} tests collected" not in done.stdout:
        raise RuntimeError(f"collection failed ({extra}):\n{done.stdout[-2000:]}{done.stderr}")
    return wall, cpu


def import_ms() -> float:
    """Import time of pytest_opid.plugin (with the package it pulls in) after pytest."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import pytest; import pytest_opid.plugin"],
        capture_output=True,
        text=True,
        check=True,
    )
    for line in done.stderr.splitlines():
        parts = [p.strip() for p in line.removeprefix("import time:").split("|")]
        if len(parts) == 3 and parts[2] == "pytest_opid.plugin":
            return int(parts[1]) / 1000  # cumulative: includes the pytest_opid package
    raise RuntimeError("pytest_opid.plugin was not imported")


def timed(fn: Callable[[], object], repeat: int = 5) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def peak_mib(fn: Callable[[], object]) -> float:
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def main(repetitions: int = 15) -> None:
    print(
        f"collect-only of {MODULES * TESTS} tests in {MODULES} modules, {repetitions} runs "
        "each, interleaved; median (min) in ms"
    )
    print(f"  every run: pytest --collect-only -q -p no:cacheprovider {' '.join(QUIET)}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_suite(root)
        if os.environ.get("PYTEST_ADDOPTS"):
            print(f"  (PYTEST_ADDOPTS={os.environ['PYTEST_ADDOPTS']!r})")
        wall: dict[str, list[float]] = {name: [] for name in CONFIGS}
        cpu: dict[str, list[float]] = {name: [] for name in CONFIGS}
        for extra in CONFIGS.values():  # warm the file system cache and the pyc files
            collect_ms(root, extra)
        for _ in range(repetitions):
            for name, extra in CONFIGS.items():
                w, c = collect_ms(root, extra)
                wall[name].append(w)
                cpu[name].append(c)
    print(f"  {'':<16} {'wall':>17} {'cpu (user+sys)':>19}")
    for name in CONFIGS:
        print(
            f"  {name:<16} {statistics.median(wall[name]):8.1f} ({min(wall[name]):6.1f})"
            f" {statistics.median(cpu[name]):10.1f} ({min(cpu[name]):6.1f})"
        )

    def added(a: str, b: str) -> str:
        """Median of the run-by-run differences (each pair ran back to back)."""
        w = statistics.median(x - y for x, y in zip(wall[a], wall[b], strict=True))
        c = statistics.median(x - y for x, y in zip(cpu[a], cpu[b], strict=True))
        return f"{w:6.1f} ms wall, {c:6.1f} ms cpu"

    print(f"  added by the opid plugin:        {added('plugin on', '-p no:opid')} (target <= 50)")
    print(f"  added by pytest-opid altogether: {added('plugin on', 'pytest-opid off')}")
    imports = sorted(import_ms() for _ in range(7))
    print(f"import pytest_opid.plugin (pytest already loaded): {statistics.median(imports):.1f} ms")
    snapshot_check()


def snapshot_check() -> None:
    """Part 3 alone: ``python benchmarks/bench_plugin.py check``."""
    from pytest_opid import compute
    from pytest_opid.comparison import compare
    from pytest_opid.flink.document import topology_from_document
    from pytest_opid.io.snapshot import dumps, loads

    with gzip.open(LARGE, "rt", encoding="utf-8") as f:
        case = json.loads(f.readline())
    live = compute(topology_from_document(case["topology"]))
    n = len(live.operators)
    text = dumps(live)  # the stored snapshot
    stored = loads(text)
    size = len(text) / 2**20
    print(f"snapshot check on the golden job of {n} operators ({size:.2f} MiB of text)")
    print("  check: dumps(live) + loads(stored text) + compare(stored, live), as the plugin does")
    steps = (
        ("dumps", lambda: dumps(live)),
        ("loads", lambda: loads(text)),
        ("compare", lambda: compare(stored, live)),
        ("check", lambda: (dumps(live), compare(loads(text), live))),
        ("reference (plain Python)", lambda: reference_check(live, text)),
    )
    figures = {}
    for label, fn in steps:
        seconds, _ = timed(fn, repeat=15)
        figures[label] = seconds
        print(
            f"  {label:<25} {seconds * 1000:8.1f} ms  {n / seconds:12,.0f} operators/s  "
            f"peak {peak_mib(fn):6.1f} MiB"
        )
    ratio = figures["check"] / figures["reference (plain Python)"]
    print(f"  check / reference: {ratio:.2f}x  (target: check <= 60 ms)")


def reference_check(live: Any, text: str) -> bool:
    """The least a check can do in plain Python, for scale: write one line per operator, split
    the stored text into lines and cells, and compare operator IDs through a dict. It checks
    nothing (no quoting, no validation, no chains): a floor, not a rival."""
    written = "\n".join(
        f"{op.operator_id}  {op.user_operator_id or '-'}  {op.parallelism}  {op.node}  {op.name}"
        for op in live.operators
    )
    rows = [line.split() for line in text.splitlines() if line and not line.startswith("#")]
    stored = {row[1]: row[2] for row in rows if len(row) > 6 and len(row[1]) == 32}
    return bool(written) and all(
        stored.get(op.operator_id) == (op.user_operator_id or "-") for op in live.operators
    )


JUDGE_CONFTEST = """
import os, time
import pytest
from pytest_opid import comparison

_real = comparison.compare
CALLS = []

def _counting(*args, **kwargs):
    CALLS.append(1)
    return _real(*args, **kwargs)

for _name, _module in list(__import__("sys").modules.items()):
    if _name.startswith("pytest_opid") and getattr(_module, "compare", None) is _real:
        _module.compare = _counting

@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_call(item):
    from pytest_opid.plugin import extension  # noqa: F401 (binds compare where it does)
    for _name, _module in list(__import__("sys").modules.items()):
        if _name.startswith("pytest_opid") and getattr(_module, "compare", None) is _real:
            _module.compare = _counting
    start = time.perf_counter()
    yield
    with open(os.environ["OPID_BENCH_OUT"], "a") as f:
        f.write(f"{(time.perf_counter() - start) * 1000:.1f} {len(CALLS)}\\n")
"""

MARKED = """
import json, pathlib, pytest

@pytest.mark.stable_topology
def test_job(opid):
    opid.record(json.loads(pathlib.Path("{job}").read_text()))
"""

DIRECT = """
import json, pathlib
from pytest_opid.plugin.extension import TopologySnapshotExtension

def test_job(snapshot):
    doc = json.loads(pathlib.Path("{job}").read_text())
    assert doc == snapshot.use_extension(TopologySnapshotExtension)
"""


def judge_figures(other: str | None = None, runs: int = 7) -> None:
    """Part 4 alone: ``python benchmarks/bench_plugin.py judge [CHECKOUT]``."""
    with gzip.open(LARGE, "rt", encoding="utf-8") as f:
        doc = json.loads(f.readline())["topology"]
    renamed = dict(doc, nodes=[dict(doc["nodes"][0], name="Source: renamed"), *doc["nodes"][1:]])
    first = doc["nodes"][0]
    extra = dict(first, id=1, name="Source: another")
    moved = dict(  # a new source feeding the first operator: IDs downstream change
        doc,
        nodes=[extra, *doc["nodes"]],
        edges=[dict(doc["edges"][0], source=1, target=doc["edges"][0]["target"]), *doc["edges"]],
    )
    print(f"a snapshot judged in pytest, golden job of {len(doc['nodes'])} operators: call phase, "
          f"median of {runs} runs (ms), comparisons made")
    for label, path in (("this checkout", None), (other, other)):
        if label is None:
            continue
        figures = _judge_runs(doc, renamed, moved, path, runs)
        print(f"  {label}:")
        for scenario, (ms, compares) in figures.items():
            print(f"    {scenario:<46} {ms:8.1f} ms  {compares} comparison(s)")


def _judge_runs(
    doc: dict, renamed: dict, moved: dict, checkout: str | None, runs: int
) -> dict[str, tuple[float, int]]:
    env = dict(os.environ)
    if checkout:
        env["PYTHONPATH"] = checkout
    out: dict[str, tuple[float, int]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "conftest.py").write_text(JUDGE_CONFTEST)
        (root / "pytest.ini").write_text("[pytest]\n")
        for name, data in (("a.json", doc), ("b.json", renamed), ("c.json", moved)):
            (root / name).write_text(json.dumps(data))
        base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *QUIET]

        def run(test: str, job: str, *extra: str, setup: str | None = None) -> tuple[float, int]:
            times, counts = [], []
            for _ in range(runs):
                if setup is not None:  # the snapshot as the scenario starts from
                    (root / "test_job.py").write_text(test.format(job=setup))
                    subprocess.run([*base, "--snapshot-update"], cwd=root, env=env,
                                   capture_output=True, check=False)
                (root / "test_job.py").write_text(test.format(job=job))
                report = root / "times.txt"
                report.unlink(missing_ok=True)
                subprocess.run([*base, *extra], cwd=root, capture_output=True, check=False,
                               env=dict(env, OPID_BENCH_OUT=str(report)))
                ms, count = report.read_text().split()
                times.append(float(ms))
                counts.append(int(count))
            return statistics.median(times), max(counts)

        out["marked test, harmless rename (passes)"] = run(MARKED, "b.json", setup="a.json")
        out["marked test, --snapshot-update of it"] = run(
            MARKED, "b.json", "--snapshot-update", setup="a.json"
        )
        out["extension alone, state lost (fails)"] = run(DIRECT, "c.json", setup="a.json")
    return out


if __name__ == "__main__":
    if sys.argv[1:2] == ["judge"]:
        judge_figures(sys.argv[2] if len(sys.argv) > 2 else None)
    elif sys.argv[1:] == ["check"]:
        snapshot_check()
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 15)
