"""The pytest plugin: ``@pytest.mark.stable_topology``, the ``opid`` fixture, ``--opid-report``.

A marked test records one or more topologies with ``opid.record(obj, name=None)``. Once the test
body has passed, every recorded topology is compared with its syrupy snapshot through
:class:`~pytest_opid.plugin.extension.TopologySnapshotExtension`; if state would be lost (or a
chain changed, where chains are held stable) the test fails with
:func:`pytest_opid.render.explain.render`'s explanation. ``pytest --snapshot-update`` writes the
snapshots, as for any syrupy snapshot.

Nothing is lost: a snapshot is the user's record of production, so only a marked test whose body
passed may replace its snapshot, and a test that fails (in setup, in its body or in the check)
keeps it: syrupy would otherwise count it unused and delete it under ``--snapshot-update``
(:func:`_keep_snapshots`). Two tests whose snapshots resolve to one file are an error naming both
(:meth:`Recorder._claim`), and the extension writes atomically and refuses links and directories.

The fixture's object is :mod:`.recorder`'s, the marker's arguments are read by :mod:`.marker`,
snapshot file places and names by :mod:`.snapshot_files`, and what a session keeps and says at
its end by :mod:`.session` (its hooks are imported here, which registers them).

pytest imports this module for every session once the package is installed (``pytest11`` entry
point), so it imports nothing but pytest (and these small modules) at module level: the
fingerprint core, syrupy's extension machinery and the report load only when a test uses the
fixture or the report is on.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import pytest

from pytest_opid.plugin.marker import CHECKS, MARKER, MARKER_SIGNATURE, marker_options
from pytest_opid.plugin.recorder import OpidRestoreWarning, OpidSnapshotWarning, Recorder
from pytest_opid.plugin.session import (  # hooks: registered with this module
    SESSION,
    Session,
    pytest_deselected,
    pytest_sessionfinish,
    pytest_terminal_summary,
    pytest_testnodedown,
    safe,
)
from pytest_opid.plugin.snapshot_files import snapshot_index
from pytest_opid.plugin.syrupy_compat import location_of, new_assertion, syrupy_session
from pytest_opid.snapshot_locations import set_roots

__all__ = [
    "MARKER",
    "OpidRestoreWarning",
    "OpidSnapshotWarning",
    "Recorder",
    "pytest_deselected",
    "pytest_sessionfinish",
    "pytest_terminal_summary",
    "pytest_testnodedown",
]

_RECORDER = pytest.StashKey["Recorder"]()
_ROOTS = pytest.StashKey[tuple[tuple[str, ...], str | None]]()


# -- registration -------------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup(
        "opid", "opid: changes that break a streaming job's restart, Spark or Flink (pytest-opid)"
    )
    group.addoption(
        "--opid-report",
        action="store_true",
        default=None,
        dest="opid_report",
        help="at the end of the session, print every recorded topology with its stages (Flink: "
        "job vertices) and operators (ini: opid_report)",
    )
    group.addoption(
        "--opid-html",
        default=None,
        dest="opid_html",
        metavar="PATH",
        help="write one self-contained HTML report of every recorded topology to PATH: "
        "failures first, each with its explanation and picture",
    )
    group.addoption(
        "--opid-allow-reinterpreted-state",
        action="store_true",
        default=False,
        dest="opid_allow_reinterpreted_state",
        help="Spark: pass marked tests whose change Spark restarts on but whose state a "
        "stateful operator would read under another meaning (a changed grouping key, "
        "aggregate, window, deduplication column...): results would be wrong; each such "
        "change is still reported as a warning",
    )
    group.addoption(
        "--opid-deployed",
        action="store_true",
        default=False,
        dest="opid_deployed",
        help="with --snapshot-update, on a checkout of the version that wrote previous='s "
        "checkpoint: a marked test with previous= and no snapshot yet records its snapshot as "
        "that version's (the restart is still checked against the checkpoint)",
    )
    group.addoption(
        "--opid-check",
        choices=CHECKS,
        default=None,
        dest="opid_check",
        help="what @pytest.mark.stable_topology holds stable when the marker does not say: "
        "default (a streaming job its state, a batch job its stages), ids (state), chains "
        "(stages; Flink: job vertices) or both "
        "(ini: opid_check)",
    )
    parser.addini(
        "opid_check",
        "default check of @pytest.mark.stable_topology: default, ids, chains or both",
        default="default",
    )
    parser.addini(
        "opid_report", "print the --opid-report table by default", type="bool", default=False
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}({MARKER_SIGNATURE}): compare what this test records with "
        "opid.record() against its syrupy snapshot and fail when the change would break the "
        "job's restart: Spark streaming, a stateful operator that would not find its "
        "state/<n> on the old checkpoint, a state schema Spark refuses, or state read under "
        "another meaning; Flink, an operator whose state a savepoint would not restore. "
        "check='ids' holds the state, 'chains' the stages (Flink: job vertices), 'both' "
        "both; by default a streaming job's state, a batch job's stages. previous= also "
        "checks against a real checkpoint, savepoint or saved fingerprint; "
        "allow_reinterpreted_state=True passes a Spark restart that reads state under "
        "another meaning (still reported); allow_unverified=True passes a previous= whose "
        "state's meaning could not be checked (no snapshot of the query that wrote the "
        "checkpoint); allow_non_restored_state=True (Flink) accepts "
        "state the new job drops; name= names the snapshot. After a safe deploy, accept "
        "the change: pytest --snapshot-update",
    )
    if config.getoption("opid_deployed") and not config.getoption("update_snapshots", False):
        raise pytest.UsageError(
            "--opid-deployed records the deployed version's snapshots: give it with "
            "--snapshot-update"
        )
    check = config.getoption("opid_check") or config.getini("opid_check") or "default"
    if check not in CHECKS:
        raise pytest.UsageError(f"opid_check must be one of {', '.join(CHECKS)}, got {check!r}")
    report = config.getoption("opid_report")
    if report is None:
        report = bool(config.getini("opid_report"))
    config.stash[SESSION] = Session(check, report, [], html=config.getoption("opid_html"))
    # Snapshots keep a location under the run's temporary folders by its folder's name, one
    # under the rootdir relative to it (pytest_opid.snapshot_locations).
    basetemp = config.getoption("basetemp", None)
    config.stash[_ROOTS] = set_roots([str(basetemp)] if basetemp else [], str(config.rootpath))


def pytest_unconfigure(config: pytest.Config) -> None:
    if _ROOTS in config.stash:  # a pytest run inside a test (pytester): the outer run's roots
        set_roots(*config.stash[_ROOTS])


# -- the fixture --------------------------------------------------------------------------------


@pytest.fixture
def opid(request: pytest.FixtureRequest) -> Recorder:
    """Record topologies to hold stable: ``opid.record(stream_or_topology, name=None)``.

    Only in tests marked ``@pytest.mark.stable_topology``; the check runs after the test body.
    """
    recorder = Recorder(request)
    request.node.stash[_RECORDER] = recorder
    return recorder


# -- the check ----------------------------------------------------------------------------------


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker(MARKER) is not None:
        marker_options(item)  # a misspelt marker is an error in setup, fixture or not


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    result = yield
    if item.get_closest_marker(MARKER) is None:
        return result
    recorder = item.stash.get(_RECORDER, None)
    if recorder is None or not recorder._entries:
        how = (
            "call opid.record(<stream, Topology or topology document>) in it"
            if recorder is not None
            else "request the `opid` fixture and call opid.record(<stream, Topology or "
            "topology document>) in it"
        )
        pytest.fail(
            f"{item.nodeid} is marked @pytest.mark.stable_topology but records no topology, "
            f"so there is nothing to hold stable: {how}, or drop the marker",
            pytrace=False,
        )
    recorder._report()
    failures = recorder._verify()
    picture = recorder._picture("\n\n".join(failures) if failures else None)
    if failures:
        pytest.fail(safe("\n\n".join(failures) + picture), pytrace=False)
    item.config.stash[SESSION].stale.extend(recorder._stale)
    item.config.stash[SESSION].other_versions.extend(recorder._other_versions)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Any:
    report = yield
    if (
        report.failed
        and report.when in ("setup", "call")
        and item.get_closest_marker(MARKER) is not None
    ):
        _keep_snapshots(item)
    return report


def _keep_snapshots(item: pytest.Item) -> None:
    """A marked test failed (setup, body or check): tell syrupy its snapshots are in use.

    syrupy deletes, under ``--snapshot-update``, every snapshot of a test that ran without
    asserting it (``SnapshotReport.unused``: discovered minus used), so a test that failed before
    its check would lose its baseline. "Used" is whatever an assertion's results name. A
    ``keep`` assertion (see :class:`~pytest_opid.plugin.extension.TopologySnapshotExtension`)
    reads, compares and writes nothing, never matches and is created with
    ``update_snapshots=False``, so its only effect is one failed, used result per snapshot: the
    summary counts it as failed, the file stays byte for byte, and pytest-xdist carries it to the
    controller in the worker's report like any result. Which snapshots: every file in the
    module's snapshot directory whose name this test's location and some index produce (the
    test may have failed before recording anything), plus what it recorded; minus those the
    check already asserted.
    """
    if syrupy_session(item.config) is None or not isinstance(item, pytest.Function):
        return
    from pytest_opid.plugin.extension import TopologySnapshotExtension as Extension

    location = location_of(item)
    recorder = item.stash.get(_RECORDER, None)
    indices: list[int | str] = [e.key for e in recorder._entries] if recorder else []
    base = Extension.get_snapshot_name(test_location=location, index=0)
    directory = Extension.dirname(test_location=location)
    with contextlib.suppress(OSError):
        for name in sorted(os.listdir(directory)):
            index = snapshot_index(name, base)
            if index is not None:
                indices.append(index)
    done = recorder._asserted if recorder else set()
    keep: dict[str, int | str] = {}
    for index in indices:
        path = Extension.get_location(test_location=location, index=index)
        if path not in done and path not in keep and os.path.lexists(path):
            keep[path] = index
    for index in keep.values():
        assertion = new_assertion(item, Extension, location, update=False)
        assertion.extension.keep = True
        # Index 0 is a fresh assertion's first; any other is passed as its name.
        _ = (assertion if index == 0 else assertion(name=index)) == ""


# -- the report ---------------------------------------------------------------------------------
