"""``demonstrate(A, B)`` on every real restart pair of tests/data (not collected by pytest: a
script, run by hand; a sample runs in tests/spark/test_demonstrate.py).

    python tests/spark/demonstrate_corpus.py                   # both corpora, a table
    python tests/spark/demonstrate_corpus.py --json out.jsonl  # and one record per pair
    python tests/spark/demonstrate_corpus.py CASE_ID ...       # some pairs
    python tests/spark/demonstrate_corpus.py --corpus spark-restart --examples 1
    python tests/spark/demonstrate_corpus.py                   # under PySpark 3.5: spark-restart-35

Truth, per pair: "refused" where real Spark refused B on A's checkpoint (4.3 for spark-restart
and meaning-restart, 3.5.9 for spark-restart-35, run under PySpark 3.5: each line is its own
truth);
in meaning-restart, "differs" where the restarted B emitted other rows for batch 3 than B from
scratch (``b_output_differs``), else "same". spark-restart records no emitted rows: a pair B
restarted on is "restarted" there (either "differs" or "same" agrees with it).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1] / "data"
SPARK_ENV = {
    "spark.master": "local[2]",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.streaming.stopTimeout": "60s",
}


#: The corpora whose truth a PySpark line speaks for.
CORPORA = {"4.3": ("spark-restart", "meaning-restart"), "3.5": ("spark-restart-35",)}


def pairs(corpora: tuple[str, ...] = CORPORA["4.3"]) -> list[dict[str, Any]]:
    """The corpora as (id, corpus, codes, confs, modes, truth)."""
    out = []
    for corpus in corpora:
        if corpus != "meaning-restart":
            out.extend(_restarts(corpus))
    if "meaning-restart" in corpora:
        out.extend(_meanings())
    return out


def _restarts(corpus: str) -> list[dict[str, Any]]:
    out = []
    with gzip.open(DATA / corpus / "cases.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            restarted = rec["spark"]["restarted"]
            out.append(
                {
                    "id": rec["case"]["id"],
                    "corpus": corpus,
                    "rec": rec,
                    "modes": (rec["sink_before"]["output_mode"], rec["sink_after"]["output_mode"]),
                    "truth": "restarted" if restarted else "refused",
                    "spark": rec["spark"]["outcome"],
                }
            )
    return out


def _meanings() -> list[dict[str, Any]]:
    out = []
    for line in (DATA / "meaning-restart" / "cases.jsonl").read_text("utf-8").splitlines():
        rec = json.loads(line)
        restarted = rec["spark"]["restarted"]
        truth = "refused" if not restarted else "differs" if rec["b_output_differs"] else "same"
        out.append(
            {
                "id": rec["case"]["id"],
                "corpus": "meaning-restart",
                "rec": rec,
                "modes": (rec["output_mode_before"], rec["output_mode_after"]),
                "truth": truth,
                "spark": rec["spark"]["outcome"],
            }
        )
    return out


def dataframe(spark: Any, pair: dict[str, Any], which: str, folder: Path) -> Any:
    """Query A (``before``) or B (``after``) planned in a new session with its settings, on
    empty input folders (the demonstration feeds folders of its own)."""
    rec = pair["rec"]
    namespace: dict[str, Any] = {}
    exec(rec[f"{which}_code"], namespace)  # the corpus's own query code
    session = spark.newSession()
    for key, value in rec[f"session_conf_{which}"].items():
        session.conf.set(key, value)
    paths = {}
    for name in ("in0", "in1", "in2", "out", "out2"):
        (folder / name).mkdir(parents=True, exist_ok=True)
        paths[name] = str(folder / name)
    mode = pair["modes"][0 if which == "before" else 1]
    return namespace["build"](session, paths).writeStream.outputMode(mode)


def agrees(truth: str, outcome: str) -> bool:
    return truth == outcome or (truth == "restarted" and outcome in ("differs", "same"))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("ids", nargs="*")
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--corpus", choices=("spark-restart", "meaning-restart", "spark-restart-35")
    )
    parser.add_argument("--examples", type=int, default=None)
    parser.add_argument("--seed", type=int, default=41)
    parser.add_argument("--shrink-seconds", type=float, default=None)
    args = parser.parse_args(argv)
    import pyspark
    from pyspark.sql import SparkSession

    import pytest_opid

    line = ".".join(pyspark.__version__.split(".")[:2])
    corpora = CORPORA.get(line)
    if corpora is None or (args.corpus is not None and args.corpus not in corpora):
        print(f"PySpark {pyspark.__version__}: its truth is in {CORPORA}", file=sys.stderr)
        return 2

    builder = SparkSession.builder.appName("demonstrate-corpus")
    for key, value in SPARK_ENV.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    chosen = [
        p
        for p in pairs(corpora)
        if (not args.ids or p["id"] in args.ids) and args.corpus in (None, p["corpus"])
    ]
    knobs: dict[str, Any] = {} if args.examples is None else {"examples": args.examples}
    if args.shrink_seconds is not None:
        knobs["shrink_seconds"] = args.shrink_seconds
    rows, agreed = [], 0
    out = args.json.open("w", encoding="utf-8") if args.json else None
    for pair in chosen:
        with tempfile.TemporaryDirectory() as tmp:
            a = dataframe(spark, pair, "before", Path(tmp) / "a")
            b = dataframe(spark, pair, "after", Path(tmp) / "a")
            started = time.monotonic()
            try:
                result = pytest_opid.demonstrate(a, b, seed=args.seed, **knobs)
                outcome, detail = result.outcome, result.error_class or ""
                seconds = result.seconds
            except Exception as exc:  # reported in the table, not raised
                outcome, detail = "error", f"{type(exc).__name__}: {exc}"[:200]
                seconds, result = time.monotonic() - started, None
        ok = agrees(pair["truth"], outcome)
        agreed += ok
        row = (
            pair["corpus"],
            pair["id"],
            pair["truth"],
            pair["spark"],
            outcome,
            detail,
            seconds,
            ok,
        )
        rows.append(row)
        print(
            f"{'ok ' if ok else 'NO '} {pair['corpus']:15} {pair['id'][:60]:60} "
            f"truth={pair['truth']:9} "
            f"got={outcome:8} {seconds:6.1f}s {detail[:70]}",
            flush=True,
        )
        if out is not None:
            record = {
                "corpus": pair["corpus"],
                "id": pair["id"],
                "truth": pair["truth"],
                "spark": pair["spark"],
                "agrees": ok,
                "result": result.to_dict() if result is not None else {"error": detail},
            }
            out.write(json.dumps(record) + "\n")
            out.flush()
    seconds = sorted(r[6] for r in rows)
    if seconds:
        print(
            f"{agreed}/{len(rows)} agree; seconds per pair: "
            f"median {seconds[len(seconds) // 2]:.1f}, "
            f"max {seconds[-1]:.1f}, total {sum(seconds):.0f}"
        )
    spark.stop()
    return 0 if agreed == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
