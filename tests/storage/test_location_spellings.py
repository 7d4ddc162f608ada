"""One checkpoint location spelled another way by the writer: ``check_restore("s3://ckpts/q",
writer)`` where the writer's ``checkpointLocation`` is ``s3a://ckpts/q`` (the same objects, as
docs/checkpoints-where-they-live.md says), ``s3://ckpts//q``, ``S3://ckpts/q/``... is the
restart on that checkpoint, judged as such, on a real S3 API (moto's server on loopback) and on
real Spark 4.3 restarts of tests/data/spark-restart that Spark refused. Before, any spelling but
the judged one was "a new checkpoint location, empty state": no state check, and a key schema
change Spark refuses was restorable and safe (exit 0)."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import pytest_opid
from pytest_opid.cli import main
from pytest_opid.spark.checkpoint.read import read_checkpoint
from tests.spark.restart_cases import extract, load_cases, writer_after
from tests.storage.test_s3_urls import loopback

pytestmark = pytest.mark.spark_line("4.3", reason="the pairs' truth is Spark 4.3's restarts")

#: Spark refused B on A's checkpoint: a grouping key added to a window aggregation writing a
#: parquet file sink (STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE), an aggregate added to a noop one
#: (STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE).
REFUSED = (
    "window_agg__add_grouping_key__100018",
    "agg_user_sum__add_aggregate__100001",
)

#: How a team may spell s3://ckpts/<case> in its writer.
SPELLINGS = (
    "s3a://ckpts/{q}",
    "s3n://ckpts/{q}",
    "s3://ckpts//{q}",
    "s3://ckpts/./{q}",
    "S3://ckpts/{q}/",
    "s3a://AKIDSOMEONE:not-a-secret@ckpts/{q}",
)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("spellings")
    cases = load_cases()
    with loopback.moto_s3() as (endpoint, _counted):
        s3 = loopback.client(endpoint)
        s3.create_bucket(Bucket="ckpts")
        folders = {}
        for case_id in REFUSED:
            folder = extract(cases[case_id], root / "cases")
            loopback.upload(s3, "ckpts", folder / "checkpoint", case_id)
            folders[case_id] = (folder, cases[case_id])
        yield {"endpoint": endpoint, "cases": folders, "root": root}


@pytest.fixture
def env(store: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    for key, value in loopback.environment(store["endpoint"]).items():
        monkeypatch.setenv(key, value)
    return store


@pytest.mark.parametrize("case_id", REFUSED)
def test_a_writer_spelling_the_checkpoint_another_way_is_judged_on_its_state(
    spark: Any, env: dict[str, Any], case_id: str
) -> None:
    folder, rec = env["cases"][case_id]
    judged = f"s3://ckpts/{case_id}"
    same = pytest_opid.check_restore(judged, writer_after(spark, rec, folder, judged))
    assert not same.restorable, same.problems
    for spelling in SPELLINGS:
        location = spelling.format(q=case_id)
        check = pytest_opid.check_restore(judged, writer_after(spark, rec, folder, location))
        assert not check.restorable and check.safe is False, (location, check.to_dict())
        assert [p.kind for p in check.problems] == [p.kind for p in same.problems], location
        assert "new checkpoint location" not in check.resumes, location


def test_the_cli_judges_the_state_of_a_writer_on_s3a(
    spark: Any,
    env: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``opid check-restore s3://... --spark MODULE:FUNCTION`` whose writer names s3a://: exit
    1 with Spark's error, not 0."""
    case_id = REFUSED[0]
    folder, rec = env["cases"][case_id]
    jobs = env["root"] / "jobs"
    jobs.mkdir(exist_ok=True)
    sink = rec["sink_after"]
    (jobs / "spelled_job.py").write_text(
        rec["after_code"]
        + textwrap.dedent(
            f"""

            def job(spark):
                paths = {{k: {str(folder)!r} + "/" + k for k in ("in0", "in1", "in2", "out")}}
                return (build(spark, paths).writeStream.format({sink["format"]!r})
                        .outputMode({sink["output_mode"]!r}).option("path", paths["out"])
                        .option("checkpointLocation", "s3a://ckpts/{case_id}"))
            """
        ),
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(jobs))
    conf = [a for k, v in rec["session_conf_after"].items() for a in ("--conf", f"{k}={v}")]
    code = main(["check-restore", f"s3://ckpts/{case_id}", "--spark", "spelled_job:job", *conf])
    out, err = capsys.readouterr()
    assert (code, err) == (1, ""), out
    assert "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE" in out


def test_a_slim_copy_of_the_production_url_judges_the_writer_naming_it(
    spark: Any, env: dict[str, Any], tmp_path: Path
) -> None:
    """The documented CI flow: ``opid checkpoint --slim s3a://...`` into the repository, then
    the writer (which names the production URL, spelled as it likes) judged against the copy.
    The copy keeps where it came from, without the credentials the URL held."""
    from pytest_opid.spark.checkpoint.slim import slim_copy

    case_id = REFUSED[0]
    folder, rec = env["cases"][case_id]
    secret = "not-a-real-secret-7c1d"
    dest = tmp_path / "repo" / "checkpoints" / "q"
    slim_copy(f"s3a://{loopback.KEY_ID}:{secret}@ckpts/{case_id}", dest)
    kept = (dest / "_opid_slim.json").read_text("utf-8")
    assert secret not in kept and loopback.KEY_ID not in kept
    assert read_checkpoint(dest).copied_from == f"s3a://ckpts/{case_id}"
    for location in (f"s3a://ckpts/{case_id}", f"s3://ckpts/{case_id}/"):
        check = pytest_opid.check_restore(str(dest), writer_after(spark, rec, folder, location))
        assert not check.restorable, (location, check.to_dict())
        assert [p.kind for p in check.problems] == ["key_schema"], check.problems
