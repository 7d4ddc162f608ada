"""Tiny input files for the Spark example jobs. The fingerprints depend on the plan, not on the
data, but Spark needs the paths to exist to build a plan over them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def inputs(spark, tmp_path_factory) -> dict[str, str]:
    root: Path = tmp_path_factory.mktemp("example-inputs")
    spark.createDataFrame(
        [(1, 10, "12.50", "PAID", "2024-05-01 10:00:00")],
        "order_id long, customer_id long, amount string, status string, ts string",
    ).selectExpr(
        "order_id",
        "customer_id",
        "cast(amount as decimal(12,2)) as amount",
        "status",
        "cast(ts as timestamp) as ts",
    ).write.parquet(str(root / "orders"))
    customers = root / "customers"
    customers.mkdir()
    (customers / "customers.csv").write_text(
        "customer_id,country,segment\n10,DE,retail\n", encoding="utf-8"
    )
    events = root / "events"
    events.mkdir()
    event = {"event_id": "e1", "user_id": 1, "page": "/", "event_time": "2024-05-01T10:00:00"}
    (events / "events-0.json").write_text(json.dumps(event) + "\n", encoding="utf-8")
    return {"orders": str(root / "orders"), "customers": str(customers), "events": str(events)}
