"""docs/pyspark-connect.md's example runs as written: its test module in a fresh project, its two
commands in a process of their own (the ``spark_connect`` fixture on a real local Connect
server), writing the snapshot the page names and then passing on it."""

from __future__ import annotations

import os
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


@pytest.mark.spark_line("4.3", reason="one run is enough: a JVM of its own, about a minute")
def test_the_server_next_to_a_classic_session_prints_what_the_page_shows(tmp_path: Path):
    """The page's second Python block, a script, in a process of its own: the fingerprint of the
    Connect DataFrame equals the classic one's, and the two refusals are PySpark's own."""
    import subprocess
    import sys

    found = blocks(PAGE.read_text(encoding="utf-8"))
    scripts = [lines for language, lines in found if language == "python"]
    shown = [lines for language, lines in found if language == "text"]
    assert len(scripts) >= 2 and shown
    script = tmp_path / "remote_next_to_classic.py"
    script.write_text("\n".join(scripts[1]) + "\n", encoding="utf-8")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")
    }
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == [line for line in shown[0] if line.strip()]
