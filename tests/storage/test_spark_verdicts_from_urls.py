"""Spark restart verdicts on a checkpoint in a store: ``pytest_opid.check_restore(URL, live)``
with query B planned in this session (a DataFrame and a DataStreamWriter) and ``opid
check-restore URL --spark MODULE:FUNCTION`` give the verdict the local checkpoint gets (JSON
and text, the location aside; exit codes equal), from ``s3://`` and ``s3a://`` alike, on real
Spark 4.3 restarts of tests/data/spark-restart: one judged safe, one Spark refused, one
restarted under another meaning, one whose meaning is not verified; and with the deploy record
(``opid record-deploy``) written to the store and read back from it. A sample:
``python benchmarks/bench_storage.py --verdicts`` judges all 66 pairs (docs/benchmarks.md)."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import pytest_opid
from pytest_opid.cli import main
from pytest_opid.spark.deployed import RECORD_NAME
from tests.spark.restart_cases import build, extract, load_cases, paths
from tests.storage.test_s3_urls import loopback

pytestmark = pytest.mark.spark_line("4.3", reason="the pairs' truth is Spark 4.3's restarts")

#: case -> (what the local verdict is, its exit code); the kind follows what Spark did
#: (tests/data/spark-restart: restarted, or the error it refused with).
CASES = {
    "dedup_watermark__remove_watermark__100028": ("safe", 0),
    "agg_user_sum__add_aggregate__100001": ("refused", 1),
    "agg_int_key__count_to_sum_v__100012": ("reinterpreted", 1),
    "agg_user_sum__add_projection_downstream__100000": ("unverified", 3),
    # a windowed state: its rows, sampled by Spark's reader from the store, show the change
    "window_agg__tumbling_to_sliding_window__100016": ("reinterpreted", 1),
}
RECORDED = "agg_user_sum__add_projection_downstream__100000"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """moto's S3 with the pairs' checkpoints uploaded; each case's folder and job module."""
    root = tmp_path_factory.mktemp("verdicts")
    jobs = root / "jobs"
    jobs.mkdir()
    cases = load_cases()
    with loopback.moto_s3() as (endpoint, _counted):
        s3 = loopback.client(endpoint)
        s3.create_bucket(Bucket="ckpts")
        folders = {}
        for n, case_id in enumerate(CASES):
            rec = cases[case_id]
            folder = extract(rec, root / "cases")
            loopback.upload(s3, "ckpts", folder / "checkpoint", case_id)
            for which in ("before", "after"):
                (jobs / f"{which}{n}.py").write_text(_module(rec[f"{which}_code"]))
            folders[case_id] = (folder, n, rec)
        yield {"endpoint": endpoint, "s3": s3, "jobs": jobs, "cases": folders}


def _module(code: str) -> str:
    """A query's code as a team's module: ``job(spark, root)`` returns the query."""
    keys = list(paths(Path("x")))
    return code + textwrap.dedent(
        f"""

        def job(spark, root):
            return build(spark, {{key: root + "/" + key for key in {keys!r}}})
        """
    )


@pytest.fixture
def env(store: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    for key, value in loopback.environment(store["endpoint"]).items():
        monkeypatch.setenv(key, value)
    monkeypatch.syspath_prepend(str(store["jobs"]))
    return store


def _exit(check: Any) -> int:
    """``opid check-restore``'s exit status for a verdict (docs/cli.md)."""
    return 0 if check.safe is True else 3 if check.safe is None else 1


def _kind(check: Any) -> str:
    if not check.restorable:
        return "refused"
    if check.reinterpreted:
        return "reinterpreted"
    return "safe" if check.safe else "unverified"


def _api(spark: Any, rec: dict[str, Any], folder: Path, where: str, writer: bool) -> Any:
    df = build(spark, rec, "after", folder)
    if not writer:
        return pytest_opid.check_restore(where, df)
    sink = rec["sink_after"]  # the writer as the data set's B was started
    program = (
        df.writeStream.format(sink["format"])
        .outputMode(sink["output_mode"])
        .option("checkpointLocation", where)
    )
    if sink["path_key"]:
        program = program.option("path", str(folder / sink["path_key"]))
    return pytest_opid.check_restore(where, program)


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert err == "", err
    return code, out


def _conf(rec: dict[str, Any]) -> list[str]:
    return [a for k, v in rec["session_conf_after"].items() for a in ("--conf", f"{k}={v}")]


@pytest.mark.parametrize("case_id", list(CASES))
def test_the_verdict_from_the_store_is_the_local_one(spark, env, capsys, case_id) -> None:
    """s3://: the API on a DataFrame, the CLI's JSON; s3a://: the API on a DataStreamWriter
    (its checkpointLocation the URL), the CLI's text; each against the same local route."""
    folder, n, rec = env["cases"][case_id]
    local = str(folder / "checkpoint")
    kind, code = CASES[case_id]
    job = ("--spark", f"after{n}:job", *_conf(rec), "--", str(folder))
    for scheme, writer, flag in (("s3", False, ("--json",)), ("s3a", True, ())):
        url = f"{scheme}://ckpts/{case_id}"
        here = _api(spark, rec, folder, local, writer)
        if not writer:  # the writer's sink is judged too: its verdict may say more
            assert (_kind(here), _exit(here)) == (kind, code)
        there = _api(spark, rec, folder, url, writer)
        assert _exit(there) == _exit(here)
        assert json.dumps(there.to_dict()).replace(url, local) == json.dumps(here.to_dict())
        cli_here = _cli(capsys, "check-restore", *flag, local, *job)
        cli_there = _cli(capsys, "check-restore", *flag, url, *job)
        assert cli_here[0] == cli_there[0] == code
        assert cli_there[1].replace(url, local) == cli_here[1]


def test_the_deploy_record_is_written_to_and_read_from_the_store(spark, env, capsys) -> None:
    folder, n, rec = env["cases"][RECORDED]
    local = str(folder / "checkpoint")
    url = f"s3a://ckpts/{RECORDED}"
    unrecorded = _cli(capsys, "check-restore", "--json", url, "--spark", f"after{n}:job",
                      *_conf(rec), "--", str(folder))  # fmt: skip
    assert unrecorded[0] == 3
    for where in (local, url):
        code, said = _cli(capsys, "record-deploy", where, "--spark", f"before{n}:job", "--",
                          str(folder))  # fmt: skip
        assert code == 0 and said == f"recorded: {where}/{RECORD_NAME}\n"
    kept = env["s3"].get_object(Bucket="ckpts", Key=f"{RECORDED}/{RECORD_NAME}")["Body"].read()
    assert json.loads(kept) == json.loads((folder / "checkpoint" / RECORD_NAME).read_bytes())
    here = _cli(capsys, "check-restore", "--json", local, "--spark", f"after{n}:job",
                *_conf(rec), "--", str(folder))  # fmt: skip
    for scheme in ("s3", "s3a"):
        there_url = f"{scheme}://ckpts/{RECORDED}"
        there = _cli(capsys, "check-restore", "--json", there_url, "--spark", f"after{n}:job",
                     *_conf(rec), "--", str(folder))  # fmt: skip
        assert there[0] == here[0]
        assert there[1].replace(there_url, local) == here[1]
        api = pytest_opid.check_restore(there_url, build(spark, rec, "after", folder))
        assert _exit(api) == here[0]
    verdict = json.loads(here[1])
    assert any(RECORD_NAME in line for line in verdict["verified"]), verdict["verified"]
    assert here[0] != unrecorded[0] or verdict != json.loads(unrecorded[1])
