"""A stateful operator's meaning judged against a checkpoint, which keeps no plan: only the
names and types of the state's fields (``state/<n>/.../_metadata/schema``).

What the names show (keys, aggregation buffers, join sides, a group state's fields in another
order) is judged as :mod:`.meaning` judges two plans, in the same words; what they cannot show
(a window's duration, an aggregate's input, the code that updates the state) is said once per
operator as not verified, with how to verify it (:data:`CHECK_WITH_PREVIOUS`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_opid.result import UNKNOWN
from pytest_opid.spark.restart.meaning import (
    ORDER_EFFECT,
    Change,
    bare,
    fact_families,
    reinterpreted_effect,
    single_fact,
)
from pytest_opid.spark.vocabulary import AGGREGATIONS, FUNCTION_DIGEST_FACT, GROUP_STATES

_COLUMN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*): ")


def plain_column(value: str) -> str | None:
    """The column a ``key N`` fact names when it is a plain column (``user: string``)."""
    match = _COLUMN.match(value)
    return match.group(1) if match else None


def checkpoint_meaning(
    number: int,
    operator: str,
    stored: Mapping[str, tuple[str | None, str | None]],
    new_stores: Mapping[str, tuple[str | None, str | None]],
    new: Sequence[tuple[str, str]],
) -> list[Change]:
    """:func:`~.meaning.compare_meaning`'s judgement against a checkpoint, which records no
    plan: only the names of the state's key and value fields (``state/<n>/.../_metadata/
    schema``). A key field of the old name that the new query reads from a column of that name
    is the same key; one the new query computes under the old name cannot be told apart, which
    the change says."""
    head = f"state/{number} ({operator})"
    old_key, old_value = (_names(s) for s in stored.get("default", (None, None)))
    new_key, new_value = (_names(s) for s in new_stores.get("default", (None, None)))
    facts = fact_families(new)
    keys = facts.get("key", [])
    out: list[Change] = []
    windows = [v for v in keys if " window(" in v] + facts.get("session window", [])
    plain_keys = [v for v in keys if " window(" not in v]
    if old_key is not None and new_key is not None:
        old_names = [n for n in old_key if n not in ("window", "session_window")]
        new_names = [n for n in new_key if n not in ("window", "session_window")]
        if len(old_names) == len(new_names) == len(plain_keys):
            unsure = []
            changed = []
            for i, (was, now, value) in enumerate(
                zip(old_names, new_names, plain_keys, strict=True), 1
            ):
                column = plain_column(value)
                if column == was:
                    continue  # the same column, perhaps under a new name
                if was == now:
                    unsure.append(f"key {i} {was} (now {bare(value)})")
                elif was in new_names:
                    changed.append(f"key {i} was {was}, is now {now}")
                else:
                    changed.append(f"key {i} was {was}, is now {bare(value)}")
            if changed:
                if sorted(old_names) == sorted(new_names):
                    effect = ORDER_EFFECT["key"]
                else:
                    was, now = changed[0].split(" was ", 1)[1].split(", is now ", 1)
                    effect = reinterpreted_effect(operator, "key", was, now)
                out.append(
                    Change(
                        "key_meaning",
                        True,
                        f"{head}: the checkpoint's state is keyed by {', '.join(old_names)}; "
                        f"the new query keys it by {', '.join(map(bare, plain_keys))} "
                        f"({'; '.join(changed)}). Spark restarts (the types still match), and "
                        f"the results are wrong: {effect}",
                    )
                )
            if unsure:
                out.append(
                    Change(
                        "key_meaning",
                        False,
                        f"{head}: {'; '.join(unsure)} is computed under the name the "
                        "checkpoint records, which keeps names, not expressions. "
                        + CHECK_WITH_PREVIOUS,
                        verified=False,
                    )
                )
    aggregates = operator in AGGREGATIONS
    if (
        aggregates
        and old_value is not None
        and new_value is not None
        and len(old_value) == len(new_value)
        and old_value != new_value
    ):
        now_aggregates = ", ".join(map(bare, facts.get("aggregate", []))) or UNKNOWN
        diff = [
            f"buffer field {i} was {a}, is now {b}"
            for i, (a, b) in enumerate(zip(old_value, new_value, strict=True), 1)
            if a != b
        ]
        out.append(
            Change(
                "aggregate_meaning",
                True,
                f"{head}: the aggregation buffer's fields changed ({'; '.join(diff)}): the "
                f"aggregates are now {now_aggregates}. "
                "Spark restarts (the types still match), and the results are wrong: each "
                "group's running values are continued by other aggregate functions.",
            )
        )
    out += _checkpoint_join(head, stored, new_stores)
    out += _checkpoint_group_state(
        head,
        operator,
        stored.get("default", (None, None))[1],
        new_stores.get("default", (None, None))[1],
    )
    # What a checkpoint cannot show: said once per operator, never guessed.
    unchecked = []
    if windows:
        unchecked.append(f"the window's duration, slide or gap (now {', '.join(windows)})")
    inputs = [bare(v) for v in facts.get("aggregate", []) if _reads_columns(bare(v))]
    if aggregates and inputs:
        unchecked.append(f"the aggregates' input columns (now {', '.join(inputs)})")
    function = single_fact(facts, FUNCTION_DIGEST_FACT)
    if function is not None:
        name = single_fact(facts, "function") or single_fact(facts, "processor") or UNKNOWN
        unchecked.append(
            f"the function that updates the state (now {name}: a checkpoint keeps no code)"
        )
    join_keys = facts.get("left key", []) + facts.get("right key", [])
    if operator == "symmetricHashJoin" and join_keys:
        left = ", ".join(map(bare, facts.get("left key", [])))
        right = ", ".join(map(bare, facts.get("right key", [])))
        unchecked.append(
            f"the join keys (Spark files them as field0, field1...; now {left} = {right})"
        )
    if unchecked:
        out.append(
            Change(
                "window_meaning" if windows else "state_meaning",
                False,
                f"{head}: not verified: {'; '.join(unchecked)}; the checkpoint keeps the "
                f"state's field names and types, not the plan. {CHECK_WITH_PREVIOUS}",
                verified=False,
            )
        )
    return out


#: How to verify what a checkpoint alone cannot show.
CHECK_WITH_PREVIOUS = (
    "To verify it: opid check-restore CHECKPOINT NEW --previous-fingerprint OLD.json (the "
    "fingerprint or snapshot of the query that wrote the checkpoint), or in pytest keep the "
    "query's snapshot next to previous=. To see what the restart does: opid demonstrate "
    "--spark OLD_MODULE:FUNCTION --spark NEW_MODULE:FUNCTION runs both versions on generated "
    "rows (in pytest: opid.demonstrate_with(old_query))."
)


#: An aggregate's argument that reads no column: ``*``, a number, a string, null.
_NO_COLUMN = re.compile(r"^(?:DISTINCT )?(?:\*|-?[0-9][0-9.]*[LDSYF]?|'[^']*'|null|true|false)$")


def _reads_columns(aggregate: str) -> bool:
    """``sum(v)`` reads a column, whose expression a checkpoint does not keep; ``count(1)``
    (``count(*)``) and ``count()`` read none."""
    if "(" not in aggregate or not aggregate.endswith(")"):
        return False
    inner = aggregate.split("(", 1)[1][:-1].strip()
    return bool(inner) and not all(_NO_COLUMN.match(a.strip()) for a in inner.split(","))


def _side_values(
    stores: Mapping[str, tuple[str | None, str | None]], side: str
) -> list[str] | None:
    """The value field names of a stream-stream join's buffered rows on one side
    (``<side>-keyWithIndexToValue``, a store or, in state format 3, a column family)."""
    for name, (_, value) in stores.items():
        if name.endswith(f"{side}-keyWithIndexToValue"):
            return _names(value)
    return None


def _checkpoint_join(
    head: str,
    stored: Mapping[str, tuple[str | None, str | None]],
    new_stores: Mapping[str, tuple[str | None, str | None]],
) -> list[Change]:
    """Join sides swapped: the rows the checkpoint buffered for the left input carry the
    right input's columns now, and the other way round."""
    was_left, was_right = _side_values(stored, "left"), _side_values(stored, "right")
    now_left, now_right = _side_values(new_stores, "left"), _side_values(new_stores, "right")
    if None in (was_left, was_right, now_left, now_right) or was_left == was_right:
        return []
    if (was_left, was_right) != (now_right, now_left):
        return []
    return [
        Change(
            "join_meaning",
            True,
            f"{head}: the join's sides are swapped: the checkpoint buffers rows of "
            f"({', '.join(was_left or ())}) for the left input, the new query's left input has "
            f"({', '.join(now_left or ())}). Spark restarts (both buffers keep their types by "
            "position), and the results are wrong: rows buffered for one input are read and "
            "joined as the other's.",
        )
    ]


def _checkpoint_group_state(
    head: str, operator: str, stored: str | None, schema: str | None
) -> list[Change]:
    """applyInPandasWithState / flatMapGroupsWithState: the group state's fields in another
    order (Spark reads them by position; state format 2 nests them in ``groupState``)."""
    if operator not in GROUP_STATES:
        return []
    was, now = _group_state_names(stored), _group_state_names(schema)
    if was is None or now is None or was == now or sorted(was) != sorted(now):
        return []
    return [
        Change(
            "state_meaning",
            True,
            f"{head}: the group state's fields are in another order (the checkpoint has "
            f"{', '.join(was)}, the new query {', '.join(now)}). Spark restarts (it reads them "
            "by position, and the types still match), and the results are wrong: each field's "
            "old value is read as another field's.",
        )
    ]


def _group_state_names(schema: str | None) -> list[str] | None:
    """The group state's field names: inside ``groupState`` (state format 2), else the top."""
    fields = _fields(schema)
    for field in fields or ():
        if isinstance(field, dict) and field.get("name") == "groupState":
            inner = _fields(field.get("type"))
            if inner is not None:
                return [str(f.get("name")) if isinstance(f, dict) else "?" for f in inner]
    return _names(schema)


def _names(schema: str | None) -> list[str] | None:
    """A struct schema's field names (Spark's JSON form), ``None`` where it is not one."""
    fields = _fields(schema)
    if fields is None:
        return None
    return [str(f.get("name")) if isinstance(f, dict) else "?" for f in fields]


def _fields(schema: Any) -> list[Any] | None:
    """The ``fields`` of a struct type given as JSON text or already parsed."""
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except ValueError:
            return None
    fields = schema.get("fields") if isinstance(schema, dict) else None
    return fields if isinstance(fields, list) else None
