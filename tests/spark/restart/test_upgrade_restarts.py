"""The upgrade check against what Spark 4.x really did on a checkpoint Spark 3.5 wrote.

``tests/data/upgrade-restart`` holds 33 pairs, each query A run on PySpark 3.5.9 and query B
(the same or changed) restarted on A's checkpoint by PySpark 4.3.0 and, separately, 4.0.5. Every
pair is judged here from the slim checkpoint for the Spark line that restarted it, B planned
by this PySpark as Spark plans a restarted query (with the settings the checkpoint pins), and
compared with what that Spark did: restarted (and, where the data says the results differ from
B's own, that the state is read under another meaning), or refused with which error condition.

The same pairs are judged from A's fingerprint as PySpark 3.5.9 made it
(``previous-3.5.9.jsonl``, made by ``previous_fingerprints.py`` beside the data): the saved
fingerprint says which PySpark made it, so the verdict takes the checkpoint as Spark 3.5 wrote
it (no operator metadata, no widened schemas).
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

import json
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import pytest_opid
from pytest_opid.result import RestoreCheck
from pytest_opid.spark.versions import judged_for

UPGRADE = pytest.mark.spark_line(
    "4.3", reason="B is planned as Spark 4.x plans it; the data's B ran on 4.3.0 and 4.0.5"
)
#: A and B both ran on 4.0.5: B is planned by any 4.x PySpark with the settings the checkpoint
#: pins, and judged for 4.0.
SAME_LINE = pytest.mark.spark_line("4.0", reason="the data's A and B ran on Spark 4.0.5")

DATA = Path(__file__).resolve().parents[2] / "data" / "upgrade-restart"
ALL = {
    rec["id"]: rec
    for rec in map(json.loads, (DATA / "cases.jsonl").read_text(encoding="utf-8").splitlines())
}
RECORDS = {i: rec for i, rec in ALL.items() if rec["spark_version_a"] != rec["spark_version_b"]}
SAME = {i: rec for i, rec in ALL.items() if rec["spark_version_a"] == rec["spark_version_b"]}


def _extract(rec: dict[str, Any], root: Path) -> Path:
    """A pair's checkpoint and inputs under ``root/<pair>``, the file source logs pointed
    there (the run's paths are under ``paths_at_run``)."""
    folder = root / rec["pair"]
    if folder.exists():
        return folder
    for tarball in (rec["checkpoint"], rec["inputs"]):
        with tarfile.open(DATA / tarball, "r:gz") as tar:
            tar.extractall(folder, filter="data")
    ran_in = Path(rec["paths_at_run"]["checkpoint"]).parent.as_posix()
    old, new = f"file://{ran_in}/", f"file://{folder.resolve().as_posix()}/"
    for log in (folder / "checkpoint" / "sources").glob("*/*"):
        if not log.name.startswith("."):
            text = log.read_text(encoding="utf-8")
            if old in text:
                log.write_text(text.replace(old, new), encoding="utf-8")
                (log.parent / f".{log.name}.crc").unlink(missing_ok=True)
    return folder


def _build(spark: Any, rec: dict[str, Any], folder: Path) -> Any:
    namespace: dict[str, Any] = {}
    exec(rec["after_code"], namespace)  # the data set's own query code
    session = spark.newSession()
    for key, value in rec["session_conf_after"].items():
        session.conf.set(key, value)
    return namespace["build"](session, {key: str(folder / key) for key in ("in0", "in1")})


@pytest.fixture(scope="module")
def verdict(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], RestoreCheck]:
    root = tmp_path_factory.mktemp("upgrade-restart")
    done: dict[str, RestoreCheck] = {}

    def get(case_id: str) -> RestoreCheck:
        if case_id not in done:
            rec = ALL[case_id]
            folder = _extract(rec, root)
            with judged_for(rec["spark_version_b"]):
                done[case_id] = pytest_opid.check_restore(
                    folder / "checkpoint", _build(spark, rec, folder)
                )
        return done[case_id]

    return get


PREVIOUS = {
    rec["pair"]: rec["fingerprint"]
    for rec in map(
        json.loads, (DATA / "previous-3.5.9.jsonl").read_text(encoding="utf-8").splitlines()
    )
}


@pytest.fixture(scope="module")
def verdict_from_fingerprint(
    spark: Any, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], RestoreCheck]:
    root = tmp_path_factory.mktemp("upgrade-restart-fingerprints")
    done: dict[str, RestoreCheck] = {}

    def get(case_id: str) -> RestoreCheck:
        if case_id not in done:
            rec = RECORDS[case_id]
            folder = _extract(rec, root)
            previous = pytest_opid.Fingerprint.from_dict(PREVIOUS[rec["pair"]])
            with judged_for(rec["spark_version_b"]):
                done[case_id] = pytest_opid.check_restore(previous, _build(spark, rec, folder))
        return done[case_id]

    return get


def _agrees(check: RestoreCheck, rec: dict[str, Any]) -> bool:
    line = rec["spark_version_b"].rsplit(".", 1)[0]
    if check.restorable != rec["restarted"]:
        return False
    if rec["restarted"]:
        # results that differ from B's own, not by design: the state is read as something else
        wrong = rec["results_match"] is False and not rec["by_design_reason"]
        return not wrong or bool(check.reinterpreted)
    first = check.problems[0].message
    return first.startswith(f"Spark {line} ") and f" {rec['error_class']}" in first


def _explain(check: RestoreCheck) -> str:
    return json.dumps(check.to_dict(), indent=1)[:4000]


@UPGRADE
def test_the_pairs() -> None:
    assert len(RECORDS) == 66
    assert {rec["spark_version_b"] for rec in RECORDS.values()} == {"4.3.0", "4.0.5"}
    assert len({rec["pair"] for rec in RECORDS.values()}) == 33


@UPGRADE
@pytest.mark.parametrize("case_id", sorted(RECORDS))
def test_an_upgrade_restart(verdict: Callable[[str], RestoreCheck], case_id: str) -> None:
    check = verdict(case_id)
    assert _agrees(check, RECORDS[case_id]), _explain(check)


@UPGRADE
def test_every_pair_has_a_previous_fingerprint_made_by_35() -> None:
    assert set(PREVIOUS) == {rec["pair"] for rec in RECORDS.values()}
    assert {fp["engine_version"] for fp in PREVIOUS.values()} == {"3.5.9"}


@UPGRADE
@pytest.mark.parametrize("case_id", sorted(RECORDS))
def test_an_upgrade_restart_from_the_previous_fingerprint(
    verdict_from_fingerprint: Callable[[str], RestoreCheck], case_id: str
) -> None:
    check = verdict_from_fingerprint(case_id)
    assert _agrees(check, RECORDS[case_id]), _explain(check)


@UPGRADE
def test_a_new_operator_on_a_35_checkpoint_fails_on_its_missing_state(
    verdict: Callable[[str], RestoreCheck],
) -> None:
    """3.5 wrote no operator metadata: 4.x cannot check the operators by name, and the new
    deduplication (state/1) fails on the delta file 3.5 never wrote."""
    check = verdict("add_dedup_before_aggregation__430")
    first = check.problems[0]
    assert first.kind == "state_operators" and first.state_id == "1"
    assert "CANNOT_READ_DELTA_FILE_NOT_EXISTS" in first.message
    assert "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA" not in _explain(check)


@UPGRADE
def test_a_count_written_by_35_cannot_become_nullable_on_43(
    verdict: Callable[[str], RestoreCheck],
) -> None:
    """4.3 restarts sum, count -> count, sum on its own checkpoints (it widens the schemas
    of a query started on it); a 3.5 checkpoint pins no widening, so the count's
    non-nullable field meets the sum's nullable one."""
    message = verdict("reorder_aggregates_sum_count__430").problems[0].message
    assert "could not be null before and may be null now" in message


# -- the same line: A and B on Spark 4.0.5, where 4.0's rules differ from 4.3's -----------------


@SAME_LINE
def test_the_same_line_pairs() -> None:
    assert sorted(SAME) == [
        "count_to_sum_same_name_on_4_0__405",
        "join_inner_to_left_outer_on_4_0__405",
        "join_left_outer_to_right_outer_on_4_0__405",
        "tumbling_to_sliding_window_on_4_0__405",
    ]
    assert {rec["spark_version_b"] for rec in SAME.values()} == {"4.0.5"}


@SAME_LINE
@pytest.mark.parametrize("case_id", sorted(SAME))
def test_a_same_line_restart(verdict: Callable[[str], RestoreCheck], case_id: str) -> None:
    check = verdict(case_id)
    assert _agrees(check, SAME[case_id]), _explain(check)


@SAME_LINE
def test_a_count_cannot_become_nullable_on_40(verdict: Callable[[str], RestoreCheck]) -> None:
    """Spark 4.0 writes a count's field not nullable and compares nullability at restart: count
    -> sum under the same name is refused on its own checkpoint, where 4.3 (which widens the
    schemas of a query started on it) restarts it (tests/data/spark-restart)."""
    rec = SAME["count_to_sum_same_name_on_4_0__405"]
    assert not rec["restarted"]
    message = verdict(rec["id"]).problems[0].message
    assert message.startswith("Spark 4.0 ")
    assert "could not be null before and may be null now" in message
