"""Spark Connect DataFrames and streaming queries fingerprint as the classic ones they stand for.

One real Connect server serves the whole test session: the ``spark_connect`` fixture starts it
in the ``spark`` fixture's JVM (one JVM for both). Each case builds the same code on a fresh
classic session and a fresh Connect session, confs and temp views set through each, and the
two fingerprints must be equal (they differ as soon as a conf, view or UDF of the Connect
session is not the one the replay resolves).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("pyspark.sql.connect.session")

import pyspark

import pytest_opid
from pytest_opid.errors import OpidError
from pytest_opid.spark import serve
from pytest_opid.spark.function_digest import fact_parts
from tests.spark.connect_corpus import (
    CORPUS,
    EVENTS,
    cases,
    start_unwidened,
    totals,
    write_events,
)

pytestmark = pytest.mark.spark_line("4.0", reason="Connect replay is Spark 4's")

#: Python transformWithState operators' names.
TWS_KINDS = ("transformWithStateInPandasExec", "transformWithStateInPySparkExec")


@pytest.fixture(scope="module")
def paths(tables: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return {**tables, **write_events(tmp_path_factory.mktemp("connect-inputs"))}


@pytest.fixture
def sessions(spark: Any, spark_connect: Any) -> Iterator[tuple[Any, Any]]:
    """A fresh classic session and a fresh Connect session (its own server-side session):
    confs, views and UDFs a case sets stay in them."""
    try:
        connect = spark_connect.newSession()
    except AttributeError:  # PySpark 4.0's Connect session has no newSession (4.1 added it)
        from pyspark.sql.connect.session import SparkSession as ConnectSession

        connect = ConnectSession.builder.remote(serve(spark).url).create()
    try:
        yield spark.newSession(), connect
    finally:
        connect.stop()


def _kinds(fp: pytest_opid.Fingerprint) -> tuple[str, ...]:
    return tuple(state.kind for state in fp.state_operators or ())


@pytest.mark.parametrize("case", cases(sorted(CORPUS)))
def test_the_connect_fingerprint_is_the_classic_one(case, sessions, paths):
    classic, connect = sessions
    build, kinds = CORPUS[case]
    frame = build(connect, paths)
    assert type(frame).__module__.startswith("pyspark.sql.connect")
    ours = pytest_opid.fingerprint(frame)
    theirs = pytest_opid.fingerprint(build(classic, paths))
    assert ours == theirs
    assert ours.note is None  # replayed in the server's own session, not "locally"
    assert _kinds(ours) == kinds
    assert ours.mode == ("streaming" if kinds else "batch")
    for state in ours.state_operators or ():  # the Python code that updates it, read
        digests = [v for f, v in state.meaning if f == "function digest"]
        assert all(fact_parts(v) is not None for v in digests), state.meaning
        assert bool(digests) is (state.kind in ("applyInPandasWithState", *TWS_KINDS))


def test_the_replay_sees_the_connect_sessions_own_conf_and_view(sessions, paths):
    # The Connect session's conf and view exist only there: the classic session of the same
    # JVM has neither, so a replay anywhere else would fail or read another partition count.
    classic, connect = sessions
    build, _ = CORPUS["view_sql_conf_udf"]
    fp = pytest_opid.fingerprint(build(connect, paths))
    assert ("spark.sql.shuffle.partitions", "3") in fp.settings
    assert not classic.catalog.tableExists("orders")
    assert any("bucket" in line for line in fp.plan or ())


def test_a_version_mismatch_is_one_clear_error(sessions, paths, monkeypatch):
    _, connect = sessions
    frame = CORPUS["dedupe"][0](connect, paths)
    jvm = pyspark.__version__
    monkeypatch.setattr(pyspark, "__version__", "4.0.9")
    with pytest.raises(OpidError) as error:
        pytest_opid.fingerprint(frame)
    message = str(error.value)
    assert "\n" not in message
    assert f"the client is PySpark 4.0.9 but this process's JVM runs Spark {jvm}" in message
    monkeypatch.setattr(pyspark, "__version__", "3.5.3")
    with pytest.raises(OpidError, match=r"this is PySpark 3\.5\.3"):
        pytest_opid.fingerprint(frame)


def test_a_connect_query_is_judged_against_its_own_checkpoint(sessions, paths, tmp_path):
    classic, connect = sessions
    checkpoint = tmp_path / "checkpoint"
    connect.conf.set("spark.sql.shuffle.partitions", "3")
    events = connect.readStream.schema(EVENTS).json(paths["events"])
    query = (
        events.groupBy("page")
        .count()
        .writeStream.format("noop")
        .outputMode("update")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    query.stop()
    assert type(query).__module__.startswith("pyspark.sql.connect")
    assert (checkpoint / "state" / "0").is_dir() and (checkpoint / "commits" / "0").is_file()

    fp = pytest_opid.fingerprint(query)  # stopped: the server still holds it
    assert _kinds(fp) == ("stateStoreSave",)
    same = pytest_opid.check_restore(checkpoint, query)
    assert same.safe, same.to_dict()

    # A new grouping key: Spark refuses the restart (key schema), and says so from Connect as
    # from classic code.
    changed = pytest_opid.check_restore(checkpoint, events.groupBy("page", "user").count())
    classic.conf.set("spark.sql.shuffle.partitions", "3")
    plain = classic.readStream.schema(EVENTS).json(paths["events"])
    expected = pytest_opid.check_restore(checkpoint, plain.groupBy("page", "user").count())
    assert not changed.restorable
    assert changed.to_dict() == expected.to_dict()


INNER = """
import pytest
from tests.spark.connect_corpus import functions


@pytest.mark.stable_topology
@pytest.mark.parametrize("api", ["classic", "connect"])
def test_totals(api, request, opid):
    spark = request.getfixturevalue("spark" if api == "classic" else "spark_connect")
    F = functions(spark)
    events = spark.readStream.schema({schema!r}).json({folder!r})
    opid.record(events.groupBy({key}).agg(F.sum("user").alias("total")){tail})
"""


def _inner(pytester: pytest.Pytester, folder: str, key: str, tail: str = "") -> None:
    pytester.makepyfile(test_job=INNER.format(schema=EVENTS, folder=folder, key=key, tail=tail))


def test_the_marked_test_judges_a_connect_refactor_as_a_classic_one(
    pytester, spark, spark_connect, paths
):
    _inner(pytester, paths["events"], '"page"')
    pytester.runpytest_inprocess("-p", "no:cacheprovider", "--snapshot-update").assert_outcomes(
        passed=2
    )
    snapshots = sorted(pytester.path.rglob("*.opid"))
    assert len(snapshots) == 2
    texts = [s.read_text(encoding="utf-8") for s in snapshots]
    assert texts[0].replace("[classic]", "[connect]") == texts[1]

    # Harmless: a column computed after the aggregation; the state is untouched.
    _inner(pytester, paths["events"], '"page"', '.withColumn("twice", F.col("total") * 2)')
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=2)

    # State-breaking: another grouping key; Spark refuses the restart.
    _inner(pytester, paths["events"], '"page", "user"')
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=2)
    text = result.stdout.str()
    assert "key" in text.lower()
    assert text.count("test_totals[connect]") == text.count("test_totals[classic]")
    for snapshot, before in zip(snapshots, texts, strict=True):
        assert snapshot.read_text(encoding="utf-8") == before  # nothing overwritten
    shutil.rmtree(pytester.path / "__snapshots__", ignore_errors=True)


def test_a_connect_program_is_planned_with_the_settings_its_checkpoint_pins(
    sessions, paths, tmp_path
):
    # A restarted query is planned with the settings its checkpoint pins (here: no state
    # schema widening), from Connect as from classic code.
    classic, connect = sessions
    checkpoint = str(tmp_path / "checkpoint")
    start_unwidened(classic, paths, checkpoint)
    ours = pytest_opid.check_restore(checkpoint, totals(connect, paths, swapped=True))
    theirs = pytest_opid.check_restore(checkpoint, totals(classic, paths, swapped=True))
    assert ours.to_dict() == theirs.to_dict()
    assert not theirs.restorable  # the count's non-nullable field meets the sum's nullable one
