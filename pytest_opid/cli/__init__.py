"""The ``opid`` command: fingerprints and comparisons of topologies from the shell.

``opid fingerprint FILE`` prints the operator IDs and chains of a topology document, an
execution plan, a saved fingerprint or an ``.opid`` snapshot (``-`` reads stdin); ``opid diff
OLD NEW`` compares two of them and exits by the verdict the pytest plugin would give;
``opid check-restore PREVIOUS PROGRAM`` asks whether the engine would restore PROGRAM from a
savepoint, checkpoint or snapshot; ``opid savepoint`` and ``opid checkpoint`` print what a
Flink savepoint or a Spark checkpoint holds. Bad input
never shows a traceback: one line ``error: ...`` on stderr naming the file and the place at
fault, exit status 2 and nothing on stdout, so scripts can rely on the output being complete or
absent. Output is always valid UTF-8, and a reader that goes away (``| head``) ends it quietly.

This module runs the command: it parses the line (:mod:`.arguments`), hands it to the
subcommand (:mod:`.commands`), writes the output and turns any failure into that one line.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from pytest_opid import __version__
from pytest_opid.cli.arguments import UsageError, check_paths, parse_command_line
from pytest_opid.cli.commands import (
    EXIT_ERROR,
    EXIT_OK,
    JsonOutput,
    check_restore_command,
    checkpoint_command,
    diff_command,
    fingerprint_command,
    pin_command,
    record_deploy_command,
    render_command,
    savepoint_command,
)
from pytest_opid.cli.demonstrate import demonstrate_command
from pytest_opid.cli.termination import Terminated, terminated_as_interrupt
from pytest_opid.errors import OpidError
from pytest_opid.gc_pause import gc_paused
from pytest_opid.io.storage import counting
from pytest_opid.text import safe_text

__all__ = ["main"]

#: Longest error line printed; longer messages are cut (they never echo whole inputs).
_MAX_ERROR = 300


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``opid`` with ``argv`` (default: the process's arguments); return the exit status."""
    # one command's objects live until it ends: nothing for the collector; a CI timeout's
    # SIGTERM unwinds the command as Ctrl-C does (its temporary folders are removed)
    with gc_paused(), terminated_as_interrupt():
        try:
            args = parse_command_line(__version__, list(sys.argv[1:] if argv is None else argv))
            check_paths(args)
            with counting() as read:
                code, output = _COMMANDS[args.command](args)
        except SystemExit as exc:  # --help and --version
            return exc.code if isinstance(exc.code, int) else EXIT_OK
        except UsageError as exc:
            return _fail(str(exc))
        except (OpidError, OSError, TypeError, ValueError, RecursionError) as exc:
            return _fail(_one_line(exc))
        except Terminated:
            return _fail("terminated (SIGTERM)")
        except KeyboardInterrupt:  # Ctrl-C: one line, no traceback
            return _fail("interrupted")
        problem = _write(output)
        if getattr(args, "verbose", False) and read.requests:
            _say(f"read from the store: {read}")
        return code if problem is None else _fail(f"cannot write the output: {problem}")


def run() -> NoReturn:
    """The ``opid`` command: :func:`main`, then an exit that leaves the objects of a large job
    to the operating system instead of freeing them one by one (a million operators' worth
    takes a second; mypy's ``hard_exit`` does the same)."""
    code = main()
    for stream in (sys.stdout, sys.stderr):
        # A closed pipe or stream, a full disk: what could be said was said (_write).
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    os._exit(code)


_COMMANDS = {
    "pin": pin_command,
    "fingerprint": fingerprint_command,
    "diff": diff_command,
    "render": render_command,
    "check-restore": check_restore_command,
    "savepoint": savepoint_command,
    "checkpoint": checkpoint_command,
    "record-deploy": record_deploy_command,
    "demonstrate": demonstrate_command,
}


def _write(output: str | JsonOutput) -> str | None:
    """Write to stdout as UTF-8 whatever the locale; a closed pipe ends the output quietly.
    Any other failure (stdout closed before the command started, a full disk, an I/O error)
    is returned as one line for :func:`_fail`."""
    if sys.stdout is None:  # Python's stand-in for a file descriptor 1 closed at start
        return "stdout is closed"
    try:
        sys.stdout.flush()
        stream = getattr(sys.stdout, "buffer", None)
        if isinstance(output, JsonOutput):
            if stream is None:
                buffer = io.BytesIO()
                output.write(buffer)
                sys.stdout.write(buffer.getvalue().decode("utf-8"))
            else:
                output.write(stream)
        elif stream is None:
            sys.stdout.write(safe_text(output))
        else:
            stream.write(safe_text(output).encode("utf-8", "backslashreplace"))
        sys.stdout.flush()
    except BrokenPipeError:  # `opid fingerprint big.json | head`: the reader left
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError) as exc:  # /dev/full, a closed stream
        _quiet_stdout()
        return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return None


def _quiet_stdout() -> None:
    """Drop what stdout still buffers (it could not be written), so that the flush at exit
    fails no second time."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def _one_line(exc: BaseException) -> str:
    message = str(exc) or type(exc).__name__
    if isinstance(exc, RecursionError):
        message = "the input is nested too deeply"
    line = " ".join(safe_text(message).split())  # escaped first: a \r is named, not dropped
    return line if len(line) <= _MAX_ERROR else line[: _MAX_ERROR - 3] + "..."


def _fail(message: str) -> int:
    _say(f"error: {message}")
    return EXIT_ERROR


def _say(line: str) -> None:
    text = safe_text(f"{line}\n").encode("utf-8", "backslashreplace").decode("utf-8")
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, UnicodeEncodeError, ValueError, AttributeError):
        pass  # no stderr to speak to (closed, full): the exit status says it
