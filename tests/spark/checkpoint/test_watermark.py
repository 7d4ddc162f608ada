"""``opid checkpoint`` shows a watermark as ISO-8601 UTC next to Spark's epoch milliseconds
(issue 20); ``--json`` keeps the number and adds the ISO text."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from pytest_opid.cli import main
from pytest_opid.spark.checkpoint.text import watermark_iso
from tests.spark.restart_cases import extract, load_cases

CASES = load_cases()


@pytest.mark.parametrize(
    "ms, iso",
    [
        (1704067739000, "2024-01-01T00:08:59.000Z"),
        (1714557600123, "2024-05-01T10:00:00.123Z"),
        (1, "1970-01-01T00:00:00.001Z"),
        (-1, "1969-12-31T23:59:59.999Z"),
        (253402300799999, "9999-12-31T23:59:59.999Z"),
        (253402300800000, None),  # after year 9999: no ISO date, the number alone
        (-(10**18), None),
    ],
)
def test_watermark_iso(ms, iso):
    assert watermark_iso(ms) == iso


def test_text_shows_the_number_and_the_utc_time(tmp_path, capsys):
    folder = extract(CASES["window_agg__tumbling_to_sliding_window__100016"], tmp_path)
    assert main(["checkpoint", "--json", str(folder / "checkpoint")]) == 0
    data = json.loads(capsys.readouterr().out)
    ms = data["batch_watermark_ms"]
    assert isinstance(ms, int) and ms > 0  # the number stays a number
    iso = datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    assert data["batch_watermark_iso"] == iso == "2024-01-01T00:08:59.000Z"
    assert data["committed_watermark_iso"] == watermark_iso(data["committed_watermark_ms"])
    assert main(["checkpoint", str(folder / "checkpoint")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert f"  watermark: {ms} ms = {iso}" in lines
    committed = data["committed_watermark_ms"]
    assert (
        f"  next batch's watermark (last commit): {committed} ms = {watermark_iso(committed)}"
        in lines
    )


def test_no_watermark_yet_is_not_shown_as_1970(tmp_path, capsys):
    folder = extract(CASES["agg_user_sum__add_projection_downstream__100000"], tmp_path)
    assert main(["checkpoint", str(folder / "checkpoint")]) == 0
    text = capsys.readouterr().out
    assert "  watermark: 0 ms (none yet)\n" in text
    assert "1970" not in text
