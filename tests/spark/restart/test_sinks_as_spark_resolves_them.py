"""A sink as Spark resolves the name it was given, the output modes Spark refuses when the query
starts, and headlines that name the part that breaks (issue 47, parts 2, 3 and 7).

The names' resolution is asked of the installed JVM (``DataSource.lookupDataSource``): our
table must say what Spark does. The verdicts are on unstarted writers, judged against the
previous query's fingerprint (a checkpoint is not needed: what Spark refuses at start it refuses
whatever the state; real checkpoints: tests/restart/test_sink_restart_corpus.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import pytest_opid
from pytest_opid.comparison import compare
from pytest_opid.engine_rules import Check
from pytest_opid.render.explain import render
from pytest_opid.render.restore import render_restore
from pytest_opid.spark import judged_for
from pytest_opid.spark.data_sources import FILE_FORMATS, resolve_format

SQL = "org.apache.spark.sql"
PARQUET_CLASS = f"{SQL}.execution.datasources.parquet.ParquetFileFormat"
#: names Spark resolves to a file format, and to which (besides the short names)
ALIASES = {
    f"{SQL}.parquet": "parquet",
    f"{SQL}.parquet.DefaultSource": "parquet",
    f"{SQL}.execution.datasources.parquet": "parquet",
    PARQUET_CLASS: "parquet",
    f"{SQL}.execution.datasources.v2.parquet.ParquetDataSourceV2": "parquet",
    f"{SQL}.json": "json",
    f"{SQL}.execution.datasources.json.JsonFileFormat": "json",
    "com.databricks.spark.csv": "csv",
    f"{SQL}.execution.datasources.csv.CSVFileFormat": "csv",
    f"{SQL}.execution.datasources.orc": "orc",
    f"{SQL}.hive.orc": "orc",
    f"{SQL}.execution.datasources.text.TextFileFormat": "text",
    "com.databricks.spark.xml": "xml",
    "PARQUET": "parquet",
    "Json": "json",
}


@pytest.mark.spark_line("4.3", reason="the names are Spark 4.3's DataSource.lookupDataSource")
@pytest.mark.parametrize("name", [*sorted(FILE_FORMATS - {"avro"}), *ALIASES])
def test_a_file_format_is_known_by_every_name_spark_resolves(spark: Any, name: str) -> None:
    """Spark's own lookup: the name is a FileFormat (or a V2 file source, which writes a
    stream through its V1 fallback), and the one we resolve it to."""
    jvm = spark._jvm
    conf = spark._jsparkSession.sessionState().conf()
    cls = jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource(name, conf)
    instance = cls.newInstance()
    v2 = jvm.java.lang.Class.forName(f"{SQL}.execution.datasources.v2.FileDataSourceV2")
    if v2.isInstance(instance):
        instance = instance.fallbackFileFormat().newInstance()
    assert instance.shortName() == resolve_format(name).format == ALIASES.get(name, name)
    assert resolve_format(name).kind == "file"


@pytest.mark.parametrize(
    ("name", "kind"),
    [("delta", "delta"), ("Delta", "delta"), ("console", "console"), ("memory", "memory"),
     (f"{SQL}.execution.streaming.ConsoleSinkProvider", "console"),
     (f"{SQL}.execution.datasources.csv", f"{SQL}.execution.datasources.csv")],
)  # fmt: skip
def test_other_sinks_are_kept_by_name(name: str, kind: str) -> None:
    """A name Spark does not build in is kept by its name (Spark's short names compare
    case-insensitively); a package name with no DefaultSource class is no file format
    (Spark fails to find it: no alias invented)."""
    assert resolve_format(name).kind == kind


def _writer(spark: Any, tmp_path: Path, fmt: str, out: str = "out", **kw: Any) -> Any:
    df = spark.readStream.schema("id INT, name STRING, v INT").json(str(tmp_path / "in"))
    if kw.get("agg"):
        df = df.groupBy("name").count()
    writer = df.writeStream.option("checkpointLocation", str(tmp_path / "ckpt"))
    if fmt == "foreachBatch":
        writer = writer.foreachBatch(lambda batch, batch_id: None)
    elif fmt == "memory":
        writer = writer.format("memory").queryName("rows")
    else:
        writer = writer.format(fmt).option("path", str(tmp_path / out))
    if kw.get("partition"):
        writer = writer.partitionBy(kw["partition"])
    return writer.outputMode(kw.get("mode", "append"))


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    (tmp_path / "in").mkdir()
    return tmp_path


def _judged(spark: Any, tmp: Path, a: dict[str, Any], b: dict[str, Any]) -> Any:
    old = pytest_opid.fingerprint(_writer(spark, tmp, **a))
    return pytest_opid.check_restore(old, _writer(spark, tmp, **b))


@pytest.mark.spark_line("4.3", reason="Spark 4.3's sinks")
def test_a_file_sink_by_an_alias_is_a_file_sink(spark: Any, inputs: Path) -> None:
    facts = dict(
        (fact, value)
        for endpoint, fact, value in pytest_opid.fingerprint(
            _writer(spark, inputs, f"{SQL}.parquet")
        ).endpoints
        or ()
        if endpoint == "sink"
    )
    assert (facts["kind"], facts["format"]) == ("file", "parquet")
    same = _judged(spark, inputs, {"fmt": "parquet"}, {"fmt": PARQUET_CLASS})
    assert same.safe is True, render_restore(same)


@pytest.mark.spark_line("4.3", reason="Spark 4.3's sinks")
@pytest.mark.parametrize(
    ("a", "b"),
    [
        ({"fmt": f"{SQL}.parquet"}, {"fmt": f"{SQL}.parquet", "out": "out2"}),
        ({"fmt": PARQUET_CLASS}, {"fmt": "com.databricks.spark.csv"}),
        ({"fmt": f"{SQL}.parquet"}, {"fmt": f"{SQL}.parquet", "partition": "name"}),
    ],
    ids=["alias-moved", "class-to-csv-alias", "alias-partitioned"],
)
def test_a_file_sink_change_under_any_name_is_not_safe(
    spark: Any, inputs: Path, a: dict[str, Any], b: dict[str, Any]
) -> None:
    check = _judged(spark, inputs, a, b)
    assert check.restorable and check.safe is False, render_restore(check)
    assert {r.name for r in check.reinterpreted} == {"sink"}


@pytest.mark.spark_line("4.3", reason="Spark 4.3's sinks")
def test_a_sink_not_built_in_is_compared_by_its_path(spark: Any, inputs: Path) -> None:
    """``delta`` (not installed here: nothing starts) is kept by name and path: moved on the
    same checkpoint, the new path gets only the batches after the restart; partitioned
    otherwise, what it does is the sink's own: not verified, never safe."""
    moved = _judged(spark, inputs, {"fmt": "delta"}, {"fmt": "delta", "out": "out2"})
    assert moved.restorable and moved.safe is False
    assert [r.kind for r in moved.reinterpreted] == ["rows_lost"]
    assert "delta sink's path changed" in moved.reinterpreted[0].message
    partitioned = _judged(spark, inputs, {"fmt": "delta"}, {"fmt": "delta", "partition": "v"})
    assert partitioned.restorable and partitioned.safe is None, render_restore(partitioned)
    assert "partitionBy - -> v" in partitioned.unverified[0].message
    same = _judged(spark, inputs, {"fmt": "delta"}, {"fmt": "Delta"})
    assert same.safe is True, render_restore(same)


@pytest.mark.spark_line("4.3", reason="Spark 4.3's error classes")
@pytest.mark.parametrize(
    ("b", "error"),
    [
        ({"fmt": "parquet", "mode": "update"}, "STREAMING_OUTPUT_MODE.UNSUPPORTED_DATASOURCE"),
        ({"fmt": f"{SQL}.parquet", "mode": "update"}, "UNSUPPORTED_DATASOURCE"),
        ({"fmt": "memory", "mode": "complete"}, "STREAMING_OUTPUT_MODE.UNSUPPORTED_OPERATION"),
        ({"fmt": "foreachBatch", "mode": "complete"}, "UNSUPPORTED_OPERATION"),
        ({"fmt": "foreachBatch", "agg": True}, "without watermark"),
    ],
    ids=["file-update", "file-alias-update", "memory-complete", "fb-complete", "fb-agg-append"],
)
def test_what_spark_refuses_at_start_is_refused(
    spark: Any, inputs: Path, b: dict[str, Any], error: str
) -> None:
    """Against a fingerprint and against the snapshot (the marked test's route) alike."""
    a = {"fmt": b["fmt"], "agg": b.get("agg", False), "mode": "update" if b.get("agg") else ""}
    a["mode"] = a["mode"] or "append"
    old = pytest_opid.fingerprint(_writer(spark, inputs, **a))
    new = pytest_opid.fingerprint(_writer(spark, inputs, **b))
    check = pytest_opid.check_restore(old, new)
    assert not check.restorable, render_restore(check)
    assert error in check.problems[0].message and check.problems[0].kind == "outputMode"
    comparison = compare(old, new)
    assert comparison.breaks(Check.IDS), render(comparison, Check.IDS)


@pytest.mark.spark_line("4.3", reason="Spark 4.3 judges for 3.5 too")
def test_a_file_sink_in_update_mode_in_spark_35_words(spark: Any, inputs: Path) -> None:
    """Spark 3.5.9 refused the corpus's pair with _LEGACY_ERROR_TEMP_1131 (tests/data/
    sink-restarts, om_fs_window_append_to_update_spark35)."""
    old = pytest_opid.fingerprint(_writer(spark, inputs, "parquet"))
    new = pytest_opid.fingerprint(_writer(spark, inputs, "parquet", mode="update"))
    with judged_for("3.5"):
        check = pytest_opid.check_restore(old, new)
    assert not check.restorable
    assert "Data source parquet does not support Update output mode" in check.problems[0].message


@pytest.mark.spark_line("4.3", reason="Spark 4.3's sinks")
def test_what_spark_takes_is_not_refused(spark: Any, inputs: Path) -> None:
    """The console and foreachBatch sinks take update mode on a stateless query (the
    corpus's om_console_stateless_append_to_update and om_fb_stateless_append_to_update ran
    correct); a memory sink restarts only in complete mode (fs_to_memory, om_mem_agg_complete_
    to_update: _LEGACY_ERROR_TEMP_1299), from a fingerprint as from a checkpoint."""
    for fmt in ("console", "foreachBatch"):
        check = _judged(spark, inputs, {"fmt": fmt}, {"fmt": fmt, "mode": "update"})
        assert check.restorable, render_restore(check)
    memory = _judged(spark, inputs, {"fmt": "memory"}, {"fmt": "memory", "mode": "update"})
    assert not memory.restorable and "_LEGACY_ERROR_TEMP_1299" in memory.problems[0].message


@pytest.mark.spark_line("4.3", reason="Spark 4.3's sinks")
def test_a_stateless_sink_change_is_headlined_by_the_sink(spark: Any, inputs: Path) -> None:
    """No stateful operator in the headline of a query that keeps no state, nor a state
    directory in the snapshot's verdict: the sink, by name."""
    old = pytest_opid.fingerprint(_writer(spark, inputs, "parquet"))
    new = pytest_opid.fingerprint(_writer(spark, inputs, "parquet", out="out2"))
    head = render_restore(pytest_opid.check_restore(old, new)).splitlines()[0]
    assert "stateful operator" not in head
    assert head.startswith("Restorable, but not safe: a change at the sink (results changed)")
    verdict = render(compare(old, new), Check.IDS).splitlines()[0]
    assert "state directory" not in verdict
    assert verdict.startswith("Not safe to restart from the old checkpoint [checked: state, sink]")
    assert "a change at the sink (results changed)" in verdict
