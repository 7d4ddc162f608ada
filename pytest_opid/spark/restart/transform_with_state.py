"""transformWithState's restart checks (``TransformWithStateExec.validateNewMetadata``): time
mode, output mode and each state variable's kind; then what Spark does not check (a variable no
longer declared, the processor class, a TTL's duration)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pytest_opid.result import (
    UNKNOWN,
)
from pytest_opid.spark.restart.findings import Findings, StatefulOperator
from pytest_opid.spark.vocabulary import (
    TRANSFORM_WITH_STATE,
)
from pytest_opid.spark.words import (
    FIX_MEANING,
    FIX_NEW_CHECKPOINT,
)
from pytest_opid.text import printable, quote


def _named_variables(properties: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The operator properties' ``stateVariables`` entries that have a name."""
    for var in properties.get("stateVariables") or []:
        if isinstance(var, dict) and isinstance(var.get("stateName"), str):
            yield var


def declared_variables(properties: Mapping[str, Any]) -> dict[str, str]:
    """State variable name -> its kind (``ValueState``...), as the properties declare it."""
    return {v["stateName"]: str(v.get("stateVariableType")) for v in _named_variables(properties)}


def ttl_flags(properties: Mapping[str, Any]) -> dict[str, bool]:
    """State variable name -> whether it has a TTL."""
    return {v["stateName"]: bool(v.get("ttlEnabled")) for v in _named_variables(properties)}


def ttl_millis(fact: str | None) -> int | None:
    """The TTL of a ``state variable`` meaning fact (``..., TTL 60000 ms``), if it says one."""
    if not fact or not fact.endswith(" ms") or ", TTL " not in fact:
        return None
    text = fact.rsplit(", TTL ", 1)[1][: -len(" ms")]
    return int(text) if text.isdigit() else None


def python_value(setting: str, value: Any) -> str:
    if setting == "timeMode":
        return quote({"NoTime": "None"}.get(str(value), str(value)))
    return quote(str(value))


def check_properties(found: Findings, old: StatefulOperator, new: StatefulOperator) -> None:
    """transformWithState's operator properties as Spark checks them after the schemas
    (``TransformWithStateExec.validateNewMetadata``): time mode, output mode, a variable's
    kind; then what Spark does not check (a variable no longer declared, the processor
    class, a TTL's duration)."""
    if new.name not in TRANSFORM_WITH_STATE:
        return
    if not old.properties or not new.properties:
        not_inspected(found, old, new)
        return
    try:
        before, after = json.loads(old.properties), json.loads(new.properties)
    except ValueError:
        return
    if not isinstance(before, dict) or not isinstance(after, dict):
        return
    where = {"state_id": str(new.number), "operator_id": new.operator_id, "name": old.name}
    for setting in ("timeMode", "outputMode"):
        was, now = before.get(setting), after.get(setting)
        if was != now:
            found.problem(
                "state_config",
                f"{found.spark} fails the first batch after the restart with "
                f"STATE_STORE_INVALID_CONFIG_AFTER_RESTART for state/{new.number} "
                f"({new.name}): Cannot change {setting} from {was} to {now} between "
                f"restarts. Please set {setting} to {was}, or restart with a new checkpoint "
                "directory.\n"
                "Fix:\n"
                f"  - pass {setting}={python_value(setting, was)} to transformWithState "
                "as before\n" + FIX_NEW_CHECKPOINT,
                **where,
            )
            return
    old_vars = declared_variables(before)
    new_vars = declared_variables(after)
    ttl_switched(found, new, ttl_flags(before), ttl_flags(after), where)
    for name, kind in old_vars.items():
        if name in new_vars and new_vars[name] != kind:
            found.problem(
                "state_config",
                f"{found.spark} fails the first batch after the restart with "
                f"STATE_STORE_INVALID_VARIABLE_TYPE_CHANGE for state/{new.number} "
                f"({new.name}): Cannot change {name} to {new_vars[name]} between query "
                f"restarts. Please set {name} to {kind}, or restart with a new checkpoint "
                "directory.\n"
                "Fix:\n"
                f"  - declare {quote(name)} as a {kind} again, or give the "
                f"{new_vars[name]} another name (it starts empty)\n" + FIX_NEW_CHECKPOINT,
                **where,
            )
            return
    gone = [n for n in old_vars if n not in new_vars]
    added = [n for n in new_vars if n not in old_vars]
    if gone or added:
        parts = []
        if gone:
            parts.append(
                f"{', '.join(map(quote, gone))} no longer declared (its state stays in the "
                "checkpoint unused)"
            )
        if added:
            parts.append(f"{', '.join(map(quote, added))} new (starts empty)")
        message = (
            f"state/{new.number} ({new.name}): state variables {'; '.join(parts)}. Spark "
            "matches state variables by name, so a renamed variable loses its state."
        )
        if gone:  # Spark restarts and drops what the processor kept there, silently
            effect = (
                " Spark restarts, and the results are wrong: the state of "
                f"{', '.join(map(quote, gone))} is dropped silently, and a variable "
                "declared under a new name starts empty for every key, as if the processor "
                "had never seen them."
                if added
                else " Spark restarts and its state is dropped silently: what the processor "
                f"kept in {', '.join(map(quote, gone))} for every key is no longer read; "
                "if the processor still needs it, the results are wrong."
            )
            found.reinterpret("state_meaning", message + effect + FIX_MEANING, **where)
        else:
            found.warn("state_config", message, **where)
    check_processor(found, old, new, [n for n in old_vars if n in new_vars])


def ttl_switched(
    found: Findings,
    new: StatefulOperator,
    before: Mapping[str, bool],
    after: Mapping[str, bool],
    where: Mapping[str, Any],
) -> None:
    """A variable that gains or loses a TTL: Spark keeps a TTL variable's values with their
    expiry, so its stored value schema changes (the schema problem says so in Spark's
    words; this says why)."""
    for name, had in before.items():
        if name not in after or after[name] == had:
            continue
        change = "gains a TTL" if after[name] else "loses its TTL"
        found.warn(
            "value_schema",
            f"state/{new.number} ({new.name}): state variable {quote(name)} {change}. Spark "
            "stores a TTL variable's values with their expiry time "
            "(struct<value: <its schema>, ttlExpirationMs: bigint>, and a $ttl_ index), so "
            "the values in the checkpoint no longer match its value schema "
            "(STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE).\n"
            "Fix:\n"
            f"  - keep {quote(name)} {'without' if after[name] else 'with'} a TTL, or "
            "declare the changed variable under a new name (it starts empty)\n"
            + FIX_NEW_CHECKPOINT,
            **where,
        )


def not_inspected(found: Findings, old: StatefulOperator, new: StatefulOperator) -> None:
    """A transformWithState whose state variables could not be learned
    (:mod:`pytest_opid.spark.transform_with_state`)."""
    reason = dict(new.meaning).get("could not inspect") or dict(old.meaning).get(
        "could not inspect"
    )
    if not reason:
        return  # schemas() already says that no schemas were recorded
    found.warn(
        "state_config",
        f"state/{new.number} ({new.name}): {printable(reason)}. Spark runs the processor's "
        "init() when the query starts and checks its state variables against "
        f"{found.old.origin}: their kinds (STATE_STORE_INVALID_VARIABLE_TYPE_CHANGE), key "
        "and value schemas and TTL (STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE, "
        "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE), the time mode and the output mode "
        "(STATE_STORE_INVALID_CONFIG_AFTER_RESTART). None of them was compared: this "
        "verdict covers the operator's name and position only.\n"
        "Fix:\n"
        "  - declare the state variables in init() from values the code holds (no file, "
        "service, timer or state access there)\n"
        "  - or let Spark's pre-init worker run init(): PYSPARK_PYTHON set to a Python "
        "with pyspark and the processor's imports",
        state_id=str(new.number),
        operator_id=new.operator_id,
        name=old.name,
    )


def check_processor(
    found: Findings, old: StatefulOperator, new: StatefulOperator, kept: Sequence[str]
) -> None:
    """What Spark does not check when a transformWithState restarts: which processor reads
    the variables, and a TTL's duration (facts of the fingerprints, spark.transform_with_state)."""
    before, after = dict(old.meaning), dict(new.meaning)
    where = {"state_id": str(new.number), "operator_id": new.operator_id, "name": old.name}
    was, now = before.get("processor"), after.get("processor")
    if was and now and UNKNOWN not in (was, now) and was != now and kept:
        found.warn(
            "state_meaning",
            f"state/{new.number} ({new.name}): the stateful processor is now "
            f"{printable(now)} instead of {printable(was)}. Spark does not check it: "
            f"{printable(now)} gets the state {printable(was)} kept in "
            f"{', '.join(map(quote, kept))} (matched by name) and must read it as "
            f"{printable(was)} wrote it.",
            **where,
        )
    for name in kept:
        old_ttl = ttl_millis(before.get(f"state variable {name}"))
        new_ttl = ttl_millis(after.get(f"state variable {name}"))
        if old_ttl is not None and new_ttl is not None and old_ttl != new_ttl:
            found.warn(
                "state_config",
                f"state/{new.number} ({new.name}): the TTL of state variable {quote(name)} "
                f"changes from {old_ttl} ms to {new_ttl} ms. Spark restarts; the values "
                "already in the state keep the expiry the old TTL gave them until they "
                "are updated.",
                **where,
            )
