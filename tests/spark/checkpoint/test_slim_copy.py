"""What the docs tell a team to keep of a checkpoint (no state data, only metadata and
schemas) is enough: the reading and the restart verdicts are the same."""

from __future__ import annotations

import gzip
import json
import tarfile
from pathlib import Path

import pytest

from pytest_opid.spark.checkpoint.read import read_checkpoint

DATA = Path(__file__).resolve().parents[2] / "data" / "spark-restart"
STATE_DATA = ("*.delta", "*.snapshot", "*.zip", "*.sst", "*.changelog", "*.crc")


def _cases() -> list[dict]:
    with gzip.open(DATA / "cases.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c["case"]["id"])
def test_a_checkpoint_without_its_state_data_reads_the_same(tmp_path, case):
    full, slim = tmp_path / "full", tmp_path / "slim"
    for target in (full, slim):
        with tarfile.open(DATA / case["checkpoint"]) as archive:
            archive.extractall(target, filter="data")
    removed = 0
    for pattern in STATE_DATA:
        for path in (slim / "checkpoint" / "state").rglob(pattern):
            path.unlink()
            removed += 1
    assert removed or not case["state_metadata"]  # a stateful query's data is gone
    expected = read_checkpoint(full / "checkpoint").to_dict()
    got = read_checkpoint(slim / "checkpoint").to_dict()
    expected.pop("path"), got.pop("path")
    assert got == expected
