"""``opid diff`` of two 100,000-operator pipelines of repeated names, step by step, against
reading them.

The reference reading is ``json.loads`` of both saved fingerprints (and msgspec's untyped
decode), the least any diff must do; the ratios say what validation, the comparison and the
explanation add on top. Names repeat (``Map``, ``Filter``, ``Project``), the case that made a
sequence alignment quadratic. Times are process (CPU) time, best of five runs: wall time on a
busy machine is noisy. Peak memory (tracemalloc) is measured in a separate pass, because tracing
allocations slows Python down several times.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import peak_memory as peak

from pytest_opid.cli import main as opid
from pytest_opid.comparison import compare
from pytest_opid.engine_rules import Check
from pytest_opid.flink.builder import source
from pytest_opid.render.explain import render
from pytest_opid.result import Fingerprint

NAMES = ("Map", "Filter", "Project")
RUNS = 5


def pipeline(size: int, insert_at: int | None = None) -> object:
    stream = source("Kafka")
    for i in range(size - 2):
        if insert_at is not None and i == insert_at:
            stream = stream.filter("Filter")
        stream = getattr(stream, NAMES[i % 3].lower() if NAMES[i % 3] != "Project" else "map")(
            NAMES[i % 3]
        )
    return stream.sink("Out")


def best(fn: Callable[[], object]) -> tuple[float, object]:
    """The best process time of a few runs, each starting from a collected heap (the previous
    run's result is dropped first, so that freeing it is not counted)."""
    times = []
    result: object = None
    for _ in range(RUNS):
        result = None
        gc.collect()
        start = time.process_time()
        result = fn()
        times.append(time.process_time() - start)
    return min(times), result


def main() -> None:
    import pytest_opid

    size = 100_000
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "old.json"
        new = Path(tmp) / "new.json"
        fp_old = pytest_opid.fingerprint(pipeline(size))
        fp_new = pytest_opid.fingerprint(pipeline(size, insert_at=size // 2))
        writing, text = best(fp_old.to_json)
        assert isinstance(text, str)
        old.write_text(text, encoding="utf-8")
        new.write_text(fp_new.to_json(), encoding="utf-8")
        paths = (old, new)
        megabytes = sum(p.stat().st_size for p in paths) / 1e6

        loads, _ = best(lambda: [json.loads(p.read_bytes()) for p in paths])
        generic, _ = best(lambda: [msgspec.json.decode(p.read_bytes()) for p in paths])
        reading, pair = best(lambda: [Fingerprint.from_json(p.read_bytes(), str(p)) for p in paths])
        a, b = cast(list[Fingerprint], pair)
        assert a == fp_old and b == fp_new
        comparing, _ = best(lambda: compare(a, b))
        judging, _ = best(lambda: compare(a, b).breaks(Check.IDS))
        judged = []  # one comparison per run, its verdict made: render as opid diff does
        for _ in range(RUNS):
            fresh = compare(a, b)
            fresh.breaks(Check.IDS)
            judged.append(fresh)
        rendering, _ = best(lambda: render(judged.pop(), Check.IDS, accept=None))

        def diff() -> int:
            sink = io.StringIO()
            with contextlib.redirect_stdout(sink):
                code = opid(["diff", str(old), str(new)])
            diff.lines = sink.getvalue().count("\n")  # type: ignore[attr-defined]
            return code

        whole, code = best(diff)
        peak_read = peak(lambda: [Fingerprint.from_json(p.read_bytes(), str(p)) for p in paths])
        peak_loads = peak(lambda: [json.loads(p.read_bytes()) for p in paths])
        peak_diff = peak(diff)

    def row(label: str, seconds: float, note: str = "") -> None:
        print(f"  {label:<50} {seconds * 1000:8.0f} ms  {note}".rstrip())

    print(
        f"opid diff of two {size:,}-operator pipelines (names repeat; one filter inserted), "
        f"{megabytes:.0f} MB of saved fingerprints"
    )
    row("write one (to_json)", writing)
    row("reference: json.loads of both", loads)
    row("reference: msgspec untyped decode of both", generic, f"{generic / loads:.2f}x json.loads")
    row(
        "read A+B (Fingerprint.from_json, validated)", reading, f"{reading / loads:.2f}x json.loads"
    )
    row("compare", comparing, f"{comparing / reading:.2f}x reading")
    row(
        "compare + verdict (breaks: engine restore rules)",
        judging,
        f"{judging / reading:.2f}x reading",
    )
    row("render the explanation (after the verdict)", rendering)
    row(
        "opid diff (read, compare, explain)",
        whole,
        f"{whole / loads:.2f}x json.loads, {whole / reading:.2f}x reading; exit {code}, "
        f"{diff.lines} lines printed",  # type: ignore[attr-defined]
    )
    print(
        f"  peak memory: read A+B {peak_read / 2**20:.0f} MiB, json.loads of both "
        f"{peak_loads / 2**20:.0f} MiB, opid diff {peak_diff / 2**20:.0f} MiB"
    )


if __name__ == "__main__":
    main()
