"""A marked PySpark streaming test that fails speaks Spark: state directories, stages and the
checkpoint, never Flink's operator IDs or savepoints, and its fixes follow what changed.

The inner sessions (pytester, in-process) reuse this session's SparkSession; the query reads
which variant to build from a JSON file next to the test module, so one module runs twice.
"""

from __future__ import annotations

import json
import re

import pytest

FLINK_WORDS = ("Topology not stable", "check=", "keeps its ID", "setUidHash", "savepoint", "uid(")

MODULE = """
import json
from pathlib import Path

import pytest
from pyspark.sql import functions as F

HERE = Path(__file__).parent


@pytest.mark.stable_topology
def test_page_views(opid, spark):
    variant = json.loads((HERE / "variant.json").read_text())
    events = HERE / "events"
    events.mkdir(exist_ok=True)
    (events / "e.json").write_text('{"user": 1, "page": "/", "n": 1.5, "ts": "2024-01-01"}\\n')
    stream = spark.readStream.schema("user long, page string, n double, ts timestamp").json(
        str(events)
    )
    if variant["dedupe"]:
        stream = stream.withWatermark("ts", "1 minute").dropDuplicates(["user", "ts"])
    aggregates = [F.count("*").alias("views")]
    if variant["total"]:
        aggregates.append(F.sum("n").alias("total"))
    opid.record(stream.groupBy("page").agg(*aggregates))
"""


def _run(pytester: pytest.Pytester, *args: str, dedupe: bool = False, total: bool = False):
    (pytester.path / "variant.json").write_text(json.dumps({"dedupe": dedupe, "total": total}))
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", *args)


def _failure(result) -> str:
    """The failure message, without pytest's ``E`` prefixes, wrapped lines joined."""
    lines = [re.sub(r"^E\s{0,9}", "", line) for line in result.outlines]
    return " ".join(" ".join(lines).split())


@pytest.fixture
def baseline(pytester: pytest.Pytester, spark) -> pytest.Pytester:
    """The module with its snapshot of the count-only query."""
    pytester.makepyfile(test_views=MODULE)
    _run(pytester, "--snapshot-update").assert_outcomes(passed=1)
    return pytester


@pytest.mark.spark_line(
    "4.0", reason="asserts Spark 4.x's error classes (3.5's words: tests/data/spark-restart-35)"
)
def test_a_new_aggregate_column_fails_in_spark_words_with_its_own_fix(baseline):
    result = _run(baseline, total=True)
    result.assert_outcomes(failed=1)
    text = _failure(result)
    # The headline: what Spark would do with the checkpoint, and what the marker checks.
    assert (
        "Not restartable from the old checkpoint [checked: state]: Spark would refuse to "
        "restart on the old checkpoint (the value schema of state/0)." in text
    )
    assert "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE" in text
    fixes = text[text.index("How to fix:") :]
    # The fix of this problem, first; the setting Spark's own message suggests, refused.
    assert fixes.index("add the new aggregate column in a new query on a new checkpoint") < (
        fixes.index("or run the changed query on a new checkpoint location")
    )
    assert "do not set spark.sql.streaming.stateStore.stateSchemaCheck=false" in fixes
    # Nothing was reordered: no advice about the operators' order.
    assert "same order" not in fixes
    assert "keep the stateful operators" not in fixes
    for word in FLINK_WORDS:
        assert word not in text, word


@pytest.mark.spark_line(
    "4.0", reason="asserts Spark 4.x's error classes (3.5's words: tests/data/spark-restart-35)"
)
def test_a_stateful_operator_put_in_front_gets_the_order_fix(baseline):
    result = _run(baseline, dedupe=True)
    result.assert_outcomes(failed=1)
    text = _failure(result)
    assert text.count("Not restartable from the old checkpoint [checked: state]:") == 1
    # Spark numbers parents before children: the aggregation keeps state/0, the new
    # deduplication in front of it is state/1, which the checkpoint's metadata does not list.
    assert 'state/1 new: dedupe "StreamingDeduplicate(long, timestamp)"' in text
    assert "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA" in text
    fixes = text[text.index("How to fix:") :]
    assert "keep the stateful operators (aggregations, dropDuplicates" in fixes
    assert "in the same order as in the query that wrote the checkpoint" in fixes
    assert "add the new aggregate column" not in fixes
    for word in FLINK_WORDS:
        assert word not in text, word


def test_a_stages_check_fails_on_stages_only_and_says_so(baseline):
    _run(baseline).assert_outcomes(passed=1)
    module = MODULE.replace(
        "@pytest.mark.stable_topology", '@pytest.mark.stable_topology(check="chains")'
    )
    baseline.makepyfile(test_views=module)
    # check="chains" holds the stages only: a new aggregate column keeps them.
    _run(baseline, total=True).assert_outcomes(passed=1)
    # A deduplication in front adds an exchange, hence a stage.
    result = _run(baseline, dedupe=True)
    result.assert_outcomes(failed=1)
    text = _failure(result)
    headline = text[text.index("Stages changed [checked: stages]: ") :].split(".", 1)[0]
    # The stages first; the restart problem the state check would report comes after, as such.
    assert headline.index("split or merged") < headline.index(
        "not checked here: Spark would refuse to restart on the old checkpoint (the stateful "
        "operators)"
    )
    assert "Not restartable" not in text
    assert "a stage ends at every exchange" in text
    for word in FLINK_WORDS:
        assert word not in text, word


@pytest.mark.spark_line(
    "4.0", reason="asserts Spark 4.x's error classes (3.5's words: tests/data/spark-restart-35)"
)
def test_fixes_of_several_problems_are_listed_once_first_choice_first(spark, events_dir):
    """A deduplication dropped and the grouping key widened: two problems, each with its own
    fix, and the shared alternatives (new checkpoint, migrate the old state) once each."""
    import pytest_opid
    from tests.spark.spark_checks import EVENTS_SCHEMA

    stream = spark.readStream.schema(EVENTS_SCHEMA).json(str(events_dir))
    watermarked = stream.withWatermark("ts", "1 minute")
    old = watermarked.dropDuplicates(["user", "ts"]).groupBy("page").count()
    new = watermarked.groupBy("page", "user").count()
    comparison = pytest_opid.compare(pytest_opid.fingerprint(old), pytest_opid.fingerprint(new))
    kinds = {p.kind for p in comparison.restore.problems}
    assert {"state_operators", "key_schema"} <= kinds
    text = pytest_opid.explain(comparison, "ids")
    assert text.startswith("Not restartable from the old checkpoint [checked: state]: ")
    fixes = " ".join(text[text.index("How to fix:") :].split())
    order = [
        fixes.index("- keep the stateful operators"),
        # the user's own change: user was added to the key
        fixes.index("- keep the state's key as it was: leave user out of the key"),
        fixes.index("- or run the changed query on a new checkpoint location"),
        fixes.index("- or migrate the state: read the old checkpoint's state with Spark's state"),
        fixes.index("Then, once the changed query runs one of these ways, record it as the new"),
    ]
    assert order == sorted(order)
    assert fixes.count("or run the changed query on a new checkpoint location") == 1
    assert fixes.count("or migrate the state") == 1
    # the old query's operators, where its state is: the aggregation at state/0, the
    # deduplication at state/1 (Spark numbers parents before children)
    assert '.option("operatorId", 0).load("<checkpoint>") for state/0 (stateStoreSave)' in fixes
    assert '.option("operatorId", 1).load("<checkpoint>") for state/1 (dedupe)' in fixes
    for word in FLINK_WORDS:
        assert word not in text, word


def _fix_lines(text: str) -> list[str]:
    return text[text.index("How to fix:") :].splitlines()[1:]


def _assert_accepting_is_only_the_step_after(text: str) -> None:
    """Issue 32: no fix trades the deploy for a green build. Accepting the snapshot is never a
    fix of its own; it is the last line, after the fixes that make the deploy safe."""
    lines = _fix_lines(text)
    assert not any("accept it" in line or "acceptable" in line for line in lines), lines
    assert sum("--snapshot-update" in line for line in lines) == 1, lines
    assert lines[-1] == (
        "Then, once the changed query runs one of these ways, record it as the new snapshot: "
        "pytest --snapshot-update"
    )
    assert any("new checkpoint location" in line for line in lines[:-1]), lines


def test_not_restartable_fixes_make_the_deploy_safe_first(spark, events_dir):
    from pyspark.sql import functions as F

    import pytest_opid
    from tests.spark.spark_checks import EVENTS_SCHEMA

    stream = spark.readStream.schema(EVENTS_SCHEMA).json(str(events_dir))
    old = stream.groupBy("page").count()
    new = stream.groupBy("page").agg(F.count("*").alias("count"), F.max("ts").alias("last"))
    comparison = pytest_opid.compare(pytest_opid.fingerprint(old), pytest_opid.fingerprint(new))
    assert not comparison.restore.restorable
    text = pytest_opid.explain(comparison, "ids")
    assert text.startswith("Not restartable from the old checkpoint")
    _assert_accepting_is_only_the_step_after(text)


def test_reinterpreted_state_fixes_make_the_deploy_safe_first(spark, events_dir):
    from pyspark.sql import functions as F

    import pytest_opid
    from tests.spark.spark_checks import EVENTS_SCHEMA

    stream = spark.readStream.schema(EVENTS_SCHEMA).json(str(events_dir))
    old = stream.groupBy("page").count()
    new = stream.select(F.col("user").cast("string").alias("page")).groupBy("page").count()
    comparison = pytest_opid.compare(pytest_opid.fingerprint(old), pytest_opid.fingerprint(new))
    assert comparison.restore.restorable and not comparison.restore.safe
    text = pytest_opid.explain(comparison, "ids")
    _assert_accepting_is_only_the_step_after(text)
    assert "keep the state's definition as it was" in text


def test_a_batch_change_may_still_be_accepted_as_intended(spark, tmp_path):
    """A batch job keeps no state between runs: an intended change of its stages is accepted."""
    import pytest_opid

    path = str(tmp_path / "t")
    spark.range(3).selectExpr("id", "id % 2 AS k").write.parquet(path)
    old = spark.read.parquet(path).groupBy("k").count()
    new = spark.read.parquet(path).groupBy("k", "id").count()
    text = pytest_opid.explain(
        pytest_opid.compare(pytest_opid.fingerprint(old), pytest_opid.fingerprint(new)), "chains"
    )
    assert "  - or, if the change is intended, accept it: pytest --snapshot-update" in text
    assert "Then, once" not in text
