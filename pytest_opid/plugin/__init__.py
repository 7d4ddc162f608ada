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

pytest imports this module for every session once the package is installed (``pytest11`` entry
point), so it imports nothing but pytest at module level: the fingerprint core, syrupy's
extension machinery and the report load only when a test uses the fixture or the report is on.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pytest_opid.comparison import Comparison
    from pytest_opid.engine_rules import Check
    from pytest_opid.result import Fingerprint, RestoreCheck

__all__ = ["MARKER", "OpidRestoreWarning", "OpidSnapshotWarning", "Recorder"]

MARKER = "stable_topology"
#: The marker's whole signature, as `pytest --markers` and the docs give it.
MARKER_SIGNATURE = (
    "check=None, name=None, previous=None, allow_non_restored_state=False, "
    "allow_reinterpreted_state=False, spark_version=None"
)
_CHECKS = ("default", "ids", "chains", "both")
_UPDATE = "pytest --snapshot-update"
_MARKER_ARGUMENTS = {
    "check",
    "name",
    "previous",
    "allow_non_restored_state",
    "allow_reinterpreted_state",
    "spark_version",  # read by pytest_opid.plugin.spark
}
_NAME_FORBIDDEN = set('\\/?*:|"<>[]')


class OpidRestoreWarning(UserWarning):
    """The engine would restore, but something is off: state handed to another operator, a
    setting the checkpoint pins that the new job changes, ..."""


class OpidSnapshotWarning(UserWarning):
    """The topology passed its check but differs from the snapshot in what is not held stable
    (typically: new operators whose IDs nothing protects yet)."""


@dataclass
class _Session:
    """Per-session state: the resolved options, the ``--opid-report`` blocks and which test
    claimed which snapshot file (under pytest-xdist: this process's tests only)."""

    default_check: str
    report: bool
    blocks: list[list[str]]  # [nodeid + snapshot name (sort key), rendered block]
    # resolved snapshot path -> (nodeid, snapshot index) of the recording that claimed it
    claims: dict[str, tuple[str, int | str]] = field(default_factory=dict)
    conflicts: list[str] = field(default_factory=list)  # xdist controller: across workers
    html: str | None = None  # --opid-html PATH
    # --opid-html: [title, saved fingerprint, failure text or None, saved old fingerprint or None]
    pictures: list[list[Any]] = field(default_factory=list)
    # --snapshot-update kept the unused snapshots, and why (see _hold_cleanup)
    kept_unused: str | None = None
    # what the session's end could not write or delete (the report, an unused snapshot)
    output_errors: list[str] = field(default_factory=list)
    # snapshots of passing tests that no longer match (harmless changes not yet recorded)
    stale: list[str] = field(default_factory=list)
    # snapshots of passing tests made with another version of their engine than this run's:
    # [path, engine, the version that made it, this run's]
    other_versions: list[list[str]] = field(default_factory=list)


_SESSION = pytest.StashKey[_Session]()
_DESELECTED = pytest.StashKey[int]()
_RECORDER = pytest.StashKey["Recorder"]()


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
        "--opid-check",
        choices=_CHECKS,
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
        "another meaning (still reported); allow_non_restored_state=True (Flink) accepts "
        "state the new job drops; name= names the snapshot. After a safe deploy, accept "
        "the change: pytest --snapshot-update",
    )
    check = config.getoption("opid_check") or config.getini("opid_check") or "default"
    if check not in _CHECKS:
        raise pytest.UsageError(f"opid_check must be one of {', '.join(_CHECKS)}, got {check!r}")
    report = config.getoption("opid_report")
    if report is None:
        report = bool(config.getini("opid_report"))
    config.stash[_SESSION] = _Session(check, report, [], html=config.getoption("opid_html"))


# -- the fixture --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Entry:
    key: int | str  # syrupy's snapshot index: a number, or a name (``test[name]``)
    fingerprint: Fingerprint


@dataclass
class _Judged:
    """One recorded topology judged against its snapshot (:meth:`Recorder._judge`)."""

    entry: _Entry
    text: str  # the snapshot text of the recorded fingerprint
    title: str
    where: str
    failure: str | None = None
    write: bool = False  # under --snapshot-update, once every check passed
    comparison: Comparison | None = None  # passed, though the texts differ


class Recorder:
    """The ``opid`` fixture: collects the topologies a test holds stable."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self._item = request.node
        self._marker = request.node.get_closest_marker(MARKER)
        self._entries: list[_Entry] = []
        self._asserted: set[str] = set()  # snapshot locations asserted by the check
        self._olds: dict[int | str, Fingerprint] = {}  # snapshots read back, for --opid-html
        #: each recorded topology's snapshot as read (unchanged: the topology itself), the
        #: query that wrote previous='s checkpoint, for what a checkpoint does not keep
        self._snapshots: dict[int | str, Fingerprint] = {}
        self._stale: list[str] = []  # snapshots the check passed although their text differs
        self._other_versions: list[list[str]] = []  # of those, made with another engine version
        self._unnamed = 0
        self._location: Any = None  # syrupy's PyTestLocation of the test
        if self._marker is not None:
            self._check, self._name = _marker_options(self._item)
            if getattr(request.config, "_syrupy", None) is None:  # syrupy's plugin sets it
                pytest.fail(
                    "@pytest.mark.stable_topology needs syrupy for its snapshots: "
                    "pip install -e '.[pytest]' in the pytest-opid clone",
                    pytrace=False,
                )
            from syrupy.location import PyTestLocation

            self._location = PyTestLocation(self._item)

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
        self._claim(key)
        self._entries.append(_Entry(key, fp))
        return fp

    def _claim(self, key: int | str) -> None:
        """Claim the snapshot file ``key`` resolves to, or fail naming whoever claimed it first.

        syrupy drops characters a file name cannot hold and cuts names at 250 characters, so
        ``test[job:0]`` and ``test[job0]`` (or two ids equal in their first 250 characters)
        share one file and would silently overwrite each other under ``--snapshot-update``.
        The map lives in this process: under pytest-xdist, tests on other workers are checked
        only at the end, on the controller (:func:`pytest_testnodedown`)."""
        from pytest_opid.plugin.extension import TopologySnapshotExtension

        location = TopologySnapshotExtension.get_location(test_location=self._location, index=key)
        mine = (self._item.nodeid, key)
        claims = self._item.config.stash[_SESSION].claims
        other = claims.setdefault(_path_key(location), mine)
        if other != mine:
            where = _relative(location, self._item.config.rootpath)
            pytest.fail(_safe(_collision(mine, other, where)), pytrace=False)

    def check_restore(
        self,
        program: Any,
        *,
        previous: Any,
        allow_non_restored_state: bool = False,
        allow_reinterpreted_state: bool = False,
    ) -> RestoreCheck:
        """Assert that ``program`` would start from ``previous``, as its engine decides at
        restore: a Flink savepoint or checkpoint (directory or ``_metadata``), a Spark
        checkpoint directory, a saved fingerprint or an ``.opid`` snapshot. A relative path is
        taken from the test file's folder. Fails the test with the engine's explanation when
        not restorable, or when a stateful operator would read its state under another meaning
        (unless ``allow_reinterpreted_state``); warnings become :class:`OpidRestoreWarning`.
        Needs no marker."""
        from pytest_opid.render.restore import render_restore
        from pytest_opid.restore import check_restore

        path = _beside_test(self._item, previous)
        result = check_restore(path, program, allow_non_restored_state=allow_non_restored_state)
        where = _relative(str(path), self._item.config.rootpath)
        allow = allow_reinterpreted_state or self._allow_reinterpreted()
        if not result.restorable or not (result.safe or allow):
            pytest.fail(_safe(f"Restore from {where}:\n{render_restore(result)}"), pytrace=False)
        self._restore_warnings(result, f"Restore from {where}:")
        return result

    def _allow_reinterpreted(self) -> bool:
        marker = self._marker
        if marker is not None and marker.kwargs.get("allow_reinterpreted_state"):
            return True
        return bool(self._item.config.getoption("opid_allow_reinterpreted_state", False))

    def _restore_warnings(self, result: RestoreCheck, title: str) -> None:
        """Every warning ``opid check-restore`` prints, and the reinterpreted state a test
        accepted, reach the test's output: a passing test never hides what the CLI says."""
        for item in (*result.reinterpreted, *result.unverified, *result.warnings):
            head = item.message.split("\nFix:", 1)[0]
            self._item.warn(OpidRestoreWarning(_safe(f"{title} {head}")))

    def _verify_restore(self) -> list[str]:
        """The marker's ``previous=``: every recorded topology must restore from it."""
        marker = self._marker
        previous = marker.kwargs.get("previous") if marker is not None else None
        if previous is None:
            return []
        from pytest_opid.errors import OpidError
        from pytest_opid.io.registry import restore_source
        from pytest_opid.render.restore import render_restore
        from pytest_opid.restore import check_restore

        path = _beside_test(self._item, previous)
        where = _relative(str(path), self._item.config.rootpath)
        allow = bool(marker.kwargs.get("allow_non_restored_state", False))  # type: ignore[union-attr]
        accept = self._allow_reinterpreted()
        # A Spark checkpoint keeps no plan: the snapshot, the query that wrote it, says what
        # its state means.
        source = restore_source(path) if path.exists() else None
        with_plan = source is not None and source.check_with_previous is not None
        failures = []
        for entry in self._entries:
            written_by = self._snapshots.get(entry.key) if with_plan else None
            try:
                result = check_restore(
                    path,
                    entry.fingerprint,
                    allow_non_restored_state=allow,
                    previous_fingerprint=written_by,
                )
            except OpidError as exc:
                failures.append(f"Restore from {where}: {exc}")
                continue
            if not result.restorable or not (result.safe or accept):
                failures.append(f"Restore from {where}:\n{render_restore(result)}")
            else:
                self._restore_warnings(result, f"Restore from {where}:")
        return failures

    def _verify(self) -> list[str]:
        """Judge every recorded topology, then, only if every judgement passed, let syrupy
        record (and under ``--snapshot-update`` write) the snapshots; the failure messages.

        Each snapshot is read and compared with the recorded fingerprint once
        (:meth:`_judge`): that one comparison decides pass or fail, words the failure and gives
        the warnings. ``previous=`` is judged next. Nothing is written before every check of
        the test has passed, whatever the route (snapshot, ``previous=``, both) and the flags:
        a test that fails keeps every snapshot it owns byte for byte."""
        judged = [self._judge(entry) for entry in self._entries]
        failures = [j.failure for j in judged if j.failure is not None]
        failures += self._verify_restore()
        if failures:
            return failures
        return self._assert_judged(judged)

    def _judge(self, entry: _Entry) -> _Judged:
        """Read ``entry``'s snapshot and compare it with the recorded fingerprint, once; writes
        nothing."""
        from pytest_opid.comparison import compare
        from pytest_opid.engine_rules import Check
        from pytest_opid.errors import DocumentError
        from pytest_opid.io.snapshot import loads
        from pytest_opid.plugin.extension import (
            SnapshotPathError,
            TopologySnapshotExtension,
            Unreadable,
        )
        from pytest_opid.render.explain import render

        config = self._item.config
        update = bool(config.option.update_snapshots)
        extension = TopologySnapshotExtension()
        location = extension.get_location(test_location=self._location, index=entry.key)
        name = extension.get_snapshot_name(test_location=self._location, index=entry.key)
        where = _relative(location, config.rootpath)
        title = f"Snapshot {name} ({where}):"
        again = "to replace it, run pytest --snapshot-update"
        text = extension.serialize(entry.fingerprint)
        judged = _Judged(entry, text, title, where)
        try:
            recalled = extension.read_snapshot_data_from_location(
                snapshot_location=location, snapshot_name=name, session_id=""
            )
        except SnapshotPathError as exc:
            judged.failure = f"{title} {exc.problem}"
            return judged
        except OSError as exc:
            judged.failure = f"{title} {exc.filename or where}: {exc.strerror or exc}"
            return judged
        if recalled == text:
            self._snapshots[entry.key] = entry.fingerprint
            return judged
        judged.write = update  # --snapshot-update: any difference is written back
        if recalled is None:
            if not update:
                judged.failure = (
                    f"{title}\nno snapshot yet; create it with pytest --snapshot-update"
                )
            return judged
        if isinstance(recalled, Unreadable):
            if not update:
                judged.failure = f"{title} {recalled}; {again}"
            return judged
        try:
            old = loads(str(recalled), origin=where)
        except DocumentError as exc:
            if not update:
                judged.failure = f"Snapshot {name}: {exc}; {again}"
            return judged
        self._olds[entry.key] = old
        self._snapshots[entry.key] = old
        check = self._check or Check.default_for(entry.fingerprint)
        try:
            comparison = compare(
                old, entry.fingerprint, allow_reinterpreted_state=self._allow_reinterpreted()
            )
            broken = comparison.breaks(check)
            if broken and not update:
                judged.failure = f"{title}\n{render(comparison, check)}"
        except DocumentError as exc:
            if not update:
                judged.failure = f"{title}\n{exc}; recreate it with pytest --snapshot-update"
            return judged
        if not broken:
            judged.comparison = comparison  # passed although the text differs
        return judged

    def _assert_judged(self, judged: list[_Judged]) -> list[str]:
        """Every check passed: tell syrupy, so that it counts the snapshots as used and, under
        ``--snapshot-update``, writes the ones :meth:`_judge` found different. Its assertions
        take the verdict as given (``TopologySnapshotExtension.verdict``): nothing is compared
        again."""
        from pytest_opid.plugin.extension import SnapshotPathError, TopologySnapshotExtension

        numbered = named = None
        failures = []
        for j in judged:
            entry = j.entry
            # One assertion numbers the unnamed recordings 0, 1, ... as syrupy does; named
            # ones go through another so that they do not take a number.
            if isinstance(entry.key, int):
                if numbered is None:
                    numbered = self._assertion(TopologySnapshotExtension)
                assertion = numbered
                call = assertion
            else:
                if named is None:
                    named = self._assertion(TopologySnapshotExtension)
                assertion = named
                call = assertion(name=entry.key)
            assertion.extension.verdict = not j.write
            assertion.extension.text = j.text
            ok = call == entry.fingerprint
            result = assertion.executions[assertion.num_executions - 1]
            self._asserted.add(result.snapshot_location)
            if ok:
                if j.comparison is not None and not j.write:
                    old, new = j.comparison.old, j.comparison.new
                    if (
                        old.engine_version
                        and new.engine_version
                        and (old.engine_version != new.engine_version)
                    ):  # said once for the session, not as a stale snapshot per test
                        made = [j.where, new.engine, old.engine_version, new.engine_version]
                        self._other_versions.append(made)
                    else:
                        self._stale.append(j.where)
                    self._warn_unprotected(j.comparison, j.title)
                continue
            if isinstance(result.exception, SnapshotPathError):
                failures.append(f"{j.title} {result.exception.problem}")
            elif isinstance(result.exception, OSError):  # syrupy making the folder, say
                exc = result.exception
                failures.append(f"{j.title} {exc.filename or j.where}: {exc.strerror or exc}")
            else:
                failures.append(f"{j.title}\ncould not be written: {result.exception!r}")
        return failures

    def _assertion(self, extension_class: type) -> Any:
        assertion = _assertion(self._item, extension_class, self._location)
        assertion.extension.check = self._check
        assertion.extension.allow_reinterpreted_state = self._allow_reinterpreted()
        assertion.extension.exact = bool(self._item.config.option.update_snapshots)
        return assertion

    def _warn_unprotected(self, comparison: Comparison, title: str) -> None:
        """The check passed, but the snapshot misses something the engine's rules say is
        unprotected (typically new operators whose IDs nothing holds stable yet)."""
        from pytest_opid.errors import DocumentError

        warning = comparison.rules.added_warning(comparison)
        if warning:
            self._item.warn(OpidSnapshotWarning(_safe(f"{title} {warning}")))
        if comparison.mode == "streaming" and comparison.new.state_operators is not None:
            try:
                restore = _without_version_warning(comparison.restore)
            except DocumentError:
                return
            self._restore_warnings(
                restore, f"{title} restarting on the checkpoint the snapshotted query wrote:"
            )

    def _picture(self, failure: str | None) -> str:
        """``--opid-html``: keep what the report draws of this test; the line that names the
        report's section for a failure message ("" without the option)."""
        session = self._item.config.stash[_SESSION]
        if session.html is None:
            return ""
        from pytest_opid.render.html import report_anchor

        anchors = []
        for entry in self._entries:
            suffix = "" if entry.key == 0 else f"[{entry.key}]"
            title = f"{self._item.nodeid}{suffix}"
            old = self._olds.get(entry.key)
            session.pictures.append(
                [
                    title,
                    entry.fingerprint.to_dict(),
                    failure,
                    None if old is None else old.to_dict(),
                ]
            )
            anchors.append(f"{session.html}#{report_anchor(title)}")
        return "\n\npicture: " + ", ".join(anchors)

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
    picture = recorder._picture("\n\n".join(failures) if failures else None)
    if failures:
        pytest.fail(_safe("\n\n".join(failures) + picture), pytrace=False)
    item.config.stash[_SESSION].stale.extend(recorder._stale)
    item.config.stash[_SESSION].other_versions.extend(recorder._other_versions)
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
    if getattr(item.config, "_syrupy", None) is None or not isinstance(item, pytest.Function):
        return
    from syrupy.location import PyTestLocation

    from pytest_opid.plugin.extension import TopologySnapshotExtension as Extension

    location = PyTestLocation(item)
    recorder = item.stash.get(_RECORDER, None)
    indices: list[int | str] = [e.key for e in recorder._entries] if recorder else []
    base = Extension.get_snapshot_name(test_location=location, index=0)
    directory = Extension.dirname(test_location=location)
    with contextlib.suppress(OSError):
        for name in sorted(os.listdir(directory)):
            index = _index(name, base)
            if index is not None:
                indices.append(index)
    done = recorder._asserted if recorder else set()
    keep: dict[str, int | str] = {}
    for index in indices:
        path = Extension.get_location(test_location=location, index=index)
        if path not in done and path not in keep and os.path.lexists(path):
            keep[path] = index
    for index in keep.values():
        assertion = _assertion(item, Extension, location, update=False)
        assertion.extension.keep = True
        # Index 0 is a fresh assertion's first; any other is passed as its name.
        _ = (assertion if index == 0 else assertion(name=index)) == ""


def _assertion(item: pytest.Item, extension: type, location: Any, update: bool = True) -> Any:
    """A syrupy assertion for ``item``, made as syrupy's ``snapshot`` fixture makes one, but
    with ``extension`` from the start. The fixture's own assertion would register syrupy's
    default (amber) extension, whose discovery walks all of ``__snapshots__`` and, under
    ``--snapshot-update``, deletes every file there it does not know, which a test of ours must
    not cause (say, the contents of a directory found at a snapshot path)."""
    from syrupy.assertion import SnapshotAssertion

    option = item.config.option
    extra: dict[str, Any] = {}
    if hasattr(option, "update_new_snapshots_only"):  # syrupy >= 5
        extra["update_new_snapshots_only"] = bool(option.update_new_snapshots_only) and update
    return SnapshotAssertion(
        session=item.config._syrupy,  # type: ignore[attr-defined]
        extension_class=extension,
        test_location=location,
        update_snapshots=bool(option.update_snapshots) and update,
        **extra,
    )


def _index(filename: str, base: str) -> int | str | None:
    """The snapshot index whose file is ``filename`` for a test whose index-0 snapshot name is
    ``base`` (``test_x``, ``test_x.2``, ``test_x[name]``), or None."""
    if not filename.endswith(".opid"):
        return None
    stem = filename[: -len(".opid")]
    if stem == base:
        return 0
    if not stem.startswith(base):
        return None
    rest = stem[len(base) :]
    if rest[:1] == "." and rest[1:].isascii() and rest[1:].isdigit() and rest[1] != "0":
        return int(rest[1:])
    if rest[:1] == "[" and rest.endswith("]") and len(rest) > 2:
        return rest[1:-1]
    return None


def _marker_options(item: pytest.Item) -> tuple[Check | None, str | None]:
    from pytest_opid.engine_rules import Check

    marker = item.get_closest_marker(MARKER)
    assert marker is not None
    unknown = sorted(set(marker.kwargs) - _MARKER_ARGUMENTS)
    if unknown or len(marker.args) > 1:
        what = f"unknown argument {unknown[0]!r}" if unknown else "too many positional arguments"
        pytest.fail(
            f"@pytest.mark.{MARKER}: {what}; it takes check='ids'|'chains'|'both', name='...', "
            "previous='<savepoint, checkpoint or snapshot>', allow_non_restored_state=True, "
            "allow_reinterpreted_state=True and spark_version='X.Y'",
            pytrace=False,
        )
    previous = marker.kwargs.get("previous")
    if previous is not None and not isinstance(previous, (str, Path)):
        pytest.fail(f"@pytest.mark.{MARKER}: previous= takes a path", pytrace=False)
    check = marker.kwargs.get("check", marker.args[0] if marker.args else None)
    if check is None:
        check = item.config.stash[_SESSION].default_check
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


def _beside_test(item: pytest.Item, path: Any) -> Path:
    """A path as the test wrote it: relative ones from the test file's folder."""
    path = Path(path)
    return path if path.is_absolute() else Path(item.path).parent / path


def _relative(location: str, root: Path) -> str:
    try:
        return str(Path(location).relative_to(root))
    except ValueError:
        return location


def _path_key(location: str) -> str:
    """One spelling per snapshot file: the directory resolved (a symlinked ``__snapshots__``),
    the file name as is (a link at the file itself is refused, not followed)."""
    directory, name = os.path.split(os.path.abspath(location))
    return os.path.normcase(os.path.join(os.path.realpath(directory), name))


def _collision(mine: tuple[str, int | str], other: tuple[str, int | str], where: str) -> str:
    if mine[0] == other[0]:
        who = f"{mine[0]} records two topologies ({other[1]!r} and {mine[1]!r}) that map"
    else:
        who = f"{other[0]} and {mine[0]} map"
    return (
        f"{who} to one snapshot file, {where}, and would overwrite each other's snapshot: "
        'syrupy drops \\/?*:|"<> and control characters from snapshot file names and cuts them '
        "at 250 characters; give them ids (pytest.param(..., id=...)) or name= values that "
        "stay distinct"
    )


def _safe(text: str) -> str:
    """``text`` with every character that could forge or hide a line escaped (``\\uXXXX``):
    the core's one escaping (:func:`pytest_opid.text.safe_text`), imported when first used."""
    from pytest_opid.text import safe_text

    return safe_text(text)


# -- the report ---------------------------------------------------------------------------------


@pytest.hookimpl(wrapper=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> Any:
    # A wrapper: its first half runs before syrupy's own sessionfinish, which deletes.
    _hold_cleanup(session, exitstatus)
    result = yield
    _finish(session)
    return result


def _finish(session: pytest.Session) -> None:
    config = session.config
    state = config.stash.get(_SESSION, None)
    if state is None:
        return
    workeroutput = getattr(config, "workeroutput", None)
    if workeroutput is not None:  # pytest-xdist: hand over to the controller
        if state.report:
            workeroutput["opid_report"] = state.blocks
        workeroutput["opid_claims"] = [[p, n, k] for p, (n, k) in state.claims.items()]
        workeroutput["opid_stale"] = state.stale
        workeroutput["opid_other_versions"] = state.other_versions
        if state.html is not None:
            workeroutput["opid_html"] = state.pictures
        return
    if state.html is not None:
        try:
            _write_html(state)
        except OSError as exc:  # a directory at PATH, a read-only folder: one line, no traceback
            state.output_errors.append(f"--opid-html: {exc.strerror or exc}")
    extension = sys.modules.get("pytest_opid.plugin.extension")
    if extension is not None:  # syrupy's cleanup ran before this, in this process
        failures = extension.TopologySnapshotExtension.delete_failures
        state.output_errors += failures
        failures.clear()
        kept = extension.TopologySnapshotExtension.kept_locations
        _uncount_kept(config, set(kept))
        kept.clear()
    if (state.conflicts or state.output_errors) and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _uncount_kept(config: pytest.Config, kept: set[str]) -> None:
    """syrupy's summary counts every unused snapshot it asked to delete as deleted ("1 unused
    snapshot deleted", "Deleted ..."); the ones a read-only folder or a directory in their
    place kept are taken out of its report, and pytest-opid's error lines name them. syrupy
    keeps the unused snapshots in its report's ``unused`` (a cached property, as ``num_unused``
    is; from another syrupy the summary stays as it is)."""
    report = getattr(getattr(config, "_syrupy", None), "report", None)
    if not kept or report is None:
        return
    cached = type(report).__dict__.get("unused")
    if not isinstance(cached, functools.cached_property):
        return
    from syrupy.data import SnapshotCollections

    left = SnapshotCollections()
    for collection in report.unused:
        if collection.location not in kept:
            left.add(collection)
    report.__dict__["unused"] = left
    report.__dict__.pop("num_unused", None)  # counted again from what is left


def pytest_deselected(items: Sequence[pytest.Item]) -> None:
    """``-k``, ``-m`` or another plugin dropped tests: syrupy counts only what is left as
    collected, so their snapshots would look unused (see :func:`_hold_cleanup`)."""
    if items:
        config = items[0].config
        config.stash[_DESELECTED] = config.stash.get(_DESELECTED, 0) + len(items)


def _hold_cleanup(session: pytest.Session, exitstatus: int) -> None:
    """Under ``--snapshot-update``, keep every unused snapshot unless the session ran every
    collected test to its end.

    syrupy deletes the snapshots of every collected test that asserted none, and a test that
    never ran asserted none: ``-x`` or ``--maxfail`` stopping after a first failure, an
    interrupt, or a deselection (``-k``, ``-m``; syrupy learns the items after it) would delete
    the baselines of every test not run. syrupy's ``--snapshot-no-cleanup`` is then set for
    this session, before syrupy's own ``pytest_sessionfinish`` reads it; its summary lists the
    snapshots as unused instead of deleted, and ours says why (:func:`pytest_terminal_summary`).
    On a pytest-xdist worker nothing is deleted anyway; the controller decides from what the
    workers report.
    """
    config = session.config
    option = config.option
    syrupy = getattr(config, "_syrupy", None)
    if (
        syrupy is None
        or not getattr(option, "update_snapshots", False)
        or getattr(option, "no_cleanup", True)
        or hasattr(config, "workerinput")
    ):
        return
    reason = _unfinished(session, exitstatus, syrupy)
    if reason is not None:
        option.no_cleanup = True
        state = config.stash.get(_SESSION, None)
        if state is not None:
            state.kept_unused = reason


def _unfinished(session: pytest.Session, exitstatus: int, syrupy: Any) -> str | None:
    """Why this session did not run every collected test to its end, or ``None``."""
    if exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR):
        return "the session was interrupted"
    deselected = session.config.stash.get(_DESELECTED, 0)
    if deselected:
        return f"{deselected} collected test{'s were' if deselected != 1 else ' was'} deselected"
    # Every selected test has a status once it ran (syrupy's ItemStatus.NOT_RUN is False);
    # under pytest-xdist the controller's statuses are its workers' reports, merged.
    status: dict[str, Any] = dict(getattr(syrupy, "_selected_items", {}))
    for report in getattr(syrupy, "_worker_reports", ()):
        for nodeid, value in report.get("selected", {}).items():
            status[nodeid] = status.get(nodeid) or value
    not_run = sum(1 for value in status.values() if not getattr(value, "value", value))
    if not_run:
        why = " (-x or --maxfail stopped the session)" if session.shouldfail else ""
        return f"{not_run} test{'s' if not_run != 1 else ''} did not run{why}"
    if session.shouldstop or session.shouldfail:
        return "the session stopped early"
    return None


def _write_html(state: _Session) -> None:
    """The ``--opid-html`` report, from what every test (and every xdist worker) kept."""
    from pytest_opid.comparison import compare
    from pytest_opid.errors import OpidError
    from pytest_opid.render.html import write_html_report
    from pytest_opid.result import Fingerprint

    entries = []
    for title, saved, failure, old_saved in sorted(state.pictures, key=lambda p: p[0]):
        fp = Fingerprint.from_dict(saved)
        comparison = None
        if old_saved is not None:
            try:
                comparison = compare(Fingerprint.from_dict(old_saved), fp)
            except OpidError:
                comparison = None
        entries.append((title, fp, failure, comparison))
    assert state.html is not None
    write_html_report(state.html, entries)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """pytest-xdist controller: collect the report blocks of a finished worker, and check its
    snapshot claims against the other workers' (each worker only sees its own tests, so two
    tests sharing a file on different workers are found here, after both may have written)."""
    state = node.config.stash.get(_SESSION, None)
    output = getattr(node, "workeroutput", None) or {}
    if state is None:
        return
    if state.report:
        state.blocks.extend(output.get("opid_report", ()))
    state.pictures.extend(output.get("opid_html", ()))
    state.stale.extend(output.get("opid_stale", ()))
    state.other_versions.extend(output.get("opid_other_versions", ()))
    for path, nodeid, key in output.get("opid_claims", ()):
        mine = (nodeid, key)
        other = state.claims.setdefault(path, mine)
        if other != mine:
            where = _relative(path, node.config.rootpath)
            state.conflicts.append(
                f"{_collision(mine, other, where)} (they ran on different pytest-xdist "
                "workers, so this shows only now: under --snapshot-update the file holds "
                "whichever wrote last)"
            )


#: How many out-of-date snapshots the summary names; the count is always whole.
_STALE_LISTED = 10


def _summarise_stale(terminalreporter: Any, stale: list[str]) -> None:
    """Passing tests whose snapshot no longer matches the job: the change was harmless, but
    left unrecorded it lands later in someone else's pull request as unrelated churn."""
    if not stale:
        return
    count = len(stale)
    terminalreporter.write_line(
        f"pytest-opid: {count} snapshot{'' if count == 1 else 's'} out of date: harmless "
        "changes; refresh with --snapshot-update",
        yellow=True,
    )
    for where in stale[:_STALE_LISTED]:
        terminalreporter.write_line(_safe(f"  {where}"))
    if count > _STALE_LISTED:
        terminalreporter.write_line(f"  ... and {count - _STALE_LISTED} more")


def _without_version_warning(restore: RestoreCheck) -> RestoreCheck:
    """``restore`` without its note that the snapshot was made with another engine version:
    the session's summary says that once (:func:`_summarise_other_versions`)."""
    kept = tuple(w for w in restore.warnings if w.kind != "engine_version")
    return restore if len(kept) == len(restore.warnings) else replace(restore, warnings=kept)


def _summarise_other_versions(terminalreporter: Any, made: list[list[str]]) -> None:
    """Snapshots made with another version of their engine: said once per pair of versions,
    with what the comparison held (the engine's rules say which facts both versions record)."""
    from pytest_opid.io.registry import engine_rules

    groups: dict[tuple[str, str, str], list[str]] = {}
    for where, engine, old, new in made:
        groups.setdefault((engine, old, new), []).append(where)
    for (engine, old, new), paths in sorted(groups.items()):
        count = len(paths)
        line = engine_rules(engine, None).other_version(old, new)
        terminalreporter.write_line(
            _safe(f"pytest-opid: {count} snapshot{' was' if count == 1 else 's were'} {line}"),
            yellow=True,
        )
        for where in sorted(set(paths))[:_STALE_LISTED]:
            terminalreporter.write_line(_safe(f"  {where}"))
        if count > _STALE_LISTED:
            terminalreporter.write_line(f"  ... and {count - _STALE_LISTED} more")


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    state = config.stash.get(_SESSION, None)
    if state is None or hasattr(config, "workerinput"):
        return
    if state.kept_unused is not None:
        terminalreporter.write_line(
            f"pytest-opid: --snapshot-update deleted no unused snapshot, because "
            f"{state.kept_unused}: a snapshot of a test that did not run is not unused. "
            "Run every test to its end to delete the snapshots no test uses any more."
        )
    for line in state.output_errors:
        terminalreporter.write_line(_safe(f"pytest-opid: error: {line}"), red=True)
    _summarise_stale(terminalreporter, sorted(set(state.stale)))
    _summarise_other_versions(terminalreporter, state.other_versions)
    if state.conflicts:
        terminalreporter.write_sep("=", "pytest-opid: tests sharing a snapshot file", red=True)
        for line in state.conflicts:
            terminalreporter.write_line(_safe(line))
    if not state.report:
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
