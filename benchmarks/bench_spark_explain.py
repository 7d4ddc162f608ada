"""``fingerprint()`` of the streaming examples next to Spark's own ``df.explain()``, and what a
marked test costs more than an unmarked one.

``python benchmarks/run.py spark_explain`` (or ``python benchmarks/bench_spark_explain.py``).

1. Warm, in one session: for each streaming query of ``examples/spark/jobs.py``, the median
   time of ``pytest_opid.fingerprint(df)`` and of ``df.explain()`` (its text sent to a buffer)
   on the same DataFrame, alternated, after warm-up rounds; and the same on a DataFrame built
   afresh each time (Spark's analyzer and optimizer run first, as in a test). Target: the
   fingerprint at most 1.5x explain.
2. Cold, in fresh interpreters: the first ``fingerprint()`` in a new session against the first
   ``explain()``, each first in its own process (the JVM has compiled nothing yet), and the
   second call of each.
3. Per marked test, warm: a generated suite of tests that each build the example streaming
   query, half of them marked ``@pytest.mark.stable_topology`` and recording it (their
   snapshots written by a first run), run by pytest in one session; the median of each test's
   setup + call + teardown, marked against unmarked, after the first tests (warm-up). Target:
   at most 100 ms more per marked test.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

WARMUP = 8
RUNS = 21
TESTS = 24  # per kind in part 3
EVENTS = ROOT / "examples" / "spark" / "data" / "events"


def _session() -> Any:
    """The Spark benchmark's session (the `spark` fixture's settings, local[2])."""
    from benchmarks.bench_spark import _session as spark_session

    return spark_session()


def _explain(df: Any) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        df.explain()


def _ms(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def _pair(a: Callable[[], Any], b: Callable[[], Any]) -> tuple[float, float]:
    """Medians of a and b, alternated run by run so that load on the machine hits both."""
    for _ in range(WARMUP):
        a(), b()
    ta, tb = [], []
    for _ in range(RUNS):
        ta.append(_ms(a))
        tb.append(_ms(b))
    return statistics.median(ta), statistics.median(tb)


def warm() -> list[dict[str, Any]]:
    import pytest_opid
    from examples.spark import jobs

    spark = _session()
    rows = []
    for name in ("page_view_stats", "page_view_stats_with_last_view"):
        build = getattr(jobs, name)
        df = build(spark, str(EVENTS))
        fp, ex = _pair(lambda: pytest_opid.fingerprint(df), lambda: _explain(df))  # noqa: B023
        fresh_fp, fresh_ex = _pair(
            lambda: pytest_opid.fingerprint(build(spark, str(EVENTS))),  # noqa: B023
            lambda: _explain(build(spark, str(EVENTS))),  # noqa: B023
        )
        row = {
            "query": name,
            "operators": len(pytest_opid.fingerprint(df).operators),
            "fingerprint_ms": fp,
            "explain_ms": ex,
            "ratio": fp / ex,
            "new_df_fingerprint_ms": fresh_fp,
            "new_df_explain_ms": fresh_ex,
            "new_df_ratio": fresh_fp / fresh_ex,
        }
        rows.append(row)
        print(
            f"{name:<32} {row['operators']:>3} ops  fingerprint {fp:6.1f} ms  explain {ex:6.1f} ms"
            f"  = {row['ratio']:.2f}x | new DataFrame: {fresh_fp:6.1f} ms vs "
            f"{fresh_ex:6.1f} ms = {row['new_df_ratio']:.2f}x  (target <= 1.5x)",
            flush=True,
        )
    spark.stop()
    return rows


_COLD = """
import contextlib, io, json, sys, time
sys.path.insert(0, {root!r})
from benchmarks.bench_spark_explain import _session, _explain
from examples.spark.jobs import page_view_stats
t = time.perf_counter(); spark = _session(); session_ms = (time.perf_counter() - t) * 1000
import pytest_opid
out = {{"session_ms": session_ms}}
for n, what in enumerate({order!r}):
    df = page_view_stats(spark, {events!r})
    t = time.perf_counter()
    pytest_opid.fingerprint(df) if what == "fingerprint" else _explain(df)
    out[f"{{n + 1}}. {{what}}"] = (time.perf_counter() - t) * 1000
print("COLD " + json.dumps(out))
spark.stop()
"""


def cold() -> list[dict[str, float]]:
    runs = []
    for order in (
        ("fingerprint", "fingerprint", "explain"),
        ("explain", "explain", "fingerprint"),
    ):
        code = _COLD.format(root=str(ROOT), order=order, events=str(EVENTS))
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=900
        )
        line = next((x for x in done.stdout.splitlines() if x.startswith("COLD ")), None)
        if line is None:
            print(f"cold run failed: {done.stderr[-2000:]}", flush=True)
            continue
        figures = json.loads(line[5:])
        runs.append(figures)
        print(
            "fresh interpreter: " + ", ".join(f"{k} {v:,.0f} ms" for k, v in figures.items()),
            flush=True,
        )
    return runs


_CONFTEST = """
import json, os, pytest
from examples.spark.jobs import page_view_stats

TIMES = {{}}

@pytest.fixture(scope="session")
def events():
    return {events!r}

def pytest_runtest_logreport(report):
    TIMES[report.nodeid] = TIMES.get(report.nodeid, 0.0) + report.duration

def pytest_sessionfinish(session):
    with open(os.environ["BENCH_TIMES"], "w") as f:
        json.dump(TIMES, f)
"""


def _suite(root: Path) -> None:
    (root / "conftest.py").write_text(_CONFTEST.format(events=str(EVENTS)), encoding="utf-8")
    tests = ["import pytest", "from examples.spark.jobs import page_view_stats", ""]
    for i in range(TESTS):  # alternated, so that warming up favours neither kind
        tests += [
            f"def test_{i:02d}_unmarked(spark, events):",
            "    page_view_stats(spark, events)",
            "",
            "@pytest.mark.stable_topology",
            f"def test_{i:02d}_marked(opid, spark, events):",
            "    opid.record(page_view_stats(spark, events))",
            "",
        ]
    (root / "test_overhead.py").write_text("\n".join(tests), encoding="utf-8")
    (root / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")


def per_test() -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        _suite(root)
        env = {**os.environ, "BENCH_TIMES": str(root / "times.json")}
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(root)]
        for extra in (["--snapshot-update"], []):
            done = subprocess.run(
                command + extra, cwd=root, env=env, capture_output=True, text=True, timeout=1800
            )
            if done.returncode != 0:
                print(f"the suite failed: {done.stdout[-2000:]}", flush=True)
                return {}
        times = json.loads((root / "times.json").read_text(encoding="utf-8"))
    skip = 4  # the first tests of each kind warm the JVM up
    marked = [v * 1000 for k, v in sorted(times.items()) if k.endswith("_marked")][skip:]
    unmarked = [v * 1000 for k, v in sorted(times.items()) if k.endswith("_unmarked")][skip:]
    row = {
        "marked_ms": statistics.median(marked),
        "unmarked_ms": statistics.median(unmarked),
    }
    row["overhead_ms"] = row["marked_ms"] - row["unmarked_ms"]
    print(
        f"per test, warm ({len(marked)} of each): marked {row['marked_ms']:.1f} ms, unmarked "
        f"{row['unmarked_ms']:.1f} ms: {row['overhead_ms']:.1f} ms more per marked test "
        "(target <= 100 ms)",
        flush=True,
    )
    return row


def main() -> None:
    rows = warm()
    runs = cold()
    overhead = per_test()
    print("BENCH_SPARK_EXPLAIN " + json.dumps({"warm": rows, "cold": runs, "per_test": overhead}))


if __name__ == "__main__":
    main()
