"""``opid demonstrate --spark A --spark B``: the example of docs/pyspark-demonstrate.md run as
written (in this process: the command reuses the test session's Spark), and its usage errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_opid.cli import main

pytestmark = pytest.mark.spark_line("4.3", reason="one line is enough: the engine is Spark's own")

ROOT = Path(__file__).resolve().parents[2]
A = "examples.spark.sessions:thirty_minutes"
B = "examples.spark.sessions:ten_minutes"


def test_the_documented_example_differs(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)
    args = ["demonstrate", "--spark", A, "--spark", B, "--seed", "41", "--examples", "8", "--json"]
    code = main([*args, "--", str(tmp_path / "events")])
    out = json.loads(capsys.readouterr().out)
    assert (code, out["outcome"]) == (1, "differs")
    assert out["only_restarted"] or out["only_scratch"]
    assert out["seed"] == 41


def test_two_queries_are_needed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demonstrate", "--spark", A]) == 2
    assert "give --spark twice" in capsys.readouterr().err


def test_sigterm_cleans_up_as_ctrl_c_does(tmp_path: Path) -> None:
    """Issue 48, item 5: a CI timeout's SIGTERM left ``opid-demonstrate-*`` (the temporary
    checkpoints and source folders) in the temporary folder; Ctrl-C removed it. Now both
    unwind the command: one line, exit 2, nothing left."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp)}
    args = ["demonstrate", "--spark", A, "--spark", B, "--seed", "41", "--examples", "50"]
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest_opid", *args, "--", str(tmp_path / "events")],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while not list(temp.glob("opid-demonstrate-*")) and process.poll() is None:
            time.sleep(0.2)  # Spark starts, then the demonstration makes its folder
        assert process.poll() is None, process.communicate()
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=600)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert (process.returncode, out) == (2, "")
    assert err.splitlines()[-1] == "error: terminated (SIGTERM)", err[-2000:]
    assert "Traceback" not in err
    assert list(temp.glob("opid-demonstrate-*")) == []
