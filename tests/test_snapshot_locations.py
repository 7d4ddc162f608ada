"""How a committed snapshot keeps a location (pytest_opid.snapshot_locations): under the run's
temporary folders by its folder's name (byte-stable across runs and machines), under the
project's root relative to it, anywhere else whole and without credentials; and how a kept
form, including the ``…/<folder>`` every location had in snapshots written before, matches."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_opid.snapshot_locations import matches_kept, set_roots, snapshot_location


@pytest.fixture
def roots() -> Iterator[tuple[Path, Path]]:
    """A --basetemp outside the system's temporary folder, and a project root (neither is
    read or written)."""
    basetemp, project = Path("/srv/opid-basetemp-test"), Path("/srv/opid-project-test")
    before = set_roots([str(basetemp)], str(project))
    try:
        yield basetemp, project
    finally:
        set_roots(*before)


def test_a_temporary_folder_is_kept_by_its_name(roots: tuple[Path, Path]) -> None:
    basetemp, _ = roots
    system = Path(tempfile.gettempdir())
    for where in (system / "pytest-of-a" / "pytest-7" / "t0" / "out", basetemp / "t1" / "out"):
        assert snapshot_location(str(where)) == "…/out"
        assert snapshot_location(f"file://{where}/") == "…/out"


def test_elsewhere_is_kept_whole_and_a_move_is_seen(roots: tuple[Path, Path]) -> None:
    assert snapshot_location("/warehouse/v1/out") == "/warehouse/v1/out"
    assert snapshot_location("s3a://AKID:SECRET@bucket/v1/out") == "s3a://bucket/v1/out"
    assert snapshot_location("/warehouse/v1/out") != snapshot_location("/warehouse/v2/out")


def test_the_project_is_kept_relative_to_its_root(roots: tuple[Path, Path]) -> None:
    _, project = roots
    assert snapshot_location(str(project / "data" / "out")) == "<rootdir>/data/out"


def test_kept_forms_match_what_they_stand_for() -> None:
    assert matches_kept("…/out", "/warehouse/v1/out") is True  # a snapshot written before
    assert matches_kept("…/out", "s3a://b/v2/out/") is True
    assert matches_kept("…/out", "/warehouse/v1/out2") is False
    assert matches_kept("<rootdir>/data/out", "/home/ci/checkout/data/out") is True
    assert matches_kept("<rootdir>/data/out", "/home/ci/checkout/other/out") is False
    assert matches_kept("<rootdir>/data/out", "…/out") is True
    assert matches_kept("/warehouse/v1/out", "/warehouse/v1/out") is None
