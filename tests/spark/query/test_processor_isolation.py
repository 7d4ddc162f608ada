"""A transformWithState processor's ``init`` is recorded in a Python process of its own
(spark.isolation): whatever a hostile or broken ``init`` does, the test process survives, is
not hung past the time limit, and its modules, working directory, environment, signal handlers
and threads are as they were; an exit, a crash or a hang is one line. What ``init`` does to
files happens (in the child), as it does when Spark's own worker runs ``init``."""

from __future__ import annotations

import os
import resource
import signal
import sys
import threading
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.sql.types import LongType, StructField, StructType

from pytest_opid.spark.transform_with_state import (
    INIT_TIMEOUT,
    StateCall,
    init_timeout,
    record_processor,
)

COUNT = StructType([StructField("c", LongType())])
NAME = "tests.spark.query.test_processor_isolation"
LATE = "its init() did not return within 1.5 s"


class Hostile:
    """A processor whose ``init`` does ``what`` (a name below) with ``arg``, then declares
    ``cnt``."""

    def __init__(self, what: str, arg: Any = None) -> None:
        self.what = what
        self.arg = arg

    def init(self, handle: Any) -> None:
        getattr(self, "_" + self.what)(self.arg)
        handle.getValueState("cnt", COUNT)

    def _nothing(self, arg: Any) -> None:
        pass

    def _os_exit(self, arg: Any) -> None:
        os._exit(arg)

    def _sys_exit(self, arg: Any) -> None:
        sys.exit(arg)

    def _loop(self, arg: Any) -> None:
        while True:
            pass

    def _sleep(self, arg: Any) -> None:
        time.sleep(3600)

    def _signal(self, arg: Any) -> None:
        os.kill(os.getpid(), arg)

    def _rename(self, arg: Any) -> None:
        os.rename(*arg)

    def _remove(self, arg: Any) -> None:
        os.remove(arg)

    def _meddle(self, arg: Any) -> None:
        """Everything a process can change about itself."""
        os.chdir("/")
        os.environ["OPID_MEDDLED"] = "1"
        sys.modules["json"] = None  # type: ignore[assignment]
        sys.path.insert(0, "/nowhere")
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        threading.Thread(target=time.sleep, args=(3600,), name="opid-meddler").start()

    def _fork_and_exit(self, arg: Any) -> None:
        """A forked process outlives init and holds the child's channel open; init then
        exits: the recording ends at once, and the forked process is killed with the child."""
        pid = os.fork()
        if pid == 0:
            time.sleep(3600)
            os._exit(0)
        os.mkdir(os.path.join(arg, str(pid)))  # the guard refuses open(), not mkdir()
        os._exit(7)

    def _fork(self, arg: Any) -> None:
        pid = os.fork()
        if pid == 0:
            time.sleep(3600)
            os._exit(0)
        os.mkdir(os.path.join(arg, str(pid)))

    def _forge(self, arg: Any) -> None:
        """Write a pickle to the channel back to pytest-opid, as a done answer: unpickled in
        the test process, it would make the directory ``arg`` there."""
        import pickle
        import struct

        from pytest_opid.spark import isolation

        class Evil:
            def __reduce__(self) -> Any:
                return (os.mkdir, (arg,))

        body = pickle.dumps(Evil())
        channel = isolation._channel
        assert channel is not None
        channel.write(struct.pack(">cQ", b"D", len(body)) + body)
        channel.flush()

    def _deep(self, arg: Any) -> None:
        """Answer for the child with JSON ``arg`` arrays deep, as a done frame."""
        import struct

        from pytest_opid.spark import isolation

        body = b"[" * arg + b"]" * arg
        channel = isolation._channel
        assert channel is not None
        channel.write(struct.pack(">cQ", b"D", len(body)) + body)
        channel.flush()

    def _print(self, arg: Any) -> None:
        print("hello from init")
        sys.stdout.flush()
        os.write(1, b"raw on fd 1\n")


def _state() -> dict[str, Any]:
    return {
        "modules": set(sys.modules),
        "json": sys.modules.get("json"),
        "path": list(sys.path),
        "cwd": os.getcwd(),
        "env": {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"},
        "signals": {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)},
        "threads": {t.name for t in threading.enumerate()},
    }


@pytest.fixture
def untouched() -> Iterator[None]:
    """The test process's own state is the same after the recording."""
    before = _state()
    yield
    after = _state()
    assert after == before


def _declared(record: Any) -> None:
    assert record.reason is None, record.reason
    assert record.calls == (StateCall("getValueState", "cnt", COUNT.json(), True),)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (killed, not yet reaped by its parent) counts as gone
    stat = Path(f"/proc/{pid}/stat")
    return not stat.exists() or stat.read_text().split(")")[-1].split()[0] != "Z"


def test_a_well_behaved_init_is_recorded_as_before(untouched: None) -> None:
    record = record_processor(Hostile("nothing"))
    assert record.processor_class == f"{NAME}.Hostile"
    _declared(record)


def test_a_recording_works_with_more_files_open_than_select_takes(untouched: None) -> None:
    # a long session holds many sockets (a py4j connection per streaming query's callback
    # thread): select() refused descriptors past FD_SETSIZE (1024) in the demonstration corpus
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 1200
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))
    opened = []
    try:
        while len(opened) < wanted - 100:
            opened.append(os.open(os.devnull, os.O_RDONLY))
        assert max(opened) > 1024
        record = record_processor(Hostile("nothing"))
    finally:
        for fd in opened:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    _declared(record)


@pytest.mark.parametrize(
    ("what", "arg", "line"),
    [
        ("os_exit", 3, "its init() exited with code 3"),
        ("sys_exit", 4, "its init() exited with code 4"),
        ("sys_exit", None, "its init() exited with code 0"),
        ("sys_exit", "bye", "its init() exited with code 1"),
        ("signal", signal.SIGSEGV, "its init() was killed by signal SIGSEGV"),
    ],
)
def test_an_init_that_exits_is_one_line(what: str, arg: Any, line: str, untouched: None) -> None:
    record = record_processor(Hostile(what, arg))
    assert record.calls is None
    assert record.reason == f"could not inspect {NAME}.Hostile: {line}"


@pytest.mark.parametrize("what", ["loop", "sleep"])
def test_an_init_that_does_not_return_is_one_line_after_the_limit(
    what: str, untouched: None
) -> None:
    start = time.monotonic()
    record = record_processor(Hostile(what), timeout=1.5)
    took = time.monotonic() - start
    assert record.calls is None
    assert (
        record.reason == f"could not inspect {NAME}.Hostile: its init() did not return within 1.5 s"
    )
    assert 1.5 <= took < 10, took


def test_an_init_that_changes_its_process_leaves_the_test_process_as_it_was(
    untouched: None,
) -> None:
    _declared(record_processor(Hostile("meddle")))


def test_an_init_that_renames_or_removes_files_does_so_in_the_child(
    tmp_path: Path, untouched: None
) -> None:
    """Spark's worker runs init at query start and its side effects happen there too: the
    child is a barrier for the test process, not a sandbox for the machine (the audit hook
    notices opened files, not renames and removals)."""
    (tmp_path / "a").write_text("x")
    _declared(record_processor(Hostile("rename", (str(tmp_path / "a"), str(tmp_path / "b")))))
    assert (tmp_path / "b").read_text() == "x"
    sentinel = tmp_path / "sentinel"
    sentinel.write_text("x")
    _declared(record_processor(Hostile("remove", str(sentinel))))
    assert not sentinel.exists()


def test_a_process_forked_by_init_is_killed_with_the_child(tmp_path: Path, untouched: None) -> None:
    """(By the test process's descendants: the pid init saw is its namespace's, if it has
    one.)"""
    from pytest_opid.spark.isolation import descendants, drop_spare

    drop_spare()
    before = descendants(os.getpid())
    _declared(record_processor(Hostile("fork", str(tmp_path))))
    assert len(list(tmp_path.iterdir())) == 1
    assert _left_behind(before) == set()


def test_an_init_that_forks_then_exits_ends_the_recording_at_once(
    tmp_path: Path, untouched: None
) -> None:
    from pytest_opid.spark.isolation import descendants, drop_spare

    drop_spare()
    before = descendants(os.getpid())
    start = time.monotonic()
    record = record_processor(Hostile("fork_and_exit", str(tmp_path)), timeout=20)
    assert time.monotonic() - start < 10
    assert record.reason == f"could not inspect {NAME}.Hostile: its init() exited with code 7"
    assert len(list(tmp_path.iterdir())) == 1
    assert _left_behind(before) == set()


def test_an_init_that_forges_the_answer_runs_no_code_in_the_test_process(
    tmp_path: Path, untouched: None
) -> None:
    target = tmp_path / "made by a forged answer"
    record = record_processor(Hostile("forge", str(target)))
    assert (
        record.reason
        == f"could not inspect {NAME}.Hostile: its init() sent back something unreadable"
    )
    assert not target.exists()


def test_an_answer_nested_too_deeply_is_one_line(untouched: None) -> None:
    """Issue 48, item 5: an answer 100,000 arrays deep was a RecursionError in the test
    process (Python's JSON parser recurses per level); its depth is now measured first."""
    record = record_processor(Hostile("deep", 100_000))
    assert record.reason == (
        f"could not inspect {NAME}.Hostile: its init() sent back something nested more than "
        "200 deep"
    )


def test_what_init_prints_reaches_the_tests_stderr_not_the_recording(
    capfd: pytest.CaptureFixture[str],
) -> None:
    _declared(record_processor(Hostile("print")))
    err = capfd.readouterr().err
    assert "hello from init" in err
    assert "raw on fd 1" in err


def test_a_processor_from_a_module_a_fresh_python_cannot_import_is_recorded(
    untouched: None,
) -> None:
    """A class of a module not on ``sys.path`` (pytest's ``importlib`` import mode) is
    shipped by value, as ``cloudpickle.register_pickle_by_value`` does."""
    module = types.ModuleType("opid_not_on_path")
    exec(
        "class OffPath:\n"
        "    def init(self, handle):\n"
        "        handle.getValueState('cnt', 'c LONG')\n",
        module.__dict__,
    )
    sys.modules["opid_not_on_path"] = module
    try:
        record = record_processor(module.OffPath())
    finally:
        del sys.modules["opid_not_on_path"]
    assert record.processor_class == "opid_not_on_path.OffPath"
    assert record.calls == (StateCall("getValueState", "cnt", "c LONG", False),)


def _explode() -> None:
    raise RuntimeError("this processor cannot be loaded here")


class Unloadable:
    def init(self, handle: Any) -> None:
        handle.getValueState("cnt", COUNT)

    def __reduce__(self) -> Any:
        return (_explode, ())


def test_a_processor_that_cannot_be_loaded_in_the_child_is_one_line(untouched: None) -> None:
    record = record_processor(Unloadable())
    assert record.reason == (
        f"could not inspect {NAME}.Unloadable: loading it in a separate Python process raised "
        "RuntimeError: this processor cannot be loaded here"
    )


def test_the_time_limit_is_30_s_unless_the_variable_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_OPID_INIT_TIMEOUT", raising=False)
    assert init_timeout() == INIT_TIMEOUT == 30
    monkeypatch.setenv("PYTEST_OPID_INIT_TIMEOUT", "2.5")
    assert init_timeout() == 2.5
    monkeypatch.setenv("PYTEST_OPID_INIT_TIMEOUT", "1.5")
    record = record_processor(Hostile("sleep"))
    assert (
        record.reason == f"could not inspect {NAME}.Hostile: its init() did not return within 1.5 s"
    )
    for bad in ("soon", "-1", "nan", "inf", "0"):
        monkeypatch.setenv("PYTEST_OPID_INIT_TIMEOUT", bad)
        record = record_processor(Hostile("nothing"))
        assert record.reason == (
            f"could not inspect {NAME}.Hostile: PYTEST_OPID_INIT_TIMEOUT={bad!r} "
            "is not a number of seconds (0 < s < 86400)"
        )


def test_off_posix_the_recording_is_one_line_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Sessions, killpg() and select() on pipes are POSIX's: elsewhere the recording says so
    (and the JVM reader falls back to Spark's own pre-init worker)."""
    monkeypatch.setattr(os, "name", "nt")
    record = record_processor(Hostile("nothing"))
    monkeypatch.undo()
    assert record.reason == (
        f"could not inspect {NAME}.Hostile: a separate Python process for it needs a POSIX system"
    )


def test_a_python_that_cannot_start_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_opid.spark import isolation

    isolation.drop_spare()
    monkeypatch.setattr(sys, "executable", "/nonexistent/python3")
    record = record_processor(Hostile("nothing"))
    monkeypatch.undo()
    assert record.reason is not None
    assert record.reason.startswith(
        f"could not inspect {NAME}.Hostile: could not start a Python process for it ("
    ), record.reason


# -- issue 42: a child that cannot reach the test process; nothing left behind ----------------


class Reaching(Hostile):
    """``init`` bodies that reach past the child, with the audit guard switched off first
    (as hostile code can): what they found is declared as state names."""

    def init(self, handle: Any) -> None:
        from pytest_opid.spark import processor_recording

        processor_recording._recording.set(None)  # the guard's view off
        for name in getattr(self, "_" + self.what)(self.arg):
            handle.getValueState(name, COUNT)

    def _signal_test_process(self, arg: Any) -> list[str]:
        """Signal 0 to the test process (existence and permission: nothing is delivered)."""
        try:
            os.kill(arg, 0)
            reached = "reached"
        except ProcessLookupError:
            reached = "unseen"
        except PermissionError:
            reached = "refused"
        return [f"kill {reached}", f"parent {'test' if os.getppid() == arg else 'other'}"]

    def _open_the_spare(self, arg: Any) -> list[str]:
        """The channel of every other child of the test process it can find (the spare
        waiting for the next test's recording): opened for writing, one would forge it."""
        from pytest_opid.spark.isolation import descendants

        mine = {os.getpid(), os.getppid()}
        opened = seen = 0
        for pid in descendants(arg) - mine:
            try:  # an isolation child (the test's JVM and its workers are another matter)
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if b"isolation import serve" not in f.read():
                        continue
            except OSError:
                continue
            seen += 1
            try:
                fds = os.listdir(f"/proc/{pid}/fd")
            except OSError:
                continue
            for fd in fds:
                try:
                    os.close(os.open(f"/proc/{pid}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK))
                    opened += 1
                except OSError:
                    continue
        return [f"seen {seen}", f"opened {opened}"]

    def _escape(self, arg: Any) -> list[str]:
        """A grandchild in a session of its own (``setsid``), left sleeping."""
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(3600)
            os._exit(0)
        time.sleep(0.5)
        return ["escaped"]


def _left_behind(before: set[int]) -> set[int]:
    """The test process's descendants that were not there ``before`` (the spare dropped)."""
    from pytest_opid.spark.isolation import descendants, drop_spare

    drop_spare()
    deadline = time.monotonic() + 5
    while True:
        left = {p for p in descendants(os.getpid()) - before if _alive(p)}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


@pytest.fixture(params=["as available", "session", "refused"])
def barrier_asked(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each test with the barrier the platform offers, with a session only (what other
    platforms get), and with namespaces refused as the child tries them (an AppArmor policy):
    ``PYTEST_OPID_ISOLATION``, read by a child as it starts."""
    from pytest_opid.spark.isolation import BARRIER_VARIABLE, drop_spare

    drop_spare()
    before = os.environ.get(BARRIER_VARIABLE)
    if request.param != "as available":
        os.environ[BARRIER_VARIABLE] = request.param
    else:
        os.environ.pop(BARRIER_VARIABLE, None)
    try:
        yield request.param
    finally:
        drop_spare()
        os.environ.pop(BARRIER_VARIABLE, None)
        if before is not None:
            os.environ[BARRIER_VARIABLE] = before


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
def test_no_process_is_left_after_a_recording(barrier_asked: str) -> None:
    """Listed before and after: a setsid() grandchild dies with the recording."""
    from pytest_opid.spark.isolation import barrier, descendants

    before = descendants(os.getpid())
    record = record_processor(Reaching("escape"))
    assert record.calls == (StateCall("getValueState", "escaped", COUNT.json(), True),)
    assert _left_behind(before) == set()
    if barrier_asked != "as available":
        assert barrier() == "session"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl and /proc are Linux's")
def test_the_child_cannot_reach_the_test_process_nor_the_spare(barrier_asked: str) -> None:
    """Behind namespaces the test process is not there for the child (no pid to signal, its
    parent is the namespace's first process); behind a session only, it is (what remains
    there, documented, as do the test's JVM and Spark's workers). Either way no channel of
    another isolation child (the spare) opens: out of sight, undumpable, or not started yet."""
    from pytest_opid.spark.isolation import barrier

    record = record_processor(Reaching("signal_test_process", os.getpid()))
    assert record.calls is not None, record.reason
    names = [call.name for call in record.calls]
    if barrier() == "namespaces":
        assert names == ["kill unseen", "parent other"]
    else:
        assert barrier() in ("session", "pid namespace")
        assert names == ["kill reached", "parent test"]
    spare = record_processor(Reaching("open_the_spare", os.getpid()))
    assert spare.calls is not None, spare.reason
    # behind namespaces the spare runs, out of sight; behind a session it starts after the call
    assert [call.name for call in spare.calls] == ["seen 0", "opened 0"]


def _looping_processor(config: str) -> Any:
    """A processor (a local class: pickled by value) whose init() reads a file, which the
    recording refuses, then never returns: as Spark's pre-init worker would run it."""
    from pyspark.sql.streaming import StatefulProcessor

    class LoopsInSparksWorker(StatefulProcessor):  # type: ignore[misc]
        def init(self, handle: Any) -> None:
            with open(config) as f:
                f.read()
            while True:
                time.sleep(0.01)

        def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:
            yield from ()

    return LoopsInSparksWorker()


def _looping_frame(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A query whose processor loops in Spark's pre-init worker. The worker is this Python
    (``pythonExec``, which Spark reads when the query is built): the ``python3`` on the PATH
    may lack protobuf, and its worker then fails at once instead of running init()."""
    monkeypatch.setattr(spark.sparkContext, "pythonExec", sys.executable)
    config = tmp_path / "state.txt"
    config.write_text("cnt")
    (tmp_path / "in").mkdir()
    return (
        spark.readStream.schema("user LONG, ts TIMESTAMP")
        .json(str(tmp_path / "in"))
        .groupBy("user")
        .transformWithStateInPandas(
            statefulProcessor=_looping_processor(str(config)),
            outputStructType="user LONG",
            outputMode="Update",
            timeMode="None",
        )
    )


@pytest.mark.spark_line("4.3", reason="one line suffices: Spark's runner, not ours, differs")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
def test_sparks_pre_init_worker_runs_under_the_same_limit_and_is_killed(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One time limit over the whole recording: the child refuses init() (it opens a file),
    Spark's own pre-init worker then runs it for what is left of the limit and is killed with
    every process the JVM started for it; the fingerprint says so, nothing is left."""
    import pytest_opid
    from pytest_opid.spark.isolation import descendants, drop_spare

    monkeypatch.setenv("PYTEST_OPID_INIT_TIMEOUT", "4")
    frame = _looping_frame(spark, tmp_path, monkeypatch)
    drop_spare()
    before = descendants(os.getpid())
    fp = pytest_opid.fingerprint(frame)
    (state,) = fp.state_operators or ()
    reason = dict(state.meaning)["could not inspect"]
    assert f"its init() opens the file '{tmp_path / 'state.txt'}'" in reason
    assert "Spark's pre-init Python worker failed too (did not return within 4 s; killed)" in reason
    assert _left_behind(before) == set()


@pytest.mark.spark_line("4.3", reason="one line suffices: Spark's runner, not ours, differs")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
def test_a_pre_init_worker_the_jvm_starts_after_the_limit_is_killed_too(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 48, item 6, the cause of the test above failing 2 of 8 runs under load: the
    child's recording took most of the limit, the time left ended before the JVM had started
    its worker, the one sweep of the JVM's new processes found none, and the worker started
    after it ran init() for ever (the runner waited 30 s more, the worker was left behind).
    No time left at all makes that order certain."""
    import pytest_opid
    from pytest_opid.spark.isolation import descendants, drop_spare
    from pytest_opid.spark.query import processor_handle

    pre_init = processor_handle._bounded_pre_init

    def no_time_left(gateway: Any, node: Any, seconds: float, limit: float) -> None:
        pre_init(gateway, node, 0.0, limit)

    monkeypatch.setattr(processor_handle, "_bounded_pre_init", no_time_left)
    monkeypatch.setenv("PYTEST_OPID_INIT_TIMEOUT", "4")
    frame = _looping_frame(spark, tmp_path, monkeypatch)
    drop_spare()
    before = descendants(os.getpid())
    fp = pytest_opid.fingerprint(frame)
    (state,) = fp.state_operators or ()
    reason = dict(state.meaning)["could not inspect"]
    assert "Spark's pre-init Python worker failed too (did not return within 4 s; killed)" in reason
    assert _left_behind(before) == set()
