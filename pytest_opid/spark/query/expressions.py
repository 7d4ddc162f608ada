"""Spark's expressions as text a reviewer reads, from the plan JSON (pure Python, no JVM).

The plan tree (:mod:`pytest_opid.spark.query.plan_tree`) and the state meaning
(:mod:`pytest_opid.spark.query.meaning`) both write expressions over the columns the query reads:
aliases resolved through the plan's projections and aggregates, expression ids left out (they
change from run to run), Python UDF results named by their function. :class:`MeaningPlan` indexes
one plan's nodes for that; :func:`expression_tree` parses one flattened expression."""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pytest_opid.io.schema import type_text
from pytest_opid.result import UNKNOWN

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
EVAL_PYTHON = frozenset({"ArrowEvalPythonExec", "BatchEvalPythonExec"})


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


#: An expression id as Spark writes it into text (``v#2L``, ``ts#12``), which is also how it
#: names some attributes it makes (an aggregate's result is named by the aggregate's text,
#: ``count(v#2L)``): a per-session counter, never written into a fingerprint.
EXPRESSION_ID = re.compile(r"(?<=\S)#\d+L?\b")


def without_ids(text: str) -> str:
    """``text`` with Spark's expression ids removed: ``count(v#2L)`` -> ``count(v)``."""
    return EXPRESSION_ID.sub("", text) if "#" in text else text


#: Wrappers that change nothing a reader of the state cares about.
_TRANSPARENT = frozenset({"Alias", "KnownNullable", "KnownNotNull", "PromotePrecision"})


class Expr:
    """One expression node of the plan JSON with its children (the JSON lists a tree's nodes
    in pre-order, each with ``num-children``)."""

    __slots__ = ("children", "cls", "fields")

    def __init__(self, fields: Mapping[str, Any]) -> None:
        self.fields = fields
        self.cls = str(fields.get("class", "")).rsplit(".", 1)[-1]
        self.children: list[Expr] = []


def expression_tree(flat: Any) -> Expr | None:
    """The tree of a flattened expression (a list of nodes in pre-order), without recursion."""
    if not isinstance(flat, list) or not flat or not isinstance(flat[0], dict):
        return None
    root = Expr(flat[0])
    stack = [(root, int(flat[0].get("num-children", 0) or 0))]
    for raw in flat[1:]:
        if not isinstance(raw, dict) or not stack:
            return None
        node = Expr(raw)
        parent, _ = stack[-1]
        parent.children.append(node)
        while stack and len(stack[-1][0].children) >= stack[-1][1]:
            stack.pop()
        wanted = int(raw.get("num-children", 0) or 0)
        if wanted:
            stack.append((node, wanted))
    return root


def expr_id(fields: Mapping[str, Any], key: str = "exprId") -> int | None:
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
        self._parsed: dict[int, Expr | None] = {}
        self.nodes = nodes
        self.texts = texts or {}  # what the JSON leaves out, by node position (from the JVM)
        self.classes = [str(n.get("class", "")).rsplit(".", 1)[-1] for n in nodes]
        self.defs: dict[int, tuple[Expr, str]] = {}  # exprId -> (definition, where)
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
            elif cls in EVAL_PYTHON:  # pythonUDF0, 1... stand for the UDFs, in order
                udfs, outputs = node.get("udfs") or (), node.get("resultAttrs") or ()
                for udf, out in zip(udfs, outputs, strict=False):
                    self._define_output(out, self.parse(udf), "project")
            elif cls in _AGGREGATE_RESULTS:
                flats = node.get("aggregateExpressions") or node.get("aggExpressions") or ()
                results = node.get("aggregateAttributes") or ()
                for i, flat in enumerate(flats):
                    tree = self.parse(flat)
                    if tree is not None and tree.cls == "AggregateExpression":
                        ident = expr_id(tree.fields, "resultId")
                        if ident is not None:
                            self.defs.setdefault(ident, (tree, "aggregate"))
                        # The final step of a distinct aggregate (AggUtils'
                        # planAggregateWithOneDistinct) gives its functions new result ids;
                        # its aggregateAttributes, in the same order, keep the ids the
                        # result expressions read.
                        if i < len(results):
                            self._define_output(results[i], tree, "aggregate")

    @functools.cached_property
    def watermarks(self) -> dict[int, int]:
        """exprId -> delay (ms), from attribute metadata: a walk of the whole plan, made only
        where a watermark is asked for."""
        found: dict[int, int] = {}
        for ident, delay in self._delays():
            found.setdefault(ident, delay)
        return found

    def parse(self, flat: Any) -> Expr | None:
        """:func:`expression_tree` of an expression of this plan's nodes, parsed once however
        often it is read (the plan's lists live as long as the plan)."""
        key = id(flat)
        if key not in self._parsed:
            self._parsed[key] = expression_tree(flat)
        return self._parsed[key]

    def _define_output(self, attribute: Any, definition: Expr | None, where: str) -> None:
        """``attribute`` (an output's flattened expression) stands for ``definition``."""
        parsed = self.parse(attribute)
        ident = expr_id(parsed.fields) if parsed is not None else None
        if ident is not None and definition is not None:
            self.defs.setdefault(ident, (definition, where))

    def _define(self, tree: Expr | None, where: str) -> None:
        if tree is not None and tree.cls == "Alias" and tree.children:
            ident = expr_id(tree.fields)
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
                    ident = expr_id(item)
                    delay = meta["spark.watermarkDelayMs"]
                    if ident is not None and isinstance(delay, int):
                        yield ident, delay
                todo.extend(v for v in item.values() if isinstance(v, (list, dict)))

    # -- rendering ------------------------------------------------------------------------

    def render(self, tree: Expr | None) -> str:
        """``tree`` as text over the columns the query reads, aliases resolved."""
        return self.render_budgeted(tree)[0]

    def render_budgeted(self, tree: Expr | None) -> tuple[str, bool]:
        """:meth:`render`, and whether the text was cut short ("…") past :data:`_BUDGET`."""
        if tree is None:
            return UNKNOWN, False
        budget = [_BUDGET]
        text = self._render(tree, budget, frozenset())
        return text, budget[0] < 0

    def digest(self, tree: Expr) -> str:
        """A short hash of ``tree`` with every alias resolved, as :meth:`render` would write it
        without a budget: what tells two expressions apart where both texts were cut short.
        Each definition is hashed once however often it is used (linear, without recursion);
        expression ids, qualifiers and metadata are left out, as in the text."""
        done: dict[int, bytes] = {}
        busy: set[int] = set()  # definitions being hashed: a (malformed) cycle stops there
        stack: list[tuple[Expr, bool]] = [(tree, False)]
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

    def _definition(self, node: Expr) -> Expr | None:
        """What :meth:`_render` writes in a node's place: an alias's expression for an
        attribute, the child of a wrapper."""
        if node.cls == "AttributeReference":
            ident = expr_id(node.fields)
            found = self.defs.get(ident) if ident is not None else None
            return found[0] if found is not None else None
        if node.cls in self.transparent and node.children:
            return node.children[0]
        return None

    def _render(self, node: Expr, budget: list[int], seen: frozenset[int]) -> str:
        # Depth is bounded by the budget (each node spends one), far below Python's limit.
        budget[0] -= 1
        if budget[0] < 0:
            return "…"
        cls, f = node.cls, node.fields
        if cls == "AttributeReference":
            ident = expr_id(f)
            found = self.defs.get(ident) if ident is not None else None
            if found is not None and ident is not None and ident not in seen:
                definition, where = found
                window = self._window(definition, where, budget, seen | {ident})
                if window is not None:
                    return window
                return self._render(definition, budget, seen | {ident})
            return without_ids(str(f.get("name", "?")))
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
            return f"cast({inner} as {type_text(f.get('dataType'), nullability=False)})"
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

    def function_name(self, node: Expr) -> str:
        """The name an expression node is written with: ``isnotnull`` for ``IsNotNull``; a
        Python UDF's own (``plus_one``: Spark's plan JSON keeps it, not the code)."""
        cls = node.cls
        name = node.fields.get("name")
        if cls in _PYTHON_FUNCTIONS and isinstance(name, str) and name:
            return name
        return self.function_names.get(cls) or (cls[0].lower() + cls[1:] if cls else "?")

    def _window(
        self, definition: Expr, where: str, budget: list[int], seen: frozenset[int]
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
        spans = ", ".join(duration_text(m) for m in sorted(micros, reverse=True)) or UNKNOWN
        return f"{kind} window({', '.join(times) or UNKNOWN}, {spans})"


#: Fields an expression's hash leaves out: ids that differ per session, and what the
#: rendered text leaves out too.
_UNHASHED = frozenset(
    {"class", "num-children", "exprId", "resultId", "qualifier", "metadata", "jvmId"}
)


def _node_hash(node: Expr, children: list[bytes]) -> bytes:
    own = {
        k: v
        for k, v in node.fields.items()
        if k not in _UNHASHED and (not isinstance(v, (dict, list)) or k == "dataType")
    }
    head = json.dumps([node.cls, own], sort_keys=True, default=str).encode()
    data = len(head).to_bytes(8, "big") + head + b"".join(children)
    return hashlib.blake2b(data, digest_size=16).digest()


MICROS = (
    (86_400_000_000, "day"),
    (3_600_000_000, "hour"),
    (60_000_000, "minute"),
    (1_000_000, "second"),
    (1_000, "millisecond"),
)


def duration_text(micros: int) -> str:
    for size, unit in MICROS:
        if micros % size == 0:
            n = micros // size
            return f"{n} {unit}{'' if n == 1 else 's'}"
    return f"{micros} microseconds"


def data_type_text(data_type: Any) -> str:
    """A data type as a meaning fact names it: Spark's DDL words, no ``NOT NULL``."""
    return type_text(data_type, nullability=False)
