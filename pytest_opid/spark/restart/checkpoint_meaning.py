"""A stateful operator's meaning judged against a checkpoint, which keeps no plan: only the
names and types of the state's fields (``state/<n>/.../_metadata/schema``).

What the names show (keys, aggregation buffers, join sides, a group state's fields in another
order) is judged as :mod:`.meaning` judges two plans, in the same words; what they cannot show
(a window's duration, an aggregate's input, the code that updates the state) is said once per
operator as not verified, with how to verify it (:data:`CHECK_WITH_PREVIOUS`).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_opid.result import UNKNOWN
from pytest_opid.spark.checkpoint.state_rows import StateSample
from pytest_opid.spark.restart.meaning import (
    Change,
    bare,
    fact_families,
    order_effect,
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
    sample: StateSample | None = None,
    rows_read: bool = False,
) -> list[Change]:
    """:func:`~.meaning.compare_meaning`'s judgement against a checkpoint, which records no
    plan: only the names of the state's key and value fields (``state/<n>/.../_metadata/
    schema``). A key field of the old name that the new query reads from a column of that name
    is the same key; one the new query computes under the old name cannot be told apart, which
    the change says. A window's durations are judged by the bounds of the windows in the
    state's rows, where ``sample`` holds some (``rows_read``: the rows were asked for)."""
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
                    effect = order_effect("key", old_names, new_names)
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
        judged = window_evidence(head, windows, sample)
        if isinstance(judged, Change):
            out.append(judged)
        elif judged is None:
            why = _not_read(sample, rows_read)
            unchecked.append(f"the window's duration, slide or gap (now {', '.join(windows)}{why})")
        else:  # the rows keep each window's bounds, not the column its time was read from
            unchecked.append(
                f"the time column of the window (now {', '.join(windows)}; its duration, slide "
                "or gap match the windows in the state's rows, which do not name the column)"
            )
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
                "window_meaning" if unchecked[0].startswith("the window") else "state_meaning",
                False,
                f"{head}: not verified: {'; '.join(unchecked)}; the checkpoint keeps the "
                f"state's field names and types, not the plan. {CHECK_WITH_PREVIOUS}",
                verified=False,
            )
        )
    return out


def _not_read(sample: StateSample | None, rows_read: bool) -> str:
    """Why the state's rows said nothing about a window, for the not-verified line."""
    if not rows_read:
        return (
            "; the state's rows, which hold each window's bounds, were not read: no "
            "SparkSession at hand; check the program itself (opid check-restore CHECKPOINT "
            "--spark MODULE:FUNCTION) to have them read"
        )
    if sample is None or sample.not_read:
        return f"; Spark's state reader read no row: {sample.not_read if sample else 'no window'}"
    if not sample.rows:
        return "; the state holds no window now"
    return "; the windows in the state's rows fit both"


_DURATION = re.compile(r"([0-9]+) (day|hour|minute|second|millisecond|microsecond)s?\b")
_MICROS = {
    "day": 86_400_000_000,
    "hour": 3_600_000_000,
    "minute": 60_000_000,
    "second": 1_000_000,
    "millisecond": 1_000,
    "microsecond": 1,
}


def durations(fact: str) -> list[int]:
    """The durations a window fact names, in microseconds, in its order
    (``sliding window(ts, 10 minutes, 5 minutes)`` -> window, slide)."""
    return [int(n) * _MICROS[unit] for n, unit in _DURATION.findall(fact)]


def window_evidence(
    head: str, windows: Sequence[str], sample: StateSample | None
) -> Change | bool | None:
    """The new query's window judged by the windows in the state's rows: a :class:`Change`
    where they show another window, ``True`` where they show its durations (not its time
    column, which no row names), ``None`` where they cannot tell (no rows, a window whose
    durations the fact does not give plainly).

    A time window's row keeps its ``start`` and ``end``: their difference is the window's
    duration, every start lies on the slide's grid, and one event's windows (all still in the
    state for the newest events) start one slide apart. A session's row keeps its bounds: a
    session of one event spans exactly the gap, and none spans less."""
    if sample is None or len(windows) != 1:
        return None
    fact = windows[0]
    spans = durations(fact)
    if fact.startswith("session_window(") and len(spans) == 1 and sample.sessions:
        gap = spans[0]
        shortest = min(end - start for start, end in sample.sessions)
        if shortest < gap:
            return _window_changed(
                head,
                fact,
                f"the state's sessions span as little as {_text(shortest)} (a session is at "
                "least its gap long), so its gap was shorter",
            )
        return True if shortest == gap else None
    if not sample.windows or not fact.startswith(("tumbling window(", "sliding window(")):
        return None
    sliding = fact.startswith("sliding")
    if len(spans) != (2 if sliding else 1):
        return None  # a start offset, or durations not given plainly
    size, slide = (spans[0], spans[1]) if sliding else (spans[0], spans[0])
    sizes = sorted({end - start for start, end in sample.windows})
    if sizes != [size]:
        return _window_changed(
            head,
            fact,
            f"the state's windows are {', '.join(map(_text, sizes))} long",
        )
    if any(start % slide for start, _ in sample.windows):
        return _window_changed(
            head,
            fact,
            f"the state's windows start off the {_text(slide)} grid (another slide or start time)",
        )
    starts = sorted({start for start, _ in sample.windows})
    steps = {b - a for a, b in itertools.pairwise(starts)}
    closest = min(steps) if steps else None
    if sliding:
        if closest == slide:
            return True
        if sample.complete and (closest is None or closest > slide):
            return _window_changed(
                head,
                fact,
                f"no two of the state's windows start {_text(slide)} apart, as one event's "
                "windows would (the state was written by windows that do not overlap)",
            )
        return None
    if closest is not None and closest < size:
        return _window_changed(
            head,
            fact,
            f"the state's windows start {_text(closest)} apart and overlap (sliding windows)",
        )
    return True


def _window_changed(head: str, fact: str, shown: str) -> Change:
    return Change(
        "window_meaning",
        True,
        f"{head}: the window changed: the new query's is {fact}; {shown} (read from the "
        "checkpoint's state rows). Spark restarts (the state's types still match), and the "
        "results are wrong: the old windows stay in the state and are updated and emitted "
        "next to the new ones, so counts are split between both.",
    )


def _text(micros: int) -> str:
    for unit, size in _MICROS.items():
        if micros % size == 0:
            n = micros // size
            return f"{n} {unit}{'' if n == 1 else 's'}"
    return f"{micros} microseconds"


#: How to verify what a checkpoint alone cannot show.
CHECK_WITH_PREVIOUS = (
    "To verify it: record the running query in its checkpoint at each deploy (opid "
    "record-deploy CHECKPOINT --spark MODULE:FUNCTION -- ARGS), which check-restore then "
    "uses by itself; or opid check-restore CHECKPOINT NEW --previous-fingerprint OLD.json (the "
    "fingerprint or snapshot of the query that wrote the checkpoint); or in pytest keep the "
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
