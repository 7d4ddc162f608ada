"""The ``stable_topology`` marker: its arguments, as a test gives them, checked in one place."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_opid.engine_rules import Check

from pytest_opid.plugin.session import SESSION

__all__ = [
    "CHECKS",
    "MARKER",
    "MARKER_ARGUMENTS",
    "MARKER_SIGNATURE",
    "check_name",
    "marker_options",
]


MARKER = "stable_topology"

#: The marker's whole signature, as `pytest --markers` and the docs give it.
MARKER_SIGNATURE = (
    "check=None, name=None, previous=None, allow_non_restored_state=False, "
    "allow_reinterpreted_state=False, allow_unverified=False, spark_version=None"
)

CHECKS = ("default", "ids", "chains", "both")

MARKER_ARGUMENTS = {
    "check",
    "name",
    "previous",
    "allow_non_restored_state",
    "allow_reinterpreted_state",
    "allow_unverified",
    "spark_version",  # read by pytest_opid.plugin.spark
}

NAME_FORBIDDEN = set('\\/?*:|"<>[]')


def marker_options(item: pytest.Item) -> tuple[Check | None, str | None]:
    from pytest_opid.engine_rules import Check

    marker = item.get_closest_marker(MARKER)
    assert marker is not None
    unknown = sorted(set(marker.kwargs) - MARKER_ARGUMENTS)
    if unknown or len(marker.args) > 1:
        what = f"unknown argument {unknown[0]!r}" if unknown else "too many positional arguments"
        pytest.fail(
            f"@pytest.mark.{MARKER}: {what}; it takes check='ids'|'chains'|'both', name='...', "
            "previous='<savepoint, checkpoint or snapshot>', allow_non_restored_state=True, "
            "allow_reinterpreted_state=True, allow_unverified=True and spark_version='X.Y'",
            pytrace=False,
        )
    previous = marker.kwargs.get("previous")
    if previous is not None and not isinstance(previous, (str, Path)):
        pytest.fail(f"@pytest.mark.{MARKER}: previous= takes a path or a URL", pytrace=False)
    check = marker.kwargs.get("check", marker.args[0] if marker.args else None)
    if check is None:
        check = item.config.stash[SESSION].default_check
    problem: str | None = None
    try:
        # "default": each recorded job's own, Check.default_for(fingerprint)
        parsed = None if check in (None, "", "default") else Check.parse(check)
    except ValueError as exc:
        problem = str(exc)
    if problem is not None:
        pytest.fail(f"@pytest.mark.{MARKER}: {problem}", pytrace=False)
    name = marker.kwargs.get("name")
    if name is not None:
        check_name(name)
    return parsed, name


def check_name(name: Any) -> None:
    if not isinstance(name, str) or not name.strip():
        pytest.fail(f"a snapshot name must be a non-empty string, got {name!r}", pytrace=False)
    bad = sorted({c for c in name if c in NAME_FORBIDDEN or not c.isprintable()})
    if bad:
        pytest.fail(
            f"snapshot name {name!r} contains {''.join(bad)!r}, which cannot be part of a "
            "snapshot file name",
            pytrace=False,
        )
