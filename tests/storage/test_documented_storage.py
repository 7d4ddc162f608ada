"""docs/checkpoints-where-they-live.md's commands, run as written (in a fresh folder, by the
installed ``opid``) against moto's S3 API on loopback holding a real Spark checkpoint and a real
Flink savepoint of tests/data at the URLs the page shows."""

from __future__ import annotations

import importlib.util
import os
import shlex
import subprocess
import tarfile
from pathlib import Path

import pytest

from tests.spark.test_readme_walkthrough import blocks
from tests.storage.samples import cases

_HERE = Path(__file__).resolve().parent
ROOT = _HERE.parents[1]
_spec = importlib.util.spec_from_file_location("s3_loopback_docs", _HERE / "s3_loopback.py")
assert _spec is not None and _spec.loader is not None
loopback = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(loopback)

PAGE = ROOT / "docs" / "checkpoints-where-they-live.md"


def test_the_pages_commands_run_as_written(tmp_path: Path) -> None:
    lines = [
        line
        for language, block in blocks(PAGE.read_text(encoding="utf-8"))
        if language == "bash"
        for line in block
        if line.strip()
    ]
    assert len(lines) == 4
    data = ROOT / "tests" / "data"
    with loopback.moto_s3() as (endpoint, _):
        s3 = loopback.client(endpoint)
        s3.create_bucket(Bucket="prod-checkpoints")
        tarball = sorted((data / "spark-restart" / "checkpoints").glob("*.tar.gz"))[0]
        with tarfile.open(tarball) as tar:
            tar.extractall(tmp_path / "spark", filter="data")
        loopback.upload(
            s3, "prod-checkpoints", tmp_path / "spark" / "checkpoint", "page_view_stats"
        )
        case = cases(data / "flink-restore" / "cases.jsonl.gz")[0]
        with tarfile.open(data / "flink-restore" / case["savepoint"]) as tar:
            tar.extractall(tmp_path / "flink", filter="data")
        loopback.upload(
            s3,
            "prod-checkpoints",
            tmp_path / "flink" / case["savepoint_root"],
            f"savepoints/{case['savepoint_root']}",
        )
        env = {**os.environ, **loopback.environment(endpoint)}
        work = tmp_path / "work"
        work.mkdir()
        for line in lines:
            done = subprocess.run(
                shlex.split(line), cwd=work, env=env, capture_output=True, text=True, timeout=120
            )
            assert done.returncode == 0, (line, done.stderr)
            assert loopback.SECRET not in done.stdout + done.stderr
            if "--verbose" in line:
                assert done.stderr.startswith("read from the store: ")
    assert (work / "tests" / "checkpoints" / "page_view_stats" / "metadata").is_file()


def test_the_savepoint_shown_is_the_one_uploaded() -> None:
    case = cases(ROOT / "tests/data/flink-restore/cases.jsonl.gz")[0]
    assert case["savepoint_root"] in PAGE.read_text(encoding="utf-8")


@pytest.mark.parametrize("name", ["checkpoints-where-they-live"])
def test_the_page_is_in_the_contents(name: str) -> None:
    assert name in (ROOT / "docs" / "contents.md").read_text(encoding="utf-8")
