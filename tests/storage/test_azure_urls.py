"""Checkpoints and savepoints read from Azure storage URLs as Spark spells them
(``abfss://container@account.dfs.core.windows.net/path``, ``abfs://``, and ``az://container/path``)
against Azurite, Microsoft's emulator from npm, started here on a free loopback port (its Blob
API: Azurite serves no dfs endpoint, and adlfs reads ADLS through the Blob API). The account is
reached through the connection string a user sets (``AZURE_STORAGE_CONNECTION_STRING``), or a
SAS token in the URL, which appears in no output and no slim copy. Readings and verdicts equal
the local ones (text aside from the location, exit codes equal)."""

from __future__ import annotations

import datetime
import json
import tarfile
import time
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_opid.restore import check_restore
from pytest_opid.spark.checkpoint.read import read_checkpoint
from tests.storage import azurite
from tests.storage.samples import DATA, SPARK_SAMPLE, cases, run_cli, same_as_local, tarballs

HOST = f"{azurite.ACCOUNT}.dfs.core.windows.net"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Azurite with two Spark checkpoints and a Flink savepoint of tests/data uploaded."""
    reason = azurite.missing_node()
    if reason:
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("azure")
    with azurite.azurite(root) as endpoint:
        service = azurite.client(endpoint)
        service.create_container("ckpts")
        spark = []
        for data_set, folder, index in (SPARK_SAMPLE[0], SPARK_SAMPLE[2]):
            tarball = tarballs(data_set, folder)[index]
            name = f"{data_set}-{tarball.name.removesuffix('.tar.gz')}"
            with tarfile.open(tarball) as tar:
                tar.extractall(root / name, filter="data")
            local = root / name / "checkpoint"
            azurite.upload(service, "ckpts", local, f"spark/{name}")
            spark.append((local, f"spark/{name}"))
        case = cases(DATA / "flink-restore" / "cases.jsonl.gz")[79]
        with tarfile.open(DATA / "flink-restore" / case["savepoint"]) as tar:
            tar.extractall(root / "flink", filter="data")
        local = root / "flink" / case["savepoint_root"]
        azurite.upload(service, "ckpts", local, "flink/79")
        yield {
            "endpoint": endpoint,
            "service": service,
            "spark": spark,
            "flink": (local, "flink/79", case["after"]),
        }


@pytest.fixture
def env(store: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    for key, value in azurite.environment(store["endpoint"]).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("OPID_STORAGE_TIMEOUT", "60")
    return store


def _urls(key: str) -> list[str]:
    return [f"abfss://ckpts@{HOST}/{key}", f"abfs://ckpts@{HOST}/{key}", f"az://ckpts/{key}"]


def test_spark_checkpoints_read_from_azure_as_locally(env, capsys) -> None:
    for local, key in env["spark"]:
        here = run_cli(capsys, "checkpoint", str(local), "--json")
        assert here[0] == 0
        for url in _urls(key):
            same_as_local(here, run_cli(capsys, "checkpoint", url, "--json"), local, url)


def test_flink_savepoint_and_verdict_from_azure_as_locally(env, capsys, tmp_path) -> None:
    local, key, after = env["flink"]
    program = tmp_path / "after.json"
    program.write_text(json.dumps(after))
    url = _urls(key)[0]
    same_as_local(
        run_cli(capsys, "savepoint", str(local), "--json"),
        run_cli(capsys, "savepoint", url, "--json"),
        local,
        url,
    )
    same_as_local(
        run_cli(capsys, "check-restore", str(local), str(program)),
        run_cli(capsys, "check-restore", url, str(program)),
        local,
        url,
    )
    assert check_restore(url, after) == check_restore(local, after)


def test_another_accounts_connection_string_is_refused(env, capsys) -> None:
    _local, key = env["spark"][0]
    code, out, err = run_cli(
        capsys, "checkpoint", f"abfss://ckpts@other.dfs.core.windows.net/{key}"
    )
    assert (code, out) == (2, "")
    assert "the account is other" in err and err.count("\n") == 1


def _sas(days: float = 1.0) -> str:
    from azure.storage.blob import ContainerSasPermissions, generate_container_sas

    return generate_container_sas(
        azurite.ACCOUNT,
        "ckpts",
        account_key=azurite.KEY,
        permission=ContainerSasPermissions(read=True, list=True),
        expiry=datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=days),
    )


def test_a_sas_token_in_the_url_reads_and_is_in_no_output(
    store, capsys, tmp_path, monkeypatch
) -> None:
    # the endpoint only, no key: the URL's token is the one credential
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", f"BlobEndpoint={store['endpoint']};")
    token = _sas()
    sig = next(p[4:] for p in token.split("&") if p.startswith("sig="))
    local, key = store["spark"][0]
    bare = _urls(key)[0]
    url = f"{bare}?{token}"
    slim = tmp_path / "slim"
    outputs = [
        run_cli(capsys, "checkpoint", url, "--json", "--verbose"),
        run_cli(capsys, "checkpoint", url),
        run_cli(capsys, "checkpoint", "--slim", url, str(slim)),
        run_cli(capsys, "checkpoint", f"{_urls('spark/none')[0]}?{token}"),
        run_cli(capsys, "savepoint", url),
    ]
    assert [o[0] for o in outputs] == [0, 0, 0, 2, 2]
    here = run_cli(capsys, "checkpoint", str(local), "--json")
    same_as_local(here, (*outputs[0][:2], ""), local, bare)
    flink_local, flink_key, after = store["flink"]
    program = tmp_path / "after.json"
    program.write_text(json.dumps(after))
    flink_url = _urls(flink_key)[0]
    verdict = run_cli(capsys, "check-restore", f"{flink_url}?{token}", str(program))
    here = run_cli(capsys, "check-restore", str(flink_local), str(program))
    same_as_local(here, verdict, flink_local, flink_url)
    outputs.append(verdict)
    # a token the account did not sign: refused by the store, one line, the token unsaid
    forged = token.replace(sig, "A" * (len(sig) - 3) + "%3D")
    denied = run_cli(capsys, "checkpoint", f"{bare}?{forged}")
    assert denied[0] == 2 and denied[2].count("\n") == 1
    outputs.append(denied)
    for _code, out, err in outputs:
        for secret in (token, sig, "A" * (len(sig) - 3)):
            assert secret not in out and secret not in err
    copied = [p for p in slim.rglob("*") if p.is_file()]
    assert copied
    # the copy knows the URL it was copied from, without its token
    assert read_checkpoint(slim).copied_from == bare
    for path in copied:
        assert sig.encode() not in path.read_bytes()


def test_a_query_other_than_a_sas_token_is_refused(env, capsys) -> None:
    _local, key = env["spark"][0]
    code, out, err = run_cli(capsys, "checkpoint", f"{_urls(key)[0]}?versionid=3")
    assert (code, out) == (2, "") and "a query or fragment in a URL is not read" in err
    code, out, err = run_cli(capsys, "checkpoint", f"s3://ckpts/{key}?sv=1&sig=abcd")
    assert (code, out) == (2, "") and "abcd" not in err


def test_a_sas_token_is_in_no_snapshot_or_test_report(store, pytester, monkeypatch) -> None:
    """The marker's ``previous=`` and the fixture's ``check_restore(previous=...)`` with the
    token in the URL: the same outcomes as from the local savepoint, the token in no file the
    run writes (snapshots) and nowhere in its report."""
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", f"BlobEndpoint={store['endpoint']};")
    token = _sas()
    sig = next(p[4:] for p in token.split("&") if p.startswith("sig="))
    local, key, after = store["flink"]
    (pytester.path / "job_b.json").write_text(json.dumps(after))
    outcomes = []
    for previous in (str(local), f"{_urls(key)[0]}?{token}"):
        pytester.makepyfile(
            test_job=f"""
import pytest

@pytest.mark.stable_topology(previous={previous!r})
def test_marker(opid):
    opid.record("job_b.json")

def test_fixture(opid):
    opid.check_restore("job_b.json", previous={previous!r})
"""
        )
        result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--snapshot-update")
        outcomes.append(result.parseoutcomes())
        report = "\n".join(result.outlines + result.errlines)
        assert sig not in report and token not in report
    assert outcomes[0] == outcomes[1]
    # the test module holds the URL as its author wrote it, and so does its bytecode
    written = [
        p
        for p in pytester.path.rglob("*")
        if p.is_file() and p.name != "test_job.py" and "__pycache__" not in p.parts
    ]
    assert any("__snapshots__" in p.parts for p in written)
    for path in written:
        assert sig.encode() not in path.read_bytes(), path


def test_an_azure_store_that_never_answers(capsys, monkeypatch) -> None:
    from tests.storage.test_s3_urls import loopback

    with loopback.hung_server() as endpoint:
        monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite.connection_string(
            f"{endpoint}/{azurite.ACCOUNT}"))  # fmt: skip
        monkeypatch.setenv("OPID_STORAGE_TIMEOUT", "2")
        started = time.monotonic()
        code, out, err = run_cli(capsys, "checkpoint", f"abfss://ckpts@{HOST}/q")
    assert time.monotonic() - started < 20
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert "did not answer in 2 s" in err and azurite.KEY not in err
