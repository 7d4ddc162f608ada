"""Is a previous fingerprint really the query that wrote a checkpoint?

A checkpoint keeps its stateful operators' numbers, names and state schemas but no plan, so what
the state means is judged against the fingerprint a user says wrote it (``--previous-fingerprint``,
the snapshot beside a marked test). A fingerprint of another query would make that judgement
about the wrong query and call it verified; so before it is used, what both hold must agree:
the engine, a streaming query, the stateful operators by number and name, and every state store's
key and value schema, compared as Spark compares them at restart
(``StateSchemaCompatibilityChecker``: names ignored, nullability compared loosely, since the
checkpoint may have been written with or without the state schema widening).
"""

from __future__ import annotations

from pytest_opid.errors import DocumentError
from pytest_opid.result import Fingerprint
from pytest_opid.spark.checkpoint.model import Checkpoint
from pytest_opid.spark.restart.schemas import parse_schema, schema_compatible
from pytest_opid.spark.vocabulary import ENGINE

__all__ = ["check_written_by"]


def check_written_by(checkpoint: Checkpoint, previous: Fingerprint, where: str) -> None:
    """Raise :class:`DocumentError` (one line, naming ``where`` and what differs) unless
    ``previous`` can be the fingerprint of the query that wrote ``checkpoint``."""
    if previous.engine not in ("", ENGINE):
        raise DocumentError(
            f"{where}: a {previous.engine} job's fingerprint, not the Spark query that wrote "
            f"{checkpoint.path}"
        )
    if previous.mode == "batch" or previous.state_operators is None:
        raise DocumentError(
            f"{where}: a batch (non-streaming) query's fingerprint; a checkpoint is written by a "
            "streaming query: give that query's saved fingerprint or snapshot"
        )
    recorded = {s.state_operator_id: s for s in previous.state_operators}
    on_disk = {op.operator_id: op for op in checkpoint.state_operators}
    if checkpoint.last_batch is not None and sorted(recorded) != sorted(on_disk):
        raise DocumentError(
            f"{where}: records stateful operators {_numbers(recorded)}, the checkpoint "
            f"{checkpoint.path} holds {_numbers(on_disk)}: not the query that wrote it"
        )
    for number, op in sorted(on_disk.items()):
        state = recorded[number]
        if op.operator_name is not None and op.operator_name != state.kind:
            raise DocumentError(
                f"{where}: state/{number} is {state.kind} there, {op.operator_name} in the "
                f"checkpoint {checkpoint.path}: not the query that wrote it"
            )
        stores = {s.name: s for s in state.stores}
        for store in op.stores:
            if store.schema_file is None:
                continue
            for family in store.column_families:
                name = f"{store.name}/{family.name}" if store.schema_version == 3 else store.name
                kept = stores.get(name) or stores.get(store.name)
                if kept is None:
                    continue  # the fingerprint does not record this store: nothing to contradict
                for part, was, now in (
                    ("key", family.key_schema_json, kept.key_schema),
                    ("value", family.value_schema_json, kept.value_schema),
                ):
                    if now is None or _same_schema(was, now):
                        continue
                    raise DocumentError(
                        f"{where}: state/{number} ({op.operator_name or state.kind}) store "
                        f"{name} has another {part} schema than in the checkpoint "
                        f"{checkpoint.path}: not the query that wrote it"
                    )


def _same_schema(stored: str, recorded: str) -> bool:
    """Equal as Spark compares a restarted query's schema with the stored one, nullability
    either way (the checkpoint's Spark may or may not have widened it)."""
    a, b = parse_schema(stored), parse_schema(recorded)
    if not (isinstance(a, dict) and isinstance(b, dict)):
        return True  # one side unreadable as a schema: nothing to contradict
    return schema_compatible(b, a, strict=False) and schema_compatible(a, b, strict=False)


def _numbers(numbers: object) -> str:
    found = sorted(numbers)  # type: ignore[call-overload]
    return ", ".join(f"state/{n}" for n in found) if found else "none"
