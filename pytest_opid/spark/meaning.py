"""What a stateful operator's state means, read from Spark's plan JSON (pure Python, no JVM).

Spark checks at restart only that a state store's key and value schemas keep their types
(``StateSchemaCompatibilityChecker``): ``groupBy("cat")`` -> ``groupBy("user")``, ``count`` ->
``sum``, a 5-minute window -> a 10-minute one or ``dropDuplicates(["id"])`` ->
``dropDuplicates(["v"])`` all restart, and the new query then reads the old state as something
it is not. This module records, per stateful operator, the facts that decide what its state
means, as ``(fact, value)`` pairs in Spark's own order (:attr:`StateOperator.meaning`):

* ``key N``: the N-th grouping (or deduplication) key as an expression over the columns the
  query reads, aliases resolved through the plan's projections, so a rename (``col("user")
  .alias("u")``) keeps the fact and a new column or expression changes it;
* ``aggregate N``: the N-th aggregate function with its input, in the state buffer's order;
* ``window`` / ``session window``: the time column and the window's durations;
* ``join type``, ``left key N``, ``right key N``, ``left input``, ``right input``;
* ``function``, ``state schema``, ``timeout`` (applyInPandasWithState, flatMapGroupsWithState);
* ``output mode``, ``watermark``, ``limit``.

A fact the plan does not show is :data:`~pytest_opid.result.UNKNOWN`, never guessed. Which
facts change meaning and how a change is worded is :mod:`pytest_opid.spark.reinterpret`'s
business.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pytest_opid.result import UNKNOWN

__all__ = ["SCHEMA_CHECK", "SCHEMA_CHECK_FACT", "MeaningPlan", "operator_meaning"]

#: The session conf that turns Spark's state schema check off; recorded as a fact, since a
#: restart that passes only because of it reads the old state with the new schema.
SCHEMA_CHECK = "spark.sql.streaming.stateStore.stateSchemaCheck"
SCHEMA_CHECK_FACT = "state schema check"

#: Nodes one expression may expand to when aliases are resolved; past it the rest is "…".
_BUDGET = 200
_OPERATORS = {
    "Add": "+",
    "Subtract": "-",
    "Multiply": "*",
    "Divide": "/",
    "Remainder": "%",
    "EqualTo": "=",
    "EqualNullSafe": "<=>",
    "LessThan": "<",
    "LessThanOrEqual": "<=",
    "GreaterThan": ">",
    "GreaterThanOrEqual": ">=",
    "And": "AND",
    "Or": "OR",
}
#: Operators that run a projection's Python UDFs and name their results pythonUDF0, 1...
_EVAL_PYTHON = frozenset({"ArrowEvalPythonExec", "BatchEvalPythonExec"})
#: Aggregates whose results (``resultId``) stand for their aggregate functions; pandas UDF
#: aggregates (``ArrowAggregatePythonExec`` in Spark 4.1 and later) name the list
#: ``aggExpressions``.
_AGGREGATE_RESULTS = frozenset(
    {
        "HashAggregateExec",
        "MergingSessionsExec",
        "ArrowAggregatePythonExec",
        "AggregateInPandasExec",
    }
)
#: A struct's field, or that field of an array's structs: ``payload.user``.
_FIELD_ACCESS = frozenset({"GetStructField", "GetArrayStructFields"})
#: Expressions of Python code, written by the function's own name.
_PYTHON_FUNCTIONS = frozenset({"PythonUDF", "PythonUDAF", "PythonUDTF"})
#: Wrappers that change nothing a reader of the state cares about.
_TRANSPARENT = frozenset({"Alias", "KnownNullable", "KnownNotNull", "PromotePrecision"})
_MODES = {"Append": "append", "Update": "update", "Complete": "complete"}
_JOINS = {
    "Inner": "inner",
    "LeftOuter": "leftOuter",
    "RightOuter": "rightOuter",
    "FullOuter": "fullOuter",
    "LeftSemi": "leftSemi",
    "LeftAnti": "leftAnti",
}
_MICROS = (
    (86_400_000_000, "day"),
    (3_600_000_000, "hour"),
    (60_000_000, "minute"),
    (1_000_000, "second"),
    (1_000, "millisecond"),
)


class _Expr:
    """One expression node of the plan JSON with its children (the JSON lists a tree's nodes
    in pre-order, each with ``num-children``)."""

    __slots__ = ("children", "cls", "fields")

    def __init__(self, fields: Mapping[str, Any]) -> None:
        self.fields = fields
        self.cls = str(fields.get("class", "")).rsplit(".", 1)[-1]
        self.children: list[_Expr] = []


def _tree(flat: Any) -> _Expr | None:
    """The tree of a flattened expression (a list of nodes in pre-order), without recursion."""
    if not isinstance(flat, list) or not flat or not isinstance(flat[0], dict):
        return None
    root = _Expr(flat[0])
    stack = [(root, int(flat[0].get("num-children", 0) or 0))]
    for raw in flat[1:]:
        if not isinstance(raw, dict) or not stack:
            return None
        node = _Expr(raw)
        parent, _ = stack[-1]
        parent.children.append(node)
        while stack and len(stack[-1][0].children) >= stack[-1][1]:
            stack.pop()
        wanted = int(raw.get("num-children", 0) or 0)
        if wanted:
            stack.append((node, wanted))
    return root


def _expr_id(fields: Mapping[str, Any], key: str = "exprId") -> int | None:
    ref = fields.get(key)
    if isinstance(ref, dict) and isinstance(ref.get("id"), int):
        return int(ref["id"])
    return None


class MeaningPlan:
    """The plan's nodes with what resolving an attribute needs: the expression that defines
    each alias (projections, Expand's first projection, aggregates' results)."""

    #: wrappers rendered as the expression inside them
    transparent: frozenset[str] = _TRANSPARENT
    #: functions written by their SQL name instead of their class name
    function_names: Mapping[str, str] = {}

    def __init__(
        self, nodes: Sequence[Mapping[str, Any]], texts: Mapping[int, str] | None = None
    ) -> None:
        self._parsed: dict[int, _Expr | None] = {}
        self.nodes = nodes
        self.texts = texts or {}  # what the JSON leaves out, by node position (from the JVM)
        self.classes = [str(n.get("class", "")).rsplit(".", 1)[-1] for n in nodes]
        self.defs: dict[int, tuple[_Expr, str]] = {}  # exprId -> (definition, where)
        for node, cls in zip(nodes, self.classes, strict=True):
            if cls == "ProjectExec":
                for flat in node.get("projectList") or ():
                    self._define(self.parse(flat), "project")
            elif cls == "ExpandExec":
                projections = node.get("projections") or ()
                if projections and isinstance(projections[0], list):
                    for flat, out in zip(projections[0], node.get("output") or (), strict=False):
                        tree = self.parse(flat)
                        if tree is not None and tree.cls != "AttributeReference":
                            self._define_output(out, tree, "expand")
            elif cls in _EVAL_PYTHON:  # pythonUDF0, 1... stand for the UDFs, in order
                udfs, outputs = node.get("udfs") or (), node.get("resultAttrs") or ()
                for udf, out in zip(udfs, outputs, strict=False):
                    self._define_output(out, self.parse(udf), "project")
            elif cls in _AGGREGATE_RESULTS:
                flats = node.get("aggregateExpressions") or node.get("aggExpressions") or ()
                for flat in flats:
                    tree = self.parse(flat)
                    if tree is not None and tree.cls == "AggregateExpression":
                        ident = _expr_id(tree.fields, "resultId")
                        if ident is not None:
                            self.defs.setdefault(ident, (tree, "aggregate"))

    @functools.cached_property
    def watermarks(self) -> dict[int, int]:
        """exprId -> delay (ms), from attribute metadata: a walk of the whole plan, made only
        where a watermark is asked for."""
        found: dict[int, int] = {}
        for ident, delay in self._delays():
            found.setdefault(ident, delay)
        return found

    def parse(self, flat: Any) -> _Expr | None:
        """:func:`_tree` of an expression of this plan's nodes, parsed once however often it
        is read (the plan's lists live as long as the plan)."""
        key = id(flat)
        if key not in self._parsed:
            self._parsed[key] = _tree(flat)
        return self._parsed[key]

    def _define_output(self, attribute: Any, definition: _Expr | None, where: str) -> None:
        """``attribute`` (an output's flattened expression) stands for ``definition``."""
        parsed = self.parse(attribute)
        ident = _expr_id(parsed.fields) if parsed is not None else None
        if ident is not None and definition is not None:
            self.defs.setdefault(ident, (definition, where))

    def _define(self, tree: _Expr | None, where: str) -> None:
        if tree is not None and tree.cls == "Alias" and tree.children:
            ident = _expr_id(tree.fields)
            if ident is not None:
                self.defs.setdefault(ident, (tree.children[0], where))

    def _delays(self) -> Iterator[tuple[int, int]]:
        todo: list[Any] = [list(self.nodes)]
        while todo:
            item = todo.pop()
            if isinstance(item, list):
                todo.extend(item)
            elif isinstance(item, dict):
                meta = item.get("metadata")
                if isinstance(meta, dict) and "spark.watermarkDelayMs" in meta:
                    ident = _expr_id(item)
                    delay = meta["spark.watermarkDelayMs"]
                    if ident is not None and isinstance(delay, int):
                        yield ident, delay
                todo.extend(v for v in item.values() if isinstance(v, (list, dict)))

    # -- rendering ------------------------------------------------------------------------

    def render(self, tree: _Expr | None) -> str:
        """``tree`` as text over the columns the query reads, aliases resolved."""
        return self.render_budgeted(tree)[0]

    def render_budgeted(self, tree: _Expr | None) -> tuple[str, bool]:
        """:meth:`render`, and whether the text was cut short ("…") past :data:`_BUDGET`."""
        if tree is None:
            return UNKNOWN, False
        budget = [_BUDGET]
        text = self._render(tree, budget, frozenset())
        return text, budget[0] < 0

    def digest(self, tree: _Expr) -> str:
        """A short hash of ``tree`` with every alias resolved, as :meth:`render` would write it
        without a budget: what tells two expressions apart where both texts were cut short.
        Each definition is hashed once however often it is used (linear, without recursion);
        expression ids, qualifiers and metadata are left out, as in the text."""
        done: dict[int, bytes] = {}
        busy: set[int] = set()  # definitions being hashed: a (malformed) cycle stops there
        stack: list[tuple[_Expr, bool]] = [(tree, False)]
        while stack:
            node, expanded = stack.pop()
            if id(node) in done:
                continue
            target = self._definition(node)
            if target is not None:
                if id(target) in done:
                    done[id(node)] = done[id(target)]
                elif expanded or id(target) in busy:  # a cycle: the attribute's name only
                    done[id(node)] = _node_hash(node, [])
                else:
                    busy.add(id(target))
                    stack += [(node, True), (target, False)]
                continue
            if not expanded:
                stack.append((node, True))
                stack += [(c, False) for c in reversed(node.children) if id(c) not in done]
                continue
            done[id(node)] = _node_hash(node, [done.get(id(c), b"") for c in node.children])
            busy.discard(id(node))
        return done[id(tree)].hex()[:12]

    def _definition(self, node: _Expr) -> _Expr | None:
        """What :meth:`_render` writes in a node's place: an alias's expression for an
        attribute, the child of a wrapper."""
        if node.cls == "AttributeReference":
            ident = _expr_id(node.fields)
            found = self.defs.get(ident) if ident is not None else None
            return found[0] if found is not None else None
        if node.cls in self.transparent and node.children:
            return node.children[0]
        return None

    def _render(self, node: _Expr, budget: list[int], seen: frozenset[int]) -> str:
        # Depth is bounded by the budget (each node spends one), far below Python's limit.
        budget[0] -= 1
        if budget[0] < 0:
            return "…"
        cls, f = node.cls, node.fields
        if cls == "AttributeReference":
            ident = _expr_id(f)
            found = self.defs.get(ident) if ident is not None else None
            if found is not None and ident is not None and ident not in seen:
                definition, where = found
                window = self._window(definition, where, budget, seen | {ident})
                if window is not None:
                    return window
                return self._render(definition, budget, seen | {ident})
            return str(f.get("name", "?"))
        if cls in self.transparent and node.children:
            return self._render(node.children[0], budget, seen)
        if cls == "Literal":
            value, kind = f.get("value"), f.get("dataType")
            if value is None:
                return "null"
            return repr(value) if kind == "string" else str(value)
        if cls == "AggregateExpression" and node.children:
            inner = self._render(node.children[0], budget, seen)
            if f.get("isDistinct") and inner.endswith(")") and "(" in inner:
                head, rest = inner.split("(", 1)
                inner = f"{head}(DISTINCT {rest}"
            return inner
        if cls == "Cast" and node.children:
            inner = self._render(node.children[0], budget, seen)
            return f"cast({inner} as {_type(f.get('dataType'))})"
        if cls in _FIELD_ACCESS and len(node.children) == 1:
            # payload.user: the field's name (or position) is no child of the expression.
            name, ordinal = f.get("name"), None
            if cls == "GetArrayStructFields":  # its StructField: {"name": ..., "dataType": ...}
                field = f.get("field")
                name = field.get("name") if isinstance(field, dict) else None
            if not isinstance(name, str) or not name:
                ordinal = f.get("ordinal")
            inner = self._render(node.children[0], budget, seen)
            return f"{inner}.{name}" if ordinal is None else f"{inner}[field {ordinal}]"
        parts = []
        for child in node.children:
            parts.append(self._render(child, budget, seen))
            if budget[0] < 0:  # one "…" says the rest is cut
                break
        if cls in _OPERATORS and len(parts) == 2:
            return f"({parts[0]} {_OPERATORS[cls]} {parts[1]})"
        if cls == "Not" and len(parts) == 1:
            return f"NOT {parts[0]}"
        return f"{self.function_name(node)}({', '.join(parts)})"

    def function_name(self, node: _Expr) -> str:
        """The name an expression node is written with: ``isnotnull`` for ``IsNotNull``; a
        Python UDF's own (``plus_one``: Spark's plan JSON keeps it, not the code)."""
        cls = node.cls
        name = node.fields.get("name")
        if cls in _PYTHON_FUNCTIONS and isinstance(name, str) and name:
            return name
        return self.function_names.get(cls) or (cls[0].lower() + cls[1:] if cls else "?")

    def _window(
        self, definition: _Expr, where: str, budget: list[int], seen: frozenset[int]
    ) -> str | None:
        """A time window's definition as ``tumbling window(ts, 5 minutes)``: Spark builds it
        as a struct of ``start``/``end`` computed from the time column (``TimeWindowing``);
        sliding windows come out of an Expand, one projection per window a row falls in."""
        names = set()
        times: list[str] = []
        micros: set[int] = set()
        todo = [definition]
        count = 0
        while todo and count < 5 * _BUDGET:
            node = todo.pop()
            count += 1
            if node.cls == "Literal":
                value = node.fields.get("value")
                if node.fields.get("dataType") == "string":
                    names.add(value)
                elif node.fields.get("dataType") == "long" and isinstance(value, str):
                    try:
                        number = int(value)
                    except ValueError:
                        continue
                    if number > 0:
                        micros.add(number)
            elif node.cls == "AttributeReference":
                text = self._render(node, budget, seen)
                if text not in times:
                    times.append(text)
            todo.extend(node.children)
        if names != {"start", "end"} or definition.cls != "CreateNamedStruct":
            return None
        kind = "sliding" if where == "expand" else "tumbling"
        spans = ", ".join(_duration(m) for m in sorted(micros, reverse=True)) or UNKNOWN
        return f"{kind} window({', '.join(times) or UNKNOWN}, {spans})"


#: Fields an expression's hash leaves out: ids that differ per session, and what the
#: rendered text leaves out too.
_UNHASHED = frozenset(
    {"class", "num-children", "exprId", "resultId", "qualifier", "metadata", "jvmId"}
)


def _node_hash(node: _Expr, children: list[bytes]) -> bytes:
    own = {
        k: v
        for k, v in node.fields.items()
        if k not in _UNHASHED and (not isinstance(v, (dict, list)) or k == "dataType")
    }
    head = json.dumps([node.cls, own], sort_keys=True, default=str).encode()
    data = len(head).to_bytes(8, "big") + head + b"".join(children)
    return hashlib.blake2b(data, digest_size=16).digest()


def operator_meaning(
    nodes: Sequence[Mapping[str, Any]],
    index: int,
    extra: Sequence[tuple[str, str]] = (),
    plan: MeaningPlan | None = None,
) -> tuple[tuple[str, str], ...]:
    """The meaning facts of the stateful operator at ``nodes[index]`` (plan JSON, pre-order),
    followed by ``extra`` (facts another reader knows, e.g. transformWithState variables)."""
    plan = plan or MeaningPlan(nodes)
    node = nodes[index]
    cls = plan.classes[index]
    facts: list[tuple[str, str]] = []
    if cls == "StateStoreSaveExec":
        facts += _keys(plan, node.get("keyExpressions"), "key")
        facts += _aggregates(
            plan, index, ("HashAggregateExec", "ObjectHashAggregateExec", "SortAggregateExec")
        )
        facts.append(("output mode", _mode(node.get("outputMode"))))
    elif cls == "SessionWindowStateStoreSaveExec":
        facts += _keys(plan, node.get("keyWithoutSessionExpressions"), "key")
        facts.append(("session window", _session(plan, node.get("sessionExpression"))))
        facts += _aggregates(plan, index, ("MergingSessionsExec",))
        facts.append(("output mode", _mode(node.get("outputMode"))))
    elif cls in ("StreamingDeduplicateExec", "StreamingDeduplicateWithinWatermarkExec"):
        facts += _keys(plan, node.get("keyExpressions"), "key")
    elif cls == "StreamingSymmetricHashJoinExec":
        join = node.get("joinType")
        word = str(join.get("object", "")) if isinstance(join, dict) else ""
        word = word.rsplit(".", 1)[-1].rstrip("$")
        facts.append(("join type", _JOINS.get(word, word or UNKNOWN)))
        facts += _keys(plan, node.get("leftKeys"), "left key")
        facts += _keys(plan, node.get("rightKeys"), "right key")
        left, right = _children(plan, index)
        facts.append(("left input", _inputs(plan, left)))
        facts.append(("right input", _inputs(plan, right)))
        facts.append(("join condition", plan.texts.get(index, UNKNOWN)))
    elif cls in ("FlatMapGroupsWithStateExec", "FlatMapGroupsInPandasWithStateExec"):
        facts.append(("function", _function(node.get("functionExpr") or node.get("func"))))
        facts += _keys(plan, node.get("groupingAttributes"), "key")
        state = node.get("stateType") or node.get("stateEncoder")
        facts.append(("state schema", _type(state) if isinstance(state, dict) else UNKNOWN))
        timeout = node.get("timeoutConf")
        word = str(timeout.get("object", "")) if isinstance(timeout, dict) else ""
        facts.append(("timeout", word.rsplit(".", 1)[-1].rstrip("$") or UNKNOWN))
        facts.append(("output mode", _mode(node.get("outputMode"))))
    elif cls == "StreamingGlobalLimitExec":
        limit = node.get("streamLimit")
        facts.append(("limit", str(limit) if isinstance(limit, int) else UNKNOWN))
    facts += extra
    facts += _watermarks(plan, index)
    return tuple(facts)


def _keys(plan: MeaningPlan, flats: Any, label: str) -> list[tuple[str, str]]:
    out = []
    for i, flat in enumerate(flats if isinstance(flats, list) else (), 1):
        tree = _tree(flat)
        text = plan.render(tree)
        kind = _type(tree.fields.get("dataType")) if tree is not None else UNKNOWN
        if " window(" in text:
            out.append((f"{label} {i}", text))
        else:
            out.append((f"{label} {i}", f"{text}: {kind}"))
    return out


def _aggregates(plan: MeaningPlan, index: int, classes: tuple[str, ...]) -> list[tuple[str, str]]:
    """The aggregate functions below the state store, in the state buffer's order: the first
    aggregate node under it (Spark's ``StateStoreRestore`` sits between, holding no functions)."""
    for k in _descendants(plan, index):
        if plan.classes[k] in classes:
            out = []
            node = plan.nodes[k]
            results = node.get("aggregateAttributes") or ()
            for i, flat in enumerate(node.get("aggregateExpressions") or (), 1):
                text = plan.render(_tree(flat))
                result = _tree(results[i - 1]) if i <= len(results) else None
                kind = _type(result.fields.get("dataType")) if result is not None else UNKNOWN
                out.append((f"aggregate {i}", f"{text}: {kind}"))
            return out
    return [("aggregate 1", UNKNOWN)]


def _session(plan: MeaningPlan, flat: Any) -> str:
    tree = _tree(flat)
    if tree is None:
        return UNKNOWN
    ident = _expr_id(tree.fields)
    found = plan.defs.get(ident) if ident is not None else None
    if found is None:
        return plan.render(tree)
    definition = found[0]
    gaps: list[str] = []
    times: list[str] = []
    todo = [definition]
    while todo:
        node = todo.pop()
        if node.cls == "Literal" and node.fields.get("dataType") == "interval":
            gaps.append(str(node.fields.get("value")))
        elif node.cls == "AttributeReference":
            text = plan.render(node)
            if text not in times:
                times.append(text)
        elif (
            node.cls == "TimestampAddInterval"
            and len(node.children) == 2
            and node.children[1].cls != "Literal"  # a dynamic gap: an expression per row
        ):
            gaps.append(plan.render(node.children[1]))
        todo.extend(node.children)
    if not gaps or not times:
        return plan.render(definition)
    return f"session_window({times[0]}, gap {', '.join(sorted(set(gaps)))})"


def _function(value: Any) -> str:
    tree = _tree(value) if isinstance(value, list) else None
    if tree is None and isinstance(value, str):
        try:
            tree = _tree(json.loads(value))
        except ValueError:
            tree = None
    if tree is not None and isinstance(tree.fields.get("name"), str):
        return str(tree.fields["name"])
    return UNKNOWN


def _mode(value: Any) -> str:
    word = str(value.get("object", "")) if isinstance(value, dict) else ""
    word = word.rsplit("$", 2)[-2] if word.count("$") >= 2 else word.rsplit(".", 1)[-1]
    return _MODES.get(word, UNKNOWN)


def _watermarks(plan: MeaningPlan, index: int) -> list[tuple[str, str]]:
    out = []
    for k in _descendants(plan, index):
        if plan.classes[k] == "EventTimeWatermarkExec":
            flat = plan.nodes[k].get("eventTime")
            tree = _tree(flat) if isinstance(flat, list) else None
            if tree is None and isinstance(flat, dict):
                tree = _Expr(flat)
            if tree is None:
                continue
            ident = _expr_id(tree.fields)
            delay = plan.watermarks.get(ident) if ident is not None else None
            # The plan JSON leaves EventTimeWatermarkExec's delay out (a CalendarInterval);
            # attributes downstream carry it as metadata where Spark put it there.
            text = str(tree.fields.get("name", UNKNOWN))
            if k in plan.texts:
                text += f", delay {plan.texts[k]}"
            elif delay is not None:
                text += f", delay {_duration(delay * 1000)}"
            if ("watermark", text) not in out:
                out.append(("watermark", text))
    return out


def _inputs(plan: MeaningPlan, index: int | None) -> str:
    if index is None:
        return UNKNOWN
    names = []
    for k in [index, *_descendants(plan, index)]:
        if plan.classes[k] in ("StreamingRelationExec", "StreamingDataSourceV2ScanExec"):
            name = plan.nodes[k].get("sourceName")
            names.append(_short_source(name) if isinstance(name, str) else plan.classes[k])
    return ", ".join(names) or UNKNOWN


def _short_source(name: str) -> str:
    """``FileSource[/abs/path/in0]`` as ``FileSource[…/in0]``: a test's inputs usually live in
    a fresh temporary folder per run, and a snapshot holds no machine paths."""
    if name.startswith("FileSource[") and name.endswith("]"):
        folder = name[len("FileSource[") : -1].rstrip("/").rsplit("/", 1)[-1]
        return f"FileSource[…/{folder}]"
    return name


def _children(plan: MeaningPlan, index: int) -> tuple[int | None, int | None]:
    """The indexes of a binary node's two children in the pre-order list."""
    subtree = _subtree_end(plan, index + 1) if index + 1 < len(plan.nodes) else None
    right = subtree if subtree is not None and subtree < len(plan.nodes) else None
    return (index + 1 if index + 1 < len(plan.nodes) else None), right


def _subtree_end(plan: MeaningPlan, start: int) -> int:
    """The index just past the subtree rooted at ``start``."""
    pending = 1
    k = start
    while pending and k < len(plan.nodes):
        pending += int(plan.nodes[k].get("num-children", 0) or 0) - 1
        k += 1
    return k


def _descendants(plan: MeaningPlan, index: int) -> range:
    return range(
        index + 1, _subtree_end(plan, index + 1) if index + 1 < len(plan.nodes) else index + 1
    )


def _duration(micros: int) -> str:
    for size, unit in _MICROS:
        if micros % size == 0:
            n = micros // size
            return f"{n} {unit}{'' if n == 1 else 's'}"
    return f"{micros} microseconds"


def _type(data_type: Any, depth: int = 0) -> str:
    """A Spark data type (its JSON form) in Spark's DDL words: ``bigint``,
    ``struct<start: timestamp, end: timestamp>``; past 32 levels of nesting, ``…``."""
    if depth > 32:
        return "…"
    if isinstance(data_type, str):
        return {"long": "bigint", "integer": "int", "short": "smallint", "byte": "tinyint"}.get(
            data_type, data_type
        )
    if isinstance(data_type, dict):
        kind = data_type.get("type")
        if kind == "struct":
            fields = data_type.get("fields") or ()
            inner = ", ".join(
                f"{f.get('name')}: {_type(f.get('type'), depth + 1)}"
                for f in fields
                if isinstance(f, dict)
            )
            return f"struct<{inner}>"
        if kind == "array":
            return f"array<{_type(data_type.get('elementType'), depth + 1)}>"
        if kind == "map":
            key = _type(data_type.get("keyType"), depth + 1)
            return f"map<{key}, {_type(data_type.get('valueType'), depth + 1)}>"
    return UNKNOWN
