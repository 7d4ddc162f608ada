"""A Python streaming data source's offsets as its new reader reads them, from the offset the
checkpoint holds.

Spark keeps a Python data source's offset as the JSON its reader returned and hands it back to
the reader of the restarted query as it is (``PythonMicroBatchStream``): the first batch after
the restart asks ``latestOffset(start, limit)`` with the checkpoint's offset as ``start``
(``python_streaming_source_runner``). A reader whose offsets mean something else now (another
unit, another key) shows it there: it fails on the old offset, or answers an end before the
start. So the new reader is made as Spark makes it (the pickled class
``spark.dataSource.register`` keeps, with the query's options: ``schema()``, then
``streamReader`` or ``simpleStreamReader``) and asked, in a child process
(:func:`pytest_opid.spark.isolation.run_isolated`): the user's code runs there, never in the
test process. Its answer is plain data: ``{"initial": ..., "latest": ...}`` or ``{"error":
"..."}``."""

from __future__ import annotations

import inspect
import json
import pickle
from collections.abc import Mapping
from typing import Any

from pytest_opid.io.endpoint_values import is_digest
from pytest_opid.spark.isolation import IsolatedFailure, run_isolated

#: Seconds the child gets to make the reader and answer.
TIMEOUT = 60.0
#: Modules the child imports before the call.
PRELOAD = ("pyspark.cloudpickle", "pyspark.serializers", "pyspark.sql.datasource")


def pickled_source_class(jvm: Any, session: Any, name: str) -> bytes | None:
    """The pickled class of the Python data source registered as ``name`` in the JVM
    ``session`` (``UserDefinedPythonDataSource.dataSourceCls.command``); ``None`` where there
    is none."""
    try:
        found = session.sessionState().dataSourceManager().lookupDataSource(name)
        command = found.dataSourceCls().command()
        if not isinstance(command, (bytes, bytearray)):
            tag = getattr(getattr(jvm.scala.reflect, "ClassTag$"), "MODULE$").Byte()
            command = command.toArray(tag)
        return bytes(command)
    except Exception:  # no such source, or a Spark without Python data sources
        return None


def python_readings(
    session: Any, endpoints: tuple[tuple[str, str, str], ...] | None, offsets: Mapping[int, str]
) -> dict[int, dict[str, Any]]:
    """Each Python data source of a fingerprint's ``endpoints`` (its provider class
    ``PythonDataSourceV2``) asked about the checkpoint's offset at its position (``offsets``),
    with the options the fingerprint records; a PySpark ``session``'s registered classes."""
    jvm, jsession = getattr(session, "_jvm", None), getattr(session, "_jsparkSession", None)
    if jvm is None or jsession is None:  # a Spark Connect session: no classes to ask
        return {}
    by_position: dict[int, dict[str, str]] = {}
    for endpoint, fact, value in endpoints or ():
        if endpoint.startswith("source ") and endpoint[7:].isdigit():
            by_position.setdefault(int(endpoint[7:]), {})[fact] = value
    out: dict[int, dict[str, Any]] = {}
    for position, facts in sorted(by_position.items()):
        offset = offsets.get(position)
        if "PythonDataSource" not in facts.get("class", "") or offset is None:
            continue
        options = {k[7:]: v for k, v in facts.items() if k.startswith("option ")}
        if "path" in facts:
            options["path"] = facts["path"]
        if any(is_digest(v) for v in options.values()):
            out[position] = {
                "error": "its options are kept as digests (they could hold a secret), not the "
                "values its reader needs"
            }
            continue
        command = pickled_source_class(jvm, jsession, facts.get("format", ""))
        if command is None:
            out[position] = {"error": "its class is not registered in the query's session"}
            continue
        out[position] = read_offsets(command, options, offset)
    return out


def read_offsets(command: bytes, options: Mapping[str, str], offset: str) -> dict[str, Any]:
    """The new reader's ``initialOffset()``, ``latestOffset(<offset>, <its default read
    limit>)`` for the checkpoint's ``offset`` (JSON) and the partitions of that batch
    (``partitions(start, end)``, as Spark plans the first batch after the restart), made and
    asked in a child process: ``{"initial", "latest"}``, with ``"failed"`` where the reader
    raised; ``{"error": reason}`` where it could not be asked."""
    request = pickle.dumps((command, dict(options), offset))
    try:
        answer = run_isolated(
            "pytest_opid.spark.query.python_offsets", "ask_reader", request, TIMEOUT, PRELOAD
        )
    except IsolatedFailure as exc:
        return {"error": f"the reader could not be asked: it {exc.what}"}
    if not isinstance(answer, dict) or not all(isinstance(k, str) for k in answer):
        return {"error": "the reader's process sent back something else"}
    return answer


def ask_reader(request: bytes) -> dict[str, Any]:
    """In the child (:func:`read_offsets`)."""
    from pyspark.serializers import CPickleSerializer  # lazy: pyspark is an optional extra

    command, options, offset = pickle.loads(request)
    loaded = CPickleSerializer().loads(command)
    cls = loaded[0] if isinstance(loaded, tuple) else loaded
    source = cls(options)
    schema = source.schema()
    try:
        reader = source.streamReader(schema)
    except NotImplementedError:
        return {"error": "it is a simple stream reader (simpleStreamReader): its read() "
                "returns the end offset with the rows, and was not run"}  # fmt: skip
    start = json.loads(offset)
    out: dict[str, Any] = {"initial": _plain(reader.initialOffset())}
    # the calls by the names PythonStreamingSourceRunner's errors give them
    out["failed_in"] = "latestOffset"
    try:
        # python_streaming_source_runner: latestOffset() without parameters is the old
        # signature (no admission control), else latestOffset(start, limit)
        if inspect.signature(reader.latestOffset).parameters:
            latest = reader.latestOffset(start, reader.getDefaultReadLimit())
        else:
            latest = reader.latestOffset()
        out["latest"] = _plain(latest)
        out["failed_in"] = "planPartitions"
        if latest != start:  # the batch Spark then plans: planInputPartitions(start, end)
            reader.partitions(start, latest)
    except Exception as exc:  # the reader fails on the checkpoint's offset: Spark's does too
        out["failed"] = f"{type(exc).__name__}: {str(exc)[:200]}"
        return out
    del out["failed_in"]
    return out


def _plain(value: Any) -> Any:
    """An offset as JSON data (what Spark would write), or its text where it is not."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return repr(value)[:200]
