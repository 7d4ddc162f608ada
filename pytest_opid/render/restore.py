"""The text of a restore check: the verdict, every problem, every warning.

Each problem's message is already in its engine's words (what Flink or Spark will do, and the
fix); this only lays them out, most important first.
"""

from __future__ import annotations

from pytest_opid.result import RestoreCheck, what_breaks
from pytest_opid.text import plural

__all__ = ["render_restore"]


def render_restore(check: RestoreCheck, *, limit: int = 50) -> str:
    """The verdict line, then problems, reinterpreted state and warnings (at most ``limit`` of
    each, with a count of the rest: the full lists are in ``to_dict()`` / ``--json``)."""
    resumes = check.resumes or "the new job starts from the previous state"
    if check.restorable and check.reinterpreted:
        head = f"Restorable, but not safe: {what_breaks(check.reinterpreted)}"
        if check.warnings:
            head += f"; {plural(len(check.warnings), 'warning')}"
    elif check.restorable and check.unverified:
        head = (
            f"Restorable, meaning not verified: {resumes}, but what decides whether it reads "
            "that state as it was written could not be checked here"
        )
        if check.warnings:
            head += f"; {plural(len(check.warnings), 'warning')}"
    elif check.restorable:
        # where the engine says how it resumes, it resumes from a checkpoint (Spark's words)
        head = (
            f"Restarts from the checkpoint: {resumes}"
            if check.resumes
            else f"Restorable: {resumes}"
        )
        if check.warnings:
            head += f", with {plural(len(check.warnings), 'warning')}"
    else:
        head = f"Not restorable: {plural(len(check.problems), 'problem')}"
        if check.warnings:
            head += f" and {plural(len(check.warnings), 'warning')}"
    lines = [head + "."]
    if check.verified:
        lines.append(f"Verified: {', '.join(check.verified)}.")
    sections = (
        ("Problems", check.problems),
        ("Reinterpreted state (the restart succeeds, the results are wrong)", check.reinterpreted),
        ("Not verified", check.unverified),
        ("Warnings", check.warnings),
    )
    for title, items in sections:
        if not items:
            continue
        lines += ["", f"{title}:"]
        for item in items[:limit]:
            first, *rest = item.message.splitlines() or [""]
            lines.append(f"  [{item.kind}] {first}")
            lines += [f"    {line}" for line in rest]
        if len(items) > limit:
            lines.append(f"  ... and {len(items) - limit} more (see --json)")
    return "\n".join(lines)
