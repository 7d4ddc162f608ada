"""Checkpoints and savepoints read where they live: real Spark checkpoints and Flink savepoints
of tests/data uploaded to moto's S3 API on loopback (started here, on a free port), read from
``s3://`` and ``s3a://`` URLs by the commands and the API, and compared with the same data read
locally; the failures a store has (no bucket, wrong credentials, no answer, a file deleted
meanwhile) as one line and exit 2; the secret in no output. A sample of the corpus: the whole
of it is benchmarks/bench_storage.py's (docs/benchmarks.md has its figures)."""

from __future__ import annotations

import importlib.util
import json
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_opid.errors import DocumentError
from pytest_opid.io.storage import StorageError, locate
from pytest_opid.restore import check_restore
from pytest_opid.spark import read_checkpoint
from tests.storage.samples import DATA, SPARK_SAMPLE, cases, run_cli, tarballs

_HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("s3_loopback", _HERE / "s3_loopback.py")
assert _spec is not None and _spec.loader is not None
loopback = importlib.util.module_from_spec(_spec)
sys.modules["s3_loopback"] = loopback
_spec.loader.exec_module(loopback)

FLINK_SAMPLE = [0, 79]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The loopback S3 with the sample uploaded: local folders and their keys."""
    root = tmp_path_factory.mktemp("local")
    with loopback.moto_s3() as (endpoint, counted):
        s3 = loopback.client(endpoint)
        s3.create_bucket(Bucket="ckpts")
        spark: list[tuple[Path, str]] = []
        for data_set, folder, index in SPARK_SAMPLE:
            tarball = tarballs(data_set, folder)[index]
            name = f"{data_set}-{tarball.name.removesuffix('.tar.gz')}"
            with tarfile.open(tarball) as tar:
                tar.extractall(root / name, filter="data")
            local = root / name / "checkpoint"
            loopback.upload(s3, "ckpts", local, f"spark/{name}")
            spark.append((local, f"ckpts/spark/{name}"))
        flink_cases = cases(DATA / "flink-restore" / "cases.jsonl.gz")
        flink: list[tuple[Path, str, dict[str, Any]]] = []
        for index in FLINK_SAMPLE:
            case = flink_cases[index]
            seed = case["case"]["seed"]
            with tarfile.open(DATA / "flink-restore" / case["savepoint"]) as tar:
                tar.extractall(root / f"flink-{seed}", filter="data")
            local = root / f"flink-{seed}" / case["savepoint_root"]
            loopback.upload(s3, "ckpts", local, f"flink/{seed}")
            flink.append((local, f"ckpts/flink/{seed}", case["after"]))
        yield {
            "endpoint": endpoint,
            "counted": counted,
            "s3": s3,
            "spark": spark,
            "flink": flink,
            "root": root,
        }


@pytest.fixture
def env(store: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    for key, value in loopback.environment(store["endpoint"]).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("OPID_STORAGE_TIMEOUT", "60")
    return store


def _without(text: str, *places: str) -> str:
    for place in places:
        text = text.replace(place, "<location>")
    return text


@pytest.mark.parametrize("scheme", ["s3", "s3a"])
def test_spark_checkpoints_read_from_the_store_as_locally(env, capsys, scheme) -> None:
    for i, (local, key) in enumerate(env["spark"] if scheme == "s3" else env["spark"][2:3]):
        url = f"{scheme}://{key}"
        for extra in ([], ["--json"]) if i == 0 else (["--json"],):
            here = run_cli(capsys, "checkpoint", str(local), *extra)
            there = run_cli(capsys, "checkpoint", url, *extra)
            assert here[0] == there[0] == 0, there[2]
            assert _without(there[1], url) == _without(here[1], str(local)), url
        assert read_checkpoint(url).path == url


def test_flink_savepoints_and_verdicts_from_the_store_as_locally(env, capsys, tmp_path) -> None:
    for local, key, after in env["flink"]:
        url = f"s3://{key}"
        here = run_cli(capsys, "savepoint", str(local), "--json")
        there = run_cli(capsys, "savepoint", url, "--json")
        assert here[0] == there[0] == 0, there[2]
        assert _without(there[1], url) == _without(here[1], str(local))
        program = tmp_path / "after.json"
        program.write_text(json.dumps(after))
        verdicts = [run_cli(capsys, "check-restore", p, str(program)) for p in (str(local), url)]
        assert verdicts[0][0] == verdicts[1][0]
        assert _without(verdicts[1][1], url) == _without(verdicts[0][1], str(local))
        assert check_restore(url, after) == check_restore(local, after)
    # a saved input kept in the store (what --previous-fingerprint and fingerprint read)
    env["s3"].put_object(Bucket="ckpts", Key="after.json", Body=program.read_bytes())
    here = run_cli(capsys, "fingerprint", str(program), "--json")
    there = run_cli(capsys, "fingerprint", "s3://ckpts/after.json", "--json")
    assert here == there and here[0] == 0


def test_requests_and_bytes_are_counted_and_shown(env, capsys) -> None:
    _local, key = env["spark"][0]
    env["counted"].reset()
    code, _, err = run_cli(capsys, "checkpoint", f"s3://{key}", "--verbose")
    assert code == 0
    served = env["counted"].requests
    assert 0 < served <= 40
    said = err.strip().removeprefix("read from the store: ").split()
    assert int(said[0]) <= served  # our count: one per call; the server's: every page too
    assert int(said[2]) > 0


def test_slim_copy_from_the_store_is_the_local_one(env, capsys, tmp_path) -> None:
    local, key = env["spark"][1]
    assert run_cli(capsys, "checkpoint", "--slim", str(local), str(tmp_path / "a"))[0] == 0
    code, _out, err = run_cli(capsys, "checkpoint", "--slim", f"s3a://{key}", str(tmp_path / "b"))
    assert code == 0, err
    files = {p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*")}
    assert files == {p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*")}
    for rel in files:
        if (tmp_path / "a" / rel).is_file() and rel.name != "_opid_slim.json":
            assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes()
    # each copy knows where it was copied from
    assert read_checkpoint(tmp_path / "a").copied_from == str(local)
    assert read_checkpoint(tmp_path / "b").copied_from == f"s3a://{key}"


def _one_line_exit_2(capsys, *argv: str, within: float = 30.0) -> str:
    started = time.monotonic()
    code, out, err = run_cli(capsys, *argv)
    assert time.monotonic() - started < within
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith("error: ")
    return err


def test_missing_bucket(env, capsys) -> None:
    err = _one_line_exit_2(capsys, "checkpoint", "s3://no-such-bucket/q")
    assert "s3://no-such-bucket/q: no such bucket" in err


def test_missing_folder(env, capsys, tmp_path) -> None:
    program = tmp_path / "after.json"
    program.write_text(json.dumps(env["flink"][0][2]))
    err = _one_line_exit_2(capsys, "check-restore", "s3://ckpts/nothing-here", str(program))
    assert "s3://ckpts/nothing-here" in err


def test_wrong_credentials(capsys, monkeypatch) -> None:
    with loopback.moto_s3(check_credentials=True) as (endpoint, _):
        for key, value in loopback.environment(endpoint).items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-value")
        err = _one_line_exit_2(capsys, "checkpoint", "s3://ckpts/q")
    assert "access denied" in err
    assert "wrong-secret-value" not in err


def test_a_store_that_never_answers(capsys, monkeypatch) -> None:
    with loopback.hung_server() as endpoint:
        for key, value in loopback.environment(endpoint).items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("OPID_STORAGE_TIMEOUT", "2")
        err = _one_line_exit_2(capsys, "savepoint", "s3://ckpts/flink/1000", within=20)
    assert "did not answer in 2 s" in err


def test_a_file_deleted_between_listing_and_reading(env) -> None:
    _local, key = env["spark"][2]
    s3 = env["s3"]
    s3.copy_object(Bucket="ckpts", Key="gone/metadata", CopySource=f"{key}/metadata")
    for name in ("offsets", "commits"):
        for obj in s3.list_objects_v2(Bucket="ckpts", Prefix=f"{key.partition('/')[2]}/{name}/")[
            "Contents"
        ]:
            rel = obj["Key"].split("/", 2)[2]
            s3.copy_object(Bucket="ckpts", Key=f"gone/{rel}", CopySource=f"ckpts/{obj['Key']}")
    where = locate("s3://ckpts/gone")
    where.child("offsets").list()  # listed: then the latest entry goes
    latest = max(int(n) for n in where.child("offsets").list() if n.isdigit())
    s3.delete_object(Bucket="ckpts", Key=f"gone/offsets/{latest}")
    with pytest.raises(DocumentError) as caught:
        read_checkpoint(where)
    assert str(caught.value) == (
        f"s3://ckpts/gone/offsets/{latest}: deleted since its folder was listed; read it again"
    )


def test_no_secret_in_any_output(env, capsys, tmp_path, monkeypatch) -> None:
    secret = loopback.SECRET
    _local, key = env["spark"][0]
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    url = f"s3://{loopback.KEY_ID}:{secret}@{key}"
    outputs = [
        run_cli(capsys, "checkpoint", url, "--json", "--verbose"),
        run_cli(capsys, "checkpoint", url),
        run_cli(capsys, "checkpoint", "--slim", url, str(tmp_path / "slim")),
        run_cli(capsys, "checkpoint", f"s3://{loopback.KEY_ID}:{secret}@no-bucket/q"),
        run_cli(capsys, "savepoint", url),
    ]
    assert [o[0] for o in outputs] == [0, 0, 0, 2, 2]
    assert "s3://***@" in outputs[0][1]
    for _code, out, err in outputs:
        assert secret not in out and secret not in err
    for path in (tmp_path / "slim").rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes()
    with pytest.raises(StorageError) as caught:
        locate(f"s3://{loopback.KEY_ID}:{secret}@no-bucket/q").list()
    assert secret not in str(caught.value)
