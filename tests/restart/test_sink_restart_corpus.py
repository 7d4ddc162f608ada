"""Real restarts that change a query's sink, source options, output mode, trigger, query name or
checkpoint (tests/data/sources-sinks, vendored from shared/, and tests/data/sink-restarts, made
by tools/make_sink_restarts.py): the verdict on B's unstarted DataStreamWriter against A's
checkpoint never says restorable-and-safe where Spark refused B or the sink lost, duplicated or
changed rows, and says restorable where the sink ended up correct. Where the bad outcome comes
from a fact the checkpoint does not keep, the verdict from it alone is "restorable, not
verified", and with A's fingerprint "not safe".

The truth is what Spark did and what the sink held afterwards, read back as a consumer reads it
(each pair's ``truth``), never pytest-opid's own output. Each pair's folder is unpacked where
Spark wrote it (``unpack_at``: the checkpoint's source and sink logs hold absolute paths, which
are left as Spark wrote them), so the tests need a writable /srv/spark; one lock keeps two test
runs on one machine from unpacking into each other. No Spark job runs: B's writer is built and
fingerprinted only.

Outside tests/spark: it runs once, in the py311 (PySpark 4.3) environment; the pairs made on
PySpark 3.5 are judged for Spark 3.5 (``judged_for``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import linecache
import shutil
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).resolve().parent.parent / "data"
CORPORA = (DATA / "sources-sinks", DATA / "sink-restarts")
BAD = frozenset({"refused", "rows_lost", "rows_duplicated", "wrong"})
LOCK = Path("/srv/spark/.pytest-opid-corpus.lock")

#: Pairs whose verdict the judge still gets wrong, each with what it says instead: strict, so
#: a judge that gets one right fails here until the pair leaves this list.
KNOWN_WRONG: dict[str, str] = {}

#: Bad outcomes of a change the checkpoint does not keep (the source's format is kept: its
#: log names .json files): from the checkpoint alone "restorable, not verified", naming what
#: was not compared and how to have it compared; with the query that wrote it, not safe.
NOT_KEPT = (
    "fb_function_changed_folder",  # the foreachBatch function's code
    "src_column_renamed",  # the source's schema
    "src_maxfileage_late_file",  # its options
    "rate_rows_per_second_up",  # rate's rowsPerSecond
    "rate_rampup_added",  # rate's rampUpTime
    "proj_filter_added",  # the operators between the sources and the sink
    "proj_reordered_csv",
)


def _pairs() -> Iterator[Any]:
    for corpus in CORPORA:
        for line in (corpus / "cases.jsonl").read_text(encoding="utf-8").splitlines():
            case = json.loads(line)
            key = f"{corpus.name}/{case['id']}"
            marks = (
                [pytest.mark.xfail(strict=True, reason=KNOWN_WRONG[key])]
                if key in KNOWN_WRONG
                else []
            )
            yield pytest.param(corpus, case, id=key, marks=marks)


@pytest.fixture(scope="module")
def unpack_lock() -> Iterator[None]:
    """/srv/spark, held for this module: the pairs' folders go where Spark wrote them."""
    try:
        LOCK.parent.mkdir(parents=True, exist_ok=True)
        handle = LOCK.open("w")
    except OSError as exc:
        pytest.fail(
            f"the sink restart corpus unpacks under {LOCK.parent}, where its checkpoints' "
            f"absolute paths point: {exc}",
            pytrace=False,
        )
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


@contextlib.contextmanager
def unpacked(corpus: Path, case: dict[str, Any]) -> Iterator[None]:
    """The pair's folder as B found it, at ``unpack_at/<id>``, removed afterwards."""
    at = Path(case["unpack_at"])
    folder = at / case["id"]
    shutil.rmtree(folder, ignore_errors=True)
    at.mkdir(parents=True, exist_ok=True)
    with tarfile.open(corpus / case["data"]) as tar:
        tar.extractall(at, filter="data")
    try:
        yield
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def session_conf(spark: Any, conf: dict[str, str]) -> Iterator[None]:
    """The SQL settings the pair ran with (shuffle partitions, time zone), then the old ones."""
    keys = [k for k in conf if k.startswith("spark.sql.")]
    before = {k: spark.conf.get(k, None) for k in keys}
    for k in keys:
        spark.conf.set(k, conf[k])
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def writer_of(spark: Any, code: str, paths: dict[str, str]) -> Any:
    """B's ``build(spark, paths)`` (the corpus's own code): its DataStreamWriter, not started.
    Its source is registered in :mod:`linecache`, as a module's is found on disk, so that a
    foreachBatch function's writes are read from it."""
    name = f"<build {hashlib.sha256(code.encode()).hexdigest()[:12]}>"
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    scope: dict[str, Any] = {}
    exec(compile(code, name, "exec"), scope)
    return scope["build"](spark, paths)


def judged_checkpoint(case: dict[str, Any]) -> str:
    """The checkpoint B is judged against: A's (``ckpt``), or the slim copy of it made between
    the runs (``a_checkpoint_path_key``: ``slim``), as CI keeps one in the repository."""
    return str(case["paths_at_run"][case.get("a_checkpoint_path_key", "ckpt")])


def said(check: Any) -> str:
    if not check.restorable:
        return "not restorable: " + "; ".join(p.kind for p in check.problems)
    if check.reinterpreted:
        return "restorable, not safe: " + "; ".join(p.kind for p in check.reinterpreted)
    return "restorable and safe" + (
        " (unverified: " + "; ".join(p.kind for p in check.unverified) + ")"
        if check.unverified
        else ""
    )


@pytest.mark.spark_line("4.3", reason="the corpus's writers and checkpoints are judged by 4.3")
@pytest.mark.parametrize(("corpus", "case"), list(_pairs()))
def test_verdict_matches_what_spark_did(
    spark: Any, unpack_lock: None, corpus: Path, case: dict[str, Any]
) -> None:
    import pytest_opid
    from pytest_opid.spark import judged_for

    line = ".".join(case["spark_version"].split(".")[:2])
    paths = case["paths_at_run"]
    with unpacked(corpus, case), session_conf(spark, case["session_conf"]):
        writer = writer_of(spark, case["b_code"], paths)
        with judged_for(line):
            check = pytest_opid.check_restore(judged_checkpoint(case), writer)
    truth = case["truth"]
    where = f"{case['id']} ({case['description']}): Spark {case['spark_version']} {truth}"
    if truth in BAD:
        assert not check.safe, f"{where}, the verdict: {said(check)}"
    else:
        assert check.restorable, f"{where}, the verdict: {said(check)}"


@pytest.mark.spark_line("4.3", reason="the corpus's writers and checkpoints are judged by 4.3")
@pytest.mark.parametrize("pair_id", NOT_KEPT)
def test_what_the_checkpoint_does_not_keep_is_not_verified(
    spark: Any, unpack_lock: None, pair_id: str
) -> None:
    import pytest_opid

    corpus = DATA / "sink-restarts"
    cases = map(json.loads, (corpus / "cases.jsonl").read_text(encoding="utf-8").splitlines())
    case = next(c for c in cases if c["id"] == pair_id)
    assert case["truth"] in BAD and case["b_checkpoint"] == "same"
    paths = case["paths_at_run"]
    with unpacked(corpus, case), session_conf(spark, case["session_conf"]):
        writer = writer_of(spark, case["b_code"], paths)
        alone = pytest_opid.check_restore(paths["ckpt"], writer)
        previous = pytest_opid.fingerprint(writer_of(spark, case["a_code"], paths))
        judged = pytest_opid.check_restore(paths["ckpt"], writer, previous_fingerprint=previous)
    assert alone.restorable and alone.safe is None, said(alone)
    (item,) = [u for u in alone.unverified if u.kind == "endpoints"]
    for needed in ("opid record-deploy", "--previous-fingerprint", "Not kept in the checkpoint"):
        assert needed in item.message
    assert judged.safe is False and judged.reinterpreted, said(judged)


def _exit_code(check: Any) -> int:
    """``opid check-restore``'s exit code for a verdict (docs/cli.md)."""
    if not check.restorable:
        return 1
    return {True: 0, False: 1, None: 3}[check.safe]


@pytest.mark.spark_line("4.3", reason="the corpus's writers and checkpoints are judged by 4.3")
@pytest.mark.parametrize(("corpus", "case"), list(_pairs())[::3])  # a third: the API's are all
def test_the_cli_says_what_the_api_says(
    spark: Any,
    unpack_lock: None,
    corpus: Path,
    case: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``opid check-restore CKPT --spark MODULE:FUNCTION --conf ...`` on B's writer as a team
    has it in a module: the exit code the API's verdict maps to, never 0 for a bad outcome."""
    import pytest_opid
    from pytest_opid.cli import main
    from pytest_opid.spark import judged_for

    line = ".".join(case["spark_version"].split(".")[:2])
    paths = case["paths_at_run"]
    module = f"sink_job_{abs(hash(case['id']))}"
    (tmp_path / f"{module}.py").write_text(
        case["b_code"] + f"\n\ndef job(spark):\n    return build(spark, {paths!r})\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    conf = [
        arg
        for key, value in case["session_conf"].items()
        if key.startswith("spark.sql.")
        for arg in ("--conf", f"{key}={value}")
    ]
    with unpacked(corpus, case):
        argv = ["check-restore", judged_checkpoint(case), "--spark", f"{module}:job"]
        code = main([*argv, "--spark-version", line, *conf])
        capsys.readouterr()
        with session_conf(spark, case["session_conf"]), judged_for(line):
            writer = writer_of(spark, case["b_code"], paths)
            api = pytest_opid.check_restore(judged_checkpoint(case), writer)
    where = f"{case['id']}: Spark {case['spark_version']} {case['truth']}"
    assert code == _exit_code(api), f"{where}: the CLI exits {code}, the API says {said(api)}"
    assert code != 0 or case["truth"] not in BAD, where
