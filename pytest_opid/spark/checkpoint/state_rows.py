"""What a bounded sample of a checkpoint's state rows shows about a window (pure data).

A checkpoint's schema files name a window aggregate's key field ``window`` and a session
window's ``session_window``, never their durations; the rows under them hold each window's own
bounds. :mod:`pytest_opid.spark.query.state_reader` reads them with Spark's state data source
(``spark.read.format("statestore")``, Spark 3.5+); :mod:`pytest_opid.spark.restart.
checkpoint_meaning` judges a new query's window by them.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Rows read per operator at most: a window's bounds are two timestamps, and a sample this size
#: holds the newest event's windows (still in the state) on any state a test or a deploy has.
SAMPLE_ROWS = 10_000


@dataclass(frozen=True)
class StateSample:
    """The window bounds one stateful operator's state rows hold, in microseconds since the
    epoch: ``windows`` (a time window in the key: ``window.start``/``end``), ``sessions`` (a
    session window's ``session_window.start``/``end``), each distinct and sorted.
    ``complete``: every row of the state was read (fewer than the limit). ``not_read``: why no
    row was read, where none was."""

    operator_id: int
    rows: int = 0
    windows: tuple[tuple[int, int], ...] = ()
    sessions: tuple[tuple[int, int], ...] = ()
    complete: bool = False
    not_read: str | None = None
