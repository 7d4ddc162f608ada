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


def _register_hypothesis_profiles() -> None:
    """``ci`` (selected by tox): derandomized, more examples, no deadline; ``default`` stays fast
    for local runs. Registered here because the profile must exist before pytest configures."""
    try:
        from hypothesis import HealthCheck, settings
    except ImportError:  # the core tests run without hypothesis
        return
    settings.register_profile(
        "ci",
        derandomize=True,
        max_examples=200,
        deadline=None,
        database=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow],
    )
    settings.register_profile("default", max_examples=50, deadline=None)


_register_hypothesis_profiles()
