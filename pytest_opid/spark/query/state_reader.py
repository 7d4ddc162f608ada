"""A bounded sample of a checkpoint's state rows, read with Spark's own state data source.

Spark 3.5 added a reader for a checkpoint's state (``StateDataSource``, format
``statestore``): ``spark.read.format("statestore").option("path", checkpoint)
.option("operatorId", n).option("storeName", "default")`` gives one row per state entry, its
``key`` and ``value`` structs, as of the last committed batch (options ``path``, ``batchId``,
``operatorId``, ``storeName`` and ``joinSide`` on 3.5 to 4.3). Only the window bounds are read,
at most :data:`~pytest_opid.spark.checkpoint.state_rows.SAMPLE_ROWS` rows per operator, and
only for the operators that have a window. It needs a SparkSession: without one (a fingerprint
checked from the shell) nothing is read, and the verdict says so.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from pytest_opid.io.storage import Location
from pytest_opid.spark.checkpoint.model import Checkpoint
from pytest_opid.spark.checkpoint.state_rows import SAMPLE_ROWS, StateSample

#: The operators whose state holds a window's bounds, and where: Spark's
#: ``StateStoreSaveExec`` keys a time window's aggregate by ``window`` (a struct of ``start``
#: and ``end``); ``SessionWindowStateStoreSaveExec`` keeps ``session_window`` in the value.
_WINDOWED = {"stateStoreSave": "key", "sessionWindowStateStoreSaveExec": "value"}


#: What a sample of a checkpoint in a store may download (its windowed operators' state
#: folders, the latest offset and commit, ``metadata``): more is not read, and the sample says so.
STORE_FILES = 200
STORE_BYTES = 16 * 1024 * 1024


def read_samples_from_store(
    session: Any, where: Location, checkpoint: Checkpoint, limit: int = SAMPLE_ROWS
) -> dict[int, StateSample]:
    """:func:`read_samples` of a checkpoint in a store: Spark's reader needs a file system
    Spark can read, so the windowed operators' state folders, the latest offset and commit
    entries and ``metadata`` are copied to a temporary folder first, from one recursive
    listing, within :data:`STORE_FILES` files and :data:`STORE_BYTES` bytes (a long-running
    query keeps thousands of state files: then nothing is read, and the sample says why)."""
    wanted = {op.operator_id for op in checkpoint.state_operators if _windowed(op)}
    if not wanted:
        return {}
    every = dict(where.walk())
    latest = {}
    for log in ("offsets", "commits"):
        batches = [int(rel[len(log) + 1 :]) for rel in every if _entry_of(rel, log)]
        if batches:
            latest[f"{log}/{max(batches)}"] = every[f"{log}/{max(batches)}"]
    state = {
        rel: size
        for rel, size in every.items()
        if rel.split("/")[:2] in ([["state", str(i)] for i in wanted]) and not rel.endswith(".crc")
    }
    chosen = {**latest, **state, **({"metadata": every["metadata"]} if "metadata" in every else {})}
    if len(chosen) > STORE_FILES or sum(chosen.values()) > STORE_BYTES:
        why = (
            f"the state in the store is {len(state)} files, {sum(state.values())} bytes: over "
            f"the {STORE_FILES} files, {STORE_BYTES} bytes a sample reads"
        )
        return {i: StateSample(i, not_read=why) for i in sorted(wanted)}
    with tempfile.TemporaryDirectory(prefix="opid-state-") as temporary:
        root = Path(temporary)
        for rel, size in sorted(chosen.items()):
            target = root.joinpath(*rel.split("/"))
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(where.child(*rel.split("/")).read_bytes(size))
        return read_samples(session, root, checkpoint, limit)


def _entry_of(rel: str, log: str) -> bool:
    head, _, name = rel.partition("/")
    return head == log and name.isdigit()


def _windowed(op: Any) -> bool:
    where = _WINDOWED.get(op.operator_name or "")
    field = "window" if where == "key" else "session_window"
    return where is not None and field in _struct_fields(_default_schema(op, where))


def read_samples(
    session: Any, path: Path, checkpoint: Checkpoint, limit: int = SAMPLE_ROWS
) -> dict[int, StateSample]:
    """The window bounds in the state of each of ``checkpoint``'s windowed operators (a
    default store whose schema has the window field), read through ``session``. A failure
    to read is a sample that says why, never an error: the verdict then stays "not verified"."""
    out: dict[int, StateSample] = {}
    reader = _session_of_its_own(session)
    for op in checkpoint.state_operators:
        where = _WINDOWED.get(op.operator_name or "")
        if where is None:
            continue
        schema = _default_schema(op, where)
        field = "window" if where == "key" else "session_window"
        if field not in _struct_fields(schema):
            continue
        if not _has_state_data(path / "state" / str(op.operator_id)):
            # a slim copy keeps no state data: Spark's reader would fail (and log it) on it
            out[op.operator_id] = StateSample(
                op.operator_id, not_read="the checkpoint keeps no state data (a slim copy?)"
            )
            continue
        out[op.operator_id] = _sample(reader, path, op.operator_id, where, field, limit)
    return out


#: The files a state store provider writes its data in (HDFSBackedStateStoreProvider's
#: .delta and .snapshot; RocksDBStateStoreProvider's .changelog and .zip).
_DATA_SUFFIXES = (".delta", ".snapshot", ".changelog", ".zip")


def _has_state_data(operator_dir: Path) -> bool:
    """Whether an operator's state folder holds any store data file (a bounded look: the
    first partition folders only)."""
    try:
        partitions = sorted(p for p in operator_dir.iterdir() if p.name.isdigit())[:4]
        for partition in partitions:
            for entry in partition.rglob("*"):
                if entry.name.endswith(_DATA_SUFFIXES) and entry.is_file():
                    return True
    except OSError:
        return False
    return False


def _session_of_its_own(session: Any) -> Any:
    """A classic session's sibling (the program's, a test's or the CLI's, keeps its settings
    whatever Spark's state reader sets); a Connect session before PySpark 4.3 has no
    ``newSession`` (JVM_ATTRIBUTE_NOT_SUPPORTED) and reads through the program's own."""
    try:
        return session.newSession()
    except Exception:  # pyspark.errors.PySparkAttributeError: Connect's session
        return session


def _default_schema(op: Any, where: str) -> str | None:
    for store in op.stores:
        if store.name != "default":
            continue
        for family in store.column_families:
            return str(family.key_schema_json if where == "key" else family.value_schema_json)
    return None


def _struct_fields(schema: str | None) -> dict[str, Any]:
    """A struct schema's fields whose own type is a struct with ``start`` and ``end``."""
    try:
        tree = json.loads(schema) if schema else None
    except (ValueError, RecursionError):
        return {}
    fields = tree.get("fields") if isinstance(tree, dict) else None
    out = {}
    for field in fields if isinstance(fields, list) else ():
        kind = field.get("type") if isinstance(field, dict) else None
        inner = kind.get("fields") if isinstance(kind, dict) else None
        names = {f.get("name") for f in inner if isinstance(f, dict)} if inner else set()
        if {"start", "end"} <= names:
            out[str(field.get("name"))] = kind
    return out


def _sample(
    session: Any, path: Path, operator_id: int, where: str, field: str, limit: int
) -> StateSample:
    try:
        rows = (
            session.read.format("statestore")
            .option("path", str(path.resolve()))
            .option("operatorId", operator_id)
            .option("storeName", "default")
            .load()
            .selectExpr(
                f"unix_micros({where}.`{field}`.start) AS s",
                f"unix_micros({where}.`{field}`.end) AS e",
            )
            .limit(limit)
            .collect()
        )
    except Exception as exc:  # py4j / Spark's own error: the sample says it, not the verdict
        text = str(exc).strip().splitlines()
        return StateSample(operator_id, not_read=(text[0] if text else type(exc).__name__)[:200])
    bounds = sorted({(int(r[0]), int(r[1])) for r in rows if r[0] is not None and r[1] is not None})
    windows = tuple(bounds) if where == "key" else ()
    sessions = tuple(bounds) if where == "value" else ()
    return StateSample(operator_id, len(rows), windows, sessions, complete=len(rows) < limit)
