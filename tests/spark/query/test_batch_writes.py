"""What a foreachBatch function writes, read from its code without running it: the save mode,
format and target of each ``DataFrameWriter`` call, with the values its code fixes."""

from __future__ import annotations

import os
from typing import Any

from pytest_opid.spark.query.batch_writes import (
    BatchWrite,
    batch_writes,
    write_facts,
    writes_from_facts,
)

PATHS = {"fb": "/data/fb"}
TABLE = "events"


def appends(batch_df: Any, batch_id: int) -> None:
    batch_df.write.mode("append").format("parquet").save(PATHS["fb"])


def overwrites_per_batch(batch_df: Any, batch_id: int) -> None:
    batch_df.write.mode("overwrite").parquet("%s/batch_id=%d" % (PATHS["fb"], batch_id))  # noqa: UP031


def two_writes(frame: Any, epoch: int, suffix: str = "x") -> None:
    frame.write.saveAsTable(TABLE, mode="overwrite")
    frame.write.option("path", os.path.join(PATHS["fb"], f"{suffix}-{epoch}")).save()


def elsewhere(frame: Any, epoch: int) -> None:
    frame.write.mode("append").json(target())


def target() -> str:
    return "/somewhere"


def test_each_write_with_its_mode_format_and_target() -> None:
    assert batch_writes(appends) == (BatchWrite("append", "parquet", "path", "/data/fb"),)
    assert batch_writes(overwrites_per_batch) == (
        BatchWrite("overwrite", "parquet", "path", "/data/fb/batch_id=<batch_id>"),
    )
    assert batch_writes(two_writes) == (
        BatchWrite("overwrite", "default", "table", "events"),
        BatchWrite("errorifexists", "default", "path", "/data/fb/x-<batch_id>"),
    )
    # a value the code does not fix: its source, never a call
    assert batch_writes(elsewhere) == (BatchWrite("append", "json", "path", "{target()}"),)


def test_the_facts_read_back() -> None:
    writes = batch_writes(two_writes)
    assert writes is not None
    facts = dict(write_facts(writes))
    assert facts["writes"] == "2" and facts["write table"] == "events"
    assert facts["write 2 path"] == "/data/fb/x-<batch_id>"
    assert writes_from_facts(facts) == writes
    assert writes_from_facts({}) is None


def test_code_without_source_is_not_read() -> None:
    scope: dict[str, Any] = {}
    exec("def f(df, b):\n    df.write.save('/x')\n", scope)  # no file, no linecache entry
    assert batch_writes(scope["f"]) is None
    assert batch_writes(print) is None
