"""The state schema check (``StateSchemaCompatibilityChecker``): each store's key and value
schema compared with what the checkpoint holds, by position, in the words of the Spark line that
restarts; with Avro encoding (transformWithState) the evolution Avro allows."""

from __future__ import annotations

from typing import Any

from pytest_opid.io.schema import type_text
from pytest_opid.result import (
    UNKNOWN,
    RestoreProblem,
)
from pytest_opid.spark.restart.findings import Findings, StatefulOperator
from pytest_opid.spark.state_variables import parsed_json
from pytest_opid.spark.vocabulary import (
    AGGREGATIONS,
    GROUP_STATES,
    SCHEMA_CHECK,
    TRANSFORM_WITH_STATE,
    VALUE_UNCHECKED,
)
from pytest_opid.spark.words import (
    FIX_NEW_CHECKPOINT,
    NEW_LOCATION_EFFECTS,
    fix_migrate,
    keep_advice,
    key_advice,
    store_part,
    store_words,
)
from pytest_opid.text import plural, printable


def row_widths(old: StatefulOperator, new: StatefulOperator, part: int) -> tuple[int, int] | None:
    """The (stored, new) number of fields of a store's key (``part`` 0) or value (1) where the
    two differ, for the first store that has both."""
    for store, schemas in new.stores.items():
        stored = old.stores.get(store)
        if stored is None or stored[part] is None or schemas[part] is None:
            continue
        was, now = parse_schema(stored[part]), parse_schema(schemas[part])
        if isinstance(was, dict) and isinstance(now, dict):
            a, b = len(was.get("fields") or ()), len(now.get("fields") or ())
            if a != b:
                return a, b
    return None


def parse_schema(text: str | None) -> Any:
    return parsed_json(text, unreadable=text)


def schema_compatible(new: Any, stored: Any, strict: bool = True) -> bool:
    """``DataType.equalsIgnoreNameAndCompatibleNullability(new, stored)``; with ``strict``
    off, nullability is not compared (a checkpoint whose schemas were not widened)."""
    stack = [(new, stored)]
    while stack:
        a, b = stack.pop()
        if isinstance(a, dict) and isinstance(b, dict) and a.get("type") == b.get("type"):
            kind = a.get("type")
            if kind == "struct":
                fa, fb = a.get("fields") or [], b.get("fields") or []
                if len(fa) != len(fb):
                    return False
                for x, y in zip(fa, fb, strict=True):
                    if strict and not (y.get("nullable", True) or not x.get("nullable", True)):
                        return False
                    stack.append((x.get("type"), y.get("type")))
                continue
            if kind == "array":
                if strict and not (b.get("containsNull", True) or not a.get("containsNull", True)):
                    return False
                stack.append((a.get("elementType"), b.get("elementType")))
                continue
            if kind == "map":
                if strict and not (
                    b.get("valueContainsNull", True) or not a.get("valueContainsNull", True)
                ):
                    return False
                stack.append((a.get("keyType"), b.get("keyType")))
                stack.append((a.get("valueType"), b.get("valueType")))
                continue
        if a != b:
            return False
    return True


_AVRO_PROMOTIONS = {
    ("integer", "long"),
    ("integer", "float"),
    ("integer", "double"),
    ("long", "float"),
    ("long", "double"),
    ("float", "double"),
    ("string", "binary"),
    ("binary", "string"),
}


def avro_readable(stored: Any, new: Any) -> bool:
    """Whether Avro schema resolution lets the new value schema read values written with the
    stored one (fields matched by name; a new field reads its default, null; numbers widen)."""
    if isinstance(stored, dict) and isinstance(new, dict):
        if stored.get("type") == new.get("type") == "struct":
            old_fields = {f.get("name"): f.get("type") for f in stored.get("fields") or []}
            return all(
                avro_readable(old_fields[f.get("name")], f.get("type"))
                for f in new.get("fields") or []
                if f.get("name") in old_fields
            )
        if stored.get("type") == new.get("type") == "array":
            return avro_readable(stored.get("elementType"), new.get("elementType"))
        if stored.get("type") == new.get("type") == "map":
            return avro_readable(stored.get("valueType"), new.get("valueType"))
        return bool(stored == new)
    return stored == new or (stored, new) in _AVRO_PROMOTIONS


def struct_fields(schema: Any) -> list[dict[str, Any]]:
    if isinstance(schema, dict) and isinstance(schema.get("fields"), list):
        return [f for f in schema["fields"] if isinstance(f, dict)]
    return []


def differences(stored: Any, new: Any) -> list[str]:
    """What changed, field by field, in the words of the rule."""
    old_fields, new_fields = struct_fields(stored), struct_fields(new)
    out = []
    if len(old_fields) != len(new_fields):
        before = {f.get("name") for f in old_fields}
        after = {f.get("name") for f in new_fields}
        extra = [n for n in (f.get("name") for f in new_fields) if n not in before]
        lost = [n for n in (f.get("name") for f in old_fields) if n not in after]
        detail = []
        if extra:
            detail.append("added " + ", ".join(printable(str(n)) for n in extra))
        if lost:
            detail.append("removed " + ", ".join(printable(str(n)) for n in lost))
        out.append(
            f"{plural(len(new_fields), 'field')} instead of {len(old_fields)}"
            + (f" ({'; '.join(detail)})" if detail else "")
        )
    if out:
        return out  # fields moved: comparing them by position says nothing more
    for i, (a, b) in enumerate(zip(old_fields, new_fields, strict=False), 1):
        name = printable(str(b.get("name")))
        if a.get("name") != b.get("name"):
            name = f"{printable(str(a.get('name')))}, now {name}"
        if not schema_compatible(b.get("type"), a.get("type"), strict=False):
            out.append(
                f"field {i} ({name}) was {type_text(a.get('type'))}, is now "
                f"{type_text(b.get('type'))}"
            )
        elif not schema_compatible(b.get("type"), a.get("type")) or (
            b.get("nullable", True) and not a.get("nullable", True)
        ):
            out.append(f"field {i} ({name}) could not be null before and may be null now")
    return out


def renames(stored: Any, new: Any) -> list[str]:
    out = []
    for a, b in zip(struct_fields(stored), struct_fields(new), strict=False):
        if a.get("name") != b.get("name"):
            out.append(f"{printable(str(a.get('name')))} -> {printable(str(b.get('name')))}")
    return out


def check_schemas(found: Findings, old: StatefulOperator, new: StatefulOperator) -> None:
    if not old.schemas_known or not new.schemas_known:
        side = found.old.origin if not old.schemas_known else "the new fingerprint"
        found.warn(
            "value_schema",
            f"state/{new.number} ({new.name}): {side} records no state schemas (a "
            "fingerprint saved before they were recorded, or an operator whose schemas "
            "could not be read); Spark also checks them at restart, they were not compared.",
            state_id=str(new.number),
            operator_id=new.operator_id,
            name=old.name,
        )
        return
    for store, (key, value) in new.stores.items():
        stored = old.stores.get(store)
        if stored is None or key is None or value is None or None in stored:
            continue  # a new store or column family: Spark writes its schema, no check
        check_store(found, old, new, store, stored, (key, value))


def check_store(
    found: Findings,
    old: StatefulOperator,
    new: StatefulOperator,
    store: str,
    stored: tuple[str | None, str | None],
    schemas: tuple[str, str],
) -> None:
    stored_key, stored_value = (parse_schema(s) for s in stored)
    key, value = (parse_schema(s) for s in schemas)
    check_value = new.name not in VALUE_UNCHECKED
    if stored_key == key and (not check_value or stored_value == value):
        return
    # Spark always compares nullability; where it widens both sides to nullable (a query
    # started on 4.3), Findings has widened the new schemas as the checkpoint's were.
    strict = found.nullability_exact
    where = {"state_id": str(new.number), "operator_id": new.operator_id, "name": old.name}
    if not schema_compatible(key, stored_key, strict):
        found.problem(
            "key_schema", schema_message(found, "KEY", new, store, stored_key, key), **where
        )
        return
    avro = found.old.avro and new.name in TRANSFORM_WITH_STATE
    if check_value and avro and not avro_readable(stored_value, value):
        found.problem(
            "value_schema",
            schema_message(found, "VALUE", new, store, stored_value, value, avro=True),
            **where,
        )
        return
    if check_value and not avro and not schema_compatible(value, stored_value, strict):
        found.problem(
            "value_schema",
            schema_message(found, "VALUE", new, store, stored_value, value, old=old),
            **where,
        )
        return
    renamed = [
        f"{what} {change}"
        for what, before, after in (
            ("key", stored_key, key),
            ("value", stored_value, value if check_value else stored_value),
        )
        for change in renames(before, after)
    ]
    if renamed:
        found.warn(
            "value_schema" if all(r.startswith("value") for r in renamed) else "key_schema",
            f"state/{new.number} ({new.name}), {store_words(store)}: the schema is "
            f"compatible but its field names changed ({'; '.join(renamed)}). Spark ignores "
            "names and hands the old state to the new fields by position: check that every "
            "field still means what it meant (a changed aggregate function, grouping or "
            "deduplication column of the same type restarts silently on the old state).",
            **where,
        )


def schema_message(
    found: Findings,
    which: str,
    new: StatefulOperator,
    store: str,
    stored: Any,
    schema: Any,
    avro: bool = False,
    old: StatefulOperator | None = None,
) -> str:
    part = store_part(new.name or "", store, which)
    changes = "; ".join(differences(stored, schema)) or "the schemas differ"
    timeout = timeout_change(old, new, stored, schema) if which == "VALUE" else None
    if timeout is not None:
        changes = f"{changes}. {timeout[0]}"
    lower = which.lower()
    if not found.line.at_least(4, 0):
        head = (
            "org.apache.spark.sql.execution.streaming.state.StateSchemaNotCompatible (or "
            "InvalidUnsafeRowException, when another partition's state store fails first): "
            "Provided schema doesn't match to the schema for existing state! Please note "
            "that Spark allow difference of field name: check count of fields and data type "
            "of each field"
        )
    elif avro:
        head = (
            "STATE_STORE_INVALID_VALUE_SCHEMA_EVOLUTION (the Avro encoding lets a value gain "
            "or lose fields and widen numbers, nothing else)"
        )
    else:
        head = (
            f"STATE_STORE_{which}_SCHEMA_NOT_COMPATIBLE: Provided {lower} schema does not "
            f"match existing state {lower} schema"
        )
    advice = key_advice(new.name or "", stored, schema) if which == "KEY" else None
    keep = f"keep the state's {lower} as it was: " + (
        advice or keep_advice(new.name or "", store, which)
    )
    migrate = fix_migrate(found.old.operators)
    if timeout is not None:
        keep = timeout[1]
    elif which == "VALUE" and new.name in AGGREGATIONS:
        replaced = replaced_aggregates(old, new, stored, schema)
        if replaced:
            keep = (
                f"{replaced}: its buffer holds other fields, so Spark cannot read the old "
                "one as the new. Keep the aggregate as it was, and compute the new one in a "
                "new query on a new checkpoint location (or after a restart from scratch), "
                "where " + NEW_LOCATION_EFFECTS
            )
        elif len(struct_fields(schema)) > len(struct_fields(stored)):
            keep = (
                "add the new aggregate column in a new query on a new checkpoint location "
                "(this state has no room for it), and keep this query's aggregates as they "
                "were; on the new location " + NEW_LOCATION_EFFECTS
            )
    return (
        f"{found.spark} fails the first batch after the restart with {head}, for state/"
        f"{new.number} ({new.name}), {store_words(store)}. The {part} was "
        f"{type_text(stored)} and is now {type_text(schema)}: {changes}. Spark compares "
        "it by position: the number of fields and their types must stay, names may change, "
        "a field may become non-nullable but not nullable.\n"
        "Fix:\n"
        f"  - {keep}\n"
        + FIX_NEW_CHECKPOINT
        + ("\n" + migrate if migrate else "")
        + f"\n  - do not set {SCHEMA_CHECK}=false as Spark's message suggests: the old "
        "state would be read with the new schema, with undefined results"
    )


def unchecked_schemas(
    found: Findings, first: int, old: StatefulOperator, new: StatefulOperator
) -> None:
    """The session turned Spark's state schema check off: the schema problems found from
    ``first`` on do not stop the restart where the rows keep their number of fields; Spark
    then reads the old state with the new schema. A row wider than the stored one still
    fails Spark's row format validation (``UnsafeRowUtils.validateStructuralIntegrity``, on by
    default: the new fields would lie past the stored row's end); a value narrower than the
    stored one passes it (the stored row only has bytes to spare), and Spark 4.3 restarts:
    its first fields are read by position (tests/data/meaning-restart,
    removed_last_aggregate_schema_check_off and removed_first_...)."""
    kept = []
    for problem in found.problems[first:]:
        which = "KEY" if problem.kind == "key_schema" else "VALUE"
        widths = row_widths(old, new, 0 if which == "KEY" else 1)
        text = problem.message
        _, _, rest = text.partition(" with ")
        if widths is not None and which == "VALUE" and widths[0] > widths[1]:
            narrower_value(found, problem, old, new, widths, rest or text)
            continue
        if widths is not None:
            was, now = widths
            kept.append(
                RestoreProblem(
                    problem.kind,
                    f"{found.spark} fails the first batch after the restart with "
                    f"CANNOT_LOAD_STATE_STORE.{which}_ROW_FORMAT_VALIDATION_FAILURE for "
                    f"state/{new.number} ({new.name}), although {SCHEMA_CHECK}=false "
                    f"skips the schema check: the stored rows have {was} fields, the new "
                    f"schema {now}. Without the setting it would fail with {rest or text}",
                    state_id=problem.state_id,
                    operator_id=problem.operator_id,
                    name=problem.name,
                )
            )
            continue
        found.reinterpret(
            problem.kind,
            f"Spark restarts only because {SCHEMA_CHECK}=false skips its state schema "
            "check, and reads the old state with the new schema: the results are "
            f"undefined. With the check on it would fail with {rest or text}",
            state_id=problem.state_id,
            operator_id=problem.operator_id,
            name=problem.name,
        )
    del found.problems[first:]
    found.problems += kept


def narrower_value(
    found: Findings,
    problem: RestoreProblem,
    old: StatefulOperator,
    new: StatefulOperator,
    widths: tuple[int, int],
    refusal: str,
) -> None:
    """A value with fewer fields than the stored rows, the schema check off: Spark restarts
    and reads each stored row's first fields as the new value. Where they are the stored
    fields the new value keeps (the last ones removed: same names and types, in order), every
    kept field reads its own old value; otherwise a field reads another's."""
    was, now = widths
    where = {
        "state_id": problem.state_id,
        "operator_id": problem.operator_id,
        "name": problem.name,
    }
    first = "first field" if now == 1 else f"first {now} fields"
    head = (
        f"{found.spark} restarts only because {SCHEMA_CHECK}=false skips its state schema "
        f"check: state/{new.number} ({new.name}) stores value rows of {was} fields and the "
        f"new value has {now}, which Spark reads from each stored row's {first} (the row "
        "format validation passes: a stored row only has bytes to spare)."
    )
    if value_prefix_kept(old, new):
        condition = refusal.split(":", 1)[0]
        found.warn(
            problem.kind,
            f"{head} They hold the fields the new value keeps, so each reads its own old "
            f"value, and the removed ones are no longer read. With the check on, the restart "
            f"fails with {condition}.",
            **where,
        )
        return
    found.reinterpret(
        problem.kind,
        f"{head} The new value's fields are not the stored rows' first {now}, so a field "
        f"reads another's old value: the results are undefined. With the check on it would "
        f"fail with {refusal}",
        **where,
    )


def value_prefix_kept(old: StatefulOperator, new: StatefulOperator) -> bool:
    """Every store's new value fields are the stored value's first fields: the same names and
    types, in the same order."""
    for store, schemas in new.stores.items():
        stored = old.stores.get(store)
        if stored is None or stored[1] is None or schemas[1] is None:
            continue
        was = struct_fields(parse_schema(stored[1]))
        now = struct_fields(parse_schema(schemas[1]))
        if len(now) > len(was):
            return False
        for a, b in zip(was, now, strict=False):
            same_type = schema_compatible(b.get("type"), a.get("type"), strict=False)
            if a.get("name") != b.get("name") or not same_type:
                return False
    return True


#: The field FlatMapGroupsWithStateExecHelper's state row (format version 2) adds after the
#: group state where the operator has a timeout.
TIMEOUT_FIELD = "timeoutTimestamp"


def timeout_change(
    old: StatefulOperator | None, new: StatefulOperator, stored: Any, schema: Any
) -> tuple[str, str] | None:
    """A group state's timeout added or removed (its stored row gains or loses
    ``timeoutTimestamp``): what changed and how to keep it, or ``None``."""
    if new.name not in GROUP_STATES:
        return None
    had = any(f.get("name") == TIMEOUT_FIELD for f in struct_fields(stored))
    has = any(f.get("name") == TIMEOUT_FIELD for f in struct_fields(schema))
    if had == has:
        return None
    before = dict(old.meaning).get("timeout") if old is not None else None
    after = dict(new.meaning).get("timeout")
    if before and after and before != after:
        what = f"The timeout changed ({before} -> {after})"
    else:
        what = "A timeout was " + ("removed" if had else "added")
    what += (
        f": Spark stores each group's timeout timestamp ({TIMEOUT_FIELD}) in the state row "
        "only under a timeout, so the stored rows and the new ones differ by that field"
    )
    if had:
        kept = f"GroupStateTimeout.{before}" if before else "the timeout the checkpoint has"
        fix = (
            f"keep the timeout as it was ({kept}); a group that needs none does not call "
            "state.setTimeoutDuration / setTimeoutTimestamp"
        )
    else:
        fix = (
            "keep GroupStateTimeout.NoTimeout on this checkpoint, and add the timeout in a "
            "new query on a new checkpoint location, where " + NEW_LOCATION_EFFECTS
        )
    return what, fix


def replaced_aggregates(
    old: StatefulOperator | None, new: StatefulOperator, stored: Any, schema: Any
) -> str:
    """Where an aggregate function was replaced by another (max(v) -> avg(v): the buffer's
    fields are others, not more), the words for it ("the aggregate max(v) became avg(v)");
    "" where the change is an added or removed aggregate, or unknown."""
    before = _aggregates(old)
    after = _aggregates(new)
    if before and after and len(before) == len(after):
        changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
        if changed:
            return "; ".join(
                f"the aggregate {printable(a)} became {printable(b)}" for a, b in changed
            )
        return ""
    was = [f.get("name") for f in struct_fields(stored)]
    now = [f.get("name") for f in struct_fields(schema)]
    if before or after or not was or not now:
        return ""
    # From a checkpoint alone: no stored buffer field is kept, none is only appended
    if not set(was) & set(now):
        listed = ", ".join(printable(str(n)) for n in was)
        added = ", ".join(printable(str(n)) for n in now)
        return f"an aggregate was replaced (its buffer {listed} is now {added})"
    return ""


def _aggregates(op: StatefulOperator | None) -> list[str]:
    """The aggregate functions a fingerprint's meaning records, in the buffer's order
    (``aggregate N`` facts, their function text without the result type)."""
    if op is None:
        return []
    out = []
    for fact, value in op.meaning:
        if fact.startswith("aggregate "):
            if value == UNKNOWN:
                return []
            out.append(value.rsplit(": ", 1)[0])
    return out
