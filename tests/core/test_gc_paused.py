"""gc_paused: the collector is off inside and restored after; what was built is promoted to the
oldest generation, except where the program froze objects itself."""

from __future__ import annotations

import gc

from pytest_opid.model import gc_paused


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
        built = [[i] for i in range(50_000)]  # tracked objects, far above gen0's threshold
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
