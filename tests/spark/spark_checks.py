"""Helpers shared by the Spark tests: reading what Spark wrote, and comparing stages."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ORDERS_SCHEMA = "order_id long, customer_id long, amount double, ts timestamp"
CUSTOMERS_SCHEMA = "customer_id long, country string"
EVENTS_SCHEMA = "user long, page string, ts timestamp"


@contextmanager
def sql_conf(spark: Any, settings: dict[str, str]) -> Iterator[None]:
    """Set SQL settings for a block and restore them after, on the one shared session."""
    before = {k: spark.conf.get(k, None) for k in settings}
    for k, v in settings.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def predicted_stages(fingerprint: Any) -> list[tuple[int, tuple[str, ...]]]:
    """A fingerprint's job vertices in the form of :func:`executed_stages` (Spark's RDD scope
    of a file scan is ``Scan <format>``, pytest-opid's node ``FileScan <format>``)."""
    names = {op.node: op.name for op in fingerprint.operators}
    stages = []
    for vertex in fingerprint.job_vertices:
        members = []
        for node in vertex.nodes:
            name = names[node]
            if name.startswith("FileScan "):
                name = name[len("File") :]
            if name != "Exchange":
                members.append(name)
        stages.append((vertex.parallelism, tuple(sorted(members))))
    return sorted(stages)


def state_directories(checkpoint: Path) -> dict[int, str]:
    """``state/<n>`` -> the operator name Spark wrote into that directory's metadata."""
    found = {}
    for directory in sorted((checkpoint / "state").iterdir()):
        metadata = directory / "_metadata" / "metadata"
        lines = metadata.read_text(encoding="utf-8").splitlines()
        info = json.loads(lines[1])["operatorInfo"]
        assert info["operatorId"] == int(directory.name)
        found[int(directory.name)] = info["operatorName"]
    return found


def state_key_fields(checkpoint: Path, state_operator_id: int) -> set[str]:
    """Column names of the key schema Spark stored for ``state/<n>`` (partition 0)."""
    schema = checkpoint / "state" / str(state_operator_id) / "0" / "_metadata" / "schema"
    text = schema.read_bytes().decode("utf-8", "replace")
    fields: set[str] = set()
    start = text.find('{"type":"struct"')
    if start >= 0:
        key, _ = json.JSONDecoder().raw_decode(text[start:])
        fields = {f["name"] for f in key["fields"]}
    return fields


# -- pipelines built twice (other names, other literals, other processes) -----------------------


def orders_pipeline(
    spark: Any,
    paths: dict[str, str],
    *,
    key: str = "customer",
    value: str = "amount_eur",
    total: str = "total",
    threshold: float = 10.0,
    country: str = "FR",
) -> Any:
    """A batch job: filter orders, join customers, aggregate per customer and country.

    Its first step renames the input columns; a rename that is no rename (``amount`` to
    ``amount``) is no Project in Spark's plan, so the defaults rename for real."""
    from pyspark.sql import functions as F

    orders = spark.read.parquet(paths["orders"]).select(
        F.col("customer_id").alias(key), F.col("amount").alias(value)
    )
    customers = (
        spark.read.schema(CUSTOMERS_SCHEMA)
        .json(paths["customers"])
        .select(F.col("customer_id").alias(key), F.col("country").alias(f"{key}_country"))
    )
    return (
        orders.filter(F.col(value) > threshold)
        .join(customers.filter(F.col(f"{key}_country") != country), key)
        .groupBy(key, f"{key}_country")
        .agg(F.sum(value).alias(total), F.count(F.lit(1)).alias(f"{total}_n"))
    )


def events_pipeline(
    spark: Any,
    path: str,
    *,
    user: str = "visitor",
    page: str = "url",
    delay: str = "1 minute",
    window: str = "10 seconds",
) -> Any:
    """A streaming job: watermark, deduplicate, count per page and window."""
    from pyspark.sql import functions as F

    events = spark.readStream.schema(EVENTS_SCHEMA).json(path)
    renamed = events.select(F.col("user").alias(user), F.col("page").alias(page), "ts")
    return (
        renamed.withWatermark("ts", delay)
        .dropDuplicates([user, "ts"])
        .groupBy(F.window("ts", window), page)
        .count()
    )
