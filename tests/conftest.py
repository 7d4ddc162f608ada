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
    from pytest_opid.inputs import data_formats

    for info in pkgutil.walk_packages(pytest_opid.__path__, prefix="pytest_opid."):
        if info.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(info.name)
        except ImportError:  # an optional dependency (syrupy, hypothesis) is missing
            continue
    data_formats()  # loads the engines into the registry


_import_the_whole_package()


# -- PySpark lines ---------------------------------------------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "spark_line(version, last=None, reason=...): the test needs Spark `version` (X.Y) or "
        "later (up to `last`); on another installed PySpark line it is deselected (counted in "
        "the summary), not skipped",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the tests whose ``spark_line`` is newer than the installed PySpark's line, and
    say once how many and why: a feature that line lacks (transformWithState before 4.0), or
    real-engine data whose truth is a newer line's restarts."""
    from pytest_opid.spark.versions import installed_line, installed_version, parse_line

    if installed_version() is None:
        return
    have = installed_line()
    kept, dropped = [], []
    reasons: dict[str, int] = {}
    for item in items:
        marker = item.get_closest_marker("spark_line")
        if marker is None:
            kept.append(item)
            continue
        first = parse_line(marker.args[0], "spark_line")
        last = marker.kwargs.get("last")
        if have < first or (last is not None and have > parse_line(last, "spark_line")):
            dropped.append(item)
            lines = f"Spark {first}" + (f" to {last}" if last and last != str(first) else "")
            lines += "" if last else "+"
            why = f"{lines}: {marker.kwargs.get('reason', '')}"
            reasons[why] = reasons.get(why, 0) + 1
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
        config.stash[_DESELECTED] = (str(have), reasons)


_DESELECTED = pytest.StashKey[tuple[str, dict[str, int]]]()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    found = terminalreporter.config.stash.get(_DESELECTED, None)
    if found is None:
        return
    have, reasons = found
    terminalreporter.write_line(f"PySpark {have}: deselected, for the Spark lines they name:")
    for why, count in sorted(reasons.items()):
        terminalreporter.write_line(f"  {count:4d}  {why}")


@pytest.fixture(autouse=True)
def _not_on_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same output whether or not the suite runs on a CI service: pytest prints a failure's
    whole message in its short summary when ``CI`` or ``BUILD_NUMBER`` is set, which the
    in-process pytester runs would inherit (tests count lines of that output)."""
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("BUILD_NUMBER", raising=False)
