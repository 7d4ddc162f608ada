"""Every command the README and docs/ show is accounted for (issue 32): run here, with what the
page shows it printing; run by the test or tox environment named; or listed as not run, with
the reason. A new command on a page fails ``test_every_command_is_accounted_for`` until it is
given one of those.

The task pages' tests (docs/protect-in-ci.md, docs/flink.md) run here too: their test module is
written into a fresh project and ``pytest --snapshot-update`` then ``pytest`` run on it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.spark.test_readme_walkthrough import blocks

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: Commands this module runs from the clone's folder, checking the output the page shows.
HERE = "run here"
#: Where the other commands run, or why they do not.
ELSEWHERE = {
    "git clone <this repository> pytest-opid && cd pytest-opid": "not run: CI's own fresh clone",
    "python -m venv .venv && . .venv/bin/activate": "tox -e wheel (tools/wheel_check.py)",
    'pip install -e ".[pytest,spark]" && pytest examples': "tox -e wheel (tools/wheel_check.py)",
    "pip install tox && tox": ".ci/run",
    'pip install -e ".[pytest,spark35]" && pytest examples': (
        "not run: an install (timed in fresh virtual environments for docs/install.md; "
        "the line's tests: tox -e spark35)"
    ),
    "opid check-restore CHECKPOINT --spark new_job:build --spark-version 3.5": (
        "not run: a placeholder (the line's verdicts: "
        "tests/spark/restart/test_restart_data_spark35.py)"
    ),
    "opid fingerprint --spark jobs:orders_stream --json > orders-3.5.json": (
        "not run: a placeholder (A's fingerprints made on 3.5: "
        "tests/data/upgrade-restart/previous_fingerprints.py)"
    ),
    "opid check-restore CHECKPOINT --spark new_job:build --previous-fingerprint orders-3.5.json "
    "--spark-version 4.3": (
        "not run: a placeholder (the upgrade pairs from A's fingerprint: "
        "tests/spark/restart/test_upgrade_restarts.py)"
    ),
    "pytest --opid-spark-version 3.5": (
        "not run: a placeholder (the line's verdicts: "
        "tests/spark/restart/test_restart_data_spark35.py)"
    ),
    'pip install -e ".[pytest]"': "not run: an install (tox's environments install the extras)",
    "pip install build && python -m build --wheel --outdir dist": "tox -e wheel, as written",
    'pip install "$(ls dist/pytest_opid-*.whl)[pytest,spark]"': "tox -e wheel, as written",
    "pytest --snapshot-update": "test_the_quick_starts_run_as_written (this module)",
    "pytest": "test_the_quick_starts_run_as_written (this module)",
    "pytest --snapshot-update test_connect_jobs.py": "tests/docs/test_connect_page.py, as written",
    "pytest test_connect_jobs.py": "tests/docs/test_connect_page.py, as written",
    "opid savepoint savepoints/prod/_metadata": "not run: the user's own savepoint",
    "opid check-restore savepoints/prod/ job.json": "not run: the user's own savepoint",
    "opid pin savepoints/prod/": "not run: the user's own savepoint",
    "opid check-restore 32d93208d17abda988aa2c7baa10f53f/chk-5 job_b.json": (
        "not run: a case of tests/data/flink-restore (its verdict: tests/flink/test_restore.py)"
    ),
    "opid fingerprint build/libs/clicks.jar --main-class com.example.ClickStatsJob -- --input x": (
        "not run: the user's own jar (jars: tests/pyflink, tox -e flink)"
    ),
    "opid check-restore checkpoint b.json": (
        "not run: a case of tests/data/spark-restart (its verdict: "
        "tests/spark/restart/test_restart_data.py)"
    ),
    "python tools/judge_sources_sinks.py tests/data/sources-sinks -v": (
        "not run: the whole corpus, about 3 minutes (a sample of it: "
        "tests/spark/restart/test_sink_restarts.py)"
    ),
    "opid demonstrate --spark examples.spark.sessions:thirty_minutes --spark "
    "examples.spark.sessions:ten_minutes --seed 41 --examples 8 -- /tmp/opid-sessions": (
        "tests/spark/test_demonstrate_cli.py (in the test's session, its own folder)"
    ),
    "opid check-restore a.opid b.json": (
        "not run: a case of tests/data/tws-restart (its verdict: "
        "tests/spark/restart/test_transform_with_state_restarts.py)"
    ),
}
#: Pages whose commands another test runs, as written.
OWNED = {
    "pyspark-checkpoints.md": "tests/spark/test_readme_walkthrough.py",
    "checkpoints-where-they-live.md": "tests/storage/test_documented_storage.py",
}


def _command(line: str) -> str:
    return re.split(r"\s+#\s", line, maxsplit=1)[0].strip()


def commands() -> list[tuple[str, str]]:
    """(page, command) of every bash line and every ``$ `` line of a shown transcript."""
    out = []
    for page in PAGES:
        for language, lines in blocks(page.read_text(encoding="utf-8")):
            for line in lines:
                if language == "bash" and line.strip() and not line.lstrip().startswith("#"):
                    out.append((page.name, _command(line)))
                elif line.startswith("$ ") and line != "$ echo $?":
                    out.append((page.name, _command(line[2:])))
    return out


def transcripts() -> list[tuple[str, str, list[str]]]:
    """(page, command, shown lines) of the transcripts this module runs."""
    out = []
    for page in PAGES:
        if page.name in OWNED:
            continue
        for _, lines in blocks(page.read_text(encoding="utf-8")):
            if lines and lines[0].startswith("$ ") and _command(lines[0][2:]) not in ELSEWHERE:
                out.append((page.name, _command(lines[0][2:]), lines[1:]))
    return out


def test_every_command_is_accounted_for():
    here = {(page, command) for page, command, _ in transcripts()}
    for page, command in commands():
        if page in OWNED:
            assert (ROOT / OWNED[page]).is_file()
            continue
        assert (page, command) in here or command in ELSEWHERE, (
            f"{page}: {command!r} is neither run by a test nor listed with a reason"
        )
    shown = {command for _, command in commands()}
    assert set(ELSEWHERE) <= shown, set(ELSEWHERE) - shown  # no stale entry
    assert len(here) >= 3


@pytest.mark.parametrize(("page", "command", "shown"), transcripts(), ids=lambda v: str(v)[:40])
def test_a_transcript_prints_what_its_page_shows(page: str, command: str, shown: list[str]):
    done = subprocess.run(
        ["bash", "-c", command], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    printed = (done.stdout + done.stderr).splitlines()
    status = None
    if "$ echo $?" in shown:
        at = shown.index("$ echo $?")
        shown, status = shown[:at], int(shown[at + 1])
    assert done.returncode == (status if status is not None else done.returncode)
    if status is None and not command.startswith("echo "):
        assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    for line in shown:
        if line.strip():
            assert line in printed, f"{page}: {command}: not printed: {line!r}"


def test_install_and_the_readme_give_the_same_setup():
    def setup(text: str) -> list[str]:
        block = text.split("\n## Getting started\n", 1)[1].split("```bash\n", 1)[1]
        return [_command(x) for x in block.split("```", 1)[0].splitlines() if x and x[0] != "#"]

    readme = setup((ROOT / "README.md").read_text(encoding="utf-8"))
    install = setup((ROOT / "docs" / "install.md").read_text(encoding="utf-8"))
    assert install == readme[1:3]


def _quick_start(page: Path, heading: str) -> tuple[str, list[str]]:
    """The Python block and the shell lines of a page's quick start."""
    text = page.read_text(encoding="utf-8").split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]
    found = blocks(text)
    code = next(lines for language, lines in found if language == "python")
    shell = [line for language, lines in found if language == "bash" for line in lines]
    return "\n".join(code), [line for line in shell if line.startswith("pytest")]


@pytest.mark.parametrize(
    ("page", "heading", "module"),
    [
        ("flink.md", "## The test", "test_orders_job"),
        ("protect-in-ci.md", "## The test", "test_jobs"),
    ],
)
def test_the_quick_starts_run_as_written(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    page: str,
    heading: str,
    module: str,
):
    code, shell = _quick_start(ROOT / "docs" / page, heading)
    assert [_command(line) for line in shell] == ["pytest --snapshot-update", "pytest"]
    # In a process of its own, as a user runs it: an in-process run would drop the modules first
    # imported inside it (numpy, parts of PySpark and py4j) when pytester restores sys.modules,
    # and later tests of this process would get second copies: py4j proxies whose detaches never
    # reach the JVM (the heap test in tests/spark saw 150 MiB more over 1,000 fingerprints).
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile(**{module: code})
    written = re.search(r"writes (__snapshots__/\S+\.opid)", shell[0])
    assert written is not None
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--snapshot-update")
    result.assert_outcomes(passed=1)
    assert (pytester.path / written.group(1)).is_file()
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
