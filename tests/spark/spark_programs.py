"""Functions for ``opid fingerprint --spark`` tests: what a team's module could hold."""

from __future__ import annotations

from typing import Any


def counts(spark: Any, path: str) -> Any:
    from pyspark.sql import functions as F

    events = spark.readStream.schema("user long, v long").json(path)
    return events.groupBy("user").agg(F.sum("v").alias("total"))


def totals(spark: Any, path: str) -> Any:
    """A batch query: its fingerprint records the session's shuffle partitions."""
    return spark.read.schema("user long, v long").json(path).groupBy("user").sum("v")


def not_a_query(spark: Any) -> Any:
    return 42


def broken(spark: Any, path: str) -> Any:
    raise ValueError(f"no input at {path}\nsecond line")


NOT_CALLABLE = "x"


def exits(spark: Any, path: str) -> Any:
    """A job's main that ends the process instead of returning its query."""
    import sys

    sys.exit(0)


def parses(spark: Any, *argv: str) -> Any:
    """A job's main that parses its own arguments: ``--help`` prints usage and exits 0."""
    import argparse

    parser = argparse.ArgumentParser(prog="job")
    parser.add_argument("path")
    return counts(spark, parser.parse_args(list(argv)).path)
