"""The plan tree from hand-written plan JSON (no JVM): deep plans, subqueries, exchange sizes,
hostile names and malformed nested plans. Real plans are covered by test_batch_queries.py."""

from __future__ import annotations

import json
import re

import pytest

from pytest_opid.errors import DocumentError
from pytest_opid.io.snapshot import dumps, loads
from pytest_opid.spark.query.fingerprint import fingerprint_graph
from pytest_opid.spark.query.graph import graph_from_plan
from pytest_opid.spark.query.plan_tree import plan_tree

X = "org.apache.spark.sql.execution."
E = "org.apache.spark.sql.catalyst.expressions."


def _attr(name: str, ident: int) -> dict:
    return {
        "class": E + "AttributeReference",
        "num-children": 0,
        "name": name,
        "dataType": "integer",
        "exprId": {"id": ident},
    }


def _scan(table: str, *columns: str) -> dict:
    return {
        "class": X + "FileSourceScanExec",
        "num-children": 0,
        "tableIdentifier": {"table": table, "database": "default", "catalog": "spark_catalog"},
        "requiredSchema": {"type": "struct", "fields": [{"name": c} for c in columns]},
    }


def _exchange(key: dict, count: int, origin: str) -> dict:
    return {
        "class": X + "exchange.ShuffleExchangeExec",
        "num-children": 1,
        "outputPartitioning": [
            {
                "class": "org.apache.spark.sql.catalyst.plans.physical.HashPartitioning",
                "num-children": 1,
                "numPartitions": count,
            },
            key,
        ],
        "shuffleOrigin": {"object": f"{X}exchange.{origin}$"},
    }


def test_a_deep_plan_is_a_deep_tree_without_recursion():
    depth = 30_000
    filters = [{"class": X + "FilterExec", "num-children": 1, "condition": [_attr("a", 1)]}]
    plan = filters * depth + [_scan("t", "a")]
    lines = plan_tree(plan)
    assert len(lines) == depth + 1
    assert lines[0] == "Filter a" and lines[1] == "  Filter a"
    assert lines[-1] == "  " * depth + "Scan spark_catalog.default.t [a]"


def test_a_subquery_sits_under_its_user_and_a_reuse_names_it():
    sub = [
        {"class": X + "SubqueryExec", "num-children": 1, "name": "scalar-subquery#7"},
        _scan("item", "i_price"),
    ]
    condition = [
        {"class": E + "GreaterThan", "num-children": 2},
        _attr("ss_price", 3),
        {"class": X + "ScalarSubquery", "num-children": 0, "plan": sub},
    ]
    reused = [{"class": X + "ReusedSubqueryExec", "num-children": 0, "child": sub}]
    second = [
        {"class": E + "LessThan", "num-children": 2},
        _attr("ss_price", 3),
        {"class": X + "ScalarSubquery", "num-children": 0, "plan": reused},
    ]
    plan = [
        {"class": X + "FilterExec", "num-children": 1, "condition": second},
        {"class": X + "FilterExec", "num-children": 1, "condition": condition},
        _scan("store_sales", "ss_price"),
    ]
    assert plan_tree(plan) == (
        "Filter (ss_price < scalarSubquery())",
        "  Subquery #1",
        "    Scan spark_catalog.default.item [i_price]",
        "  Filter (ss_price > scalarSubquery())",
        "    ReusedSubquery #1",
        "    Scan spark_catalog.default.store_sales [ss_price]",
    )


def test_an_exchange_says_its_size_only_where_the_conf_did_not_set_it():
    key = _attr("k", 1)
    for origin, count, expected in [
        ("ENSURE_REQUIREMENTS", 4, "Exchange hashpartitioning [k]"),
        ("REPARTITION_BY_COL", 4, "Exchange hashpartitioning [k]"),
        ("REPARTITION_BY_NUM", 4, "Exchange hashpartitioning [k] into 4 partitions"),
        ("ENSURE_REQUIREMENTS", 10, "Exchange hashpartitioning [k] into 10 partitions"),
    ]:
        plan = [_exchange(key, count, origin), _scan("t", "k")]
        graph = graph_from_plan(plan, shuffle_partitions=4)
        assert graph.plan is not None and graph.plan[0] == expected
        conf_sized = count == 4 and origin != "REPARTITION_BY_NUM"
        assert graph.settings == ((("spark.sql.shuffle.partitions", "4"),) if conf_sized else ())


def test_a_hostile_table_name_stays_one_escaped_line_in_the_snapshot():
    name = 'evil"\n[job]\u202e\\'
    fp = fingerprint_graph(graph_from_plan([_scan(name, "a")]))
    assert fp.plan == (f"Scan spark_catalog.default.{name} [a]",)
    text = dumps(fp)
    assert text.count("\n[job]\n") == 1  # the name's "[job]" did not become a section
    assert loads(text).plan == fp.plan


def test_a_malformed_subquery_plan_is_one_error_naming_it():
    broken = [{"class": X + "SubqueryExec", "num-children": 2, "name": "s#1"}, _scan("t")]
    condition = [{"class": X + "ScalarSubquery", "num-children": 0, "plan": broken}]
    plan = [{"class": X + "FilterExec", "num-children": 1, "condition": condition}, _scan("t")]
    with pytest.raises(DocumentError, match=r"a Spark plan: node #0 \(.*SubqueryExec\) misses"):
        graph_from_plan(json.dumps(plan))


def _long_key(values: list[int], alias_id: int) -> list[dict]:
    """A project defining ``k`` as ``a IN (values...)`` (over 200 nodes), and an aggregate
    grouping by ``k``: the key line resolves the alias and is cut short."""
    in_list = [{"class": E + "In", "num-children": 1 + len(values)}, _attr("a", 1)]
    in_list += [
        {"class": E + "Literal", "num-children": 0, "value": str(v), "dataType": "integer"}
        for v in values
    ]
    alias = [{"class": E + "Alias", "num-children": 1, "name": "k", "exprId": {"id": alias_id}}]
    return [
        {
            "class": X + "aggregate.HashAggregateExec",
            "num-children": 1,
            "groupingExpressions": [[_attr("k", alias_id)]],
            "aggregateExpressions": [],
        },
        {"class": X + "ProjectExec", "num-children": 1, "projectList": [alias + in_list]},
        _scan("t", "a"),
    ]


def test_an_expression_cut_short_ends_in_a_hash_of_the_whole():
    values = list(range(300))
    changed = [*values[:250], 999, *values[251:]]  # past the first 200 nodes
    one, again, other = (
        plan_tree(_long_key(v, i)) for v, i in ((values, 7), (values, 8), (changed, 9))
    )
    assert re.search(r"…\) #[0-9a-f]{12}\]", one[0]), one[0]
    assert one[0].split("…")[0] == other[0].split("…")[0]  # the same first 200 nodes
    assert one[0] != other[0]  # told apart by the hash
    assert one == again  # another expression id: the same text and hash
    short = plan_tree(_long_key(values[:5], 7))
    assert "…" not in short[0] and " #" not in short[0]
