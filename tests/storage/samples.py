"""What the store tests upload and how they compare a reading from a URL with the local one:
one place for the S3, Azure and GCS tests (and the documented commands)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from pytest_opid.cli import main

DATA = Path(__file__).resolve().parents[1] / "data"
#: (data set, folder, index): real Spark checkpoints of 4.3, 3.5 and an upgrade.
SPARK_SAMPLE = [
    ("spark-restart", "checkpoints", 0),
    ("spark-restart", "checkpoints", 17),
    ("spark-restart-35", "checkpoints", 5),
    ("upgrade-restart", "checkpoints", 3),
]


def tarballs(data_set: str, folder: str) -> list[Path]:
    """A data set's archived checkpoints, in a stable order."""
    return sorted((DATA / data_set / folder).glob("*.tar.gz"))


def cases(path: Path) -> list[dict[str, Any]]:
    """The records of a gzipped JSON-lines case file."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``opid ARGV`` in this process: exit code, stdout, stderr."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def same_as_local(
    here: tuple[int, str, str], there: tuple[int, str, str], local: Path, url: str
) -> None:
    """The reading from ``url`` is the local one: the exit code, and the output with each
    location written as ``<location>``."""
    assert there[0] == here[0], there[2]
    assert there[1].replace(url, "<location>") == here[1].replace(str(local), "<location>")
