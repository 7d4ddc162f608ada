"""The user's code run in a Python process of its own, with a time limit.

pytest-opid learns a transformWithState processor's state variables by running its ``init``
(:mod:`.transform_with_state`). That is the user's code: it may delete files, call ``sys.exit``
or ``os._exit``, loop for ever, fork, start threads or change the interpreter it runs in. In the
test process an exit would end pytest and a loop would hang it, so it runs here instead, in a
child Python:
the test's own interpreter (``sys.executable``) with the test's ``sys.path``, working directory
and environment at the time of the call. The test process only reads back the result.

The child is a barrier for the test process, not a sandbox for the machine: what the code does
to files and services happens, as it does when Spark's own Python worker runs ``init`` at query
start. What cannot happen is the test process exiting, waiting past the time limit, or having
its modules, working directory, environment, signal handlers or threads changed. The child runs
in a session of its own and cannot be read through ``/proc`` by other processes of the user
(``PR_SET_DUMPABLE`` 0: a spare child's channel cannot be opened by the code of a call), and
dies with the test process (``PR_SET_PDEATHSIG``). Where Linux lets an unprivileged user make
namespaces (:func:`barrier` says ``namespaces``), the code runs as the second process of a PID
namespace of its own, behind a user and a mount namespace with a private ``/proc`` and no
capabilities left: it sees no process outside, so it cannot signal, trace or open the test
process, and every process it starts, ``setsid()`` or not, dies with the namespace when the
call ends. Elsewhere (``session``: namespaces refused, macOS, or ``PYTEST_OPID_ISOLATION=session``
in the environment) the child is a subreaper, and
every process under it is found and killed when the call ends; that it can still signal the
test process by its pid is what remains there. POSIX only (Linux, macOS): elsewhere the call
fails with one line, and the caller falls back as for any failed call.

One child serves one call. A fresh Python that imports PySpark takes about half a second, so
each call, once its own child is ready, starts a spare child for the next one: it imports the
modules the next call will need and waits, and the next call costs little more than unpickling
the user's code (figures: ``benchmarks/bench_isolation.py``). Behind a session only, the spare
starts after the call's processes are gone (the code could otherwise find the spare and write
to its channel before it is made undumpable).

The child talks to the parent on its original standard output, framed (a kind byte, a length,
the bytes); what the user's code prints goes to a file of the child's, and what it printed
during the call is copied to the test process's ``sys.stderr`` (at most 64 KiB), where pytest
captures it with the test.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from typing import IO, Any

from pytest_opid.io.json import nested_within
from pytest_opid.spark.child_barrier import BARRIER_VARIABLE, enter_barrier

__all__ = [
    "BARRIER_VARIABLE",
    "IsolatedFailure",
    "barrier",
    "descendants",
    "drop_spare",
    "phase",
    "run_isolated",
    "serve",
]

_HEADER = struct.Struct(">cQ")
_READY, _PHASE, _DONE = b"R", b"P", b"D"
#: How long a fresh child may take to import its modules before a call (a loaded CI machine).
_START_LIMIT = 120.0
#: The largest answer a child may send back (a recording is a few KiB).
_RESULT_LIMIT = 64 << 20
#: How much of what the user's code printed is copied to the test's stderr.
_OUTPUT_LIMIT = 64 << 10
#: How often a waiting parent looks whether the child is still alive.
_POLL = 0.25
#: The deepest answer read (a recording's state schemas nest a few levels).
_MAX_DEPTH = 200


class IsolatedFailure(Exception):
    """The call in the child did not return: ``what`` says how (``did not return within 30 s``,
    ``exited with code 3``, ``was killed by signal SIGKILL``, ``raised TypeError: ...``), and
    ``phase`` the last phase the child reported (:func:`phase`), ``""`` before any."""

    def __init__(self, phase: str, what: str) -> None:
        super().__init__(what)
        self.phase = phase
        self.what = what


class _Ended(Exception):
    """The child's end of the channel closed, or the child ended."""


class _Late(Exception):
    """The deadline passed."""


class _Child:
    """One child Python, started with ``preload`` imported, waiting for its one call."""

    def __init__(self, preload: tuple[str, ...]) -> None:
        self.preload = preload
        self.owner = os.getpid()
        self.barrier = ""  # what the child said it runs behind (:func:`barrier`)
        self.log: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - lives as the child
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        code = (
            f"import sys; sys.path.insert(0, {root!r}); "
            f"from pytest_opid.spark.isolation import serve; serve({preload!r}, {self.owner})"
        )
        self.process = subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            close_fds=True,
            start_new_session=True,
        )

    def alive(self) -> bool:
        return self.owner == os.getpid() and self.process.poll() is None

    def read_frame(self, deadline: float) -> tuple[bytes, bytes]:
        head = self._read(_HEADER.size, deadline)
        kind, size = _HEADER.unpack(head)
        if size > _RESULT_LIMIT:
            raise IsolatedFailure("", f"sent back {size} bytes (at most {_RESULT_LIMIT})")
        return kind, self._read(size, deadline)

    def _read(self, size: int, deadline: float) -> bytes:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        # poll(), not select(): a long test session may hold more than FD_SETSIZE (1024) files
        # and sockets (each streaming query's py4j callback connection), and select() refuses
        # a descriptor past it ("filedescriptor out of range in select()")
        waiting = select.poll()
        waiting.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        chunks: list[bytes] = []
        while size:
            left = deadline - time.monotonic()
            if left <= 0:
                raise _Late
            ready = waiting.poll(min(left, _POLL) * 1000)
            if not ready:
                # A process the code forked may hold the channel open after the child ended.
                if self.process.poll() is not None:
                    raise _Ended
                continue
            chunk = os.read(fd, size)
            if not chunk:
                raise _Ended
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)

    def output_size(self) -> int:
        return os.fstat(self.log.fileno()).st_size

    def output_since(self, start: int) -> str:
        self.log.seek(start)
        return self.log.read(_OUTPUT_LIMIT).decode("utf-8", "replace")

    def ending(self) -> str:
        """How the child ended (it has, or is about to: the channel closed)."""
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "closed its channel to pytest-opid"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = str(-code)
            return f"was killed by signal {name}"
        return f"exited with code {code}"

    def kill(self) -> None:
        """End the child and every process under it (its session, its PID namespace, and
        what it reaped as a subreaper), and reap the child."""
        if self.owner != os.getpid():
            return  # a forked copy of the test process: the child is its parent's
        under = _stop_descendants(self.process.pid)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        for pid in under:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout, self.log):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


def _parents() -> dict[int, int]:
    """Every visible process's parent (Linux's ``/proc``; empty elsewhere)."""
    parents: dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return parents
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                text = f.read(4096)
        except OSError:  # ended meanwhile
            continue
        fields = text[text.rfind(b")") + 2 :].split()
        if len(fields) > 1 and fields[1].isdigit():
            parents[int(name)] = int(fields[1])
    return parents


def descendants(pid: int) -> set[int]:
    """The processes under ``pid`` (Linux; an empty set elsewhere)."""
    children: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _stop_descendants(pid: int) -> set[int]:
    """Every process under ``pid``, stopped (``SIGSTOP``) until no new one appears, so that
    none forks away while they are killed."""
    stopped: set[int] = set()
    for _ in range(20):
        new = descendants(pid) - stopped
        if not new:
            break
        for child in new:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(child, signal.SIGSTOP)
        stopped |= new
    return stopped


_lock = threading.Lock()
_spare: _Child | None = None
_atexit_registered = False


def _take(preload: tuple[str, ...]) -> _Child:
    """The spare child if it is warm for ``preload``, else a new one."""
    global _spare, _atexit_registered
    with _lock:
        child, _spare = _spare, None
        if not _atexit_registered:
            atexit.register(drop_spare)
            _atexit_registered = True
    if child is not None and (child.preload != preload or not child.alive()):
        child.kill()
        child = None
    return child if child is not None else _Child(preload)


def _restock(preload: tuple[str, ...]) -> None:
    """Start the spare child for the next call (it imports its modules while this one runs)."""
    global _spare
    spare: _Child | None = _Child(preload)
    with _lock:
        if _spare is None:
            _spare, spare = spare, None
    if spare is not None:  # another thread restocked meanwhile
        spare.kill()


def drop_spare() -> None:
    """End the waiting spare child, if any (at exit; the next call starts a new one)."""
    global _spare
    with _lock:
        child, _spare = _spare, None
    if child is not None:
        child.kill()


def _result(body: bytes) -> tuple[str, Any]:
    """The child's answer, read as JSON, never unpickled: the user's code in the child can
    write to the channel too, and what it writes must not run code in the test process. Its
    nesting is measured before it is parsed: Python's parser recurses once per level, and an
    answer 100,000 arrays deep was a ``RecursionError`` in the test process."""
    if not nested_within(body, _MAX_DEPTH):
        raise IsolatedFailure("", f"sent back something nested more than {_MAX_DEPTH} deep")
    try:
        outcome, value = json.loads(body)
    except (ValueError, TypeError, RecursionError):
        raise IsolatedFailure("", "sent back something unreadable") from None
    if outcome not in ("returned", "exit", "raised"):
        raise IsolatedFailure("", "sent back something unreadable")
    return outcome, value


def run_isolated(
    module: str,
    function: str,
    argument: bytes,
    timeout: float,
    preload: tuple[str, ...] = (),
) -> Any:
    """``module.function(argument)`` run in a child Python (see the module's docstring): what
    it returned (sent back as JSON: plain data only), or :class:`IsolatedFailure` when the
    call did not return within ``timeout`` seconds, the child exited or was killed, or the
    function raised. ``preload``: modules the child imports before the call (not timed)."""
    if os.name != "posix":  # select() on pipes, sessions and killpg() are POSIX's
        raise IsolatedFailure("", "a separate Python process for it needs a POSIX system")
    try:
        child = _take(preload)
    except OSError as exc:
        raise IsolatedFailure("", f"could not start a Python process for it ({exc})") from None
    last_phase = ""
    try:
        try:
            kind, body = child.read_frame(time.monotonic() + _START_LIMIT)
            if kind != _READY:
                raise _Ended
        except (_Ended, _Late):
            raise IsolatedFailure("", "could not start a Python process for it") from None
        global _barrier
        child.barrier = _barrier = body.decode("ascii", "replace")[:20]
        if child.barrier == "namespaces":  # the spare is out of the code's sight
            with contextlib.suppress(OSError):  # no spare: the next call starts its own child
                _restock(preload)  # once this one is ready: the two do not import at once
        start = child.output_size()
        request = pickle.dumps(
            {
                "path": list(sys.path),
                "modules": _loaded_elsewhere(),
                "cwd": os.getcwd(),
                "env": dict(os.environ),
                "module": module,
                "function": function,
                "argument": argument,
            }
        )
        deadline = time.monotonic() + timeout
        try:
            assert child.process.stdin is not None
            child.process.stdin.write(_HEADER.pack(_DONE, len(request)) + request)
            child.process.stdin.close()
            while True:
                kind, body = child.read_frame(deadline)
                if kind == _PHASE:
                    last_phase = body.decode("utf-8", "replace")
                    continue
                outcome, value = _result(body)
                break
        except IsolatedFailure as exc:  # an unreadable answer: in the phase it came in
            raise IsolatedFailure(exc.phase or last_phase, exc.what) from None
        except _Late:
            raise IsolatedFailure(last_phase, f"did not return within {timeout:g} s") from None
        except (_Ended, BrokenPipeError):
            raise IsolatedFailure(last_phase, child.ending()) from None
        finally:
            printed = child.output_since(start)
            if printed:
                sys.stderr.write(printed)
        if outcome == "exit":
            raise IsolatedFailure(last_phase, f"exited with code {str(value)[:20]}")
        if outcome == "raised":
            raise IsolatedFailure(last_phase, f"raised {str(value)[:300]}")
        return value
    finally:
        child.kill()
        if child.barrier != "namespaces":
            # The code could reach a spare started while it ran (its pid is visible): the
            # spare starts once the code and every process it started are gone.
            with contextlib.suppress(OSError):
                _restock(preload)


def _loaded_elsewhere() -> dict[str, tuple[str | None, list[str] | None]]:
    """The test process's modules outside the installation (test modules, conftest files,
    the user's code), by file and package path: pytest imports a test module without putting
    its folder on ``sys.path``, and Spark's pickled functions name such modules. At most
    10,000."""
    installed = tuple(
        os.path.join(os.path.abspath(p), "") for p in {sys.prefix, sys.base_prefix} if p
    )
    found: dict[str, tuple[str | None, list[str] | None]] = {}
    for name, module in list(sys.modules.items()):
        if len(found) >= 10_000:
            break
        try:
            namespace = vars(module)
        except TypeError:
            continue
        file, path = namespace.get("__file__"), namespace.get("__path__")
        file = file if isinstance(file, str) and file.endswith(".py") else None
        try:  # a list, or a namespace package's _NamespacePath
            path = [p for p in path if isinstance(p, str)] if path is not None else None
        except TypeError:
            path = None
        if file is None and not path:
            continue
        where = file or (path or [""])[0]
        if not os.path.abspath(where).startswith(installed):
            found[name] = (file, path)
    for name in list(found):  # parents pytest made without a file (importlib mode): empty
        while "." in name:
            name = name.rpartition(".")[0]
            found.setdefault(name, (None, []))
    return found


class _Elsewhere:
    """In the child, after the usual finders: the test process's modules
    (:func:`_loaded_elsewhere`) from the files they were loaded from."""

    def __init__(self, modules: dict[str, tuple[str | None, list[str] | None]]) -> None:
        self.modules = modules

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        import importlib.machinery
        import importlib.util

        found = self.modules.get(name)
        if found is None:
            return None
        file, locations = found
        if file is None:  # a namespace package
            spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
            spec.submodule_search_locations = list(locations or ())
            return spec
        return importlib.util.spec_from_file_location(
            name, file, submodule_search_locations=locations
        )


_barrier = ""


def barrier() -> str:
    """What the last child ran behind: ``namespaces`` (its own PID, user and mount namespaces,
    see the module's docstring) or ``session`` (a session and a subreaper); ``""`` before any."""
    return _barrier


# -- the child's side -------------------------------------------------------------------------

_channel: IO[bytes] | None = None


def _send(kind: bytes, body: bytes = b"") -> None:
    if _channel is not None:
        _channel.write(_HEADER.pack(kind, len(body)) + body)
        _channel.flush()


def phase(name: str) -> None:
    """In a child: tell the parent which part of the call runs now (named in its failure
    message if the call does not return). Outside a child: nothing."""
    _send(_PHASE, name.encode("utf-8"))


def _read_exactly(stream: IO[bytes], size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = stream.read(size - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def serve(preload: tuple[str, ...], parent: int | None = None) -> None:
    """The child's main: behind its barrier
    (:func:`~pytest_opid.spark.child_barrier.enter_barrier`), import ``preload``, say ready,
    run the one call it is sent, send back its result and end (``os._exit``: threads the code
    started do not hold it)."""
    global _channel
    level = enter_barrier(os.getppid() if parent is None else parent)
    _channel = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # what the user's code prints goes to the child's log, not the channel
    for name in preload:
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    _send(_READY, level.encode("ascii"))
    stdin = sys.stdin.buffer
    try:
        _, size = _HEADER.unpack(_read_exactly(stdin, _HEADER.size))
        request = pickle.loads(_read_exactly(stdin, size))
    except (EOFError, struct.error):
        os._exit(0)  # the parent dropped this spare
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.path[:] = request["path"]
    sys.meta_path.append(_Elsewhere(request.get("modules") or {}))
    with contextlib.suppress(OSError):  # the test's folder gone meanwhile: the call says so
        os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    try:
        target = getattr(importlib.import_module(request["module"]), request["function"])
        result: tuple[str, Any] = ("returned", target(request["argument"]))
    except SystemExit as exc:
        code = exc.code
        result = ("exit", code if isinstance(code, int) else (0 if code is None else 1))
    except BaseException as exc:  # the user's code: reported, never re-raised
        result = ("raised", f"{type(exc).__name__}: {exc}"[:300])
    try:
        body = json.dumps(result).encode("utf-8")
    except (TypeError, ValueError) as exc:  # the function's result is not plain data
        body = json.dumps(("raised", f"a result that is not JSON ({exc})"[:300])).encode()
    _send(_DONE, body)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
