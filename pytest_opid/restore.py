"""``check_restore``: would the new version of a job start from the previous one's state?

The previous state is what the engine itself restores from (a Flink savepoint or checkpoint, a
Spark checkpoint directory) or what a team keeps of it in the repository (a saved fingerprint,
an ``.opid`` snapshot). Each engine package registers how to read its own kind and decides the
verdict by its own restore rules; this module only routes.
"""

from __future__ import annotations

import os
from typing import Any

from pytest_opid.errors import DocumentError
from pytest_opid.io.registry import engine_rules, fingerprint, restore_source
from pytest_opid.io.storage import Location, locate, path_or_location
from pytest_opid.result import Fingerprint, RestoreCheck

__all__ = ["check_restore"]


def check_restore(
    previous: Any,
    program: Any,
    *,
    allow_non_restored_state: bool = False,
    previous_fingerprint: Any = None,
) -> RestoreCheck:
    """The engine's verdict on restoring ``program`` from ``previous``.

    ``previous``: a savepoint or checkpoint (directory or ``_metadata`` file), a Spark
    checkpoint directory (a path, or a URL of the store it lives in: ``s3://``, ``gs://``,
    ``abfss://``...), a saved fingerprint or an ``.opid`` snapshot (a path), or a
    :class:`Fingerprint`. ``program``: anything :func:`pytest_opid.fingerprint` accepts.
    ``allow_non_restored_state`` mirrors Flink's ``--allowNonRestoredState``.
    ``previous_fingerprint``: the fingerprint (or a saved one, a snapshot) of the job that
    wrote ``previous``, for what the state on disk does not keep (a Spark checkpoint keeps no
    window or key expression): the verdict then checks both.
    """
    if isinstance(previous, (str, os.PathLike, Location)):
        path = locate(previous) if isinstance(previous, Location) else path_or_location(previous)
        if not path.exists():
            raise DocumentError(f"{path}: no such file or directory")
        source = restore_source(path)
        if source is not None:
            if previous_fingerprint is not None:
                if source.check_with_previous is None:
                    raise DocumentError(
                        f"{path}: a {source.name} keeps everything its restore is judged by; "
                        "a previous fingerprint goes only with previous state that keeps no plan"
                    )
                was = (
                    previous_fingerprint
                    if isinstance(previous_fingerprint, Fingerprint)
                    else fingerprint(previous_fingerprint)
                )
                return source.check_with_previous(path, program, allow_non_restored_state, was)
            if source.check_program is not None and not isinstance(program, Fingerprint):
                return source.check_program(path, program, allow_non_restored_state)
            new = program if isinstance(program, Fingerprint) else fingerprint(program)
            return source.check(path, new, allow_non_restored_state)
        if path.is_dir():
            raise DocumentError(
                f"{path}: a directory, but neither a savepoint/checkpoint (no _metadata) "
                "nor a streaming checkpoint (no offsets/)"
            )
    if previous_fingerprint is not None:
        raise DocumentError(
            "a previous fingerprint goes with previous state on disk that keeps no plan (a "
            "streaming checkpoint directory); the previous state here is a fingerprint already"
        )
    old = previous if isinstance(previous, Fingerprint) else fingerprint(previous)
    new = program if isinstance(program, Fingerprint) else _planned(old, program)
    if old.engine and new.engine and (old.engine, old.mode) != (new.engine, new.mode):
        raise DocumentError(
            f"the previous state is a {old.engine} {old.mode} job's, the program a "
            f"{new.engine} {new.mode} one: they are different jobs"
        )
    return engine_rules(new.engine, new).check_restore(old, new, allow_non_restored_state)


def _planned(old: Fingerprint, program: Any) -> Fingerprint:
    """``program``'s fingerprint as its engine plans it restarting from ``old``'s state, where
    the engine's rules say how (their ``plan_restarted``: a setting the old job's state pins
    may change the plan); else as :func:`pytest_opid.fingerprint` makes it."""
    if old.engine:
        plan = getattr(engine_rules(old.engine, old), "plan_restarted", None)
        if plan is not None:
            planned: Fingerprint = plan(old, program)
            return planned
    return fingerprint(program)
