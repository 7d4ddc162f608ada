"""The running query's fingerprint, kept in its checkpoint at deploy time.

A checkpoint keeps the state's schemas and field names, not the plan: a window's duration, an
aggregate's input or the code that updates the state are in no file Spark writes. The deploy
step that starts a query can write the query's fingerprint into the checkpoint folder
(:func:`record_deploy`, ``opid record-deploy``) as :data:`RECORD_NAME`; a later
``check-restore`` on that checkpoint finds it and judges the next version's meaning against it,
as ``--previous-fingerprint`` does. Spark ignores the file: a restart lists only ``metadata``,
``offsets/``, ``commits/``, ``sources/`` and ``state/`` (``StreamExecution`` /
``MicroBatchExecution``); the test ``tests/spark/test_deployed_record.py`` restarts a real
query on a checkpoint holding it.

A record is used only where it matches the checkpoint: the same stateful operators at the same
positions with state of the same shape (the number and types of the key and value fields, as
Spark checks them). One that does not (a query deployed since without recording) is set aside
with a warning that says so, never judged against.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_opid.errors import DocumentError, OpidError
from pytest_opid.io.registry import fingerprint as load_fingerprint
from pytest_opid.result import Fingerprint
from pytest_opid.spark.checkpoint.files import RECORD_NAME
from pytest_opid.spark.checkpoint.model import Checkpoint

__all__ = ["RECORD_NAME", "Recorded", "read_record", "record_path", "write_record"]


@dataclass(frozen=True)
class Recorded:
    """The record found in a checkpoint: the fingerprint where it matches the checkpoint, else
    ``None`` and why it was set aside (``note``)."""

    path: Path
    fingerprint: Fingerprint | None
    note: str | None = None


def record_path(checkpoint: str | os.PathLike[str]) -> Path:
    return Path(checkpoint) / RECORD_NAME


def write_record(checkpoint: str | os.PathLike[str], fp: Fingerprint) -> Path:
    """Write ``fp`` as the checkpoint's record, atomically (a temporary file in the same folder,
    renamed): a reader sees the old record or the new one, never half of one. The folder is
    created when the query has not started yet (Spark then starts in it as in an empty one)."""
    if fp.engine not in ("", "spark") or fp.mode == "batch" or fp.state_operators is None:
        raise DocumentError(
            "the recorded program must be the streaming query that runs on the checkpoint "
            f"(got a {fp.engine or 'plain'} {fp.mode} fingerprint)"
        )
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


def read_record(checkpoint_dir: Path, checkpoint: Checkpoint) -> Recorded | None:
    """The checkpoint's record, ``None`` where it has none. A record that cannot be read or
    does not match the checkpoint comes back without a fingerprint, with the reason."""
    path = checkpoint_dir / RECORD_NAME
    if not path.is_file():
        return None
    try:
        fp = load_fingerprint(path)
    except (OpidError, ValueError, TypeError) as exc:
        return Recorded(path, None, f"{path.name} could not be read ({exc}): it was not used")
    differs = _differs(fp, checkpoint)
    if differs is not None:
        return Recorded(
            path,
            None,
            f"{path.name} in the checkpoint is not the fingerprint of the query that wrote it "
            f"({differs}): it was not used. Record the running query at each deploy "
            "(opid record-deploy).",
        )
    return Recorded(path, fp)


def _differs(fp: Fingerprint, checkpoint: Checkpoint) -> str | None:
    """What sets the record apart from the checkpoint, ``None`` where it matches."""
    if fp.engine not in ("", "spark") or fp.mode == "batch" or fp.state_operators is None:
        return f"a {fp.engine or 'plain'} {fp.mode} fingerprint"
    recorded = {s.state_operator_id: s for s in fp.state_operators}
    written = {op.operator_id: op for op in checkpoint.state_operators}
    if sorted(recorded) != sorted(written):
        return (
            f"stateful operators at state/{_numbers(recorded)}, the checkpoint's at "
            f"state/{_numbers(written)}"
        )
    for number, op in sorted(written.items()):
        state = recorded[number]
        if op.operator_name is not None and state.kind != op.operator_name:
            return f"state/{number} is {state.kind}, the checkpoint's {op.operator_name}"
        stores: dict[str, tuple[str | None, str | None]] = {
            s.name: (s.key_schema, s.value_schema) for s in state.stores
        }
        for store in op.stores:
            for family in store.column_families:
                name = f"{store.name}/{family.name}" if store.schema_version == 3 else store.name
                if name not in stores:
                    continue  # the fingerprint names a column family's store otherwise
                key, value = stores[name]
                if _shape(key) != _shape(family.key_schema_json):
                    return f"state/{number}, store {name}: another key schema"
                if _shape(value) != _shape(family.value_schema_json) and value is not None:
                    return f"state/{number}, store {name}: another value schema"
    return None


def _numbers(ops: Mapping[int, Any]) -> str:
    return "{" + ",".join(map(str, sorted(ops))) + "}" if ops else "(none)"


_LOOSE = frozenset({"name", "metadata", "nullable", "containsNull", "valueContainsNull"})


def _shape(schema: str | None) -> Any:
    """A schema as Spark's restart check compares it: field types by position, without names,
    metadata or nullability (a recorded query may have renamed a field since)."""
    if schema is None:
        return None
    try:
        return json.loads(schema, object_hook=lambda d: {k: d[k] for k in d if k not in _LOOSE})
    except (ValueError, RecursionError):
        return schema
