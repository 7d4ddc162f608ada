"""A savepoint as text (``opid savepoint``): one line per operator state, names and uids quoted
and escaped."""

from __future__ import annotations

from pytest_opid.flink.savepoint.model import Savepoint
from pytest_opid.text import quote

__all__ = ["render_text"]


def _quote_or_dash(value: str | None) -> str:
    return "-" if value is None else quote(value)


def render_text(savepoint: Savepoint) -> str:
    """A readable table: one line per operator state, names and uids quoted and escaped so that
    no control character, line separator or bidi override reaches the terminal raw."""
    count = len(savepoint.operators)
    lines = [
        f"Flink _metadata version {savepoint.version}, checkpoint {savepoint.checkpoint_id}: "
        f"{count} operator state{'' if count == 1 else 's'}"
    ]
    rows = [("OPERATOR ID", "PARALLELISM", "STATE", "COORDINATOR", "SIZE", "UID", "NAME")]
    for op in savepoint.operators:
        rows.append(
            (
                op.operator_id,
                f"{op.parallelism}/{op.max_parallelism}",
                ("finished" if op.fully_finished else "yes" if op.has_state else "no"),
                "yes" if op.coordinator_state else "no",
                str(op.state_size),
                _quote_or_dash(op.uid),
                _quote_or_dash(op.name),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        lines.append("  " + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
    return "\n".join(lines)
