"""Declaring a Python transformWithState's state variables on the operator's driver-side handle,
without running the query: its processor's ``init`` recorded in a child process and replayed
through py4j, or Spark's own pre-init worker where it cannot be recorded. Spark builds the
operator's column families from these declarations, so they are what its state schema holds."""

from __future__ import annotations

import re
import threading
import time
from typing import Any

from pytest_opid.spark.query.gateway import (
    Gateway,
    command_bytes,
    find_java_class,
    is_java_class,
)
from pytest_opid.spark.transform_with_state import (
    ProcessorRecord,
    StateCall,
    init_timeout,
    record_command,
)

_TWS_PACKAGE = "org.apache.spark.sql.execution.streaming.operators.stateful.transformwithstate"
#: Spark 4.0 keeps transformWithState's driver-side classes in execution.streaming; 4.1 moved
#: them under operators.stateful.transformwithstate (the handle states under .statefulprocessor).
_TWS_PACKAGES = {
    "TransformWithStateOperatorProperties": (
        _TWS_PACKAGE,
        "org.apache.spark.sql.execution.streaming",
    ),
    "StatefulProcessorHandleState$": (
        _TWS_PACKAGE + ".statefulprocessor",
        "org.apache.spark.sql.execution.streaming",
    ),
}
_PYTHON_STREAMING = "org.apache.spark.sql.execution.python.streaming"


class NotInspected(Exception):
    """A Python transformWithState whose state variables could not be declared."""

    def __init__(self, record: ProcessorRecord) -> None:
        super().__init__(record.reason)
        self.record = record


_PYTHON_ERROR = re.compile(r"(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception): .*")


def _python_error(exc: Exception) -> str:
    """The last line of a Python worker's error as py4j relays it, else the exception's name."""
    for line in reversed(str(exc).splitlines()):
        found = _PYTHON_ERROR.match(line.strip())
        if found:
            return found.group(0)[:200]
    return type(exc).__name__


def declare(gateway: Gateway, node: Any) -> ProcessorRecord:
    """Declare a Python transformWithState's state variables on the operator's driver-side
    handle, as Spark's pre-init runner does before it validates the state schema: the
    processor's ``init`` runs with a recording handle, in a Python process of its own
    (:func:`pytest_opid.spark.transform_with_state.record_command`: Spark's pickled function
    is unpickled there too), and its calls are replayed on the JVM handle (:func:`_replay`).
    When ``init`` cannot be recorded, Spark's own pre-init worker (a Python process) runs it
    instead, within what is left of the same time limit (:func:`_bounded_pre_init`: killed
    with every process it started when the limit passes); an ``init`` that did not return in
    the child is not run again. When that fails too, :class:`NotInspected` carries why."""
    limit = init_timeout()
    deadline = time.monotonic() + limit
    try:
        function = gateway.call_private(node, "pythonFunction")
        command = command_bytes(gateway.jvm, function)
    except Exception as exc:  # py4j: a processor pytest-opid cannot reach
        record = ProcessorRecord(
            "?", None, f"could not read the stateful processor ({type(exc).__name__})"
        )
    else:
        record = record_command(command, limit)
    if record.calls is not None:
        try:
            _replay(gateway, node, record.calls)
            return record
        except Exception as exc:  # py4j: Spark refused a declaration
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            reason = f"could not inspect {record.processor_class}: Spark refused its init(): "
            record = ProcessorRecord(record.processor_class, None, reason + first)
    left = deadline - time.monotonic()
    if "did not return within" in (record.reason or "") or left <= 0:
        raise NotInspected(record)  # the same init() would not return in Spark's worker either
    try:
        _bounded_pre_init(gateway, node, left, limit)
    except Exception as exc:  # py4j: the worker's Python lacks pyspark, or init() failed
        worker = str(exc) if isinstance(exc, _Late) else _python_error(exc)
        raise NotInspected(
            ProcessorRecord(
                record.processor_class,
                None,
                f"{record.reason}; Spark's pre-init Python worker failed too ({worker})",
            )
        ) from None
    return ProcessorRecord(record.processor_class, None)  # declared by Spark's worker


#: How often the processes the JVM started for a late pre-init worker are killed, until its
#: runner returns; and when to stop waiting for a runner that never does.
_SWEEP = 0.1
_GIVE_UP = 60.0


class _Late(Exception):
    """Spark's pre-init worker did not return within the time left."""


def _bounded_pre_init(gateway: Gateway, node: Any, seconds: float, limit: float) -> None:
    """:func:`_pre_init` within ``seconds``: it runs in a thread of this process while the JVM
    starts Spark's Python worker; past the time, every process the JVM started meanwhile (the
    worker, and what it started) is killed, which ends the runner's wait with an error."""
    jvm = gateway.jvm
    this_jvm = jvm.java.lang.ProcessHandle.current()
    before = {int(p.pid()) for p in this_jvm.descendants().toArray()}
    failure: list[BaseException] = []

    def run() -> None:
        try:
            _pre_init(gateway, node)
        except BaseException as exc:  # reported to the caller below
            failure.append(exc)

    worker = threading.Thread(target=run, name="opid-pre-init", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        # The time left can end before the JVM has started the worker (a loaded machine: the
        # child's recording took most of the limit): a process started after one sweep would
        # run init() for ever. Every new process is killed until the runner gives up.
        ends = time.monotonic() + _GIVE_UP
        while worker.is_alive() and time.monotonic() < ends:
            for handle in this_jvm.descendants().toArray():
                if int(handle.pid()) not in before:
                    handle.destroyForcibly()
            worker.join(_SWEEP)
        raise _Late(f"did not return within {limit:g} s; killed")
    if failure:
        raise failure[0]


def _replay(gateway: Gateway, node: Any, calls: tuple[StateCall, ...]) -> None:
    """``init``'s calls on the operator's ``DriverStatefulProcessorHandleImpl``, as
    ``TransformWithStateInPySparkStateServer`` makes them for the pre-init worker."""
    jvm = gateway.jvm
    handle = gateway.call_private(node, "driverProcessorHandle")
    states = getattr(tws_class(jvm, "StatefulProcessorHandleState$"), "MODULE$")
    handle.setHandleState(states.PRE_INIT())
    ttl_config = jvm.org.apache.spark.sql.streaming.TTLConfig
    row = jvm.org.apache.spark.sql.Encoders.row
    for call in calls:
        if call.method == "deleteIfExists":
            handle.deleteIfExists(call.name)
            continue
        if call.ttl_ms is None:
            ttl = ttl_config.NONE()
        else:
            ttl = ttl_config(jvm.java.time.Duration.ofMillis(call.ttl_ms))
        value = row(_struct(gateway, call.schema, call.schema_is_json))
        if call.method == "getValueState":
            handle.getValueState(call.name, value, ttl)
        elif call.method == "getListState":
            handle.getListState(call.name, value, ttl)
        else:
            key = row(_struct(gateway, call.user_key_schema, call.user_key_is_json))
            handle.getMapState(call.name, key, value, ttl)


def _struct(gateway: Gateway, text: str | None, is_json: bool) -> Any:
    """A schema as the state server reads it: ``StructType`` JSON, or a DDL string parsed
    by ``CatalystSqlParser.parseTableSchema`` (what PySpark's client asks it for)."""
    if is_json:
        return gateway.jvm.org.apache.spark.sql.types.DataType.fromJson(text)
    parser = getattr(gateway.jvm.org.apache.spark.sql.catalyst.parser, "CatalystSqlParser$")
    return getattr(parser, "MODULE$").parseTableSchema(text)


def _pre_init(gateway: Gateway, node: Any) -> None:
    """Run the Python stateful processor's ``init()`` on the driver as Spark does before
    it validates the state schema (``TransformWithStateInPySparkExec``): it fills the
    operator's driver-side handle with the state variables, and writes nothing."""
    worker = "pyspark.sql.streaming.transform_with_state_driver_worker"
    function = gateway.call_private(node, "pythonFunction")
    key = gateway.call_private(node, "groupingKeySchema")
    handle = gateway.call_private(node, "driverProcessorHandle")
    if not is_java_class(gateway.jvm, f"{_PYTHON_STREAMING}.TransformWithStateInPySparkExec"):
        # Spark 4.0: TransformWithStateInPandasExec runs its runner (which also takes the
        # session time zone) inline, init() then process(), and stops it
        runner = find_java_class(
            gateway.jvm, _PYTHON_STREAMING, "TransformWithStateInPandasPythonPreInitRunner"
        )(function, worker, gateway.call_private(node, "sessionLocalTimeZone"), key, handle)
        try:
            runner.init()
            runner.process()
        finally:
            runner.stop()
        return
    runner_class = find_java_class(
        gateway.jvm, _PYTHON_STREAMING, "TransformWithStateInPySparkPythonPreInitRunner"
    )
    runner = runner_class(function, worker, key, handle)
    module = getattr(
        gateway.jvm.org.apache.spark.sql.execution.python.streaming,
        "TransformWithStateInPySparkExec$",
    )
    getattr(module, "MODULE$").runPreInitRunner(runner)


def tws_class(jvm: Any, name: str) -> Any:
    """A transformWithState class where the running Spark line keeps it (:data:`_TWS_PACKAGES`)."""
    packages = _TWS_PACKAGES[name]
    for package in packages:
        if is_java_class(jvm, f"{package}.{name}"):
            return find_java_class(jvm, package, name)
    return find_java_class(jvm, packages[0], name)
