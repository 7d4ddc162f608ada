"""A checkpoint as text for ``opid checkpoint``: the sources, the state operators with their
stores' schemas, the watermark; every name from the files quoted and escaped."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from pytest_opid.errors import DocumentError
from pytest_opid.io.json import JsonProblem, strict_loads
from pytest_opid.io.schema import type_text
from pytest_opid.spark.checkpoint.files import quoted
from pytest_opid.spark.checkpoint.model import Checkpoint, operator_user_variables
from pytest_opid.spark.checkpoint.schema_files import struct_problem
from pytest_opid.spark.state_variables import variable_text
from pytest_opid.text import printable

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def schema_fields(schema: Mapping[str, Any] | str) -> tuple[tuple[str, str, bool], ...]:
    """The top-level fields of a struct type as (name, type JSON, nullable).

    The type is canonical JSON text (sorted keys, no spaces), so two schemas compare equal field
    by field whatever key order their JSON had. Field metadata is left out. Raises DocumentError
    when ``schema`` is not a struct type's JSON.
    """
    try:
        obj = strict_loads(schema) if isinstance(schema, str) else schema
    except JsonProblem as exc:
        raise DocumentError(f"schema is not valid JSON ({exc.reason})") from None
    problem = struct_problem(obj)
    if problem:
        raise DocumentError(f"not a Spark struct type: {problem}")
    out: list[tuple[str, str, bool]] = []
    for f in obj["fields"]:
        try:
            type_json = json.dumps(f["type"], sort_keys=True, separators=(",", ":"))
        except (RecursionError, TypeError, ValueError):
            raise DocumentError(f"field {quoted(f['name'])} has an unreadable type") from None
        out.append((f["name"], type_json, f["nullable"]))
    return tuple(out)


def _name(text: str) -> str:
    return quoted(text, 500)


def watermark_iso(ms: int) -> str | None:
    """An event-time watermark (epoch milliseconds) as ISO-8601 UTC,
    ``2024-05-01T10:00:00.000Z``; None where no date has that time."""
    try:
        moment = _EPOCH + timedelta(milliseconds=ms)
    except (OverflowError, ValueError):
        return None
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _watermark_text(ms: int | None) -> str:
    if ms is None:
        return "none recorded"
    if ms == 0:  # Spark's value before any event time was seen, and without a watermark
        return "0 ms (none yet)"
    iso = watermark_iso(ms)
    return f"{ms} ms" if iso is None else f"{ms} ms = {iso}"


def _lines_of(cp: Checkpoint) -> Iterator[str]:
    yield f"checkpoint {_name(cp.path)}"
    missing = "- (metadata file missing)"
    yield f"  query id: {_name(cp.query_id) if cp.query_id is not None else missing}"
    yield (
        f"  offset log: v{cp.offset_log_version}, last batch {cp.last_batch}, "
        f"last committed batch {cp.last_committed_batch}"
        if cp.offset_log_version is not None
        else "  offset log: empty (no batch planned yet)"
    )
    yield f"  watermark: {_watermark_text(cp.batch_watermark_ms)}"
    yield f"  next batch's watermark (last commit): {_watermark_text(cp.committed_watermark_ms)}"
    yield f"  confs ({len(cp.confs)}):"
    for key, value in sorted(cp.confs.items()):
        yield f"    {_name(key)} = {_name(value)}"
    yield f"  sources ({len(cp.sources)}):"
    for s in cp.sources:
        offset = "-" if s.offset is None else quoted(s.offset, 200)
        yield f"    [{s.position}] {_name(s.source_id)}: offset {offset}"
        if s.files is not None:
            yield f"      last committed batch read {len(s.files)} file(s)"
            for path in s.files:
                yield f"        {_name(path)}"
    yield f"  state operators ({len(cp.state_operators)}):"
    for op in cp.state_operators:
        name = "(no operator metadata)" if op.operator_name is None else _name(op.operator_name)
        yield (
            f"    operator {op.operator_id} {name}: metadata v{op.metadata_version}, "
            f"{_partitions_text(op.num_partitions)}"
        )
        if op.properties is not None:
            yield f"      properties: {quoted(op.properties, 400)}"
        variables = operator_user_variables(op)
        if variables:
            yield f"      state variables ({len(variables)}):"
            for var_name, info in variables.items():
                yield f"        {_name(var_name)}: {printable(variable_text(info))}"
        for st in op.stores:
            schema = (
                "no schema file" if st.schema_version is None else f"schema v{st.schema_version}"
            )
            # Without operator metadata (Spark 3.5) a store records no partition count of its
            # own: the operator's line gives the count of its partition folders.
            count = "" if st.num_partitions is None else f"{st.num_partitions} partitions, "
            yield f"      store {_name(st.name)} ({count}{schema})"
            for cf in st.column_families:
                label = "" if st.schema_version != 3 else f"column family {_name(cf.name)} "
                yield f"        {label}key   {type_text(cf.key_schema)}"
                yield f"        {' ' * len(label)}value {type_text(cf.value_schema)}"


def _partitions_text(count: int | None) -> str:
    """An operator with neither metadata nor partition folders has no count to show: say so."""
    return "partition count not recorded" if count is None else f"{count} partitions"


def render_text(checkpoint: Checkpoint) -> str:
    """A readable summary of ``checkpoint``; every name from the files is quoted and escaped."""
    return "\n".join(_lines_of(checkpoint)) + "\n"
