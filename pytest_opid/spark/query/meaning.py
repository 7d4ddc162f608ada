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
  ``function digest``, the digest of the Python code that updates the state
  (:mod:`pytest_opid.spark.function_digest`, added from the JVM's pickled function by
  :mod:`pytest_opid.spark.query.graph`);
* ``output mode``, ``watermark``, ``limit``.

A fact the plan does not show is :data:`~pytest_opid.result.UNKNOWN`, never guessed. Which
facts change meaning and how a change is worded is :mod:`pytest_opid.spark.restart.meaning`'s
business.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_opid.result import UNKNOWN
from pytest_opid.spark.query.expressions import (
    Expr,
    MeaningPlan,
    data_type_text,
    duration_text,
    expr_id,
    expression_tree,
)
from pytest_opid.spark.renamings import expression_class

_MODES = {"Append": "append", "Update": "update", "Complete": "complete"}


_JOINS = {
    "Inner": "inner",
    "LeftOuter": "leftOuter",
    "RightOuter": "rightOuter",
    "FullOuter": "fullOuter",
    "LeftSemi": "leftSemi",
    "LeftAnti": "leftAnti",
}


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
        facts.append(
            ("state schema", data_type_text(state) if isinstance(state, dict) else UNKNOWN)
        )
        timeout = node.get("timeoutConf")
        word = str(timeout.get("object", "")) if isinstance(timeout, dict) else ""
        facts.append(("timeout", word.rsplit(".", 1)[-1].rstrip("$") or UNKNOWN))
        facts.append(("output mode", _mode(node.get("outputMode"))))
    elif cls.startswith("TransformWithState"):
        # Its state is filed under the grouping key as under any other operator's: another
        # key of the same type restarts and reads per-session state as per-user state.
        facts += _keys(plan, node.get("groupingAttributes"), "key")
    elif cls == "StreamingGlobalLimitExec":
        limit = node.get("streamLimit")
        facts.append(("limit", str(limit) if isinstance(limit, int) else UNKNOWN))
    facts += extra
    facts += _watermarks(plan, index)
    return tuple(facts)


def _keys(plan: MeaningPlan, flats: Any, label: str) -> list[tuple[str, str]]:
    out = []
    for i, flat in enumerate(flats if isinstance(flats, list) else (), 1):
        tree = expression_tree(flat)
        text = plan.render(tree)
        kind = data_type_text(tree.fields.get("dataType")) if tree is not None else UNKNOWN
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
                text = plan.render(expression_tree(flat))
                result = expression_tree(results[i - 1]) if i <= len(results) else None
                kind = (
                    data_type_text(result.fields.get("dataType")) if result is not None else UNKNOWN
                )
                out.append((f"aggregate {i}", f"{text}: {kind}"))
            return out
    return [("aggregate 1", UNKNOWN)]


def _session(plan: MeaningPlan, flat: Any) -> str:
    tree = expression_tree(flat)
    if tree is None:
        return UNKNOWN
    ident = expr_id(tree.fields)
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
            expression_class(node.cls) == "TimestampAddInterval"  # TimeAdd before Spark 4.1
            and len(node.children) == 2
            and node.children[1].cls != "Literal"  # a dynamic gap: an expression per row
        ):
            gaps.append(plan.render(node.children[1]))
        todo.extend(node.children)
    if not gaps or not times:
        return plan.render(definition)
    return f"session_window({times[0]}, gap {', '.join(sorted(set(gaps)))})"


def _function(value: Any) -> str:
    tree = expression_tree(value) if isinstance(value, list) else None
    if tree is None and isinstance(value, str):
        try:
            tree = expression_tree(json.loads(value))
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
            tree = expression_tree(flat) if isinstance(flat, list) else None
            if tree is None and isinstance(flat, dict):
                tree = Expr(flat)
            if tree is None:
                continue
            # The plan JSON leaves EventTimeWatermarkExec's delay out (a CalendarInterval):
            # the JVM's text of it where read, else the metadata Spark puts on attributes
            # downstream (a walk of the whole plan, so only then).
            text = str(tree.fields.get("name", UNKNOWN))
            if k in plan.texts:
                text += f", delay {plan.texts[k]}"
            else:
                ident = expr_id(tree.fields)
                delay = plan.watermarks.get(ident) if ident is not None else None
                if delay is not None:
                    text += f", delay {duration_text(delay * 1000)}"
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
