"""The durations a query names: where a restart's difference hides in time.

A session timeout changed from 30 to 10 minutes shows only in rows of one key that arrive
between 10 and 30 minutes apart; a window from 5 to 10 minutes only where rows fall on either
side of a 5-minute bound. Rows spread at random over a batch's step find such a gap by luck.
So the demonstration also moves event times by steps just inside and outside every duration
either version names (:mod:`.rows`), and most by those that changed between them, as
Hypothesis draws the constants of the code under test.

Where durations are named:

* in the plan, as built and as analyzed: ``EventTimeWatermark.delay``, ``TimeWindow``'s window
  and slide, every interval literal, and every string literal that reads as an interval (the
  arguments of ``window`` and ``session_window`` before the analyzer resolves them);
* in the Python functions of the plan (``PythonFunction.command``: applyInPandasWithState's
  function, a transformWithState processor, a UDF): ``timedelta`` values (pandas' ``Timedelta``
  is one) among its defaults, the values it closes over and the globals its code reads, and of
  the user's functions it calls; strings that read as an interval (``"10 minutes"``, as
  ``GroupState.setTimeoutDuration`` takes); integer constants that are whole minutes in
  milliseconds (``30 * 60 * 1000``). Unpickling a function runs the user's code, so it is read in
  a child process (:func:`pytest_opid.spark.isolation.run_isolated`), within the same time
  limit as a function digest.

What is not found (a duration read from a file or a conf at run time) is simply not aimed at.
"""

from __future__ import annotations

import pickle
import re
import types
from datetime import timedelta
from typing import Any

from pytest_opid.spark.demonstration.tree import nodes
from pytest_opid.spark.isolation import IsolatedFailure, run_isolated
from pytest_opid.spark.query.gateway import command_bytes
from pytest_opid.spark.transform_with_state import CHILD_PRELOAD, init_timeout

#: At most this many durations per query (a plan with more is aimed at its first ones).
MOST = 16
#: Functions of the user's code read per query, at most.
MOST_FUNCTIONS = 64
_INTERVAL = re.compile(
    r"(?:interval\s+)?(\d{1,6})\s*(second|sec|minute|min|hour|day|week)s?", re.IGNORECASE
)
_UNIT_SECONDS = {"second": 1, "sec": 1, "minute": 60, "min": 60, "hour": 3600, "day": 86400}
_UNIT_SECONDS["week"] = 7 * 86400
_MINUTE_MS = 60_000
_LONGEST = timedelta(days=7)


def durations(df: Any) -> frozenset[timedelta]:
    """The durations ``df``'s plan and its Python functions name (positive, at most a week)."""
    found: set[timedelta] = set()
    commands: list[bytes] = []
    execution = df._jdf.queryExecution()
    # as built (``window('ts, "5 minutes")`` is a function of string literals there) and as
    # resolved (a ``TimeWindow``, an interval literal); a duration found in both counts once
    for node in [*nodes(execution.logical()), *nodes(execution.analyzed())]:
        if node.nodeName() == "EventTimeWatermark":
            _add(found, _calendar(node.delay()))
        for expression in _expressions(node):
            name = expression.nodeName()
            if name == "TimeWindow":
                _add(found, timedelta(microseconds=int(expression.windowDuration())))
                _add(found, timedelta(microseconds=int(expression.slideDuration())))
            elif name == "Literal":
                _add(found, _literal(expression))
            elif name == "PythonUDF" and len(commands) < MOST:
                command = _command(df, expression)
                if command is not None:
                    commands.append(command)
    if commands:
        found.update(_function_durations(commands))
    return frozenset(sorted(found)[:MOST])


def _expressions(node: Any) -> list[Any]:
    roots = node.expressions()
    out: list[Any] = []
    for i in range(roots.size()):
        out.extend(nodes(roots.apply(i)))
    return out


def _add(found: set[timedelta], value: timedelta | None) -> None:
    if value is not None and timedelta(0) < value <= _LONGEST:
        found.add(value)


def _calendar(interval: Any) -> timedelta | None:
    """A ``CalendarInterval`` without months (a month has no fixed length); its public Java
    fields are read through py4j's ``get_field``."""
    from py4j.java_gateway import get_field

    if int(get_field(interval, "months")) != 0:
        return None
    days = int(get_field(interval, "days"))
    return timedelta(days=days, microseconds=int(get_field(interval, "microseconds")))


def _literal(expression: Any) -> timedelta | None:
    kind = str(expression.dataType().typeName())
    value = expression.value()
    if value is None:
        return None
    if kind == "interval":  # CalendarIntervalType
        return _calendar(value)
    if kind.startswith("interval day"):  # DayTimeIntervalType: microseconds
        return timedelta(microseconds=int(value))
    if kind == "string":  # a UTF8String: window('ts, "5 minutes") before the analyzer
        return _duration(str(value.toString()))
    return None


def _command(df: Any, expression: Any) -> bytes | None:
    """The pickled function of a ``PythonUDF``."""
    try:
        return command_bytes(df.sparkSession._jvm, expression.func())
    except Exception:  # py4j: a function this line keeps otherwise is not aimed at
        return None


def _function_durations(commands: list[bytes]) -> set[timedelta]:
    try:
        answer = run_isolated(
            "pytest_opid.spark.demonstration.durations",
            "durations_pickled",
            pickle.dumps(commands),
            init_timeout(),
            CHILD_PRELOAD,
        )
    except IsolatedFailure:  # a function that cannot be unpickled here is not aimed at
        return set()
    if not isinstance(answer, list):
        return set()
    found: set[timedelta] = set()
    for seconds in answer[:MOST]:
        if isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
            _add(found, timedelta(seconds=seconds))
    return found


def durations_pickled(request: bytes) -> list[float]:
    """In the child: the durations the pickled functions name, in seconds."""
    from pyspark.serializers import CPickleSerializer  # lazy: pyspark is an optional extra

    roots: list[Any] = []
    for command in pickle.loads(request):
        loaded = CPickleSerializer().loads(command)
        func = loaded[0] if isinstance(loaded, tuple) and loaded else loaded
        processor = getattr(getattr(func, "__self__", None), "_stateful_processor", None)
        if processor is not None:  # transformWithState: the processor's methods and attributes
            roots.extend(vars(type(processor)).values())
            roots.extend(getattr(processor, "__dict__", {}).values())
        else:
            roots.append(func)
    found: set[timedelta] = set()
    seen: set[int] = set()
    functions = 0
    while roots and functions < MOST_FUNCTIONS:
        value = roots.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, types.FunctionType):
            functions += 1
            roots.extend(_read_by(value))
        else:
            _add(found, _duration(value))
    return [d.total_seconds() for d in sorted(found)[:MOST]]


def _read_by(func: types.FunctionType) -> list[Any]:
    """What a function's code can read: its defaults, closure, the globals its code objects
    name, and their constants (nested code objects included)."""
    values: list[Any] = [*(func.__defaults__ or ()), *(func.__kwdefaults__ or {}).values()]
    for cell in func.__closure__ or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:  # an empty cell
            continue
    codes = [func.__code__]
    while codes:
        code = codes.pop()
        for name in code.co_names:
            if name in func.__globals__:
                values.append(func.__globals__[name])
        for constant in code.co_consts:
            if isinstance(constant, types.CodeType):
                codes.append(constant)
            else:
                values.append(_constant(constant))
    return values


def _constant(value: Any) -> Any:
    """An integer constant of whole minutes in milliseconds read as that many milliseconds."""
    if type(value) is int and value >= _MINUTE_MS and value % _MINUTE_MS == 0:
        return timedelta(milliseconds=value)
    return value


def _duration(value: Any) -> timedelta | None:
    if isinstance(value, timedelta):
        return timedelta(seconds=value.total_seconds())  # a pandas Timedelta as Python's own
    if isinstance(value, str) and len(value) <= 40:
        match = _INTERVAL.fullmatch(value.strip())
        if match:
            return timedelta(seconds=int(match.group(1)) * _UNIT_SECONDS[match.group(2).lower()])
    return None
