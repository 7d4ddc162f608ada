"""Primitive draws the strategies build graphs from: rare events, uniform picks, recent nodes.

Each is a few bounded integer or boolean draws that shrink towards the plain case (the feature
off, the first value, the straight pipeline), which is what lets Hypothesis shrink a failing
graph to a few operators.
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import strategies as st

__all__ = ["chance", "either", "events", "pick", "recent", "some"]

_BOOLEANS = st.booleans()


def chance(draw, p: float) -> bool:
    """True with probability ``p`` (to 1/1024); shrinks to False, the feature switched off.

    Hypothesis draws bounded integers with a bias towards small values, but its booleans are
    fair, so a uniform number is bisected one boolean at a time until it is known to fall on
    either side of the threshold (two draws on average).
    """
    if p <= 0.0:
        return False
    if p >= 1.0:
        return True
    threshold = round((1.0 - p) * 1024)
    low, high = 0, 1024  # the number lies in [low, high)
    while low < threshold < high:
        middle = (low + high) // 2
        if draw(_BOOLEANS):
            low = middle
        else:
            high = middle
    return low >= threshold


def pick(draw, values: Sequence):
    """A uniformly chosen element, shrinking towards the first (for values whose share
    matters: each feature must show up in a fair share of examples)."""
    count = len(values)
    for i in range(count - 1):
        if not chance(draw, (count - i - 1) / (count - i)):
            return values[i]
    return values[-1]


def some(draw, values: Sequence):
    """Some element, in one draw (for names, whose share does not matter)."""
    return values[0] if len(values) == 1 else values[draw(st.integers(0, len(values) - 1))]


def recent(draw, candidates: Sequence[int]) -> int:
    """One of ``candidates``, shrinking towards the last (a straight pipeline)."""
    return candidates[-1 - draw(st.integers(0, len(candidates) - 1))]


def either(*probabilities: float) -> float:
    """Probability that at least one of several independent events happens."""
    none = 1.0
    for p in probabilities:
        none *= 1.0 - min(max(p, 0.0), 1.0)
    return 1.0 - none


def events(draw, probabilities: Sequence[float]) -> list[bool]:
    """Independent events with the given probabilities, in few draws when all are rare.

    One draw decides whether any happens (most operators are plain); then each event in turn
    gets its probability conditioned on what is known so far, so that the joint distribution
    is exactly that of independent events.
    """
    hits = [False] * len(probabilities)
    if not chance(draw, either(*probabilities)):
        return hits
    some = False
    for i, p in enumerate(probabilities):
        if some:
            hits[i] = chance(draw, p)
        else:  # at least one of the events from here on happens
            rest = either(*probabilities[i:])
            hits[i] = chance(draw, p / rest) if rest > 0 else False
        some = some or hits[i]
    return hits
