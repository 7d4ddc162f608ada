"""Checking the next version against a real savepoint from a test: ``opid.check_restore`` and
the marker's ``previous=``. The savepoints and the verdicts come from a real Flink 2.3.0
(tests/data/flink-restore)."""

from __future__ import annotations

import gzip
import json
import tarfile
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data" / "flink-restore"


def _case(seed: int) -> dict:
    with gzip.open(DATA / "cases.jsonl.gz", "rt", encoding="utf-8") as f:
        return next(c for c in map(json.loads, f) if c["case"]["seed"] == seed)


def _project(pytester: pytest.Pytester, seed: int) -> dict:
    """A project holding program A's savepoint (as a team would keep it) and program B."""
    case = _case(seed)
    with tarfile.open(DATA / case["savepoint"]) as archive:
        archive.extractall(pytester.path / "prod", filter="data")
    root = pytester.path / "prod" / case["savepoint_root"]
    (pytester.path / "metadata").mkdir()
    (pytester.path / "metadata" / "_metadata").write_bytes((root / "_metadata").read_bytes())
    (pytester.path / "job_b.json").write_text(json.dumps(case["after"]))
    return case


TEST = """
import pytest

@pytest.mark.stable_topology(previous="metadata/_metadata")
def test_marker(opid):
    opid.record("job_b.json")

def test_fixture(opid):
    opid.check_restore("job_b.json", previous="metadata")
"""


def test_a_change_flink_restores_passes(pytester: pytest.Pytester):
    case = _project(pytester, 1005)  # a rename: Flink restored
    assert case["flink"]["restored"]
    pytester.makepyfile(test_job=TEST)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--snapshot-update")
    result.assert_outcomes(passed=2)


def test_a_change_flink_refuses_fails_naming_the_operator(pytester: pytest.Pytester):
    case = _project(pytester, 1003)  # a map before a stateful operator: Flink refused
    assert not case["flink"]["restored"] and case["flink"]["kind"] == "unmapped_state"
    pytester.makepyfile(test_job=TEST)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--snapshot-update")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*Restore from metadata*",
            "*Not restorable*",
            f"*{case['flink']['operator_id']}*",
        ]
    )
    assert "Traceback" not in result.stdout.str()
