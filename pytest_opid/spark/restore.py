"""Spark's restore entrance: the one place a restart verdict is decided, whatever the route.

Previous state is a Structured Streaming checkpoint directory (``metadata`` and ``offsets/``) or
the fingerprint of the query that wrote one (a snapshot, a saved fingerprint). A live program is
planned as Spark plans a restarted query: with the settings the checkpoint pins
(``OffsetSeqMetadata.setSessionConf``), of which the state schema widening decides the new state
schemas. A previous fingerprint given with a checkpoint is first checked to be the query that
wrote it (:mod:`.restart.written_by`), then judges what the checkpoint does not keep (windows,
key and aggregate expressions).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from pytest_opid.errors import DocumentError
from pytest_opid.inputs import fingerprint
from pytest_opid.io.storage import Location, path_or_location
from pytest_opid.restore import require_same_job
from pytest_opid.result import Fingerprint, RestoreCheck
from pytest_opid.spark.checkpoint.read import read_checkpoint
from pytest_opid.spark.deployed import read_record, with_record, write_record
from pytest_opid.spark.query.python_offsets import python_readings
from pytest_opid.spark.query.state_reader import read_samples, read_samples_from_store
from pytest_opid.spark.restart.verdict import check_checkpoint, check_fingerprint
from pytest_opid.spark.restart.written_by import check_written_by
from pytest_opid.spark.versions import (
    WIDENING,
    engine_line,
    feature_line,
    installed_line,
    judging_line,
)
from pytest_opid.spark.vocabulary import ALWAYS_NULLABLE

__all__ = ["SparkRestore", "is_checkpoint", "record_deploy", "restart_settings"]

#: What Spark takes from a checkpoint's offset log whatever a restarted query asks for
#: (``OffsetSeqMetadata.setSessionConf``): the state's partitioning.
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"


def is_checkpoint(path: Path | Location) -> bool:
    """A Structured Streaming checkpoint directory: its offset log (and ``metadata`` file,
    whose absence beside an offset log Spark refuses: the restart check says so)."""
    return path.is_dir() and (path / "offsets").is_dir()


def restart_settings(previous: str | os.PathLike[str], conf: dict[str, str]) -> dict[str, str]:
    """The settings to plan a program restarted on ``previous`` with (the CLI's ``--spark``
    route): ``conf``, and where it sets no shuffle partitions and ``previous`` is a
    checkpoint, the checkpoint's, which Spark restores anyway; else the CLI's own default
    would be reported as a setting the new query asks for and Spark ignores."""
    if SHUFFLE_PARTITIONS in conf:
        return conf
    path = path_or_location(previous)
    if not is_checkpoint(path):
        return conf
    pinned = read_checkpoint(path).confs.get(SHUFFLE_PARTITIONS)
    return conf if pinned is None else {**conf, SHUFFLE_PARTITIONS: pinned}


class SparkRestore:
    """Spark's :class:`~pytest_opid.engines.RestoreEntrance`."""

    state_kind = "a Spark streaming checkpoint (metadata and offsets/)"
    #: a checkpoint keeps schemas and names, not the plan (windows, key expressions)
    keeps_plan = False

    def recognises(self, path: Path | Location) -> bool:
        return is_checkpoint(path)

    def check(
        self, previous: Path | Location | Fingerprint, program: Any, options: Any
    ) -> RestoreCheck:
        """Spark has no ``--allowNonRestoredState``: that option is Flink's and ignored."""
        if isinstance(previous, Fingerprint):
            new = program if isinstance(program, Fingerprint) else plan_restarted(previous, program)
            require_same_job(previous, new)
            return check_fingerprint(previous, new)
        checkpoint = read_checkpoint(previous)
        written_by = options.previous_fingerprint
        record = None
        if written_by is not None:
            check_written_by(checkpoint, written_by, "the previous fingerprint")
        else:  # the fingerprint recorded in the checkpoint at deploy, where there is one
            record = read_record(previous, checkpoint)
            written_by = record.fingerprint if record is not None else None
        if isinstance(program, Fingerprint):
            return with_record(
                record,
                check_checkpoint(
                    checkpoint, program, previous=written_by, here=options.restarts_on_previous
                ),
            )
        planned: Fingerprint | None
        # A Connect DataFrame's session too: its conf is the server-side session's, which the
        # replay plans in (or copies, replaying a remote plan locally).
        widened = checkpoint.confs.get(ALWAYS_NULLABLE, "false")
        planned = _fingerprint_widened(program, widened)
        # Without the old query's plan, the state's own rows show its windows (Spark's reader;
        # a checkpoint in a store: its windowed operators' state copied for the reader).
        session = getattr(_planned_frame(program), "sparkSession", None)
        samples = None
        if written_by is None and session is not None:
            if isinstance(previous, Path):
                samples = read_samples(session, previous, checkpoint)
            elif not previous.is_local:
                samples = read_samples_from_store(session, previous, checkpoint)
        new = planned if planned is not None else fingerprint(program)
        readers = None
        if session is not None:
            offsets = {s.position: s.offset for s in checkpoint.sources if s.offset is not None}
            readers = python_readings(session, new.endpoints, offsets)
        check = check_checkpoint(
            checkpoint,
            new,
            planned=planned is not None,
            previous=written_by,
            samples=samples,
            readers=readers,
            here=options.restarts_on_previous,
        )
        return with_record(record, check)


def record_deploy(checkpoint: str | os.PathLike[str], program: Any) -> Path | Location:
    """Keep the running query's fingerprint in its checkpoint folder, for ``check_restore`` on
    that checkpoint to judge the next version's meaning by. ``program``: the query started on
    the checkpoint (a DataFrame, a ``StreamingQuery``), its fingerprint or a saved one; a live
    one is planned as Spark plans it on that checkpoint (the state schema widening it pins),
    where the checkpoint has started already. ``checkpoint``: a folder or the URL of one in a
    store. Returns the record's path."""
    path = path_or_location(checkpoint)
    if isinstance(program, (Fingerprint, str, os.PathLike, dict)):
        return write_record(path, fingerprint(program))
    planned = None
    if is_checkpoint(path):
        widened = read_checkpoint(path).confs.get(ALWAYS_NULLABLE, "false")
        planned = _fingerprint_widened(program, widened)
    return write_record(path, planned if planned is not None else fingerprint(program))


def plan_restarted(old: Fingerprint, program: Any) -> Fingerprint:
    """``program`` planned as Spark plans it restarting on the checkpoint of the query ``old``
    describes: a query started before Spark 4.3 pinned no state schema widening, and 4.3
    then plans the restarted query without it (as from a checkpoint's own settings). Where
    ``old`` names no version, as the program plans now."""
    if old.engine not in ("", "spark"):
        raise DocumentError(
            f"the previous state is a {old.engine} job's, the program a Spark query: they are "
            "different jobs"
        )
    made_on = engine_line(old.engine_version)
    if made_on is not None and min(made_on, judging_line()) < feature_line(WIDENING):
        planned = _fingerprint_widened(program, "false")
        if planned is not None:
            # said in the fingerprint: its schemas' nullability is then the restart's own
            pinned = (ALWAYS_NULLABLE, "false")
            if pinned in planned.settings:
                return planned
            return dataclasses.replace(planned, settings=(*planned.settings, pinned))
    return fingerprint(program)


def _fingerprint_widened(program: Any, widened: str) -> Fingerprint | None:
    """``program``'s fingerprint planned with the state schema widening set to ``widened``
    (``"true"``/``"false"``), its session's setting restored after; ``None`` where the
    installed Spark has no such setting or the program no session."""
    session = getattr(_planned_frame(program), "sparkSession", None)
    if session is None or installed_line() < feature_line(WIDENING):
        return None
    before = session.conf.get(ALWAYS_NULLABLE, None)
    session.conf.set(ALWAYS_NULLABLE, widened)
    try:
        return fingerprint(program)
    finally:
        if before is None:
            session.conf.unset(ALWAYS_NULLABLE)
        else:
            session.conf.set(ALWAYS_NULLABLE, before)


def _planned_frame(program: Any) -> Any:
    """The DataFrame a program plans: a ``DataStreamWriter``'s own (``_df``), else the program.
    Asked by class name, since a Spark Connect DataFrame answers any attribute with a column."""
    if type(program).__name__ == "DataStreamWriter":
        return getattr(program, "_df", program)
    return program
