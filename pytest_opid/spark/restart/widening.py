"""Spark 4.3's widening of state schemas to nullable (``alwaysNullableOutput``), on schema JSON.

A query started on 4.3 pins the setting in its offset log, and Spark then widens every schema of
the widened operators (``StructType.asNullable``): fields, array elements and map values may all
be null. A checkpoint started earlier (Spark 3.5 to 4.2) has no such entry, and 4.3 compares the
schemas as the operators build them. A fingerprint made on a line without the widening is
widened here when judged for a checkpoint that has it.
"""

from __future__ import annotations

import json
from typing import Any


def as_nullable(schema: str | None) -> str | None:
    """``DataType.asNullable`` of a schema given as Spark's JSON (``None`` and text that is not
    JSON are returned as they are)."""
    if schema is None:
        return None
    try:
        tree = json.loads(schema)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than json reads
        return schema
    stack: list[Any] = [tree]
    while stack:  # a plain walk: schemas nest, recursion has no place here
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        kind = node.get("type")
        if kind == "struct":
            for field in node.get("fields") or ():
                if isinstance(field, dict):
                    field["nullable"] = True
                    stack.append(field.get("type"))
        elif kind == "array":
            node["containsNull"] = True
            stack.append(node.get("elementType"))
        elif kind == "map":
            node["valueContainsNull"] = True
            stack.append(node.get("keyType"))
            stack.append(node.get("valueType"))
    try:
        return json.dumps(tree, separators=(",", ":"))
    except RecursionError:
        return schema
