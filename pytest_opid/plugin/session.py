"""What the plugin keeps for a whole session and says at its end: the resolved options, which
test claimed which snapshot file (merged from pytest-xdist workers), the unused snapshots kept, the
``--opid-html`` report and the summary lines (out-of-date snapshots, snapshots made with another
engine version). Its hooks are registered through :mod:`pytest_opid.plugin`, which imports them."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Sequence


from pytest_opid.plugin.snapshot_files import collision, relative
from pytest_opid.plugin.syrupy_compat import (
    cleans_up,
    forget_unused,
    keep_unused,
    not_run,
    syrupy_session,
)

__all__ = [
    "DESELECTED",
    "SESSION",
    "STALE_LISTED",
    "Session",
    "pytest_deselected",
    "pytest_sessionfinish",
    "pytest_terminal_summary",
    "pytest_testnodedown",
    "safe",
]


@dataclass
class Session:
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


SESSION = pytest.StashKey[Session]()

DESELECTED = pytest.StashKey[int]()


def safe(text: str) -> str:
    """``text`` with every character that could forge or hide a line escaped (``\\uXXXX``):
    the core's one escaping (:func:`pytest_opid.text.safe_text`), imported when first used."""
    from pytest_opid.text import safe_text

    return safe_text(text)


@pytest.hookimpl(wrapper=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> Any:
    # A wrapper: its first half runs before syrupy's own sessionfinish, which deletes.
    _hold_cleanup(session, exitstatus)
    result = yield
    _finish(session)
    return result


def _finish(session: pytest.Session) -> None:
    config = session.config
    state = config.stash.get(SESSION, None)
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
        forget_unused(config, set(kept))  # not counted as deleted in syrupy's summary
        kept.clear()
    if (state.conflicts or state.output_errors) and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_deselected(items: Sequence[pytest.Item]) -> None:
    """``-k``, ``-m`` or another plugin dropped tests: syrupy counts only what is left as
    collected, so their snapshots would look unused (see :func:`_hold_cleanup`)."""
    if items:
        config = items[0].config
        config.stash[DESELECTED] = config.stash.get(DESELECTED, 0) + len(items)


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
    syrupy = syrupy_session(config)
    if syrupy is None or not cleans_up(config) or hasattr(config, "workerinput"):
        return
    reason = _unfinished(session, exitstatus, syrupy)
    if reason is not None:
        keep_unused(config)
        state = config.stash.get(SESSION, None)
        if state is not None:
            state.kept_unused = reason


def _unfinished(session: pytest.Session, exitstatus: int, syrupy: Any) -> str | None:
    """Why this session did not run every collected test to its end, or ``None``."""
    if exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR):
        return "the session was interrupted"
    deselected = session.config.stash.get(DESELECTED, 0)
    if deselected:
        return f"{deselected} collected test{'s were' if deselected != 1 else ' was'} deselected"
    # Under pytest-xdist the controller's statuses are its workers' reports, merged.
    missed = not_run(syrupy)
    if missed:
        why = " (-x or --maxfail stopped the session)" if session.shouldfail else ""
        return f"{missed} test{'s' if missed != 1 else ''} did not run{why}"
    if session.shouldstop or session.shouldfail:
        return "the session stopped early"
    return None


def _write_html(state: Session) -> None:
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
    state = node.config.stash.get(SESSION, None)
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
            where = relative(path, node.config.rootpath)
            state.conflicts.append(
                f"{collision(mine, other, where)} (they ran on different pytest-xdist "
                "workers, so this shows only now: under --snapshot-update the file holds "
                "whichever wrote last)"
            )


#: How many out-of-date snapshots the summary names; the count is always whole.
STALE_LISTED = 10


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
    for where in stale[:STALE_LISTED]:
        terminalreporter.write_line(safe(f"  {where}"))
    if count > STALE_LISTED:
        terminalreporter.write_line(f"  ... and {count - STALE_LISTED} more")


def _summarise_other_versions(terminalreporter: Any, made: list[list[str]]) -> None:
    """Snapshots made with another version of their engine: said once per pair of versions,
    with what the comparison held (the engine's rules say which facts both versions record)."""
    from pytest_opid.engines import engine_rules

    groups: dict[tuple[str, str, str], list[str]] = {}
    for where, engine, old, new in made:
        groups.setdefault((engine, old, new), []).append(where)
    for (engine, old, new), paths in sorted(groups.items()):
        count = len(paths)
        line = engine_rules(engine, None).other_version(old, new)
        terminalreporter.write_line(
            safe(f"pytest-opid: {count} snapshot{' was' if count == 1 else 's were'} {line}"),
            yellow=True,
        )
        for where in sorted(set(paths))[:STALE_LISTED]:
            terminalreporter.write_line(safe(f"  {where}"))
        if count > STALE_LISTED:
            terminalreporter.write_line(f"  ... and {count - STALE_LISTED} more")


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    state = config.stash.get(SESSION, None)
    if state is None or hasattr(config, "workerinput"):
        return
    if state.kept_unused is not None:
        terminalreporter.write_line(
            f"pytest-opid: --snapshot-update deleted no unused snapshot, because "
            f"{state.kept_unused}: a snapshot of a test that did not run is not unused. "
            "Run every test to its end to delete the snapshots no test uses any more."
        )
    for line in state.output_errors:
        terminalreporter.write_line(safe(f"pytest-opid: error: {line}"), red=True)
    _summarise_stale(terminalreporter, sorted(set(state.stale)))
    _summarise_other_versions(terminalreporter, state.other_versions)
    if state.conflicts:
        terminalreporter.write_sep("=", "pytest-opid: tests sharing a snapshot file", red=True)
        for line in state.conflicts:
            terminalreporter.write_line(safe(line))
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
