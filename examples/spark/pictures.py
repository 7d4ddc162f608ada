"""The Spark picture of the PySpark guide: what a new aggregate does to the example streaming job.

``python -m examples.spark.pictures OUT.svg`` draws :func:`page_view_stats` changed into
:func:`page_view_stats_with_last_view` as ``opid diff --render svg`` draws a change, from the two
queries planned in a local session with the ``spark`` fixture's settings. docs/pictures/make.sh
runs it; tests/render/test_spark_picture.py checks that docs/pictures/spark_diff.svg is what it
draws today.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from examples.spark.jobs import page_view_stats, page_view_stats_with_last_view

#: The example's committed event files: the plans need an existing folder to read.
EVENTS = Path(__file__).resolve().parent / "data" / "events"


def draw(spark: Any) -> str:
    """The SVG of the change, in the session ``spark``."""
    from pytest_opid import fingerprint
    from pytest_opid.comparison import compare
    from pytest_opid.render.picture import render_diff

    old = fingerprint(page_view_stats(spark, str(EVENTS)))
    new = fingerprint(page_view_stats_with_last_view(spark, str(EVENTS)))
    return render_diff(compare(old, new), "svg")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m examples.spark.pictures OUT.svg", file=sys.stderr)
        return 2
    from pyspark.sql import SparkSession

    from pytest_opid.plugin.spark import SPARK_CONF

    builder = SparkSession.builder.master("local[2]").appName("opid-pictures")
    for key, value in SPARK_CONF.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    try:
        Path(argv[0]).write_text(draw(spark), encoding="utf-8")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
