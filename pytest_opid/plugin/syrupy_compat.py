"""Every use of syrupy beyond its extension API, in one place: what the plugin reads or sets of
syrupy's own state, and why. The rest of the plugin calls these functions and names nothing of
syrupy's but its public extension class (:mod:`.extension`, a ``SingleFileSnapshotExtension``).

What is used, and why:

* ``config._syrupy``, the ``SnapshotSession`` syrupy's plugin puts on the config: whether syrupy
  is active (:func:`syrupy_session`), and the session an assertion is made with.
* ``SnapshotAssertion(session=, extension_class=, test_location=, update_snapshots=)`` (and
  ``update_new_snapshots_only=`` from syrupy 5), as syrupy's ``snapshot`` fixture makes one, but
  with our extension from the start (:func:`new_assertion`): the fixture's would register the
  default amber extension, whose discovery deletes files it does not know under
  ``--snapshot-update``. ``PyTestLocation(item)`` (:func:`location_of`) names the test's
  snapshots as syrupy does.
* ``assertion.executions[assertion.num_executions - 1]``, its ``snapshot_location`` and
  ``exception`` (:func:`last_result`): which file an assertion used, and why a write failed.
* The options ``update_snapshots`` and ``no_cleanup`` (``--snapshot-update``,
  ``--snapshot-no-cleanup``; :func:`updating`, :func:`cleans_up`, :func:`keep_unused`): the
  plugin turns syrupy's deletion of unused snapshots off for a session that did not run every
  test, before syrupy's ``pytest_sessionfinish`` reads the option.
* ``SnapshotSession._selected_items`` (and, from syrupy 5, ``_worker_reports``, what
  pytest-xdist workers reported; :func:`not_run`): which selected tests did not run.
* ``SnapshotReport.unused``, a cached property from syrupy 5 (:func:`forget_unused`): the unused
  snapshots a read-only folder kept are taken out of it, so that syrupy's summary does not count
  them as deleted (with syrupy 4 the summary stays as it is).

Each is read with a default, so that a syrupy without it degrades to syrupy's own behaviour
instead of failing. The lowest syrupy pyproject allows and the pinned one both run the plugin's
tests (tox -e syrupy-lowest). syrupy is imported here only inside functions: pytest imports the
plugin for every session, syrupy's modules load only when a test uses them.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest

__all__ = [
    "cleans_up",
    "forget_unused",
    "keep_unused",
    "last_result",
    "location_of",
    "new_assertion",
    "not_run",
    "syrupy_session",
    "updating",
]


def syrupy_session(config: pytest.Config) -> Any:
    """syrupy's session of this pytest session, ``None`` where syrupy's plugin is not active."""
    return getattr(config, "_syrupy", None)


def location_of(item: pytest.Item) -> Any:
    """syrupy's ``PyTestLocation`` of ``item``: where its snapshots are and what they are called."""
    from syrupy.location import PyTestLocation

    return PyTestLocation(item)


def new_assertion(item: pytest.Item, extension: type, location: Any, update: bool = True) -> Any:
    """A syrupy assertion for ``item``, made as syrupy's ``snapshot`` fixture makes one, but
    with ``extension`` from the start (see the module's docstring); ``update=False``: it never
    writes, whatever the options."""
    from syrupy.assertion import SnapshotAssertion

    option = item.config.option
    extra: dict[str, Any] = {}
    if hasattr(option, "update_new_snapshots_only"):  # syrupy >= 5
        extra["update_new_snapshots_only"] = bool(option.update_new_snapshots_only) and update
    return SnapshotAssertion(
        session=syrupy_session(item.config),
        extension_class=extension,
        test_location=location,
        update_snapshots=bool(option.update_snapshots) and update,
        **extra,
    )


def last_result(assertion: Any) -> tuple[str, BaseException | None]:
    """The snapshot file ``assertion``'s last execution used, and what it raised (``None``)."""
    result = assertion.executions[assertion.num_executions - 1]
    return result.snapshot_location, result.exception


def updating(config: pytest.Config) -> bool:
    """Whether this session runs with ``--snapshot-update``."""
    return bool(getattr(config.option, "update_snapshots", False))


def cleans_up(config: pytest.Config) -> bool:
    """Whether syrupy will delete unused snapshots at this session's end: ``--snapshot-update``
    without ``--snapshot-no-cleanup``, where syrupy has that option."""
    return updating(config) and not getattr(config.option, "no_cleanup", True)


def keep_unused(config: pytest.Config) -> None:
    """Turn syrupy's deletion of unused snapshots off for this session
    (``--snapshot-no-cleanup``), before syrupy's own ``pytest_sessionfinish`` reads it."""
    config.option.no_cleanup = True


def not_run(syrupy: Any) -> int:
    """How many selected tests did not run, as syrupy counts them: its status per test (a bool,
    or from syrupy 5 an ``ItemStatus`` whose value is false for "not run"); on the
    pytest-xdist controller merged from what each worker reported."""
    status: dict[str, Any] = dict(getattr(syrupy, "_selected_items", {}))
    for report in getattr(syrupy, "_worker_reports", ()):
        for nodeid, value in report.get("selected", {}).items():
            status[nodeid] = status.get(nodeid) or value
    return sum(1 for value in status.values() if not getattr(value, "value", value))


def forget_unused(config: pytest.Config, kept: set[str]) -> None:
    """Take the snapshots at ``kept`` out of syrupy's report of unused ones (see the module's
    docstring); nothing where the report computes them each time (syrupy 4)."""
    report = getattr(syrupy_session(config), "report", None)
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
