"""No path writes a baseline while its test fails (issue 31, finding 5).

Every route a marked test can fail by (its snapshot, the marker's ``previous=``, both, an
``opid.check_restore`` in its body), with and without ``--snapshot-update``: the test's verdict
is as the engine decides, and the snapshot file changes only when the test passes under
``--snapshot-update``. ``previous=`` is a real Flink 2.3.0 savepoint's ``_metadata``
(tests/data/flink-restore): seed 1003 inserts a map before a stateful operator (Flink refused to
restore), seed 1005 renames an operator (Flink restored).
"""

from __future__ import annotations

import gzip
import json
import tarfile
from pathlib import Path

import pytest


def write_module(pytester: pytest.Pytester, name: str, text: str) -> None:
    """``makepyfile``, the module's cached bytecode dropped (tests/fresh_module.py says why;
    repeated here: under tox -e syrupy-lowest, pytest 8.0 cannot import from tests/)."""
    path = Path(pytester.makepyfile(**{name: text}))
    for cached in path.parent.glob(f"__pycache__/{name}.*"):
        cached.unlink()


DATA = Path(__file__).resolve().parents[1] / "data" / "flink-restore"
REFUSED, RESTORED = 1003, 1005


def _case(seed: int) -> dict:
    with gzip.open(DATA / "cases.jsonl.gz", "rt", encoding="utf-8") as f:
        return next(c for c in map(json.loads, f) if c["case"]["seed"] == seed)


BASELINE = """
import pytest

@pytest.mark.stable_topology
def test_job(opid):
    opid.record("{job}")
"""

ROUTES = {
    "snapshot": """
import pytest

@pytest.mark.stable_topology
def test_job(opid):
    opid.record("job_b.json")
""",
    "previous": """
import pytest

@pytest.mark.stable_topology(previous="metadata/_metadata")
def test_job(opid):
    opid.record("job_b.json")
""",
    "both": """
import pytest

@pytest.mark.stable_topology(previous="metadata/_metadata")
def test_job(opid):
    opid.record("job_b.json")
""",
    "body": """
import pytest

@pytest.mark.stable_topology
def test_job(opid):
    opid.record("job_b.json")
    opid.check_restore("job_b.json", previous="metadata/_metadata")
""",
}


def _project(pytester: pytest.Pytester, seed: int, route: str) -> Path:
    """Program A's savepoint and programs A and B; the test's snapshot made from A (B for the
    route where only ``previous=`` decides, so that its snapshot check passes)."""
    case = _case(seed)
    with tarfile.open(DATA / case["savepoint"]) as archive:
        archive.extractall(pytester.path / "prod", filter="data")
    root = pytester.path / "prod" / case["savepoint_root"]
    (pytester.path / "metadata").mkdir()
    (pytester.path / "metadata" / "_metadata").write_bytes((root / "_metadata").read_bytes())
    (pytester.path / "job_a.json").write_text(json.dumps(case["before"]))
    (pytester.path / "job_b.json").write_text(json.dumps(case["after"]))
    job = "job_b.json" if route == "previous" else "job_a.json"
    write_module(pytester, "test_job", BASELINE.format(job=job))
    pytester.runpytest_inprocess("-p", "no:cacheprovider", "--snapshot-update").assert_outcomes(
        passed=1
    )
    (snapshot,) = (pytester.path / "__snapshots__").rglob("*.opid")
    return snapshot


@pytest.mark.parametrize("update", [False, True], ids=["check", "update"])
@pytest.mark.parametrize("route", sorted(ROUTES))
@pytest.mark.parametrize("seed", [REFUSED, RESTORED])
def test_a_failing_test_never_writes_its_baseline(
    pytester: pytest.Pytester, seed: int, route: str, update: bool
) -> None:
    snapshot = _project(pytester, seed, route)
    before = snapshot.read_bytes()
    write_module(pytester, "test_job", ROUTES[route])
    args = ["-p", "no:cacheprovider", *(["--snapshot-update"] if update else [])]
    result = pytester.runpytest_inprocess(*args)
    refused = seed == REFUSED
    restore_fails = refused and route in ("previous", "both", "body")
    # A's snapshot against B: the state Flink could not map is lost; the update accepts it.
    snapshot_fails = refused and route in ("snapshot", "both", "body") and not update
    fails = restore_fails or snapshot_fails
    result.assert_outcomes(**({"failed": 1} if fails else {"passed": 1}))
    after = snapshot.read_bytes()
    if fails or not update or route == "previous":  # previous: the baseline is B already
        assert after == before, "a failing or checking run changed the baseline"
    else:
        assert after != before
        # B's snapshot now: its check against itself is exact.
        write_module(pytester, "test_job", BASELINE.format(job="job_b.json"))
        again = pytester.runpytest_inprocess("-p", "no:cacheprovider")
        again.assert_outcomes(passed=1)
        assert snapshot.read_bytes() == after
    if restore_fails:
        result.stdout.fnmatch_lines(["*Restore from metadata*"])
    if fails and update:
        assert "1 snapshot updated" not in result.stdout.str()
    assert "Traceback" not in result.stdout.str()


DIRECT = """
from pytest_opid.plugin.extension import TopologySnapshotExtension

def test_job(snapshot):
    assert "{job}" == snapshot.use_extension(TopologySnapshotExtension)
"""


def _count_compares(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every comparison made from now on, wherever the plugin binds ``compare``."""
    from pytest_opid import comparison
    from pytest_opid.plugin import judge

    calls: list[int] = []
    real = comparison.compare

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    for module in (comparison, judge):  # wherever a copy of the name is bound
        monkeypatch.setattr(module, "compare", counting)
    return calls


def test_the_marker_compares_once(pytester: pytest.Pytester, monkeypatch) -> None:
    """One comparison of the baseline with the new fingerprint per recorded topology: it
    decides, words the failure and gives the warnings (the snapshot is read back once); none
    under --snapshot-update, which writes any difference back."""
    snapshot = _project(pytester, RESTORED, "snapshot")
    calls = _count_compares(monkeypatch)
    write_module(pytester, "test_job", ROUTES["snapshot"])  # a rename: passes, text differs
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)
    assert len(calls) == 1
    calls.clear()
    case = _case(REFUSED)
    (pytester.path / "job_b.json").write_text(json.dumps(case["after"]))
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(failed=1)
    assert len(calls) == 1
    assert snapshot.exists()
    calls.clear()
    before = snapshot.read_bytes()
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--snapshot-update")
    result.assert_outcomes(passed=1)
    assert calls == [] and snapshot.read_bytes() != before


def test_the_extension_alone_compares_once(pytester: pytest.Pytester, monkeypatch) -> None:
    """``assert x == snapshot.use_extension(TopologySnapshotExtension)`` without the marker:
    syrupy asks ``matches`` and, when it fails, ``diff_lines``; both read one judgement (up to
    0.2.0 each compared on its own). The explanation is the engine's: the state lost."""
    case = _case(REFUSED)
    (pytester.path / "job_a.json").write_text(json.dumps(case["before"]))
    (pytester.path / "job_b.json").write_text(json.dumps(case["after"]))
    write_module(pytester, "test_job", DIRECT.format(job="job_a.json"))
    made = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--snapshot-update")
    made.assert_outcomes(passed=1)
    calls = _count_compares(monkeypatch)
    write_module(pytester, "test_job", DIRECT.format(job="job_b.json"))
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    assert len(calls) == 1
    result.stdout.fnmatch_lines(["*Topology not stable*would lose their state*"])
