"""``opid diff`` of two 100,000-operator pipelines of repeated names, against reading them.

The reference reading is ``json.loads`` of both saved fingerprints, the least any diff must do;
the ratio says how much the comparison adds on top. Names repeat (``Map``, ``Filter``,
``Project``), the case that made a sequence alignment quadratic.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_opid.cli import main as opid
from pytest_opid.flink.builder import source
from pytest_opid.io.registry import load_input

NAMES = ("Map", "Filter", "Project")


def pipeline(size: int, insert_at: int | None = None) -> object:
    stream = source("Kafka")
    for i in range(size - 2):
        if insert_at is not None and i == insert_at:
            stream = stream.filter("Filter")
        stream = getattr(stream, NAMES[i % 3].lower() if NAMES[i % 3] != "Project" else "map")(
            NAMES[i % 3]
        )
    return stream.sink("Out")


def main() -> None:
    import pytest_opid

    size = 100_000
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "old.json"
        new = Path(tmp) / "new.json"
        old.write_text(pytest_opid.fingerprint(pipeline(size)).to_json())
        new.write_text(pytest_opid.fingerprint(pipeline(size, insert_at=size // 2)).to_json())
        start = time.perf_counter()
        for path in (old, new):
            json.loads(path.read_text())
        reading = time.perf_counter() - start
        loads = []
        for _ in range(3):
            start = time.perf_counter()
            for path in (old, new):
                load_input(str(path))
            loads.append(time.perf_counter() - start)
        loading = min(loads)
        runs = []
        for _ in range(3):
            sink = io.StringIO()
            start = time.perf_counter()
            with contextlib.redirect_stdout(sink):
                code = opid(["diff", str(old), str(new)])
            runs.append(time.perf_counter() - start)
        best = min(runs)
        lines = sink.getvalue().count("\n")
    print(f"opid diff of two {size:,}-operator pipelines (names repeat; one filter inserted)")
    print(f"  reference: json.loads of both files       {reading * 1000:8.0f} ms")
    print(
        f"  reading both as fingerprints (validated)  {loading * 1000:8.0f} ms  "
        f"ratio {loading / reading:.1f}x to json.loads"
    )
    print(
        f"  opid diff (read, compare, explain)        {best * 1000:8.0f} ms  "
        f"ratio {best / reading:.1f}x to json.loads, {best / loading:.2f}x to reading; "
        f"exit {code}, {lines} lines printed"
    )

if __name__ == "__main__":
    main()
