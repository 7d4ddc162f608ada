"""A snapshot made with another PySpark than the run's (issue 29): the fingerprint records the
version that made it, the comparison holds what both Spark lines record, and the session says
so once, in one line per pair of versions, instead of calling the snapshot out of date. The
snapshot stays as it is: it is the record of what runs in production."""

from __future__ import annotations

import json

import pytest

from pytest_opid.result import (
    ChainedOperator,
    Fingerprint,
    JobVertex,
    OperatorFingerprint,
    StateOperator,
    StateStore,
)

MODULE = """
from pathlib import Path

import pytest

HERE = Path(__file__).parent


@pytest.mark.stable_topology
def test_counts(opid):
    opid.record(str(HERE / "counts.json"))
"""
KEY = json.dumps(
    {
        "type": "struct",
        "fields": [{"name": "k", "type": "string", "nullable": True, "metadata": {}}],
    }
)
VALUE = json.dumps(
    {"type": "struct", "fields": [{"name": "n", "type": "long", "nullable": False, "metadata": {}}]}
)


def counts(version: str) -> Fingerprint:
    """A streaming count by key, as a Spark fingerprint made with PySpark ``version``."""
    ids = ["a" * 32, "b" * 32]
    ops = (
        OperatorFingerprint(0, "StreamingRelation", ids[0], parallelism=2, job_vertex=ids[0]),
        OperatorFingerprint(1, "StateStoreSave", ids[1], parallelism=4, job_vertex=ids[1]),
    )
    vertices = (
        JobVertex(ids[0], "stage 0", 2, (ChainedOperator(ids[0]),), (0,)),
        JobVertex(ids[1], "stage 1", 4, (ChainedOperator(ids[1]),), (1,)),
    )
    state = StateOperator(
        0, ids[1], "stateStoreSave", "stateStoreSave", (StateStore("default", KEY, VALUE),)
    )
    return Fingerprint(
        ops,
        vertices,
        (state,),
        engine="spark",
        sources=("FileStreamSource[in]",),
        engine_version=version,
    )


@pytest.fixture(autouse=True)
def _not_an_xdist_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)


def run(pytester: pytest.Pytester, version: str, *args: str) -> pytest.RunResult:
    (pytester.path / "counts.json").write_text(counts(version).to_json())
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", "-W", "error", *args)


def test_a_snapshot_from_another_line_is_named_once_and_kept(pytester: pytest.Pytester):
    pytester.makepyfile(test_job=MODULE)
    run(pytester, "3.5.9", "--snapshot-update").assert_outcomes(passed=1)
    (snapshot,) = pytester.path.glob("__snapshots__/**/*.opid")
    before = snapshot.read_bytes()
    assert 'engine_version  "3.5.9"' in before.decode().splitlines()

    result = run(pytester, "4.3.0")
    result.assert_outcomes(passed=1)  # -W error: no per-test warning about the version
    out = result.stdout.str()
    assert (
        "pytest-opid: 1 snapshot was made with PySpark 3.5.9 and passed with PySpark 4.3.0, "
        "judged by Spark 4.3's restart rules on what both lines record"
    ) in " ".join(out.split())
    assert "which Spark 4.3 widens and Spark 3.5 does not" in " ".join(out.split())
    assert "test_counts.opid" in out
    assert "out of date" not in out
    assert snapshot.read_bytes() == before


def test_the_same_line_says_the_rules_are_the_same(pytester: pytest.Pytester):
    pytester.makepyfile(test_job=MODULE)
    run(pytester, "3.5.2", "--snapshot-update").assert_outcomes(passed=1)
    result = run(pytester, "3.5.9")
    result.assert_outcomes(passed=1)
    out = " ".join(result.stdout.str().split())
    assert (
        "1 snapshot was made with PySpark 3.5.2 and passed with PySpark 3.5.9 (the same "
        "restart rules); --snapshot-update records 3.5.9" in out
    )


def test_update_records_the_running_version(pytester: pytest.Pytester):
    pytester.makepyfile(test_job=MODULE)
    run(pytester, "3.5.9", "--snapshot-update").assert_outcomes(passed=1)
    run(pytester, "4.3.0", "--snapshot-update").assert_outcomes(passed=1)
    (snapshot,) = pytester.path.glob("__snapshots__/**/*.opid")
    assert 'engine_version  "4.3.0"' in snapshot.read_text().splitlines()
    result = run(pytester, "4.3.0")
    result.assert_outcomes(passed=1)
    assert "made with PySpark" not in result.stdout.str()
    assert "out of date" not in result.stdout.str()


def test_a_snapshot_without_a_version_is_out_of_date_not_another_line(pytester: pytest.Pytester):
    """Snapshots written before the version was recorded: their text now differs by the
    version row, a harmless change the summary lists as such."""
    pytester.makepyfile(test_job=MODULE)
    run(pytester, "4.3.0", "--snapshot-update").assert_outcomes(passed=1)
    (snapshot,) = pytester.path.glob("__snapshots__/**/*.opid")
    lines = snapshot.read_text().splitlines()
    snapshot.write_text("\n".join(x for x in lines if not x.startswith("engine_version")) + "\n")
    result = run(pytester, "4.3.0")
    result.assert_outcomes(passed=1)
    assert "1 snapshot out of date" in result.stdout.str()
    assert "made with PySpark" not in result.stdout.str()
