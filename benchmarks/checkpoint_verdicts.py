"""How often the checkpoint route says "meaning not verified" (``opid check-restore`` exit 3) on
the real restarts of ``tests/data``, judged from the checkpoint as the CLI judges it.

Run by hand (not collected: a whole corpus starts many queries), from the repository root:

    python benchmarks/checkpoint_verdicts.py                    # both corpora, as they are
    python benchmarks/checkpoint_verdicts.py --record           # with A's fingerprint recorded

``spark-restart``: the 66 pairs of Spark 4.3's shared set, whose checkpoints hold their state
data. ``meaning-restart``: the 35 pairs of issue 18, whose archived checkpoints are slim; here A
runs again on batches 1 and 2 of the case's own inputs (as ``make.py`` ran it), so that its
checkpoint holds its state data. With ``--record``, A's fingerprint is recorded beside its
checkpoint (``record_deploy``) before B is checked, as the deploy step of
docs/pyspark-checkpoints.md does.

Prints one line per pair (case, Spark's outcome, the exit status) and the share of exit 3.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.spark.restart_cases import build, extract, load_cases  # noqa: E402

MEANING = REPO / "tests" / "data" / "meaning-restart"


def exit_status(check: Any) -> int:
    """``opid check-restore``'s exit status for a verdict (without --allow-reinterpreted)."""
    if check.safe is None:
        return 3
    return 0 if check.safe else 1


def _run(df: Any, checkpoint: Path, mode: str) -> None:
    query = (
        df.writeStream.format("noop")
        .outputMode(mode)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(180)
    finally:
        query.stop()


def spark_restart(spark: Any, root: Path, record: bool) -> list[tuple[str, bool, int]]:
    import pytest_opid

    out = []
    for case_id, rec in sorted(load_cases().items()):
        folder = extract(rec, root)
        if record:
            from pytest_opid.spark import record_deploy

            record_deploy(folder / "checkpoint", build(spark, rec, "before", folder))
        check = pytest_opid.check_restore(folder / "checkpoint", build(spark, rec, "after", folder))
        out.append((case_id, rec["spark"]["restarted"], exit_status(check)))
        print(case_id, out[-1][1:], flush=True)
    return out


def meaning_restart(spark: Any, root: Path, record: bool) -> list[tuple[str, bool, int]]:
    import pytest_opid

    recs = [json.loads(line) for line in (MEANING / "cases.jsonl").read_text().splitlines()]
    out = []
    for rec in recs:
        case_id = rec["case"]["id"]
        folder = root / case_id
        with tarfile.open(MEANING / rec["inputs"], "r:gz") as tar:
            tar.extractall(folder / "all", filter="data")
        paths = {}
        for name in ("in0", "in1"):
            (folder / name).mkdir(parents=True)
            paths[name] = str(folder / name)
        checkpoint = folder / "checkpoint"
        try:
            for batch in ("batch1.json", "batch2.json"):
                for name in ("in0", "in1"):
                    source = folder / "all" / name / batch
                    if source.exists():
                        shutil.copy(source, folder / name / batch)
                _run(_built(spark, rec, "before", paths), checkpoint, rec["output_mode_before"])
        except Exception as exc:  # a run that failed here (a Python worker under load): left out
            print(case_id, "A did not run:", str(exc).splitlines()[0][:200], flush=True)
            continue
        for name in ("in0", "in1"):
            source = folder / "all" / name / "batch3.json"
            if source.exists():
                shutil.copy(source, folder / name / "batch3.json")
        if record:
            from pytest_opid.spark import record_deploy

            record_deploy(checkpoint, _built(spark, rec, "before", paths))
        check = pytest_opid.check_restore(checkpoint, _built(spark, rec, "after", paths))
        out.append((case_id, rec["spark"]["restarted"], exit_status(check)))
        print(case_id, out[-1][1:], [u.message[:160] for u in check.unverified], flush=True)
    return out


def _built(spark: Any, rec: dict[str, Any], which: str, paths: dict[str, str]) -> Any:
    namespace: dict[str, Any] = {}
    exec(rec[f"{which}_code"], namespace)  # the data set's own query code
    session = spark.newSession()
    for key, value in rec[f"session_conf_{which}"].items():
        session.conf.set(key, value)
    return namespace["build"](session, paths)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", action="store_true")
    parser.add_argument("--corpus", choices=("spark-restart", "meaning-restart"), action="append")
    args = parser.parse_args()
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    for corpus in args.corpus or ("spark-restart", "meaning-restart"):
        with tempfile.TemporaryDirectory() as tmp:
            run = spark_restart if corpus == "spark-restart" else meaning_restart
            results = run(spark, Path(tmp), args.record)
        threes = sum(1 for _, _, code in results if code == 3)
        print(
            f"{corpus}{' (recorded)' if args.record else ''}: {len(results)} verdicts, "
            f"exit 3 on {threes} ({100 * threes / len(results):.0f}%); exit 0 on "
            f"{sum(1 for r in results if r[2] == 0)}, exit 1 on "
            f"{sum(1 for r in results if r[2] == 1)}",
            flush=True,
        )


if __name__ == "__main__":
    main()
