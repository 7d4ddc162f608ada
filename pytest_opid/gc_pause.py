"""Pausing the cyclic garbage collector around bulk builds.

Building a topology, a fingerprint or a comparison allocates a few objects per operator; on a
100k-operator job the collector's repeated passes over them would cost more than the work. The
pause lives apart from the model because readers, comparison and commands use it alike.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused"]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while we allocate a few objects per operator: on a
    100k-operator topology its repeated full passes would otherwise cost more than the work."""
    was_enabled = gc.isenabled()
    gc.disable()
    young = gc.get_count()[0]
    try:
        yield
    finally:
        if was_enabled:
            if gc.get_count()[0] - young >= _PROMOTE_AFTER:
                _promote_young_objects()
            gc.enable()


#: Objects allocated under :func:`gc_paused` past which what was built is promoted at once. A
#: small job (a Spark query's few dozen operators) is left to the collector's young passes: its
#: caller's young garbage (py4j proxies among it, each pinning a JVM object) must not be moved
#: to the oldest generation, which is collected rarely; 300 fingerprints of a small query grew
#: the JVM heap by 141 MiB that way.
_PROMOTE_AFTER = 100_000


def _promote_young_objects() -> None:
    """Move every object the collector tracks to its oldest generation without a pass over
    them (``gc.freeze()`` then ``gc.unfreeze()``, two list splices). What we just built (a
    topology, a fingerprint) lives long; left young, the collector would scan all of it two or
    three times on its way to the oldest generation, which on a 100k-operator job costs more
    than a third of building it. Young garbage cycles of the caller's are collected at the next
    full collection instead, which is why only large builds promote. Skipped where the program
    froze objects itself (a pre-fork server), since unfreezing would undo that."""
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()
