"""SIGTERM ended like Ctrl-C: a CI job's timeout or cancel sends it, and a command that dies
of it leaves what it made behind (``opid demonstrate``'s temporary checkpoints and sink
folders, a Spark session). Raised as an exception in the main thread instead, it unwinds the
command through the same ``finally`` blocks a Ctrl-C does, and ends in one line."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Iterator
from types import FrameType


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived. A ``KeyboardInterrupt`` (not an ``Exception``): code that catches
    every error of a step (the user's, Spark's) lets it through, as it lets Ctrl-C through."""


def _raise(signum: int, frame: FrameType | None) -> None:
    # py4j logs an interrupted call with its traceback (java_gateway's "Exception while sending
    # command"): on the way out that is noise before the one line, so logging stops here
    logging.disable(logging.CRITICAL)
    raise Terminated


@contextlib.contextmanager
def terminated_as_interrupt() -> Iterator[None]:
    """In the block, SIGTERM raises :class:`Terminated` in the main thread; the handler
    before is put back after. Outside the main thread (where Python sets no handler) nothing
    changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
        logging.disable(logging.NOTSET)
