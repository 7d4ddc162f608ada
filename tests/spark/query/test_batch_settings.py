"""Shuffle partitions are a session conf, recorded once (issue 22, item 4).

Spark sizes the exchanges it plans itself (``ENSURE_REQUIREMENTS``, ``repartition(col)``) with
``spark.sql.shuffle.partitions``. A batch fingerprint records that conf once in ``[settings]``
and gives those exchanges' operators parallelism -1, so running the tests under another
setting changes one line of a snapshot and the verdict says "conf changed" once. A number the
query asks for itself (``repartition(10)``) stays the stage's parallelism.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest_opid
from pytest_opid.engines import engine_rules
from pytest_opid.io.snapshot import dumps, loads

CONF = "spark.sql.shuffle.partitions"


@contextmanager
def _partitions(spark: Any, n: int) -> Iterator[None]:
    was = spark.conf.get(CONF)
    spark.conf.set(CONF, str(n))
    try:
        yield
    finally:
        spark.conf.set(CONF, was)


def _snapshot(fp: Any) -> str:
    rules = engine_rules(fp.engine, fp)
    return dumps(rules.snapshot_form(fp), rules.snapshot_preamble(fp))


def _query(spark: Any, tables: dict[str, str]) -> Any:
    orders = spark.read.parquet(tables["orders"])
    per_customer = orders.groupBy("customer_id").count()
    return per_customer.join(orders, "customer_id").groupBy("count").sum("amount").orderBy("count")


def test_a_shuffle_partitions_change_is_one_line_and_one_note(spark, tables):
    with _partitions(spark, 4):
        few = pytest_opid.fingerprint(_query(spark, tables))
    with _partitions(spark, 200):
        many = pytest_opid.fingerprint(_query(spark, tables))
    # Spark itself planned the exchanges with each number.
    with _partitions(spark, 4):
        plan = _query(spark, tables)._jdf.queryExecution().executedPlan().toString()
    assert ", 4)" in plan  # hashpartitioning(..., 4)

    assert few.settings == ((CONF, "4"),) and many.settings == ((CONF, "200"),)
    assert few.operators == many.operators and few.job_vertices == many.job_vertices
    assert few.plan == many.plan
    assert all(op.parallelism in (-1, 1) for op in few.operators)  # none says 4 or 200
    changed = [
        line
        for line in difflib.unified_diff(
            _snapshot(few).splitlines(), _snapshot(many).splitlines(), n=0, lineterm=""
        )
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    assert changed == [f'-"{CONF}"  "4"', f'+"{CONF}"  "200"']

    comparison = pytest_opid.compare(loads(_snapshot(few)), loads(_snapshot(many)))
    assert not comparison.breaks("chains")
    text = pytest_opid.explain(comparison, "chains")
    assert text.count("conf changed") == 1
    assert f"conf changed: {CONF} 4 -> 200" in text


def test_a_number_the_query_asks_for_stays_the_stages_parallelism(spark, tables):
    orders = spark.read.parquet(tables["orders"])
    with _partitions(spark, 10):
        by_number = pytest_opid.fingerprint(orders.repartition(10, "customer_id"))
        by_conf = pytest_opid.fingerprint(orders.repartition("customer_id"))
    assert by_conf.settings == ((CONF, "10"),)
    assert by_number.settings == ()
    assert {op.parallelism for op in by_number.operators} >= {10}
    assert any(line.endswith("into 10 partitions") for line in by_number.plan or ())
    assert not any("partitions" in line for line in by_conf.plan or ())


def test_a_format_3_snapshot_of_the_same_job_still_passes(spark, tables):
    """A snapshot written before settings and plans were recorded (parallelism per stage, no
    [plan]) still matches: nothing it holds changed."""
    with _partitions(spark, 4):
        new = pytest_opid.fingerprint(_query(spark, tables))
    old = new.__class__(
        tuple(
            op._replace(parallelism=4 if op.parallelism == -1 and op.node > 2 else op.parallelism)
            for op in new.operators
        ),
        new.job_vertices,
        None,
        new.engine,
        new.mode,
    )
    text = dumps(old).replace("format 5", "format 3", 1).replace("\n[end]\n", "\n")
    comparison = pytest_opid.compare(loads(text), new)
    assert not comparison.breaks("chains")
    assert "conf changed" not in pytest_opid.explain(comparison, "chains")
