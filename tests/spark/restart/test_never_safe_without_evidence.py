"""Never "safe" without evidence (issue 38): a window changed from tumbling to sliding restarts on
Spark 4.3 (tests/data/spark-restart, window_agg__tumbling_to_sliding_window__100016) and reads
the old windows' state under the new rule, which a checkpoint's files alone cannot show; nor a
grouping key computed by another expression under the same name (value % 5 -> value % 7).
Every route says "not verified" (the API ``safe is None``, the CLI exit 3, the fixture and
``previous=`` fail), until the query that wrote the checkpoint is given; a fingerprint of
another query is refused rather than taken as that evidence."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import pytest_opid
from pytest_opid.cli import main
from pytest_opid.errors import DocumentError
from tests.spark.restart_cases import build, extract, load_cases

pytestmark = pytest.mark.spark_line(
    "4.3", reason="the data's truth is Spark 4.3.0's restarts (tests/data/spark-restart)"
)

CASES = load_cases()
FLINK_JOB = Path(__file__).resolve().parents[3] / "examples" / "topologies" / "fraud_detection.json"
WINDOW = "window_agg__tumbling_to_sliding_window__100016"
#: value % 5 -> value % 7 under the same name: no state row says which expression made a key
KEY = "rate_agg__change_grouping_key_expression_same_type__100063"
OTHER = "dedup_no_watermark__id_to_v__100023"


def _pair(spark: Any, root: Path, case_id: str) -> dict[str, Any]:
    rec = CASES[case_id]
    folder = extract(rec, root)
    a = pytest_opid.fingerprint(build(spark, rec, "before", folder))
    (root / "a.json").write_text(a.to_json(), encoding="utf-8")
    b = pytest_opid.fingerprint(build(spark, rec, "after", folder))
    (root / "b.json").write_text(b.to_json(), encoding="utf-8")
    return {"rec": rec, "folder": folder, "a": a, "b": b, "root": root}


@pytest.fixture(scope="module")
def window(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _pair(spark, tmp_path_factory.mktemp("window"), WINDOW)


@pytest.fixture(scope="module")
def key(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _pair(spark, tmp_path_factory.mktemp("key"), KEY)


def test_the_api_never_says_safe_from_the_checkpoint_alone(window: dict[str, Any]) -> None:
    assert CASES[WINDOW]["spark"]["restarted"]  # Spark restarts it: the results are wrong
    check = pytest_opid.check_restore(window["folder"] / "checkpoint", window["b"])
    assert check.restorable and check.safe is None and not check.meaning_verified
    assert check.to_dict()["safe"] is None
    # with the query that wrote it, the change is shown: not safe
    shown = pytest_opid.check_restore(
        window["folder"] / "checkpoint", window["b"], previous_fingerprint=window["a"]
    )
    assert shown.restorable and shown.safe is False and shown.reinterpreted
    assert shown.reinterpreted[0].kind == "window_meaning"


def test_the_cli_exits_3_then_1_with_the_writer(
    window: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    ckpt, root = str(window["folder"] / "checkpoint"), window["root"]
    assert main(["check-restore", ckpt, str(root / "b.json"), "--json"]) == 3
    assert json.loads(capsys.readouterr().out)["safe"] is None
    argv = ["check-restore", ckpt, str(root / "b.json"), "--previous-fingerprint"]
    assert main([*argv, str(root / "a.json")]) == 1
    capsys.readouterr()


def test_a_fingerprint_of_another_query_is_refused(
    spark: Any, window: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = CASES[OTHER]
    other = pytest_opid.fingerprint(build(spark, rec, "before", extract(rec, tmp_path)))
    ckpt = window["folder"] / "checkpoint"
    with pytest.raises(DocumentError, match=r"the previous fingerprint: state/0 is dedupe"):
        pytest_opid.check_restore(ckpt, window["b"], previous_fingerprint=other)
    path = tmp_path / "other.json"
    path.write_text(other.to_json(), encoding="utf-8")
    argv = ["check-restore", str(ckpt), str(window["root"] / "b.json")]
    assert main([*argv, "--previous-fingerprint", str(path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "not the query that wrote it" in err
    # a batch query's and a Flink job's: refused too
    batch = pytest_opid.fingerprint(spark.range(3).groupBy("id").count())
    with pytest.raises(DocumentError, match="a batch"):
        pytest_opid.check_restore(ckpt, window["b"], previous_fingerprint=batch)
    flink = pytest_opid.fingerprint(FLINK_JOB)
    with pytest.raises(DocumentError, match="a flink job's fingerprint"):
        pytest_opid.check_restore(ckpt, window["b"], previous_fingerprint=flink)


TEST = """
import pytest

CODE = {code!r}
PATHS = {paths!r}


def _query(spark):
    namespace = {{}}
    exec(CODE, namespace)
    return namespace["build"](spark, PATHS)


def test_restart(spark, opid):
    opid.check_restore(_query(spark), previous={ckpt!r}{extra})
"""


def _run(pytester: pytest.Pytester, window: dict[str, Any], extra: str = "") -> Any:
    folder = window["folder"]
    pytester.makepyfile(
        test_restart=TEST.format(
            code=window["rec"]["after_code"],
            paths={k: str(folder / k) for k in ("in0", "in1", "in2", "out", "out2")},
            ckpt=str(folder / "checkpoint"),
            extra=extra,
        )
    )
    return pytester.runpytest_inprocess("-p", "no:cacheprovider")


def test_the_fixture_fails_not_verified_unless_told(
    pytester: pytest.Pytester, key: dict[str, Any]
) -> None:
    assert CASES[KEY]["spark"]["restarted"]  # Spark restarts it: the results are wrong
    window = key
    result = _run(pytester, window)
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert "restorable, but what the state means was not verified" in text
    assert "previous_fingerprint=" in text and "allow_unverified=True" in text
    _run(pytester, window, ", allow_unverified=True").assert_outcomes(passed=1)
    written_by = str(window["root"] / "a.json")
    result = _run(pytester, window, f", previous_fingerprint={written_by!r}")
    result.assert_outcomes(failed=1)
    assert "Restorable, but not safe" in result.stdout.str()
    assert "the results are wrong" in result.stdout.str()
