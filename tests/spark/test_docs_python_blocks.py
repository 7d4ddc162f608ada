"""The Python blocks of docs/ that need Spark, run as written in this process, with the test
session's SparkSession (the ``spark`` fixture): which blocks, tests/docs/test_python_blocks.py's
``RUN_WITH_SPARK`` says. Once, on PySpark 4.3: the pages speak for the newest line."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from tests.docs.test_python_blocks import RUN_WITH_SPARK, block
from tests.spark.test_readme_walkthrough import blocks

pytestmark = pytest.mark.spark_line("4.3", reason="the pages speak for the newest line: once")

ROOT = Path(__file__).resolve().parents[2]


def _key(page: str) -> tuple[str, str]:
    (key,) = [k for k in RUN_WITH_SPARK if k[0] == page]
    return key


def _run(code: str, page: str, namespace: dict[str, Any]) -> dict[str, Any]:
    exec(compile(code, f"docs/{page}", "exec"), namespace)
    return namespace


def test_the_upgrade_example_prints_what_its_page_shows(
    spark: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    page = "upgrade-spark.md"
    monkeypatch.chdir(ROOT)  # the page runs it from the clone's folder
    monkeypatch.syspath_prepend(str(ROOT))
    _run(block(*_key(page)), page, {"__name__": "docs_block"})
    printed = capsys.readouterr().out.splitlines()
    found = blocks((ROOT / "docs" / page).read_text(encoding="utf-8"))
    at = next(i for i, (language, _) in enumerate(found) if language == "python")
    language, shown = found[at + 1]
    assert language == "text"
    assert printed == shown


def test_the_batch_example_builds_its_dataframe(spark: Any, tables: dict[str, str]):
    page = "pyspark-batch.md"
    paths = {"orders_path": tables["orders"], "customers_path": tables["customers"]}
    namespace = _run(block(*_key(page)), page, {"__name__": "docs_block", "spark": spark, **paths})
    import pytest_opid

    df = namespace["df"]
    assert df.isStreaming is False
    assert pytest_opid.fingerprint(df).operators
    assert sorted(df.columns) == ["country", "revenue"]
    # the join the page's plan shows is the one Spark plans
    assert "BroadcastHashJoin" in df._jdf.queryExecution().executedPlan().toString()


def test_the_sink_example_judges_its_own_checkpoint(spark: Any, tmp_path: Path):
    """The block's own writer runs once, as production would, and leaves the checkpoint the
    block then checks; the same writer restarts on it (Spark restarts an unchanged query)."""
    page = "pyspark-sinks.md"
    paths = {name: str(tmp_path / name) for name in ("in", "out", "ckpt")}
    Path(paths["in"]).mkdir()
    Path(paths["in"], "0.json").write_text(
        "\n".join(json.dumps({"id": i, "name": f"n{i}", "v": i}) for i in range(5)) + "\n",
        encoding="utf-8",
    )
    module = ast.parse(block(*_key(page)))
    setup = [n for n in module.body if isinstance(n, ast.Import | ast.ImportFrom | ast.FunctionDef)]
    rest = [n for n in module.body if n not in setup]
    namespace: dict[str, Any] = {"__name__": "docs_block", "spark": spark, "paths": paths}
    exec(compile(ast.Module(body=setup, type_ignores=[]), f"docs/{page}", "exec"), namespace)
    namespace["orders_writer"](spark, paths).start().awaitTermination(120)
    assert Path(paths["ckpt"], "commits", "0").is_file()
    exec(compile(ast.Module(body=rest, type_ignores=[]), f"docs/{page}", "exec"), namespace)
    check = namespace["check"]
    assert check.restorable is True


def test_the_blocks_are_the_registered_ones():
    assert {page for page, _ in RUN_WITH_SPARK} == {
        "upgrade-spark.md",
        "pyspark-batch.md",
        "pyspark-sinks.md",
    }


def _shown_failure(page: Path, after: str) -> list[str]:
    """The lines of the first text block after ``after`` on ``page``."""
    text = page.read_text(encoding="utf-8").split(after, 1)[1]
    return next(lines for language, lines in blocks(text) if language == "text")


def test_the_failure_the_readme_and_the_ci_page_show_is_today_s(spark: Any, tmp_path: Path):
    """The README's failure (and the CI page's) came from running ``pytest examples/spark``
    after a second ``dropDuplicates`` was added before the aggregation: the same change,
    compared with the committed snapshot, still explains itself in those words (a line with
    ``...`` is cut there)."""
    from pyspark.sql import functions as F

    import pytest_opid
    from examples.spark.jobs import EVENTS_SCHEMA

    events = tmp_path / "events"
    events.mkdir()
    changed = (
        spark.readStream.schema(EVENTS_SCHEMA)
        .json(str(events))
        .withWatermark("event_time", "10 minutes")
        .dropDuplicates(["event_id", "event_time"])
        .dropDuplicates(["user_id", "page", "event_time"])  # the change
        .groupBy(F.window("event_time", "5 minutes"), "page")
        .agg(F.count("*").alias("views"), F.approx_count_distinct("user_id").alias("visitors"))
    )
    snapshot = ROOT / "examples/spark/__snapshots__/test_jobs/test_page_view_stats.opid"
    said = pytest_opid.explain(pytest_opid.compare(snapshot, changed), "ids").splitlines()
    for page, after in (
        (ROOT / "README.md", "A real failure:"),
        (ROOT / "docs" / "protect-in-ci.md", "then fails"),
    ):
        for line in _shown_failure(page, after):
            if "..." in line:
                head = line.split("...", 1)[0]
                assert any(s.startswith(head) for s in said), f"{page.name}: {head!r}"
            elif line.strip():
                assert line in said, f"{page.name}: not said: {line!r}"
