"""Shared test configuration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="session")
def golden_cases() -> list[dict]:
    """The 290 Flink 2.3.0 golden cases, vendored from ../shared/flink-golden."""
    with (DATA / "cases.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]
