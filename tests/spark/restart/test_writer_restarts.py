"""foreach writers, foreachBatch functions and file source folders changed on the same
checkpoint, judged with the fingerprint of the query that wrote it, against real Spark 4.3
redeploys (tests/data/sink-restarts, made by tools/make_sink_restarts.py: what the sink held
afterwards is the truth).

A bad outcome is never "safe": where the code shows what the change does (a foreachBatch
function now overwriting, or writing elsewhere; a file source moved after a batch that read no
file; a Python data source's new reader failing on the checkpoint's offset, or answering an
end before it), the finding names it; where it cannot (a foreach writer's code, a foreachBatch
function that writes one more column, a reader counting in tenths of a row), the verdict is
"not verified" and says what was not shown. A correct restart is never flagged "not safe"."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

import pytest_opid
from tests.restart.test_sink_restart_corpus import session_conf

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "data" / "sink-restarts"
CASES = {c["id"]: c for c in map(json.loads, (DATA / "cases.jsonl").open(encoding="utf-8"))}
_spec = importlib.util.spec_from_file_location("judge", ROOT / "tools" / "judge_sources_sinks.py")
assert _spec is not None and _spec.loader is not None
judge = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(judge)

#: pair -> (the verdict with A's fingerprint, words its message must hold)
EXPECTED = {
    # foreachBatch: what the function's DataFrameWriter calls show
    "fb_now_overwrites": ("rows_lost", ("save mode overwrite", "was append")),
    "fb_function_changed_folder": ("rows_lost", ("now writes to", "fb2")),
    "fb_extra_column": ("unverified", ("writes as before", "was not shown")),
    "om_fb_window_update_to_complete": ("unverified", ("writes as before", "was not shown")),
    # foreach: the user's code digested, its effect not shown
    "foreach_fn_extra_field": ("unverified", ("foreach writer's code changed", "not shown")),
    "foreach_fn_other_folder": ("unverified", ("foreach writer's code changed", "not shown")),
    "foreach_obj_drops_rows": ("unverified", ("foreach writer's code changed", "not shown")),
    # a file source moved after a batch that read no file
    "src_path_changed_after_nodata": ("results_changed", ("read no file", "in2")),
    # a Python data source's offsets, as its new reader reads the checkpoint's
    "pyds_offset_key_renamed_strict": (
        "refused",
        ("PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR", "KeyError"),
    ),
    "pyds_offset_unit_changed": ("rows_lost", ("new reader", "behind")),
    "pyds_offset_unit_scaled_up": ("unverified", ("changed (digest", "was not shown")),
    "pyds_control": ("safe", ()),
    # correct restarts Spark's own bookkeeping keeps right
    "src_glob_other_folder_filenameonly": ("safe", ()),
    "src_format_json_to_csv_samefolder_csv_files": ("safe", ()),
}


def _judged(spark: Any, case_id: str, tmp_path: Path) -> tuple[dict[str, Any], Any, Any]:
    case = CASES[case_id]
    paths = judge.unpack(case, DATA, tmp_path)
    # the test session itself, its SQL settings set for the pair: a Python data source the
    # corpus registered in it before is registered again by the pair's code (in a
    # spark.newSession() Spark refuses that with DATA_SOURCE_ALREADY_EXISTS)
    with session_conf(spark, case["session_conf"]):
        previous = pytest_opid.fingerprint(judge.build(spark, case["a_code"], paths))
        writer = judge.build(spark, case["b_code"], paths)
        alone = pytest_opid.check_restore(paths["ckpt"], writer)
        judged = pytest_opid.check_restore(paths["ckpt"], writer, previous_fingerprint=previous)
    return case, alone, judged


@pytest.mark.spark_line("4.3", reason="the truth is Spark 4.3's")
@pytest.mark.parametrize("case_id", list(EXPECTED))
def test_the_writer_and_the_source_folder_verdicts(
    spark: Any, case_id: str, tmp_path: Path
) -> None:
    case, alone, judged = _judged(spark, case_id, tmp_path)
    verdict, words = EXPECTED[case_id]
    bad = case["truth"] in judge.BAD
    for check in (alone, judged):  # never safe on a bad pair, never flagged on a correct one
        assert check.restorable == (verdict != "refused"), judge.said(check)
        assert not check.safe if bad else not check.reinterpreted, judge.said(check)
    if verdict == "safe":
        assert judged.safe, judge.said(judged)
        return
    if verdict == "refused":
        messages = [p.message for p in judged.problems]
    elif verdict == "unverified":
        assert judged.safe is None and not judged.reinterpreted, judge.said(judged)
        messages = [u.message for u in judged.unverified]
    else:
        messages = [r.message for r in judged.reinterpreted if r.kind == verdict]
    assert messages, judge.said(judged)
    for needed in words:
        assert any(needed in m for m in messages), messages


@pytest.mark.spark_line("4.3", reason="the truth is Spark 4.3's")
def test_an_overwrite_is_not_an_extra_column(spark: Any, tmp_path: Path) -> None:
    """The two foreachBatch changes get different findings and fixes: the overwrite loses rows
    (the fix keeps the save mode), the extra column is not verified (nothing to fix)."""
    _, _, overwrite = _judged(spark, "fb_now_overwrites", tmp_path / "a")
    _, _, column = _judged(spark, "fb_extra_column", tmp_path / "b")
    (lost,) = overwrite.reinterpreted
    assert 'keep mode("append")' in lost.message
    assert column.safe is None and not column.reinterpreted
    assert all("Fix:" not in u.message for u in column.unverified if u.kind == "sink")
