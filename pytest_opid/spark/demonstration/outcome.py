"""What a demonstration found: :class:`Demonstration`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

Outcome = Literal["refused", "differs", "same"]


@dataclass(frozen=True)
class Demonstration:
    """Both versions of a streaming query run on generated rows: ``previous`` for the first
    batches into a checkpoint, ``new`` restarted on it for the rest, and ``new`` from scratch on
    every batch.

    ``outcome``: ``"refused"`` (Spark refused the restart: ``error_class`` and ``message``, its
    first line), ``"differs"`` (the restarted ``new`` emitted other rows than ``new`` from
    scratch for the same batches: ``inputs`` the shrunk rows that show it, ``only_restarted`` /
    ``only_scratch`` what one run emitted and the other did not) or ``"same"`` (no difference
    found in ``examples`` examples of ``batches`` batches; not a proof that none exists). Rows
    are JSON texts with sorted keys. ``aimed_at``: the durations the versions name, which
    event times were also stepped by (just inside and outside each).
    """

    outcome: Outcome
    examples: int
    batches: int
    restart_after: int
    seed: int
    output_mode: str
    seconds: float
    error_class: str | None = None
    message: str | None = None
    #: per batch (1-based, in order), per source (``format:folder`` as the query names it)
    inputs: tuple[tuple[int, str, tuple[str, ...]], ...] = ()
    only_restarted: tuple[str, ...] = ()
    only_scratch: tuple[str, ...] = ()
    shrunk: bool = False
    aimed_at: tuple[timedelta, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "examples": self.examples,
            "batches": self.batches,
            "restart_after": self.restart_after,
            "seed": self.seed,
            "output_mode": self.output_mode,
            "seconds": round(self.seconds, 1),
            "error_class": self.error_class,
            "message": self.message,
            "inputs": [
                {"batch": batch, "source": source, "rows": [json.loads(r) for r in rows]}
                for batch, source, rows in self.inputs
            ],
            "only_restarted": [json.loads(r) for r in self.only_restarted],
            "only_scratch": [json.loads(r) for r in self.only_scratch],
            "shrunk": self.shrunk,
            "aimed_at_seconds": [d.total_seconds() for d in self.aimed_at],
        }

    def render(self) -> str:
        """The outcome in a few lines, as the CLI prints it and a failing test shows it."""
        if self.outcome == "refused":
            return (
                f"refused: Spark refused to restart the new query on the previous one's "
                f"checkpoint: [{self.error_class}] {self.message}"
            )
        tried = (
            f"{self.examples} example{'s' if self.examples != 1 else ''} of {self.batches} "
            f"batches (restart after batch {self.restart_after}, seed {self.seed})"
        )
        if self.outcome == "same":
            aimed = ""
            if self.aimed_at:
                aimed = "; event times also stepped just inside and outside " + ", ".join(
                    map(str, self.aimed_at)
                )
            return (
                f"same: no difference found in {tried}{aimed}; the restarted query emitted what "
                "it emits from scratch each time (not a proof that no input shows one)"
            )
        lines = [
            f"differs: restarted on the previous query's checkpoint, the new query emits other "
            f"rows ({self.output_mode} mode) than it does from scratch on the same input; "
            f"found in {tried}" + (", shrunk" if self.shrunk else ""),
            "input rows:"
            if self.inputs
            else "input rows: none drawn (the sources ran as they are)",
        ]
        for batch, source, rows in self.inputs:
            ran = "previous" if batch <= self.restart_after else "new"
            lines.append(f"  batch {batch} ({ran}) {source}:")
            lines.extend(f"    {row}" for row in rows)
        lines.append("emitted only by the restarted new query:")
        lines.extend(f"  {row}" for row in self.only_restarted or ("(nothing)",))
        lines.append("emitted only by the new query from scratch:")
        lines.extend(f"  {row}" for row in self.only_scratch or ("(nothing)",))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.render()
