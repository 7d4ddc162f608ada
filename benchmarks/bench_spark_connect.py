"""``fingerprint()`` of a Spark Connect DataFrame next to ``fingerprint()`` of the classic
DataFrame of the same code (issue 30).

``python benchmarks/run.py spark_connect`` (or ``python benchmarks/bench_spark_connect.py``).

One ``local[2]`` session with ``bench_spark``'s settings serves Spark Connect from its own JVM
on loopback (``pytest_opid.spark.serve``, what the ``spark_connect`` fixture does); each query
of ``tests/spark/connect_corpus.py`` named in :data:`QUERIES` is built by the same code on a
fresh classic session and on a fresh Connect session. Per run, alternated classic / Connect, a
DataFrame is built afresh (timed: a classic one is analyzed there, a Connect one only on the
client) and fingerprinted (timed: a Connect one's plan is replayed through Spark's
``SparkConnectPlanner`` in its server-side session, then read as a classic one). Medians of
:data:`RUNS` after :data:`WARMUP` warm-up runs, the fastest in brackets; the ratio is Connect
over classic, of the fingerprint alone and of building plus fingerprinting.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

WARMUP = 3
RUNS = 15
#: The corpus's pipelines timed here: batch, and streaming with one, two and a Python stateful
#: operator.
QUERIES = (
    "join_aggregate",
    "view_sql_conf_udf",
    "windowed_count",
    "dedupe_then_count",
    "stream_join",
    "transform_with_state",
)


def _session(warehouse: str) -> Any:
    from pyspark.sql import SparkSession

    from pytest_opid.plugin.spark import SPARK_CONF

    builder = SparkSession.builder.master("local[2]").appName("bench_spark_connect")
    for key, value in {**SPARK_CONF, "spark.sql.warehouse.dir": warehouse}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def _inputs(spark: Any, root: Path) -> dict[str, str]:
    from tests.spark.connect_corpus import write_events

    orders = [(i, i % 7, float(i * 3 % 50)) for i in range(200)]
    spark.createDataFrame(orders, "order_id long, customer_id long, amount double").write.parquet(
        str(root / "orders")
    )
    customers = root / "customers"
    customers.mkdir()
    (customers / "part-0.json").write_text(
        "".join(
            json.dumps({"customer_id": i, "country": "DE" if i % 2 else "FR"}) + "\n"
            for i in range(7)
        ),
        encoding="utf-8",
    )
    return {"orders": str(root / "orders"), "customers": str(customers), **write_events(root)}


def _timed(build: Any, session: Any, paths: dict[str, str]) -> tuple[float, float]:
    """Milliseconds to build the DataFrame and to fingerprint it."""
    import pytest_opid

    start = time.perf_counter()
    frame = build(session, paths)
    built = time.perf_counter()
    pytest_opid.fingerprint(frame)
    done = time.perf_counter()
    return (built - start) * 1000, (done - built) * 1000


def measure(name: str, classic: Any, connect: Any, paths: dict[str, str]) -> dict[str, Any]:
    import pytest_opid
    from tests.spark.connect_corpus import CORPUS

    build, kinds = CORPUS[name]
    assert pytest_opid.fingerprint(build(connect, paths)) == pytest_opid.fingerprint(
        build(classic, paths)
    ), name  # the same fingerprint, or the figures compare nothing
    times: dict[str, list[tuple[float, float]]] = {"classic": [], "connect": []}
    for run in range(WARMUP + RUNS):
        for api, session in (("classic", classic), ("connect", connect)):
            taken = _timed(build, session, paths)
            if run >= WARMUP:
                times[api].append(taken)
    row: dict[str, Any] = {"query": name, "mode": "streaming" if kinds else "batch"}
    for api, runs in times.items():
        row[f"{api}_ms"] = statistics.median(fp for _, fp in runs)
        row[f"{api}_min_ms"] = min(fp for _, fp in runs)
        row[f"{api}_total_ms"] = statistics.median(b + fp for b, fp in runs)
    row["ratio"] = row["connect_ms"] / row["classic_ms"]
    row["total_ratio"] = row["connect_total_ms"] / row["classic_total_ms"]
    print(
        f"{name:<22} {row['mode']:<9} fingerprint: classic {row['classic_ms']:6.1f} ms "
        f"({row['classic_min_ms']:5.1f})  Connect {row['connect_ms']:6.1f} ms "
        f"({row['connect_min_ms']:5.1f})  = {row['ratio']:.2f}x;  built + fingerprinted: "
        f"{row['classic_total_ms']:6.1f} / {row['connect_total_ms']:6.1f} ms "
        f"= {row['total_ratio']:.2f}x",
        flush=True,
    )
    return row


def main() -> None:
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    from pytest_opid.spark import serve, stop_serving

    with tempfile.TemporaryDirectory() as folder:
        spark = _session(str(Path(folder) / "warehouse"))
        server = serve(spark)
        client = ConnectSession.builder.remote(server.url).create()
        try:
            paths = _inputs(spark, Path(folder))
            rows = []
            for name in QUERIES:
                connect = client.newSession()
                try:
                    rows.append(measure(name, spark.newSession(), connect, paths))
                finally:
                    connect.stop()
        finally:
            client.stop()
            stop_serving(spark, server)
            spark.stop()
    for mode in ("batch", "streaming"):
        chosen = [r for r in rows if r["mode"] == mode]
        ratio = sum(r["connect_ms"] for r in chosen) / sum(r["classic_ms"] for r in chosen)
        total = sum(r["connect_total_ms"] for r in chosen) / sum(
            r["classic_total_ms"] for r in chosen
        )
        print(
            f"{mode}: Connect / classic fingerprint {ratio:.2f}x (sum of medians), "
            f"built + fingerprinted {total:.2f}x",
            flush=True,
        )
    print("BENCH_SPARK_CONNECT " + json.dumps(rows))


if __name__ == "__main__":
    main()
