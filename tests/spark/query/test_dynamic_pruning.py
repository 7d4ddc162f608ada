"""Dynamic partition pruning: a join on a partitioned table's partition column makes Spark
prune the table's partitions with a subquery over the other side (``SubqueryBroadcast``),
whose broadcast the join then reuses. That subquery holds the other side's tables and
filters, shown nowhere else: the tree writes it under the scan it prunes, so another table
there is a change."""

from __future__ import annotations

import pytest

import pytest_opid

SALES, DATES, DATES2 = "opid_dpp_sales", "opid_dpp_dates", "opid_dpp_dates2"


@pytest.fixture(scope="module")
def pruned_tables(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("dpp")
    spark.sql(
        f"CREATE TABLE {SALES} (item INT, amount DOUBLE, d DATE) USING parquet "
        f"PARTITIONED BY (d) LOCATION '{root / SALES}'"
    )
    spark.sql(f"INSERT INTO {SALES} VALUES (1, 2.0, DATE'2024-01-01'), (2, 3.0, DATE'2024-01-02')")
    for name in (DATES, DATES2):
        spark.sql(f"CREATE TABLE {name} (d DATE, year INT) USING parquet LOCATION '{root / name}'")
        spark.sql(f"INSERT INTO {name} VALUES (DATE'2024-01-01', 2024)")
    yield
    for name in (SALES, DATES, DATES2):
        spark.sql(f"DROP TABLE IF EXISTS {name}")


def _query(spark, dates):
    return spark.sql(
        f"SELECT s.item, sum(s.amount) FROM {SALES} s JOIN {dates} t ON s.d = t.d "
        "WHERE t.year = 2024 GROUP BY s.item"
    )


def test_the_pruning_subquery_is_under_the_scan_it_prunes(spark, pruned_tables):
    df = _query(spark, DATES)
    executed = df._jdf.queryExecution().executedPlan().toString()
    # Spark: the fact scan is pruned by a broadcast subquery the join reuses.
    assert "dynamicpruningexpression" in executed and "SubqueryBroadcast" in executed
    assert "ReusedExchange" in executed
    tree = pytest_opid.fingerprint(df).plan
    scan = next(i for i, line in enumerate(tree) if f"default.{SALES} " in line)
    depth = len(tree[scan]) - len(tree[scan].lstrip())
    below = [line.strip() for line in tree[scan + 1 : scan + 6]]
    assert below[0] == "SubqueryBroadcast #1"
    assert below[1] == "BroadcastExchange"
    assert any(f"default.{DATES} [d, year]" in line for line in below)
    assert len(tree[scan + 1]) - len(tree[scan + 1].lstrip()) == depth + 2
    assert tree[-1].strip() == "ReusedBroadcastExchange"  # the join's build side


def test_another_table_on_the_pruning_side_is_a_change(spark, pruned_tables):
    old = pytest_opid.fingerprint(_query(spark, DATES))
    new = pytest_opid.fingerprint(_query(spark, DATES2))
    comparison = pytest_opid.compare(old, new)
    assert comparison.breaks("chains")
    headline = pytest_opid.explain(comparison, "chains").splitlines()[0]
    assert f"Scan changed: spark_catalog.default.{DATES} [d, year] -> " in headline, headline
    assert f"default.{DATES2} [d, year]" in headline
