"""What keeps a child's code from the test process, set up in the child before anything of
the user's (:mod:`.isolation` runs the child): a PID, user and mount namespace of its own with a
private ``/proc`` and no capabilities where Linux lets an unprivileged user make them, else a
session and a subreaper; on every system, undumpable and killed with its parent.

The Linux calls (``prctl(2)``, ``unshare(2)``, ``mount(2)``, ``capset(2)``) go through ctypes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import struct
import sys
from typing import Any

__all__ = ["BARRIER_VARIABLE", "enter_barrier"]

#: ``session`` here keeps children out of namespaces (where they misbehave on a platform);
#: ``refused`` makes them as a system that refuses namespaces would (tests).
BARRIER_VARIABLE = "PYTEST_OPID_ISOLATION"

_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP = 24
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_NO_NEW_PRIVS = 38
_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 2, 4, 8, 0x4000, 0x40000
_STATUS = struct.Struct(">i")


def _libc() -> Any:
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _checked(result: int) -> None:
    import ctypes

    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error))


def _to_devnull(*fds: int) -> None:
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in fds:
        os.dup2(devnull, fd)
    os.close(devnull)


def enter_barrier(parent: int) -> str:
    """In a new child, before anything of the user's: what keeps its code from the test
    process (see the module's docstring). Returns in the process that serves the call.

    The namespaces are made by a forked process, never this one: where the system refuses a
    part of them (an AppArmor policy that leaves a new user namespace without capabilities),
    that process ends and this one serves the call behind its session, as it was."""
    if not sys.platform.startswith("linux"):
        return "session"
    libc = _libc()
    libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)  # no /proc/<pid>/fd, mem or environ for others
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the test process ended before the line above
        os._exit(1)
    if os.environ.get(BARRIER_VARIABLE, "") != "session":
        level = _namespaces(libc)
        if level:
            return level
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    return "session"


def _namespaces(libc: Any) -> str:
    """The call served behind new namespaces (returns their level in the serving process;
    this process then waits and ends as it ended), or ``""`` where they cannot be made."""
    uid, gid = os.getuid(), os.getgid()
    ready_read, ready_write = os.pipe()
    status_read, status_write = os.pipe()
    maker = os.fork()
    if maker:
        os.close(ready_write)
        os.close(status_write)
        said = os.read(ready_read, 1)
        os.close(ready_read)
        if said not in (b"N", b"P"):  # refused: this process serves, as it was
            os.waitpid(maker, 0)
            os.close(status_read)
            return ""
        _to_devnull(0, 1)  # outside: wait, then end as the namespace's worker ended
        os.waitpid(maker, 0)
        data = os.read(status_read, _STATUS.size)
        _mirror(_STATUS.unpack(data)[0] if len(data) == _STATUS.size else 1 << 8)
    os.close(ready_read)
    os.close(status_read)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    try:
        if os.environ.get(BARRIER_VARIABLE, "") == "refused":  # as a system that refuses them
            raise OSError("namespaces refused")
        _checked(libc.unshare(_CLONE_NEWUSER | _CLONE_NEWPID | _CLONE_NEWNS))
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1")):
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
        with open("/proc/self/gid_map", "w") as f:
            f.write(f"{gid} {gid} 1")
        init = os.fork()  # the first process of the new PID namespace
    except OSError:
        os.write(ready_write, b"-")
        os._exit(0)
    if init:  # the maker: waits, so that the namespace dies with it (PR_SET_PDEATHSIG)
        _to_devnull(0, 1)
        os.close(ready_write)
        os.waitpid(init, 0)
        os._exit(0)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    level = "namespaces"
    try:
        _checked(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None))
        flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
        _checked(libc.mount(b"proc", b"/proc", b"proc", flags, None))
    except OSError:
        level = "pid namespace"  # /proc still shows the processes outside
    try:
        worker = os.fork()
    except OSError:
        os.write(ready_write, b"-")
        os._exit(0)
    if worker == 0:
        os.close(status_write)
        os.close(ready_write)
        _drop_capabilities(libc)
        return level
    os.write(ready_write, b"N" if level == "namespaces" else b"P")
    os.close(ready_write)
    _to_devnull(0, 1)
    while True:  # the namespace's first process: reaps; its end ends every process in it
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(1)
        if pid == worker:
            os.write(status_write, _STATUS.pack(status))
            os._exit(0)


def _mirror(status: int) -> None:
    """End as a process whose wait status was ``status`` ended (an exit code, or a signal)."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        with contextlib.suppress(OSError, ValueError):  # SIGKILL and SIGSTOP keep theirs
            signal.signal(number, signal.SIG_DFL)
        with contextlib.suppress(OSError):
            os.kill(os.getpid(), number)
        os._exit(128 + number)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def _drop_capabilities(libc: Any) -> None:
    """No capability left in the user namespace (so the private ``/proc`` cannot be unmounted
    to show the processes outside), and none to be gained by running a program."""
    import ctypes

    for number in range(64):
        libc.prctl(_PR_CAPBSET_DROP, number, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()
    libc.capget(header, data)
    data = (ctypes.c_uint32 * 6)()
    libc.capset(header, data)
    libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
