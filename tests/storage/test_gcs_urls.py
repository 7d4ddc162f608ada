"""Checkpoints and savepoints read from ``gs://`` (and ``gcs://``) URLs against a Google Cloud
Storage API on loopback: gcp-storage-emulator (PyPI; the JSON API gcsfs speaks), started here
in a child process on a free port, reached the way a user reaches an emulator
(``STORAGE_EMULATOR_HOST``, which gcsfs reads). Readings and a Flink verdict equal the local
ones (text aside from the location, exit codes equal).

gcsfs asks a real bucket over gRPC whether it has a hierarchical namespace; the emulator has no
gRPC API (each probe would wait 60 s), so the tests turn that probe off as gcsfs documents
(``GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false``)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_opid.restore import check_restore
from tests.storage.samples import DATA, SPARK_SAMPLE, cases, run_cli, same_as_local, tarballs


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The emulator with a Spark checkpoint and a Flink savepoint of tests/data uploaded."""
    root = tmp_path_factory.mktemp("gcs")
    port = _free_port()
    child = subprocess.Popen(
        [sys.executable, "-m", "gcp_storage_emulator", "start", "--host", "127.0.0.1",
         "--port", str(port), "--in-memory"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    patch = pytest.MonkeyPatch()
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                assert child.poll() is None and time.monotonic() < deadline, "no emulator"
                time.sleep(0.1)
        endpoint = f"http://127.0.0.1:{port}"
        env = {"STORAGE_EMULATOR_HOST": endpoint, "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}
        for key, value in env.items():
            patch.setenv(key, value)
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        bucket = storage.Client(credentials=AnonymousCredentials(), project="t").create_bucket(
            "ckpts"
        )
        data_set, folder, index = SPARK_SAMPLE[2]
        with tarfile.open(tarballs(data_set, folder)[index]) as tar:
            tar.extractall(root / "spark", filter="data")
        case = cases(DATA / "flink-restore" / "cases.jsonl.gz")[0]
        with tarfile.open(DATA / "flink-restore" / case["savepoint"]) as tar:
            tar.extractall(root / "flink", filter="data")
        uploads = {
            "spark/q": root / "spark" / "checkpoint",
            "flink/0": root / "flink" / case["savepoint_root"],
        }
        for prefix, local in uploads.items():
            for path in sorted(local.rglob("*")):
                rel = path.relative_to(local).as_posix()
                if path.is_file():
                    bucket.blob(f"{prefix}/{rel}").upload_from_filename(str(path))
                elif not any(path.iterdir()):  # the placeholder the GCS connector writes
                    bucket.blob(f"{prefix}/{rel}/").upload_from_string(b"")
        yield {"spark": uploads["spark/q"], "flink": (uploads["flink/0"], case["after"])}
    finally:
        patch.undo()
        child.terminate()
        child.wait(10)


def test_spark_checkpoint_read_from_gcs_as_locally(store, capsys) -> None:
    local = store["spark"]
    for extra in ([], ["--json"]):
        here = run_cli(capsys, "checkpoint", str(local), *extra)
        assert here[0] == 0
        for url in ("gs://ckpts/spark/q", "gcs://ckpts/spark/q"):
            same_as_local(here, run_cli(capsys, "checkpoint", url, *extra), local, url)


def test_flink_savepoint_and_verdict_from_gcs_as_locally(store, capsys, tmp_path) -> None:
    local, after = store["flink"]
    url = "gs://ckpts/flink/0"
    program = tmp_path / "after.json"
    program.write_text(json.dumps(after))
    for argv in (("savepoint", "--json"), ("check-restore", str(program))):
        here = run_cli(capsys, argv[0], str(local), *argv[1:])
        same_as_local(here, run_cli(capsys, argv[0], url, *argv[1:]), local, url)
    assert check_restore(url, after) == check_restore(local, after)


def test_a_missing_bucket_is_one_line(store, capsys) -> None:
    code, out, err = run_cli(capsys, "checkpoint", "gs://no-such-bucket/q")
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert err.startswith("error: gs://no-such-bucket/q: ")
