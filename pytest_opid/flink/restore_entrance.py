"""Flink's restore entrance: the one place its restore verdict is decided, whatever the route.

Previous state is a savepoint or retained checkpoint (a directory holding ``_metadata``, or that
file), read as ``Checkpoints.loadCheckpointMetadata`` reads it, or the fingerprint of the job
that took it (a snapshot, a saved fingerprint). Either keeps every operator's state ID, all that
Flink restores by, so no previous fingerprint is needed beside a savepoint.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pytest_opid.flink.restore import check_savepoint
from pytest_opid.flink.rules import FlinkRules
from pytest_opid.flink.savepoint import METADATA_FILE, read_savepoint
from pytest_opid.inputs import fingerprint
from pytest_opid.io.storage import Location
from pytest_opid.restore import require_same_job
from pytest_opid.result import Fingerprint, RestoreCheck

__all__ = ["FlinkRestore", "is_savepoint"]


def is_savepoint(path: Path | Location) -> bool:
    """A savepoint or retained checkpoint: a directory holding ``_metadata``, or that file."""
    if isinstance(path, Location):  # in a store: from the folder's one listing
        if path.is_dir():
            return (path / METADATA_FILE).is_file()
        return path.name == METADATA_FILE and path.is_file()
    try:
        if path.is_dir():  # a _metadata that is not a file: the reader says what it is
            meta = path / METADATA_FILE
            return os.path.lexists(meta) and not meta.is_dir()
        return path.name == METADATA_FILE and path.is_file()
    except (OSError, ValueError):
        return False


class FlinkRestore:
    """Flink's :class:`~pytest_opid.engines.RestoreEntrance`."""

    state_kind = "a Flink savepoint or checkpoint (a _metadata file)"
    keeps_plan = True  # every operator's state ID is in _metadata

    def __init__(self, rules: FlinkRules) -> None:
        self.rules = rules

    def recognises(self, path: Path | Location) -> bool:
        return is_savepoint(path)

    def check(
        self, previous: Path | Location | Fingerprint, program: Any, options: Any
    ) -> RestoreCheck:
        new = fingerprint(program)
        allow = options.allow_non_restored_state
        if isinstance(previous, Fingerprint):
            require_same_job(previous, new)
            return self.rules.check_restore(previous, new, allow)
        return check_savepoint(read_savepoint(previous), new, allow_non_restored_state=allow)
