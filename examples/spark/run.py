"""Run the example streaming query once, as production would, and leave its checkpoint.

``python -m examples.spark.run EVENTS CHECKPOINT`` starts :func:`page_view_stats` on the JSON
event files in ``EVENTS`` with ``CHECKPOINT`` as its checkpoint location, processes what is
there (``trigger(availableNow=True)``) and stops. It stands in for the production query in the
walkthrough of docs/pyspark-checkpoints.md: a real checkpoint, written by Spark, to check the
next version against.
The session settings are :data:`PRODUCTION_CONF`, the ones the walkthrough passes to
``opid fingerprint --spark ... --conf``.
"""

from __future__ import annotations

import sys
import tempfile

from examples.spark.jobs import page_view_stats

#: What "production" sets: Spark pins these in the checkpoint at the first batch.
PRODUCTION_CONF = {"spark.sql.shuffle.partitions": "8"}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m examples.spark.run EVENTS CHECKPOINT", file=sys.stderr)
        return 2
    events, checkpoint = argv
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").appName("page-view-stats")
    for key, value in {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        **PRODUCTION_CONF,
    }.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        with tempfile.TemporaryDirectory() as output:
            query = (
                page_view_stats(spark, events)
                .writeStream.format("parquet")
                .outputMode("append")
                .option("path", output)
                .option("checkpointLocation", checkpoint)
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination()
            batches = len(query.recentProgress)
    finally:
        spark.stop()
    print(f"ran {batches} batch(es); checkpoint in {checkpoint}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
