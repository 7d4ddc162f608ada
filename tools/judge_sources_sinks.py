"""Judge every pair of a sources-and-sinks restart corpus (tests/data/sources-sinks, or
tests/data/sink-restarts) with the API and count the verdicts right and wrong per truth kind.

    python tools/judge_sources_sinks.py tests/data/sources-sinks [--cli] [--only ID ...]

Each pair's folder (A's checkpoint and sink, B's inputs, as B found them) is unpacked in a
temporary folder, its absolute paths (``unpack_at/<id>``) rewritten to that folder in the
checkpoint's and the sink log's text files, and B's writer (``b_code``'s ``build(spark,
paths)``) judged against A's checkpoint: ``check_restore(ckpt, writer_b)`` and with
``previous_fingerprint=fingerprint(writer_a)``; with ``--cli`` also ``opid fingerprint --spark``
then ``opid check-restore``. A verdict is right for a bad outcome (refused, rows lost or
duplicated, wrong) where it says "not restorable" or "not safe" (a reinterpretation), and for a
correct one where it says restorable and safe; "unverified" counts the verdicts "restorable,
not verified" (``safe`` None, the CLI's exit 3), which name no problem. Not collected by pytest: the
tests run a sample (tests/spark/restart/test_sink_restarts.py).
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import linecache
import os
import subprocess
import sys
import tarfile
import tempfile
import textwrap
from pathlib import Path
from typing import Any

BAD = ("refused", "rows_lost", "rows_duplicated", "wrong")


def unpack(case: dict[str, Any], data: Path, into: Path) -> dict[str, str]:
    """The pair's folder under ``into``, its paths rewritten; the paths B's code uses."""
    with tarfile.open(data / case["data"]) as tar:
        tar.extractall(into, filter="data")
    old = f"{case['unpack_at'].rstrip('/')}/{case['id']}"
    new = str(into / case["id"])
    for root, _, files in os.walk(into):
        for name in files:
            path = Path(root, name)
            if name.endswith((".crc", ".parquet")) or path.stat().st_size > 1_000_000:
                continue
            try:
                text = path.read_text("utf-8")
            except UnicodeDecodeError:
                continue
            if old in text:
                path.write_text(text.replace(old, new), "utf-8")
    return {k: v.replace(old, new) for k, v in case["paths_at_run"].items()}


def build(spark: Any, code: str, paths: dict[str, str]) -> Any:
    """The pair's ``build(spark, paths)``, its source registered in :mod:`linecache` (as
    IPython registers a cell's) so that its functions' source is found, as in a module."""
    text = textwrap.dedent(code)
    name = f"<build {hashlib.sha256(text.encode()).hexdigest()[:12]}>"
    linecache.cache[name] = (len(text), None, text.splitlines(True), name)
    scope: dict[str, Any] = {}
    exec(compile(text, name, "exec"), scope)  # the corpus's own code
    return scope["build"](spark, paths)


def right(truth: str, check: Any) -> str:
    """``right``, ``unverified`` (restorable, not verified: the CLI's exit 3; for a bad outcome
    it names no problem) or ``WRONG``."""
    if check.safe is None:
        return "unverified"
    if truth in BAD:
        return "right" if check.safe is False else "WRONG"
    return "right" if check.safe else "WRONG"


def said(check: Any) -> str:
    if not check.restorable:
        return "refused"
    if check.reinterpreted:
        return "not safe: " + ",".join(r.kind for r in check.reinterpreted)
    if check.safe is None:
        return "not verified: " + ",".join(u.kind for u in check.unverified)
    return "restorable, safe"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--cli", action="store_true")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    from pyspark.sql import SparkSession

    import pytest_opid

    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    cases = [json.loads(line) for line in (args.corpus / "cases.jsonl").open()]
    tally: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for case in cases:
        if args.only and case["id"] not in args.only:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            paths = unpack(case, args.corpus, Path(tmp))
            for key, value in case.get("session_conf", {}).items():
                if key.startswith("spark.sql."):
                    spark.conf.set(key, value)
            ckpt = paths[case.get("a_checkpoint_path_key", "ckpt")]
            a = pytest_opid.fingerprint(build(spark, case["a_code"], paths))
            b_writer = build(spark, case["b_code"], paths)
            truth = case["truth"]
            verdicts = {
                "api": pytest_opid.check_restore(ckpt, b_writer),
                "api+previous": pytest_opid.check_restore(ckpt, b_writer, previous_fingerprint=a),
            }
            if args.cli:
                verdicts["cli"] = _cli(case, ckpt, Path(tmp))
            for how, check in verdicts.items():
                ok = right(truth, check)
                tally[how][f"{truth} {ok}"] += 1
                if args.verbose or ok != "right":
                    mark = {"right": "ok ", "unverified": "unv"}.get(ok, "BAD")
                    print(f"{mark} {how:13} {case['id']:40} {truth:16} {said(check)}")
    for how, counts in tally.items():
        print(how, dict(sorted(counts.items())))
    return 0


def _cli(case: dict[str, Any], ckpt: str, tmp: Path) -> Any:
    """``opid fingerprint --spark`` of B's builder, then ``opid check-restore``."""
    from pytest_opid import RestoreCheck, RestoreProblem

    module = tmp / "b_build.py"
    module.write_text(textwrap.dedent(case["b_code"]))
    paths = tmp / "paths.json"
    paths.write_text(json.dumps({k: v for k, v in case["paths_at_run"].items()}))
    saved = tmp / "b.json"
    # the pytest_opid this tool imports (a worktree's, on PYTHONPATH), not only the installed
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(tmp), *sys.path)))}
    conf = [f"--conf={k}={v}" for k, v in case["session_conf"].items() if k.startswith("spark.sql")]
    # the paths are passed through a helper module: FUNCTION(spark, *ARGS) takes strings
    (tmp / "b_entry.py").write_text(
        "import json, b_build\n"
        f"PATHS = json.load(open({str(paths)!r}))\n"
        f"OLD = {case['unpack_at'].rstrip('/') + '/' + case['id']!r}\n"
        f"NEW = {str(tmp / case['id'])!r}\n"
        "def build(spark):\n"
        "    return b_build.build(spark, {k: v.replace(OLD, NEW) for k, v in PATHS.items()})\n"
    )
    with saved.open("w") as out:
        subprocess.run(
            [str(Path(sys.executable).parent / "opid"), "fingerprint", "--spark", "b_entry:build",
             "--json", *conf],
            check=True, stdout=out, env=env, cwd=tmp,
        )  # fmt: skip
    done = subprocess.run(
        [str(Path(sys.executable).parent / "opid"), "check-restore", ckpt, str(saved), "--json"],
        capture_output=True, text=True, env=env, cwd=tmp,
    )  # fmt: skip
    data = json.loads(done.stdout)

    def problems(key: str) -> tuple[RestoreProblem, ...]:
        return tuple(RestoreProblem(p["kind"], p["message"]) for p in data.get(key, ()))

    check = RestoreCheck(
        data["engine"], data["restorable"], problems("problems"), problems("warnings"),
        problems("reinterpreted"), unverified=problems("unverified"),
    )  # fmt: skip
    exit_code = {True: 0, None: 3, False: 1}[check.safe]
    if done.returncode != exit_code:
        raise SystemExit(
            f"{case['id']}: opid check-restore exited {done.returncode}, not {exit_code}"
        )
    return check


if __name__ == "__main__":
    sys.exit(main())
