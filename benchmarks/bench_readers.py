"""Every reader on inputs 1x, 10x and 100x a size: the time must grow linearly (issue 21).

``python benchmarks/run.py readers`` (or ``python benchmarks/bench_readers.py``).

For each reader, one input shape at three scales; the columns are the input's size, the best of
five readings, the time per unit of input and the growth of the time per 10x of input (10 is
linear; the quadratic readers of before issue 21 showed 100 on their crafted shapes). The
crafted shapes are the issue's: an ``Object[]`` of objects sharing one deep class hierarchy in
a ``_metadata``'s checkpoint properties (116 s for 408 KB before), an offset log entry of many
named sources (35 s for 259 KB), and a file source log whose query batch spans a large
``logOffset`` with one large ``.compact`` file (54 s for 51 KB). Plain shapes are read too: a
topology document, its saved fingerprint, its ``.opid`` snapshot, a ``_metadata`` of many
operator states, and stdin.
"""

from __future__ import annotations

import io
import itertools
import json
import struct
import sys
import tempfile
import tracemalloc
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench_core import best_of, random_topology  # noqa: E402
from bench_savepoint import build_metadata  # noqa: E402

from pytest_opid.flink.document import dump_document  # noqa: E402
from pytest_opid.flink.savepoint import parse_metadata, read_savepoint  # noqa: E402
from pytest_opid.inputs import load_input  # noqa: E402
from pytest_opid.io.json import read_stream  # noqa: E402
from pytest_opid.io.snapshot import dumps, loads  # noqa: E402
from pytest_opid.result import (  # noqa: E402
    Fingerprint,
    JobVertex,
    OperatorFingerprint,
    StateOperator,
    StateStore,
)
from pytest_opid.spark.checkpoint.read import read_checkpoint  # noqa: E402

SCALES = (1, 10, 100)
RUNS = 5


def best(action: Callable[[], object], runs: int = RUNS) -> float:
    """The fastest wall time of ``runs`` calls (the core benchmark's measuring)."""
    return best_of(runs, action)[0]


# -- the crafted shapes ---------------------------------------------------------------------------


def _utf(text: str) -> bytes:
    return struct.pack(">H", len(text)) + text.encode("ascii")


def _class_desc(name: str) -> bytes:
    return b"\x72" + _utf(name) + struct.pack(">qBh", 1, 0x02, 0) + b"\x78"


def deep_hierarchy_metadata(count: int) -> bytes:
    """A version-6 ``_metadata`` whose checkpoint properties are an ``Object[]`` of ``count``
    objects of one class ``count`` classes deep (no class has fields)."""
    out = [struct.pack(">iiqii", 0x4960672D, 6, 42, 0, 0)]
    out.append(b"\xac\xed\x00\x05\x75" + _class_desc("[Ljava.lang.Object;") + b"\x70")
    out.append(struct.pack(">i", count))
    out.append(b"\x73" + b"".join(_class_desc(f"C{i}") for i in range(count)) + b"\x70")
    out.append((b"\x73\x71" + struct.pack(">i", 0x7E0000 + 2)) * (count - 1))
    return b"".join(out)


def checkpoint_with_sources(root: Path, sources: int) -> Path:
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    (root / "metadata").write_text('{"id":"q"}')
    lines = "".join(f'source-{i}:{{"offset":{i}}}\n' for i in range(sources))
    (root / "offsets" / "0").write_text("v2\n{}\n" + lines)
    (root / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}\n')
    return root


def checkpoint_with_compaction(root: Path, entries: int) -> Path:
    """One file source whose only query batch spans log batches 0..100 x ``entries``, all
    folded into one ``.compact`` file of ``entries`` entries (one per 100 batches)."""
    span = 100 * entries
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    (root / "sources" / "0").mkdir(parents=True)
    (root / "metadata").write_text('{"id":"q"}')
    (root / "offsets" / "0").write_text(f'v1\n{{"conf":{{}}}}\n{{"logOffset":{span}}}\n')
    (root / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}\n')
    rows = "".join(
        json.dumps({"path": f"file:/in/{b}.csv", "timestamp": 1, "batchId": b}) + "\n"
        for b in range(0, span, 100)
    )
    (root / "sources" / "0" / f"{span}.compact").write_text("v1\n" + rows)
    return root


def folder_size(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def hostile_snapshot(name: str = "agg", fields: int = 2, settings: int = 0) -> tuple[int, Callable]:
    """A Spark-like streaming snapshot with one part grown: the shapes issue 31 found quadratic
    (a struct written one field a line, the [settings] duplicate check) or 125x the input in
    memory (a long name). The reading's peak of Python allocations is printed beside."""
    schema = json.dumps(
        {
            "type": "struct",
            "fields": [
                {"name": f"f{i}", "type": "long", "nullable": True, "metadata": {}}
                for i in range(fields)
            ],
        },
        separators=(",", ":"),
    )
    op, vertex = "a" * 32, "b" * 32
    fp = Fingerprint(
        (OperatorFingerprint(0, name, op, parallelism=2, job_vertex=vertex),),
        (JobVertex(vertex, "stage", 2, ((op, None),), (0,)),),
        (StateOperator(0, op, "agg", "aggregate", (StateStore("default", schema, schema),)),),
        "spark",
        "streaming",
        ("FileStreamSource[events]",),
        settings=tuple((f"conf.key{i}", str(i)) for i in range(settings)),
    )
    text = dumps(fp)
    tracemalloc.start()
    loads(text)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(f"  .opid reading's memory peak: {peak / len(text):.1f}x the text ({len(text):,} chars)")
    return len(text.encode()), lambda: loads(text)


# -- the rows -------------------------------------------------------------------------------------


class Stdin(io.BytesIO):
    """What read_stream reads from stdin, here from memory."""


def rows(tmp: Path) -> list[tuple[str, str, list[tuple[int, int, float]]]]:
    """(reader, unit, [(units, bytes, seconds) per scale])."""
    out = []

    def add(name: str, unit: str, base: int, make: Callable[[int], tuple[int, Callable]]) -> None:
        measured = []
        for scale in SCALES:
            size, action = make(base * scale)
            measured.append((base * scale, size, best(action)))
        out.append((name, unit, measured))
        print(f"  measured: {name}", file=sys.stderr, flush=True)

    def document(n: int) -> tuple[int, Callable]:
        path = tmp / f"doc-{n}.json"
        path.write_text(json.dumps(dump_document(random_topology(n, seed=n))))
        return path.stat().st_size, lambda: load_input(str(path))

    def saved(n: int) -> tuple[int, Callable]:
        path = tmp / f"saved-{n}.json"
        fp = load_input(str(tmp / f"doc-{n}.json"))
        path.write_text(fp.to_json())
        return path.stat().st_size, lambda: load_input(str(path))

    def snapshot(n: int) -> tuple[int, Callable]:
        text = dumps(load_input(str(tmp / f"doc-{n}.json")))
        return len(text.encode()), lambda: loads(text)

    def long_name(n: int) -> tuple[int, Callable]:
        return hostile_snapshot(name="x" * n)

    def wide_struct(n: int) -> tuple[int, Callable]:
        return hostile_snapshot(fields=n)

    def many_settings(n: int) -> tuple[int, Callable]:
        return hostile_snapshot(settings=n)

    def stdin(n: int) -> tuple[int, Callable]:
        data = (tmp / f"doc-{n}.json").read_bytes()
        return len(data), lambda: read_stream(Stdin(data), "<stdin>")

    def plain_copy(n: int) -> tuple[int, Callable]:
        data = (tmp / f"doc-{n}.json").read_bytes()
        return len(data), lambda: bytes(bytearray(data))

    def metadata(n: int) -> tuple[int, Callable]:
        path = tmp / f"states-{n}" / "_metadata"
        path.parent.mkdir()
        path.write_bytes(build_metadata(n))
        return path.stat().st_size, lambda: read_savepoint(path)

    def deep(n: int) -> tuple[int, Callable]:
        data = deep_hierarchy_metadata(n)
        return len(data), lambda: parse_metadata(data, "deep/_metadata")

    def sources(n: int) -> tuple[int, Callable]:
        root = checkpoint_with_sources(tmp / f"sources-{n}", n)
        return folder_size(root), lambda: read_checkpoint(root)

    def compaction(n: int) -> tuple[int, Callable]:
        root = checkpoint_with_compaction(tmp / f"compact-{n}", n)
        return folder_size(root), lambda: read_checkpoint(root)

    add("topology document file -> fingerprint", "operators", 1_000, document)
    add("saved fingerprint file -> fingerprint", "operators", 1_000, saved)
    add(".opid snapshot text -> fingerprint", "operators", 1_000, snapshot)
    add(".opid: one Spark operator's long name", "name bytes", 160_000, long_name)
    add(".opid: a [state stores] struct one field a line", "fields", 80, wide_struct)
    add(".opid: many [settings] rows", "settings", 200, many_settings)
    add("stdin, read to its end (read_stream)", "operators", 1_000, stdin)
    add("stdin's reference: one copy of the same bytes", "operators", 1_000, plain_copy)
    add("_metadata of many operator states", "states", 100, metadata)
    add("_metadata: Object[] sharing a deep hierarchy", "objects = depth", 300, deep)
    add("checkpoint: offset log of many named sources", "sources", 300, sources)
    add("checkpoint: logOffset span over one .compact", "entries (span 100x)", 10, compaction)
    return out


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 1024:.0f} KiB"


def _time(t: float) -> str:
    return f"{t * 1000:,.1f} ms" if t < 10 else f"{t:.1f} s"


def main() -> None:
    assert Fingerprint  # the saved form's reader, through load_input
    with tempfile.TemporaryDirectory() as tmp:
        table = rows(Path(tmp))
    print("Each reader on 1x / 10x / 100x its input; best of 5. Growth: the time's factor per")
    print("10x of input (10 = linear).")
    print()
    print("| reader | input (1x / 10x / 100x) | size | time | per unit | growth per 10x |")
    print("|---|---|---|---|---|---|")
    for name, unit, measured in table:
        counts = " / ".join(f"{n:,}" for n, _, _ in measured)
        sizes = " / ".join(_size(b) for _, b, _ in measured)
        times = " / ".join(_time(t) for _, _, t in measured)
        per = " / ".join(f"{t / n * 1e6:.1f} µs" for n, _, t in measured)
        growth = " / ".join(f"{b[2] / a[2]:.1f}x" for a, b in itertools.pairwise(measured))
        print(f"| {name} | {counts} {unit} | {sizes} | {times} | {per} | {growth} |")


if __name__ == "__main__":
    main()
