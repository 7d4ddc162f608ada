"""Two PySpark pipelines as a data team would write them, each a function from inputs to the
DataFrame it runs, so that tests can build it without running it.

* :func:`daily_revenue`, a batch job: paid orders (parquet) joined with the customer dimension
  (CSV), revenue per country, customer segment and day.
* :func:`page_view_stats`, a Structured Streaming job: page-view events (JSON files) with a
  watermark, deduplicated by event id, counted per page in 5-minute windows.
"""

from __future__ import annotations

from typing import Any

ORDERS_SCHEMA = "order_id long, customer_id long, amount decimal(12,2), status string, ts timestamp"
CUSTOMERS_SCHEMA = "customer_id long, country string, segment string"
EVENTS_SCHEMA = "event_id string, user_id long, page string, event_time timestamp"


def daily_revenue(spark: Any, orders_path: str, customers_path: str) -> Any:
    from pyspark.sql import functions as F

    orders = spark.read.schema(ORDERS_SCHEMA).parquet(orders_path)
    customers = spark.read.schema(CUSTOMERS_SCHEMA).option("header", "true").csv(customers_path)
    paid = orders.filter(F.col("status") == "PAID").withColumn("day", F.to_date("ts"))
    # The hint pins the join strategy: left to itself, Spark picks a broadcast or a sort-merge
    # join from the size of the files, and the plan would depend on the test data.
    enriched = paid.join(F.broadcast(customers), "customer_id")
    return enriched.groupBy("country", "segment", "day").agg(
        F.sum("amount").alias("revenue"),
        F.countDistinct("customer_id").alias("customers"),
    )


def page_view_stats(spark: Any, events_path: str) -> Any:
    from pyspark.sql import functions as F

    events = spark.readStream.schema(EVENTS_SCHEMA).json(events_path)
    return (
        events.withWatermark("event_time", "10 minutes")
        .dropDuplicates(["event_id", "event_time"])
        .groupBy(F.window("event_time", "5 minutes"), "page")
        .agg(F.count("*").alias("views"), F.approx_count_distinct("user_id").alias("visitors"))
    )


def page_view_stats_with_last_view(spark: Any, events_path: str) -> Any:
    """The next version someone proposes: :func:`page_view_stats` with the time of the last
    view per window and page. A new aggregate changes the aggregation's state (its value
    schema): Spark refuses to restart this on the old checkpoint."""
    from pyspark.sql import functions as F

    events = spark.readStream.schema(EVENTS_SCHEMA).json(events_path)
    return (
        events.withWatermark("event_time", "10 minutes")
        .dropDuplicates(["event_id", "event_time"])
        .groupBy(F.window("event_time", "5 minutes"), "page")
        .agg(
            F.count("*").alias("views"),
            F.approx_count_distinct("user_id").alias("visitors"),
            F.max("event_time").alias("last_view"),
        )
    )


def page_view_stats_without_health_checks(spark: Any, events_path: str) -> Any:
    """A harmless next version: :func:`page_view_stats` without the load balancer's health
    checks. A filter in front of the stateful operators moves every operator ID below it but
    no state: Spark restarts it on the old checkpoint, and its snapshot diff is a few lines."""
    from pyspark.sql import functions as F

    events = spark.readStream.schema(EVENTS_SCHEMA).json(events_path)
    return (
        events.filter(F.col("page") != "/health")
        .withWatermark("event_time", "10 minutes")
        .dropDuplicates(["event_id", "event_time"])
        .groupBy(F.window("event_time", "5 minutes"), "page")
        .agg(F.count("*").alias("views"), F.approx_count_distinct("user_id").alias("visitors"))
    )


def start_page_view_stats(stats: Any, output_path: str, checkpoint: str) -> Any:
    """How the streaming job runs in production: its checkpoint holds the state under
    ``state/<n>``, numbered by the stateful operators' position in the plan."""
    return (
        stats.writeStream.format("parquet")
        .outputMode("append")
        .option("path", output_path)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="1 minute")
        .start()
    )
