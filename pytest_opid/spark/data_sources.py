"""A sink's format as Spark resolves the name ``DataStreamWriter.format(...)`` was given, so two
spellings of one format are one sink and a file sink is known whatever it is called.

Spark's ``DataSource.lookupDataSource`` (Spark 4.3, the same in 3.5 but for XML, built in from
4.0) resolves a name in this order: its ``backwardCompatibilityMap`` (old package and class
names, ``com.databricks.spark.csv``...), ``orc`` by ``spark.sql.orc.impl``,
``com.databricks.spark.avro`` to Spark's own Avro, then the short names the data sources
register (``DataSourceRegister.shortName``, compared case-insensitively), then the name as a
class, then the name with ``.DefaultSource``. A file format's V2 class
(``ParquetDataSourceV2``...) writes a stream through its V1 ``fallbackFileFormat``
(``DataStreamWriter``: "file source v2 does not support streaming yet"), so every one of these
names ends in Spark's ``FileStreamSink`` with its ``_spark_metadata`` log. The facts were read
from the PySpark 4.3 JVM (``DataSource.lookupDataSource`` and the map itself); the tests ask the
installed JVM again.

A name Spark does not build in (``delta``, a Python data source, a connector's class) is kept
as given, lowercased as Spark compares short names: its sink is known by that name and its
path.
"""

from __future__ import annotations

from typing import NamedTuple

#: The formats whose sink is Spark's ``FileStreamSink``, by their short names.
FILE_FORMATS = frozenset({"parquet", "json", "csv", "orc", "text", "avro", "xml"})

#: The sinks Spark builds in, by the ``kind`` a fingerprint records them under.
BUILT_IN = frozenset({"file", "console", "memory", "noop", "kafka", "foreach", "foreachBatch"})

_SQL = "org.apache.spark.sql"
_SOURCES = f"{_SQL}.execution.datasources"

#: Spark's ``DataSource.backwardCompatibilityMap`` for file formats and the streaming sinks,
#: and the classes those names and the short names resolve to: every name -> its short name.
_NAMES: dict[str, str] = {
    # DataSource.backwardCompatibilityMap (4.3)
    f"{_SQL}.parquet": "parquet",
    f"{_SQL}.parquet.DefaultSource": "parquet",
    f"{_SOURCES}.parquet": "parquet",
    f"{_SOURCES}.parquet.DefaultSource": "parquet",
    f"{_SQL}.json": "json",
    f"{_SQL}.json.DefaultSource": "json",
    f"{_SOURCES}.json": "json",
    f"{_SOURCES}.json.DefaultSource": "json",
    "com.databricks.spark.csv": "csv",
    f"{_SOURCES}.orc": "orc",
    f"{_SOURCES}.orc.DefaultSource": "orc",
    f"{_SQL}.hive.orc": "orc",
    f"{_SQL}.hive.orc.DefaultSource": "orc",
    f"{_SOURCES}.xml": "xml",
    "com.databricks.spark.xml": "xml",
    # lookupDataSource: com.databricks.spark.avro is Spark's Avro
    # (spark.sql.legacy.replaceDatabricksSparkAvro.enabled, true by default)
    "com.databricks.spark.avro": "avro",
    # the V1 FileFormat classes
    f"{_SOURCES}.parquet.ParquetFileFormat": "parquet",
    f"{_SOURCES}.json.JsonFileFormat": "json",
    f"{_SOURCES}.csv.CSVFileFormat": "csv",
    f"{_SOURCES}.orc.OrcFileFormat": "orc",
    f"{_SQL}.hive.orc.OrcFileFormat": "orc",
    f"{_SOURCES}.text.TextFileFormat": "text",
    f"{_SOURCES}.xml.XmlFileFormat": "xml",
    f"{_SQL}.avro.AvroFileFormat": "avro",
    # the V2 classes the short names resolve to (written through their fallbackFileFormat)
    f"{_SOURCES}.v2.parquet.ParquetDataSourceV2": "parquet",
    f"{_SOURCES}.v2.json.JsonDataSourceV2": "json",
    f"{_SOURCES}.v2.csv.CSVDataSourceV2": "csv",
    f"{_SOURCES}.v2.orc.OrcDataSourceV2": "orc",
    f"{_SOURCES}.v2.text.TextDataSourceV2": "text",
    f"{_SQL}.v2.avro.AvroDataSourceV2": "avro",
    # the streaming sinks' providers, by class
    f"{_SQL}.execution.streaming.ConsoleSinkProvider": "console",
    f"{_SOURCES}.noop.NoopDataSource": "noop",
    f"{_SQL}.kafka010.KafkaSourceProvider": "kafka",
}


class SinkFormat(NamedTuple):
    """A sink's ``kind`` (``file`` for a ``FileStreamSink``, else its short name or the name as
    given) and ``format`` (the file format's short name, or the same name)."""

    kind: str
    format: str


def resolve_format(name: str) -> SinkFormat:
    """The sink ``DataStreamWriter.format(name)`` writes to, as ``lookupDataSource`` finds it
    (see the module's docstring)."""
    short = _NAMES.get(name) or name.lower()  # class names exactly, short names in any case
    return SinkFormat("file" if short in FILE_FORMATS else short or "?", short)
