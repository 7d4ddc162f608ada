"""``opid demonstrate --spark A --spark B``: the example of docs/pyspark-demonstrate.md run as
written (in this process: the command reuses the test session's Spark), and its usage errors."""

from __future__ import annotations

import json
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
