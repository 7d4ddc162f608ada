"""Which changes of a stateful operator's meaning make a restart Spark accepts unsafe, and
what Spark will then do, in Spark's words.

:mod:`pytest_opid.spark.meaning` records the facts; this module compares two operators' facts
(:func:`compare_meaning`, both from plans) or an operator's facts with what a checkpoint keeps
of its state (:func:`checkpoint_meaning`: field names only). :mod:`pytest_opid.spark.restore`
turns each :class:`Change` into a reinterpreted-state finding (not safe) or a warning.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from pytest_opid.result import UNKNOWN
from pytest_opid.spark.function_digest import fact_parts
from pytest_opid.spark.vocabulary import AGGREGATIONS, FUNCTION_DIGEST_FACT, GROUP_STATES


class Change(NamedTuple):
    """A difference in what state/<n> means. ``reinterprets``: Spark restarts and the new
    query reads the old state as something else (not safe); otherwise worth a warning."""

    kind: str  # key_meaning, aggregate_meaning, window_meaning, join_meaning, state_meaning
    reinterprets: bool
    message: str
    #: False: the change may or may not reinterpret the state; what the old query left (a
    #: checkpoint) cannot tell, and the message says how to check it
    verified: bool = True
    #: the fix of a reinterpreting change ("\nFix:\n  - ..."), where it is not the usual one
    fix: str | None = None


#: Positional facts: ``<family> N``, compared as lists.
_LISTS = ("key", "aggregate", "left key", "right key")


_WARN_ONLY = (
    "output mode",
    "watermark",
    "join type",
    "join condition",
    "function",
    "timeout",
    "limit",
)


_COLUMN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*): ")


def compare_meaning(
    number: int,
    operator: str,
    old: Sequence[tuple[str, str]],
    new: Sequence[tuple[str, str]],
    origin: str,
) -> list[Change]:
    """What changed in the meaning of ``state/<number>`` from ``old`` facts to ``new`` ones
    (both from plans: a fingerprint, a snapshot). Facts of transformWithState variables are
    judged with the operator's properties, not here."""
    if not new:
        return []
    if not old:
        return [
            Change(
                "state_meaning",
                False,
                f"state/{number} ({operator}): {origin} records no state meaning (saved before "
                "pytest-opid recorded it), so grouping keys, aggregates, windows and "
                "deduplication columns were not compared; record it with "
                "pytest --snapshot-update",
            )
        ]
    head = f"state/{number} ({operator})"
    before, after = _families(old), _families(new)
    out: list[Change] = []
    for family in _LISTS:
        was, now = before.get(family, []), after.get(family, [])
        if not was or not now or len(was) != len(now):
            continue  # Spark compares the number of fields itself
        out += _positional(head, operator, family, was, now)
    for fact in ("session window", "state schema"):
        was_s, now_s = _single(before, fact), _single(after, fact)
        if was_s is None or now_s is None or was_s == now_s:
            continue
        if UNKNOWN in (was_s, now_s):
            out.append(_unknown(head, fact))
        elif fact == "state schema":
            out += _state_schema(head, was_s, now_s)
        else:
            out.append(
                Change(
                    "window_meaning",
                    True,
                    f"{head}: the session window was {was_s}, is now {now_s}. Spark restarts, "
                    f"and the results are wrong: sessions closed under {was_s} stay in the "
                    "state and are merged and emitted by the new rule.",
                )
            )
    left_was, right_was = _single(before, "left input"), _single(before, "right input")
    left_now, right_now = _single(after, "left input"), _single(after, "right input")
    if (
        left_was is not None
        and left_was != right_was
        and (left_was, right_was) == (right_now, left_now)
        and UNKNOWN not in (left_was, right_was)
    ):
        out.append(
            Change(
                "join_meaning",
                True,
                f"{head}: the join's sides are swapped: the left input was {left_was}, it is now "
                f"the right one. Spark restarts (both sides' buffers keep their schemas by "
                "position), and the results are wrong: rows buffered for the left input are "
                "read as the right input's and joined as such.",
            )
        )
    digests = _function_digest(head, number, origin, before, after)
    out += digests
    compared = _digest_known(before) and _digest_known(after)
    for fact in _WARN_ONLY:
        was_s, now_s = _single(before, fact), _single(after, fact)
        if was_s is None or now_s is None or was_s == now_s or UNKNOWN in (was_s, now_s):
            continue
        if fact == "function" and compared:
            continue  # the code itself was compared: a rename alone changes nothing
        out.append(
            Change(
                "state_meaning",
                False,
                f"{head}: {fact} was {was_s}, is now {now_s}. Spark restarts on the old state; "
                f"{_WARN_WHY.get(fact, 'check that the state still means what it did.')}",
            )
        )
    return out


def _digest_known(families: Mapping[str, list[str]]) -> bool:
    value = _single(families, FUNCTION_DIGEST_FACT)
    return value is not None and fact_parts(value) is not None


def _function_digest(
    head: str,
    number: int,
    origin: str,
    before: Mapping[str, list[str]],
    after: Mapping[str, list[str]],
) -> list[Change]:
    """The Python code that updates the state (:mod:`pytest_opid.spark.function_digest`):
    another digest means another function reads and updates the old state."""
    now = _single(after, FUNCTION_DIGEST_FACT)
    if now is None:
        return []  # no Python code updates this state
    was = _single(before, FUNCTION_DIGEST_FACT)
    if was is None:
        return [
            Change(
                "state_meaning",
                False,
                f"{head}: {origin} records no digest of the function that updates the state "
                "(saved before pytest-opid recorded it), so a change of its code was not "
                "noticed; record it with pytest --snapshot-update",
            )
        ]
    parts_was, parts_now = fact_parts(was), fact_parts(now)
    if parts_was is None or parts_now is None:
        return [_unknown(head, "function that updates the state")]
    if parts_was == parts_now:
        return []
    name = _single(after, "function") or _single(after, "processor") or UNKNOWN
    what = "processor" if _single(after, "processor") is not None else "function"
    if parts_was[1] != parts_now[1]:
        return [
            Change(
                "state_meaning",
                False,
                f"{head}: the function that updates state/{number} ({what} {name}) was "
                f"digested from {parts_was[1]} before and from {parts_now[1]} now, so its "
                "code was not compared: make both fingerprints where its source file is found "
                "(code run by exec has none) and on the same Python version.",
                verified=False,
            )
        ]
    return [
        Change(
            "state_meaning",
            True,
            f"{head}: the function that updates state/{number} changed ({what} {name}: its "
            "code, its constants or the values it closes over or reads from its module; "
            f"digest {parts_was[0]} -> {parts_now[0]}); Spark will feed it the old state. "
            "Spark restarts (the state schema is the same), and the results are wrong unless "
            "the new code reads the old state as the old code wrote it: state built under "
            "the old rules is continued under the new ones.",
            fix=FIX_FUNCTION,
        )
    ]


def evolved_processor(change: Change) -> Change:
    """A transformWithState processor whose code changed together with the state variables it
    declares (a variable added, a schema evolved, a TTL changed): Spark's rules and ours judge
    each variable (:mod:`pytest_opid.spark.restart.transform_with_state`), and the new code is
    the evolution's own; what is left to check is said as a warning."""
    head = change.message.split(": the function that updates", 1)[0]
    name = change.message.split("(processor ", 1)[-1].split(":", 1)[0]
    return Change(
        "state_meaning",
        False,
        f"{head}: the processor's code changed together with the state variables it declares "
        f"(processor {name}); each variable is judged on its own, and Spark will feed the "
        "variables it keeps to the new code: check that it reads their old values as the old "
        "code wrote them.",
    )


#: The fix of a changed state function: the old state may still mean the same to it.
FIX_FUNCTION = (
    "\nFix:\n"
    "  - if the old state still means the same to the new code (the same fields, written by "
    "the same rules), accept the change: pytest --snapshot-update records it (opid "
    "check-restore: --allow-reinterpreted-state)\n"
    "  - or run the changed query on a new checkpoint location: its state starts empty and "
    "its sources start from their beginning (or startingOffsets)"
)


_WARN_WHY = {
    "output mode": "rows already emitted are not emitted again under the new mode.",
    "watermark": "the checkpoint keeps the old watermark; the new delay applies from now on.",
    "join type": "rows buffered so far are joined under the new type from now on "
    "(unmatched rows evicted before the restart are not emitted again).",
    "join condition": "rows buffered so far are matched, and evicted, under the new condition "
    "from now on (rows evicted before the restart are not joined again).",
    "function": "the new function reads the state the old one wrote: check that it reads "
    "every field the same way.",
    "timeout": "groups' timeouts set before the restart follow the old configuration.",
    "limit": "rows already counted against the old limit stay counted.",
}


def _families(facts: Sequence[tuple[str, str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for fact, value in facts:
        family = fact.rsplit(" ", 1)[0] if fact.rsplit(" ", 1)[-1].isdigit() else fact
        out.setdefault(family, []).append(UNKNOWN if _UNSAID.search(value) else value)
    return out


#: What earlier pytest-opid wrote where it now says which: a Python UDF's result as Spark
#: names it (``pythonUDF0``, now the UDF: ``bucket(k)``) and a struct field without its name
#: (``getStructField(payload)``, now ``payload.user``). Such a fact says nothing of which UDF
#: or field it was: it is not compared (a warning says so).
_UNSAID = re.compile(r"\bpythonUDF\d+\b|\bget(?:Struct|ArrayStruct)Fields?\(")


def _single(families: Mapping[str, list[str]], fact: str) -> str | None:
    values = families.get(fact)
    return values[0] if values else None


def _unknown(head: str, what: str) -> Change:
    return Change(
        "state_meaning",
        False,
        f"{head}: its {what} could not be read on both sides, so it was not compared.",
    )


def _positional(
    head: str, operator: str, family: str, was: list[str], now: list[str]
) -> list[Change]:
    if was == now:
        return []
    if UNKNOWN in was or UNKNOWN in now:
        return [_unknown(head, f"{family}s")]
    if sorted(was) == sorted(now):
        moved = [
            f"{family} {i} was {a}, is now {b}"
            for i, (a, b) in enumerate(zip(was, now, strict=True), 1)
            if a != b
        ]
        return [
            Change(
                _KIND.get(family, "key_meaning"),
                True,
                f"{head}: the {family}s are in another order ({'; '.join(moved)}). Spark restarts "
                "(it reads state by position, and the types still match), and the results are "
                f"wrong: {_ORDER_EFFECT.get(family, _ORDER_EFFECT['key'])}",
            )
        ]
    out = []
    for i, (a, b) in enumerate(zip(was, now, strict=True), 1):
        if a == b:
            continue
        windowed = " window(" in a or " window(" in b
        out.append(
            Change(
                "window_meaning" if windowed else _KIND.get(family, "key_meaning"),
                True,
                f"{head}: {family} {i} was {a}, is now {b}. Spark restarts (the state's types "
                f"still match), and the results are wrong: {_effect(operator, family, a, b)}",
            )
        )
    return out


_KIND = {
    "key": "key_meaning",
    "aggregate": "aggregate_meaning",
    "left key": "join_meaning",
    "right key": "join_meaning",
}


_ORDER_EFFECT = {
    "key": "each group's values come out under the other key columns (e.g. a country in the "
    "category column).",
    "aggregate": "each aggregate's running value is continued as another aggregate's.",
    "left key": "buffered rows are matched on the other key column.",
    "right key": "buffered rows are matched on the other key column.",
}


def _effect(operator: str, family: str, was: str, now: str) -> str:
    if family == "aggregate":
        return (
            f"each group's state holds {_bare(was)} so far, which the new query reads as "
            f"{_bare(now)} and goes on updating: the emitted values mix both."
        )
    if family in ("left key", "right key"):
        return (
            f"rows buffered under {_bare(was)} are looked up by {_bare(now)}: they match rows "
            "they should not and miss the ones they should."
        )
    if " window(" in was or " window(" in now:
        return (
            f"A's windows ({was}) stay in the state and are updated and emitted next to B's "
            f"({now}): counts are split between both."
        )
    if operator.startswith("dedupe"):
        return (
            f"the state remembers the {_bare(was)} values seen so far and the new query looks "
            f"up {_bare(now)} values in it: a row whose {_bare(now)} matches an old "
            f"{_bare(was)} is dropped, and duplicates by {_bare(now)} seen before the restart "
            "pass again."
        )
    return (
        f"the groups kept under {_bare(was)} are read as groups of {_bare(now)}, updated and "
        "emitted next to the new ones."
    )


def _bare(value: str) -> str:
    """A fact's value without its type (``user: string`` -> ``user``)."""
    return value.rsplit(": ", 1)[0] if ": " in value else value


def _state_schema(head: str, was: str, now: str) -> list[Change]:
    names_was, names_now = _field_names(was), _field_names(now)
    if names_was is None or names_now is None or len(names_was) != len(names_now):
        return []
    if sorted(names_was) == sorted(names_now) and names_was != names_now:
        return [
            Change(
                "state_meaning",
                True,
                f"{head}: the state's fields are in another order (was {was}, is now {now}). "
                "Spark reads them by position and restarts (the types still match), and the "
                "results are wrong: each field's old value is read as another field's.",
            )
        ]
    return []


def _field_names(ddl: str) -> list[str] | None:
    if not (ddl.startswith("struct<") and ddl.endswith(">")):
        return None
    inner = ddl[len("struct<") : -1]
    names = []
    depth = 0
    start = 0
    for i, ch in enumerate(inner + ","):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "," and depth == 0:
            part = inner[start:i].strip()
            start = i + 1
            if part:
                names.append(part.split(":", 1)[0].strip())
    return names


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
    """The same judgement against a checkpoint, which records no plan: only the names of the
    state's key and value fields (``state/<n>/.../_metadata/schema``). A key field of the old
    name that the new query reads from a column of that name is the same key; one the new query
    computes under the old name cannot be told apart, which the change says."""
    head = f"state/{number} ({operator})"
    old_key, old_value = (_names(s) for s in stored.get("default", (None, None)))
    new_key, new_value = (_names(s) for s in new_stores.get("default", (None, None)))
    facts = _families(new)
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
                    unsure.append(f"key {i} {was} (now {_bare(value)})")
                elif was in new_names:
                    changed.append(f"key {i} was {was}, is now {now}")
                else:
                    changed.append(f"key {i} was {was}, is now {_bare(value)}")
            if changed:
                if sorted(old_names) == sorted(new_names):
                    effect = _ORDER_EFFECT["key"]
                else:
                    was, now = changed[0].split(" was ", 1)[1].split(", is now ", 1)
                    effect = _effect(operator, "key", was, now)
                out.append(
                    Change(
                        "key_meaning",
                        True,
                        f"{head}: the checkpoint's state is keyed by {', '.join(old_names)}; "
                        f"the new query keys it by {', '.join(map(_bare, plain_keys))} "
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
        now_aggregates = ", ".join(map(_bare, facts.get("aggregate", []))) or UNKNOWN
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
    inputs = [_bare(v) for v in facts.get("aggregate", []) if _reads_columns(_bare(v))]
    if aggregates and inputs:
        unchecked.append(f"the aggregates' input columns (now {', '.join(inputs)})")
    function = _single(facts, FUNCTION_DIGEST_FACT)
    if function is not None:
        name = _single(facts, "function") or _single(facts, "processor") or UNKNOWN
        unchecked.append(
            f"the function that updates the state (now {name}: a checkpoint keeps no code)"
        )
    join_keys = facts.get("left key", []) + facts.get("right key", [])
    if operator == "symmetricHashJoin" and join_keys:
        left = ", ".join(map(_bare, facts.get("left key", [])))
        right = ", ".join(map(_bare, facts.get("right key", [])))
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
    "query's snapshot next to previous=."
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
