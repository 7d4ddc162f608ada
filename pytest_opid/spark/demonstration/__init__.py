"""``demonstrate(previous, new)``: run both versions of a streaming query on generated rows and
show what the restart does, where a prediction from plans cannot say (a changed function that
updates state, a "not verified" from a checkpoint alone, a change no rule has seen).

As Spark's own tests check a restart by hand (``testStream``: ``AddData``, ``StopStream``,
``StartStream(checkpointLocation)``, ``CheckAnswer``): ``previous`` runs the first batches into
a fresh checkpoint, ``new`` is restarted on a copy of it with the remaining batches, and ``new``
runs from scratch on every batch; the rows the restarted ``new`` emits for the remaining
batches are compared with what ``new`` from scratch emits for them (by output mode: the rows of
every micro-batch in append and update mode, the last result in complete mode). Hypothesis draws
the rows (:mod:`.rows`) and shrinks a difference to a few of them. Each run is one
``availableNow`` run per batch, in the DataFrame's own session with its settings; the sources
read folders of ours (:mod:`.plan`), the sink is a collecting ``foreachBatch``
(:mod:`.running`), and the temporary folder is removed at the end.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from pytest_opid.errors import DocumentError
from pytest_opid.spark.demonstration.durations import durations
from pytest_opid.spark.demonstration.outcome import Demonstration, Outcome
from pytest_opid.spark.demonstration.plan import (
    file_sources,
    other_sources,
    schema_of,
    with_sources,
)
from pytest_opid.spark.demonstration.rows import Batches, batches_strategy, steps, write
from pytest_opid.spark.demonstration.running import Failure, row_text, run_together

__all__ = ["DEFAULT_EXAMPLES", "Demonstration", "Outcome", "demonstrate"]

#: Default budget (figures: benchmarks/bench_demonstrate.py): each example is 2 * batches
#: ``availableNow`` runs, about 1 s each on a 2-core machine for a small stateful query.
DEFAULT_EXAMPLES = 3
DEFAULT_BATCHES = 3
DEFAULT_ROWS = 6
DEFAULT_SHRINK_SECONDS = 20.0
#: Sources run as they are: each micro-batch's rows follow from its offset alone (Spark's
#: ``RatePerMicroBatchStream``), so a restarted run and one from scratch read the same rows.
KEPT_SOURCES = frozenset({"rate-micro-batch"})
#: A source run as it is whose rows follow the wall clock (``RateStreamMicroBatchStream``): only
#: whether Spark refuses the restart can be shown.
CLOCK_SOURCES = frozenset({"rate"})
#: Draws Hypothesis may make per example run (repeats and skipped draws cost nothing).
DRAWS_PER_EXAMPLE = 20


def demonstrate(
    previous: Any,
    new: Any,
    *,
    batches: int = DEFAULT_BATCHES,
    examples: int = DEFAULT_EXAMPLES,
    seed: int | None = None,
    restart_after: int | None = None,
    rows: int = DEFAULT_ROWS,
    output_mode: str | None = None,
    time_step: timedelta = timedelta(minutes=10),
    shrink_seconds: float = DEFAULT_SHRINK_SECONDS,
    run_timeout: float = 300.0,
) -> Demonstration:
    """Run ``previous`` and ``new`` (streaming DataFrames or ``DataStreamWriter`` s, planned in
    one local session) on generated rows and report what restarting ``new`` on ``previous``'s
    checkpoint does.

    Knobs: ``batches`` input batches per example, the first ``restart_after`` (default all but
    the last) run by ``previous``; ``examples`` examples at most (stops at the first refusal or
    difference); ``rows`` rows at most per source and batch (plus up to two repeats);
    ``time_step`` how far event times move per batch (besides steps just inside and outside
    each duration the versions name: a window, a watermark delay, a timeout in the state
    function, :mod:`.durations`); ``shrink_seconds`` how long to shrink a
    difference; ``output_mode`` for a DataFrame (a writer's own is used; default ``append``,
    Spark's); ``seed`` makes the rows (and so the result) repeatable.
    """
    started = time.monotonic()
    before, mode_before = _query(previous, output_mode, "previous")
    after, mode_after = _query(new, output_mode, "new")
    # a DataFrame without a mode takes the other version's writer's
    mode_before = mode_before or mode_after or "append"
    mode_after = mode_after or mode_before
    after_count = restart_after if restart_after is not None else batches - 1
    if not 1 <= after_count < batches:
        raise DocumentError(
            f"restart_after={after_count}: must be 1 to batches - 1 ({batches - 1})"
        )
    if examples < 1 or rows < 1:
        raise DocumentError("examples and rows must be at least 1")
    if seed is None:
        seed = random.SystemRandom().randrange(2**32)
    schemas = _schemas(before, after)
    clock = _kept_sources(before, after)
    if not schemas or clock:  # no rows to draw, or rows that differ run to run: one example
        examples = 1
    root = Path(tempfile.mkdtemp(prefix="opid-demonstrate-"))
    try:
        folders = {
            side: {identity: str(root / side / f"source{i}") for i, identity in enumerate(schemas)}
            for side in ("restart", "scratch")
        }
        search = _Search(
            root=root,
            previous=(with_sources(before, folders["restart"]), mode_before),
            restarted=(with_sources(after, folders["restart"]), mode_after),
            scratch=(with_sources(after, folders["scratch"]), mode_after),
            restart_after=after_count,
            run_timeout=run_timeout,
            shrink_seconds=shrink_seconds,
            budget=examples,
        )
        named = (durations(before), durations(after))
        strategy = batches_strategy(schemas, batches, rows, steps(time_step, *named))
        if schemas:
            found = _find(strategy, search, examples, seed)
        else:  # only sources run as they are: one run of each, nothing to draw
            nothing: Batches = [{} for _ in range(batches)]
            found = nothing if search.differs(nothing) else None
        if search.error is not None:
            raise search.error
        if search.own_failures and search.examples == 0:
            raise search.own_failures[0]
        if found is not None and shrink_seconds > 0 and schemas:  # no rows drawn: none to remove
            found = search.shrink(found)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    common = {
        "examples": search.examples,
        "batches": batches,
        "restart_after": after_count,
        "seed": seed,
        "output_mode": mode_after,
        "seconds": time.monotonic() - started,
        "aimed_at": tuple(sorted(set(named[0]) | set(named[1]))),
    }
    if search.refusal is not None:
        return Demonstration(
            outcome="refused",
            error_class=search.refusal.error_class,
            message=search.refusal.message,
            **common,  # type: ignore[arg-type]
        )
    if clock:
        raise DocumentError(
            f"Spark restarted the new query (it did not refuse), but it reads a {clock} "
            "source, whose rows follow the wall clock: the restarted run and the run from "
            "scratch read other rows, so their results cannot be compared; read "
            "rate-micro-batch or files to demonstrate the results"
        )
    if found is None:
        return Demonstration(outcome="same", **common)  # type: ignore[arg-type]
    only_restarted, only_scratch = search.memo[_key(found)]  # type: ignore[misc]
    return Demonstration(
        outcome="differs",
        inputs=_inputs(found),
        only_restarted=tuple(only_restarted),
        only_scratch=tuple(only_scratch),
        shrunk=search.shrinks > 0,
        **common,  # type: ignore[arg-type]
    )


def _query(obj: Any, output_mode: str | None, name: str) -> tuple[Any, str | None]:
    """The streaming DataFrame and output mode of a DataFrame or a ``DataStreamWriter``
    (``None``: a DataFrame, no mode given)."""
    df, mode = obj, output_mode
    if type(obj).__name__ == "DataStreamWriter" and hasattr(obj, "_df"):
        df = obj._df
        mode = output_mode or _writer_mode(obj)
    if not getattr(df, "isStreaming", False) or not hasattr(df, "_jdf"):
        raise DocumentError(
            f"{name}: expected a streaming DataFrame or DataStreamWriter of a classic "
            f"(not Connect) session, got {type(obj).__name__}"
        )
    if mode is None:
        return df, None
    mode = mode.lower()
    if mode not in ("append", "update", "complete"):
        raise DocumentError(f"{name}: output mode {mode!r}: expected append, update or complete")
    return df, mode


def _writer_mode(writer: Any) -> str | None:
    """The output mode set on a ``DataStreamWriter`` (Spark keeps it in a private field of the
    JVM writer, ``outputMode``)."""
    try:
        klass = writer._jwrite.getClass()
        while klass is not None:
            for declared in klass.getDeclaredFields():
                if str(declared.getName()).endswith("outputMode"):
                    declared.setAccessible(True)
                    return str(declared.get(writer._jwrite).toString()).lower()
            klass = klass.getSuperclass()
    except Exception:  # an unknown writer layout: the caller's default
        return None
    return None


def _schemas(before: Any, after: Any) -> dict[str, Any]:
    """Per source identity, the schema of the rows to write: the union of the fields the two
    versions read (a version ignores a field it does not read; one it reads and is missing
    would be null)."""
    from pyspark.sql.types import StructType

    merged: dict[str, Any] = {}
    for source in [*file_sources(before), *file_sources(after)]:
        schema = schema_of(source)
        if source.identity not in merged:
            merged[source.identity] = schema
            continue
        known = {f.name for f in merged[source.identity].fields}
        extra = [f for f in schema.fields if f.name not in known]
        merged[source.identity] = StructType([*merged[source.identity].fields, *extra])
    return merged


def _kept_sources(before: Any, after: Any) -> str | None:
    """Check the sources that are not files: each is run as it is (:data:`KEPT_SOURCES`,
    :data:`CLOCK_SOURCES`) or refused; the name of a clock source read, if any."""
    clock = None
    for name in [*other_sources(before), *other_sources(after)]:
        if name in CLOCK_SOURCES:
            clock = name
        elif name not in KEPT_SOURCES:
            raise DocumentError(
                f"the {name} source: a demonstration feeds generated rows to file sources and "
                f"runs {', '.join(sorted(KEPT_SOURCES | CLOCK_SOURCES))} as they are; "
                "read the same rows from files in the test"
            )
    return clock


@dataclass
class _Search:
    """The runs of one demonstration and what they found, example by example."""

    root: Path
    previous: tuple[Any, str]
    restarted: tuple[Any, str]
    scratch: tuple[Any, str]
    restart_after: int
    run_timeout: float
    shrink_seconds: float
    budget: int = 1
    examples: int = 0
    shrinks: int = 0
    null_failed: bool = False
    runs: int = 0
    refusal: Failure | None = None
    error: Exception | None = None
    memo: dict[str, tuple[list[str], list[str]] | None] = field(default_factory=dict)
    own_failures: list[DocumentError] = field(default_factory=list)

    def differs(self, data: Batches) -> bool:
        key = _key(data)
        if key in self.memo:
            return self.memo[key] is not None
        if self.refusal is not None:
            return False
        if self.error is not None or self.examples >= self.budget:
            return False
        if len(self.own_failures) >= self.budget:  # as many rejected as may run: enough
            return False
        if _one_row_each(data):
            # Hypothesis's simplest draws (one row, repeated, per source and batch): they rarely
            # show what a fuller draw does not, and cost as much to run
            return False
        if self.null_failed and _has_null(data):
            # the query's own code failed on a null already: spend the runs on rows without
            return False
        self.examples += 1
        try:
            result = self._example(data)
        except _OwnFailure as exc:
            # the query's own code rejects these rows (a null its function cannot take): not
            # a restart's doing; the next example may show the restart, and where none runs
            # this failure is raised after the search
            self.own_failures.append(exc)
            self.examples -= 1  # not an example of the restart; up to ``budget`` more run
            self.null_failed = self.null_failed or _has_null(data)
            self.memo[key] = None
            return False
        except Exception as exc:  # raised after the search: Hypothesis would retry it
            self.error = exc
            return False
        if isinstance(result, Failure):
            self.refusal = result
            return False
        self.memo[key] = result
        return result is not None

    def shrink(self, data: Batches) -> Batches:
        """``data`` with rows removed while the difference stays, for ``shrink_seconds`` at
        most: each source's rows of each batch, halves first, then single rows (delta
        debugging, in the order Hypothesis drew them)."""
        deadline = time.monotonic() + self.shrink_seconds
        slots = [(b, s) for b, batch in enumerate(data) for s in batch]
        chunk = max(len(data[b][s]) for b, s in slots) // 2 or 1
        while chunk >= 1 and time.monotonic() < deadline:
            for b, s in slots:
                rows = data[b][s]
                start = 0
                while start < len(rows) and time.monotonic() < deadline:
                    trial = [dict(batch) for batch in data]
                    trial[b][s] = rows[:start] + rows[start + chunk :]
                    key = _key(trial)
                    if key not in self.memo:
                        self.shrinks += 1
                        try:
                            result = self._example(trial)
                        except _OwnFailure:  # fewer rows the query rejects: not kept
                            result = None
                        self.memo[key] = None if isinstance(result, Failure) else result
                    if self.memo[key] is not None:
                        data, rows = trial, trial[b][s]
                    else:
                        start += chunk
            chunk //= 2
        return data

    def _example(self, data: Batches) -> tuple[list[str], list[str]] | Failure | None:
        for side in ("restart", "scratch", "checkpoints"):
            shutil.rmtree(self.root / side, ignore_errors=True)
        # checkpoints in a folder of their own per run: a stopped query's state store may still
        # write files into its old one (Spark would find the next run's state folder not empty,
        # STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY)
        self.runs += 1
        checkpoints = self.root / "checkpoints" / str(self.runs)
        from_restart: list[list[str]] = []
        from_scratch: list[list[str]] = []
        scratch = (*self.scratch, str(checkpoints / "scratch"))
        for number, batch in enumerate(data):
            for index, rows in enumerate(batch.values()):
                for side in ("restart", "scratch"):
                    write(self.root / side / f"source{index}", number, rows)
            if number < self.restart_after:
                previous = (*self.previous, str(checkpoints / "previous"))
                ran = run_together([previous, scratch], self.run_timeout)
                _own(ran[0], "the previous query")
                _own(ran[1], "the new query from scratch")
                continue
            if number == self.restart_after:
                shutil.copytree(checkpoints / "previous", checkpoints / "restarted")
            restarted = (*self.restarted, str(checkpoints / "restarted"))
            ran = run_together([restarted, scratch], self.run_timeout)
            from_scratch.extend(_own(ran[1], "the new query from scratch"))
            if isinstance(ran[0], Failure):
                return ran[0]
            from_restart.extend(ran[0])
        return _difference(from_restart, from_scratch, self.restarted[1])


class _OwnFailure(DocumentError):
    """A version failed on the example's rows where no restart explains it."""


def _own(result: list[list[str]] | Failure, what: str) -> list[list[str]]:
    """A run's rows; its failure, where no restart explains it, is the query's own."""
    if isinstance(result, Failure):
        raise _OwnFailure(
            f"{what} fails on its own (not a restart): [{result.error_class}] {result.message}"
        )
    return result


def _difference(
    restarted: list[list[str]], scratch: list[list[str]], mode: str
) -> tuple[list[str], list[str]] | None:
    """What one side emitted and the other did not (as multisets); ``None`` when the same. In
    complete mode each micro-batch is the whole result: the last one counts."""
    if mode == "complete":
        restarted, scratch = restarted[-1:], scratch[-1:]
    left = Counter(row for batch in restarted for row in batch)
    right = Counter(row for batch in scratch for row in batch)
    if left == right:
        return None
    return sorted((left - right).elements()), sorted((right - left).elements())


def _find(strategy: Any, search: _Search, examples: int, seed: int) -> Batches | None:
    """The first input Hypothesis draws on which the two runs differ, or ``None``. Hypothesis's
    own shrinker is not used: it tries thousands of inputs, and each costs 2 * batches runs of
    Spark here; :func:`_shrink` removes rows within a time budget instead."""
    from hypothesis import HealthCheck, Phase, Verbosity, find, settings
    from hypothesis.errors import NoSuchExample

    # Hypothesis counts a draw it repeats (small strategies do) as an example, and its simplest
    # are skipped: it may draw several times ``examples``, each distinct one is run until
    # ``search.budget`` of them ran; the other draws cost no run
    config = settings(
        max_examples=examples * DRAWS_PER_EXAMPLE + 1,
        database=None,
        deadline=None,
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
    )
    try:
        found: Batches = find(strategy, search.differs, settings=config, random=random.Random(seed))
    except NoSuchExample:
        return None
    return found


def _one_row_each(data: Batches) -> bool:
    return bool(data[0]) and all(
        len({row_text(r) for r in rows}) <= 1 for batch in data for rows in batch.values()
    )


def _has_null(data: Batches) -> bool:
    return any(
        value is None
        for batch in data
        for rows in batch.values()
        for row in rows
        for value in row.values()
    )


def _key(data: Batches) -> str:
    return repr([[(k, [row_text(r) for r in rows]) for k, rows in b.items()] for b in data])


def _inputs(data: Batches) -> tuple[tuple[int, str, tuple[str, ...]], ...]:
    return tuple(
        (number + 1, source, tuple(row_text(r) for r in rows))
        for number, batch in enumerate(data)
        for source, rows in batch.items()
    )
