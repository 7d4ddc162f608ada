"""What Spark refuses when a streaming query starts, before it reads a checkpoint: the operations
its output mode does not allow (``UnsupportedOperationChecker.checkForStreaming``, which Spark's
``ResolveWriteToStream`` calls on the query's analyzed plan with the writer's output mode while
``spark.sql.streaming.unsupportedOperationCheck`` is on): append on an aggregation without a
watermark, complete without an aggregation, ... Asked of the JVM itself, so the refusal and its
error class are the installed Spark's own. Nothing runs and nothing is written."""

from __future__ import annotations

from typing import Any

#: The session conf that turns the check off (Spark's ``UNSUPPORTED_OPERATION_CHECK_ENABLED``).
CHECK_ENABLED = "spark.sql.streaming.unsupportedOperationCheck"


def start_refusal(jvm: Any, session: Any, analyzed: Any, output_mode: Any) -> str | None:
    """Spark's refusal of the query ``analyzed`` in ``output_mode`` as the first line of its
    message (``[<error class>] ...``), or ``None`` where Spark starts it (or where the check
    cannot be asked)."""
    try:
        enabled = str(session.sessionState().conf().getConfString(CHECK_ENABLED, "true"))
        if enabled.strip().lower() != "true":
            return None
        checker = jvm.org.apache.spark.sql.catalyst.analysis.UnsupportedOperationChecker
        checker.checkForStreaming(analyzed, output_mode)
    except Exception as exc:  # py4j: Spark's AnalysisException, or a call this line lacks
        # PySpark's captured exception keeps the Java one (py4j's error: java_exception)
        throwable = getattr(exc, "_origin", None) or getattr(exc, "java_exception", None)
        if throwable is None or "AnalysisException" not in str(throwable.getClass().getName()):
            return None
        return _described(throwable)
    return None


def _described(throwable: Any) -> str:
    condition = None
    for getter in ("getCondition", "getErrorClass"):  # Spark 4, Spark 3.5
        try:
            condition = getattr(throwable, getter)()
            break
        except Exception:  # py4j: no such method on this line
            continue
    message = str(throwable.getMessage() or "").split("\n", 1)[0].rstrip(";").strip()
    if condition is None or message.startswith(f"[{condition}]"):
        return message
    return f"[{condition}] {message}"
