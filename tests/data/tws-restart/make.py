"""Real Spark 4.3 restarts of transformWithState queries: run by hand, never in CI.

    cd /work/main && . .venv/bin/activate
    python tests/data/tws-restart/make.py [--only <case id substring>] [--root /tmp/tws-restart-run]

For every case, in fresh folders under ``--root``: input batch 1 is written and query A runs
with ``trigger(availableNow=True)`` on a new checkpoint; batch 2 is written and A runs again the
same way (so the checkpoint holds two committed batches and state). All A's run in one Python
process (one JVM). The checkpoint is copied as it is then. Batch 3 is written, and query B is
started on the checkpoint with ``availableNow`` in ANOTHER Python process, so another JVM: a real
restart. Spark's outcome is recorded (the error condition of the innermost exception that has
one, other than STREAM_FAILED). Control: B also runs on a new, empty checkpoint, in the same
process as B's restart; a case whose B fails there too is marked ``control_fresh_checkpoint_ok:
false``.

Kept in this folder: ``cases.jsonl.gz`` (one JSON object per case: the code of A and B as
self-contained sources defining ``build(spark, paths)``, the session confs, the sink, Spark's
outcome, A's state metadata as ``spark.read.format("state-metadata")`` reads it) and
``checkpoints/<case id>.tar.gz``: A's checkpoint as it was before B started, with the state
data files removed (``*.sst``, ``*.zip``, ``*.changelog``, ``*.delta``, ``*.snapshot``, ``*.crc``),
keeping the metadata, offsets, commits, source logs and state schema / operator metadata files.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import io
import json
import os
import random
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SCHEMA = "id LONG, user STRING, k INT, cat STRING, v LONG, amount DOUBLE, ts TIMESTAMP"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
ENCODING = "spark.sql.streaming.stateStore.encodingFormat"
SPARK_ENV = {
    "master": "local[2]",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.driver.memory": "1g",
}
STATE_DATA = (".sst", ".zip", ".changelog", ".delta", ".snapshot", ".crc")

# -- the queries ----------------------------------------------------------------------------------
# A state variable: (name, kind, value DDL, TTL in ms or None, map user key DDL or None).
Var = tuple[str, str, str, "int | None", "str | None"]

CNT: Var = ("cnt", "value", "c long", None, None)
LAST: Var = ("last", "value", "s string", None, None)


def _values(ddl: str) -> str:
    """A Python tuple literal of values for a DDL field list, from the row count ``n``."""
    out = []
    for field in ddl.split(","):
        kind = field.split()[1].lower()
        if kind in ("long", "int", "bigint", "integer", "short"):
            out.append("n")
        elif kind in ("double", "float"):
            out.append("float(n)")
        else:
            out.append("str(n)")
    return "(" + ", ".join(out) + ",)"


def _struct(ddl: str) -> str:
    """A StructType expression for a DDL field list (the processors give StructTypes)."""
    types = {
        "long": "LongType()",
        "int": "IntegerType()",
        "string": "StringType()",
        "double": "DoubleType()",
    }
    fields = ", ".join(
        f'StructField("{f.split()[0]}", {types[f.split()[1].lower()]})' for f in ddl.split(",")
    )
    return f"StructType([{fields}])"


def code(
    api: str,
    variables: tuple[Var, ...],
    *,
    cls: str = "CountProcessor",
    time_mode: str = "None",
    output_mode: str = "Update",
    key: str = '"user"',
    ddl_strings: bool = False,
    long_k: bool = False,
) -> str:
    """Query code: ``groupBy(key).transformWithState[InPandas](<cls>(), ...)``."""
    init = []
    updates = []
    for name, kind, ddl, ttl, user_key in variables:
        schema = repr(ddl) if ddl_strings else _struct(ddl)
        ttl_arg = f", ttlDurationMs={ttl}" if ttl else ""
        attr = f"self.v_{name}"
        if kind == "value":
            init.append(f"{attr} = handle.getValueState({name!r}, {schema}{ttl_arg})")
            updates.append(f"{attr}.update({_values(ddl)})")
        elif kind == "list":
            init.append(f"{attr} = handle.getListState({name!r}, {schema}{ttl_arg})")
            updates.append(f"{attr}.appendValue({_values(ddl)})")
        else:
            uk = repr(user_key) if ddl_strings else _struct(user_key or "")
            init.append(f"{attr} = handle.getMapState({name!r}, {uk}, {schema}{ttl_arg})")
            user = "(str(key[0]),)" if "string" in (user_key or "") else _values(user_key or "")
            updates.append(f"{attr}.updateValue({user}, {_values(ddl)})")
    init_text = "\n".join(f"            {line}" for line in init) or "            pass"
    update_text = "\n".join(f"            {line}" for line in updates)
    if api == "pandas":
        count = "for pdf in rows:\n                n += len(pdf)"
        emit = 'yield pd.DataFrame({"key": [str(key[0])], "count": [n]})'
        method = "transformWithStateInPandas"
    else:
        count = "for _row in rows:\n                n += 1"
        emit = "yield Row(key=str(key[0]), count=n)"
        method = "transformWithState"
    cast = '.withColumn("k", F.col("k").cast("long"))' if long_k else ""
    return f'''def build(spark, paths):
    import pandas as pd
    from pyspark.sql import Row
    from pyspark.sql import functions as F
    from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
    from pyspark.sql.types import (
        DoubleType, IntegerType, LongType, StringType, StructField, StructType,
    )
    schema = "{SCHEMA}"
    events = spark.readStream.schema(schema).json(paths["in0"]){cast}

    class {cls}(StatefulProcessor):
        def init(self, handle: StatefulProcessorHandle) -> None:
{init_text}

        def handleInputRows(self, key, rows, timerValues):
            n = 0
            {count}
{update_text}
            {emit}

        def close(self) -> None:
            pass

    return (events
            .groupBy({key})
            .{method}(statefulProcessor={cls}(),
                      outputStructType="key string, count long",
                      outputMode="{output_mode}", timeMode="{time_mode}"))
'''


TTL = 3_600_000
PT = {"time_mode": "ProcessingTime"}
CASTED = 'F.col("k").cast("long").alias("k")'
#: refactor -> (A's variables, A's options, B's variables, B's options, extra session confs)
REFACTORS: dict[
    str, tuple[tuple[Var, ...], dict[str, Any], tuple[Var, ...], dict[str, Any], dict]
] = {
    "add_variable": ((CNT,), {}, (CNT, LAST), {}, {}),
    "remove_variable": ((CNT, LAST), {}, (CNT,), {}, {}),
    "rename_variable": ((CNT,), {}, (("total", "value", "c long", None, None),), {}, {}),
    "value_to_list": ((CNT,), {}, (("cnt", "list", "c long", None, None),), {}, {}),
    "value_to_map": ((CNT,), {}, (("cnt", "map", "c long", None, "uk string"),), {}, {}),
    "list_to_map": (
        (("cnt", "list", "c long", None, None),),
        {},
        (("cnt", "map", "c long", None, "uk string"),),
        {},
        {},
    ),
    "widen_field_type": (
        (("cnt", "value", "c int", None, None),),
        {},
        (CNT,),
        {},
        {},
    ),
    "narrow_field_type": ((CNT,), {}, (("cnt", "value", "c int", None, None),), {}, {}),
    "add_field": ((CNT,), {}, (("cnt", "value", "c long, s string", None, None),), {}, {}),
    "add_ttl": ((CNT,), PT, (("cnt", "value", "c long", TTL, None),), PT, {}),
    "remove_ttl": ((("cnt", "value", "c long", TTL, None),), PT, (CNT,), PT, {}),
    "change_map_user_key_type": (
        (("cnt", "map", "c long", None, "uk string"),),
        {},
        (("cnt", "map", "c long", None, "uk long"),),
        {},
        {},
    ),
    "widen_list_field_type": (
        (("cnt", "list", "c int", None, None),),
        {},
        (("cnt", "list", "c long", None, None),),
        {},
        {},
    ),
    "change_ttl_duration": (
        (("cnt", "value", "c long", TTL, None),),
        PT,
        (("cnt", "value", "c long", 2 * TTL, None),),
        PT,
        {},
    ),
    "change_grouping_key_type": (
        (CNT,),
        {"key": '"k"'},
        (CNT,),
        {"key": '"k"', "long_k": True},
        {},
    ),
    "cast_grouping_key_in_groupby": ((CNT,), {"key": '"k"'}, (CNT,), {"key": CASTED}, {}),
    "change_time_mode": ((CNT,), {}, (CNT,), PT, {}),
    "swap_processor_class": ((CNT,), {}, (CNT,), {"cls": "TotalProcessor"}, {}),
    "change_output_mode": ((CNT,), {}, (CNT,), {"output_mode": "Append"}, {}),
    "ddl_string_schema": ((CNT,), {}, (CNT,), {"ddl_strings": True}, {}),
    "avro_widen_field_type": (
        (("cnt", "value", "c int", None, None),),
        {},
        (CNT,),
        {},
        {ENCODING: "avro"},
    ),
    "avro_add_field": (
        (CNT,),
        {},
        (("cnt", "value", "c long, s string", None, None),),
        {},
        {ENCODING: "avro"},
    ),
    "avro_narrow_field_type": (
        (CNT,),
        {},
        (("cnt", "value", "c int", None, None),),
        {},
        {ENCODING: "avro"},
    ),
}
APIS = {"pandas": "transform_with_state_pandas", "row": "transform_with_state_row"}


def cases() -> list[dict[str, Any]]:
    out = []
    for api, template in APIS.items():
        for refactor, (a_vars, a_opts, b_vars, b_opts, confs) in REFACTORS.items():
            session = {
                "spark.sql.shuffle.partitions": "2",
                "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
                **confs,
            }
            out.append(
                {
                    "case": {
                        "id": f"{template}__{refactor}",
                        "template": template,
                        "refactor": refactor,
                        "api": api,
                        "spark_version": "4.3.0",
                    },
                    "before_code": code(api, a_vars, **a_opts),
                    "after_code": code(api, b_vars, **b_opts),
                    "session_conf_before": session,
                    "session_conf_after": session,
                    "sink": {
                        "format": "noop",
                        "output_mode": "update"
                        if b_opts.get("output_mode", "Update") == "Update"
                        else "append",
                    },
                    "sink_before": {
                        "format": "noop",
                        "output_mode": "update"
                        if a_opts.get("output_mode", "Update") == "Update"
                        else "append",
                    },
                }
            )
    return out


# -- running --------------------------------------------------------------------------------------


def write_batch(folder: Path, batch: int, seed: int) -> None:
    rnd = random.Random(seed * 10 + batch)
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / f"batch{batch}.json").open("w", encoding="utf-8") as f:
        for i in range(20):
            minute = 10 * (batch - 1) + rnd.randrange(10)
            row = {
                "id": rnd.randrange(40),
                "user": f"u{rnd.randrange(6)}",
                "k": rnd.randrange(4),
                "cat": "abc"[rnd.randrange(3)],
                "v": rnd.randrange(100),
                "amount": round(rnd.random() * 100, 2),
                "ts": f"2024-01-01T00:{minute:02d}:{i % 60:02d}",
            }
            f.write(json.dumps(row) + "\n")


def session() -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(SPARK_ENV["master"])
    for key, value in SPARK_ENV.items():
        if key != "master":
            builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def run_query(
    spark: Any, rec: dict[str, Any], which: str, folder: Path, checkpoint: Path
) -> list[dict]:
    ns: dict[str, Any] = {}
    exec(rec[f"{which}_code"], ns)
    s = spark.newSession()
    for key, value in rec[f"session_conf_{which}"].items():
        s.conf.set(key, value)
    df = ns["build"](s, {"in0": str(folder / "in0")})
    sink = rec["sink_before"] if which == "before" else rec["sink"]
    query = (
        df.writeStream.format("noop")
        .outputMode(sink["output_mode"])
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    note = None
    try:
        # A processing-time query with timers or TTL plans a no-data batch on every trigger,
        # so availableNow never ends by itself: stop it once its data batches are committed
        # and it has run no-data batches only for a while.
        deadline = time.monotonic() + 300
        while query.isActive and time.monotonic() < deadline:
            query.awaitTermination(1)
            done = query.recentProgress
            data = [i for i, p in enumerate(done) if p["numInputRows"] > 0]
            if data and len(done) - data[-1] > 3:
                note = "stopped after 3 no-data batches that followed the last data batch"
                break
        if query.exception() is not None:
            query.awaitTermination(1)  # raises it
    finally:
        progress = [
            {
                "batchId": p["batchId"],
                "numInputRows": p["numInputRows"],
                "stateOperators": [
                    {k: o.get(k) for k in ("operatorName", "numRowsTotal", "numRowsUpdated")}
                    for o in p.get("stateOperators", [])
                ],
            }
            for p in query.recentProgress
        ]
        query.stop()
    if note:
        progress.append({"note": note})
    return progress


def failure(exc: BaseException) -> dict[str, Any]:
    """Spark's error condition: the innermost Java exception in the cause chain with one."""
    chain = []
    java = getattr(exc, "_origin", None)
    seen = 0
    while java is not None and seen < 20:
        seen += 1
        condition = None
        with contextlib.suppress(Exception):
            condition = java.getCondition()
        chain.append(
            {
                "class": java.getClass().getName(),
                "condition": condition,
                "message": (java.getMessage() or "")[:400],
            }
        )
        java = java.getCause()
    conditions = [c for c in chain if c["condition"] and c["condition"] != "STREAM_FAILED"]
    found = conditions[-1] if conditions else None
    root = chain[-1] if chain else {"class": "python:" + type(exc).__name__, "message": str(exc)}
    return {
        "restarted": False,
        "error_class": found["condition"] if found else None,
        "exception_class": root["class"],
        "message": (found or root)["message"][:2000] if chain else str(exc)[:2000],
        "outcome": (found["condition"] if found else root["class"]),
        "error_chain": chain,
    }


def phase_a(root: Path, recs: list[dict[str, Any]]) -> None:
    spark = session()
    for rec in recs:
        cid = rec["case"]["id"]
        folder = root / cid
        shutil.rmtree(folder, ignore_errors=True)
        out: dict[str, Any] = {}
        try:
            write_batch(folder / "in0", 1, len(cid))
            batches = run_query(spark, rec, "before", folder, folder / "checkpoint")
            write_batch(folder / "in0", 2, len(cid))
            batches += run_query(spark, rec, "before", folder, folder / "checkpoint")
            out["a_batches"] = batches
            rows = spark.read.format("state-metadata").load(str(folder / "checkpoint")).collect()
            out["state_metadata"] = [r.asDict() for r in rows]
        except Exception as exc:  # A itself failed: the case is dropped
            out["a_failed"] = failure(exc)
        (folder / "a.json").write_text(json.dumps(out, default=str))
        print("A", cid, "failed" if "a_failed" in out else "ok", flush=True)


def phase_b(root: Path, recs: list[dict[str, Any]]) -> None:
    spark = session()
    for rec in recs:
        cid = rec["case"]["id"]
        folder = root / cid
        if not (folder / "checkpoint-before-restart").is_dir():
            continue
        out: dict[str, Any] = {}
        try:
            batches = run_query(spark, rec, "after", folder, folder / "checkpoint")
            out["spark"] = {
                "restarted": bool(batches),
                "error_class": None,
                "outcome": "restarted",
                "batches": batches,
            }
        except Exception as exc:
            out["spark"] = failure(exc)
        control = folder / "control"
        shutil.rmtree(control, ignore_errors=True)
        try:
            run_query(spark, rec, "after", folder, control / "checkpoint")
            out["control_fresh_checkpoint_ok"] = True
        except Exception as exc:
            out["control_fresh_checkpoint_ok"] = False
            out["control_failure"] = failure(exc)
        (folder / "b.json").write_text(json.dumps(out, default=str))
        print(
            "B",
            cid,
            out["spark"]["outcome"],
            "control",
            out["control_fresh_checkpoint_ok"],
            flush=True,
        )


def trimmed_tar(checkpoint: Path, target: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=9) as tar:
        for path in sorted(checkpoint.rglob("*")):
            rel = path.relative_to(checkpoint)
            if path.is_file() and "state" in rel.parts[:1] and path.name.endswith(STATE_DATA):
                continue
            if path.is_file() and path.name.startswith(".") and path.name.endswith(".crc"):
                continue
            info = tar.gettarinfo(str(path), arcname=str(Path("checkpoint") / rel))
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            if path.is_file():
                with path.open("rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)
    target.write_bytes(buffer.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", default="/tmp/tws-restart-run")
    parser.add_argument("--only", default="")
    parser.add_argument("--phase", choices=("a", "b"))
    parser.add_argument("--no-merge", action="store_true")
    args = parser.parse_args()
    root = Path(args.root)
    recs = [r for r in cases() if args.only in r["case"]["id"]]
    if args.phase == "a":
        phase_a(root, recs)
        return
    if args.phase == "b":
        phase_b(root, recs)
        return
    root.mkdir(parents=True, exist_ok=True)
    me = [sys.executable, __file__, "--root", str(root), "--only", args.only]
    subprocess.run([*me, "--phase", "a"], check=True)
    for rec in recs:
        folder = root / rec["case"]["id"]
        kept = folder / "checkpoint-before-restart"
        shutil.rmtree(kept, ignore_errors=True)
        if (folder / "checkpoint").is_dir() and "a_failed" not in json.loads(
            (folder / "a.json").read_text()
        ):
            shutil.copytree(folder / "checkpoint", kept)
            write_batch(folder / "in0", 3, len(rec["case"]["id"]))
    subprocess.run([*me, "--phase", "b"], check=True)  # another process: another JVM
    merge(root, recs)


def merge(root: Path, recs: list[dict[str, Any]]) -> None:
    (HERE / "checkpoints").mkdir(exist_ok=True)
    path = HERE / "cases.jsonl.gz"
    kept: dict[str, dict[str, Any]] = {}
    if path.exists():
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                rec = json.loads(line)
                kept[rec["case"]["id"]] = rec
    for rec in recs:
        cid = rec["case"]["id"]
        folder = root / cid
        if not (folder / "b.json").exists():
            print("no outcome for", cid)
            continue
        a = json.loads((folder / "a.json").read_text())
        b = json.loads((folder / "b.json").read_text())
        rec = {**rec, **a, **b}
        rec["spark_env"] = SPARK_ENV
        rec["paths_at_run"] = {"in0": str(folder / "in0"), "checkpoint": str(folder / "checkpoint")}
        rec["checkpoint"] = f"checkpoints/{cid}.tar.gz"
        rec["recorded"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        trimmed_tar(folder / "checkpoint-before-restart", HERE / rec["checkpoint"])
        kept[cid] = rec
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for cid in sorted(kept):
            f.write(json.dumps(kept[cid], sort_keys=True) + "\n")
    print(len(kept), "cases in", path)


if __name__ == "__main__":
    main()
