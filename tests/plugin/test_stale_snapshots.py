"""A passing test whose snapshot no longer matches says so in the terminal summary (issue 32):
the change was harmless, but left unrecorded it lands later in an unrelated pull request."""

from __future__ import annotations

import json

import pytest

MODULE = """
import json
from pathlib import Path

import pytest

HERE = Path(__file__).parent


@pytest.mark.stable_topology
def test_orders(opid):
    opid.record(json.loads((HERE / "orders.json").read_text()))


@pytest.mark.stable_topology
def test_clicks(opid):
    opid.record(json.loads((HERE / "clicks.json").read_text()))
"""
LINE = "pytest-opid: {} out of date: harmless changes; refresh with --snapshot-update"


def job(source: str, parse: str) -> dict:
    return {
        "nodes": [
            {"id": 1, "name": f"Source: {source}", "parallelism": 2, "source": "new"},
            {"id": 2, "name": parse, "parallelism": 2},
        ],
        "edges": [{"source": 1, "target": 2}],
    }


@pytest.fixture(autouse=True)
def _not_an_xdist_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)


def write(pytester: pytest.Pytester, orders: str, clicks: str) -> None:
    (pytester.path / "orders.json").write_text(json.dumps(job("Kafka orders", orders)))
    (pytester.path / "clicks.json").write_text(json.dumps(job("Kafka clicks", clicks)))


def test_a_renamed_operator_passes_and_the_summary_counts_its_snapshot(pytester: pytest.Pytester):
    pytester.makepyfile(test_jobs=MODULE)
    write(pytester, "Parse", "Parse")
    pytester.runpytest_inprocess("-p", "no:cacheprovider", "--snapshot-update").assert_outcomes(
        passed=2
    )

    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    assert "out of date" not in result.stdout.str()

    write(pytester, "Parse order JSON", "Parse")  # a rename: Flink restores it, the text differs
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [LINE.format("1 snapshot"), "  __snapshots__/test_jobs/test_orders.opid"]
    )
    assert "test_clicks.opid" not in result.stdout.str()

    write(pytester, "Parse order JSON", "Parse click")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([LINE.format("2 snapshots")])

    pytester.runpytest_inprocess("-p", "no:cacheprovider", "--snapshot-update")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    assert "out of date" not in result.stdout.str()


def test_a_failing_test_is_not_counted(pytester: pytest.Pytester):
    pytester.makepyfile(test_jobs=MODULE)
    write(pytester, "Parse", "Parse")
    pytester.runpytest_inprocess("-p", "no:cacheprovider", "--snapshot-update")
    broken = job("Kafka orders", "Parse")
    broken["nodes"].insert(1, {"id": 3, "name": "Filter", "parallelism": 2})
    broken["edges"] = [{"source": 1, "target": 3}, {"source": 3, "target": 2}]
    (pytester.path / "orders.json").write_text(json.dumps(broken))  # Parse gets a new ID
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    assert "out of date" not in result.stdout.str()


def test_xdist_workers_hand_their_count_to_the_controller(pytester: pytest.Pytester):
    pytest.importorskip("xdist")
    pytester.makepyfile(test_jobs=MODULE)
    write(pytester, "Parse", "Parse")
    pytester.runpytest_inprocess("-p", "no:cacheprovider", "--snapshot-update")
    write(pytester, "Parse order JSON", "Parse click")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([LINE.format("2 snapshots")])
