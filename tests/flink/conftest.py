"""The real Flink savepoints of tests/data/flink-restore, extracted once per test session."""

from __future__ import annotations

import gzip
import json
import tarfile
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent.parent / "data" / "flink-restore"


@pytest.fixture(scope="session")
def extracted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every archive, extracted once per session into ``<tmp>/<seed>/``."""
    root = tmp_path_factory.mktemp("flink-restore")
    with gzip.open(DATA / "cases.jsonl.gz", "rt", encoding="utf-8") as f:
        cases = [json.loads(line) for line in f]
    for case in cases:
        target = root / str(case["case"]["seed"])
        with tarfile.open(DATA / case["savepoint"], "r:gz") as tar:
            tar.extractall(target, filter="data")
    return root
