"""``pytest_opid.compare()`` takes whatever ``pytest_opid.fingerprint()`` takes (issue 20): a
PySpark DataFrame on either side, a saved fingerprint's JSON, a fingerprint."""

from __future__ import annotations

from typing import Any

import pytest

import pytest_opid


def _stats(spark: Any, path: str, *, with_max: bool) -> Any:
    from pyspark.sql import functions as F

    events = spark.readStream.schema("user long, v long, amount double").json(path)
    aggs = [F.sum("v").alias("sum"), F.count("*").alias("count")]
    if with_max:
        aggs.append(F.max("amount").alias("max"))
    return events.groupBy("user").agg(*aggs)


def test_compare_takes_a_dataframe_on_either_side(spark, tmp_path):
    before = _stats(spark, str(tmp_path), with_max=False)
    after = _stats(spark, str(tmp_path), with_max=True)
    fp = pytest_opid.fingerprint(before)
    mixed = pytest_opid.compare(fp, after)
    both = pytest_opid.compare(before, after)
    saved = pytest_opid.compare(fp.to_json(), after)
    expected = pytest_opid.compare(fp, pytest_opid.fingerprint(after))
    for comparison in (mixed, both, saved):
        assert comparison.engine == "spark"
        assert comparison.to_dict() == expected.to_dict()
        assert comparison.breaks("ids") == expected.breaks("ids")
    assert expected.breaks("ids")  # a new aggregate column changes the state's value schema
    assert "Attribute" not in pytest_opid.explain(mixed)
    assert not pytest_opid.compare(before, before).breaks("both")


def test_compare_names_what_it_cannot_fingerprint(spark, tmp_path):
    fp = pytest_opid.fingerprint(_stats(spark, str(tmp_path), with_max=False))
    with pytest.raises(TypeError, match=r"fingerprint\(\) accepts .*got builtins\.int"):
        pytest_opid.compare(fp, 42)
