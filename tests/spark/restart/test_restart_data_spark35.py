"""Restart verdicts against Spark 3.5.9's own.

``tests/data/spark-restart-35`` holds 59 real restarts made with PySpark 3.5.9 (vendored
unchanged from ../shared/spark-restart-35): query A's code and the checkpoint it left, query
B's code, and what Spark 3.5 did when B restarted on it. Every pair is judged for Spark 3.5,
from the checkpoint and from A's fingerprint, with both fingerprints made by PySpark 3.5 as the
data's were, and compared with Spark: the verdict and, where Spark failed, the kind of the
first problem and the exception Spark threw.

Spark 3.5 refuses with exceptions, not error classes, and which one a refused restart ends with
can change from run to run (several partitions' state stores fail at once; the data's README
saw ``InvalidUnsafeRowException`` where the build had ``StateSchemaNotCompatible``): a
schema refusal names both.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import pytest_opid
from pytest_opid.result import RestoreCheck
from pytest_opid.spark.versions import judged_for
from tests.spark.restart_cases import build, extract, load_cases

pytestmark = pytest.mark.spark_line(
    "3.5",
    last="3.5",
    reason="B's fingerprint must be made by PySpark 3.5, as the data's B ran on it",
)

DATA = Path(__file__).resolve().parents[2] / "data" / "spark-restart-35"
CASES = load_cases(DATA)

#: Spark 3.5's failure (the root cause's Java class) -> the first problem's kinds.
KINDS_OF = {
    "org.apache.spark.sql.execution.streaming.state.StateSchemaNotCompatible": {
        "key_schema",
        "value_schema",
    },
    "org.apache.spark.sql.execution.streaming.state.InvalidUnsafeRowException": {
        "key_schema",
        "value_schema",
    },
    "java.io.FileNotFoundException": {"state_operators"},
    "java.lang.AssertionError": {"sources"},
    "java.lang.IllegalArgumentException": {"sources"},
}

#: From A's fingerprint these depend on the files the checkpoint's last batch read (a file
#: source's path changed): a warning says so (as for the Spark 4.3 set).
DEPENDS_ON_LAST_BATCH = {
    "dedup_watermark__change_source_path__150029",
    "stateless_udf__change_source_path__150062",
    "union_agg__swap_source_order__150046",
}


@dataclass(frozen=True)
class Pair:
    from_checkpoint: RestoreCheck
    from_fingerprint: RestoreCheck


@pytest.fixture(scope="module")
def pair(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Pair]:
    root = tmp_path_factory.mktemp("spark-restart-35")
    done: dict[str, Pair] = {}

    def get(case_id: str) -> Pair:
        if case_id not in done:
            rec = CASES[case_id]
            folder = extract(rec, root, DATA)
            a = pytest_opid.fingerprint(build(spark, rec, "before", folder))
            b = pytest_opid.fingerprint(build(spark, rec, "after", folder))
            with judged_for("3.5"):
                done[case_id] = Pair(
                    pytest_opid.check_restore(folder / "checkpoint", b),
                    pytest_opid.check_restore(a, b),
                )
        return done[case_id]

    return get


def _agrees(check: RestoreCheck, spark: dict[str, Any]) -> bool:
    if check.restorable != spark["restarted"]:
        return False
    if spark["restarted"]:
        return True
    failure = spark["exception_class"]
    first = check.problems[0]
    return (
        first.kind in KINDS_OF[failure]
        and failure.rsplit(".", 1)[-1] in first.message
        and first.message.startswith("Spark 3.5 ")
    )


def _explain(check: RestoreCheck) -> str:
    return json.dumps(check.to_dict(), indent=1)[:4000]


def test_the_data_set() -> None:
    assert len(CASES) == 59
    assert {rec["case"]["spark_version"] for rec in CASES.values()} == {"3.5.9"}
    failures = {rec["spark"]["exception_class"] for rec in CASES.values()}
    assert failures - {None} <= KINDS_OF.keys()


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_restart_on_the_checkpoint(pair: Callable[[str], Pair], case_id: str) -> None:
    check = pair(case_id).from_checkpoint
    assert _agrees(check, CASES[case_id]["spark"]), _explain(check)


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_restart_from_the_fingerprint(pair: Callable[[str], Pair], case_id: str) -> None:
    check = pair(case_id).from_fingerprint
    if case_id in DEPENDS_ON_LAST_BATCH:
        depends = [
            w for w in check.warnings if "depends on what the checkpoint's last" in w.message
        ]
        assert depends and all(w.kind == "sources" for w in depends), _explain(check)
        assert not [p for p in check.problems if p.kind == "sources"], _explain(check)
    else:
        assert _agrees(check, CASES[case_id]["spark"]), _explain(check)


def test_agreement_figures(pair: Callable[[str], Pair]) -> None:
    """59/59 from the checkpoint; from A's fingerprint every pair but the two whose file
    source's last batch decides (Spark refused them; the fingerprint cannot know)."""
    from_checkpoint = sum(_agrees(pair(c).from_checkpoint, CASES[c]["spark"]) for c in CASES)
    from_fingerprint = {c for c in CASES if _agrees(pair(c).from_fingerprint, CASES[c]["spark"])}
    assert from_checkpoint == 59
    assert set(CASES) - from_fingerprint == {
        "stateless_udf__change_source_path__150062",
        "union_agg__swap_source_order__150046",
    }


def test_a_removed_operator_restarts_on_another_operators_state(
    pair: Callable[[str], Pair],
) -> None:
    """Spark 3.5 has no stateful-operator check: removing the aggregation of dedup -> agg
    leaves the deduplication at state/0, where the aggregation's state is (Spark refused it
    only because the schemas differ). Where they fit, it restarts reading the other's state."""
    check = pair("dedup_then_agg__remove_aggregation__150035").from_checkpoint
    assert not check.restorable
    assert "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA" not in _explain(check)
    assert check.problems[0].kind == "key_schema"
