"""The README a newcomer reads first (issue 20): it starts where they start (clone, virtual
environment, the two commands, the second the one CI runs), installs from the clone, shows no
traceback or machine path, states the Spark version tested once (the one the constraints pin)
and tells a PySpark-only user about ``tox -e py311``."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _getting_started() -> str:
    return README.split("\n## Getting started\n", 1)[1].split("\n## ", 1)[0]


def test_getting_started_comes_first_with_the_two_commands():
    headings = re.findall(r"^## .+$", README, flags=re.M)
    assert headings[0] == "## Getting started"
    block = _getting_started().split("```bash\n", 1)[1].split("```", 1)[0]
    lines = [line for line in block.splitlines() if line and not line.startswith("#")]
    assert lines == [
        "git clone <this repository> pytest-opid && cd pytest-opid",
        "python -m venv .venv && . .venv/bin/activate",
        'pip install -e ".[pytest,spark]" && pytest examples',
        "pip install tox && tox",
    ]


def test_ci_runs_the_readme_s_test_command_exactly():
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    last = [line for line in script.splitlines() if line.strip()][-1]
    assert last == "pip install tox && tox"


def test_no_traceback_and_no_machine_paths():
    assert "Traceback" not in README
    assert "PySparkAttributeError" not in README
    for path in re.findall(
        r"(?<![\w.<])/(?:work|tmp|home|Users|srv|root|var|opt)/[^\s`)\"']*", README
    ):
        raise AssertionError(f"a machine path in README.md: {path}")
    assert not re.search(r"[A-Z]:\\\\", README)


def test_installs_come_from_the_clone():
    installs = re.findall(r"pip install [^\n`]*", README)
    assert installs
    for line in installs:
        assert "pytest-opid[" not in line or '"../pytest-opid[' in line, line
        assert not re.search(r"pip install\s+pytest-opid\b", line), line


def test_the_spark_version_tested_is_stated_once_and_is_the_pinned_one():
    pinned = re.search(r"^pyspark==(\S+)$", (ROOT / "constraints.txt").read_text(), flags=re.M)
    assert pinned is not None
    near = [
        " ".join(README[m.start() : m.start() + 80].split())
        for m in re.finditer(r"tested with", README, flags=re.I)
    ]
    spark = [text for text in near if "Spark" in text]
    assert len(spark) == 1, spark
    assert spark[0].startswith(f"tested with PySpark {pinned.group(1)} on Java 17 (the PySpark")
    assert "4.0.1" not in README


def test_a_pyspark_only_user_is_told_about_tox_e_py311():
    tox = (ROOT / "tox.ini").read_text(encoding="utf-8")
    assert re.search(r"^envlist = .*\bpy311\b", tox, flags=re.M)
    assert "`tox -e py311`" in _getting_started()
    assert "PySpark only" in _getting_started()


def test_the_spark_figures_are_today_s_not_the_stale_ones():
    benchmarks = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert "51 ms streaming" not in benchmarks and "| 51 ms (41) |" not in benchmarks
    assert "python benchmarks/run.py spark_explain" in benchmarks
    assert (ROOT / "benchmarks" / "bench_spark_explain.py").is_file()
