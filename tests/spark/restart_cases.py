"""The 66 real Spark 4.3 restarts of ``tests/data/spark-restart``: extracting a case, building
its queries, and restarting a query for real where a scenario is not in the data.

A case's checkpoint names its input files by the absolute paths of the run
(``paths_at_run``, under ``/srv/spark/ckpts/shared/<case id>/``). Extracted elsewhere, its file
source logs are rewritten to the extraction folder (:func:`extract`), exactly as if the run had
used that folder: the logs then name the extracted ``in0``/``in1`` files, which the rebuilt
queries read.
"""

from __future__ import annotations

import gzip
import json
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1] / "data" / "spark-restart"


def load_cases(data: Path = DATA) -> dict[str, dict[str, Any]]:
    with gzip.open(data / "cases.jsonl.gz", "rt", encoding="utf-8") as f:
        cases = [json.loads(line) for line in f]
    return {rec["case"]["id"]: rec for rec in cases}


def extract(rec: dict[str, Any], root: Path, data: Path = DATA) -> Path:
    """Extract a case's checkpoint and inputs into ``root/<case id>/`` and point the
    checkpoint's file source logs there; returns that folder."""
    folder = root / rec["case"]["id"]
    for tarball in (rec["checkpoint"], rec["inputs"]):
        with tarfile.open(data / tarball, "r:gz") as tar:
            tar.extractall(folder, filter="data")
    ran_in = Path(rec["paths_at_run"]["checkpoint"]).parent.as_posix()
    old, new = f"file://{ran_in}/", f"file://{folder.resolve().as_posix()}/"
    sources = folder / "checkpoint" / "sources"
    for log in sources.glob("*/*") if sources.is_dir() else ():
        if log.name.startswith("."):
            continue
        text = log.read_text(encoding="utf-8")
        if old in text:
            log.write_text(text.replace(old, new), encoding="utf-8")
            (log.parent / f".{log.name}.crc").unlink(missing_ok=True)  # no longer matches
    return folder


def paths(folder: Path) -> dict[str, str]:
    return {key: str(folder / key) for key in ("in0", "in1", "in2", "out", "out2")}


def build(spark: Any, rec: dict[str, Any], which: str, folder: Path) -> Any:
    """Query A (``before``) or B (``after``) of a case, on a new session with its confs."""
    namespace: dict[str, Any] = {}
    exec(rec[f"{which}_code"], namespace)  # the data set's own query code
    session = spark.newSession()
    for key, value in rec[f"session_conf_{which}"].items():
        session.conf.set(key, value)
    return namespace["build"](session, paths(folder))


# -- restarting for real -------------------------------------------------------------------------

SCHEMA = "id LONG, user STRING, k INT, cat STRING, v LONG, amount DOUBLE, ts TIMESTAMP"


@dataclass(frozen=True)
class Outcome:
    """What Spark did with query B on query A's checkpoint."""

    restarted: bool
    error_class: str | None
    message: str


def restart(
    spark: Any,
    root: Path,
    before: Callable[[Any, dict[str, str]], Any],
    after: Callable[[Any, dict[str, str]], Any],
    inputs: Path,
    output_mode: str = "append",
) -> tuple[Path, Any, Any, Outcome]:
    """Run ``before`` with ``availableNow`` on a new checkpoint, add an input file, restart
    ``after`` on that checkpoint (in this JVM: Spark's restart checks run on the driver, when
    the restarted query plans its first batch). Returns the checkpoint (copied before the
    restart, as Spark left it), both DataFrames and Spark's outcome."""
    import shutil

    root.mkdir(parents=True)
    folders = {}
    for name in ("in0", "in1"):
        folder = root / name
        folder.mkdir()
        shutil.copy(inputs / name / "batch1.json", folder / "batch1.json")
        folders[name] = str(folder)
    checkpoint = root / "checkpoint"
    a = before(spark.newSession(), folders)
    _run(a, checkpoint, output_mode)
    kept = root / "checkpoint-before-restart"
    shutil.copytree(checkpoint, kept)
    for name in ("in0", "in1"):
        shutil.copy(inputs / name / "batch2.json", root / name / "batch2.json")
    b = after(spark.newSession(), folders)
    try:
        _run(b, checkpoint, output_mode)
        outcome = Outcome(True, None, "")
    except Exception as exc:  # the streaming query failed
        outcome = Outcome(False, _condition(exc), str(exc))
    return kept, a, b, outcome


def _run(df: Any, checkpoint: Path, output_mode: str) -> None:
    query = (
        df.writeStream.format("noop")
        .outputMode(output_mode)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(120)
    finally:
        query.stop()


def _condition(exc: Exception) -> str | None:
    """The error condition Spark named, the innermost other than STREAM_FAILED."""
    text = str(exc)
    found = None
    start = 0
    while True:
        at = text.find("[", start)
        if at < 0:
            break
        end = text.find("]", at)
        word = text[at + 1 : end]
        plain = word.replace("_", "").replace(".", "").isalnum() and word.isupper()
        if end > at and plain and word != "STREAM_FAILED":
            found = word
            break
        start = at + 1
    return found


def writer_after(spark: Any, rec: dict[str, Any], folder: Path, location: str) -> Any:
    """B as the data set started it (its sink, output mode and path), its checkpointLocation
    ``location``."""
    sink = rec["sink_after"]
    program = (
        build(spark, rec, "after", folder)
        .writeStream.format(sink["format"])
        .outputMode(sink["output_mode"])
        .option("checkpointLocation", location)
    )
    if sink["path_key"]:
        program = program.option("path", str(folder / sink["path_key"]))
    return program
