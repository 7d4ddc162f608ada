"""gc_paused: the collector is off inside and restored after; what was built is promoted to the
oldest generation, except where the program froze objects itself."""

from __future__ import annotations

import gc
import weakref

from pytest_opid.gc_pause import gc_paused


def test_the_collector_is_paused_and_restored() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner one leaves it to the outer one
    assert gc.isenabled()


def test_what_was_built_is_promoted_without_a_collection() -> None:
    gc.collect()
    passes = sum(s["collections"] for s in gc.get_stats())
    with gc_paused():
        built = [[i] for i in range(150_000)]  # a large build: above _PROMOTE_AFTER
    assert gc.get_count()[0] < 50  # the young generation starts empty again
    assert gc.get_freeze_count() == 0
    assert sum(s["collections"] for s in gc.get_stats()) == passes
    del built


def test_objects_the_program_froze_stay_frozen() -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        with gc_paused():
            _ = [[i] for i in range(1_000)]
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()


def test_a_small_build_leaves_the_callers_young_garbage_young() -> None:
    """A Spark query's fingerprint allocates a few thousand objects; promoting the caller's
    young garbage with them (py4j proxies that pin JVM objects) grew the JVM heap without
    bound. A small build leaves the young generation to the collector's young passes."""
    alive = _young_garbage()
    with gc_paused():
        _ = [[i] for i in range(1_000)]
    gc.collect(0)  # a young pass frees them: they were not moved to the oldest generation
    assert all(ref() is None for ref in alive)


def test_a_large_build_promotes_them_with_it() -> None:
    alive = _young_garbage()
    with gc_paused():
        built = [[i] for i in range(150_000)]
    gc.collect(0)
    assert all(ref() is not None for ref in alive)  # old now: only a full pass frees them
    gc.collect()
    assert all(ref() is None for ref in alive)
    del built


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def _young_garbage() -> list[weakref.ref[_Cycle]]:
    """100 unreachable reference cycles in the young generation, watched by weak references."""
    gc.collect()
    garbage = [_Cycle() for _ in range(100)]
    alive = [weakref.ref(c) for c in garbage]
    del garbage
    return alive
