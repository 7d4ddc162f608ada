"""Time limits a user can set from the environment (a Connect replay, a state function's
``init()``, a store's requests): one reading and one message for all of them, so a typo in any
of the variables fails the same way, on one line that names the variable."""

from __future__ import annotations

import os

from pytest_opid.errors import DocumentError
from pytest_opid.text import shorten

#: Longer than a day is a typo, not a limit.
LONGEST = 86_400.0


def seconds_from_environment(variable: str, default: float) -> float:
    """``variable``'s value in seconds, or ``default`` where it is unset or blank. Anything but
    a number in (0, 86400) is a :class:`DocumentError` (a ``ValueError`` too)."""
    text = os.environ.get(variable, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < LONGEST:  # nan and inf fail here as well
        raise DocumentError(
            f"{variable}={shorten(text, 40)!r} is not a number of seconds (0 < s < 86400)"
        )
    return value
