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


def _import_the_whole_package() -> None:
    """Import every module of pytest_opid once, in the outer test process.

    pytester's in-process runs restore ``sys.modules`` afterwards, dropping modules first
    imported inside them. The package loads lazily, so without this a later run would import
    fresh copies of some modules (new enum classes) next to kept copies of others, and
    identity checks such as ``partitioner is Partitioner.FORWARD`` would quietly fail. A user's
    process imports each module once; only test harnesses that purge modules need this.
    """
    import importlib
    import pkgutil

    import pytest_opid
    from pytest_opid.io.registry import data_formats

    for info in pkgutil.walk_packages(pytest_opid.__path__, prefix="pytest_opid."):
        if info.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(info.name)
        except ImportError:  # an optional dependency (syrupy, hypothesis) is missing
            continue
    data_formats()  # loads the engines into the registry


_import_the_whole_package()
