"""Make tests/data/sink-restarts: real PySpark redeploys that change a query's sink, source
options, output mode, trigger, query name or checkpoint, and what the sink held afterwards.

Each pair: A (``maxFilesPerTrigger=1``, ``trigger(availableNow=True)`` over part-0 and part-1,
or a rate source for two batches) writes a checkpoint and a sink; ``between_runs`` changes the
folder (adds part-2, deletes a log, ...); the folder is packed as B will find it; B runs in a
NEW process (not A's), on A's checkpoint or on ``ckpt_new``; the sink is read back as a
consumer reads it (``spark.read`` on a file sink honours ``_spark_metadata``) and compared with
every input row exactly once (or the correct aggregate). Same shape as shared/sources-sinks.

    python tools/make_sink_restarts.py                  # every pair, installed PySpark
    python tools/make_sink_restarts.py --only a,b       # some pairs (merged into cases.jsonl)
    python tools/make_sink_restarts.py --spark35        # the pairs also run on PySpark 3.5

Not collected by pytest: it runs Spark jobs (minutes); the tests only read what it wrote.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = "/srv/spark/sr"
OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "sink-restarts"
CONF = {
    "spark.master": "local[1]",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.session.timeZone": "UTC",
}
T0 = 1767225600  # 2026-01-01T00:00:00Z: input file i has mtime T0 + 600 * i
ROWS = [
    (0, "a", 10, "2026-01-01T00:00:10"),
    (1, "b", 11, "2026-01-01T00:01:00"),
    (2, "a", 12, "2026-01-01T00:02:00"),
    (3, "b", 13, "2026-01-01T00:10:00"),
    (4, "c", 14, "2026-01-01T00:11:00"),
    (5, "a", 15, "2026-01-01T00:12:00"),
    (6, "c", 16, "2026-01-01T00:20:00"),
    (7, "a", 17, "2026-01-01T00:21:00"),
    (8, "b", 18, "2026-01-01T00:22:00"),
    (9, "c", 19, "2026-01-01T00:30:00"),
    (10, "b", 20, "2026-01-01T00:31:00"),
    (11, "a", 21, "2026-01-01T00:32:00"),
]
KEYS = ["in", "in2", "in_csv", "out", "out2", "fb", "fb2", "arch", "ckpt", "ckpt_new", "slim"]

# --------------------------------------------------------------------------- the code A and B run

SCHEMA = "id INT, name STRING, v INT"
SCHEMA_TS = "id INT, name STRING, v INT, ts TIMESTAMP"


def src_json(
    opts: str = '.option("maxFilesPerTrigger", 1)', schema: str = SCHEMA, path: str = 'paths["in"]'
) -> str:
    return f'spark.readStream.schema("{schema}"){opts}.json({path})'


def src_rate(opts: str) -> str:
    return f'spark.readStream.format("rate"){opts}.load()'


def sink_file(fmt: str = "parquet", path: str = "out", extra: str = "") -> str:
    return f'.format("{fmt}")\n            .option("path", paths["{path}"]){extra}'


SINK_CONSOLE = '.format("console").option("numRows", 100).option("truncate", "false")'


def sink_memory(name: str) -> str:
    return f'.format("memory").queryName("{name}")'


FB_PLAIN = """    def write_batch(batch_df, batch_id):
        # appends every batch to one folder (not idempotent)
        batch_df.write.mode("append").format("parquet").save(paths["%s"])
"""
FB_IDEM = """    def write_batch(batch_df, batch_id):
        # idempotent: batch N always lands in (and replaces) the folder batch_id=N
        batch_df.write.mode("overwrite").format("parquet").save("%%s/batch_id=%%d" %% (paths["%s"], batch_id))
"""
FB_TAGGED = """    def write_batch(batch_df, batch_id):
        # every batch appended to one folder, tagged with its batch id and the query's output mode
        (batch_df.withColumn("_batch", F.lit(batch_id)).withColumn("_mode", F.lit("%s"))
         .write.mode("append").json(paths["fb"]))
"""

AGG = 'df = df.groupBy("name").agg(F.count("*").alias("n"), F.sum("v").alias("s"))'
WINDOW = (
    'df = df.withWatermark("ts", "1 minute").groupBy(F.window("ts", "5 minutes"))'
    '.agg(F.count("*").alias("n"), F.sum("v").alias("s"))\n'
    '    df = df.select(F.col("window.start").cast("string").alias("wstart"), "n", "s")'
)


def code(
    source: str,
    sink: str,
    *,
    transform: str = "",
    pre: str = "",
    mode: str = "",
    ckpt: str = "ckpt",
    trigger: str = "availableNow=True",
    qname: str = "",
    extra: str = "",
) -> str:
    """The source of ``build(spark, paths)``: a DataStreamWriter, not started."""
    lines = ["def build(spark, paths):", "    from pyspark.sql import functions as F"]
    if pre:
        lines.append(pre.rstrip("\n"))
    lines.append(f"    df = {source}")
    if transform:
        lines.append(f"    {transform}")
    chain = ["    return (df.writeStream", f"            {sink}"]
    if mode:
        chain.append(f'            .outputMode("{mode}")')
    if qname:
        chain.append(f'            .queryName("{qname}")')
    if extra:
        chain.append(f"            {extra}")
    chain.append(f'            .option("checkpointLocation", paths["{ckpt}"])')
    chain.append(f"            .trigger({trigger}))")
    return "\n".join(lines + chain) + "\n"


def fb(kind: str, path: str = "fb", tag: str = "") -> tuple[str, str]:
    """(pre, sink) for a foreachBatch sink."""
    body = {"plain": FB_PLAIN % path, "idem": FB_IDEM % path, "tagged": FB_TAGGED % tag}[kind]
    return body, ".foreachBatch(write_batch)"


PYDS = """    import glob, json, os
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

    def all_rows(folder):
        rows = []
        for f in sorted(glob.glob(os.path.join(folder, "*.json"))):
            with open(f) as fh:
                rows += [json.loads(line) for line in fh if line.strip()]
        return rows

    class LinesReader(DataSourceStreamReader):
        def __init__(self, options):
            self.folder = options["path"]
            self.max_rows = int(options.get("maxRowsPerTrigger", "0"))

        def initialOffset(self):
            return %(initial)s

        def getDefaultReadLimit(self):
            return ReadMaxRows(self.max_rows) if self.max_rows else ReadAllAvailable()

        def latestOffset(self, start, limit):
            n = len(all_rows(self.folder))
            if isinstance(limit, ReadMaxRows):
                n = min(n, %(start_pos)s + limit.max_rows)
            return %(make)s

        def partitions(self, start, end):
            return [InputPartition((%(start_pos)s, %(end_pos)s))]

        def read(self, partition):
            lo, hi = partition.value
            for r in all_rows(self.folder)[lo:hi]:
                yield (r["id"], r["name"], r["v"])

    class LinesSource(DataSource):
        @classmethod
        def name(cls):
            return "lines"

        def schema(self):
            return "id INT, name STRING, v INT"

        def streamReader(self, schema):
            return LinesReader(self.options)

    spark.dataSource.register(LinesSource)
"""
PYDS_SRC = (
    'spark.readStream.format("lines").option("path", paths["in"])'
    '.option("maxRowsPerTrigger", 3).load()'
)
PYDS_LAYOUTS = {
    # the offset A and the reference B write: {"offset": n}
    "offset": dict(
        initial='{"offset": 0}',
        start_pos='start["offset"]',
        end_pos='end["offset"]',
        make='{"offset": n}',
    ),
    # B keeps the number under a new key and fails on A's offsets
    "pos_strict": dict(
        initial='{"pos": 0}', start_pos='start["pos"]', end_pos='end["pos"]', make='{"pos": n}'
    ),
    # B nests the number in a list and reads a bare number as "from the start"
    "list_lenient": dict(
        initial='{"offsets": [0]}',
        start_pos='(start.get("offsets") or [0])[0]',
        end_pos='(end.get("offsets") or [0])[0]',
        make='{"offsets": [n]}',
    ),
    # B counts in files (3 rows each) instead of rows: A's offset 6 means "file 6" to B
    "files": dict(
        initial='{"offset": 0}',
        start_pos='start["offset"] * 3',
        end_pos='end["offset"] * 3',
        make='{"offset": -(-n // 3)}',
    ),
    # B counts in tenths of a row: A's offset 6 (rows) means row 0 to B
    "tenths": dict(
        initial='{"offset": 0}',
        start_pos='start["offset"] // 10',
        end_pos='end["offset"] // 10',
        make='{"offset": n * 10}',
    ),
}


# a sink Spark does not build in: a Python data source that writes JSON files into its path
PYSINK = """    import json, os, uuid
    from pyspark.sql.datasource import DataSource, DataSourceStreamWriter, WriterCommitMessage

    class FolderWriter(DataSourceStreamWriter):
        def __init__(self, options):
            self.folder = options["path"]

        def write(self, iterator):
            os.makedirs(self.folder, exist_ok=True)
            name = os.path.join(self.folder, "part-%s.json" % uuid.uuid4().hex)
            with open(name, "w") as fh:
                for row in iterator:
                    fh.write(json.dumps(row.asDict()) + "\\n")
            return WriterCommitMessage()

        def commit(self, messages, batchId):
            pass

        def abort(self, messages, batchId):
            pass

    class FolderSink(DataSource):
        @classmethod
        def name(cls):
            return "jsonfolder"

        def schema(self):
            return "id INT, name STRING, v INT"

        def streamWriter(self, schema, overwrite):
            return FolderWriter(self.options)

    spark.dataSource.register(FolderSink)
"""


def pyds(layout: str) -> str:
    return PYDS % PYDS_LAYOUTS[layout]


# --------------------------------------------------------------------------------- the pairs

FILE = {"kind": "file", "fmt": "parquet", "path": "out"}


def case(
    cid: str,
    kind: str,
    group: str,
    description: str,
    a: str,
    b: str,
    *,
    sink_a: dict[str, Any] | None = None,
    sink_b: dict[str, Any] | None = None,
    between: list[str] | None = None,
    b_ckpt: str = "same",
    expect: str = "rows",
    expected: str = "all",
    waits: str = "done",
    spark35: bool = False,
    b_inputs: str = "part-2",
    judged: str = "ckpt",
) -> dict[str, Any]:
    return {
        "id": cid,
        "kind": kind,
        "group": group,
        "description": description,
        "a_code": a,
        "b_code": b,
        "sink_a": sink_a or FILE,
        "sink_b": sink_b or sink_a or FILE,
        "between_runs": between if between is not None else ["add:in/part-2"],
        "b_checkpoint": b_ckpt,
        "b_checkpoint_path_key": "ckpt" if b_ckpt == "same" else "ckpt_new",
        # the checkpoint a check judges B against (``slim``: the slim copy made between runs)
        "a_checkpoint_path_key": judged,
        "expect": expect,
        "expected": expected,
        "waits": waits,
        "spark35": spark35,
        "b_inputs": b_inputs,
    }


def cases() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    add = out.append
    base = code(src_json(), sink_file())
    # ---- controls
    add(
        case(
            "c_parquet_control",
            "control",
            "control",
            "nothing changes (parquet file sink)",
            base,
            base,
            spark35=True,
        )
    )
    fbi_pre, fbi_sink = fb("idem")
    fbi = code(src_json(), fbi_sink, pre=fbi_pre)
    add(
        case(
            "c_fb_idem_control",
            "control",
            "control",
            "nothing changes (foreachBatch idempotent by batchId)",
            fbi,
            fbi,
            sink_a={"kind": "fb_files", "fmt": "parquet", "path": "fb"},
        )
    )
    # ---- file sink changes on the same checkpoint
    add(
        case(
            "fs_parquet_to_json",
            "sink_format_changed",
            "fs",
            "file sink format parquet -> json, same path and checkpoint",
            base,
            code(src_json(), sink_file("json")),
            sink_b={"kind": "file", "fmt": "json", "path": "out"},
        )
    )
    add(
        case(
            "fs_json_to_parquet",
            "sink_format_changed",
            "fs",
            "file sink format json -> parquet, same path and checkpoint",
            code(src_json(), sink_file("json")),
            base,
            sink_a={"kind": "file", "fmt": "json", "path": "out"},
            sink_b=FILE,
        )
    )
    part = code(src_json(), sink_file(extra='\n            .partitionBy("name")'))
    add(
        case(
            "fs_partitionby_removed",
            "sink_partitioning_changed",
            "fs",
            'partitionBy("name") removed from the parquet file sink',
            part,
            base,
        )
    )
    add(
        case(
            "fs_partitionby_changed",
            "sink_partitioning_changed",
            "fs",
            'partitionBy("name") -> partitionBy("v")',
            part,
            code(src_json(), sink_file(extra='\n            .partitionBy("v")')),
        )
    )
    add(
        case(
            "fs_data_files_deleted",
            "sink_output_deleted",
            "fs",
            "the sink's data files deleted, its _spark_metadata kept",
            base,
            base,
            between=["add:in/part-2", "rm:out/part-*"],
        )
    )
    add(
        case(
            "fs_spark_metadata_deleted_csv",
            "sink_metadata_deleted",
            "fs",
            "csv file sink: out/_spark_metadata deleted between the runs",
            code(src_json(), sink_file("csv", extra='\n            .option("header", "true")')),
            code(src_json(), sink_file("csv", extra='\n            .option("header", "true")')),
            sink_a={"kind": "file", "fmt": "csv", "path": "out"},
            between=["add:in/part-2", "rm:out/_spark_metadata"],
        )
    )
    # ---- new checkpoint location, same or new sink
    add(
        case(
            "fs_newckpt_samepath_maxfiles1",
            "new_checkpoint_same_sink_path",
            "newckpt",
            "NEW checkpoint, same file sink path, B keeps maxFilesPerTrigger=1 (batch ids line up)",
            base,
            code(src_json(), sink_file(), ckpt="ckpt_new"),
            b_ckpt="new",
            spark35=True,
        )
    )
    add(
        case(
            "fs_newckpt_samepath_maxfiles2",
            "new_checkpoint_same_sink_path",
            "newckpt",
            "NEW checkpoint, same file sink path, B with maxFilesPerTrigger=2",
            base,
            code(src_json('.option("maxFilesPerTrigger", 2)'), sink_file(), ckpt="ckpt_new"),
            b_ckpt="new",
            spark35=True,
        )
    )
    add(
        case(
            "fs_newckpt_samepath_latestfirst",
            "new_checkpoint_same_sink_path",
            "newckpt",
            "NEW checkpoint, same file sink path, B with latestFirst=true, maxFilesPerTrigger=1",
            base,
            code(
                src_json('.option("maxFilesPerTrigger", 1).option("latestFirst", "true")'),
                sink_file(),
                ckpt="ckpt_new",
            ),
            b_ckpt="new",
        )
    )
    add(
        case(
            "fs_newckpt_newpath_csv",
            "new_checkpoint_new_sink_path",
            "newckpt",
            "NEW checkpoint and NEW output path (out2), csv",
            code(src_json(), sink_file("csv", extra='\n            .option("header", "true")')),
            code(
                src_json(),
                sink_file("csv", "out2", extra='\n            .option("header", "true")'),
                ckpt="ckpt_new",
            ),
            sink_a={"kind": "file", "fmt": "csv", "path": "out"},
            sink_b={"kind": "file", "fmt": "csv", "path": "out2"},
            b_ckpt="new",
        )
    )
    fbp_pre, fbp_sink = fb("plain")
    fbp = code(src_json(), fbp_sink, pre=fbp_pre)
    FBP = {"kind": "fb_files", "fmt": "parquet", "path": "fb"}
    add(
        case(
            "fb_plain_newckpt",
            "new_checkpoint_foreachBatch",
            "newckpt",
            "foreachBatch appending (not idempotent), NEW checkpoint",
            fbp,
            code(src_json(), fbp_sink, pre=fbp_pre, ckpt="ckpt_new"),
            sink_a=FBP,
            b_ckpt="new",
            spark35=True,
        )
    )
    add(
        case(
            "fb_idem_newckpt_maxfiles1",
            "new_checkpoint_foreachBatch",
            "newckpt",
            "foreachBatch idempotent by batchId, NEW checkpoint, B keeps maxFilesPerTrigger=1",
            fbi,
            code(src_json(), fbi_sink, pre=fbi_pre, ckpt="ckpt_new"),
            sink_a={"kind": "fb_files", "fmt": "parquet", "path": "fb"},
            b_ckpt="new",
        )
    )
    add(
        case(
            "fb_idem_newckpt_latestfirst",
            "new_checkpoint_foreachBatch",
            "newckpt",
            "foreachBatch idempotent by batchId, NEW checkpoint, B with latestFirst=true",
            fbi,
            code(
                src_json('.option("maxFilesPerTrigger", 1).option("latestFirst", "true")'),
                fbi_sink,
                pre=fbi_pre,
                ckpt="ckpt_new",
            ),
            sink_a={"kind": "fb_files", "fmt": "parquet", "path": "fb"},
            b_ckpt="new",
        )
    )
    add(
        case(
            "mem_newckpt",
            "new_checkpoint_memory",
            "newckpt",
            "memory sink (append), NEW checkpoint: B's new process re-reads every file",
            code(src_json(), sink_memory("rows_a")),
            code(src_json(), sink_memory("rows_a"), ckpt="ckpt_new"),
            sink_a={"kind": "memory", "name": "rows_a", "mode": "append"},
            b_ckpt="new",
        )
    )
    # ---- sink type changed, same checkpoint
    add(
        case(
            "fs_to_fb_plain",
            "sink_type_changed",
            "sinktype",
            "parquet file sink -> foreachBatch appending to fb",
            base,
            code(src_json(), fbp_sink, pre=fbp_pre),
            sink_b=FBP,
        )
    )
    add(
        case(
            "fs_to_console",
            "sink_type_changed",
            "sinktype",
            "parquet file sink -> console",
            base,
            code(src_json(), SINK_CONSOLE),
            sink_b={"kind": "console"},
        )
    )
    add(
        case(
            "fs_to_memory",
            "sink_type_changed",
            "sinktype",
            "parquet file sink -> memory (append)",
            base,
            code(src_json(), sink_memory("rows_b")),
            sink_b={"kind": "memory", "name": "rows_b", "mode": "append"},
        )
    )
    add(
        case(
            "console_to_fs",
            "sink_type_changed",
            "sinktype",
            "console -> parquet file sink",
            code(src_json(), SINK_CONSOLE),
            base,
            sink_a={"kind": "console"},
            sink_b=FILE,
        )
    )
    add(
        case(
            "memory_to_fb_idem",
            "sink_type_changed",
            "sinktype",
            "memory (append) -> foreachBatch idempotent by batchId",
            code(src_json(), sink_memory("rows_c")),
            fbi,
            sink_a={"kind": "memory", "name": "rows_c", "mode": "append"},
            sink_b={"kind": "fb_files", "fmt": "parquet", "path": "fb"},
        )
    )
    fbp2_pre, fbp2_sink = fb("plain", "fb2")
    add(
        case(
            "fb_function_changed_folder",
            "foreachBatch_changed",
            "sinktype",
            "foreachBatch function now appends to fb2 instead of fb",
            fbp,
            code(src_json(), fbp2_sink, pre=fbp2_pre),
            sink_a=FBP,
            sink_b={"kind": "fb_files", "fmt": "parquet", "path": "fb2"},
        )
    )
    add(
        case(
            "fb_plain_to_idem",
            "foreachBatch_changed",
            "sinktype",
            "foreachBatch appending -> idempotent by batchId, same folder",
            fbp,
            fbi,
            sink_a=FBP,
            sink_b={"kind": "fb_files", "fmt": "parquet", "path": "fb"},
        )
    )
    # ---- checkpoint files
    add(
        case(
            "ckpt_last_commit_deleted_fs",
            "checkpoint_commit_deleted",
            "ckpt",
            "commits/1 deleted (batch 1 re-runs); parquet file sink",
            base,
            base,
            between=["add:in/part-2", "rm:ckpt/commits/1"],
            spark35=True,
        )
    )
    add(
        case(
            "ckpt_last_commit_deleted_fb",
            "checkpoint_commit_deleted",
            "ckpt",
            "commits/1 deleted (batch 1 re-runs); foreachBatch appending",
            fbp,
            fbp,
            sink_a=FBP,
            between=["add:in/part-2", "rm:ckpt/commits/1"],
            spark35=True,
        )
    )
    add(
        case(
            "ckpt_last_offsets_deleted_fb",
            "checkpoint_offsets_deleted",
            "ckpt",
            "offsets/1 and commits/1 deleted; foreachBatch appending",
            fbp,
            fbp,
            sink_a=FBP,
            between=["add:in/part-2", "rm:ckpt/offsets/1", "rm:ckpt/commits/1"],
        )
    )
    add(
        case(
            "ckpt_metadata_deleted_fb",
            "checkpoint_metadata_deleted",
            "ckpt",
            "checkpoint's metadata file (query id) deleted; foreachBatch appending",
            fbp,
            fbp,
            sink_a=FBP,
            between=["add:in/part-2", "rm:ckpt/metadata"],
        )
    )
    add(
        case(
            "ckpt_sources_log_deleted",
            "checkpoint_sources_deleted",
            "ckpt",
            "the file source's log ckpt/sources/0 deleted; parquet file sink",
            base,
            base,
            between=["add:in/part-2", "rm:ckpt/sources/0"],
        )
    )
    # ---- file source options
    add(
        case(
            "src_glob_same_files",
            "source_path_changed",
            "src",
            "file source path in -> glob in/*.json (the same files)",
            base,
            code(src_json(path='paths["in"] + "/*.json"'), sink_file()),
        )
    )
    add(
        case(
            "src_file_moved_newname",
            "source_path_changed",
            "src",
            "between the runs part-1 renamed to part-1b (same content); path unchanged",
            base,
            base,
            between=["add:in/part-2", "mv:in/part-1.json:in/part-1b.json"],
        )
    )
    add(
        case(
            "src_format_json_to_csv_samefolder",
            "source_format_changed",
            "src",
            "file source json -> csv on the same folder (B's part-2 is JSON read as CSV)",
            base,
            code(src_json().replace(".json(", ".csv(", 1), sink_file()),
        )
    )
    add(
        case(
            "src_column_renamed",
            "source_schema_changed",
            "src",
            "source schema column name -> label (JSON field name stays)",
            base,
            code(src_json(schema="id INT, label STRING, v INT"), sink_file()),
        )
    )
    add(
        case(
            "src_column_retyped",
            "source_schema_changed",
            "src",
            "source schema column v INT -> STRING",
            base,
            code(src_json(schema="id INT, name STRING, v STRING"), sink_file()),
        )
    )
    add(
        case(
            "src_maxfileage_late_file",
            "source_option_changed",
            "src",
            "maxFileAge 1h added; part-2 arrives with an mtime 2 h older than part-1",
            base,
            code(
                src_json('.option("maxFilesPerTrigger", 1).option("maxFileAge", "1h")'), sink_file()
            ),
            between=["add:in/part-2@-7200"],
        )
    )
    add(
        case(
            "src_maxfileage_late_file_control",
            "source_option_unchanged",
            "src",
            "maxFileAge unchanged (7d); part-2 arrives with an mtime 2 h older than part-1",
            base,
            base,
            between=["add:in/part-2@-7200"],
        )
    )
    add(
        case(
            "src_latestfirst_added",
            "source_option_changed",
            "src",
            "latestFirst=true added; part-2 and part-3 arrive",
            base,
            code(
                src_json('.option("maxFilesPerTrigger", 1).option("latestFirst", "true")'),
                sink_file(),
            ),
            between=["add:in/part-2", "add:in/part-3"],
        )
    )
    add(
        case(
            "src_maxfiles_1_to_2",
            "source_option_changed",
            "src",
            "maxFilesPerTrigger 1 -> 2; part-2 and part-3 arrive",
            base,
            code(src_json('.option("maxFilesPerTrigger", 2)'), sink_file()),
            between=["add:in/part-2", "add:in/part-3"],
        )
    )
    add(
        case(
            "src_cleansource_delete_added",
            "source_option_changed",
            "src",
            "cleanSource=delete added",
            base,
            code(
                src_json('.option("maxFilesPerTrigger", 1).option("cleanSource", "delete")'),
                sink_file(),
            ),
        )
    )
    add(
        case(
            "src_filenameonly_copy_in_subfolder",
            "source_option_changed",
            "src",
            "glob in/*/*.json with fileNameOnly=true added; part-1 copied to in/y (same name)",
            code(src_json(path='paths["in"] + "/*/*.json"'), sink_file()),
            code(
                src_json(
                    '.option("maxFilesPerTrigger", 1).option("fileNameOnly", "true")',
                    path='paths["in"] + "/*/*.json"',
                ),
                sink_file(),
            ),
            between=["add:in/x/part-2", "cp:in/x/part-1.json:in/y/part-1.json"],
            b_inputs="sub",
        )
    )
    # ---- rate source
    rate_a = code(
        src_rate('.option("rowsPerSecond", 5)'), sink_file(), trigger='processingTime="1 second"'
    )
    add(
        case(
            "rate_rows_per_second_up",
            "source_option_changed",
            "rate",
            "rate rowsPerSecond 5 -> 10",
            rate_a,
            code(
                src_rate('.option("rowsPerSecond", 10)'),
                sink_file(),
                trigger='processingTime="1 second"',
            ),
            expect="rate",
            waits="batches:2",
            between=[],
        )
    )
    add(
        case(
            "rate_rows_per_second_down",
            "source_option_changed",
            "rate",
            "rate rowsPerSecond 5 -> 2",
            rate_a,
            code(
                src_rate('.option("rowsPerSecond", 2)'),
                sink_file(),
                trigger='processingTime="1 second"',
            ),
            expect="rate",
            waits="batches:2",
            between=[],
        )
    )
    add(
        case(
            "rate_control",
            "control",
            "rate",
            "rate source, nothing changes",
            rate_a,
            rate_a,
            expect="rate",
            waits="batches:2",
            between=[],
            spark35=True,
        )
    )
    add(
        case(
            "rate_rampup_added",
            "source_option_changed",
            "rate",
            "rate rampUpTime 5s added",
            rate_a,
            code(
                src_rate('.option("rowsPerSecond", 5).option("rampUpTime", "5s")'),
                sink_file(),
                trigger='processingTime="1 second"',
            ),
            expect="rate",
            waits="batches:2",
            between=[],
        )
    )
    # ---- Python streaming data source
    pyds_a = code(PYDS_SRC, sink_file(), pre=pyds("offset"))
    add(
        case(
            "pyds_offset_key_renamed_strict",
            "python_source_offsets_changed",
            "pyds",
            'Python source offset {"offset": n} -> {"pos": n}, B reads start["pos"]',
            pyds_a,
            code(PYDS_SRC, sink_file(), pre=pyds("pos_strict")),
        )
    )
    add(
        case(
            "pyds_offset_nested_lenient",
            "python_source_offsets_changed",
            "pyds",
            'Python source offset {"offset": n} -> {"offsets": [n]}, B reads a missing key as 0',
            pyds_a,
            code(PYDS_SRC, sink_file(), pre=pyds("list_lenient")),
        )
    )
    add(
        case(
            "pyds_offset_unit_changed",
            "python_source_offsets_changed",
            "pyds",
            "Python source offset counts files (3 rows each) instead of rows, same key",
            pyds_a,
            code(PYDS_SRC, sink_file(), pre=pyds("files")),
        )
    )
    add(case("pyds_control", "control", "pyds", "Python source, nothing changes", pyds_a, pyds_a))

    # ---- output mode, windowed aggregation
    def win(sink: str, mode: str, pre: str = "", ckpt: str = "ckpt") -> str:
        return code(
            src_json(schema=SCHEMA_TS), sink, transform=WINDOW, pre=pre, mode=mode, ckpt=ckpt
        )

    FBT = {"kind": "fb_tagged", "path": "fb"}
    add(
        case(
            "om_fs_window_append_control",
            "control",
            "om",
            "windowed aggregation, parquet file sink, append",
            win(sink_file(), "append"),
            win(sink_file(), "append"),
            expect="window",
            spark35=True,
        )
    )
    add(
        case(
            "om_fs_window_append_to_update",
            "output_mode_changed",
            "om",
            "windowed aggregation, parquet file sink: append -> update",
            win(sink_file(), "append"),
            win(sink_file(), "update"),
            expect="window",
            spark35=True,
        )
    )
    add(
        case(
            "om_fb_window_append_to_update",
            "output_mode_changed",
            "om",
            "windowed aggregation, foreachBatch: append -> update",
            win(".foreachBatch(write_batch)", "append", FB_TAGGED % "append"),
            win(".foreachBatch(write_batch)", "update", FB_TAGGED % "update"),
            sink_a=FBT,
            expect="window",
        )
    )
    add(
        case(
            "om_fb_window_append_to_complete",
            "output_mode_changed",
            "om",
            "windowed aggregation, foreachBatch: append -> complete",
            win(".foreachBatch(write_batch)", "append", FB_TAGGED % "append"),
            win(".foreachBatch(write_batch)", "complete", FB_TAGGED % "complete"),
            sink_a=FBT,
            expect="window",
        )
    )
    add(
        case(
            "om_fb_window_update_to_complete",
            "output_mode_changed",
            "om",
            "windowed aggregation, foreachBatch: update -> complete",
            win(".foreachBatch(write_batch)", "update", FB_TAGGED % "update"),
            win(".foreachBatch(write_batch)", "complete", FB_TAGGED % "complete"),
            sink_a=FBT,
            expect="window",
        )
    )
    add(
        case(
            "om_fb_window_newckpt",
            "new_checkpoint_foreachBatch",
            "om",
            "windowed aggregation, foreachBatch append, NEW checkpoint",
            win(".foreachBatch(write_batch)", "append", FB_TAGGED % "append"),
            win(".foreachBatch(write_batch)", "append", FB_TAGGED % "append", ckpt="ckpt_new"),
            sink_a=FBT,
            expect="window",
            b_ckpt="new",
        )
    )
    add(
        case(
            "om_mem_agg_complete_to_update",
            "output_mode_changed",
            "om",
            "aggregation by name, memory sink: complete -> update",
            code(src_json(), sink_memory("totals"), transform=AGG, mode="complete"),
            code(src_json(), sink_memory("totals"), transform=AGG, mode="update"),
            sink_a={"kind": "memory", "name": "totals", "mode": "complete"},
            sink_b={"kind": "memory", "name": "totals", "mode": "update"},
            expect="agg",
            expected="agg:name:sum",
        )
    )
    # ---- trigger, query name
    add(
        case(
            "trig_an_to_processingtime",
            "trigger_changed",
            "trig",
            "trigger availableNow -> processingTime 1 s",
            base,
            code(src_json(), sink_file(), trigger='processingTime="1 second"'),
            waits="a:done,b:idle",
        )
    )
    add(
        case(
            "trig_continuous",
            "trigger_changed",
            "trig",
            "trigger availableNow -> continuous (file source)",
            base,
            code(src_json(), sink_file(), trigger='continuous="1 second"'),
        )
    )
    add(
        case(
            "qname_added_fs",
            "query_name_changed",
            "trig",
            "queryName added to a file-sink query",
            base,
            code(src_json(), sink_file(), qname="rows_q"),
        )
    )
    # ---- projections, filters, stateful
    add(
        case(
            "proj_filter_added",
            "filter_changed",
            "proj",
            "where(v > 13) added (stateless)",
            base,
            code(src_json(), sink_file(), transform='df = df.where("v > 13")'),
            expected="v>13",
        )
    )
    add(
        case(
            "proj_expr_changed",
            "projection_changed",
            "proj",
            "v -> v + 100, same column names",
            base,
            code(
                src_json(),
                sink_file(),
                transform='df = df.select("id", "name", (F.col("v") + 100).alias("v"))',
            ),
            expected="v+100",
        )
    )
    add(
        case(
            "proj_reordered_parquet",
            "projection_changed",
            "proj",
            "columns reordered (v, name, id), parquet sink",
            base,
            code(src_json(), sink_file(), transform='df = df.select("v", "name", "id")'),
        )
    )
    csvh = sink_file("csv", extra='\n            .option("header", "true")')
    add(
        case(
            "proj_reordered_csv",
            "projection_changed",
            "proj",
            "columns reordered (v, name, id), csv sink",
            code(src_json(), csvh),
            code(src_json(), csvh, transform='df = df.select("v", "name", "id")'),
            sink_a={"kind": "file", "fmt": "csv", "path": "out"},
        )
    )
    add(
        case(
            "proj_column_added",
            "projection_changed",
            "proj",
            "a column w = v * 2 added, parquet sink",
            base,
            code(src_json(), sink_file(), transform='df = df.withColumn("w", F.col("v") * 2)'),
        )
    )

    def agg_fb(mode, t):
        return code(
            src_json(), ".foreachBatch(write_batch)", transform=t, pre=FB_TAGGED % mode, mode=mode
        )

    add(
        case(
            "state_groupby_key_added",
            "stateful_changed",
            "state",
            "groupBy name -> groupBy name, id % 2; update",
            agg_fb("update", AGG),
            agg_fb(
                "update",
                AGG.replace('groupBy("name")', 'groupBy("name", (F.col("id") % 2).alias("k"))'),
            ),
            sink_a=FBT,
            expect="agg",
            expected="agg:name,k:sum",
        )
    )
    add(
        case(
            "state_agg_added",
            "stateful_changed",
            "state",
            "stateless foreachBatch to fb2 -> aggregation by name (update) to fb",
            code(src_json(), fbp2_sink, pre=fbp2_pre),
            agg_fb("update", AGG),
            sink_a={"kind": "fb_files", "fmt": "parquet", "path": "fb2"},
            sink_b=FBT,
            expect="agg",
        )
    )
    add(
        case(
            "state_sum_to_max",
            "stateful_changed",
            "state",
            "sum(v) -> max(v) under the same name s; update",
            agg_fb("update", AGG),
            agg_fb("update", AGG.replace('F.sum("v")', 'F.max("v")')),
            sink_a=FBT,
            expect="agg",
            expected="agg:name:max",
        )
    )
    # ---- one checkpoint location spelled another way (B names the folder A wrote), and a slim
    # copy judged against a writer that names the location it was copied from
    def respelled(text: str, how: str) -> str:
        return text.replace('paths["ckpt"]', how)

    key_added = agg_fb(
        "update", AGG.replace('groupBy("name")', 'groupBy("name", (F.col("id") % 2).alias("k"))')
    )
    spellings = (
        ("file_uri", '"file://" + paths["ckpt"]', "file:// + the path"),
        ("double_slash", 'paths["ckpt"].replace("/ckpt", "//ckpt")', "a // before its folder"),
        ("dot_segment", 'paths["ckpt"].replace("/ckpt", "/./ckpt")', "a /./ before its folder"),
        ("trailing_slash", 'paths["ckpt"] + "/"', "a trailing /"),
    )
    for name, how, words in spellings:
        add(
            case(
                f"loc_ckpt_{name}_key_added",
                "checkpoint_location_respelled",
                "loc",
                f"groupBy name -> name, id % 2 (update); B names A's checkpoint with {words}",
                agg_fb("update", AGG),
                respelled(key_added, how),
                sink_a=FBT,
                expect="agg",
                expected="agg:name,k:sum",
            )
        )
    for name, how, words in spellings[:2]:
        add(
            case(
                f"loc_ckpt_{name}_control",
                "checkpoint_location_respelled",
                "loc",
                f"nothing changes (parquet file sink); B names A's checkpoint with {words}",
                base,
                respelled(base, how),
            )
        )
    add(
        case(
            "loc_ckpt_file_uri_fb_idem_control",
            "checkpoint_location_respelled",
            "loc",
            "nothing changes (foreachBatch idempotent by batchId); B names A's checkpoint "
            "with file:// + the path",
            fbi,
            respelled(fbi, '"file://" + paths["ckpt"]'),
            sink_a={"kind": "fb_files", "fmt": "parquet", "path": "fb"},
        )
    )
    add(
        case(
            "loc_ckpt_uppercase_scheme_control",
            "checkpoint_location_respelled",
            "loc",
            "nothing changes (parquet file sink); B names A's checkpoint FILE:// + the path",
            base,
            respelled(base, '"FILE://" + paths["ckpt"]'),
        )
    )
    add(
        case(
            "loc_sink_dot_segment_control",
            "sink_path_respelled",
            "loc",
            "nothing changes; B names the file sink's folder with a /./ before it",
            base,
            base.replace('paths["out"]', 'paths["out"].replace("/out", "/./out")'),
        )
    )
    for name, b_code, words, extra in (
        (
            "key_added",
            key_added,
            "groupBy name -> name, id % 2 (update)",
            {"expected": "agg:name,k:sum"},
        ),
        ("control", agg_fb("update", AGG), "nothing changes (update)", {}),
    ):
        add(
            case(
                f"slim_origin_{name}",
                "slim_copy_judged",
                "loc",
                f"{words}; judged against the slim copy of A's checkpoint (opid checkpoint "
                "--slim ckpt slim), B names A's checkpoint",
                agg_fb("update", AGG),
                b_code,
                sink_a=FBT,
                expect="agg",
                between=["slim:ckpt:slim", "add:in/part-2"],
                judged="slim",
                **extra,
            )
        )

    # ---- file sinks named as Spark's DataSource.lookupDataSource also resolves them
    parquet_alias = "org.apache.spark.sql.parquet"
    parquet_class = "org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat"
    add(
        case(
            "fsf_parquet_alias_control",
            "control",
            "fsf",
            'parquet file sink -> format("org.apache.spark.sql.parquet"), same path',
            base,
            code(src_json(), sink_file(parquet_alias)),
        )
    )
    add(
        case(
            "fsf_parquet_class_control",
            "control",
            "fsf",
            "parquet file sink -> format(ParquetFileFormat class name), same path",
            base,
            code(src_json(), sink_file(parquet_class)),
        )
    )
    csv_header = '\n            .option("header", "true")'
    add(
        case(
            "fsf_databricks_csv_control",
            "control",
            "fsf",
            'csv file sink -> format("com.databricks.spark.csv"), same path',
            code(src_json(), sink_file("csv", extra=csv_header)),
            code(src_json(), sink_file("com.databricks.spark.csv", extra=csv_header)),
            sink_a={"kind": "file", "fmt": "csv", "path": "out"},
        )
    )
    add(
        case(
            "fsf_alias_path_changed",
            "sink_path_changed",
            "fsf",
            'file sink format("org.apache.spark.sql.parquet") moved from out to out2',
            code(src_json(), sink_file(parquet_alias)),
            code(src_json(), sink_file(parquet_alias, "out2")),
            sink_b={"kind": "file", "fmt": "parquet", "path": "out2"},
        )
    )
    add(
        case(
            "fsf_class_to_json_alias",
            "sink_format_changed",
            "fsf",
            'file sink ParquetFileFormat class -> format("org.apache.spark.sql.json"), same path',
            code(src_json(), sink_file(parquet_class)),
            code(src_json(), sink_file("org.apache.spark.sql.json")),
            sink_b={"kind": "file", "fmt": "json", "path": "out"},
        )
    )
    add(
        case(
            "fsf_alias_partitionby_added",
            "sink_partitioning_changed",
            "fsf",
            'file sink format("org.apache.spark.sql.parquet"): partitionBy("name") added',
            code(src_json(), sink_file(parquet_alias)),
            code(src_json(), sink_file(parquet_alias, extra='\n            .partitionBy("name")')),
        )
    )
    # ---- a sink Spark does not build in (a Python data source), known by name and path
    sink_custom = '.format("jsonfolder")\n            .option("path", paths["%s"])'
    CUSTOM = {"kind": "custom", "fmt": "json", "path": "out"}
    add(
        case(
            "custom_sink_control",
            "control",
            "custom",
            "Python data source sink jsonfolder, nothing changes",
            code(src_json(), sink_custom % "out", pre=PYSINK),
            code(src_json(), sink_custom % "out", pre=PYSINK),
            sink_a=CUSTOM,
        )
    )
    add(
        case(
            "custom_sink_path_changed",
            "sink_path_changed",
            "custom",
            "Python data source sink jsonfolder moved from out to out2, same checkpoint",
            code(src_json(), sink_custom % "out", pre=PYSINK),
            code(src_json(), sink_custom % "out2", pre=PYSINK),
            sink_a=CUSTOM,
            sink_b=dict(CUSTOM, path="out2"),
        )
    )
    # ---- output modes as Spark enforces them when the query starts
    add(
        case(
            "om_fs_stateless_append_to_update",
            "output_mode_changed",
            "om",
            "stateless query, parquet file sink: append -> update",
            base,
            code(src_json(), sink_file(), mode="update"),
        )
    )
    add(
        case(
            "om_fs_alias_append_to_update",
            "output_mode_changed",
            "om",
            'stateless query, file sink format("org.apache.spark.sql.parquet"): append -> update',
            code(src_json(), sink_file(parquet_alias)),
            code(src_json(), sink_file(parquet_alias), mode="update"),
        )
    )
    add(
        case(
            "om_mem_stateless_append_to_complete",
            "output_mode_changed",
            "om",
            "stateless query, memory sink: append -> complete",
            code(src_json(), sink_memory("rows_m")),
            code(src_json(), sink_memory("rows_m"), mode="complete"),
            sink_a={"kind": "memory", "name": "rows_m", "mode": "append"},
            sink_b={"kind": "memory", "name": "rows_m", "mode": "complete"},
        )
    )
    add(
        case(
            "om_fb_stateless_append_to_complete",
            "output_mode_changed",
            "om",
            "stateless query, foreachBatch: append -> complete",
            fbp,
            code(src_json(), fbp_sink, pre=fbp_pre, mode="complete"),
            sink_a=FBP,
        )
    )
    add(
        case(
            "om_fb_agg_update_to_append_nowm",
            "output_mode_changed",
            "om",
            "aggregation without a watermark, foreachBatch: update -> append",
            agg_fb("update", AGG),
            agg_fb("append", AGG),
            sink_a=FBT,
            expect="agg",
        )
    )
    add(
        case(
            "om_console_stateless_append_to_update",
            "output_mode_changed",
            "om",
            "stateless query, console sink: append -> update",
            code(src_json(), SINK_CONSOLE),
            code(src_json(), SINK_CONSOLE, mode="update"),
            sink_a={"kind": "console"},
        )
    )
    add(
        case(
            "om_fb_stateless_append_to_update",
            "output_mode_changed",
            "om",
            "stateless query, foreachBatch: append -> update",
            fbp,
            code(src_json(), fbp_sink, pre=fbp_pre, mode="update"),
            sink_a=FBP,
        )
    )

    out += writer_cases()
    return out




FOREACH_FN = """    def write_row(row):
        # one JSON file per row in the %(folder)s folder
        import json, os, uuid
        os.makedirs(paths["%(folder)s"], exist_ok=True)
        with open(os.path.join(paths["%(folder)s"], "%%s.json" %% uuid.uuid4()), "w") as fh:
            fh.write(json.dumps(%(row)s))
"""
FOREACH_OBJ = """    class RowWriter:
        # one JSON lines file per partition and epoch in the fb folder
        def open(self, partition_id, epoch_id):
            import os
            os.makedirs(paths["fb"], exist_ok=True)
            self.path = os.path.join(paths["fb"], "p%%d-e%%d.json" %% (partition_id, epoch_id))
            return True

        def process(self, row):
            import json
            if %(keep)s:
                with open(self.path, "a") as fh:
                    fh.write(json.dumps(row.asDict()) + "\\n")

        def close(self, error):
            pass
"""
FB_OVERWRITE = """    def write_batch(batch_df, batch_id):
        # replaces the folder with each batch
        batch_df.write.mode("overwrite").format("parquet").save(paths["fb"])
"""
FB_EXTRA_COLUMN = """    def write_batch(batch_df, batch_id):
        # appends every batch to one folder (not idempotent), with the batch id as a column
        (batch_df.withColumn("batch", F.lit(batch_id))
         .write.mode("append").format("parquet").save(paths["fb"]))
"""


#: part-0 and part-1 copied to in2 (their mtimes kept), part-2 added there
COPIED_TO_IN2 = ["cp:in/part-0.json:in2/part-0.json", "cp:in/part-1.json:in2/part-1.json",
                 "add:in2/part-2"]  # fmt: skip


def writer_cases() -> list[dict[str, Any]]:
    """foreach (row) writers and foreachBatch functions changed, a file source moved after a
    no-data batch, a Python source's offset unit, a source's format or folder changed where
    Spark's own bookkeeping keeps the restart right (issue 47)."""
    out: list[dict[str, Any]] = []
    add = out.append
    fb_json = {"kind": "fb_files", "fmt": "json", "path": "fb"}
    fn_a = code(
        src_json(), ".foreach(write_row)", pre=FOREACH_FN % {"folder": "fb", "row": "row.asDict()"}
    )
    add(
        case(
            "foreach_fn_extra_field",
            "foreach_changed",
            "writer",
            "foreach function now writes one more field (src) to the same folder",
            fn_a,
            code(
                src_json(),
                ".foreach(write_row)",
                pre=FOREACH_FN % {"folder": "fb", "row": 'dict(row.asDict(), src="b")'},
            ),
            sink_a=fb_json,
        )
    )
    add(
        case(
            "foreach_fn_other_folder",
            "foreach_changed",
            "writer",
            "foreach function now writes to fb2 instead of fb",
            fn_a,
            code(
                src_json(),
                ".foreach(write_row)",
                pre=FOREACH_FN % {"folder": "fb2", "row": "row.asDict()"},
            ),
            sink_a=fb_json,
            sink_b={"kind": "fb_files", "fmt": "json", "path": "fb2"},
        )
    )
    add(
        case(
            "foreach_obj_drops_rows",
            "foreach_changed",
            "writer",
            "foreach writer object's process() now skips rows with an odd id",
            code(src_json(), ".foreach(RowWriter())", pre=FOREACH_OBJ % {"keep": "True"}),
            code(
                src_json(), ".foreach(RowWriter())", pre=FOREACH_OBJ % {"keep": "row.id % 2 == 0"}
            ),
            sink_a=fb_json,
        )
    )
    fbp_pre, fbp_sink = fb("plain")
    fbp = code(src_json(), fbp_sink, pre=fbp_pre)
    fbp_files = {"kind": "fb_files", "fmt": "parquet", "path": "fb"}
    add(
        case(
            "fb_now_overwrites",
            "foreachBatch_changed",
            "writer",
            "foreachBatch function now writes mode overwrite instead of append, same folder",
            fbp,
            code(src_json(), fbp_sink, pre=FB_OVERWRITE),
            sink_a=fbp_files,
        )
    )
    add(
        case(
            "fb_extra_column",
            "foreachBatch_changed",
            "writer",
            "foreachBatch function now writes one more column (batch), same folder and mode",
            fbp,
            code(src_json(), fbp_sink, pre=FB_EXTRA_COLUMN),
            sink_a=fbp_files,
        )
    )
    window = {"transform": WINDOW, "mode": "append"}
    add(
        case(
            "src_path_changed_after_nodata",
            "source_path_changed",
            "src",
            "windowed aggregation (append, parquet): A's last batch read no file (it advanced "
            "the watermark); B reads in2, where part-0 and part-1 were copied and part-2 comes",
            code(src_json(schema=SCHEMA_TS), sink_file(), **window),
            code(src_json(schema=SCHEMA_TS, path='paths["in2"]'), sink_file(), **window),
            between=COPIED_TO_IN2,
            expect="window",
        )
    )
    add(
        case(
            "src_glob_other_folder_filenameonly",
            "source_path_changed",
            "src",
            "in -> glob in2/*.json with fileNameOnly=true; part-0 and part-1 copied to in2 "
            "(same names), part-2 comes to in2",
            code(src_json(), sink_file()),
            code(
                src_json(
                    '.option("maxFilesPerTrigger", 1).option("fileNameOnly", "true")',
                    path='paths["in2"] + "/*.json"',
                ),
                sink_file(),
            ),
            between=COPIED_TO_IN2,
        )
    )
    add(
        case(
            "src_format_json_to_csv_samefolder_csv_files",
            "source_format_changed",
            "src",
            "file source json -> csv on the same folder; the part that comes is a CSV file",
            code(src_json(), sink_file()),
            code(
                'spark.readStream.schema("id INT, name STRING, v INT")'
                '.option("maxFilesPerTrigger", 1).csv(paths["in"])',
                sink_file(),
            ),
            between=["csv:in/part-2"],
        )
    )
    add(
        case(
            "pyds_offset_unit_scaled_up",
            "python_source_offsets_changed",
            "pyds",
            "Python source offset counts tenths of a row instead of rows, same key",
            code(PYDS_SRC, sink_file(), pre=pyds("offset")),
            code(PYDS_SRC, sink_file(), pre=pyds("tenths")),
        )
    )
    return out


# ------------------------------------------------------------------------- inputs, between runs


def write_part(folder: Path, index: int, mtime: int | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"part-{index}.json"
    with path.open("w", encoding="utf-8") as f:
        for rid, name, v, ts in ROWS[3 * index : 3 * index + 3]:
            f.write(json.dumps({"id": rid, "name": name, "v": v, "ts": ts}) + "\n")
    stamp = T0 + 600 * index if mtime is None else mtime
    os.utime(path, (stamp, stamp))


def case_dir(root: str, c: dict[str, Any]) -> Path:
    return Path(root) / c["id"]


def paths_of(root: str, c: dict[str, Any]) -> dict[str, str]:
    return {k: str(case_dir(root, c) / k) for k in KEYS}


def prepare(root: str, c: dict[str, Any]) -> None:
    here = case_dir(root, c)
    if here.exists():
        shutil.rmtree(here)
    sub = "in/x" if c.get("b_inputs") == "sub" else "in"
    for i in (0, 1):
        write_part(here / sub, i)


def between(root: str, c: dict[str, Any]) -> list[str]:
    """Carry out ``between_runs``; returns the input part numbers B's folder holds beyond A's."""
    here = case_dir(root, c)
    added = []
    for step in c["between_runs"]:
        op, _, arg = step.partition(":")
        if op == "add":
            rel, _, shift = arg.partition("@")
            folder, _, name = rel.rpartition("/")
            index = int(name.split("-")[1])
            mtime = T0 + 600 - int(shift[1:]) if shift else None  # shift: seconds before part-1
            write_part(here / folder, index, mtime)
            added.append(index)
        elif op == "rm":
            for p in sorted(here.glob(arg)):
                shutil.rmtree(p) if p.is_dir() else p.unlink()
                crc = p.with_name(f".{p.name}.crc")
                if crc.exists():
                    crc.unlink()
        elif op == "slim":  # opid checkpoint --slim SRC DEST: what CI keeps in the repository
            from pytest_opid.spark.checkpoint.slim import slim_copy

            src, dst = arg.split(":")
            slim_copy(here / src, here / dst)
        elif op == "csv":  # a CSV part (id,name,v; no header), as a producer switched to csv
            folder, _, name = arg.rpartition("/")
            index = int(name.split("-")[1])
            (here / folder).mkdir(parents=True, exist_ok=True)
            path = here / folder / f"part-{index}.csv"
            path.write_text(
                "".join(f"{rid},{n},{v}\n" for rid, n, v, _ in ROWS[3 * index : 3 * index + 3])
            )
            stamp = T0 + 600 * index
            os.utime(path, (stamp, stamp))
            added.append(index)
        elif op in ("mv", "cp"):
            src, dst = (here / x for x in arg.split(":"))
            dst.parent.mkdir(parents=True, exist_ok=True)
            stat = src.stat()
            (shutil.move if op == "mv" else shutil.copy2)(src, dst)
            os.utime(dst, (stat.st_mtime, stat.st_mtime))
        else:
            raise SystemExit(f"{c['id']}: unknown between_runs step {step!r}")
    return added


def pack(root: str, c: dict[str, Any], out: Path) -> None:
    (out / "data").mkdir(parents=True, exist_ok=True)
    with tarfile.open(out / "data" / f"{c['id']}.tar.gz", "w:gz") as tar:
        tar.add(case_dir(root, c), arcname=c["id"])


# ------------------------------------------------------------------------------ one phase (child)


def error_of(exc: BaseException, phase: str) -> dict[str, Any]:
    chain: list[dict[str, Any]] = []
    throwable = getattr(exc, "_origin", None)
    while throwable is not None and len(chain) < 10:
        condition = None
        for getter in ("getCondition", "getErrorClass"):
            try:
                condition = getattr(throwable, getter)()
                break
            except Exception:  # not a SparkThrowable, or an older line without the getter
                continue
        chain.append(
            {
                "class": throwable.getClass().getName(),
                "condition": condition,
                "message": str(throwable.getMessage() or "")[:400],
            }
        )
        throwable = throwable.getCause()
    if not chain:
        chain.append(
            {
                "class": f"python:{type(exc).__module__}.{type(exc).__name__}",
                "condition": None,
                "message": str(exc)[:400],
            }
        )
    named = [e for e in chain if e["condition"] and e["condition"] != "STREAM_FAILED"]
    pick = named[0] if named else chain[-1]
    return {
        "exception_class": pick["class"],
        "error_class": pick["condition"],
        "message_first_line": pick["message"].splitlines()[0] if pick["message"] else "",
        "phase": phase,
        "chain": chain,
    }


def progress_of(query: Any) -> list[dict[str, Any]]:
    out = []
    for p in query.recentProgress:
        sources = []
        for s in p["sources"]:

            def parse(x: Any) -> Any:
                try:
                    return json.loads(x) if isinstance(x, str) else x
                except ValueError:
                    return x

            sources.append({"start": parse(s.get("startOffset")), "end": parse(s.get("endOffset"))})
        out.append({"batchId": p["batchId"], "numInputRows": p["numInputRows"], "sources": sources})
    return out


def run_query(
    spark: Any, c: dict[str, Any], code_text: str, paths: dict[str, str], wait: str
) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(code_text, f"<{c['id']}>", "exec"), namespace)
    try:
        query = namespace["build"](spark, paths).start()
    except Exception as exc:  # Spark refused to start the query
        return {"error": error_of(exc, "start"), "batches": []}
    error = None
    try:
        if wait == "done":
            if not query.awaitTermination(120):
                error = {
                    "exception_class": None,
                    "error_class": None,
                    "message_first_line": "did not finish in 120 s",
                    "phase": "timeout",
                    "chain": [],
                }
        else:  # batches:N (N batches with input rows), or idle (input rows seen, then quiet)
            need = int(wait.split(":")[1]) if wait.startswith("batches") else 1
            deadline = time.time() + 90
            while time.time() < deadline and query.isActive:
                with_rows = [p for p in query.recentProgress if p["numInputRows"] > 0]
                if len(with_rows) >= need:
                    break
                time.sleep(0.2)
            if wait == "idle":
                time.sleep(2)
            if query.isActive:
                query.stop()
            query.awaitTermination(30)
    except Exception as exc:  # the query failed while running
        error = error_of(exc, "run")
    if error is None and query.exception() is not None:
        error = error_of(query.exception(), "run")
    return {"error": error, "batches": progress_of(query)}


def read_sink(
    spark: Any, sink: dict[str, Any], paths: dict[str, str], console: str | None
) -> dict[str, Any]:
    """The sink's content as a consumer reads it: ``spark.read`` (which honours a file sink's
    ``_spark_metadata``), the memory table, or the console's printed tables."""
    kind = sink["kind"]
    try:
        if kind == "console":
            return {
                "rows": parse_console(
                    Path(console).read_text() if console and Path(console).exists() else ""
                )
            }
        if kind == "memory":
            df = spark.table(sink["name"])
        else:
            path = paths[sink["path"]]
            if not Path(path).exists() or not any(Path(path).iterdir()):
                return {"rows": [], "note": f"{sink['path']} holds nothing"}
            if kind == "fb_tagged":
                df = spark.read.json(path)
            else:
                fmt = sink.get("fmt", "parquet")
                reader = spark.read.format(fmt)
                if fmt == "csv":
                    reader = reader.option("header", "true").option("inferSchema", "true")
                df = reader.load(path)
        return {"rows": [r.asDict() for r in df.collect()]}
    except Exception as exc:  # the consumer cannot read the sink back
        e = error_of(exc, "read")
        return {
            "rows": None,
            "read_error": {
                k: e[k] for k in ("error_class", "exception_class", "message_first_line")
            },
        }


def parse_console(text: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    header: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("Batch: "):
            header = None
        elif line.startswith("|"):
            cells = [x.strip() for x in line.strip().strip("|").split("|")]
            if header is None:
                header = cells
            else:
                rows.append(dict(zip(header, cells, strict=False)))
    return rows


def selected(spark35: bool) -> list[dict[str, Any]]:
    """Every pair, or those also run on PySpark 3.5 under ids ending ``_spark35``."""
    if not spark35:
        return cases()
    return [dict(c, id=c["id"] + "_spark35") for c in cases() if c["spark35"]]


def child(phase: str, ids: list[str], root: str, results: str, spark35: bool) -> None:
    from pyspark.sql import SparkSession

    # Python workers (a Python data source's writer needs pyarrow) run this interpreter
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    builder = SparkSession.builder.appName(f"sink-restarts-{phase}")
    for k, v in CONF.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    by_id = {c["id"]: c for c in selected(spark35)}
    out = {}
    for cid in ids:
        c = by_id[cid]
        paths = paths_of(root, c)
        waits = c["waits"]
        wait = (
            waits
            if ":" not in waits or waits.startswith("batches")
            else dict(w.split(":") for w in waits.split(","))[phase.lower()]
        )
        code_text = c["a_code"] if phase == "A" else c["b_code"]
        started = time.time()
        res = run_query(spark, c, code_text, paths, wait)
        if phase == "B":
            console = (
                str(Path(root) / "_console" / f"{cid}.txt")
                if c["sink_b"]["kind"] == "console"
                else None
            )
            if console:
                sys.stdout.flush()
            res["read_a"] = (
                read_sink(spark, c["sink_a"], paths, console)
                if c["sink_a"]["kind"] not in ("memory", "console")
                else None
            )
            res["read_b"] = read_sink(spark, c["sink_b"], paths, console)
            if res["error"] is not None:
                res["control_fresh_checkpoint"] = fresh_control(spark, c, root)
        out[cid] = res
        print(
            f"[{phase}] {cid} {time.time() - started:.1f}s: {'error ' + str(res['error']['error_class'] or res['error']['message_first_line'][:80]) if res['error'] else 'ok'}",
            file=sys.stderr,
            flush=True,
        )
    spark.stop()
    Path(results).write_text(json.dumps(out, default=str))


def fresh_control(spark: Any, c: dict[str, Any], root: str) -> dict[str, Any]:
    """B on a fresh checkpoint and fresh sink over a copy of its inputs: does it run at all?"""
    scratch = Path(tempfile.mkdtemp(prefix=f"fresh-{c['id']}-", dir=root))
    try:
        src = case_dir(root, c)
        for name in ("in", "in2", "in_csv"):
            if (src / name).exists():
                shutil.copytree(src / name, scratch / name)
        paths = {k: str(scratch / k) for k in KEYS}
        res = run_query(
            spark, c, c["b_code"], paths, c["waits"] if c["waits"].startswith("batches") else "done"
        )
        return {
            "ok": res["error"] is None,
            "error": res["error"] and res["error"]["error_class"],
            "batches": len(res["batches"]),
        }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


# ------------------------------------------------------------------------------- truth (parent)


def expected_rows(c: dict[str, Any], parts: list[int]) -> list[tuple[Any, ...]]:
    rows = [r for i in sorted(set(parts)) for r in ROWS[3 * i : 3 * i + 3]]
    spec = c["expected"]
    if spec == "v>13":
        rows = [r for r in rows if r[2] > 13]
    elif spec == "v+100":
        rows = [(a, b, v + 100, t) for a, b, v, t in rows]
    return [(a, b, v) for a, b, v, _ in rows]


def norm_row(r: dict[str, Any]) -> tuple[Any, ...]:
    def num(x: Any) -> Any:
        try:
            return int(x)
        except (TypeError, ValueError):
            return x

    return (num(r.get("id")), r.get("name"), num(r.get("v")))


def judge_rows(expected: list[tuple[Any, ...]], actual: list[tuple[Any, ...]]) -> dict[str, Any]:
    want = collections.Counter(expected)
    have = collections.Counter(actual)
    lost = sum(max(0, n - have[r]) for r, n in want.items())
    dup = sum(max(0, have[r] - n) for r, n in want.items())
    unexpected = sum(n for r, n in have.items() if r not in want)
    return {
        "expected_rows": len(expected),
        "actual_rows": len(actual),
        "lost": lost,
        "duplicated": dup,
        "unexpected": unexpected,
        "detail": {
            "examples_lost": [list(r) for r in want if have[r] < want[r]][:3],
            "examples_duplicated": [list(r) for r in want if have[r] > want[r]][:3],
            "examples_unexpected": [list(r) for r in have if r not in want][:3],
        },
    }


def tables(
    c: dict[str, Any], parts: list[int], rows: list[dict[str, Any]], sink: dict[str, Any]
) -> dict[str, Any]:
    """Aggregates: the consumer upserts rows of update/complete batches by key (latest batch
    wins) and appends rows of append batches; compared with the aggregate of every input row."""
    inputs = [r for i in sorted(set(parts)) for r in ROWS[3 * i : 3 * i + 3]]
    if c["expect"] == "window":
        groups: dict[Any, list[int]] = collections.defaultdict(list)
        for _rid, _name, v, ts in inputs:
            minute = int(ts[14:16])
            groups[f"2026-01-01 00:{minute - minute % 5:02d}:00"].append(v)
        last = max(r[3] for r in inputs)
        watermark = int(last[14:16]) - 1  # withWatermark("ts", "1 minute")
        want = {k: [len(vs), sum(vs)] for k, vs in groups.items() if int(k[14:16]) + 5 <= watermark}
        keys = ["wstart"]
    else:
        spec = c["expected"] if c["expected"].startswith("agg:") else "agg:name:sum"
        _, key_spec, fn = spec.split(":")
        keys = key_spec.split(",")
        groups = collections.defaultdict(list)
        for rid, name, v, _ts in inputs:
            key = tuple(str(x) for x in ([name] + ([rid % 2] if "k" in keys else [])))
            groups[key if len(key) > 1 else key[0]].append(v)
        want = {
            k if isinstance(k, str) else ",".join(k): [len(vs), sum(vs) if fn == "sum" else max(vs)]
            for k, vs in groups.items()
        }
    ordered = sorted(rows, key=lambda r: int(r.get("_batch") or 0))
    have: dict[str, list[list[Any]]] = {}
    for r in ordered:
        key = ",".join(str(r.get(k)) for k in keys)
        mode = r.get("_mode") or sink.get("mode", "append")
        value = [
            int(r["n"]) if r.get("n") is not None else None,
            int(r["s"]) if r.get("s") is not None else None,
        ]
        if mode in ("update", "complete"):
            have[key] = [value]
        else:
            have.setdefault(key, []).append(value)
    if c["expect"] == "window":
        have = {
            k: v
            for k, v in have.items()
            if k in want or (k[14:16].isdigit() and int(k[14:16]) + 5 <= watermark)
        }
    lost = sum(1 for k in want if k not in have)
    dup = sum(
        len(v) - 1
        for k, v in have.items()
        if k in want and all(x == want[k] for x in v) and len(v) > 1
    )
    wrong = sum(1 for k, v in have.items() if k in want and any(x != want[k] for x in v))
    unexpected = sum(1 for k in have if k not in want)
    return {
        "expected_rows": len(want),
        "actual_rows": sum(len(v) for v in have.values()),
        "lost": lost,
        "duplicated": dup,
        "unexpected": unexpected + wrong,
        "detail": {"expected_table": want, "actual_table": have},
    }


def judge_rate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    values = collections.Counter(int(r["value"]) for r in rows)
    top = max(values) if values else -1
    lost = sum(1 for v in range(top + 1) if v not in values)
    dup = sum(n - 1 for n in values.values() if n > 1)
    return {
        "expected_rows": top + 1,
        "actual_rows": sum(values.values()),
        "lost": lost,
        "duplicated": dup,
        "unexpected": 0,
        "detail": {
            "note": "rate: value is a sequence number; expected 0..max(value) once each",
            "examples_lost": [v for v in range(top + 1) if v not in values][:5],
            "examples_duplicated": [v for v, n in values.items() if n > 1][:5],
        },
    }


def truth_of(c: dict[str, Any], parts: list[int], b: dict[str, Any]) -> dict[str, Any]:
    read = b["read_b"]
    if b["error"] is not None:
        return {
            "truth": "refused",
            "expected_rows": None,
            "actual_rows": len(read["rows"] or []),
            "lost": None,
            "duplicated": None,
            "unexpected": None,
            "detail": {"note": "refused: actual_rows = what B's sink holds after the failed B"},
        }
    if read["rows"] is None:
        return {
            "truth": "wrong",
            "expected_rows": None,
            "actual_rows": None,
            "lost": None,
            "duplicated": None,
            "unexpected": None,
            "detail": {
                "read_error": read["read_error"],
                "note": "the sink could not be read back (spark.read on the sink folder fails)",
            },
        }
    if c["expect"] == "rate":
        res = judge_rate(read["rows"])
    elif c["expect"] in ("agg", "window"):
        res = tables(c, parts, read["rows"], c["sink_b"])
    else:
        res = judge_rows(expected_rows(c, parts), [norm_row(r) for r in read["rows"]])
    if res["lost"] == res["duplicated"] == res["unexpected"] == 0:
        truth = "correct"
    elif res["unexpected"] == 0 and res["duplicated"] == 0:
        truth = "rows_lost"
    elif res["unexpected"] == 0 and res["lost"] == 0:
        truth = "rows_duplicated"
    else:
        truth = "wrong"
    return {"truth": truth, **res}


def listing(folder: Path) -> list[str]:
    return (
        sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
        if folder.is_dir()
        else []
    )


def describe_after(root: str, c: dict[str, Any]) -> dict[str, Any]:
    here = case_dir(root, c)
    ckpt = here / c["b_checkpoint_path_key"]
    sink = c["sink_b"]
    after: dict[str, Any] = {}
    if "path" in sink:
        out = here / sink["path"]
        after["spark_metadata"] = (
            listing(out / "_spark_metadata") if (out / "_spark_metadata").exists() else None
        )
        after["data_files"] = sorted(
            str(p.relative_to(out))
            for p in out.rglob("*")
            if p.is_file()
            and not p.name.startswith((".", "_"))
            and "_spark_metadata" not in p.parts
        )
    meta = ckpt / "metadata"
    return {
        "sink_after": after,
        "checkpoint_after_b": {
            "offsets": listing(ckpt / "offsets"),
            "commits": listing(ckpt / "commits"),
            "sources/0": listing(ckpt / "sources" / "0"),
            "metadata": meta.read_text().strip() if meta.exists() else None,
        },
        "inputs_after_b": {
            "in": sorted(str(p.relative_to(here / "in")) for p in (here / "in").rglob("*.json"))
        },
    }


# ------------------------------------------------------------------------------------ parent


def run_phase(
    phase: str, ids: list[str], root: str, console_ids: set[str], spark35: bool
) -> dict[str, Any]:
    """Each phase in NEW processes: the console pairs one process each (their stdout is the
    sink), the others together, one after another."""
    results: dict[str, Any] = {}
    groups = [[i] for i in ids if i in console_ids] + [[i for i in ids if i not in console_ids]]
    for group in groups:
        if not group:
            continue
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tmp:
            res_file = tmp.name
        (Path(root) / "_console").mkdir(parents=True, exist_ok=True)
        if group[0] in console_ids:
            stdout: Any = open(
                Path(root) / "_console" / f"{group[0]}.txt", "a" if phase == "B" else "w"
            )
        else:
            stdout = subprocess.DEVNULL
        cmd = [
            sys.executable,
            __file__,
            "--phase",
            phase,
            "--ids",
            ",".join(group),
            "--root",
            root,
            "--results",
            res_file,
        ] + (["--spark35"] if spark35 else [])
        subprocess.run(cmd, stdout=stdout, check=True)
        if stdout is not subprocess.DEVNULL:
            stdout.close()
        results.update(json.loads(Path(res_file).read_text()))
        os.unlink(res_file)
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated pair ids")
    ap.add_argument(
        "--spark35",
        action="store_true",
        help="only the pairs marked for PySpark 3.5 (ids get _spark35)",
    )
    ap.add_argument("--root", default=ROOT)
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--phase", help=argparse.SUPPRESS)
    ap.add_argument("--ids", help=argparse.SUPPRESS)
    ap.add_argument("--results", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.phase:
        child(args.phase, args.ids.split(","), args.root, args.results, args.spark35)
        return
    import pyspark

    version = pyspark.__version__
    chosen = [c for c in selected(args.spark35) if not args.only or c["id"] in args.only.split(",")]
    root = args.root
    out = Path(args.out)
    ids = [c["id"] for c in chosen]
    console_ids = {
        c["id"] for c in chosen if "console" in (c["sink_a"]["kind"], c["sink_b"]["kind"])
    }
    for c in chosen:
        prepare(root, c)
    t = time.time()
    a = run_phase("A", ids, root, console_ids, args.spark35)
    added = {}
    for c in chosen:
        added[c["id"]] = between(root, c)
        pack(root, c, out)
    b = run_phase("B", ids, root, console_ids, args.spark35)
    print(f"{len(ids)} pairs in {time.time() - t:.0f} s", file=sys.stderr)
    lines = {}
    for c in chosen:
        cid = c["id"]
        parts = [0, 1] + added[cid]
        rec = {
            "id": cid,
            "spark_version": version,
            "kind": c["kind"],
            "group": c["group"],
            "description": c["description"],
            "a_code": c["a_code"],
            "b_code": c["b_code"],
            "session_conf": CONF,
            "b_checkpoint": c["b_checkpoint"],
            "b_checkpoint_path_key": c["b_checkpoint_path_key"],
            "a_checkpoint_path_key": c["a_checkpoint_path_key"],
            "between_runs": c["between_runs"],
            "paths_at_run": paths_of(root, c),
            "data": f"data/{cid}.tar.gz",
            "unpack_at": root,
            "a_trigger_wait": c["waits"],
            "b_trigger_wait": c["waits"],
            "sink_a": c["sink_a"],
            "sink_b": c["sink_b"],
            "expect": [c["expect"]],
            "expected": c["expected"],
            "a_batches": a[cid]["batches"],
            "a_error": a[cid]["error"],
            "b_batches": b[cid]["batches"],
            "error": b[cid]["error"],
        }
        rec.update(truth_of(c, parts, b[cid]))
        if b[cid]["error"] is not None:
            rec["control_fresh_checkpoint"] = b[cid].get("control_fresh_checkpoint")
            rec["refused_also_on_fresh_checkpoint"] = not (
                rec["control_fresh_checkpoint"] or {}
            ).get("ok", True)
        if b[cid].get("read_a") and c["sink_a"].get("path") != c["sink_b"].get("path"):
            ra = b[cid]["read_a"]
            rec["sink_a_rows_after_b"] = None if ra["rows"] is None else len(ra["rows"])
        rec["spark_said"] = {"error": b[cid]["error"] is not None}
        rec.update(describe_after(root, c))
        lines[rec["id"]] = rec
        print(
            f"{rec['id']:40s} {rec['truth']:16s} exp={rec['expected_rows']} act={rec['actual_rows']} "
            f"lost={rec['lost']} dup={rec['duplicated']} unexp={rec['unexpected']}"
            + (
                f"  [{rec['error']['error_class'] or rec['error']['message_first_line'][:60]}]"
                if rec["error"]
                else ""
            )
        )
    cases_file = out / "cases.jsonl"
    old = (
        [json.loads(x) for x in cases_file.read_text().splitlines()] if cases_file.exists() else []
    )
    merged = {r["id"]: r for r in old}
    merged.update(lines)
    cases_file.write_text("".join(json.dumps(r, sort_keys=False) + "\n" for r in merged.values()))


if __name__ == "__main__":
    main()
