"""A transformWithState operator's state variables as Spark writes them to the checkpoint.

Spark files each variable a processor declares as a column family (``default/<name>``) and
lists them in the operator properties (``stateVariables``); reading a live query and reading a
checkpoint both turn those into the same per-variable facts (:func:`user_variables`), written
in Spark's DDL form (:func:`ddl`, :func:`variable_text`), so that the two compare as text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_opid.result import UNKNOWN, StateStore
from pytest_opid.spark.vocabulary import PROPERTIES_STORE

_KINDS = ("ValueState", "ListState", "MapState")


_SQL_TYPES = {
    "long": "BIGINT",
    "integer": "INT",
    "short": "SMALLINT",
    "byte": "TINYINT",
    "string": "STRING",
    "double": "DOUBLE",
    "float": "FLOAT",
    "boolean": "BOOLEAN",
    "binary": "BINARY",
    "date": "DATE",
    "timestamp": "TIMESTAMP",
    "timestamp_ntz": "TIMESTAMP_NTZ",
    "null": "VOID",
    "void": "VOID",
}


def _quote_name(name: str) -> str:
    """Spark's ``quoteIfNeeded``."""
    if re.fullmatch(r"[A-Za-z0-9_]+", name) and not name.isdigit():
        return name
    return "`" + name.replace("`", "``") + "`"


def _sql(t: Any, depth: int = 0) -> str:
    """A Spark type's JSON as Spark's ``DataType.sql``."""
    if depth > 20:
        return UNKNOWN
    if isinstance(t, str):
        if t.startswith("decimal"):
            return t.upper()
        return _SQL_TYPES.get(t, t.upper())
    if isinstance(t, dict):
        kind = t.get("type")
        if kind == "struct":
            fields = [f for f in t.get("fields") or [] if isinstance(f, dict)]
            inner = ", ".join(
                f"{_quote_name(str(f.get('name')))}: {_sql(f.get('type'), depth + 1)}"
                + ("" if f.get("nullable", True) else " NOT NULL")
                for f in fields
            )
            return f"STRUCT<{inner}>"
        if kind == "array":
            return f"ARRAY<{_sql(t.get('elementType'), depth + 1)}>"
        if kind == "map":
            key, value = _sql(t.get("keyType"), depth + 1), _sql(t.get("valueType"), depth + 1)
            return f"MAP<{key}, {value}>"
        if kind == "udt":
            return _sql(t.get("sqlType"), depth + 1)
    return UNKNOWN


def ddl(schema: Any) -> str:
    """A struct's JSON (text or parsed) as Spark's ``StructType.toDDL``: ``c BIGINT,s STRING``."""
    if isinstance(schema, str):
        schema = parsed_json(schema)
    if not isinstance(schema, dict) or schema.get("type") != "struct":
        return UNKNOWN
    return ",".join(
        f"{_quote_name(str(f.get('name')))} {_sql(f.get('type'))}"
        + ("" if f.get("nullable", True) else " NOT NULL")
        for f in schema.get("fields") or []
        if isinstance(f, dict)
    )


def parsed_json(text: str | None, unreadable: Any = None) -> Any:
    """A schema or properties text Spark wrote as JSON, parsed; ``unreadable`` where it does
    not parse (the restart check keeps the text to quote it), None for no text."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return unreadable


def _fields(schema: Any) -> list[dict[str, Any]]:
    if isinstance(schema, dict):
        return [f for f in schema.get("fields") or [] if isinstance(f, dict)]
    return []


def _unwrap_ttl(value: Any) -> Any:
    """A TTL variable's value schema is ``struct<value: <the variable's>, ttlExpirationMs>``."""
    fields = _fields(value)
    if (
        len(fields) == 2
        and fields[0].get("name") == "value"
        and fields[1].get("name") == "ttlExpirationMs"
    ):
        return fields[0].get("type")
    return value


def user_variables(
    stores: Sequence[StateStore] | Mapping[str, tuple[str | None, str | None]],
    properties: str | None = None,
) -> dict[str, dict[str, Any]]:
    """The processor's own state variables (not Spark's timers and indexes), in declaration
    order: name -> ``kind`` (ValueState...), ``ttl`` (bool), ``key`` / ``value`` (parsed schema
    of the variable's own column family, TTL wrapper removed; the map's user key for ``key``)."""
    if not isinstance(stores, Mapping):
        families = {s.name: (s.key_schema, s.value_schema) for s in stores}
    else:
        families = dict(stores)
    if properties is None:
        properties = families.get(PROPERTIES_STORE, (None, None))[1]
    props = parsed_json(properties)
    out: dict[str, dict[str, Any]] = {}
    if not isinstance(props, dict):
        return out
    for var in props.get("stateVariables") or []:
        if not isinstance(var, dict):
            continue
        name, kind = var.get("stateName"), var.get("stateVariableType")
        if not isinstance(name, str) or kind not in _KINDS:
            continue  # TimerState and Spark's internal column families
        ttl = bool(var.get("ttlEnabled"))
        key_text, value_text = families.get(f"default/{name}", (None, None))
        key, value = parsed_json(key_text), parsed_json(value_text)
        if ttl:
            value = _unwrap_ttl(value)
        if kind == "MapState":
            parts = {f.get("name"): f.get("type") for f in _fields(key)}
            key = parts.get("userKey")
        else:
            key = None
        out[name] = {"kind": kind, "ttl": ttl, "key": key, "value": value}
    return out


def variable_text(info: Mapping[str, Any], ttl_ms: int | None = None) -> str:
    """One state variable as a meaning fact: ``ValueState<c BIGINT>, no TTL``."""
    value = ddl(info.get("value")) if info.get("value") is not None else UNKNOWN
    if info.get("kind") == "MapState":
        key = ddl(info.get("key")) if info.get("key") is not None else UNKNOWN
        body = f"MapState<{key}; {value}>"
    else:
        body = f"{info.get('kind')}<{value}>"
    if not info.get("ttl"):
        return f"{body}, no TTL"
    return f"{body}, TTL {ttl_ms} ms" if ttl_ms is not None else f"{body}, TTL"


def operator_properties(stores: Sequence[StateStore]) -> dict[str, Any] | None:
    """The operator properties Spark files with the state (time mode, output mode, the state
    variables), parsed; None where the stores hold none or they do not read as an object."""
    families = {s.name: (s.key_schema, s.value_schema) for s in stores}
    props = parsed_json(families.get(PROPERTIES_STORE, (None, None))[1])
    return props if isinstance(props, dict) else None
