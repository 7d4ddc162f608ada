"""The running query's fingerprint, kept in its checkpoint at deploy time.

A checkpoint keeps the state's schemas and field names, not the plan: a window's duration, an
aggregate's input or the code that updates the state are in no file Spark writes. The deploy
step that starts a query can write the query's fingerprint into the checkpoint folder
(:func:`pytest_opid.spark.restore.record_deploy`, ``opid record-deploy``) as
:data:`RECORD_NAME`; a later ``check-restore`` on that checkpoint finds it and judges the next
version's meaning against it, as ``--previous-fingerprint`` does. Spark ignores the file: a
restart lists only ``metadata``, ``offsets/``, ``commits/``, ``sources/`` and ``state/``
(``StreamExecution`` / ``MicroBatchExecution``); the test
``tests/spark/test_checkpoint_evidence.py`` restarts a real query on a checkpoint holding it.

A record is used only where it can be the query that wrote the checkpoint, checked as a
``--previous-fingerprint`` is (:mod:`.restart.written_by`: the stateful operators by number
and name, every store's schemas as Spark compares them). One that is not (a query deployed since
without recording) is set aside with a warning that says so, never judged against.
"""

from __future__ import annotations

import dataclasses
import io
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pytest_opid.errors import DocumentError, OpidError
from pytest_opid.io.json import input_limit, read_bytes
from pytest_opid.io.storage import Location, is_url, locate
from pytest_opid.result import Fingerprint, RestoreCheck, RestoreProblem
from pytest_opid.spark.checkpoint.files import RECORD_NAME
from pytest_opid.spark.checkpoint.model import Checkpoint
from pytest_opid.spark.restart.written_by import check_written_by

__all__ = [
    "RECORD_NAME",
    "Recorded",
    "read_record",
    "record_path",
    "with_record",
    "write_record",
]


@dataclass(frozen=True)
class Recorded:
    """The record found in a checkpoint: the fingerprint where it matches the checkpoint, else
    ``None`` and why it was set aside (``note``)."""

    path: Path | Location
    fingerprint: Fingerprint | None
    note: str | None = None


def record_path(checkpoint: str | os.PathLike[str]) -> Path:
    return Path(checkpoint) / RECORD_NAME


def write_record(checkpoint: str | os.PathLike[str] | Location, fp: Fingerprint) -> Path | Location:
    """Write ``fp`` as the checkpoint's record, atomically (a temporary file in the same folder,
    renamed): a reader sees the old record or the new one, never half of one. The folder is
    created when the query has not started yet (Spark then starts in it as in an empty one).
    A checkpoint in a store (a URL) gets it in one PUT, as whole."""
    if fp.engine not in ("", "spark") or fp.mode == "batch" or fp.state_operators is None:
        raise DocumentError(
            "the recorded program must be the streaming query that runs on the checkpoint "
            f"(got a {fp.engine or 'plain'} {fp.mode} fingerprint)"
        )
    if isinstance(checkpoint, Location) or is_url(checkpoint):
        where = locate(checkpoint) / RECORD_NAME
        if where.is_local:  # a file:// URL
            return write_record(where.path[: -len(RECORD_NAME) - 1], fp)
        text = io.BytesIO()
        fp.write_json(text)
        where.write_bytes(text.getvalue())
        return where
    folder = Path(checkpoint)
    if folder.exists() and not folder.is_dir():
        raise DocumentError(f"{folder}: not a directory")
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / RECORD_NAME
    handle, temporary = tempfile.mkstemp(prefix=f".{RECORD_NAME}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(handle, "wb") as stream:
            fp.write_json(stream)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


def read_record(checkpoint_dir: Path | Location, checkpoint: Checkpoint) -> Recorded | None:
    """The checkpoint's record, ``None`` where it has none. A record that cannot be read, is
    not a saved fingerprint (a JSON object of its shape, as :func:`write_record` writes it),
    or is not the fingerprint of the query that wrote the checkpoint (:func:`.restart.
    written_by.check_written_by`) comes back without a fingerprint, with the reason. Its body
    is only ever read as JSON: text that is not is never taken for the path of another file."""
    path = checkpoint_dir / RECORD_NAME
    if not path.is_file():
        return None
    said = f"{RECORD_NAME} in the checkpoint"
    try:
        raw = _bytes(path, said)
        if not raw.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{"):
            raise DocumentError(
                f"{said}: not a saved fingerprint (a JSON object, as opid record-deploy writes it)"
            )
        fp = Fingerprint.from_json(raw, said)
        check_written_by(checkpoint, fp, said)
    except (OpidError, ValueError, TypeError) as exc:
        return Recorded(
            path,
            None,
            f"{exc}. It was not used: record the running query at each deploy "
            "(opid record-deploy).",
        )
    return Recorded(path, fp)


def _bytes(where: Path | Location, said: str) -> bytes:
    """The record's bytes, within the input limit; a failure names the record, not its path."""
    limit = input_limit()
    try:
        data = read_bytes(where, limit) if isinstance(where, Path) else where.read_bytes(limit)
    except OpidError as exc:
        what = getattr(exc, "what", None) or str(exc).rpartition(": ")[2]
        raise DocumentError(f"{said}: cannot be read ({what})") from None
    if len(data) > limit:
        raise DocumentError(f"{said}: longer than the {limit}-byte limit of an input")
    return data


def with_record(record: Recorded | None, check: RestoreCheck) -> RestoreCheck:
    """``check`` saying where the previous meaning came from: the record in the checkpoint, or
    why a record there was set aside (a warning)."""
    if record is None:
        return check
    if record.fingerprint is None:
        note = RestoreProblem("recorded_fingerprint", record.note or "")
        return dataclasses.replace(check, warnings=(*check.warnings, note))
    said = f"state meaning (from the fingerprint recorded at deploy, {RECORD_NAME})"
    verified = tuple(said if v.startswith("state meaning") else v for v in check.verified)
    return dataclasses.replace(check, verified=verified)
