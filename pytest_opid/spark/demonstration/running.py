"""Running one version of a query with ``availableNow`` into a collecting sink.

The user's sink is replaced by ``foreachBatch`` collecting each micro-batch's rows (a JSON text
per row, sorted keys, floats to six places so a sum's order of addition does not show), the
checkpoint is ours, and the query runs until it has read every file there is, as the
meaning-restart corpus ran its queries. A failure is reported as Spark names it: the first
error condition other than the wrappers (``STREAM_FAILED``, foreachBatch's), else the Java class
of the innermost cause (``java.lang.AssertionError`` has no condition).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from pytest_opid.errors import DocumentError

#: A run that has read every file stops after this many micro-batches in a row without input
#: rows: Spark's ``availableNow`` keeps running a batch for each due processing-time timer
#: (transformWithState with ``timeMode="ProcessingTime"``), so such a query never ends by itself.
IDLE_BATCHES = 3
#: How often a run's progress is looked at (seconds).
POLL = 0.5
#: How a failure of the ``foreachBatch`` function reaches the query when Spark names no
#: condition (Spark 3.5): py4j's error for an exception raised in a Python callback.
PROXY = "py4j.Py4JException"
#: Conditions that wrap the one that says why.
WRAPPERS = frozenset({"STREAM_FAILED", "FOREACH_BATCH_USER_FUNCTION_ERROR"})
_CONDITION = re.compile(r"\[([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)\]")


@dataclass(frozen=True)
class Failure:
    """Why a run stopped: the error class (or Java class) and the first line of its message."""

    error_class: str
    message: str


def run_together(
    queries: list[tuple[Any, str, str]], timeout: float
) -> list[list[list[str]] | Failure]:
    """Start every ``(df, output mode, checkpoint)`` with ``availableNow`` at once (they share
    the session's cores; each run is mostly the driver's own latency, so two at a time take
    little longer than one), wait for all, and give per query the rows it emitted per
    micro-batch, or how Spark stopped it."""
    results: list[list[list[str]] | Failure] = []
    started: list[Any] = []
    inside: list[list[Failure]] = []
    try:
        for df, mode, checkpoint in queries:
            emitted: list[list[str]] = []
            results.append(emitted)
            inside.append([])
            try:
                started.append(
                    df.writeStream.foreachBatch(_capture(emitted, inside[-1]))
                    .outputMode(mode)
                    .option("checkpointLocation", checkpoint)
                    .trigger(availableNow=True)
                    .start()
                )
            except Exception as exc:
                started.append(None)
                results[-1] = failure_of(exc)
        deadline = time.monotonic() + timeout
        for index, query in enumerate(started):
            if query is None:
                continue
            try:
                while not query.awaitTermination(POLL):
                    if _idle(query):
                        break
                    if time.monotonic() > deadline:
                        raise DocumentError(f"a run did not finish in {timeout:g} s (run_timeout)")
            except DocumentError:
                raise
            except Exception as exc:
                results[index] = failure_of(exc)
                if results[index].error_class == PROXY and inside[index]:  # type: ignore[union-attr]
                    # Spark 3.5 names no condition: the proxy's error hides why the batch failed
                    results[index] = inside[index][0]
    finally:
        for query in started:
            if query is not None:
                query.stop()
    return results


def _idle(query: Any) -> bool:
    """Whether the last :data:`IDLE_BATCHES` micro-batches read no input row (Spark's own
    progress, ``StreamingQueryProgress.numInputRows``, read in the JVM)."""
    progress = query._jsq.recentProgress()
    count = len(progress)
    if count < IDLE_BATCHES:
        return False
    return all(int(progress[i].numInputRows()) == 0 for i in range(count - IDLE_BATCHES, count))


def _capture(emitted: list[list[str]], failures: list[Failure]) -> Any:
    """The ``foreachBatch`` function: collects each micro-batch's rows; where running the batch
    fails (the stateful operators run here), keeps Spark's own failure before py4j wraps it."""

    def capture(batch: Any, batch_id: int) -> None:
        try:
            rows = batch.collect()
        except Exception as exc:
            failures.append(failure_of(exc))
            raise
        emitted.append(sorted(row_text(r.asDict(recursive=True)) for r in rows))

    return capture


def row_text(row: dict[str, Any]) -> str:
    return json.dumps(_plain(row), sort_keys=True)


def _plain(value: Any) -> Any:
    todo: list[tuple[Any, Any, Any]] = []
    root: list[Any] = [None]
    todo.append((root, 0, value))
    while todo:
        holder, key, item = todo.pop()
        if isinstance(item, dict):
            holder[key] = {}
            todo.extend((holder[key], str(k), v) for k, v in item.items())
        elif isinstance(item, (list, tuple)):
            holder[key] = [None] * len(item)
            todo.extend((holder[key], i, v) for i, v in enumerate(item))
        elif isinstance(item, datetime):
            holder[key] = item.strftime("%Y-%m-%dT%H:%M:%S.%f").rstrip("0").rstrip(".")
        elif isinstance(item, date):
            holder[key] = item.isoformat()
        elif isinstance(item, float):
            holder[key] = round(item, 6)
        elif isinstance(item, (Decimal, bytes, bytearray)):
            holder[key] = str(item)
        else:
            holder[key] = item
    return root[0]


def failure_of(exc: BaseException) -> Failure:
    """Spark's error class and first message line for a failed start or run."""
    text = str(exc)
    for match in _CONDITION.finditer(text):
        if match.group(1) not in WRAPPERS:
            rest = text[match.end() :].strip()
            return Failure(match.group(1), _first_line(rest))
    throwable = getattr(exc, "_origin", None) or getattr(exc, "java_exception", None)
    if throwable is not None:
        seen = 0
        while throwable.getCause() is not None and seen < 64:
            throwable = throwable.getCause()
            seen += 1
        return Failure(
            str(throwable.getClass().getName()), _first_line(str(throwable.getMessage()))
        )
    return Failure(f"python:{type(exc).__name__}", _first_line(text))


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")[:500]
