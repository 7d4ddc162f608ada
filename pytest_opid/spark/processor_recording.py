"""A stateful processor's ``init`` recorded, in the child process that runs it.

:func:`~pytest_opid.spark.transform_with_state.record_processor` sends the pickled processor to
a Python process of its own (:mod:`pytest_opid.spark.isolation`), which calls
:func:`record_pickled` here: ``init`` runs with a :class:`RecordingHandle`, which stands for
PySpark's ``StatefulProcessorHandle`` and records every call, while an audit hook notices what
a recording cannot stand for (a file opened, a host looked up, a process started). This module
is what that child imports before the call; the test process only reads back the answer.
"""

from __future__ import annotations

import contextvars
import os
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

from pytest_opid.spark.isolation import phase
from pytest_opid.spark.transform_with_state import (
    CALL_FIELDS,
    StateCall,
    class_name,
    processor_from_command,
)


class _Unrecordable(Exception):
    """``init`` did something a recording cannot stand for."""


class _Inert:
    """What the recording handle returns for a state variable: using it inside ``init`` (there
    is no grouping key there) cannot be recorded."""

    def __init__(self, kind: str, name: str) -> None:
        self._what = f"{kind} {name!r}"

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise _Unrecordable(f"its init() uses the {self._what} ({attr})")


def _schema_text(schema: Any, what: str) -> tuple[str, bool]:
    if isinstance(schema, str):
        return schema, False
    to_json = getattr(schema, "json", None)
    if callable(to_json) and type(schema).__name__ == "StructType":
        return str(to_json()), True
    raise _Unrecordable(f"its init() gives {what} as a {type(schema).__name__}")


def _ttl(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Unrecordable(f"its init() gives ttlDurationMs as a {type(value).__name__}")
    return value


class RecordingHandle:
    """A stand-in for PySpark's ``StatefulProcessorHandle`` that records what ``init`` declares."""

    def __init__(self) -> None:
        self.calls: list[StateCall] = []

    def getValueState(self, stateName: str, schema: Any, ttlDurationMs: int | None = None) -> Any:
        text, is_json = _schema_text(schema, "a state schema")
        self.calls.append(
            StateCall("getValueState", str(stateName), text, is_json, ttl_ms=_ttl(ttlDurationMs))
        )
        return _Inert("ValueState", str(stateName))

    def getListState(self, stateName: str, schema: Any, ttlDurationMs: int | None = None) -> Any:
        text, is_json = _schema_text(schema, "a state schema")
        self.calls.append(
            StateCall("getListState", str(stateName), text, is_json, ttl_ms=_ttl(ttlDurationMs))
        )
        return _Inert("ListState", str(stateName))

    def getMapState(
        self,
        stateName: str,
        userKeySchema: Any,
        valueSchema: Any,
        ttlDurationMs: int | None = None,
    ) -> Any:
        key, key_json = _schema_text(userKeySchema, "a map state's key schema")
        value, value_json = _schema_text(valueSchema, "a map state's value schema")
        self.calls.append(
            StateCall(
                "getMapState",
                str(stateName),
                value,
                value_json,
                key,
                key_json,
                _ttl(ttlDurationMs),
            )
        )
        return _Inert("MapState", str(stateName))

    def deleteIfExists(self, stateName: str) -> None:
        self.calls.append(StateCall("deleteIfExists", str(stateName)))

    def registerTimer(self, expiryTimestampMs: int) -> None:
        raise _Unrecordable("its init() registers a timer")

    def deleteTimer(self, expiryTimestampMs: int) -> None:
        raise _Unrecordable("its init() deletes a timer")

    def listTimers(self) -> Iterator[int]:
        raise _Unrecordable("its init() lists timers")

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise _Unrecordable(f"its init() calls handle.{attr}, which pytest-opid does not know")


_recording: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "pytest_opid_tws_recording", default=None
)


_hook_lock = threading.Lock()


_hook_installed = False


#: Audit events an init() that only declares state variables never raises.
_FORBIDDEN = {
    "socket.connect": "connects to a service",
    "socket.getaddrinfo": "looks up a host name",
    "urllib.Request": "opens a URL",
    "subprocess.Popen": "starts a process",
    "os.system": "runs a command",
    "os.exec": "runs a program",
    "os.posix_spawn": "starts a process",
    "os.spawn": "starts a process",
}


_CODE_SUFFIXES = (".py", ".pyc", ".pyi", ".so", ".pth", ".pyd", ".zip", ".egg")


def _code_roots() -> tuple[str, ...]:
    """The installation's folders (the standard library, site-packages): data files there
    (time zones, encodings) are read by imports, not by the processor."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    return tuple(os.path.join(os.path.abspath(r), "") for r in roots)


def _audit(event: str, args: tuple[Any, ...]) -> None:
    seen = _recording.get()
    if seen is None:
        return
    what = _FORBIDDEN.get(event)
    if what is None and event == "open" and args:
        path = args[0]
        if isinstance(path, int):
            return  # a file descriptor already open
        text = os.fsdecode(path) if isinstance(path, (str, bytes, os.PathLike)) else str(path)
        if text.endswith(_CODE_SUFFIXES) or os.path.abspath(text).startswith(_code_roots()):
            return  # an import
        what = f"opens the file {text!r}"
    if what is not None:
        seen.append(what)
        raise _Unrecordable(f"its init() {what}")


def _install_hook() -> None:
    global _hook_installed
    with _hook_lock:
        if not _hook_installed:
            sys.addaudithook(_audit)  # permanent; does nothing outside record_processor
            _hook_installed = True


def record_pickled(payload: bytes) -> dict[str, Any]:
    """In the child process (:func:`record_processor`): the pickled processor's ``init``
    recorded here, as plain data, ``{"calls": [[method, name, schema, schema_is_json,
    user_key_schema, user_key_is_json, ttl_ms], ...]}`` or ``{"failure": why not}``."""
    from pyspark import cloudpickle  # lazy: pyspark is an optional extra

    phase("load")
    processor = cloudpickle.loads(payload)
    phase("init")
    calls, failure = _record_here(processor)
    if failure is not None or calls is None:
        return {"failure": failure}
    return {"calls": [[getattr(c, field) for field, _ in CALL_FIELDS] for c in calls]}


def record_command(command: bytes) -> dict[str, Any]:
    """In the child (:func:`~pytest_opid.spark.transform_with_state.record_command`): Spark's
    pickled function unpickled here, its stateful processor's ``init`` recorded as
    :func:`record_pickled` does, with ``"class"``: the processor's class name."""
    phase("load")
    processor, _ = processor_from_command(command)
    name = class_name(processor)
    if not callable(getattr(processor, "init", None)):
        return {"class": name, "failure": "it has no init(handle) method"}
    phase(f"init:{name}")  # the class named even if init() never returns
    calls, failure = _record_here(processor)
    if failure is not None or calls is None:
        return {"class": name, "failure": failure}
    return {"class": name, "calls": [[getattr(c, f) for f, _ in CALL_FIELDS] for c in calls]}


def _record_here(processor: object) -> tuple[tuple[StateCall, ...] | None, str | None]:
    """``processor.init`` run in this process with a :class:`RecordingHandle` and the guard:
    (the calls, None) or (None, why not). An ``init`` that raises ``SystemExit`` exits."""
    init = processor.init  # type: ignore[attr-defined]
    _install_hook()
    handle = RecordingHandle()
    seen: list[str] = []
    token = _recording.set(seen)
    failure: str | None = None
    try:
        init(handle)
    except _Unrecordable as exc:
        failure = str(exc)
    except Exception as exc:  # the processor's own code failed outside Spark
        failure = f"its init() raised {type(exc).__name__}: {exc}"[:300]
    finally:
        _recording.reset(token)
    if seen and failure is None:  # init() caught our refusal and carried on
        failure = f"its init() {seen[0]}"
    if failure is None:
        names = Counter(c.name for c in handle.calls if c.method != "deleteIfExists")
        twice = sorted(n for n, count in names.items() if count > 1)
        if twice:
            failure = f"its init() declares {', '.join(map(repr, twice))} twice"
    if failure is not None:
        return None, failure
    return tuple(handle.calls), None
