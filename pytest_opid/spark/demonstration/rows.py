"""Input rows for a query's sources, drawn by Hypothesis from each source's schema.

What makes a restart differ is rarely a value's size: it is rows that meet in state. So values
come from small pools: a handful of strings, integers 0-4, so keys collide within a batch and
across batches and sources (a join's two sides match); event times move one step per batch and
reach back up to 1.5 steps, so windows and session gaps are crossed and rows arrive behind the
watermark (late); rows repeat (duplicates), and a nullable field is sometimes null. The step is
drawn per example (:class:`Step`): the base one, or one just inside or outside a duration the
queries name (:mod:`.durations`), with some rows exactly on a beat or one duration before it,
so a key's rows are such a step or duration apart. Hypothesis shrinks a difference towards
fewer rows and the first pool values.

Rows are written as JSON lines (the plan reads them with the source's own schema, see
:mod:`.plan`), one file per source and batch.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from pytest_opid.errors import DocumentError

#: Event times start here (UTC, as the session's time zone reads them).
START = datetime(2024, 1, 1)
STRINGS = ("a", "b", "c", "u0", "u1")
#: Integers of other scales than 0-4, around bounds a filter or a CASE commonly draws (a
#: ByteType column takes them too: 100 is its largest here).
NUMBERS = (-1, 5, 9, 10, 11, 19, 20, 21, 50, 99, 100)
#: How far back (minutes) one row in four reaches behind its batch: a few of every scale
#: windows, session gaps, watermarks and state timeouts are commonly given in.
REACH = (1, 2, 3, 5, 8, 12, 15, 20, 25, 30, 40, 45, 60, 75, 90, 120, 150, 180, 240, 360, 720, 1440)
#: A struct, array or map type nested deeper than this is refused (the schema is user input).
MAX_DEPTH = 6

#: How far inside or outside a named duration a step is.
EDGE = timedelta(seconds=1)
#: How many times a step at a duration that changed between the versions is repeated among the
#: candidates (against once for the base step and a duration both name).
CHANGED_WEIGHT = 3

Batches = list[dict[str, list[dict[str, Any]]]]


@dataclass(frozen=True)
class Step:
    """How far event times move per batch; ``marks``: the durations the queries name. Where
    there are marks, a quarter of the rows sit exactly on their batch's beat and a quarter one
    mark (and :data:`EDGE`) before it, so that the gaps between a key's rows fall just inside
    and outside each duration, in either order across batches (a session timeout shows only
    where one gap exceeds it and the next does not)."""

    size: timedelta
    marks: tuple[timedelta, ...] = ()


def steps(
    base: timedelta, previous: Collection[timedelta], new: Collection[timedelta]
) -> tuple[Step, ...]:
    """The steps to draw from: ``base`` first (Hypothesis shrinks towards it), then one
    :data:`EDGE` inside and outside each duration either version names, those only one of
    them names (a changed timeout, window or delay) :data:`CHANGED_WEIGHT` times. Steps
    shorter than ``base`` are left out: rows already reach minutes to 1.5 base steps apart
    within it, and a shorter step moves the watermark too little for a window to close in a
    few batches."""
    marks = tuple(sorted(set(previous) | set(new)))
    out = [Step(base, marks)]
    changed = set(previous) ^ set(new)
    for duration in marks:
        weight = CHANGED_WEIGHT if duration in changed else 1
        for size in (duration - EDGE, duration + EDGE):
            if size > base:
                out.extend([Step(size, marks)] * weight)
    return tuple(out)


def batches_strategy(
    schemas: dict[str, Any], batches: int, rows_per_batch: int, candidates: Sequence[Step]
) -> Any:
    """A strategy for ``batches`` input batches: per batch, per source identity, its rows, all
    on one step drawn from ``candidates``, and in half the examples no null at all (a query's
    own code often cannot take one: those examples still show the restart)."""
    from hypothesis import strategies as st

    def on(step: Step, nulls: bool) -> Any:
        def batch(number: int) -> Any:
            per_source = {
                identity: _rows(schema, number, rows_per_batch, step, nulls)
                for identity, schema in schemas.items()
            }
            return st.fixed_dictionaries(per_source)

        return st.tuples(*(batch(n) for n in range(batches))).map(list)

    return st.tuples(st.sampled_from(tuple(candidates)), st.booleans()).flatmap(
        lambda drawn: on(*drawn)
    )


def _rows(schema: Any, number: int, most: int, step: Step, nulls: bool) -> Any:
    from hypothesis import strategies as st

    row = st.fixed_dictionaries(
        {f.name: _value(f.dataType, f.nullable, number, step, 0, nulls) for f in schema.fields}
    )
    # a repeated row (a duplicate) is as likely as Hypothesis makes it; draw some copies too
    return st.lists(row, min_size=1, max_size=most).flatmap(
        lambda rows: st.lists(st.sampled_from(rows), max_size=2).map(lambda extra: rows + extra)
    )


def _value(
    kind: Any, nullable: bool, number: int, step: Step, depth: int, nulls: bool = True
) -> Any:
    from hypothesis import strategies as st
    from pyspark.sql import types as T

    if depth > MAX_DEPTH:
        raise DocumentError(f"a source schema nests deeper than {MAX_DEPTH} levels")
    base: Any
    if isinstance(kind, (T.TimestampType, T.TimestampNTZType)):
        base = _times(number, step)
    elif isinstance(kind, T.DateType):
        base = _times(number, step).map(lambda t: t.date())
    elif isinstance(kind, T.StringType):
        # half the values are the first: a key's rows meet across batches (and a join's sides)
        base = st.integers(0, 1).flatmap(lambda i: st.sampled_from(STRINGS) if i else st.just("a"))
    elif isinstance(kind, T.BooleanType):
        base = st.booleans()
    elif isinstance(kind, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        small = st.integers(0, 4)
        # small values meet in state; one in four is of another scale (a filter's bound)
        base = st.integers(0, 3).flatmap(lambda i: st.sampled_from(NUMBERS) if i == 3 else small)
    elif isinstance(kind, (T.FloatType, T.DoubleType, T.DecimalType)):
        base = st.sampled_from((0.0, 1.5, 2.25, 10.0))
    elif isinstance(kind, T.StructType):
        base = st.fixed_dictionaries(
            {
                f.name: _value(f.dataType, f.nullable, number, step, depth + 1, nulls)
                for f in kind.fields
            }
        )
    elif isinstance(kind, T.ArrayType):
        element = _value(kind.elementType, kind.containsNull, number, step, depth + 1, nulls)
        base = st.lists(element, max_size=3)
    elif isinstance(kind, T.MapType):
        key = _value(kind.keyType, False, number, step, depth + 1, nulls)
        value = _value(kind.valueType, kind.valueContainsNull, number, step, depth + 1, nulls)
        base = st.dictionaries(key.map(str), value, max_size=3)
    else:
        raise DocumentError(f"a source field of type {kind.simpleString()}: not generated yet")
    if nullable and nulls:  # about one value in eight is null; shrinking goes towards a value
        return st.integers(0, 7).flatmap(lambda i: st.none() if i == 7 else base)
    return base


def _times(number: int, step: Step) -> Any:
    """Event times of batch ``number`` (0-based), on whole minutes or a second either side of
    one (a window or session bound): mostly within its own step or up to 1.5 steps earlier
    (behind a watermark of one step); one in four reaches further back by one of
    :data:`REACH` (seconds to a day), so the gaps between a key's rows span the sizes windows,
    session gaps and state timeouts are given in; where the queries name durations, a quarter
    are the batch's beat and a quarter one duration before it (:class:`Step`). No time runs
    ahead of its batch's step: a row hours ahead would move the watermark past every later
    row."""
    from hypothesis import strategies as st

    begin = START + step.size * number
    minutes = max(1, int(step.size.total_seconds() // 60))
    near = st.integers(-(minutes * 3) // 2, minutes - 1)
    far = st.sampled_from(REACH).map(lambda m: -m)
    offset = st.integers(0, 3).flatmap(lambda i: far if i == 3 else near)
    seconds = st.sampled_from((0, 1, 59, 30))
    spread = st.builds(lambda m, s: begin + timedelta(minutes=m, seconds=s), offset, seconds)
    if not step.marks:
        return spread
    marked = st.sampled_from(step.marks).flatmap(
        lambda mark: st.sampled_from((begin - mark - EDGE, begin - mark + EDGE))
    )
    return st.integers(0, 3).flatmap(
        lambda i: st.just(begin) if i == 2 else marked if i == 3 else spread
    )


def write(folder: Path, number: int, rows: list[dict[str, Any]]) -> None:
    """Batch ``number``'s rows as a JSON lines file in ``folder`` (created)."""
    folder.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(row, default=_plain) + "\n" for row in rows)
    (folder / f"batch-{number:04d}.json").write_text(text, encoding="utf-8")


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%dT%H:%M:%S")
    if isinstance(value, date):
        return value.isoformat()
    raise TypeError(type(value).__name__)
