"""Python UDFs in a batch plan's tree: Spark names their results pythonUDF0, 1... and its plan
JSON keeps each UDF's own name, so the tree writes ``plus_one(id)``. Grouping by another UDF,
or grouping with another applyInPandas function or pandas aggregate UDF, is a change; another
UDF in a projection or a mapInPandas function is row-wise work, as a Project is."""

from __future__ import annotations

import pandas as pd
import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

import pytest_opid
from pytest_opid.spark.versions import SparkLine, installed_line

#: The operator Spark evaluates a plain Python UDF with: pickled rows (BatchEvalPython) until
#: Spark 4.2 made Arrow its default (SPARK-54555, spark.sql.execution.pythonUDF.arrow.enabled).
EVAL_PYTHON = "ArrowEvalPython" if installed_line() >= SparkLine(4, 2) else "BatchEvalPython"
#: A pandas aggregate UDF's operator: AggregateInPandas until Spark 4.1 renamed it.
AGGREGATE_PYTHON = (
    "ArrowAggregatePython" if installed_line() >= SparkLine(4, 1) else "AggregateInPandas"
)


def plus_one(x):
    return x + 1


def times_two(x):
    return x * 2


def mean_of(v: pd.Series) -> float:
    return float(v.mean())


def max_of(v: pd.Series) -> float:
    return float(v.max())


@pytest.fixture(scope="module")
def udfs(spark):
    """The UDFs, made once a session exists (PySpark checks for one when a UDF is made)."""
    return {
        "plus_one": F.udf(plus_one, T.LongType()),
        "times_two": F.udf(times_two, T.LongType()),
        "mean_of": F.pandas_udf(mean_of, "double"),
        "max_of": F.pandas_udf(max_of, "double"),
    }


def normalize(pdf):
    return pdf


def center(pdf):
    return pdf


def keep(batches):
    yield from batches


def drop_none(batches):
    yield from batches


def _base(spark):
    return spark.range(10).selectExpr("id % 3 AS k", "CAST(id AS double) AS v")


def _executed(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def _verdict(old, new):
    comparison = pytest_opid.compare(pytest_opid.fingerprint(old), pytest_opid.fingerprint(new))
    return comparison.breaks("chains"), pytest_opid.explain(comparison, "chains")


def test_grouping_by_another_udf_is_a_change(spark, udfs):
    a = spark.range(10).groupBy(udfs["plus_one"]("id").alias("g")).count()
    b = spark.range(10).groupBy(udfs["times_two"]("id").alias("g")).count()
    # Spark: the same operators, other UDFs.
    assert "plus_one(id" in _executed(a) and "times_two(id" in _executed(b)
    assert f"{EVAL_PYTHON} [plus_one(id" in _executed(a)
    fp = pytest_opid.fingerprint(a)
    assert fp.plan[0] == "HashAggregate keys [plus_one(id)] functions [count(1)]"
    assert f"{EVAL_PYTHON} [plus_one(id)]" in [line.strip() for line in fp.plan]
    breaks, text = _verdict(a, b)
    assert breaks
    headline = text.splitlines()[0]
    assert "hashpartitioning [plus_one(id)] -> hashpartitioning [times_two(id)]" in headline


@pytest.mark.parametrize(
    ("kind", "old", "new", "line"),
    [
        (
            "applyInPandas",
            lambda df, u: df.groupBy("k").applyInPandas(normalize, "k long, v double"),
            lambda df, u: df.groupBy("k").applyInPandas(center, "k long, v double"),
            "FlatMapGroupsInPandas keys [(id % 3)] function normalize(",
        ),
        (
            "pandas aggregate UDF",
            lambda df, u: df.groupBy("k").agg(u["mean_of"]("v").alias("m")),
            lambda df, u: df.groupBy("k").agg(u["max_of"]("v").alias("m")),
            f"{AGGREGATE_PYTHON} keys [(id % 3)] functions [mean_of(cast(id as double))]",
        ),
    ],
)
def test_another_grouped_python_function_is_a_change(spark, udfs, kind, old, new, line):
    a, b = old(_base(spark), udfs), new(_base(spark), udfs)
    assert f"{line.split()[0]} [" in _executed(a), kind  # Spark's own name for the operator
    assert line in pytest_opid.fingerprint(a).plan[0], kind
    breaks, text = _verdict(a, b)
    assert breaks, text


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (
            lambda df, u: df.select("k", u["plus_one"]("k").alias("u")),
            lambda df, u: df.select("k", u["times_two"]("k").alias("u")),
        ),
        (
            lambda df, u: df.mapInPandas(keep, "k long, v double"),
            lambda df, u: df.mapInPandas(drop_none, "k long, v double"),
        ),
    ],
    ids=["udf in a projection", "mapInPandas"],
)
def test_another_row_wise_python_function_passes_and_is_counted(spark, udfs, old, new):
    a, b = old(_base(spark), udfs), new(_base(spark), udfs)
    fa, fb = pytest_opid.fingerprint(a), pytest_opid.fingerprint(b)
    assert fa.plan != fb.plan  # told apart...
    breaks, text = _verdict(a, b)
    assert not breaks, text  # ...and row-wise, as a Project
    assert text.startswith("Stages unchanged [checked: stages]"), text
