"""Which of a remote Spark Connect session's SQL confs a local replay (:mod:`.connect`) copies
into this process's classic Spark: those that decide how a plan is analyzed and planned into
state, never one that would make the test's JVM load a class, a catalog, a path or code.
"""

from __future__ import annotations

#: The remote session's settings a local replay takes, by prefix: those that change how a
#: plan is analyzed, optimized and planned into state (SQLConf's analyzer, optimizer, shuffle,
#: join, aggregation, streaming, ANSI, time zone and case rules). Nothing else: a remote
#: server's catalogs (``spark.sql.catalog.spark_catalog`` names a class the JVM would load),
#: extensions, warehouse, resources, jars, class paths or UDF and data source registrations
#: never reach the test's JVM (:data:`_NEVER_COPIED`).
_COPIED_PREFIXES = (
    "spark.sql.adaptive.",
    "spark.sql.analyzer.",
    "spark.sql.ansi.",
    "spark.sql.autoBroadcastJoinThreshold",
    "spark.sql.caseSensitive",
    "spark.sql.cbo.",
    "spark.sql.codegen.",
    "spark.sql.crossJoin.",
    "spark.sql.datetime.",
    "spark.sql.decimalOperations.",
    "spark.sql.execution.",
    "spark.sql.files.",
    "spark.sql.inMemoryColumnarStorage.",
    "spark.sql.join.",
    "spark.sql.legacy.",
    "spark.sql.mapKeyDedupPolicy",
    "spark.sql.optimizer.",
    "spark.sql.orc.",
    "spark.sql.parquet.",
    "spark.sql.parser.",
    "spark.sql.planChangeLog.",
    "spark.sql.session.timeZone",
    "spark.sql.shuffle.",
    "spark.sql.sources.bucketing.",
    "spark.sql.sources.partitionOverwriteMode",
    "spark.sql.storeAssignmentPolicy",
    "spark.sql.streaming.",
    "spark.sql.subexpressionElimination.",
    "spark.sql.timestampType",
    "spark.sql.variable.",
    "spark.sql.windowExec.",
)
#: Within the copied prefixes, what a replay still never takes: settings naming classes,
#: plugins, paths or code the JVM would load, and where state or data would be written.
_NEVER_COPIED = (
    "spark.sql.catalog",
    "spark.sql.extensions",
    "spark.sql.sources.default",
    "spark.sql.streaming.stateStore.providerClass",
    "spark.sql.streaming.checkpointFileManagerClass",
    "spark.sql.streaming.checkpointLocation",
    "spark.sql.streaming.streamingQueryListeners",
    "spark.sql.streaming.ui.",
    "spark.sql.execution.pythonUDF.",
    "spark.sql.execution.python.",
    "spark.sql.execution.pyspark.",
    "spark.sql.execution.arrow.",
    "spark.sql.queryExecutionListeners",
    "spark.sql.warehouse.dir",
    "spark.sql.hive.",
    "spark.sql.legacy.sessionInitWithConfigDefaults",
)


def copied_setting(key: str) -> bool:
    """Whether a local replay takes the remote session's ``key``: an allow-list of the
    settings that decide the plan (:data:`_COPIED_PREFIXES`), never one that names a class,
    catalog, path or code (:data:`_NEVER_COPIED`), nor any whose name says it does."""
    if not key.startswith(_COPIED_PREFIXES) or key.startswith(_NEVER_COPIED):
        return False
    lowered = key.lower()
    return not any(word in lowered for word in ("class", "plugin", "jar", "path", ".dir"))
