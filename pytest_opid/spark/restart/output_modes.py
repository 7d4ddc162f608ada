"""Output modes Spark refuses when the query starts, whatever the previous state: judged on the
new query alone, so a checkpoint, a previous fingerprint and a snapshot give one verdict.

* A file sink writes in append mode only: ``DataSource.createSink`` for a ``FileFormat``
  (Spark 4: ``STREAMING_OUTPUT_MODE.UNSUPPORTED_DATASOURCE``; 3.5: ``_LEGACY_ERROR_TEMP_1131``,
  "Data source parquet does not support Update output mode").
* The operations an output mode does not allow (``UnsupportedOperationChecker``: append on an
  aggregation without a watermark, complete without an aggregation...): asked of the JVM when
  the writer was fingerprinted (:mod:`pytest_opid.spark.query.start_checks`) and kept as the
  sink's ``refused`` fact.

The memory, console, noop, Kafka and foreach sinks and foreachBatch take every output mode
Spark's checker lets through (their write builders truncate for complete and append for
update); a memory sink recovers from a checkpoint only in complete mode (from a checkpoint,
:mod:`.sinks` reads whether it has batches; from a fingerprint, the query that wrote it ran).
"""

from __future__ import annotations

from pytest_opid.spark.restart.endpoints import endpoints_of
from pytest_opid.spark.restart.findings import Findings
from pytest_opid.spark.words import new_location_fix
from pytest_opid.text import printable

_FIX_FILE = (
    "\nFix:\n"
    '  - keep outputMode("append") with a file sink (an aggregation then needs a watermark, '
    "and emits each window once, when the watermark passes it)\n"
    + new_location_fix("  - or write the rows with foreachBatch (a MERGE for update mode)")
)


def check_output_mode(found: Findings) -> None:
    """The new query's output mode against its sink and its operations, as Spark checks them
    when the query starts (see the module's docstring)."""
    new = endpoints_of(found.new.endpoints)
    if new is None or new.sink is None:
        return
    mode = new.sink.get("outputMode", "append")
    if new.sink_kind == "file" and mode != "append":
        fmt = new.sink.get("format", "?")
        if found.line.at_least(4, 0):
            error = (
                "[STREAMING_OUTPUT_MODE.UNSUPPORTED_DATASOURCE] Invalid streaming output mode: "
                f"{mode}. This output mode is not supported in Data Source {fmt}."
            )
        else:
            error = (
                f"[_LEGACY_ERROR_TEMP_1131] Data source {fmt} does not support "
                f"{mode.capitalize()} output mode."
            )
        found.problem(
            "outputMode",
            f"{found.spark} refuses to start the query with AnalysisException: {error} A file "
            f"sink (FileStreamSink) writes in append mode only, and the query asks for {mode}."
            + _FIX_FILE,
            name="output mode",
        )
    if new.sink_kind == "memory" and mode != "complete" and not found.old.from_checkpoint:
        # MemorySink recovers only in complete mode (DataStreamWriter's recoverFromCheckpoint);
        # on a checkpoint the restart check reads whether it has batches (sinks)
        found.problem(
            "sink",
            f'{found.spark} refuses to start the query with AnalysisException: "This query '
            "does not support recovering from checkpoint location. Delete <checkpoint>/offsets "
            'to start over." (_LEGACY_ERROR_TEMP_1299): a memory sink recovers from a '
            f"checkpoint only in complete mode, and the query asks for {mode} on "
            f"{found.old.origin}.\n"
            "Fix:\n"
            '  - use outputMode("complete") (an aggregation), or another sink on this '
            "checkpoint\n" + new_location_fix("  - or run the query"),
            name="sink",
        )
    refused = new.sink.get("refused")
    if refused:
        found.problem(
            "outputMode",
            f"{found.spark} refuses to start the query with AnalysisException: "
            f"{printable(refused)} (UnsupportedOperationChecker, on the query's plan in "
            f"{mode} mode).\n"
            "Fix:\n"
            "  - an aggregation in append mode needs a watermark on its event time "
            '(withWatermark) that its grouping uses; or use outputMode("update")\n'
            "  - complete mode needs an aggregation; a query without one writes in append or "
            "update mode",
            name="output mode",
        )
