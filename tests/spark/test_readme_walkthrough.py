"""The PySpark walkthrough, run as a newcomer runs it (issue 20): every command of the section
"The walkthrough: from a test to a real checkpoint" is copied from docs/pyspark-checkpoints.md and
run in a fresh copy of the repository, on the example query and its sample events. A command's exit
status is the one its comment names (``# exit 1: ...``), else 0; the output the section shows
is what the command prints (a line with ``...`` is cut there)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "pyspark-checkpoints.md"
SECTION = "## The walkthrough: from a test to a real checkpoint"
#: What a fresh clone does not have: caches, environments, the test data sets, and what the
#: walkthrough itself writes (left over from running it by hand in the working tree).
FRESH = {".git", ".venv", ".tox", "__pycache__", ".pytest_cache", ".hypothesis", ".ruff_cache"}
FRESH |= {".mypy_cache", "spark-warehouse", "build", "dist"}
WRITTEN = {"run", "checkpoints", "next.json", "changed.json"}


def section(text: str, heading: str) -> str:
    """The lines under ``heading`` up to the next heading of its level or above (``#`` lines
    inside fenced code are not headings)."""
    lines = text.splitlines()
    start = lines.index(heading) + 1
    level = len(heading) - len(heading.lstrip("#"))
    fenced = False
    for i in range(start, len(lines)):
        if lines[i].startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(rf"#{{1,{level}}} ", lines[i]):
            return "\n".join(lines[start:i])
    return "\n".join(lines[start:])


def blocks(text: str) -> list[tuple[str, list[str]]]:
    """The fenced code blocks: (language, lines)."""
    found: list[tuple[str, list[str]]] = []
    current: list[str] | None = None
    language = ""
    for line in text.splitlines():
        if line.startswith("```"):
            if current is None:
                language, current = line[3:].strip(), []
            else:
                found.append((language, current))
                current = None
        elif current is not None:
            current.append(line)
    return found


def commands(text: str) -> list[tuple[str, int]]:
    """Every command of the section's shell blocks, with the exit status it should end with."""
    out = []
    for language, lines in blocks(text):
        if language == "bash":
            for line in lines:
                if line.strip() and not line.lstrip().startswith("#"):
                    status = re.search(r"#\s*exit (\d+)", line)
                    out.append((line, int(status.group(1)) if status else 0))
    return out


def shown_outputs(text: str) -> list[tuple[str, list[str]]]:
    """The outputs the section shows: text blocks starting with ``$ <command>``."""
    return [
        (lines[0][2:], lines[1:])
        for language, lines in blocks(text)
        if language == "text" and lines and lines[0].startswith("$ ")
    ]


def _fresh_copy(dest: Path) -> None:
    def ignore(folder: str, names: list[str]) -> set[str]:
        here = Path(folder).resolve()
        skip = {n for n in names if n in FRESH or n.endswith(".egg-info")}
        if here == ROOT:
            skip |= WRITTEN & set(names)
        if here == ROOT / "tests":
            skip |= {"data"} & set(names)
        return skip

    shutil.copytree(ROOT, dest, ignore=ignore, symlinks=True)


def test_the_section_has_the_whole_path():
    text = section(PAGE.read_text(encoding="utf-8"), SECTION)
    typed = [c for c, _ in commands(text)]
    for expected in (
        "pytest examples/spark/test_jobs.py --snapshot-update",
        "opid checkpoint --slim ",
        "opid fingerprint --spark examples.spark.jobs:page_view_stats --conf "
        "spark.sql.shuffle.partitions=8 --json",
        "opid check-restore ",
        "pytest examples/spark/test_restart.py",
    ):
        assert any(c.startswith(expected) for c in typed), expected
    assert [s for _, s in commands(text)].count(1) == 1  # one change Spark would refuse
    assert shown_outputs(text)


@pytest.mark.spark_line("4.3", reason="the walkthrough shows Spark 4.3's verdicts")
def test_the_walkthrough_runs_as_written(tmp_path):
    text = section(PAGE.read_text(encoding="utf-8"), SECTION)
    clone = tmp_path / "pytest-opid"
    _fresh_copy(clone)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    printed: dict[str, str] = {}
    for command, status in commands(text):
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=clone,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        said = f"$ {command}\nexit {done.returncode}\n{done.stdout}\n{done.stderr[-3000:]}"
        assert done.returncode == status, said
        assert "Traceback" not in done.stdout + done.stderr, said
        if command.startswith("opid "):  # no Spark log lines in our output
            assert done.stderr == "", said
        printed[command.split("#", 1)[0].strip()] = done.stdout
    for command, lines in shown_outputs(text):
        assert command in printed, f"the output shown is of a command not run: {command}"
        got = printed[command].splitlines()
        for line in lines:
            if line.strip() and "..." not in line:
                assert line in got, f"{command}: not printed: {line!r}"
            elif "..." in line:
                head = line.split("...", 1)[0]
                assert any(g.startswith(head) for g in got), f"{command}: {head!r}"
    # What step 2 wrote is the copy to commit: no state data, and small.
    kept = [p for p in (clone / "checkpoints" / "page_view_stats").rglob("*") if p.is_file()]
    assert kept and not [p for p in kept if p.suffix in (".delta", ".snapshot", ".zip", ".crc")]
    assert sum(p.stat().st_size for p in kept) < 64 * 1024
