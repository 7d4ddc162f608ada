"""check_restore's routing of previous state (engine-neutral): what it refuses before any engine."""

from __future__ import annotations

from pathlib import Path

import pytest

import pytest_opid
from pytest_opid.errors import DocumentError

JOB = Path(__file__).resolve().parents[2] / "examples" / "topologies" / "fraud_detection.json"


def test_a_directory_no_engine_restores_from_is_named(tmp_path: Path) -> None:
    with pytest.raises(DocumentError, match="a directory, but neither a Flink savepoint"):
        pytest_opid.check_restore(tmp_path, str(JOB))


def test_a_previous_fingerprint_needs_previous_state_that_keeps_no_plan() -> None:
    old = pytest_opid.fingerprint(str(JOB))
    with pytest.raises(DocumentError, match="the previous state here is a fingerprint already"):
        pytest_opid.check_restore(old, str(JOB), previous_fingerprint=old)
