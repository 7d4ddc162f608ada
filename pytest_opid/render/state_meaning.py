"""What a state means, in a few short lines on a stateful operator's box (its keys, window,
aggregates), so that a reviewer sees what the state holds, not only where it is."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from pytest_opid.result import UNKNOWN, Fingerprint
from pytest_opid.text import printable

__all__ = ["MEANING_LIMIT", "MEANING_LINES", "meaning_lines", "operator_meanings"]

#: The longest line of what a state means on a stateful operator's box.
MEANING_LIMIT = 52
#: Lines of what a state means on one box; the tooltip has them all.
MEANING_LINES = 6


def operator_meanings(
    fp: Fingerprint, before: Fingerprint | None = None
) -> dict[str, tuple[str, ...]]:
    """What each stateful operator's state means (its keys, window, aggregates), a few short
    lines by operator ID, from the fingerprint's state meaning: a reviewer sees on the box
    what the state holds, not only where it is. ``before``: the old job, whose state/<n> of
    the same number says which keys and aggregates are new (``+``) or gone (``-``)."""
    old = {s.state_operator_id: s.meaning for s in (before.state_operators or ())} if before else {}
    out: dict[str, tuple[str, ...]] = {}
    for s in fp.state_operators or ():
        if s.meaning:
            lines = meaning_lines(s.meaning, old.get(s.state_operator_id))
            out[s.operator_id] = out.get(s.operator_id, ()) + lines
    return out


def meaning_lines(
    meaning: Sequence[tuple[str, str]], before: Sequence[tuple[str, str]] | None = None
) -> tuple[str, ...]:
    """``keys: window(event_time, 5 minutes), page`` and ``aggregates: count(1), ...``: the
    numbered facts of one kind on one line, their types left out; other facts as they are,
    unknown ones (``?``) left out. Against ``before`` (the old meaning of this state/<n>), a
    key or aggregate it did not have is marked ``+``, one it had and this lacks ``-``. Long
    lines wrap; at most :data:`MEANING_LINES` lines in all."""
    now = _meaning_items(meaning)
    then = _meaning_items(before) if before else None
    lines = []
    for kind, items in now.items():
        if kind in ("key", "aggregate"):
            shown = list(items)
            if then is not None:
                old = then.get(kind, [])
                shown = [item if item in old else f"+{item}" for item in items]
                shown += [f"-{item}" for item in old if item not in items]
            word = kind if len(shown) == 1 else f"{kind}s"
            lines.append(f"{word}: {', '.join(shown)}")
        else:
            lines += (f"{kind}: {item}" for item in items)
    wrapped = [
        part
        for line in lines
        for part in textwrap.wrap(line, MEANING_LIMIT, subsequent_indent="\u00a0\u00a0") or [""]
    ]
    if len(wrapped) > MEANING_LINES:
        more = len(wrapped) - MEANING_LINES + 1
        wrapped = [*wrapped[: MEANING_LINES - 1], f"(+{more} more lines in the tooltip)"]
    return tuple(printable(line) for line in wrapped)


def _meaning_items(meaning: Sequence[tuple[str, str]]) -> dict[str, list[str]]:
    """Facts by kind: ``key 1``, ``key 2`` as ``key``; ``aggregate n`` as ``aggregate``;
    other facts under their own name. Unknown values are left out."""
    items: dict[str, list[str]] = {"key": [], "aggregate": []}
    for fact, value in meaning:
        if value == UNKNOWN:
            continue
        kind, _, number = fact.rpartition(" ")
        if number.isdigit() and kind in ("key", "aggregate"):
            items[kind].append(_untyped(value))
        else:
            items.setdefault(fact, []).append(value)
    return {kind: found for kind, found in items.items() if found}


def _untyped(value: str) -> str:
    """``page: string`` -> ``page``: the type is in the snapshot's schemas."""
    head, sep, _ = value.partition(": ")
    return head if sep else value
