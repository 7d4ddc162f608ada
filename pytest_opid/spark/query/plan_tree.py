"""A Spark batch plan as a tree a reviewer reads: tables, exchanges, joins, keys, subqueries.

Operator IDs say only that a plan's shape changed; two queries of one shape over different
tables, or grouped by different columns, get the same IDs. Spark's own plan-stability tests
(``PlanStabilitySuite``) keep each TPC-DS plan as an indented tree of node names with the
columns they use; this module writes such a tree from the plan JSON (pure Python, no JVM), one
line per physical operator, its inputs two spaces further in:

* the code-generation wrappers (``WholeStageCodegen``, ``InputAdapter``, columnar transitions)
  are left out, as in the topology;
* expressions are written over the columns the query reads, aliases resolved through the
  plan's projections and aggregates
  (:class:`~pytest_opid.spark.query.expressions.MeaningPlan`), without expression ids:
  renaming an output column or a table alias, or reformatting the SQL text, keeps every line;
* a file scan names its catalog table (``Scan spark_catalog.default.store_sales``), or for a
  read by path its format (``Scan parquet``), and the columns it reads; a path is never
  written;
* an exchange names its partitioning and keys (``Exchange hashpartitioning [i_item_id]``); its
  number of partitions only where it is not ``spark.sql.shuffle.partitions``, which the
  fingerprint records once;
* a join names its kind, build side and keys; an aggregate its grouping keys and functions
  (``partial_sum``, ``merge_sum`` for the partial steps, as ``EXPLAIN`` writes them);
* a filter writes its condition (a change there is row-wise: it passes, noted);
* a scalar or ``IN`` subquery is written under the operator that uses it, as ``Subquery #n``
  followed by its own plan; a second use of the same subquery is ``ReusedSubquery #n``; dynamic
  partition pruning's subquery is written under the scan it prunes (``SubqueryBroadcast #n``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_opid.errors import DocumentError
from pytest_opid.spark.query.expressions import (
    EVAL_PYTHON,
    Expr,
    MeaningPlan,
    expr_id,
    expression_tree,
    without_ids,
)

WORD = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")


#: Indentation per level of the tree.
INDENT = "  "


#: Nodes that wrap the real operator below them and vanish from the topology and the tree.
WRAPPERS = frozenset(
    {"WholeStageCodegenExec", "InputAdapter", "ColumnarToRowExec", "RowToColumnarExec"}
)


#: Scans whose expressions (pushed-down filters) repeat what a Filter above them already says.
SCANS = frozenset({"FileSourceScanExec", "BatchScanExec", "InMemoryTableScanExec"})


_PARTITION_FILTERS = "partitionFilters"


_AGGREGATES = frozenset(
    {
        "HashAggregateExec",
        "SortAggregateExec",
        "ObjectHashAggregateExec",
        "MergingSessionsExec",
        "ArrowAggregatePythonExec",  # pandas UDF aggregates (Spark 4.1 and later)
        "AggregateInPandasExec",
    }
)


_LIMITS = frozenset({"CollectLimitExec", "GlobalLimitExec", "LocalLimitExec"})


#: Wrappers Spark's optimizer puts around arithmetic (decimal sums, float normalisation) that a
#: reader of the query never wrote.
_PLUMBING = frozenset(
    {
        "UnscaledValue",
        "MakeDecimal",
        "CheckOverflow",
        "KnownFloatingPointNormalized",
        "NormalizeNaNAndZero",
    }
)


_PARTITIONINGS = {
    "HashPartitioning": "hashpartitioning",
    "CoalescedHashPartitioning": "hashpartitioning",
    "RangePartitioning": "rangepartitioning",
    "RoundRobinPartitioning": "roundrobinpartitioning",
    "SinglePartition": "SinglePartition",
}


#: Functions whose class name is not the name SQL calls them by.
_SQL_NAMES = {
    "Average": "avg",
    "StddevSamp": "stddev_samp",
    "StddevPop": "stddev_pop",
    "VarianceSamp": "var_samp",
    "VariancePop": "var_pop",
    "CollectList": "collect_list",
    "CollectSet": "collect_set",
    "HyperLogLogPlusPlus": "approx_count_distinct",
    "ApproximatePercentile": "percentile_approx",
    "RowNumber": "row_number",
    "DenseRank": "dense_rank",
    "PercentRank": "percent_rank",
    "CumeDist": "cume_dist",
    "NTile": "ntile",
    "CaseWhen": "case_when",
    "In": "in",
    "InSet": "in",
    "IsNotNull": "isnotnull",
    "IsNull": "isnull",
}


#: The column Spark's ``RewriteDistinctAggregates`` adds to the Expand it plans for several
#: distinct aggregates: which group a projected row feeds (0: the regular aggregates).
_DISTINCT_GROUP = "gid"


#: An exchange's origin when the query itself asked for its number of partitions.
_BY_NUMBER = "REPARTITION_BY_NUM"


class _TreePlan(MeaningPlan):
    """:class:`MeaningPlan` that also resolves aliases an aggregate's result, a window or a
    top-N projection defines, and looks through the optimizer's arithmetic wrappers."""

    transparent = MeaningPlan.transparent | _PLUMBING
    function_names = _SQL_NAMES

    def __init__(
        self, nodes: Sequence[Mapping[str, Any]], children: list[list[int]] | None = None
    ) -> None:
        super().__init__(nodes)
        # An Expand's outputs differ per projection (ROLLUP's spark_grouping_id is 0, 1, 3...):
        # the first projection is not their definition here, their own name is.
        self.defs = {k: v for k, v in self.defs.items() if v[1] != "expand"}
        for node, cls in zip(nodes, self.classes, strict=True):
            if cls in _AGGREGATES:
                fields: tuple[str, ...] = ("resultExpressions",)
            elif cls == "WindowExec":
                fields = ("windowExpression",)
            elif cls == "TakeOrderedAndProjectExec":
                fields = ("projectList",)
            else:
                continue
            for field in fields:
                for flat in node.get(field) or ():
                    self._define(self.parse(flat), "project")
        self.children = children or plan_children(nodes, "a Spark plan")[0]
        #: a distinct rewrite's columns in canonical order, by expression id (see _distinct)
        self.ranks: dict[int, int] = {}
        #: id(Expand node) -> its columns in canonical order, and the position of gid there
        self.expands: dict[int, tuple[list[int], int]] = {}
        for node, cls in zip(nodes, self.classes, strict=True):
            if cls == "ExpandExec":
                self._distinct(node)

    def _distinct(self, node: Mapping[str, Any]) -> None:
        """``RewriteDistinctAggregates`` groups the distinct aggregates by their inputs in a
        Scala hash map keyed by expressions, whose hashes hold expression ids: the Expand's
        distinct columns, its projections and their group numbers come in an order that
        changes with the session's history. Its columns (grouping keys, distinct inputs,
        ``gid``, regular aggregates' inputs) are ranked here in an order of their own: the
        grouping keys (the leading columns every projection passes through) and what follows
        ``gid`` as Spark writes them, the distinct inputs by name and values."""
        outputs = [self.parse(f) for f in _list(node.get("output"))]
        rows = [[self.parse(f) for f in _list(p)] for p in _list(node.get("projections"))]
        gid = next(
            (
                i
                for i, o in enumerate(outputs)
                if o is not None
                and o.fields.get("name") == _DISTINCT_GROUP
                and o.fields.get("dataType") == "integer"
            ),
            None,
        )
        if gid is None or not rows or any(len(r) != len(outputs) for r in rows):
            return
        prefix = 0
        while prefix < gid and _passed_through(rows, prefix):
            prefix += 1

        def key(column: int) -> tuple[str, tuple[str, ...]]:
            out = outputs[column]
            name = without_ids(str(out.fields.get("name", ""))) if out is not None else ""
            return name, tuple(sorted(self.render(r[column]) for r in rows))

        middle = sorted(range(prefix, gid), key=key)
        for rank, column in enumerate(middle):
            out = outputs[column]
            ident = expr_id(out.fields) if out is not None else None
            if ident is not None:
                self.ranks[ident] = rank
        order = [*range(prefix), *middle, *range(gid, len(outputs))]
        self.expands[id(node)] = (order, order.index(gid))

    def canonical(self, trees: Sequence[Expr | None]) -> list[Expr | None]:
        """``trees`` with a distinct rewrite's columns (:meth:`_distinct`) in their ranked
        order, each other expression where it was."""
        ranks = [None if t is None else self._rank(t) for t in trees]
        at = [i for i, rank in enumerate(ranks) if rank is not None]
        if len(at) < 2:
            return list(trees)
        ranked = [trees[i] for i in sorted(at, key=lambda i: ranks[i] or 0)]
        out = list(trees)
        for i, tree in zip(at, ranked, strict=True):
            out[i] = tree
        return out

    def _rank(self, tree: Expr) -> int | None:
        if tree.cls == "SortOrder" and tree.children:
            tree = tree.children[0]
        if tree.cls != "AttributeReference" or not self.ranks:
            return None
        ident = expr_id(tree.fields)
        return self.ranks.get(ident) if ident is not None else None

    def keys(self, flats: Any) -> str:
        """A list of keys (:meth:`exprs`) in :meth:`canonical` order."""
        trees = self.canonical([self.parse(f) for f in _list(flats)])
        return "[" + ", ".join(self.render(t) for t in trees) + "]"

    def expand(self, node: Mapping[str, Any]) -> str:
        """An Expand's projections; a distinct rewrite's (:meth:`_distinct`) with its columns
        in their ranked order, the projections sorted (the regular aggregates' first, as Spark
        puts it) and their group numbers counted in that order."""
        projections = _list(node.get("projections"))
        found = self.expands.get(id(node))
        if found is None:
            return ", ".join(self.exprs(p) for p in projections)
        order, gid = found
        rows = []
        for projection in projections:
            flats = _list(projection)
            rows.append([self.expr(flats[c]) for c in order])
        rows.sort(key=lambda r: (r[gid] != "0", r[:gid] + r[gid + 1 :]))
        number = 0
        for row in rows:
            if row[gid] != "0":
                number += 1
                row[gid] = str(number)
        return ", ".join("[" + ", ".join(row) + "]" for row in rows)

    def render(self, tree: Expr | None) -> str:
        """An expression's text; one cut short past the budget ("…") ends in a hash of the
        whole (``#3fa2b1c4d5e6``), so two long expressions alike in their first 200 nodes
        still differ."""
        text, cut = self.render_budgeted(tree)
        return f"{text} #{self.digest(tree)}" if cut and tree is not None else text

    def expr(self, flat: Any) -> str:
        return self.render(self.parse(flat))

    def exprs(self, flats: Any) -> str:
        return "[" + ", ".join(self.expr(f) for f in _list(flats)) + "]"

    def ordering(self, flats: Any) -> str:
        trees = self.canonical([self.parse(f) for f in _list(flats)])
        return "[" + ", ".join(self.sort_order(t) for t in trees) + "]"

    def sort_order(self, tree: Expr | None) -> str:
        if tree is None or tree.cls != "SortOrder" or not tree.children:
            return self.render(tree)
        direction = _object_name(tree.fields.get("direction"))
        nulls = _object_name(tree.fields.get("nullOrdering"))
        ascending = direction != "Descending"
        text = f"{self.render(tree.children[0])} {'ASC' if ascending else 'DESC'}"
        if nulls and (nulls == "NullsLast") == ascending:  # not Spark's default for it
            text += " NULLS LAST" if nulls == "NullsLast" else " NULLS FIRST"
        return text


def plan_tree(
    nodes: Sequence[Mapping[str, Any]],
    *,
    leaves: Sequence[str | None] = (),
    shuffle_partitions: int | None = None,
    subqueries: bool = True,
    children: list[list[int]] | None = None,
) -> tuple[str, ...]:
    """The tree of a (checked) plan JSON, one line per operator, without recursion.

    ``leaves`` are Spark's node names of the plan's leaves in order (they hold a file scan's
    format); ``shuffle_partitions`` is the session's ``spark.sql.shuffle.partitions``, left
    out of the exchanges that use it (``None``: unknown, every exchange says its number).
    ``subqueries`` false says the plan holds none (its JSON text has no ``"plan"`` key), which
    spares looking through every operator's expressions for one. ``children``: each node's
    children (:func:`plan_children`), where the caller has them."""
    lines: list[str] = []
    plans: dict[int, _TreePlan] = {}
    numbers: dict[str, int] = {}

    def plan_of(flat: Sequence[Mapping[str, Any]]) -> _TreePlan:
        found = plans.get(id(flat))
        if found is None:
            found = plans[id(flat)] = _TreePlan(flat)
        return found

    main = plans[id(nodes)] = _TreePlan(nodes, children)
    leaf_names = iter(leaves)
    leaf_of = {i: next(leaf_names, None) for i, kids in enumerate(main.children) if not kids}
    # (plan, index, depth, is a subquery's root)
    stack: list[tuple[Sequence[Mapping[str, Any]], int, int, bool]] = [(nodes, 0, 0, False)]
    while stack:
        flat, i, depth, subquery = stack.pop()
        plan = plan_of(flat)
        node = flat[i]
        cls = _short(node)
        kids = plan.children[i]
        if subquery:
            key = str(node.get("name") or id(flat))
            label = "SubqueryBroadcast" if cls == "SubqueryBroadcastExec" else "Subquery"
            if key in numbers:
                lines.append(f"{INDENT * depth}Reused{label} #{numbers[key]}")
                continue
            numbers[key] = len(numbers) + 1
            lines.append(f"{INDENT * depth}{label} #{numbers[key]}")
            stack.extend((flat, k, depth + 1, False) for k in reversed(kids))
            continue
        if cls in WRAPPERS and len(kids) == 1:
            stack.append((flat, kids[0], depth, False))
            continue
        if cls == "ReusedExchangeExec" and _is_plan(node.get("child")):
            inner = node["child"]
            reused = _line(plan_of(inner), inner[0], _short(inner[0]), None, shuffle_partitions)
            lines.append(f"{INDENT * depth}Reused{reused}")
            continue
        leaf = leaf_of.get(i) if flat is nodes else None
        lines.append(INDENT * depth + _line(plan, node, cls, leaf, shuffle_partitions))
        stack.extend((flat, k, depth + 1, False) for k in reversed(kids))
        if subqueries:
            # A scan's data filters repeat its Filter's subqueries; its partition filters hold
            # dynamic partition pruning's (a SubqueryBroadcast), whose broadcast the join then
            # reuses: its tables are shown nowhere else.
            holder = {_PARTITION_FILTERS: node.get(_PARTITION_FILTERS)} if cls in SCANS else node
            for sub in reversed(_subquery_plans(holder)):
                stack.append((sub, 0, depth + 1, True))
    return tuple(lines)


def plan_children(
    nodes: Sequence[Mapping[str, Any]], what: str
) -> tuple[list[list[int]], list[int]]:
    """Children of every node of a pre-order plan list, and the end of every node's subtree."""
    count = len(nodes)
    children: list[list[int]] = [[] for _ in nodes]
    end = [0] * count
    stack: list[list[int]] = []  # [node, children still expected]
    for i, node in enumerate(nodes):
        if stack:
            top = stack[-1]
            children[top[0]].append(i)
            top[1] -= 1
        elif i:
            raise DocumentError(f"{what}: node #{i} ({node['class']}) is outside the plan tree")
        kids = node["num-children"]
        if kids:
            stack.append([i, kids])
        else:
            end[i] = i + 1
        while stack and stack[-1][1] == 0:
            done = stack.pop()[0]
            end[done] = i + 1
    if stack:
        i = stack[-1][0]
        raise DocumentError(f"{what}: node #{i} ({nodes[i]['class']}) misses children")
    return children, end


def _line(
    plan: _TreePlan,
    node: Mapping[str, Any],
    cls: str,
    leaf: str | None,
    shuffle_partitions: int | None,
) -> str:
    base = cls[:-4] if cls.endswith("Exec") and len(cls) > 4 else cls
    if cls == "FileSourceScanExec":
        # A catalog table names what is read (its format is the table's); a path-based read
        # names its format, from the node name (known for the main plan's scans only).
        table = _table(node.get("tableIdentifier"))
        fmt = None if table else word_after(leaf, "Scan")
        columns = _field_names(node.get("requiredSchema"))
        return " ".join(p for p in ("Scan", table or fmt, columns) if p)
    if cls in ("BatchScanExec", "LocalTableScanExec", "InMemoryTableScanExec"):
        name = word_after(leaf, "BatchScan") if cls == "BatchScanExec" else None
        outputs = "[" + ", ".join(_names(node.get("output"))) + "]"
        return " ".join(p for p in (base, name, outputs) if p)
    if cls == "ShuffleExchangeExec":
        return "Exchange " + _partitioning(plan, node, shuffle_partitions)
    if cls == "FilterExec":
        return f"Filter {plan.expr(node.get('condition'))}"
    if cls == "ProjectExec":
        return f"Project {plan.exprs(node.get('projectList'))}"
    if cls in _AGGREGATES:
        flats = _list(node.get("aggregateExpressions") or node.get("aggExpressions"))
        functions = ", ".join(_aggregate(plan, f) for f in flats)
        keys = plan.keys(node.get("groupingExpressions"))
        return f"{base} keys {keys} functions [{functions}]"
    if cls in EVAL_PYTHON:
        return f"{base} {plan.exprs(node.get('udfs'))}"
    if isinstance(node.get("func"), list):  # mapInPandas, applyInPandas...: the function
        attributes = node.get("groupingAttributes")
        grouping = f" keys {plan.exprs(attributes)}" if isinstance(attributes, list) else ""
        return f"{base}{grouping} function {plan.expr(node.get('func'))}"
    if cls.endswith("JoinExec") or cls == "CartesianProductExec":
        parts = [base, _object_name(node.get("joinType")), _object_name(node.get("buildSide"))]
        if node.get("leftKeys"):
            left, right = plan.exprs(node.get("leftKeys")), plan.exprs(node.get("rightKeys"))
            parts.append(f"{left} = {right}")
        condition = node.get("condition")
        if _list(condition) and isinstance(_list(condition)[0], dict):
            parts.append(f"condition {plan.expr(condition)}")
        return " ".join(p for p in parts if p)
    if cls == "SortExec":
        return f"Sort {plan.ordering(node.get('sortOrder'))}"
    if cls == "TakeOrderedAndProjectExec":
        text = f"{base} limit {node.get('limit')}"
        offset = node.get("offset")
        if isinstance(offset, int) and offset:
            text += f" offset {offset}"
        return f"{text} order {plan.ordering(node.get('sortOrder'))}"
    if cls in _LIMITS:
        return f"{base} {node.get('limit')}"
    if cls == "WindowExec":
        windows = _list(node.get("windowExpression"))
        functions = ", ".join(_window_function(plan, f) for f in windows)
        return (
            f"Window [{functions}] partition {plan.exprs(node.get('partitionSpec'))} "
            f"order {plan.ordering(node.get('orderSpec'))}"
        )
    if cls == "ExpandExec":  # ROLLUP, CUBE, GROUPING SETS: one projection per set
        return f"Expand [{plan.expand(node)}]"
    if cls == "GenerateExec":
        return f"Generate {plan.expr(node.get('generator'))}"
    if cls == "CoalesceExec":
        return f"Coalesce {node.get('numPartitions')}"
    if cls == "BroadcastExchangeExec":
        return "BroadcastExchange"
    return base


def _partitioning(plan: _TreePlan, node: Mapping[str, Any], shuffle_partitions: int | None) -> str:
    tree = expression_tree(node.get("outputPartitioning"))
    if tree is None:  # an object (SinglePartition) serialises as a one-node list or a dict
        spec = node.get("outputPartitioning")
        tree = Expr(spec) if isinstance(spec, dict) else None
    if tree is None:
        return "?"
    fields = tree.fields
    kind = str(fields.get("class") or fields.get("product-class") or fields.get("object") or "")
    name = kind.rsplit(".", 1)[-1].rstrip("$")
    text = _PARTITIONINGS.get(name, name or "?")
    if tree.children:
        children = plan.canonical(tree.children)
        if name == "RangePartitioning":
            text += " [" + ", ".join(plan.sort_order(c) for c in children) + "]"
        else:
            text += " [" + ", ".join(plan.render(c) for c in children) + "]"
    count = fields.get("numPartitions")
    origin = _object_name(node.get("shuffleOrigin"))
    if (
        isinstance(count, int)
        and name != "SinglePartition"
        and (count != shuffle_partitions or origin == _BY_NUMBER)
    ):
        text += f" into {count} partitions"
    return text


def _aggregate(plan: _TreePlan, flat: Any) -> str:
    tree = plan.parse(flat)
    mode = _object_name(tree.fields.get("mode")) if tree is not None else ""
    prefix = {"Partial": "partial_", "PartialMerge": "merge_"}.get(mode, "")
    return prefix + plan.render(tree)


def _window_function(plan: _TreePlan, flat: Any) -> str:
    tree = plan.parse(flat)
    while tree is not None and tree.cls in ("Alias", "WindowExpression") and tree.children:
        tree = tree.children[0]
    return plan.render(tree)


def _passed_through(rows: list[list[Expr | None]], column: int) -> bool:
    """Every projection passes the same attribute through at ``column``."""
    first = rows[0][column]
    if first is None or first.cls != "AttributeReference":
        return False
    ident = expr_id(first.fields)
    return ident is not None and all(
        r[column] is not None and expr_id(r[column].fields) == ident  # type: ignore[union-attr]
        for r in rows
    )


def _subquery_plans(node: Mapping[str, Any]) -> list[Sequence[Mapping[str, Any]]]:
    """The plans of the subqueries an operator's expressions hold, in the order they appear;
    a reused subquery's plan is the one it reuses."""
    found: list[Sequence[Mapping[str, Any]]] = []
    todo: list[Any] = [
        v for k, v in reversed(list(node.items())) if k not in ("child", "left", "right")
    ]
    while todo:
        item = todo.pop()
        if isinstance(item, list):
            todo.extend(reversed(item))
        elif isinstance(item, dict):
            inner: Any = item.get("plan")
            if _is_plan(inner):
                if _short(inner[0]) == "ReusedSubqueryExec" and _is_plan(inner[0].get("child")):
                    inner = inner[0]["child"]
                found.append(inner)
                continue
            todo.extend(reversed([v for v in item.values() if isinstance(v, (list, dict))]))
    return found


def _is_plan(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(n, dict) and isinstance(n.get("class"), str) for n in value)
        and all(type(n.get("num-children")) is int and n["num-children"] >= 0 for n in value)
    )


def _short(node: Mapping[str, Any]) -> str:
    return str(node.get("class", "")).rsplit(".", 1)[-1].rsplit("$", 1)[-1]


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _object_name(value: Any) -> str:
    """``Inner`` of ``{"object": "org.apache.spark.sql.catalyst.plans.Inner$"}``."""
    if not isinstance(value, dict):
        return ""
    name = value.get("object") or value.get("product-class") or ""
    return str(name).rsplit(".", 1)[-1].rstrip("$") if isinstance(name, str) else ""


def _table(identifier: Any) -> str | None:
    if not isinstance(identifier, dict):
        return None
    parts = [identifier.get(k) for k in ("catalog", "database", "table")]
    return ".".join(p for p in parts if isinstance(p, str) and p) or None


def _field_names(schema: Any) -> str | None:
    if not isinstance(schema, dict) or not isinstance(schema.get("fields"), list):
        return None
    names = [f.get("name") for f in schema["fields"] if isinstance(f, dict)]
    return "[" + ", ".join(n for n in names if isinstance(n, str)) + "]"


def _names(output: Any) -> list[str]:
    names = []
    for flat in _list(output):
        tree = expression_tree(flat)
        if tree is not None and isinstance(tree.fields.get("name"), str):
            names.append(tree.fields["name"])
    return names


def word_after(text: str | None, prefix: str) -> str | None:
    """The word after ``prefix`` at the start of a scan's node name (``Scan parquet ...``): a
    plain word such as a format, never a path or a table location."""
    if not text or not text.startswith(prefix + " "):
        return None
    token = text[len(prefix) + 1 :].split(" ", 1)[0]
    return token if WORD.fullmatch(token) else None
