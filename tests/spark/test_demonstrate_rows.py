"""The rows a demonstration draws (no Spark run): the same seed draws the same rows, nulls only
where the schema allows them, event times per batch around its own step and some further back
by seconds to a day."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, find, settings
from hypothesis.errors import NoSuchExample
from pyspark.sql.types import IntegerType, StringType, StructField, StructType, TimestampType

from pytest_opid.spark.demonstration.rows import REACH, START, Step, batches_strategy

SCHEMA = StructType(
    [
        StructField("user", StringType(), nullable=False),
        StructField("n", IntegerType()),
        StructField("ts", TimestampType()),
    ]
)
STEP = timedelta(minutes=10)


def _draws(seed: int, count: int = 10) -> list[Any]:
    strategy = batches_strategy({"json:in": SCHEMA}, 3, 6, [Step(STEP)])
    seen: list[Any] = []

    def keep(value: Any) -> bool:
        seen.append(value)
        return False

    config = settings(
        max_examples=count,
        database=None,
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
    )
    with pytest.raises(NoSuchExample):  # every draw kept, none "found"
        find(strategy, keep, settings=config, random=random.Random(seed))
    return seen


def test_the_same_seed_draws_the_same_rows() -> None:
    assert _draws(41) == _draws(41)
    assert _draws(41) != _draws(42)


def test_rows_follow_the_schema_and_the_batches() -> None:
    draws = _draws(7, 40)
    rows = [(b, r) for d in draws for b, batch in enumerate(d) for r in batch["json:in"]]
    assert rows
    assert all(r["user"] is not None for _, r in rows)
    assert any(r["n"] is None for _, r in rows)  # nullable: sometimes null
    behind = []
    for number, row in rows:
        if row["ts"] is not None:
            begin = START + STEP * number
            assert row["ts"] < begin + STEP  # never ahead of the batch's step
            back = begin - row["ts"]
            # a minute of REACH, less the row's seconds (0, 1, 30 or 59)
            assert back <= STEP * 1.5 or any(
                timedelta(0) <= timedelta(minutes=m) - back < timedelta(minutes=1) for m in REACH
            )
            behind.append(back)
    # how far back a row reaches spans scales: within a minute, minutes, an hour and more
    assert any(timedelta(0) < b < timedelta(minutes=1) for b in behind)
    assert any(timedelta(minutes=2) <= b <= timedelta(minutes=5) for b in behind)
    assert any(b >= timedelta(hours=1) for b in behind)
    # late rows: some event times fall before their batch's step
    assert any(r["ts"] is not None and r["ts"] < START + STEP * b for b, r in rows if b)
    # keys collide within a batch
    assert any(
        len({r["user"] for r in batch["json:in"]}) < len(batch["json:in"])
        for d in draws
        for batch in d
    )
