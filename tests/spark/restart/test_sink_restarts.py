"""Sinks, source options, output mode and a new checkpoint location judged against real
Spark 4.3 redeploys (tests/data/sources-sinks: what the sink held afterwards is the truth).

A sample of the pairs, one or more per truth kind and per rule of
:mod:`pytest_opid.spark.restart.sinks` (the whole corpus: ``python tools/judge_sources_sinks.py
tests/data/sources-sinks``). A bad outcome (refused, rows lost or duplicated, wrong) must be
"not restorable" or "not safe" (a reinterpretation of its kind), a correct one restorable with
nothing reinterpreted. And every fix that offers a new checkpoint location says what it does to
the sink and the sources."""

from __future__ import annotations

import ast
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

import pytest_opid
from pytest_opid.spark import words
from pytest_opid.spark.restart.findings import StatefulOperator

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "data" / "sources-sinks"
CASES = {c["id"]: c for c in map(json.loads, (DATA / "cases.jsonl").open(encoding="utf-8"))}
_spec = importlib.util.spec_from_file_location("judge", ROOT / "tools" / "judge_sources_sinks.py")
assert _spec is not None and _spec.loader is not None
judge = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(judge)

#: (pair, the reinterpretation kind expected where Spark runs and the sink goes wrong; None)
SAMPLE = {
    "fs_newckpt_samepath_all": "rows_lost",  # new checkpoint, file sink kept: batches skipped
    "fs_newckpt_newpath": None,  # new checkpoint and new path: correct
    "fs_partitionby_added": "rows_lost",
    "fs_output_cleared": "results_changed",
    "fb_idem_newckpt_all": "rows_duplicated",
    "ckpt_metadata_deleted": None,  # refused
    "src_glob_other_folder": "rows_duplicated",
    "rate_to_rate_micro_batch": None,  # refused
    "fs_csv_control": None,
    "trig_an_to_once": None,
}

#: The checks of every sampled pair, for the test of the fix texts.
SEEN: list[Any] = []


@pytest.mark.spark_line("4.3", reason="the truth is Spark 4.3's")
@pytest.mark.parametrize("case_id", list(SAMPLE))
def test_verdict_agrees_with_the_sink(spark: Any, case_id: str, tmp_path: Path) -> None:
    case = CASES[case_id]
    paths = judge.unpack(case, DATA, tmp_path)
    # the pair's settings in a session of its own: the shared one keeps the fixture's (this
    # test set them on it once, and every later test in the run saw 2 shuffle partitions)
    session = spark.newSession()
    for key, value in case["session_conf"].items():
        if key.startswith("spark.sql."):
            session.conf.set(key, value)
    previous = pytest_opid.fingerprint(judge.build(session, case["a_code"], paths))
    writer = judge.build(session, case["b_code"], paths)
    truth = case["truth"]
    for check in (
        pytest_opid.check_restore(paths["ckpt"], writer),
        pytest_opid.check_restore(paths["ckpt"], writer, previous_fingerprint=previous),
    ):
        SEEN.append(check)
        if truth == "refused":
            assert not check.restorable
            error = case["error"]["error_class"] or case["error"]["exception_class"]
            assert any(error.rsplit(".", 1)[-1] in p.message for p in check.problems)
        elif truth == "correct":
            assert check.restorable and not check.reinterpreted, check.reinterpreted
        else:
            assert check.restorable  # Spark said nothing
            assert SAMPLE[case_id] in [r.kind for r in check.reinterpreted]


@pytest.mark.spark_line("4.3", reason="the truth is Spark 4.3's")
def test_output_mode_needs_the_previous_fingerprint(spark: Any, tmp_path: Path) -> None:
    """update -> append on a windowed aggregation re-emits windows (rows duplicated): the
    checkpoint keeps no output mode, so alone it is unverified; with A's fingerprint, found."""
    case = CASES["om_fb_window_update_to_append"]
    paths = judge.unpack(case, DATA, tmp_path)
    previous = pytest_opid.fingerprint(judge.build(spark, case["a_code"], paths))
    writer = judge.build(spark, case["b_code"], paths)
    alone = pytest_opid.check_restore(paths["ckpt"], writer)
    assert "outputMode" in [u.kind for u in alone.unverified]
    judged = pytest_opid.check_restore(paths["ckpt"], writer, previous_fingerprint=previous)
    # (its foreachBatch function changed too: the tag it writes)
    assert "rows_duplicated" in [r.kind for r in judged.reinterpreted]


def test_the_new_location_effects_name_the_sink_and_the_sources() -> None:
    text = words.NEW_LOCATION_EFFECTS
    for needed in ("sources start from their beginning", "file sink", "new, empty output path",
                   "_spark_metadata", "foreachBatch", "batch ids"):  # fmt: skip
        assert needed in text
    migrate = words.fix_migrate([StatefulOperator(0, "stateStoreSave", {"default": (None, None)})])
    for fix in (words.FIX_NEW_CHECKPOINT, words.FIX_MEANING, migrate):
        assert text in fix


#: Names whose text carries :data:`words.NEW_LOCATION_EFFECTS`.
CARRIERS = ("NEW_LOCATION_EFFECTS", "FIX_NEW_CHECKPOINT", "FIX_MEANING", "fix_migrate",
            "_fix_new_location", "_FIX_SINK")  # fmt: skip


#: Texts about a query already on a new location (what it does there), not advice to move.
DESCRIBE = (
    "The new checkpoint location ",
    "The new query runs on a new checkpoint location",
    " starts the new query on a new checkpoint location",
    "The new fingerprint records",
)

SIMPLE = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr, ast.Return, ast.Raise)


def test_every_fix_text_offering_a_new_checkpoint_says_what_it_does() -> None:
    """Every string of Spark's verdicts that speaks of a new checkpoint location sits in a
    statement that also says what the sink and the sources do (one of :data:`CARRIERS`)."""
    bare = []
    for path in sorted((ROOT / "pytest_opid" / "spark").rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
        for statement in ast.walk(tree):
            if not isinstance(statement, SIMPLE) or (
                isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
            ):
                continue  # a compound statement (its parts are walked), or a docstring
            strings = [
                n.value
                for n in ast.walk(statement)
                if isinstance(n, ast.Constant) and isinstance(n.value, str)
            ]
            offers = [s for s in strings if "new checkpoint" in s and not s.startswith(DESCRIBE)]
            if offers and not any(
                name in (ast.get_source_segment(source, statement) or "") for name in CARRIERS
            ):
                bare.append(f"{path.relative_to(ROOT)}:{statement.lineno}")
    assert bare == []


@pytest.mark.spark_line("4.3", reason="runs after the sampled pairs")
def test_the_sampled_verdicts_fixes_handle_the_sink() -> None:
    messages = [
        p.message
        for check in SEEN
        for p in (*check.problems, *check.reinterpreted, *check.warnings)
    ]
    offering = [m for m in messages if "new checkpoint location" in m and "Fix:" in m]
    assert len(offering) >= 3 or not SEEN
    for message in offering:
        assert "_spark_metadata" in message and "foreachBatch" in message, message
