"""docs/pyspark-connect.md's example runs as written: its test module in a fresh project, its two
commands in a process of their own (the ``spark_connect`` fixture on a real local Connect
server), writing the snapshot the page names and then passing on it."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tests.spark.test_readme_walkthrough import blocks

pytest.importorskip("pyspark.sql.connect.session")

pytestmark = pytest.mark.spark_line("4.0", reason="Connect replay is Spark 4's")

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "pyspark-connect.md"


def _example() -> tuple[str, list[str]]:
    found = blocks(PAGE.read_text(encoding="utf-8"))
    code = next(lines for language, lines in found if language == "python")
    shell = [line for language, lines in found if language == "bash" for line in lines]
    return "\n".join(code), shell


def test_the_connect_example_runs_as_written(pytester: pytest.Pytester, monkeypatch):
    code, shell = _example()
    commands = [re.split(r"\s+#\s", line, maxsplit=1)[0].strip() for line in shell]
    assert commands == [
        "pytest --snapshot-update test_connect_jobs.py",
        "pytest test_connect_jobs.py",
    ]
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    pytester.makepyfile(test_connect_jobs=code)
    written = re.search(r"writes (__snapshots__/\S+\.opid)", shell[0])
    assert written is not None
    update = pytester.runpytest_subprocess("-p", "no:cacheprovider", *shlex.split(commands[0])[1:])
    update.assert_outcomes(passed=1)
    snapshot = pytester.path / written.group(1)
    text = snapshot.read_text(encoding="utf-8")
    assert "stateStoreSave" in text
    again = pytester.runpytest_subprocess("-p", "no:cacheprovider", *shlex.split(commands[1])[1:])
    again.assert_outcomes(passed=1)
    assert snapshot.read_text(encoding="utf-8") == text
