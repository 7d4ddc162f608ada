"""Spark batch fingerprints over a corpus of TPC-DS-like SQL queries (tests/data/tpcds-like).

Three promises, each checked against Spark's own executed plan first:

* different queries get different fingerprints and different snapshot texts (a table, a
  grouping column, a join key or type, an aggregate function, an ORDER BY key, a subquery are
  all told apart);
* texts Spark plans the same way (aliases renamed, reformatted, a subquery written as a CTE) get
  the same fingerprint and the same snapshot text, with no expression ids and no paths in it;
* a structural edit is reported as a change, in words that name what changed (the tables, the
  keys, the join type, the subquery); a row-wise edit (another literal in a filter, a column
  more or less in the output) is not.

The tables are created empty in the shared ``spark`` session; each query text is planned and
fingerprinted once per module.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from itertools import combinations
from typing import Any, NamedTuple

import pytest

import pytest_opid
from pytest_opid.io.snapshot import dumps, loads
from pytest_opid.plugin.extension import engine_rules
from pytest_opid.spark.versions import SparkLine, installed_line
from tests.spark import tpcds_like

QUERIES = tpcds_like.texts("queries")
VARIANTS = tpcds_like.texts("variants")
CONTROLS = tpcds_like.texts("controls")
TEXTS = {**QUERIES, **VARIANTS, **CONTROLS}

FLINK_WORDS = ("savepoint", "uid(", "Flink", "chain", "setUidHash", "allowNonRestoredState")


class Planned(NamedTuple):
    df: Any
    fingerprint: Any
    snapshot: str  # the text the plugin writes to the .opid file


@pytest.fixture(scope="session")
def tpcds_tables(spark: Any) -> list[str]:
    """The corpus's ten tables, created empty in the shared session's catalog."""
    return tpcds_like.create_tables(spark)


def _snapshot_text(fp: Any) -> str:
    """The snapshot text, as the plugin's ``serialize`` writes it."""
    rules = engine_rules(fp.engine, fp)
    return dumps(rules.snapshot_form(fp), rules.snapshot_preamble(fp))


@pytest.fixture(scope="module")
def planned(spark: Any, tpcds_tables: list[str]) -> Callable[[str], Planned]:
    """A query of the corpus by name, planned and fingerprinted once per module."""
    cache: dict[str, Planned] = {}

    def get(name: str) -> Planned:
        if name not in cache:
            df = spark.sql(TEXTS[name])
            fp = pytest_opid.fingerprint(df)
            cache[name] = Planned(df, fp, _snapshot_text(fp))
        return cache[name]

    return get


# --- What Spark itself planned -------------------------------------------------------------


def _physical(df: Any) -> Any:
    """Spark's executed plan (a JVM SparkPlan)."""
    return df._jdf.queryExecution().executedPlan()


def _executed(df: Any) -> str:
    return _physical(df).toString()


def _operators(df: Any) -> list[str]:
    """The executed plan's operators, one per line with its depth: its shape, no expressions."""
    shape = []
    for line in _executed(df).splitlines():
        body = line.lstrip(" +-:")
        depth = len(line) - len(body)
        body = re.sub(r"^\*\(\d+\) ", "", body)
        name = re.split(r"[ (\[]", body, maxsplit=1)[0]
        shape.append(f"{depth} {name}")
    return shape


def _exchanges(df: Any) -> list[str]:
    """The executed plan's exchanges with their partitioning, without expression ids."""
    lines = [line.strip(" +-:*") for line in _executed(df).splitlines() if "Exchange" in line]
    return [re.sub(r"#\d+L?|, \[plan_id=\d+\]", "", line) for line in lines]


def _joins(df: Any) -> list[str]:
    """The executed plan's join lines, without expression ids."""
    found = re.findall(r"(\w+Join) (.*)", _executed(df))
    return [f"{kind} {re.sub(r'#[0-9]+L?', '', rest)}" for kind, rest in found]


def _scans(df: Any) -> list[str]:
    """The tables the executed plan scans."""
    return re.findall(r"FileScan parquet spark_catalog\.default\.(\w+)\[", _executed(df))


# --- The corpus ----------------------------------------------------------------------------


def test_the_corpus_is_as_described(spark, tpcds_tables):
    assert len(tpcds_tables) == 10
    for table in tpcds_tables:
        assert spark.catalog.tableExists(table), table
        assert spark.table(table).count() == 0, table  # empty: only plans are fingerprinted
    assert 30 <= len(QUERIES) <= 40
    assert len(set(QUERIES.values())) == len(QUERIES)
    for name in [*VARIANTS, *CONTROLS]:
        assert name.split("-")[0] in QUERIES, name
    # Every table of tables.sql is read by some query.
    read = set().union(*(re.findall(r"\b[a-z_]+\b", text) for text in QUERIES.values()))
    assert set(tpcds_tables) <= read


# --- Different queries, different fingerprints ---------------------------------------------


def _collisions(names: list[str], same: Callable[[str, str], bool]) -> list[list[str]]:
    groups: list[list[str]] = []
    for name in names:
        for group in groups:
            if same(group[0], name):
                group.append(name)
                break
        else:
            groups.append([name])
    return [group for group in groups if len(group) > 1]


def test_every_two_queries_have_different_fingerprints(planned):
    names = sorted(QUERIES)
    for name in names:
        planned(name)
    # Spark: no two queries of the corpus have the same executed plan.
    same_in_spark = _collisions(
        names,
        lambda a, b: _physical(planned(a).df).sameResult(_physical(planned(b).df)),
    )
    assert not same_in_spark, f"the corpus has queries Spark plans the same: {same_in_spark}"
    equal = _collisions(names, lambda a, b: planned(a).fingerprint == planned(b).fingerprint)
    assert not equal, f"different queries with equal fingerprints (==): {equal}"
    for a, b in combinations(names, 2):
        assert planned(a).fingerprint != planned(b).fingerprint, (a, b)


def test_every_two_queries_have_different_snapshot_texts(planned):
    names = sorted(QUERIES)
    texts = {name: planned(name).snapshot for name in names}
    equal = _collisions(names, lambda a, b: texts[a] == texts[b])
    assert not equal, f"different queries with the same snapshot text: {equal}"


# --- Same plan, same fingerprint -----------------------------------------------------------


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_text_spark_plans_the_same_has_the_same_fingerprint(planned, variant):
    base = variant.split("-")[0]
    old, new = planned(base), planned(variant)
    # Spark: the same operators in the same tree; where the output columns keep their names,
    # the very same plan (sameResult: equal up to expression ids).
    assert _operators(old.df) == _operators(new.df)
    if old.df.columns == new.df.columns:
        assert _physical(old.df).sameResult(_physical(new.df))
    assert new.fingerprint == old.fingerprint
    assert new.snapshot == old.snapshot


@pytest.mark.parametrize("name", ["q01", "q09", "q30", "q37"])
def test_the_same_query_fingerprinted_twice_is_identical(spark, tpcds_tables, name):
    first = pytest_opid.fingerprint(spark.sql(TEXTS[name]))
    second = pytest_opid.fingerprint(spark.sql(TEXTS[name]))
    assert first == second
    assert _snapshot_text(first) == _snapshot_text(second)


def test_snapshot_texts_hold_no_expression_ids_and_no_paths(spark, planned):
    warehouse = spark.conf.get("spark.sql.warehouse.dir")
    bare = warehouse.removeprefix("file:")
    for name in sorted(TEXTS):
        text = planned(name).snapshot
        # Spark's expression ids (ss_item_sk#14); a subquery's number (Subquery #1) is ours.
        assert not re.search(r"\w#\d", text), (name, re.findall(r".*\w#\d.*", text))
        assert "file:" not in text and bare not in text, name
        assert "/tmp" not in text and "spark-warehouse" not in text, name
        assert "[plan]" in text, name
        # The session's shuffle partitions, recorded once where an exchange is sized by them.
        sized_by_conf = re.search(r"partitioning\(.*, 4\)", _executed(planned(name).df))
        assert ('"spark.sql.shuffle.partitions"  "4"' in text) == bool(sized_by_conf), name


@pytest.mark.parametrize("name", ["q07", "q27", "q35", "q39"])
def test_a_grouping_sets_key_is_the_grouping_id_not_a_literal(planned, name):
    """ROLLUP, CUBE and GROUPING SETS group by the columns and Spark's spark_grouping_id, which
    the Expand below sets per grouping set (0, 1, 3, ...): the key is that column, not the
    first grouping set's value."""
    planned_query = planned(name)
    # Spark: the exchange and the aggregates are keyed by spark_grouping_id.
    exchanges = [e for e in _exchanges(planned_query.df) if "hashpartitioning" in e]
    assert len(exchanges) == 1 and "spark_grouping_id, 4)" in exchanges[0], exchanges
    lines = [line.strip() for line in planned_query.fingerprint.plan]
    keyed = [line for line in lines if line.startswith(("Exchange hash", "HashAggregate keys"))]
    assert len(keyed) == 3, keyed
    for line in keyed:
        assert "spark_grouping_id" in line, f"{name}: {line!r}"
        assert ", 0]" not in line, f"{name}: {line!r}"


# --- Structural edits, said in words -------------------------------------------------------


def _spark_table_swapped(old: Any, new: Any) -> None:
    assert "store_sales" in _scans(old) and "catalog_sales" not in _scans(old)
    assert "catalog_sales" in _scans(new) and "store_sales" not in _scans(new)
    assert len(_exchanges(old)) == len(_exchanges(new))


def _spark_group_by_added(old: Any, new: Any) -> None:
    assert "Exchange hashpartitioning(i_item_id, 4)" in _exchanges(old)[0]
    assert "Exchange hashpartitioning(i_item_id, i_category, 4)" in _exchanges(new)[0]


def _spark_group_by_swapped(old: Any, new: Any) -> None:
    assert "Exchange hashpartitioning(i_item_id, 4)" in _exchanges(old)[0]
    assert "Exchange hashpartitioning(i_brand, 4)" in _exchanges(new)[0]


#: The flags Spark prints after a broadcast hash join's build side: isNullAwareAntiJoin, and
#: from Spark 4.2 on isSkewJoin too (SPARK-44065); Spark 3.5 to 4.1 print the first only.
_BHJ_FLAGS = "false, false" if installed_line() >= SparkLine(4, 2) else "false"


def _spark_join_key(old: Any, new: Any) -> None:
    assert _joins(old) == [
        f"BroadcastHashJoin [ss_promo_sk], [p_promo_sk], Inner, BuildRight, {_BHJ_FLAGS}"
    ]
    assert _joins(new) == [
        f"BroadcastHashJoin [ss_item_sk], [p_item_sk], Inner, BuildRight, {_BHJ_FLAGS}"
    ]


def _spark_join_type(old: Any, new: Any) -> None:
    assert ", Inner, BuildRight" in _joins(old)[0]
    assert ", LeftOuter, BuildRight" in _joins(new)[0]


def _spark_join_strategy(old: Any, new: Any) -> None:
    assert [j.split()[0] for j in _joins(old)] == ["BroadcastHashJoin"]
    assert [j.split()[0] for j in _joins(new)] == ["SortMergeJoin"]
    assert "BroadcastExchange" not in _executed(new)


def _spark_subquery_added(old: Any, new: Any) -> None:
    assert "scalar-subquery" not in _executed(old)
    assert "Subquery scalar-subquery" in _executed(new)


def _spark_aggregate_function(old: Any, new: Any) -> None:
    assert "functions=[avg(ss_quantity" in _executed(old)
    assert "functions=[sum(ss_quantity" in _executed(new)
    assert _exchanges(old) == _exchanges(new)


def _spark_order_by(old: Any, new: Any) -> None:
    assert "orderBy=[total_paid" in _executed(old)
    assert "orderBy=[c_customer_id" in _executed(new)


def _spark_join_added(old: Any, new: Any) -> None:
    assert "store" not in _scans(old) and "store" in _scans(new)
    assert len(_joins(new)) == len(_joins(old)) + 1


def _spark_grouping_sets(old: Any, new: Any) -> None:
    def expand(df: Any) -> str:
        lines = [line for line in _executed(df).splitlines() if "Expand [" in line]
        assert len(lines) == 1, lines
        return re.sub(r"#\d+L?", "", lines[0])

    before, after = expand(old), expand(new)
    assert "[ss_net_profit, s_state, null, 1]" in before
    assert "[ss_net_profit, null, s_county, 2]" in after


class Edit(NamedTuple):
    old: str
    new: str
    spark: Callable[[Any, Any], None]
    # Substrings the explanation must hold, each on one line (a tuple: all on the same line).
    facts: tuple[tuple[str, ...], ...]
    # Substrings the first line (the headline) must hold.
    headline: tuple[str, ...]


EDITS = {
    "table swapped": Edit(
        "q01",
        "q02",
        _spark_table_swapped,
        (("store_sales", "catalog_sales"), ("Scan", "catalog_sales")),
        ("catalog_sales",),
    ),
    "group by column added": Edit(
        "q01",
        "q04",
        _spark_group_by_added,
        (("Exchange", "i_item_id, i_category"), ("HashAggregate", "keys [i_item_id, i_category]")),
        ("i_category",),
    ),
    "group by column swapped": Edit(
        "q01",
        "q05",
        _spark_group_by_swapped,
        (("Exchange", "[i_item_id]", "[i_brand]"),),
        ("i_brand",),
    ),
    "join key changed": Edit(
        "q18",
        "q19",
        _spark_join_key,
        (("Join", "ss_promo_sk", "p_promo_sk", "ss_item_sk", "p_item_sk"),),
        ("ss_item_sk", "p_item_sk"),
    ),
    "join type changed": Edit(
        "q15",
        "q14",
        _spark_join_type,
        (("Join", "Inner", "LeftOuter"),),
        ("LeftOuter",),
    ),
    "broadcast to sort-merge join": Edit(
        "q22",
        "q23",
        _spark_join_strategy,
        (("join strategy", "BroadcastHashJoin", "SortMergeJoin"),),
        ("join strategy", "SortMergeJoin"),
    ),
    "scalar subquery added": Edit(
        "q01",
        "q24",
        _spark_subquery_added,
        (("Subquery",), ("avg(ss_quantity)",)),
        ("Subquery",),
    ),
    "aggregate function changed": Edit(
        "q01",
        "q06",
        _spark_aggregate_function,
        (("HashAggregate", "avg(ss_quantity)", "sum(ss_quantity)"),),
        ("sum(ss_quantity)",),
    ),
    "order by key changed": Edit(
        "q20",
        "q21",
        _spark_order_by,
        (("order", "sum(ss_net_paid)", "c_customer_id"),),
        ("c_customer_id",),
    ),
    "join added": Edit(
        "q01",
        "q25",
        _spark_join_added,
        (("Join", "ss_store_sk", "s_store_sk"), ("spark_catalog.default.store ",)),
        ("store",),
    ),
    "grouping sets changed": Edit(
        "q07",
        "q39",
        _spark_grouping_sets,
        (("Expand", "s_state, null", "null, s_county"),),
        ("Expand",),
    ),
}


def _saved_comparison(planned: Callable[[str], Planned], old: str, new: str) -> Any:
    """Compare two queries as their snapshots hold them (read back from the text)."""
    return pytest_opid.compare(loads(planned(old).snapshot), loads(planned(new).snapshot))


@pytest.mark.parametrize("kind", sorted(EDITS))
def test_a_structural_edit_is_reported_in_words(planned, kind):
    edit = EDITS[kind]
    old, new = planned(edit.old), planned(edit.new)
    edit.spark(old.df, new.df)  # Spark: the edit did what its name says
    comparison = _saved_comparison(planned, edit.old, edit.new)
    assert comparison.breaks("chains"), kind
    text = pytest_opid.explain(comparison, "chains")
    lines = text.splitlines()
    for fact in edit.facts:
        assert any(all(part in line for part in fact) for line in lines), (
            f"{kind} ({edit.old} -> {edit.new}): no line names {fact}:\n{text}"
        )
    assert not any(word in text for word in FLINK_WORDS), text
    assert not re.search(r"\w#\d", text), text
    # The same comparison the other way round is a change too.
    assert _saved_comparison(planned, edit.new, edit.old).breaks("chains"), kind


@pytest.mark.parametrize("kind", sorted(EDITS))
def test_the_headline_names_the_edit(planned, kind):
    """The first line is what a reviewer reads first: it names what changed."""
    edit = EDITS[kind]
    comparison = _saved_comparison(planned, edit.old, edit.new)
    headline = pytest_opid.explain(comparison, "chains").splitlines()[0]
    missing = [fact for fact in edit.headline if fact not in headline]
    assert not missing, f"{kind} ({edit.old} -> {edit.new}): {missing} not in {headline!r}"


# --- Row-wise edits are no change of stages -------------------------------------------------


def test_other_literals_in_a_filter_are_no_stage_change(planned):
    old, new = planned("q01"), planned("q01-literals")
    # Spark: the same operators and exchanges; only the Filters' literals differ.
    assert _operators(old.df) == _operators(new.df)
    assert _exchanges(old.df) == _exchanges(new.df)
    assert "(d_year#" in _executed(old.df) and " = 2000)" in _executed(old.df)
    assert " = 2001)" in _executed(new.df) and " = Music)" in _executed(new.df)
    strip = re.compile(r"#\d+L?|= \w+\)|2000|2001|Books|Music|plan_id=\d+")
    assert strip.sub("", _executed(old.df)) == strip.sub("", _executed(new.df))
    comparison = _saved_comparison(planned, "q01", "q01-literals")
    assert not comparison.breaks("chains")
    text = pytest_opid.explain(comparison, "chains")
    assert text.startswith("Stages unchanged [checked: stages]"), text


@pytest.mark.parametrize(
    ("old", "new", "column"),
    [("q10", "q10-extra-column", "c_birth_country"), ("q17", "q17-fewer-columns", "i_brand")],
)
def test_a_column_more_or_less_in_the_output_is_no_stage_change(planned, old, new, column):
    a, b = planned(old), planned(new)
    # Spark: the same operators, exchanges and joins; only Projects and scans' columns differ.
    assert _operators(a.df) == _operators(b.df)
    assert _exchanges(a.df) == _exchanges(b.df)
    assert _joins(a.df) == _joins(b.df)
    assert (column in a.df.columns) != (column in b.df.columns)
    comparison = _saved_comparison(planned, old, new)
    assert not comparison.breaks("chains")
    text = pytest_opid.explain(comparison, "chains")
    assert text.startswith("Stages unchanged [checked: stages]"), text
    assert not any(word in text for word in FLINK_WORDS), text
