"""Every Python block of the README and docs/ runs, or says on the page why not (issue 43).

Each ```python block is one of:

* run here, in this process (``RUN_HERE``: needs no Spark);
* run with the test session's SparkSession by tests/spark/test_docs_python_blocks.py
  (``RUN_WITH_SPARK``: one pytest process, PySpark 4.3 only);
* run as written by another test, which reads it from the page (``RUN_BY``);
* an excerpt of a file the suite runs (``EXCERPT_OF``: each of its lines, less a trailing
  comment, is a line of that file, in order);
* marked on the page, in the paragraph right above it, with ``Not run by the docs tests:`` and
  the reason, which the reader sees.

``test_every_python_block_is_accounted_for`` fails on a new block until it is one of these.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.spark.test_readme_walkthrough import blocks

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NOT_RUN = "Not run by the docs tests:"

#: (page, first line) -> what the block's run checks.
RUN_HERE = {
    ("flink-inputs.md", "import pytest_opid"): "the builder's jobs fingerprint",
}
#: (page, first line) -> the files it needs (tests/spark/test_docs_python_blocks.py makes them).
RUN_WITH_SPARK = {
    ("upgrade-spark.md", "from pyspark.sql import SparkSession"): "prints what the page shows",
    ("pyspark-batch.md", "from pyspark.sql import functions as F"): "the tables fixture's",
    ("pyspark-sinks.md", "import pytest_opid"): "a checkpoint of the writer's first run",
}
#: (page, first line) -> the test that reads the block from the page and runs it as written.
RUN_BY = {
    ("protect-in-ci.md", "import pytest"): "tests/docs/test_documented_commands.py",
    ("flink.md", "import pytest"): "tests/docs/test_documented_commands.py",
    ("pyspark-connect.md", "import pytest"): "tests/docs/test_connect_page.py",
    ("pyspark-connect.md", "from pyspark.sql import SparkSession"): (
        "tests/docs/test_connect_page.py"
    ),
    ("strategies.md", "from hypothesis import given"): "tests/properties/test_prop_readme.py",
}
#: (page, first line) -> the file (run by the suite) the block is an excerpt of.
EXCERPT_OF = {
    ("README.md", "@pytest.mark.stable_topology"): "examples/spark/test_jobs.py",
}


def python_blocks() -> list[tuple[str, str, str, list[str]]]:
    """(page, first line, the text right above the block, the block's lines)."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in re.finditer(r"^```python\n(.*?)^```$", text, flags=re.M | re.S):
            above = text[: match.start()].rsplit("```", 1)[-1]
            lines = match.group(1).splitlines()
            found.append((page.name, lines[0], above, lines))
    return found


def _last_paragraph(text: str) -> str:
    paragraphs = [p for p in re.split(r"\n\s*\n", text) if p.strip()]
    return " ".join(paragraphs[-1].split()) if paragraphs else ""


def block(page: str, first: str) -> str:
    (code,) = [
        "\n".join(lines)
        for name, head, _, lines in python_blocks()
        if (name, head) == (page, first)
    ]
    return code


def test_the_blocks_are_where_the_parser_finds_them():
    """The fenced-block parser the other docs tests use sees the same Python blocks."""
    counted = sum(
        1
        for page in PAGES
        for language, _ in blocks(page.read_text(encoding="utf-8"))
        if language == "python"
    )
    assert counted == len(python_blocks()) >= 10


def test_every_python_block_is_accounted_for():
    keys = [(page, first) for page, first, _, _ in python_blocks()]
    assert len(keys) == len(set(keys)), "two blocks of a page start alike: tell them apart"
    registries = (RUN_HERE, RUN_WITH_SPARK, RUN_BY, EXCERPT_OF)
    not_run = []
    for page, first, above, _ in python_blocks():
        owners = [r for r in registries if (page, first) in r]
        marked = NOT_RUN in _last_paragraph(above)
        assert len(owners) + marked == 1, (
            f"{page}: the block starting {first!r} must be run (one registry of "
            f"{__name__}) or marked on the page with {NOT_RUN!r} and the reason, not both"
        )
        if marked:
            reason = _last_paragraph(above).split(NOT_RUN, 1)[1]
            assert len(reason.split()) >= 3, f"{page}: {first!r}: say why it is not run"
            not_run.append((page, first))
    for registry in registries:
        assert set(registry) <= set(keys), set(registry) - set(keys)  # no stale entry
    assert len(not_run) <= len(keys) // 2, not_run


def test_the_blocks_run_by_other_tests_are_read_from_their_page():
    for (page, _), test in RUN_BY.items():
        source = (ROOT / test).read_text(encoding="utf-8")
        assert page in source, f"{test} does not read {page}"


def test_an_excerpt_is_the_file_s_own_lines():
    for (page, first), path in EXCERPT_OF.items():
        lines = [line.strip() for line in (ROOT / path).read_text(encoding="utf-8").splitlines()]
        at = 0
        for line in block(page, first).splitlines():
            code = re.split(r"\s+#\s", line, maxsplit=1)[0].strip()
            if code:
                assert code in lines[at:], f"{page}: {code!r} is not in {path} (in order)"
                at = lines.index(code, at) + 1


@pytest.mark.parametrize(("page", "first"), sorted(RUN_HERE))
def test_a_block_without_spark_runs(page: str, first: str):
    namespace: dict = {"__name__": "docs_block"}
    exec(compile(block(page, first), f"docs/{page}", "exec"), namespace)
    from pytest_opid import Fingerprint, fingerprint

    jobs = [v for v in namespace.values() if type(v).__module__.startswith("pytest_opid.flink")]
    assert jobs
    for job in jobs:
        assert isinstance(fingerprint(job), Fingerprint)
