"""Format 6 snapshots built to expand: runs of indexed fields nested in one another (each level's
type written once, read once per field), the same across many rows, a run whose prefix is long,
and a quoted JSON schema nested far past what the checks walk. Each is refused in one line naming
the file and the row, in bounded time and memory (a subprocess with an address-space limit and a
timeout: the old reader took 45 s and 2.4 GB, then failed with a MemoryError traceback)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
import tracemalloc
from pathlib import Path

import pytest

from pytest_opid.errors import DocumentError
from pytest_opid.io.schema import FILE_FIELDS
from pytest_opid.io.snapshot import dumps, loads

ROOT = Path(__file__).resolve().parents[2]


FORMAT5 = ROOT / "tests" / "data" / "snapshots-format5" / "test_page_view_stats.opid"
#: The committed snapshot's HyperLogLog++ value schema, as format 6 writes it.
BUFFER = "struct<count: bigint, `MS[0]`..`MS[51]`: bigint>"


def _snapshot(schema_rows: list[str]) -> tuple[str, int]:
    """A committed Spark snapshot in format 6, its value schema row replaced by ``schema_rows``
    (``state store part schema``); and the line number of the first of them."""
    text = dumps(loads(FORMAT5.read_text(encoding="utf-8")), ids_once=True)
    lines = text.split("\n")
    (row,) = [k for k, line in enumerate(lines) if BUFFER in line]
    lines[row : row + 1] = schema_rows
    return "\n".join(lines), row + 1


def _nested(levels: int, width: int = 5) -> str:
    kind = "bigint"
    for _ in range(levels):
        kind = f"struct<`A[0]`..`A[{width - 1}]`: {kind}>"
    return kind


def _bounded(text: str) -> tuple[float, int, DocumentError]:
    """The refusal of ``text``, the time it took and the memory it peaked at (traced)."""
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(DocumentError) as caught:
            loads(text, origin="hostile.opid")
        took = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return took, peak, caught.value


def _many_rows() -> tuple[str, int]:
    """60 rows of 100,000 fields each (6 KB): each within the per-cell cap, the file not."""
    return _snapshot([f'0 "s{k}" value struct<`B[0]`..`B[99999]`: bigint>' for k in range(60)])


def test_a_real_spark_layout_still_reads() -> None:
    text, _ = _snapshot([f'0 "default" value {_nested(2)}'])
    value = loads(text).state_operators[0].stores[0].value_schema  # type: ignore[index]
    assert value.count('"name":"A[4]"') == 6  # five inner, one outer


def test_nested_runs_are_refused_before_they_expand() -> None:
    text, line = _snapshot([f'0 "default" value {_nested(11)}'])  # 5**11: 48 million fields
    took, peak, error = _bounded(text)
    message = str(error)
    assert message.startswith(f"hostile.opid, line {line}: malformed value schema: ")
    assert f"more than {FILE_FIELDS} fields" in message and "\n" not in message
    assert took < 2 and peak < 20 << 20, (took, peak)


def test_many_rows_of_runs_are_refused_per_file() -> None:
    """Each row within the per-cell cap; 60 of them past the file's."""
    text, line = _many_rows()
    assert len(text) < 8_000
    start = time.perf_counter()  # untraced: tracemalloc slows the reading eightfold
    with pytest.raises(DocumentError) as caught:
        loads(text, origin="hostile.opid")
    took = time.perf_counter() - start
    assert f"more than {FILE_FIELDS} fields" in str(caught.value)
    # the committed snapshot's own schemas count too: the fourth row is past the cap
    assert str(caught.value).startswith(f"hostile.opid, line {line + 3}: malformed value schema")
    assert took < 15, took


def test_a_run_with_a_long_prefix_is_refused_before_its_names_are_made() -> None:
    prefix = "p" * 5_000
    text, _ = _snapshot([f'0 "default" value struct<`{prefix}[0]`..`{prefix}[99999]`: bigint>'])
    took, peak, error = _bounded(text)
    assert "MiB of schema JSON" in str(error)
    assert took < 2 and peak < 20 << 20, (took, peak)


def test_a_deep_json_schema_is_refused_by_the_reader_naming_the_row() -> None:
    # written as text: json.dumps itself cannot go 3,000 deep
    deep = '{"type":"array","elementType":' * 3_000 + '"long"' + ',"containsNull":true}' * 3_000
    quoted = json.dumps(deep)
    text, line = _snapshot(['0 "default" value ' + quoted])
    took, _, error = _bounded(text)
    assert str(error).startswith(f"hostile.opid, line {line}: malformed value schema: types nested")
    assert took < 2


def test_a_json_schema_as_deep_as_the_checks_walk_still_reads() -> None:
    kind: object = "long"
    for _ in range(60):
        kind = {"type": "array", "elementType": kind, "containsNull": True}
    text, _ = _snapshot(['0 "default" value ' + json.dumps(json.dumps(kind))])
    assert loads(text).state_operators


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS is enforced on Linux")
@pytest.mark.parametrize("hostile", ["nested", "many rows"])
def test_a_hostile_snapshot_reads_within_an_address_space_limit(
    hostile: str, tmp_path: Path
) -> None:
    """In a child limited to 512 MiB of address space and 60 s: one line naming the file and
    row, exit 2, where the old reader took 2.4 GB (nested) or 390 MB more (many rows)."""
    path = tmp_path / "hostile.opid"
    text, _ = (
        _snapshot([f'0 "default" value {_nested(11)}']) if hostile == "nested" else _many_rows()
    )
    path.write_text(text)
    code = textwrap.dedent(
        f"""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_AS, (512 << 20, 512 << 20))
        from pytest_opid.errors import DocumentError
        from pytest_opid.io.snapshot import read_snapshot
        try:
            read_snapshot({str(path)!r})
        except DocumentError as error:
            print(error)
            sys.exit(2)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stdout.count("\n") == 1 and "hostile.opid, line " in done.stdout
    assert "malformed value schema" in done.stdout
