"""The state schema check (``StateSchemaCompatibilityChecker``): each store's key and value
schema compared with what the checkpoint holds, by position, in the words of the Spark line that
restarts; with Avro encoding (transformWithState) the evolution Avro allows."""

from __future__ import annotations

import json
from typing import Any

from pytest_opid.io.schema import type_text
from pytest_opid.result import (
    RestoreProblem,
)
from pytest_opid.spark.restart.findings import Findings, StatefulOperator
from pytest_opid.spark.vocabulary import (
    AGGREGATIONS,
    SCHEMA_CHECK,
    TRANSFORM_WITH_STATE,
    VALUE_UNCHECKED,
)
from pytest_opid.spark.words import (
    FIX_MIGRATE,
    FIX_NEW_CHECKPOINT,
    keep_advice,
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
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


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
            schema_message(found, "VALUE", new, store, stored_value, value),
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
) -> str:
    part = store_part(new.name or "", store, which)
    changes = "; ".join(differences(stored, schema)) or "the schemas differ"
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
    keep = f"keep the state's {lower} as it was: {keep_advice(new.name or '', store, which)}"
    if (
        which == "VALUE"
        and new.name in AGGREGATIONS
        and len(struct_fields(schema)) > len(struct_fields(stored))
    ):
        keep = (
            "add the new aggregate column in a new query on a new checkpoint location "
            "(this state has no room for it), and keep this query's aggregates as they were"
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
        + "\n"
        + FIX_MIGRATE.format(n=new.number)
        + f"\n  - do not set {SCHEMA_CHECK}=false as Spark's message suggests: the old "
        "state would be read with the new schema, with undefined results"
    )


def unchecked_schemas(
    found: Findings, first: int, old: StatefulOperator, new: StatefulOperator
) -> None:
    """The session turned Spark's state schema check off: the schema problems found from
    ``first`` on do not stop the restart where the rows keep their number of fields; Spark
    then reads the old state with the new schema. A row of another width still fails
    Spark's row format validation (``UnsafeRowUtils.validateStructuralIntegrity``, on by
    default)."""
    kept = []
    for problem in found.problems[first:]:
        which = "KEY" if problem.kind == "key_schema" else "VALUE"
        widths = row_widths(old, new, 0 if which == "KEY" else 1)
        text = problem.message
        _, _, rest = text.partition(" with ")
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
