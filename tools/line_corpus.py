"""The same queries fingerprinted on one Spark line: ``tests/data/line-corpus/<line>/``.

pytest-opid must judge an unchanged query unchanged whichever Spark line made the old
fingerprint or snapshot and whichever runs the new one. This script fingerprints one corpus of
queries on the installed PySpark and saves, per query, the fingerprint in its saved form (what
``opid fingerprint --json`` writes) and the snapshot text the plugin writes to an ``.opid`` file;
``tests/core/test_line_corpus.py`` compares every pair of lines from both. Run it once per line,
from the repository root, in an environment of that line (the ``spark35`` ... ``py311`` tox envs
or any venv made with its constraints file):

    python tools/line_corpus.py            # or: python tools/line_corpus.py OTHER_FOLDER
    python tools/line_corpus.py --windows  # only the window shapes, into the line's files
    python tools/line_corpus.py /tmp/part0 --shard=0/2  # half of them, then:
    python tools/line_corpus.py --merge /tmp/part0 /tmp/part1

The corpus: every query of the real-restart data sets (``tests/data/spark-restart``, ``-35``,
``upgrade-restart``, ``meaning-restart``, ``tws-restart``: A's and B's code with their session
confs), the pipelines of ``tests/spark/connect_corpus.py`` (every stateful operator kind PySpark
builds), window shapes where Spark adds an interval to a timestamp (:data:`WINDOWS`), the
example jobs (``examples/spark/jobs.py``) and the TPC-DS-like batch queries. A
query the line cannot build (transformWithState before 4.0, ...) is listed in ``missing.json``
with Spark's reason, never guessed. Queries read empty input folders: a fingerprint reads the
plan, not the data.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
OUT = DATA / "line-corpus"

#: The restart data sets whose A and B queries join the corpus.
RESTART_SETS = (
    "spark-restart",
    "spark-restart-35",
    "upgrade-restart",
    "meaning-restart",
    "tws-restart",
)


def _records(name: str) -> list[dict[str, Any]]:
    folder = DATA / name
    path = folder / "cases.jsonl.gz"
    if path.exists():
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return [json.loads(line) for line in f]
    with (folder / "cases.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _module(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


Builder = Callable[[Any, Path], Any]


#: Each restart pair's query under the name the corpus files it by (the first pair with the
#: same code and confs): ``aliases.json``.
ALIASES: dict[str, str] = {}


def corpus() -> Iterator[tuple[str, Builder]]:
    """(name, builder) per query; a builder takes a fresh session and an input folder."""
    seen: dict[str, str] = {}
    windows_only = "--windows" in sys.argv  # only those (into a line's files with the rest)
    for name in () if windows_only else RESTART_SETS:
        for rec in _records(name):
            ident = rec.get("case", {}).get("id") if isinstance(rec.get("case"), dict) else None
            ident = ident or rec.get("pair") or rec.get("id")
            for which in ("before", "after"):
                code = rec.get(f"{which}_code")
                if not code:
                    continue
                conf = rec.get(f"session_conf_{which}") or {}
                key = hashlib.sha256(json.dumps([code, conf], sort_keys=True).encode()).hexdigest()
                here = f"{name}/{ident}/{which}"
                if key not in seen:
                    seen[key] = here
                    yield here, _restart_builder(code, conf)
                ALIASES.setdefault(here, seen[key])
    for shape in SHAPES:
        code = WINDOWS.replace("SHAPE", repr(shape))
        yield f"windows/{shape}", _restart_builder(code, {"spark.sql.shuffle.partitions": "2"})
    if windows_only:
        return
    connect = _module(ROOT / "tests" / "spark" / "connect_corpus.py")
    for name, (build, _) in sorted(connect.CORPUS.items()):
        yield f"connect-corpus/{name}", _corpus_builder(build)
    jobs = _module(ROOT / "examples" / "spark" / "jobs.py")
    for name in (
        "page_view_stats",
        "page_view_stats_with_last_view",
        "page_view_stats_without_health_checks",
    ):
        yield f"examples/{name}", _job_builder(getattr(jobs, name))
    yield "examples/daily_revenue", _revenue_builder(jobs.daily_revenue)
    for path in sorted((DATA / "tpcds-like" / "queries").glob("*.sql")):
        yield f"tpcds-like/{path.stem}", _sql_builder(path.read_text(encoding="utf-8"))


#: Window shapes the data sets do not have, where Spark plans a timestamp plus an interval
#: (``TimeAdd`` before 4.1): a session window with a gap per row, a window with a start offset,
#: a key and a join condition with ``+ INTERVAL``.
WINDOWS = """
def build(spark, paths):
    from pyspark.sql import functions as F
    schema = "id LONG, user STRING, k INT, cat STRING, v LONG, amount DOUBLE, ts TIMESTAMP"
    events = spark.readStream.schema(schema).json(paths["in0"]).withWatermark("ts", "10 minutes")
    if SHAPE == "dynamic_gap":
        gap = F.when(F.col("cat") == "a", "2 minutes").otherwise("5 minutes")
        return events.groupBy(F.session_window("ts", gap), "user").count()
    if SHAPE == "start_offset":
        return events.groupBy(F.window("ts", "10 minutes", "5 minutes", "2 minutes")).count()
    if SHAPE == "shifted_key":
        return events.groupBy(F.expr("ts + INTERVAL 1 HOUR").alias("later"), "user").count()
    if SHAPE == "shifted_window":
        shifted = events.withColumn("local", F.col("ts") + F.expr("INTERVAL 2 HOURS"))
        return shifted.groupBy(F.window("ts", "5 minutes"), F.hour("local")).agg(F.sum("v"))
    other = spark.readStream.schema(schema).json(paths["in1"]).withWatermark("ts", "10 minutes")
    return events.alias("a").join(
        other.alias("b"),
        F.expr("a.id = b.id AND b.ts BETWEEN a.ts AND a.ts + INTERVAL 15 MINUTES"),
        "leftOuter",
    )
"""
SHAPES = ("dynamic_gap", "start_offset", "shifted_key", "shifted_window", "interval_join")


def _restart_builder(code: str, conf: dict[str, str]) -> Builder:
    def build(session: Any, inputs: Path) -> Any:
        for key, value in conf.items():
            session.conf.set(key, value)
        namespace: dict[str, Any] = {}
        exec(code, namespace)  # the data set's own query code
        paths = {k: str(inputs / k) for k in ("in0", "in1", "in2", "out", "out2")}
        return namespace["build"](session, paths)

    return build


def _corpus_builder(build: Callable[[Any, dict[str, str]], Any]) -> Builder:
    def run(session: Any, inputs: Path) -> Any:
        paths = {k: str(inputs / k) for k in ("events", "clicks", "orders", "customers")}
        return build(session, paths)

    return run


def _job_builder(build: Callable[[Any, str], Any]) -> Builder:
    return lambda session, inputs: build(session, str(inputs / "events"))


def _revenue_builder(build: Callable[[Any, str, str], Any]) -> Builder:
    return lambda session, inputs: build(session, str(inputs / "orders"), str(inputs / "customers"))


def _sql_builder(text: str) -> Builder:
    return lambda session, inputs: session.sql(text)


def _inputs(spark: Any, root: Path) -> Path:
    """Empty input folders, and the one parquet table the corpus reads without a schema."""
    for name in ("in0", "in1", "in2", "out", "out2", "events", "clicks", "customers"):
        (root / name).mkdir(parents=True)
    spark.createDataFrame(
        [(1, 2.5, 3)], "customer_id LONG, amount DOUBLE, order_id LONG"
    ).write.parquet(str(root / "orders"))
    return root


#: Where the saved files say the inputs were: the run's own temporary folder differs from run
#: to run, and a fingerprint records its sources' paths (Spark's restart checks them).
INPUTS = "/line-corpus/inputs"


def portable(text: str, inputs: Path) -> str:
    """``text`` with the run's input folder written as :data:`INPUTS`."""
    return text.replace(str(inputs.resolve()), INPUTS).replace(str(inputs), INPUTS)


def _merged(folder: Path, *new: list[str]) -> tuple[list[str], list[str]]:
    out = []
    for file, lines in zip(("fingerprints", "snapshots"), new, strict=True):
        with gzip.open(folder / f"{file}.jsonl.gz", "rt", encoding="utf-8") as f:
            kept = {json.loads(text)["query"]: text.rstrip("\n") for text in f if text.strip()}
        kept.update((json.loads(text)["query"], text) for text in lines)
        out.append(list(kept.values()))
    return out[0], out[1]


def merge(parts: list[str]) -> None:
    """``--merge PART...``: the ``<line>`` folders of ``--shard`` runs joined into the data."""
    for line in sorted({d.name for part in parts for d in Path(part).iterdir() if d.is_dir()}):
        found: dict[str, list[str]] = {"fingerprints": [], "snapshots": []}
        missing: dict[str, str] = {}
        pyspark = ""
        for part in parts:
            folder = Path(part) / line
            for file, lines in found.items():
                with gzip.open(folder / f"{file}.jsonl.gz", "rt", encoding="utf-8") as f:
                    lines += [text.rstrip("\n") for text in f if text.strip()]
            record = json.loads((folder / "missing.json").read_text("utf-8"))
            missing.update(record["missing"])
            pyspark = record["pyspark"]
        _write(OUT / line, found["fingerprints"], found["snapshots"], missing, pyspark)


def _write(
    folder: Path,
    fingerprints: list[str],
    snapshots: list[str],
    missing: dict[str, str],
    pyspark: str,
) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for file, lines in (("fingerprints", fingerprints), ("snapshots", snapshots)):
        lines = sorted(lines, key=lambda text: json.loads(text)["query"])
        # mtime=0: the same corpus gives the same bytes
        with (
            (folder / f"{file}.jsonl.gz").open("wb") as raw,
            gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f,
        ):
            f.write(("\n".join(lines) + "\n").encode())
    (folder / "missing.json").write_text(
        json.dumps({"pyspark": pyspark, "missing": missing}, indent=1, sort_keys=True) + "\n",
        encoding="utf-8",
    )
    print(f"PySpark {pyspark}: {len(fingerprints)} queries, {len(missing)} missing -> {folder}")


def main() -> None:
    import pyspark
    from pyspark.sql import SparkSession

    import pytest_opid
    from pytest_opid.engines import engine_rules
    from pytest_opid.plugin.extension import TopologySnapshotExtension
    from pytest_opid.plugin.spark import SPARK_CONF
    from pytest_opid.spark.versions import installed_line

    line = str(installed_line())
    engine_rules("spark")  # the engines registered up front: a failure here is no query's
    builder = SparkSession.builder.master("local[2]").appName("line-corpus")
    for key, value in SPARK_CONF.items():
        builder = builder.config(key, value)
    with tempfile.TemporaryDirectory() as root:
        spark = builder.config("spark.sql.warehouse.dir", str(Path(root, "wh"))).getOrCreate()
        spark.sparkContext.setLogLevel("OFF")
        tables = _module(ROOT / "tests" / "spark" / "tpcds_like.py")
        tables.create_tables(spark)
        inputs = _inputs(spark, Path(root, "inputs"))
        fingerprints, snapshots, missing = [], [], {}
        shard = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--shard=")), "0/1")
        part, parts = map(int, shard.split("/"))  # --shard=K/N: every N-th query from the K-th
        queries = [q for i, q in enumerate(corpus()) if i % parts == part]
        for done, (name, build) in enumerate(queries):
            if done % 25 == 0:
                print(f"{done} queries fingerprinted", file=sys.stderr, flush=True)
            try:
                fp = pytest_opid.fingerprint(build(spark.newSession(), inputs))
            except Exception as exc:  # the line cannot build it: say why
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                missing[name] = f"{type(exc).__name__}: {first[:300]}"
                continue
            saved = {"query": name, "fingerprint": fp.to_dict()}
            fingerprints.append(portable(json.dumps(saved, sort_keys=True), inputs))
            text = TopologySnapshotExtension().serialize(fp)
            saved = {"query": name, "snapshot": text}
            snapshots.append(portable(json.dumps(saved, sort_keys=True), inputs))
        spark.stop()
    if len(missing) > len(fingerprints):
        sys.exit(f"{len(missing)} queries failed, first: {next(iter(missing.items()))}")
    folders = [a for a in sys.argv[1:] if not a.startswith("--")]
    folder = Path(folders[0]) / line if folders else OUT / line
    if "--windows" in sys.argv:  # keep what the line's files hold, the new queries replaced
        fingerprints, snapshots = _merged(folder, fingerprints, snapshots)
        missing = {**json.loads((folder / "missing.json").read_text("utf-8"))["missing"], **missing}
    folder.mkdir(parents=True, exist_ok=True)
    if ALIASES:  # every restart pair's query was listed (not --windows alone)
        (folder.parent / "aliases.json").write_text(
            json.dumps(ALIASES, indent=0, sort_keys=True) + "\n", encoding="utf-8"
        )
    _write(folder, fingerprints, snapshots, missing, pyspark.__version__)


if __name__ == "__main__":
    if "--merge" in sys.argv:
        merge(sys.argv[sys.argv.index("--merge") + 1 :])
    else:
        main()
