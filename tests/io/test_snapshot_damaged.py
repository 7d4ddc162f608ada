"""The ``.opid`` reader on hostile and damaged text: bounded memory, linear time in every
section, a cut or doubled section an error naming the line, a byte order mark read.

The scaling tests assert on growth ratios between 1x, 10x and 100x inputs with generous bounds
(a quadratic section grows 100x per 10x; a linear one about 10x), never on wall-clock values;
the figures themselves are in benchmarks/bench_readers.py.
"""

from __future__ import annotations

import json
import re
import time
import tracemalloc
from collections.abc import Callable

import pytest

from pytest_opid.errors import DocumentError
from pytest_opid.io.snapshot import HEADER, dumps, is_snapshot, loads
from pytest_opid.result import (
    Fingerprint,
    JobVertex,
    OperatorFingerprint,
    StateOperator,
    StateStore,
)

OP = "a" * 32
VERTEX = "b" * 32


def _struct(fields: int) -> str:
    return json.dumps(
        {
            "type": "struct",
            "fields": [
                {"name": f"f{i}", "type": "long", "nullable": True, "metadata": {}}
                for i in range(fields)
            ],
        },
        separators=(",", ":"),
    )


def _spark(
    name: str = "agg",
    fields: int = 2,
    settings: int = 0,
    meaning: tuple[tuple[str, str], ...] = (("keys", "page"),),
) -> Fingerprint:
    """A Spark-like streaming fingerprint: one operator, one stateful operator and store."""
    store = StateStore("default", _struct(1), _struct(fields))
    return Fingerprint(
        (OperatorFingerprint(0, name, OP, parallelism=2, job_vertex=VERTEX),),
        (JobVertex(VERTEX, "stage", 2, ((OP, None),), (0,)),),
        (StateOperator(0, OP, "agg", "aggregate", (store,), meaning),),
        "spark",
        "streaming",
        ("FileStreamSource[events]",),
        None,
        None,
        tuple((f"conf.key{i}", str(i)) for i in range(settings)),
    )


def _cut_before(text: str, title: str) -> str:
    return text[: text.index(f"\n{title}\n") + 1]


# -- finding 4: cut, doubled, BOM -----------------------------------------------------------


def test_a_written_snapshot_reads_back_exactly():
    fp = _spark(fields=40, settings=3)
    assert loads(dumps(fp)) == fp


@pytest.mark.parametrize("title", ["[state stores]", "[state meaning]", "[sources]"])
def test_a_spark_snapshot_cut_before_a_section_is_an_error_naming_the_line(title):
    text = _cut_before(dumps(_spark(fields=40)), title)
    with pytest.raises(DocumentError, match=r"cut short after line \d+") as info:
        loads(text, origin="x.opid")
    assert str(info.value).startswith("x.opid")
    assert "\n" not in str(info.value)


def test_a_snapshot_cut_at_any_line_end_never_reads():
    """Every prefix that ends at a line end: none reads as a (smaller) fingerprint."""
    text = dumps(_spark(fields=40, settings=2))
    ends = [i + 1 for i, char in enumerate(text) if char == "\n"][:-1]
    for end in ends:
        with pytest.raises(DocumentError):
            loads(text[:end])


def test_an_older_format_spark_snapshot_cut_before_its_sources_is_an_error():
    """Format 4 files have no [end] line: a stateful snapshot without [sources] is cut."""
    text = dumps(_spark()).replace(HEADER, HEADER.rsplit(" ", 1)[0] + " 4", 1)
    text = text[: text.rindex("\n[end]")] + "\n"
    assert loads(text) == _spark()
    with pytest.raises(DocumentError, match=r"no \[sources\] section"):
        loads(_cut_before(text, "[state stores]"))
    with pytest.raises(DocumentError, match=r"no \[sources\] section"):
        loads(_cut_before(text, "[state meaning]"))


@pytest.mark.parametrize(
    "title", ["[state operators]", "[sources]", "[job]", "[operators]", "[settings]"]
)
def test_a_section_written_twice_is_an_error_naming_both_lines(title):
    text = dumps(_spark(settings=1))
    lines = text.split("\n")
    start = lines.index(title)
    end = lines.index("", start)
    doubled = "\n".join([*lines[:end], "", *lines[start:end], *lines[end:]])
    expected = f"line {end + 2}: a second {title} section (the first is on line {start + 1})"
    with pytest.raises(DocumentError, match=re.escape(expected)):
        loads(doubled)


def test_a_byte_order_mark_is_read():
    fp = _spark()
    text = "\ufeff" + dumps(fp)
    assert loads(text) == fp


def test_a_byte_order_mark_file_is_a_snapshot(tmp_path):
    path = tmp_path / "x.opid"
    path.write_bytes(b"\xef\xbb\xbf" + dumps(_spark()).encode())
    assert is_snapshot(path)


# -- findings 2 and 3: memory and time --------------------------------------------------------


def _measure(read: Callable[[], object]) -> tuple[float, int]:
    """Best of three wall times, and the peak of Python allocations of one run."""
    times = []
    for _ in range(3):
        start = time.perf_counter()
        read()
        times.append(time.perf_counter() - start)
    tracemalloc.start()
    try:
        read()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return min(times), peak


def _growth(make: Callable[[int], str], base: int) -> tuple[list[float], list[int], list[int]]:
    texts = [make(base * factor) for factor in (1, 10, 100)]
    figures = [_measure(lambda t=t: loads(t)) for t in texts]
    return [t for t, _ in figures], [m for _, m in figures], [len(t) for t in texts]


def _assert_linear(make: Callable[[int], str], base: int, memory: int = 6) -> None:
    times, peaks, sizes = _growth(make, base)
    # Linear: ~10x per step (up to ~30x where the 100x input leaves the processor's caches).
    # Quadratic would be ~100x. Bounds are generous: noise on a shared machine.
    # The 1x step is timed only end to end: a sub-millisecond base is too noisy for a ratio.
    assert times[2] / max(times[1], 1e-4) < 55, times
    assert times[2] / max(times[0], 1e-4) < 2500, times  # quadratic: ~10,000
    assert peaks[2] / peaks[1] < 20, peaks
    # Bounded memory: a constant times the input (before: 125x for a long name).
    assert peaks[2] < memory * sizes[2], (peaks[2], sizes[2])


def test_a_long_operator_name_is_read_in_memory_a_small_multiple_of_it():
    _assert_linear(lambda n: dumps(_spark(name="x" * n)), 40_000)


def test_a_long_escaped_name_is_read_in_memory_a_small_multiple_of_it():
    _assert_linear(lambda n: dumps(_spark(name='\x01\\"' * n)), 10_000)


def test_a_multi_line_state_store_struct_reads_in_linear_time():
    # A schema is kept as Spark's JSON form, itself about five times its DDL text, and parsed
    # through a dict per field: about 19x the snapshot's size (measured), bounded at 30x.
    _assert_linear(lambda n: dumps(_spark(fields=n)), 60, memory=30)


def test_many_settings_read_in_linear_time():
    # A setting row is a tuple of two short strings (objects of ~50 bytes each): about 9x.
    _assert_linear(lambda n: dumps(_spark(settings=n)), 120, memory=15)


def test_a_repeated_setting_is_still_refused_naming_its_line():
    text = dumps(_spark(settings=3)).replace('"conf.key2"', '"conf.key0"')
    with pytest.raises(DocumentError, match=r"line \d+: setting 'conf.key0' appears twice"):
        loads(text)
