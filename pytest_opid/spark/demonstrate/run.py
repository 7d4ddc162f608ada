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
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from pytest_opid.errors import DocumentError

#: Conditions that wrap the one that says why.
WRAPPERS = frozenset({"STREAM_FAILED", "FOREACH_BATCH_USER_FUNCTION_ERROR"})
_CONDITION = re.compile(r"\[([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)\]")


@dataclass(frozen=True)
class Failure:
    """Why a run stopped: the error class (or Java class) and the first line of its message."""

    error_class: str
    message: str


class RunFailed(Exception):
    def __init__(self, failure: Failure) -> None:
        super().__init__(f"[{failure.error_class}] {failure.message}")
        self.failure = failure


def run(df: Any, mode: str, checkpoint: str, timeout: float) -> list[list[str]]:
    """The rows ``df`` emits per micro-batch, run once with ``availableNow`` on
    ``checkpoint``; :class:`RunFailed` when Spark stops it with an error."""
    emitted: list[list[str]] = []

    def capture(batch: Any, batch_id: int) -> None:
        emitted.append(sorted(row_text(r.asDict(recursive=True)) for r in batch.collect()))

    try:
        query = (
            df.writeStream.foreachBatch(capture)
            .outputMode(mode)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
    except Exception as exc:
        raise RunFailed(failure_of(exc)) from None
    try:
        if not query.awaitTermination(timeout):
            raise DocumentError(f"a run did not finish in {timeout:g} s (run_timeout)")
    except DocumentError:
        raise
    except Exception as exc:
        raise RunFailed(failure_of(exc)) from None
    finally:
        query.stop()
    return emitted


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
        return Failure(str(throwable.getClass().getName()), _first_line(str(throwable.getMessage())))
    return Failure(f"python:{type(exc).__name__}", _first_line(text))


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")[:500]
