"""Which checkpoint the new query restarts on, and that the state handed in is always judged, on
real Spark 4.3 restarts of tests/data/spark-restart that Spark refused:

* a slim copy (``opid checkpoint --slim``) keeps the location it was copied from, and a writer
  naming that location is judged as the restart on the copy's state (the CI flow);
* a writer naming any other location than the state judged gets one line saying so, and the
  state given is still judged: what Spark refuses on it leaves the verdict "not verified",
  never "safe" (before, such a writer was "a new checkpoint location, empty state": safe);
* a slim copy's origin that is not what the copy writes is one error naming the file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import pytest_opid
from pytest_opid.errors import DocumentError
from pytest_opid.spark.checkpoint.read import read_checkpoint
from pytest_opid.spark.checkpoint.slim import slim_copy
from tests.restart.test_sink_restart_corpus import session_conf
from tests.spark.restart_cases import extract, load_cases, writer_after

pytestmark = pytest.mark.spark_line("4.3", reason="the pairs' truth is Spark 4.3's restarts")

#: Spark refused B: a grouping key added to a window aggregation with a parquet file sink
#: (STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE); an aggregate added to a noop one (the value schema).
REFUSED = ("window_agg__add_grouping_key__100018", "agg_user_sum__add_aggregate__100001")


@pytest.mark.parametrize("case_id", REFUSED)
def test_a_slim_copy_is_judged_for_the_writer_naming_its_origin(
    spark: Any, tmp_path: Path, case_id: str
) -> None:
    rec = load_cases()[case_id]
    folder = extract(rec, tmp_path)
    original = folder / "checkpoint"
    slim = tmp_path / "repo" / "checkpoints" / "q"
    slim_copy(original, slim)
    assert read_checkpoint(slim).copied_from == str(original)
    # a copy of the copy keeps the first origin
    again = tmp_path / "again"
    slim_copy(slim, again)
    assert read_checkpoint(again).copied_from == str(original)
    on_original = pytest_opid.check_restore(
        str(original), writer_after(spark, rec, folder, str(original))
    )
    assert not on_original.restorable
    for judged in (slim, again):
        for named in (str(original), f"file://{original}/"):
            check = pytest_opid.check_restore(str(judged), writer_after(spark, rec, folder, named))
            assert not check.restorable, (named, check.to_dict())
            assert [p.kind for p in check.problems] == [p.kind for p in on_original.problems]
            assert not [w for w in check.warnings if w.kind == "checkpoint"], check.warnings


@pytest.mark.parametrize("case_id", REFUSED)
def test_a_writer_naming_another_location_never_passes_unjudged_state(
    spark: Any, tmp_path: Path, case_id: str
) -> None:
    rec = load_cases()[case_id]
    folder = extract(rec, tmp_path)
    judged = folder / "checkpoint"
    elsewhere = tmp_path / "elsewhere" / "q"
    check = pytest_opid.check_restore(str(judged), writer_after(spark, rec, folder, str(elsewhere)))
    assert check.restorable and check.safe is not True, check.to_dict()
    (line,) = [w.message for w in check.warnings if w.kind == "checkpoint"]
    assert "\n" not in line and str(elsewhere) in line and str(judged) in line
    spark_says = [u.message for u in check.unverified if u.kind == "checkpoint location"]
    assert any("SCHEMA_NOT_COMPATIBLE" in m for m in spark_says), check.unverified
    assert "checkpoint location" not in check.verified, check.verified
    # the same writer on a location that holds another checkpoint: not judged, never safe
    slim_copy(judged, elsewhere)
    (elsewhere / "_opid_slim.json").unlink()
    held = pytest_opid.check_restore(str(judged), writer_after(spark, rec, folder, str(elsewhere)))
    assert held.safe is not True and any(
        "already holds a checkpoint" in u.message for u in held.unverified
    ), held.to_dict()


def test_a_malformed_origin_is_one_error_naming_the_file(tmp_path: Path) -> None:
    rec = load_cases()[REFUSED[1]]
    slim = tmp_path / "slim"
    slim_copy(extract(rec, tmp_path) / "checkpoint", slim)
    for text in ("[]", "{}", '{"copied_from": 3}', "{"):
        (slim / "_opid_slim.json").write_text(text, encoding="utf-8")
        with pytest.raises(DocumentError) as caught:
            read_checkpoint(slim)
        message = str(caught.value)
        assert "_opid_slim.json" in message and "\n" not in message, message
    (slim / "_opid_slim.json").write_text(json.dumps({"copied_from": "s3a://b/q"}), "utf-8")
    assert read_checkpoint(slim).copied_from == "s3a://b/q"


def test_the_marked_test_judges_a_slim_copy_for_the_writer_naming_its_origin(
    pytester: pytest.Pytester, spark: Any, tmp_path: Path
) -> None:
    """The documented CI flow: ``stable_topology(previous=<slim copy>)`` and
    ``opid.record(writer)``, the writer naming the production location (here, the folder the
    copy was made from, spelled as a ``file://`` URI)."""
    case_id = REFUSED[0]
    rec = load_cases()[case_id]
    folder = extract(rec, tmp_path)
    slim = tmp_path / "repo" / "checkpoints" / "q"
    slim_copy(folder / "checkpoint", slim)
    sink = rec["sink_after"]
    conf = "".join(
        f"    spark.conf.set({k!r}, {v!r})\n" for k, v in rec["session_conf_after"].items()
    )
    pytester.makepyfile(
        test_ci=rec["after_code"]
        + f"""

import pytest

@pytest.mark.stable_topology(previous={str(slim)!r})
def test_job(opid, spark):
{conf}    paths = {{k: {str(folder)!r} + "/" + k for k in ("in0", "in1", "in2", "out", "out2")}}
    opid.record(build(spark, paths).writeStream.format({sink["format"]!r})
                .outputMode({sink["output_mode"]!r}).option("path", paths["out"])
                .option("checkpointLocation", "file://" + {str(folder / "checkpoint")!r}))
"""
    )
    # the inner test sets the pair's settings on this process's one session: put them back
    with session_conf(spark, rec["session_conf_after"]):
        result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--snapshot-update")
    result.assert_outcomes(failed=1)
    assert "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE" in result.stdout.str()
