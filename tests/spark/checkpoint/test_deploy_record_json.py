"""The deploy record is JSON or nothing (issue 48): a record whose body is not a saved
fingerprint (a JSON object of its shape) is set aside with one line that names no other file.
Before, a body that was not JSON was taken for a path: the file it named was opened, a local
JSON file's key names echoed, a local saved fingerprint trusted as the deploy record. Read from a
real Spark 4.3 checkpoint (tests/data/spark-restart), without a SparkSession."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_opid.io.storage import locate
from pytest_opid.spark.checkpoint.read import read_checkpoint
from pytest_opid.spark.deployed import RECORD_NAME, read_record
from tests.spark.restart_cases import extract, load_cases

CASE = "agg_user_sum__add_projection_downstream__100000"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = extract(load_cases()[CASE], tmp_path_factory.mktemp("record"))
    return folder / "checkpoint"


@pytest.mark.parametrize(
    "body",
    [
        "PATH",  # the path of a local JSON file
        "file://PATH",
        '"PATH"',  # JSON, but a string
        "[1, 2]",
        '{"aws_secret_access_key_name": 1}',  # an object of another shape
        "",
        "\ufeff   ",
    ],
)
@pytest.mark.parametrize("as_url", [False, True])
def test_a_record_that_is_not_a_saved_fingerprint_is_set_aside(
    body: str, as_url: bool, checkpoint: Path, tmp_path: Path
) -> None:
    local = tmp_path / "elsewhere.json"
    local.write_text(json.dumps({"aws_secret_access_key_name": 1}), encoding="utf-8")
    (checkpoint / RECORD_NAME).write_text(body.replace("PATH", str(local)), encoding="utf-8")
    where = locate(checkpoint.as_uri()) if as_url else checkpoint
    record = read_record(where, read_checkpoint(where))
    assert record is not None and record.fingerprint is None
    note = record.note or ""
    assert note.startswith(f"{RECORD_NAME} in the checkpoint: "), note
    assert str(local) not in note and "elsewhere" not in note and "\n" not in note
    if "aws_secret" not in body:
        assert "aws_secret" not in note  # the other file's keys are never read
