"""The ``opid`` fixture's object: what a marked test records, judged against its snapshots and
``previous=`` once the test body has passed, and written only when every check passed."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_opid.comparison import Comparison
    from pytest_opid.result import Fingerprint, RestoreCheck

from pytest_opid.plugin.marker import MARKER, check_name, marker_options
from pytest_opid.plugin.session import SESSION, safe
from pytest_opid.plugin.snapshot_files import (
    beside_test,
    collision,
    path_key,
    relative,
)
from pytest_opid.plugin.syrupy_compat import (
    last_result,
    location_of,
    new_assertion,
    syrupy_session,
)

__all__ = [
    "Entry",
    "Judged",
    "OpidRestoreWarning",
    "OpidSnapshotWarning",
    "Recorder",
    "without_version_warning",
]


#: The words of a failure from a changed state function (pytest_opid.spark.restart.meaning):
#: what a plan cannot settle, and a demonstration can.
FUNCTION_CHANGED = "the function that updates state/"


class OpidRestoreWarning(UserWarning):
    """The engine would restore, but something is off: state handed to another operator, a
    setting the checkpoint pins that the new job changes, ..."""


class OpidSnapshotWarning(UserWarning):
    """The topology passed its check but differs from the snapshot in what is not held stable
    (typically: new operators whose IDs nothing protects yet)."""


@dataclass(frozen=True)
class Entry:
    key: int | str  # syrupy's snapshot index: a number, or a name (``test[name]``)
    fingerprint: Fingerprint


@dataclass
class Judged:
    """One recorded topology judged against its snapshot (:meth:`Recorder._judge`)."""

    entry: Entry
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
        self._entries: list[Entry] = []
        self._asserted: set[str] = set()  # snapshot locations asserted by the check
        self._olds: dict[int | str, Fingerprint] = {}  # snapshots read back, for --opid-html
        #: each recorded topology's snapshot as read (unchanged: the topology itself), the
        #: query that wrote previous='s checkpoint, for what a checkpoint does not keep
        self._snapshots: dict[int | str, Fingerprint] = {}
        self._stale: list[str] = []  # snapshots the check passed although their text differs
        self._other_versions: list[list[str]] = []  # of those, made with another engine version
        self._unnamed = 0
        #: demonstrate_with(): the previous version of the recorded query, and the knobs
        self._demonstrate: tuple[Any, dict[str, Any]] | None = None
        self._objects: dict[int | str, Any] = {}  # what was recorded, by snapshot key
        self._location: Any = None  # syrupy's PyTestLocation of the test
        if self._marker is not None:
            self._check, self._name = marker_options(self._item)
            if syrupy_session(request.config) is None:
                pytest.fail(
                    "@pytest.mark.stable_topology needs syrupy for its snapshots: "
                    "pip install -e '.[pytest]' in the pytest-opid clone",
                    pytrace=False,
                )
            self._location = location_of(self._item)

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
            check_name(name)
        from pytest_opid.inputs import fingerprint

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
        self._entries.append(Entry(key, fp))
        self._objects[key] = obj
        return fp

    def demonstrate_with(self, previous: Any, **knobs: Any) -> None:
        """Where a prediction cannot settle a recorded Spark query's restart (the function that
        updates its state changed; ``previous=``'s checkpoint leaves its meaning not verified),
        run it: :func:`pytest_opid.demonstrate` from ``previous`` (the query as it was: a
        streaming DataFrame or ``DataStreamWriter``) to the recorded query, ``knobs`` passed on.
        The demonstration is added to the failure (rows included); where the test accepts an
        unverified meaning (``allow_unverified``), a "differs" or "refused" fails it and a "same"
        is a warning (no difference found is no proof). The runs happen at the check.
        """
        self._demonstrate = (previous, knobs)

    def demonstrate(self, previous: Any, new: Any, **knobs: Any) -> Any:
        """Run :func:`pytest_opid.demonstrate` now; fail the test with the rows when the
        restart differs or Spark refuses it; return the :class:`Demonstration` otherwise."""
        from pytest_opid.spark import demonstrate

        result = demonstrate(previous, new, **knobs)
        if result.outcome != "same":
            pytest.fail(safe(f"Demonstrated restart:\n{result.render()}"), pytrace=False)
        return result

    def _demonstrated(self, key: int | str) -> Any:
        """The demonstration of ``demonstrate_with`` for the query recorded as ``key``, or
        ``None`` where none was asked for (or the recording is not a Spark query)."""
        if self._demonstrate is None or key not in self._objects:
            return None
        from pytest_opid.spark import demonstrate

        previous, knobs = self._demonstrate
        return demonstrate(previous, self._objects[key], **knobs)

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
        claims = self._item.config.stash[SESSION].claims
        other = claims.setdefault(path_key(location), mine)
        if other != mine:
            where = relative(location, self._item.config.rootpath)
            pytest.fail(safe(collision(mine, other, where)), pytrace=False)

    def check_restore(
        self,
        program: Any,
        *,
        previous: Any,
        previous_fingerprint: Any = None,
        allow_non_restored_state: bool = False,
        allow_reinterpreted_state: bool = False,
        allow_unverified: bool = False,
    ) -> RestoreCheck:
        """Assert that ``program`` would start from ``previous``, as its engine decides at
        restore: a Flink savepoint or checkpoint (directory or ``_metadata``), a Spark
        checkpoint directory, a saved fingerprint or an ``.opid`` snapshot. A relative path is
        taken from the test file's folder. ``previous_fingerprint``: the snapshot or saved
        fingerprint of the job that wrote a Spark checkpoint, which says what its state means.
        Fails the test with the engine's explanation when not restorable, when a stateful
        operator would read its state under another meaning (unless
        ``allow_reinterpreted_state``), or when that meaning could not be checked (unless
        ``allow_unverified``); warnings become :class:`OpidRestoreWarning`. Needs no marker."""
        from pytest_opid.restore import check_restore

        path = beside_test(self._item, previous)
        was = (
            None if previous_fingerprint is None else beside_test(self._item, previous_fingerprint)
        )
        result = check_restore(
            path,
            program,
            allow_non_restored_state=allow_non_restored_state,
            previous_fingerprint=was,
        )
        where = relative(str(path), self._item.config.rootpath)
        failure = self._restore_failure(
            result,
            where,
            allow_reinterpreted_state or self._allow_reinterpreted(),
            allow_unverified or self._allow_unverified(),
        )
        if failure is not None:
            pytest.fail(safe(failure), pytrace=False)
        self._restore_warnings(result, f"Restore from {where}:")
        return result

    def _restore_failure(
        self, result: RestoreCheck, where: str, reinterpreted_ok: bool, unverified_ok: bool
    ) -> str | None:
        """The failure a restore verdict makes, or ``None``: not restorable; state read under
        another meaning; its meaning not checked (never passed as safe without evidence)."""
        from pytest_opid.render.restore import render_restore

        if not result.restorable or (result.reinterpreted and not reinterpreted_ok):
            return f"Restore from {where}:\n{render_restore(result)}"
        if result.safe is None and not unverified_ok and not result.reinterpreted:
            return (
                f"Restore from {where}: restorable, but what the state means was not verified "
                "(the checkpoint keeps no window or key expression), so this is not shown safe. "
                "Verify it: give the snapshot or saved fingerprint of the query that wrote the "
                "checkpoint (previous_fingerprint=..., or record it under the marker with "
                "previous=, whose snapshot is used), or pass allow_unverified=True to accept "
                f"the restart unverified.\n{render_restore(result)}"
            )
        return None

    def _allow_unverified(self) -> bool:
        marker = self._marker
        return bool(marker is not None and marker.kwargs.get("allow_unverified"))

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
            self._item.warn(OpidRestoreWarning(safe(f"{title} {head}")))

    def _verify_restore(self) -> list[str]:
        """The marker's ``previous=``: every recorded topology must restore from it."""
        marker = self._marker
        previous = marker.kwargs.get("previous") if marker is not None else None
        if previous is None:
            return []
        from pytest_opid.engines import engine_for_state
        from pytest_opid.errors import OpidError
        from pytest_opid.restore import check_restore

        path = beside_test(self._item, previous)
        where = relative(str(path), self._item.config.rootpath)
        allow = bool(marker.kwargs.get("allow_non_restored_state", False))  # type: ignore[union-attr]
        accept = self._allow_reinterpreted()
        # A Spark checkpoint keeps no plan: the snapshot, the query that wrote it, says what
        # its state means.
        owner = engine_for_state(path) if path.exists() else None
        with_plan = owner is not None and not owner.restore.keeps_plan
        deployed = bool(self._item.config.getoption("opid_deployed", False))
        failures = []
        for entry in self._entries:
            written_by = self._snapshots.get(entry.key) if with_plan else None
            first = with_plan and written_by is None
            if first and deployed:  # the user says: this checkout wrote the checkpoint
                written_by = entry.fingerprint
            try:
                result = check_restore(
                    path,
                    entry.fingerprint,
                    allow_non_restored_state=allow,
                    previous_fingerprint=written_by,
                    # the test's writer names a test folder: it restarts on previous=
                    restarts_on_previous=True,
                )
            except OpidError as exc:
                failures.append(f"Restore from {where}: {exc}")
                continue
            failure = self._restore_failure(result, where, accept, self._allow_unverified())
            if failure is not None and first and not result.meaning_verified:
                failure = _first_snapshot(where, self._item.nodeid, result)
            if failure is not None:
                shown = None
                if result.restorable and not result.meaning_verified:
                    shown = self._demonstrated(entry.key)  # what a prediction could not say
                if shown is not None:
                    failure += f"\nDemonstrated restart:\n{shown.render()}"
                failures.append(failure)
            else:
                self._restore_warnings(result, f"Restore from {where}:")
                if not result.meaning_verified:
                    failures += self._settle(entry.key, f"Restore from {where}:")
        return failures

    def _settle(self, key: int | str, title: str) -> list[str]:
        """A "not verified" restart demonstrated (``demonstrate_with``): the failure when it
        differs or Spark refuses, else a warning that says how much was tried."""
        shown = self._demonstrated(key)
        if shown is None:
            return []
        if shown.outcome != "same":
            return [f"{title} not verified, and demonstrated:\n{shown.render()}"]
        self._item.warn(OpidRestoreWarning(safe(f"{title} demonstrated: {shown.render()}")))
        return []

    def _verify(self) -> list[str]:
        """Judge every recorded topology, then, only if every judgement passed, let syrupy
        record (and under ``--snapshot-update`` write) the snapshots; the failure messages.

        Each snapshot is read and compared with the recorded fingerprint once
        (:meth:`_judge`): that one comparison decides pass or fail, words the failure and gives
        the warnings. ``previous=`` is judged next. Nothing is written before every check of
        the test has passed, whatever the route (snapshot, ``previous=``, both) and the flags:
        a test that fails keeps every snapshot it owns byte for byte."""
        judged = [self._judge(entry) for entry in self._entries]
        for j in judged:
            if j.failure is not None and FUNCTION_CHANGED in j.failure:
                shown = self._demonstrated(j.entry.key)
                if shown is not None:
                    j.failure += f"\nDemonstrated restart:\n{shown.render()}"
        failures = [j.failure for j in judged if j.failure is not None]
        failures += self._verify_restore()
        if failures:
            return failures
        return self._assert_judged(judged)

    def _judge(self, entry: Entry) -> Judged:
        """Read ``entry``'s snapshot and judge the recorded fingerprint against it, once
        (:func:`~pytest_opid.plugin.judge.judge`); writes nothing. Under ``--snapshot-update``
        any difference is written back, so nothing is compared: only the old snapshot is read,
        for ``previous=`` and ``--opid-html``."""
        from pytest_opid.plugin.extension import (
            SnapshotPathError,
            TopologySnapshotExtension,
            Unreadable,
        )
        from pytest_opid.plugin.judge import judge

        config = self._item.config
        update = bool(config.option.update_snapshots)
        extension = TopologySnapshotExtension()
        location = extension.get_location(test_location=self._location, index=entry.key)
        name = extension.get_snapshot_name(test_location=self._location, index=entry.key)
        where = relative(location, config.rootpath)
        title = f"Snapshot {name} ({where}):"
        text = extension.serialize(entry.fingerprint)
        judged = Judged(entry, text, title, where)
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
        judgement = judge(
            None if recalled is None else str(recalled),
            text,
            entry.fingerprint,
            check=self._check,
            allow_reinterpreted_state=self._allow_reinterpreted(),
            exact=update,
            unreadable=isinstance(recalled, Unreadable),
            origin=where,
        )
        if judgement.kind == "same":
            self._snapshots[entry.key] = entry.fingerprint
            return judged
        judged.write = update  # --snapshot-update: any difference is written back
        if judgement.old is not None:
            self._olds[entry.key] = judgement.old
            self._snapshots[entry.key] = judgement.old
        if judgement.passes:
            judged.comparison = judgement.comparison  # passed although the text differs
        elif not update:  # the message on the title's line, or below it
            head = {"unreadable": f"{title} ", "damaged": f"Snapshot {name}: "}
            judged.failure = head.get(judgement.kind, f"{title}\n") + str(judgement.message)
        return judged

    def _assert_judged(self, judged: list[Judged]) -> list[str]:
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
            used, exception = last_result(assertion)
            self._asserted.add(used)
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
            if isinstance(exception, SnapshotPathError):
                failures.append(f"{j.title} {exception.problem}")
            elif isinstance(exception, OSError):  # syrupy making the folder, say
                where = exception.filename or j.where
                failures.append(f"{j.title} {where}: {exception.strerror or exception}")
            else:
                failures.append(f"{j.title}\ncould not be written: {exception!r}")
        return failures

    def _assertion(self, extension_class: type) -> Any:
        assertion = new_assertion(self._item, extension_class, self._location)
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
            self._item.warn(OpidSnapshotWarning(safe(f"{title} {warning}")))
        if comparison.mode == "streaming" and comparison.new.state_operators is not None:
            try:
                restore = without_version_warning(comparison.restore)
            except DocumentError:
                return
            self._restore_warnings(
                restore, f"{title} restarting on the checkpoint the snapshotted query wrote:"
            )

    def _picture(self, failure: str | None) -> str:
        """``--opid-html``: keep what the report draws of this test; the line that names the
        report's section for a failure message ("" without the option)."""
        session = self._item.config.stash[SESSION]
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
        session = self._item.config.stash[SESSION]
        if not session.report:
            return
        from pytest_opid.render.report import render_topology

        for entry in self._entries:
            suffix = "" if entry.key == 0 else f"[{entry.key}]"
            title = f"{self._item.nodeid}{suffix}"
            session.blocks.append([title, render_topology(title, entry.fingerprint)])


def _first_snapshot(where: str, nodeid: str, result: RestoreCheck) -> str:
    """The failure of a ``previous=`` check that could not verify the state's meaning because
    the test has no snapshot yet: the snapshot of the version that wrote the checkpoint is
    what verifies it, and how to record it."""
    from pytest_opid.render.restore import render_restore

    return (
        f"Restore from {where}: restorable, but what the state means was not verified: this "
        "test has no snapshot yet, and previous= verifies it against the snapshot of the "
        "version that wrote the checkpoint. Record that version's snapshot first: check out "
        f"the deployed version and run pytest --snapshot-update --opid-deployed {nodeid} "
        "(previous= is still checked), then come back to the change and run pytest (or keep "
        "the deployed query in the checkpoint at deploy: opid record-deploy).\n"
        f"{render_restore(result)}"
    )


def without_version_warning(restore: RestoreCheck) -> RestoreCheck:
    """``restore`` without its note that the snapshot was made with another engine version:
    the session's summary says that once (:func:`_summarise_other_versions`)."""
    kept = tuple(w for w in restore.warnings if w.kind != "engine_version")
    return restore if len(kept) == len(restore.warnings) else replace(restore, warnings=kept)
