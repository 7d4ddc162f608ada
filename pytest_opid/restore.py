"""``check_restore``: would the new version of a job start from the previous one's state?

The one entrance every route takes (the marker's ``previous=``, the fixture's ``check_restore``,
the Python API, ``opid check-restore``). The previous state is what the engine itself restores
from (a Flink savepoint or checkpoint, a Spark checkpoint directory) or what a team keeps of it
in the repository (a saved fingerprint, an ``.opid`` snapshot). This module finds the engine
whose state it is and hands the question to that engine's
:class:`~pytest_opid.engines.RestoreEntrance`, which plans the program as the engine plans a
restarted job and decides by its own rules.
"""

from __future__ import annotations

import os
from typing import Any

from pytest_opid.engines import RestoreOptions, engine, engine_for_state, engines
from pytest_opid.errors import DocumentError
from pytest_opid.inputs import fingerprint
from pytest_opid.io.storage import Location, locate, path_or_location
from pytest_opid.result import Fingerprint, RestoreCheck

__all__ = ["check_restore", "require_same_job"]


def check_restore(
    previous: Any,
    program: Any,
    *,
    allow_non_restored_state: bool = False,
    previous_fingerprint: Any = None,
    restarts_on_previous: bool = False,
) -> RestoreCheck:
    """The engine's verdict on restoring ``program`` from ``previous``.

    ``previous``: a savepoint or checkpoint (directory or ``_metadata``), a Spark checkpoint
    directory (a path, or a URL of the store it lives in: ``s3://``, ``gs://``, ``abfss://``...;
    :mod:`pytest_opid.io.storage`), a saved fingerprint or an ``.opid`` snapshot (a path), or a
    :class:`Fingerprint`. ``program``: anything :func:`pytest_opid.fingerprint` accepts (a live
    program is planned as its engine plans a restarted job), or its fingerprint.
    ``allow_non_restored_state`` mirrors Flink's ``--allowNonRestoredState``.
    ``previous_fingerprint``: the fingerprint (or a saved one, a snapshot) of the job that
    wrote ``previous``, for what the state on disk does not keep (a Spark checkpoint keeps no
    window or key expression); it is checked to be that job's first.
    ``restarts_on_previous``: judge the program as restarting on ``previous`` even where it
    names another checkpoint location (a test's ``DataStreamWriter`` and the repository's copy
    of production's checkpoint); otherwise Spark would start it there as a new query.

    :attr:`RestoreCheck.safe` is ``True`` only where the state's meaning was verified too,
    ``None`` where the engine restores but that could not be checked.
    """
    was = None
    if previous_fingerprint is not None:
        was = (
            previous_fingerprint
            if isinstance(previous_fingerprint, Fingerprint)
            else fingerprint(previous_fingerprint)
        )
    options = RestoreOptions(allow_non_restored_state, was, restarts_on_previous)
    if isinstance(previous, (str, os.PathLike, Location)):
        path = locate(previous) if isinstance(previous, Location) else path_or_location(previous)
        if not path.exists():
            raise DocumentError(f"{path}: no such file or directory")
        owner = engine_for_state(path)
        if owner is not None:
            if was is not None and owner.restore.keeps_plan:
                raise DocumentError(
                    f"{path}: {owner.restore.state_kind} keeps everything its restore is judged "
                    "by; a previous fingerprint goes only with previous state that keeps no plan"
                )
            return owner.restore.check(path, program, options)
        if path.is_dir():
            kinds = " nor ".join(e.restore.state_kind for e in engines() if e.restore.state_kind)
            raise DocumentError(f"{path}: a directory, but neither {kinds}")
    if was is not None:
        raise DocumentError(
            "a previous fingerprint goes with previous state on disk that keeps no plan (a "
            "streaming checkpoint directory); the previous state here is a fingerprint already"
        )
    old = previous if isinstance(previous, Fingerprint) else fingerprint(previous)
    return engine(old.engine, old).restore.check(old, program, options)


def require_same_job(old: Fingerprint, new: Fingerprint) -> None:
    """Refuse, in one line, a previous fingerprint and a new one of different engines or
    modes: no engine restores one from the other."""
    if old.engine and new.engine and (old.engine, old.mode) != (new.engine, new.mode):
        raise DocumentError(
            f"the previous state is a {old.engine} {old.mode} job's, the program a "
            f"{new.engine} {new.mode} one: they are different jobs"
        )
