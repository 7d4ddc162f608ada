"""The pytest plugin: ``@pytest.mark.stable_topology``, the ``opid`` fixture, ``--opid-report``.

A marked test records one or more topologies with ``opid.record(obj, name=None)``. Once the test
body has passed, every recorded topology is compared with its syrupy snapshot through
:class:`~pytest_opid.plugin.extension.TopologySnapshotExtension`; if state would be lost (or a chain
changed, where chains are held stable) the test fails with :func:`pytest_opid.render.explain.render`'s
explanation. ``pytest --snapshot-update`` writes the snapshots, as for any syrupy snapshot.

pytest imports this module for every session once the package is installed (``pytest11`` entry
point), so it imports nothing but pytest at module level: the fingerprint core, syrupy's
extension machinery and the report load only when a test uses the fixture or the report is on.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_opid.compare import Check
    from pytest_opid.result import Fingerprint

__all__ = ["MARKER", "OpidSnapshotWarning", "Recorder"]

MARKER = "stable_topology"
_CHECKS = ("ids", "chains", "both")
_NAME_FORBIDDEN = set('\\/?*:|"<>[]')


class OpidSnapshotWarning(UserWarning):
    """The topology passed its check but differs from the snapshot in what is not held stable
    (typically: new operators whose IDs nothing protects yet)."""


@dataclass
class _Session:
    """Per-session state: the resolved options and the ``--opid-report`` blocks."""

    default_check: str
    report: bool
    blocks: list[list[str]]  # [nodeid + snapshot name (sort key), rendered block]


_SESSION = pytest.StashKey[_Session]()
_RECORDER = pytest.StashKey["Recorder"]()


# -- registration -------------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup(
        "opid", "opid: stable Flink OperatorIDs and operator chains (pytest-opid)"
    )
    group.addoption(
        "--opid-report",
        action="store_true",
        default=None,
        dest="opid_report",
        help="at the end of the session, print every recorded topology with its job vertices "
        "and OperatorIDs (ini: opid_report)",
    )
    group.addoption(
        "--opid-check",
        choices=_CHECKS,
        default=None,
        dest="opid_check",
        help="what @pytest.mark.stable_topology holds stable when the marker does not say: "
        "ids, chains or both (ini: opid_check; default: both)",
    )
    parser.addini(
        "opid_check",
        "default check of @pytest.mark.stable_topology: ids, chains or both",
        default="both",
    )
    parser.addini(
        "opid_report", "print the --opid-report table by default", type="bool", default=False
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(check='both', name=None): compare the topologies this test records with "
        "opid.record() against its syrupy snapshot and fail when Flink would not restore "
        "their state (check='ids'), when an operator chain splits or merges (check='chains'), "
        "or either (check='both'); name= names the snapshot. Update: pytest --snapshot-update",
    )
    check = config.getoption("opid_check") or config.getini("opid_check") or "both"
    if check not in _CHECKS:
        raise pytest.UsageError(f"opid_check must be one of {', '.join(_CHECKS)}, got {check!r}")
    report = config.getoption("opid_report")
    if report is None:
        report = bool(config.getini("opid_report"))
    config.stash[_SESSION] = _Session(check, report, [])


# -- the fixture --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Entry:
    key: int | str  # syrupy's snapshot index: a number, or a name (``test[name]``)
    fingerprint: Fingerprint


class Recorder:
    """The ``opid`` fixture: collects the topologies a test holds stable."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self._item = request.node
        self._marker = request.node.get_closest_marker(MARKER)
        self._entries: list[_Entry] = []
        self._unnamed = 0
        self._snapshot: Any = None
        if self._marker is not None:
            self._check, self._name = _marker_options(self._item)
            with contextlib.suppress(pytest.FixtureLookupError):  # syrupy not installed
                self._snapshot = request.getfixturevalue("snapshot")
            if self._snapshot is None:
                pytest.fail(
                    "@pytest.mark.stable_topology needs syrupy for its snapshots: "
                    "pip install 'pytest-opid[pytest]'",
                    pytrace=False,
                )

    @property
    def recorded(self) -> tuple[Fingerprint, ...]:
        return tuple(e.fingerprint for e in self._entries)

    def record(self, obj: Any, name: str | None = None) -> Fingerprint:
        """Hold the topology of ``obj`` stable: anything :func:`pytest_opid.fingerprint`
        accepts (a builder stream, a Topology, a topology document or Flink plan, a saved
        fingerprint, a PySpark DataFrame). ``name`` tells several topologies of one test apart
        (the snapshot becomes ``test_name[name]``). Returns the fingerprint."""
        if self._marker is None:
            pytest.fail(
                f"{self._item.nodeid} records a topology with opid.record() but is not marked "
                "@pytest.mark.stable_topology, so nothing would check it: add the marker "
                "(to the test, its class or its module's pytestmark) or drop the record() call",
                pytrace=False,
            )
        if name is not None:
            _check_name(name)
        from pytest_opid.io.registry import fingerprint

        fp = fingerprint(obj)
        key: int | str
        if name is not None:
            key = name
        elif self._name is not None:
            key = self._name if self._unnamed == 0 else f"{self._name}.{self._unnamed}"
            self._unnamed += 1
        else:
            key = self._unnamed
            self._unnamed += 1
        if any(e.key == key for e in self._entries):
            pytest.fail(
                f"{self._item.nodeid} records two topologies named {key!r}; give each "
                "opid.record() call its own name=",
                pytrace=False,
            )
        self._entries.append(_Entry(key, fp))
        return fp

    def _verify(self) -> list[str]:
        """Assert every recorded topology against its snapshot; the failure messages."""
        from pytest_opid.compare import compare
        from pytest_opid.errors import DocumentError
        from pytest_opid.io.snapshot import loads
        from pytest_opid.plugin.extension import TopologySnapshotExtension
        from pytest_opid.render.explain import render

        config = self._item.config
        numbered = named = None
        failures = []
        for entry in self._entries:
            # One assertion numbers the unnamed recordings 0, 1, ... as syrupy does; named
            # ones go through another so that they do not take a number.
            if isinstance(entry.key, int):
                if numbered is None:
                    numbered = self._assertion(TopologySnapshotExtension)
                assertion = numbered
                ok = assertion == entry.fingerprint
            else:
                if named is None:
                    named = self._assertion(TopologySnapshotExtension)
                assertion = named
                ok = assertion(name=entry.key) == entry.fingerprint
            result = assertion.executions[assertion.num_executions - 1]
            where = _relative(result.snapshot_location, config.rootpath)
            title = f"Snapshot {result.snapshot_name} ({where}):"
            if ok:
                if not (result.created or result.updated) and (
                    result.recalled_data != result.asserted_data
                ):
                    self._warn_unprotected(result, entry.fingerprint, title)
                continue
            if result.exception is not None:
                failures.append(f"{title}\ncould not be compared: {result.exception!r}")
            elif result.recalled_data is None:
                failures.append(
                    f"{title}\nno snapshot yet; create it with pytest --snapshot-update"
                )
            else:
                try:
                    old = loads(str(result.recalled_data), origin=where)
                except DocumentError as exc:
                    failures.append(f"{title}\n{exc}; recreate it with pytest --snapshot-update")
                    continue
                # The recorded fingerprint itself, not its snapshot text parsed back.
                try:
                    text = render(compare(old, entry.fingerprint), self._check)
                except DocumentError as exc:
                    text = f"{exc}; recreate it with pytest --snapshot-update"
                failures.append(f"{title}\n{text}")
        return failures

    def _assertion(self, extension_class: type) -> Any:
        assertion = self._snapshot.use_extension(extension_class)
        assertion.extension.check = self._check
        assertion.extension.exact = bool(self._item.config.option.update_snapshots)
        return assertion

    def _warn_unprotected(self, result: Any, recorded: Fingerprint, title: str) -> None:
        """The check passed, but the snapshot misses something the engine's rules say is
        unprotected (typically new operators whose IDs nothing holds stable yet)."""
        from pytest_opid.compare import compare
        from pytest_opid.errors import DocumentError
        from pytest_opid.io.snapshot import loads

        try:
            comparison = compare(loads(str(result.recalled_data)), recorded)
        except DocumentError:
            return
        warning = comparison.rules.added_warning(comparison)
        if warning:
            self._item.warn(OpidSnapshotWarning(f"{title} {warning}"))

    def _report(self) -> None:
        session = self._item.config.stash[_SESSION]
        if not session.report:
            return
        from pytest_opid.render.report import render_topology

        for entry in self._entries:
            suffix = "" if entry.key == 0 else f"[{entry.key}]"
            title = f"{self._item.nodeid}{suffix}"
            session.blocks.append([title, render_topology(title, entry.fingerprint)])


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
        _marker_options(item)  # a misspelt marker is an error in setup, fixture or not


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
    if failures:
        pytest.fail("\n\n".join(failures), pytrace=False)
    return result


def _marker_options(item: pytest.Item) -> tuple[Check, str | None]:
    from pytest_opid.compare import Check

    marker = item.get_closest_marker(MARKER)
    assert marker is not None
    unknown = sorted(set(marker.kwargs) - {"check", "name"})
    if unknown or len(marker.args) > 1:
        what = f"unknown argument {unknown[0]!r}" if unknown else "too many positional arguments"
        pytest.fail(
            f"@pytest.mark.{MARKER}: {what}; it takes check='ids'|'chains'|'both' and name='...'",
            pytrace=False,
        )
    check = marker.kwargs.get("check", marker.args[0] if marker.args else None)
    if check is None:
        check = item.config.stash[_SESSION].default_check
    try:
        parsed = Check.parse(check)
    except ValueError as exc:
        problem = str(exc)
    else:
        problem = None
    if problem is not None:
        pytest.fail(f"@pytest.mark.{MARKER}: {problem}", pytrace=False)
    name = marker.kwargs.get("name")
    if name is not None:
        _check_name(name)
    return parsed, name


def _check_name(name: Any) -> None:
    if not isinstance(name, str) or not name.strip():
        pytest.fail(f"a snapshot name must be a non-empty string, got {name!r}", pytrace=False)
    bad = sorted({c for c in name if c in _NAME_FORBIDDEN or not c.isprintable()})
    if bad:
        pytest.fail(
            f"snapshot name {name!r} contains {''.join(bad)!r}, which cannot be part of a "
            "snapshot file name",
            pytrace=False,
        )


def _relative(location: str, root: Path) -> str:
    try:
        return str(Path(location).relative_to(root))
    except ValueError:
        return location


# -- the report ---------------------------------------------------------------------------------


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    state = config.stash.get(_SESSION, None)
    workeroutput = getattr(config, "workeroutput", None)
    if state is not None and state.report and workeroutput is not None:
        workeroutput["opid_report"] = state.blocks  # pytest-xdist: hand over to the controller


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """pytest-xdist controller: collect the report blocks of a finished worker."""
    state = node.config.stash.get(_SESSION, None)
    output = getattr(node, "workeroutput", None) or {}
    if state is not None and state.report:
        state.blocks.extend(output.get("opid_report", ()))


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    state = config.stash.get(_SESSION, None)
    if state is None or not state.report or hasattr(config, "workerinput"):
        return
    from pytest_opid.render.report import render_report

    count = len(state.blocks)
    terminalreporter.write_sep(
        "=", f"pytest-opid: {count} recorded topolog{'y' if count == 1 else 'ies'}"
    )
    if not state.blocks:
        terminalreporter.write_line("no test recorded a topology (opid.record)")
        return
    for line in render_report((title, text) for title, text in state.blocks).splitlines():
        terminalreporter.write_line(line)
