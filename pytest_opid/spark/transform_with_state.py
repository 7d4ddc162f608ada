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
:class:`~pytest_opid.spark.processor_recording.RecordingHandle` that implements the handle's
API (``getValueState`` / ``getListState`` / ``getMapState`` with schemas as ``StructType`` or
DDL strings and ``ttlDurationMs``, ``deleteIfExists``; timers) and records every call
(:func:`record_processor`). :mod:`pytest_opid.spark.query.processor_handle` replays the calls,
in order, on the operator's own ``DriverStatefulProcessorHandleImpl``, exactly as Spark's state
server does for the worker (``TransformWithStateInPySparkStateServer.initializeStateVariable``:
the schema parsed by ``StructType.fromString`` / ``CatalystSqlParser.parseTableSchema``,
``Encoders.row``, ``TTLConfig``). The column family schemas and the operator properties then
come from Spark's own code (``getColumnFamilySchemas``, ``getStateVariableInfos``): one source
of truth, byte for byte what Spark writes to the checkpoint, whichever route declared the
variables.

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

This module is the test process's side; what runs in the child is
:mod:`pytest_opid.spark.processor_recording`, and reading the variables Spark files is
:mod:`pytest_opid.spark.state_variables` (shared with the checkpoint reader).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_opid.result import UNKNOWN, StateStore
from pytest_opid.spark.isolation import IsolatedFailure, run_isolated
from pytest_opid.spark.state_variables import operator_properties, user_variables, variable_text
from pytest_opid.spark.vocabulary import ENCODING_FACT
from pytest_opid.time_limits import seconds_from_environment


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


#: A :class:`StateCall` as the child sends it back (:mod:`.processor_recording`): its fields
#: in order, each with the JSON types it may take.
CALL_FIELDS: tuple[tuple[str, type | tuple[type, ...]], ...] = (
    ("method", str),
    ("name", str),
    ("schema", (str, type(None))),
    ("schema_is_json", bool),
    ("user_key_schema", (str, type(None))),
    ("user_key_is_json", bool),
    ("ttl_ms", (int, type(None))),
)


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
#: What the child imports before the call, so that the call only unpickles the user's code;
#: one list for a recording and a function digest, so the spare child serves either.
CHILD_PRELOAD = (
    "pytest_opid.spark.function_digest",
    "pytest_opid.spark.processor_recording",
    "pyspark.cloudpickle",
    "pyspark.serializers",
    "pyspark.sql.streaming",
)


def init_timeout() -> float:
    """The time limit of one recording: ``PYTEST_OPID_INIT_TIMEOUT`` or :data:`INIT_TIMEOUT`."""
    return seconds_from_environment(TIMEOUT_VARIABLE, INIT_TIMEOUT)


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
    """Run ``processor.init`` with a recording handle in a Python process of its own
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
    return _recorded(name, "record_pickled", payload, limit)


def record_command(command: bytes, timeout: float | None = None) -> ProcessorRecord:
    """:func:`record_processor` of the stateful processor in the pickled function Spark keeps
    for a transformWithState operator (:func:`processor_from_command`), unpickled in the child
    too: unpickling runs the user's code, which never runs in the test process."""
    try:
        limit = init_timeout() if timeout is None else timeout
    except ValueError as exc:
        return ProcessorRecord("?", None, f"could not inspect the processor: {exc}")
    return _recorded("?", "record_command", bytes(command), limit)


def _recorded(name: str, function: str, payload: bytes, limit: float) -> ProcessorRecord:
    """The child's recording (``processor_recording.<function>(payload)``) as a record; the
    child names the processor's class where the test process could not (``name`` "?")."""
    failure: str | None
    try:
        answer = run_isolated(
            "pytest_opid.spark.processor_recording", function, payload, limit, CHILD_PRELOAD
        )
        if isinstance(answer, dict) and isinstance(answer.get("class"), str):
            name = answer["class"][:300] or name
        calls, failure = _calls_from(answer)
    except IsolatedFailure as exc:
        calls = None
        if exc.phase.startswith("init:"):
            name = exc.phase[len("init:") :][:300] or name
        if exc.phase == "init" or exc.phase.startswith("init:"):
            failure = f"its init() {exc.what}"
        elif exc.phase == "load":
            failure = f"loading it in a separate Python process {exc.what}"
        else:  # before the processor was sent: no process, or not this system
            failure = exc.what
    if failure is not None or calls is None:
        where = name if name != "?" else "the processor"
        return ProcessorRecord(name, None, f"could not inspect {where}: {failure}")
    return ProcessorRecord(name, calls)


def _calls_from(answer: Any) -> tuple[tuple[StateCall, ...] | None, str | None]:
    """The child's answer (plain JSON data, see
    :func:`~pytest_opid.spark.processor_recording.record_pickled`) as calls or why not."""
    if isinstance(answer, dict) and isinstance(answer.get("failure"), str):
        return None, answer["failure"][:300]
    rows = answer.get("calls") if isinstance(answer, dict) else None
    calls = []
    for row in rows if isinstance(rows, list) else [None]:
        if not isinstance(row, list) or len(row) != len(CALL_FIELDS):
            raise IsolatedFailure("init", "sent back something unreadable")
        for value, (_, kind) in zip(row, CALL_FIELDS, strict=True):
            if not isinstance(value, kind):
                raise IsolatedFailure("init", "sent back something unreadable")
        calls.append(StateCall(*row))
    return tuple(calls), None


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
    props = operator_properties(stores)
    if props is None:
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
