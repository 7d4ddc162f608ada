"""``pytest_opid.demonstrate`` under PySpark 3.5 (Scala 2.12: the plan's sources are moved
without ``productElementName``), judged by what real Spark 3.5.9 did (tests/data/spark-restart-35,
its own truth: 3.5 names exceptions, not error classes). The whole 3.5 corpus:
``python tests/spark/demonstrate_corpus.py`` under PySpark 3.5."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.spark.demonstrate_corpus import dataframe, pairs

pytestmark = pytest.mark.spark_line(
    "3.5", last="3.5", reason="the data's truth is Spark 3.5.9's restarts (spark-restart-35)"
)

KNOBS = {"seed": 41, "examples": 1, "shrink_seconds": 0.0}


def _demonstrate(spark: Any, tmp_path: Path, case_id: str) -> tuple[dict[str, Any], Any]:
    import pytest_opid

    pair = next(p for p in pairs(("spark-restart-35",)) if p["id"] == case_id)
    a = dataframe(spark, pair, "before", tmp_path / "inputs")
    b = dataframe(spark, pair, "after", tmp_path / "inputs")
    return pair, pytest_opid.demonstrate(a, b, **KNOBS)


def test_refused_where_spark_35_refused(spark: Any, tmp_path: Path) -> None:
    pair, result = _demonstrate(
        spark, tmp_path, "apply_in_pandas_with_state__change_state_field_type__150052"
    )
    assert pair["truth"] == "refused"
    assert result.outcome == "refused"
    assert result.error_class == pair["rec"]["spark"]["exception_class"]  # StateSchemaNotCompatible


def test_restarted_where_spark_35_restarted(spark: Any, tmp_path: Path) -> None:
    pair, result = _demonstrate(spark, tmp_path, "agg_user_sum__change_shuffle_partitions__150005")
    assert pair["truth"] == "restarted"
    assert result.outcome in ("same", "differs")
    assert result.examples == 1
