"""Which changes of a stateful operator's meaning make a restart Spark accepts unsafe, and
what Spark will then do, in Spark's words.

:mod:`pytest_opid.spark.query.meaning` records the facts; this module compares two operators'
facts (:func:`compare_meaning`, both from plans), and :mod:`.checkpoint_meaning` an operator's
facts with what a checkpoint keeps of its state (field names only), with the reading of facts
and the effects said here. :mod:`.state` turns each :class:`Change` into a reinterpreted-state
finding (not safe) or a warning.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from pytest_opid.result import UNKNOWN
from pytest_opid.spark.function_digest import fact_parts
from pytest_opid.spark.vocabulary import FUNCTION_DIGEST_FACT
from pytest_opid.spark.words import new_location_fix


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
    before, after = fact_families(old), fact_families(new)
    out: list[Change] = []
    for family in _LISTS:
        was, now = before.get(family, []), after.get(family, [])
        if not was or not now or len(was) != len(now):
            continue  # Spark compares the number of fields itself
        out += _positional(head, operator, family, was, now)
    for fact in ("session window", "state schema"):
        was_s, now_s = single_fact(before, fact), single_fact(after, fact)
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
    left_was, right_was = single_fact(before, "left input"), single_fact(before, "right input")
    left_now, right_now = single_fact(after, "left input"), single_fact(after, "right input")
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
        was_s, now_s = single_fact(before, fact), single_fact(after, fact)
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
    value = single_fact(families, FUNCTION_DIGEST_FACT)
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
    now = single_fact(after, FUNCTION_DIGEST_FACT)
    if now is None:
        return []  # no Python code updates this state
    was = single_fact(before, FUNCTION_DIGEST_FACT)
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
    name = single_fact(after, "function") or single_fact(after, "processor") or UNKNOWN
    what = "processor" if single_fact(after, "processor") is not None else "function"
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
    + new_location_fix()
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


def fact_families(facts: Sequence[tuple[str, str]]) -> dict[str, list[str]]:
    """Meaning facts by family (``key 1``, ``key 2`` -> ``key``), in order; a value earlier
    pytest-opid wrote without saying which UDF or field it was becomes :data:`UNKNOWN`."""
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


def single_fact(families: Mapping[str, list[str]], fact: str) -> str | None:
    """The value of a fact an operator has once (``watermark``), None without it."""
    values = families.get(fact)
    return values[0] if values else None


def _unknown(head: str, what: str) -> Change:
    """A fact one side could not read: not compared, so the meaning is not verified (never a
    mere warning beside a verdict that calls the restart verified)."""
    return Change(
        "state_meaning",
        False,
        f"{head}: its {what} could not be read on both sides, so it was not compared.",
        verified=False,
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
                f"wrong: {order_effect(family, was, now)}",
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
                "still match), and the results are wrong: "
                + reinterpreted_effect(operator, family, a, b),
            )
        )
    return out


_KIND = {
    "key": "key_meaning",
    "aggregate": "aggregate_meaning",
    "left key": "join_meaning",
    "right key": "join_meaning",
}


ORDER_EFFECT = {
    "key": "each group's values come out under the other key columns.",
    "aggregate": "each aggregate's running value is continued as another aggregate's.",
    "left key": "buffered rows are matched on the other key column.",
    "right key": "buffered rows are matched on the other key column.",
}


def order_effect(family: str, was: Sequence[str], now: Sequence[str]) -> str:
    """:data:`ORDER_EFFECT` with the user's own columns: which stored values are read as
    which (``cat``'s values read as ``user``)."""
    effect = ORDER_EFFECT.get(family, ORDER_EFFECT["key"])
    if family != "key":
        return effect
    read_as = [
        f"the state's {bare(a)} values are read as {bare(b)}"
        for a, b in zip(was, now, strict=False)
        if a != b
    ][:3]
    return effect[:-1] + f" ({'; '.join(read_as)})." if read_as else effect


def reinterpreted_effect(operator: str, family: str, was: str, now: str) -> str:
    """What goes wrong in the results when ``family``'s ``was`` is read as ``now``."""
    if family == "aggregate":
        return (
            f"each group's state holds {bare(was)} so far, which the new query reads as "
            f"{bare(now)} and goes on updating: the emitted values mix both."
        )
    if family in ("left key", "right key"):
        return (
            f"rows buffered under {bare(was)} are looked up by {bare(now)}: they match rows "
            "they should not and miss the ones they should."
        )
    if " window(" in was or " window(" in now:
        return (
            f"A's windows ({was}) stay in the state and are updated and emitted next to B's "
            f"({now}): counts are split between both."
        )
    if operator.startswith("dedupe"):
        return (
            f"the state remembers the {bare(was)} values seen so far and the new query looks "
            f"up {bare(now)} values in it: a row whose {bare(now)} matches an old "
            f"{bare(was)} is dropped, and duplicates by {bare(now)} seen before the restart "
            "pass again."
        )
    return (
        f"the groups kept under {bare(was)} are read as groups of {bare(now)}, updated and "
        "emitted next to the new ones."
    )


def bare(value: str) -> str:
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
