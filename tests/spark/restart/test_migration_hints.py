"""Migration hints that fit (issue 38, item 6): every state reader call a verdict's "migrate the
state" fix shows is run, as shown, with Spark's own state reader on the OLD checkpoint, and
reads rows; the key advice names the user's own columns.

Real checkpoints of ``tests/data/spark-restart`` (Spark 4.3.0, with their state data): a
stateful operator added before a join (the old state is the join's, at ``state/0``; the new
query's mismatch is at ``state/1``, which the old checkpoint does not have), two operators
reordered, a deduplication key that lost a column, and a transformWithState variable whose
type changed (read by its ``stateVarName``).
"""

from __future__ import annotations

import os
import sys

# transformWithStateInPandas plans with a Python worker: this interpreter.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

import re
from pathlib import Path
from typing import Any

import pytest

import pytest_opid
from pytest_opid.spark.checkpoint.read import read_checkpoint
from tests.spark.restart_cases import build, extract, load_cases

pytestmark = pytest.mark.spark_line(
    "4.3", reason="the data's checkpoints are Spark 4.3.0's (tests/data/spark-restart)"
)

CASES = load_cases()

_READ = re.compile(r'spark\.read\.format\("statestore"\)((?:\.option\("[A-Za-z]+", [^)]+\))+)')
_OPTION = re.compile(r'\.option\("([A-Za-z]+)", ("[^"]*"|[0-9]+)\)')


def _reads(message: str) -> list[dict[str, str]]:
    """The options of every state reader call a message shows."""
    return [
        {k: v.strip('"') for k, v in _OPTION.findall(options)} for options in _READ.findall(message)
    ]


@pytest.mark.parametrize(
    ("case_id", "expected"),
    [
        (
            "join_inner__add_dedup_before_join__100042",
            [
                {"operatorId": "0", "joinSide": "left"},
                {"operatorId": "0", "joinSide": "right"},
            ],
        ),
        (
            "dedup_window_agg__reorder_stateful_operators__100037",
            [{"operatorId": "0"}, {"operatorId": "1"}],
        ),
        ("dedup_watermark__remove_event_time_from_dedup_key__100027", [{"operatorId": "0"}]),
        (
            "transform_with_state_pandas__change_state_variable_field_type__100055",
            None,  # its variables, as the checkpoint names them
        ),
    ],
)
def test_migration_reads_the_old_checkpoint(
    spark: Any, tmp_path: Path, case_id: str, expected: list[dict[str, str]] | None
) -> None:
    rec = CASES[case_id]
    folder = extract(rec, tmp_path)
    checkpoint = folder / "checkpoint"
    _moved(rec, checkpoint)
    check = pytest_opid.check_restore(checkpoint, build(spark, rec, "after", folder))
    assert not check.restorable
    migrate = [m for p in check.problems for m in [p.message] if "or migrate the state" in m]
    assert migrate, check.to_dict()
    reads = _reads(migrate[0])
    if expected is None:  # one read per state variable the old checkpoint holds
        variables = {
            family.name
            for op in read_checkpoint(checkpoint).state_operators
            for store in op.stores
            for family in store.column_families
            if not family.name.startswith(("$", "_")) and family.name != "default"
        }
        expected = [{"operatorId": "0", "stateVarName": v} for v in sorted(variables)]
        assert expected
    assert reads == expected
    for options in reads:
        reader = spark.read.format("statestore")
        for key, value in options.items():
            reader = reader.option(key, value)
        assert reader.load(str(checkpoint)).count() > 0, options


def _moved(rec: dict[str, Any], checkpoint: Path) -> None:
    """Operator metadata v2 (transformWithState) names its schema files by the run's absolute
    path: pointed at the extracted checkpoint, as if the run had used that folder."""
    ran_at = rec["paths_at_run"]["checkpoint"]
    for path in checkpoint.glob("state/*/_metadata/v2/*"):
        if path.is_file() and not path.name.startswith("."):
            text = path.read_text(encoding="utf-8")
            if ran_at in text:
                path.write_text(text.replace(ran_at, str(checkpoint)), encoding="utf-8")
                (path.parent / f".{path.name}.crc").unlink(missing_ok=True)


def test_a_removed_key_column_is_named(spark: Any, tmp_path: Path) -> None:
    """dropDuplicates(["id", "ts"]) -> dropDuplicates(["id"]): the fix names ts, the column the
    key lost, and the key's old order, not a generic cast."""
    rec = CASES["dedup_watermark__remove_event_time_from_dedup_key__100027"]
    folder = extract(rec, tmp_path)
    check = pytest_opid.check_restore(folder / "checkpoint", build(spark, rec, "after", folder))
    (problem,) = [p for p in check.problems if p.kind == "key_schema"]
    # what Spark's reader said the stored key is, and the columns B deduplicates on
    stored = [f["name"] for f in rec["state_schemas"][0]["key_schema"]["fields"]]
    kept = re.findall(r'"([a-z]+)"', re.findall(r"dropDuplicates\(\[(.*?)\]", rec["after_code"])[0])
    lost = [n for n in stored if n not in kept]
    assert lost, stored
    assert f"deduplicate on {', '.join(lost)} again" in problem.message
    assert f"the key was ({', '.join(stored)}), in that order" in problem.message
    assert ".cast(" not in problem.message
