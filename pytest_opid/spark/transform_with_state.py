"""transformWithState: the state variables a Python stateful processor declares.

A ``StatefulProcessor``'s state variables exist only once its ``init(handle)`` has run. Spark
runs it on the driver before it checks a restarted query's state (``TransformWithStateInPySpark
Exec`` starts a Python worker for it, the "pre-init runner", which calls back into the JVM's
``DriverStatefulProcessorHandleImpl``); the handle then knows every column family Spark will
write and check. That worker is a separate Python process: ``PYSPARK_PYTHON`` or the
``python3`` on the PATH, which in a test run is often not the interpreter running the tests (no
pyspark, no pandas there), and then nothing is known.

So pytest-opid runs ``init`` itself, in this interpreter but in a Python process of its own
(:mod:`pytest_opid.spark.isolation`: the processor pickled as Spark ships it to its workers,
this process's ``sys.path``, working directory and environment, a time limit), with a
:class:`RecordingHandle` that implements the handle's API (``getValueState`` /
``getListState`` / ``getMapState`` with schemas as ``StructType`` or DDL strings and
``ttlDurationMs``, ``deleteIfExists``; timers) and records every call
(:func:`record_processor`). :mod:`pytest_opid.spark.jvm` replays the calls, in order, on the
operator's own ``DriverStatefulProcessorHandleImpl``, exactly as Spark's state server does for
the worker (``TransformWithStateInPySparkStateServer.initializeStateVariable``: the schema
parsed by ``StructType.fromString`` / ``CatalystSqlParser.parseTableSchema``, ``Encoders.row``,
``TTLConfig``). The column family schemas and the operator properties then come from Spark's own
code (``getColumnFamilySchemas``, ``getStateVariableInfos``): one source of truth, byte for byte
what Spark writes to the checkpoint, whichever route declared the variables.

An ``init`` that does something a recording cannot stand for (opens a file, connects to a
service, starts a process, uses a state variable or a timer, raises) is not recorded: the
reason is kept (:attr:`ProcessorRecord.reason`) and the JVM reader falls back to Spark's own
pre-init worker; when that fails too, the operator's variables are unknown and the restore check
says why ("could not inspect ..."). The audit hook that notices those is a detector, not a
barrier: the barrier is the child process. Whatever ``init`` does (delete or write files, exit,
loop, fork, start threads) happens in the child, as it would in Spark's worker, and cannot end,
hang or change the test process; an exit, a crash or a hang is one line ("could not inspect
<class>: its init() did not return within 30 s").

:func:`transform_with_state_meaning` turns what was read into the operator's meaning facts
(:attr:`~pytest_opid.result.StateOperator.meaning`): processor class, time mode, output mode and
one fact per state variable (its kind, its schema in Spark's DDL form, its TTL).
"""

from __future__ import annotations

import contextvars
import json
import os
import re
import sys
import threading
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_opid.result import UNKNOWN, StateStore
from pytest_opid.spark.isolation import IsolatedFailure, phase, run_isolated
from pytest_opid.spark.vocabulary import ENCODING_FACT, PROPERTIES_STORE

_KINDS = ("ValueState", "ListState", "MapState")


@dataclass(frozen=True)
class StateCall:
    """One call of ``init`` on the handle, as Spark's state server receives it: ``method`` is
    ``getValueState``, ``getListState``, ``getMapState``, ``deleteIfExists``; ``schema`` the
    value schema (``user_key_schema`` the map's key schema), each as ``StructType`` JSON
    (``json: True``) or as the DDL string the processor gave."""

    method: str
    name: str
    schema: str | None = None
    schema_is_json: bool = True
    user_key_schema: str | None = None
    user_key_is_json: bool = True
    ttl_ms: int | None = None


@dataclass(frozen=True)
class ProcessorRecord:
    """What ``init`` declared: the processor's class (``module.Qualname``), the calls in order,
    and, when ``init`` could not be recorded, why (``calls`` is then None)."""

    processor_class: str
    calls: tuple[StateCall, ...] | None
    reason: str | None = None

    @property
    def ttl(self) -> dict[str, int | None]:
        """State variable name -> its TTL in ms (None: none), from the last declaration."""
        out: dict[str, int | None] = {}
        for call in self.calls or ():
            if call.method == "deleteIfExists":
                out.pop(call.name, None)
            else:
                out[call.name] = call.ttl_ms
        return out


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


def class_name(processor: object) -> str:
    """``module.Name`` of the processor's class; ``Name`` alone for a class defined in a script
    or in code run by ``exec`` (cloudpickle does not keep a local class's qualified name the
    same from one unpickling to the next)."""
    cls = type(processor)
    module = cls.__module__ or ""
    return cls.__name__ if module in ("", "builtins", "__main__") else f"{module}.{cls.__name__}"


#: How long a processor's ``init`` may take in its child process, unless
#: ``PYTEST_OPID_INIT_TIMEOUT`` (seconds) or ``record_processor(timeout=...)`` says otherwise.
INIT_TIMEOUT = 30.0
TIMEOUT_VARIABLE = "PYTEST_OPID_INIT_TIMEOUT"
#: What the child imports before the call, so that the call only unpickles the user's code.
_PRELOAD = (
    "pytest_opid.spark.transform_with_state",
    "pyspark.cloudpickle",
    "pyspark.sql.streaming",
)


def init_timeout() -> float:
    """The time limit of one recording: ``PYTEST_OPID_INIT_TIMEOUT`` or :data:`INIT_TIMEOUT`."""
    text = os.environ.get(TIMEOUT_VARIABLE, "").strip()
    if not text:
        return INIT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < 86_400:
        raise ValueError(f"{TIMEOUT_VARIABLE}={text!r} is not a number of seconds (0 < s < 86400)")
    return value


def _importable(module: str) -> bool:
    """Whether a fresh Python finds ``module`` on ``sys.path`` (a test module imported by
    pytest's ``importlib`` mode is not)."""
    import importlib.machinery

    top = module.partition(".")[0]
    if top in sys.builtin_module_names:
        return True
    return importlib.machinery.PathFinder.find_spec(top, sys.path) is not None


def _pickled(processor: object) -> bytes:
    """The processor as Spark ships it to its Python workers: pickled by PySpark's
    cloudpickle; its class's module by value when a fresh Python could not import it."""
    from pyspark import cloudpickle  # lazy: pyspark is an optional extra

    module = sys.modules.get(type(processor).__module__ or "")
    by_value = (
        module is not None and module.__name__ != "__main__" and not _importable(module.__name__)
    )
    if by_value:
        cloudpickle.register_pickle_by_value(module)
    try:
        return bytes(cloudpickle.dumps(processor))
    finally:
        if by_value:
            cloudpickle.unregister_pickle_by_value(module)


def record_processor(processor: object, timeout: float | None = None) -> ProcessorRecord:
    """Run ``processor.init`` with a :class:`RecordingHandle` in a Python process of its own
    (:mod:`.isolation`): the calls it makes, or why they could not be recorded (then ``calls``
    is None).

    What the recording sees: the handle's calls, and, through the child's audit hook, an
    ``init`` that opens a file outside the installed code, connects to or looks up a host, or
    starts a process (then it is not recorded: Spark's own worker may run it instead). What it
    cannot see or stop: anything else the code does (writing or deleting files, changing its
    own interpreter, code that switches the audit hook's view off); that happens in the child,
    as in Spark's worker at query start, and never in the test process. An ``init`` that exits
    (``sys.exit``, ``os._exit``), crashes or does not return within ``timeout`` seconds
    (:func:`init_timeout`: 30 unless ``PYTEST_OPID_INIT_TIMEOUT`` says otherwise) is one line:
    "could not inspect <class>: its init() did not return within 30 s"."""
    name = class_name(processor)
    init = getattr(processor, "init", None)
    if not callable(init):
        return ProcessorRecord(name, None, "it has no init(handle) method")
    try:
        limit = init_timeout() if timeout is None else timeout
    except ValueError as exc:
        return ProcessorRecord(name, None, f"could not inspect {name}: {exc}")
    try:
        payload = _pickled(processor)
    except Exception as exc:  # what Spark could not ship to its workers either
        unpicklable = f"it cannot be pickled ({type(exc).__name__}: {exc})"[:300]
        return ProcessorRecord(name, None, f"could not inspect {name}: {unpicklable}")
    failure: str | None
    try:
        answer = run_isolated(
            "pytest_opid.spark.transform_with_state", "record_pickled", payload, limit, _PRELOAD
        )
        calls, failure = _calls_from(answer)
    except IsolatedFailure as exc:
        calls = None
        if exc.phase == "init":
            failure = f"its init() {exc.what}"
        elif exc.phase == "load":
            failure = f"loading it in a separate Python process {exc.what}"
        else:  # before the processor was sent: no process, or not this system
            failure = exc.what
    if failure is not None or calls is None:
        return ProcessorRecord(name, None, f"could not inspect {name}: {failure}")
    return ProcessorRecord(name, calls)


_CALL_FIELDS: tuple[tuple[str, type | tuple[type, ...]], ...] = (
    ("method", str),
    ("name", str),
    ("schema", (str, type(None))),
    ("schema_is_json", bool),
    ("user_key_schema", (str, type(None))),
    ("user_key_is_json", bool),
    ("ttl_ms", (int, type(None))),
)


def _calls_from(answer: Any) -> tuple[tuple[StateCall, ...] | None, str | None]:
    """The child's answer (plain JSON data, see :func:`record_pickled`) as calls or why not."""
    if isinstance(answer, dict) and isinstance(answer.get("failure"), str):
        return None, answer["failure"][:300]
    rows = answer.get("calls") if isinstance(answer, dict) else None
    calls = []
    for row in rows if isinstance(rows, list) else [None]:
        if not isinstance(row, list) or len(row) != len(_CALL_FIELDS):
            raise IsolatedFailure("init", "sent back something unreadable")
        for value, (_, kind) in zip(row, _CALL_FIELDS, strict=True):
            if not isinstance(value, kind):
                raise IsolatedFailure("init", "sent back something unreadable")
        calls.append(StateCall(*row))
    return tuple(calls), None


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
    return {"calls": [[getattr(c, field) for field, _ in _CALL_FIELDS] for c in calls]}


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


def processor_from_command(command: bytes) -> tuple[object, str | None]:
    """The stateful processor (and its time mode) in the pickled Python function Spark keeps
    for a transformWithState operator (``TransformWithStateInPandasUdfUtils``'s bound method)."""
    from pyspark.serializers import CPickleSerializer  # lazy: pyspark is an optional extra

    loaded = CPickleSerializer().loads(command)
    func = loaded[0] if isinstance(loaded, tuple) else loaded
    owner = getattr(func, "__self__", None)
    processor = getattr(owner, "_stateful_processor", None)
    if processor is None:
        # PySpark 4.0's GroupedData.transformWithStateInPandas closes over the processor (its
        # transformWithStateUDF is a nested function; 4.1 made it a bound method)
        names = getattr(getattr(func, "__code__", None), "co_freevars", ())
        cells = dict(zip(names, getattr(func, "__closure__", None) or (), strict=False))
        if "statefulProcessor" in cells:
            processor = cells["statefulProcessor"].cell_contents
    if processor is None:
        raise ValueError("the operator's Python function holds no stateful processor")
    mode = getattr(owner, "_time_mode", None)
    return processor, None if mode is None else str(mode)


_SQL_TYPES = {
    "long": "BIGINT",
    "integer": "INT",
    "short": "SMALLINT",
    "byte": "TINYINT",
    "string": "STRING",
    "double": "DOUBLE",
    "float": "FLOAT",
    "boolean": "BOOLEAN",
    "binary": "BINARY",
    "date": "DATE",
    "timestamp": "TIMESTAMP",
    "timestamp_ntz": "TIMESTAMP_NTZ",
    "null": "VOID",
    "void": "VOID",
}


def _quote_name(name: str) -> str:
    """Spark's ``quoteIfNeeded``."""
    if re.fullmatch(r"[A-Za-z0-9_]+", name) and not name.isdigit():
        return name
    return "`" + name.replace("`", "``") + "`"


def _sql(t: Any, depth: int = 0) -> str:
    """A Spark type's JSON as Spark's ``DataType.sql``."""
    if depth > 20:
        return UNKNOWN
    if isinstance(t, str):
        if t.startswith("decimal"):
            return t.upper()
        return _SQL_TYPES.get(t, t.upper())
    if isinstance(t, dict):
        kind = t.get("type")
        if kind == "struct":
            fields = [f for f in t.get("fields") or [] if isinstance(f, dict)]
            inner = ", ".join(
                f"{_quote_name(str(f.get('name')))}: {_sql(f.get('type'), depth + 1)}"
                + ("" if f.get("nullable", True) else " NOT NULL")
                for f in fields
            )
            return f"STRUCT<{inner}>"
        if kind == "array":
            return f"ARRAY<{_sql(t.get('elementType'), depth + 1)}>"
        if kind == "map":
            key, value = _sql(t.get("keyType"), depth + 1), _sql(t.get("valueType"), depth + 1)
            return f"MAP<{key}, {value}>"
        if kind == "udt":
            return _sql(t.get("sqlType"), depth + 1)
    return UNKNOWN


def ddl(schema: Any) -> str:
    """A struct's JSON (text or parsed) as Spark's ``StructType.toDDL``: ``c BIGINT,s STRING``."""
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except ValueError:
            return UNKNOWN
    if not isinstance(schema, dict) or schema.get("type") != "struct":
        return UNKNOWN
    return ",".join(
        f"{_quote_name(str(f.get('name')))} {_sql(f.get('type'))}"
        + ("" if f.get("nullable", True) else " NOT NULL")
        for f in schema.get("fields") or []
        if isinstance(f, dict)
    )


def _parsed(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _fields(schema: Any) -> list[dict[str, Any]]:
    if isinstance(schema, dict):
        return [f for f in schema.get("fields") or [] if isinstance(f, dict)]
    return []


def _unwrap_ttl(value: Any) -> Any:
    """A TTL variable's value schema is ``struct<value: <the variable's>, ttlExpirationMs>``."""
    fields = _fields(value)
    if (
        len(fields) == 2
        and fields[0].get("name") == "value"
        and fields[1].get("name") == "ttlExpirationMs"
    ):
        return fields[0].get("type")
    return value


def user_variables(
    stores: Sequence[StateStore] | Mapping[str, tuple[str | None, str | None]],
    properties: str | None = None,
) -> dict[str, dict[str, Any]]:
    """The processor's own state variables (not Spark's timers and indexes), in declaration
    order: name -> ``kind`` (ValueState...), ``ttl`` (bool), ``key`` / ``value`` (parsed schema
    of the variable's own column family, TTL wrapper removed; the map's user key for ``key``)."""
    if not isinstance(stores, Mapping):
        families = {s.name: (s.key_schema, s.value_schema) for s in stores}
    else:
        families = dict(stores)
    if properties is None:
        properties = families.get(PROPERTIES_STORE, (None, None))[1]
    props = _parsed(properties)
    out: dict[str, dict[str, Any]] = {}
    if not isinstance(props, dict):
        return out
    for var in props.get("stateVariables") or []:
        if not isinstance(var, dict):
            continue
        name, kind = var.get("stateName"), var.get("stateVariableType")
        if not isinstance(name, str) or kind not in _KINDS:
            continue  # TimerState and Spark's internal column families
        ttl = bool(var.get("ttlEnabled"))
        key_text, value_text = families.get(f"default/{name}", (None, None))
        key, value = _parsed(key_text), _parsed(value_text)
        if ttl:
            value = _unwrap_ttl(value)
        if kind == "MapState":
            parts = {f.get("name"): f.get("type") for f in _fields(key)}
            key = parts.get("userKey")
        else:
            key = None
        out[name] = {"kind": kind, "ttl": ttl, "key": key, "value": value}
    return out


def variable_text(info: Mapping[str, Any], ttl_ms: int | None = None) -> str:
    """One state variable as a meaning fact: ``ValueState<c BIGINT>, no TTL``."""
    value = ddl(info.get("value")) if info.get("value") is not None else UNKNOWN
    if info.get("kind") == "MapState":
        key = ddl(info.get("key")) if info.get("key") is not None else UNKNOWN
        body = f"MapState<{key}; {value}>"
    else:
        body = f"{info.get('kind')}<{value}>"
    if not info.get("ttl"):
        return f"{body}, no TTL"
    return f"{body}, TTL {ttl_ms} ms" if ttl_ms is not None else f"{body}, TTL"


def transform_with_state_meaning(
    stores: Sequence[StateStore],
    processor: ProcessorRecord | None,
    encoding: str | None = None,
) -> tuple[tuple[str, str], ...]:
    """The meaning facts of a transformWithState operator: ``processor`` (its class),
    ``time mode``, ``output mode`` (as Spark records them in the operator properties), one
    ``state variable <name>`` per variable the processor declares, from the column families
    Spark writes (``stores``, read from the JVM), with the TTL duration the processor gives,
    and the ``state encoding`` (``unsaferow``, ``avro``: how Spark lets values evolve).
    Without stores (the variables could not be read) the variables are :data:`UNKNOWN` and the
    fact ``could not inspect`` says why."""
    facts: list[tuple[str, str]] = [
        ("processor", processor.processor_class if processor is not None else UNKNOWN)
    ]
    families = {s.name: (s.key_schema, s.value_schema) for s in stores}
    props = _parsed(families.get(PROPERTIES_STORE, (None, None))[1])
    if not isinstance(props, dict):
        facts += [("time mode", UNKNOWN), ("output mode", UNKNOWN), ("state variables", UNKNOWN)]
        if processor is not None and processor.reason:
            facts.append(("could not inspect", processor.reason))
        if encoding:
            facts.append((ENCODING_FACT, encoding))
        return tuple(facts)
    facts.append(("time mode", str(props.get("timeMode", UNKNOWN))))
    facts.append(("output mode", str(props.get("outputMode", UNKNOWN))))
    ttl = processor.ttl if processor is not None and processor.calls is not None else {}
    for name, info in user_variables(stores).items():
        facts.append((f"state variable {name}", variable_text(info, ttl.get(name))))
    if encoding:
        facts.append((ENCODING_FACT, encoding))
    return tuple(facts)
