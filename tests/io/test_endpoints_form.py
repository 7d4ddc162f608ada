"""A fingerprint's sink and sources (``Fingerprint.endpoints``) in the saved form and the
snapshot: read back exactly by both readers, refused in one line where malformed, and a changed
sink path one changed snapshot line."""

from __future__ import annotations

import dataclasses
import difflib
import json

import pytest

from pytest_opid.errors import DocumentError
from pytest_opid.io.snapshot import dumps, loads
from pytest_opid.result import ChainedOperator, Fingerprint, JobVertex, OperatorFingerprint

HEX = "0123456789abcdef0123456789abcdef"

ROWS = (
    ("source 0", "format", "json"),
    ("source 0", "path", "/data/in é"),
    ("source 0", "option maxFileAge", "7d"),
    ("sink", "kind", "file"),
    ("sink", "format", "parquet"),
    ("sink", "path", "/data/out"),
    ("sink", "partitionBy", "day, name"),
    ("sink", "outputMode", "append"),
    ("sink", "trigger", "ProcessingTimeTrigger(5000)"),
    ("sink", "queryName", 'a "quoted"\tvalue'),
)


def streaming(endpoints: tuple[tuple[str, str, str], ...] | None) -> Fingerprint:
    ops = (OperatorFingerprint(0, "Project", HEX, parallelism=2, job_vertex=HEX),)
    vertices = (JobVertex(HEX, "stage 0", 2, (ChainedOperator(HEX),), (0,)),)
    return Fingerprint(
        ops, vertices, (), "spark", "streaming", ("FileSource json …/in",), endpoints=endpoints
    )


@pytest.mark.parametrize("rows", [ROWS, (), None])
def test_saved_form_and_snapshot_read_back_the_rows(
    rows: tuple[tuple[str, str, str], ...] | None,
) -> None:
    fp = streaming(rows)
    text = fp.to_json()
    assert Fingerprint.from_json(text).endpoints == rows
    assert Fingerprint.decode_fast(text) == fp
    assert Fingerprint.decode_fast(text).endpoints == rows  # type: ignore[union-attr]
    assert loads(dumps(fp)).endpoints == rows
    assert ("endpoints" in json.loads(text)) is (rows is not None)


def test_a_changed_sink_path_is_one_changed_snapshot_line() -> None:
    before = dumps(streaming(ROWS))
    moved = tuple((e, f, "/data/out2" if (e, f) == ("sink", "path") else v) for e, f, v in ROWS)
    after = dumps(streaming(moved))
    changed = [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="")
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    assert [line.split() for line in changed] == [
        ['-"sink"', '"path"', '"/data/out"'],
        ['+"sink"', '"path"', '"/data/out2"'],
    ]


@pytest.mark.parametrize(
    "row",
    [["sink", "path"], ["sink", "path", 3], "sink", ["a", "b", "c", "d"]],
)
def test_a_malformed_row_is_one_line_naming_it(row: object) -> None:
    data = streaming(ROWS).to_dict()
    data["endpoints"][1] = row
    text = json.dumps(data)
    assert Fingerprint.decode_fast(text) is None
    with pytest.raises(DocumentError) as caught:
        Fingerprint.from_json(text)
    message = str(caught.value)
    assert "endpoints[1]" in message
    assert "\n" not in message


def test_a_snapshot_row_needs_three_cells() -> None:
    lines = dumps(streaming(ROWS)).splitlines()
    at = next(i for i, line in enumerate(lines) if line.split()[:2] == ['"sink"', '"kind"'])
    lines[at] = '"sink" "kind"'
    text = "\n".join(lines) + "\n"
    with pytest.raises(DocumentError) as caught:
        loads(text)
    assert "\n" not in str(caught.value)


def test_endpoints_are_part_of_the_identity() -> None:
    assert streaming(ROWS) != dataclasses.replace(streaming(ROWS), endpoints=ROWS[:-1])
