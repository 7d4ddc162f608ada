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
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import BinaryIO, NoReturn

from pytest_opid import __version__
from pytest_opid.comparison import compare
from pytest_opid.engine_rules import Check
from pytest_opid.errors import DocumentError, OpidError
from pytest_opid.flink import (
    Savepoint,
    fingerprint_jar,
    pin_lines,
    read_savepoint,
    render_savepoint,
)
from pytest_opid.gc_pause import gc_paused
from pytest_opid.io.registry import data_formats, load_input, restore_source
from pytest_opid.render.explain import render
from pytest_opid.render.picture import FORMATS as PICTURE_FORMATS
from pytest_opid.render.picture import picture
from pytest_opid.render.restore import render_restore
from pytest_opid.render.table import render_table
from pytest_opid.restore import check_restore
from pytest_opid.result import Fingerprint
from pytest_opid.spark import read_checkpoint, render_checkpoint, watermark_iso
from pytest_opid.text import escape_unsafe, escape_unsafe_utf8, safe_text

__all__ = ["main"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_ERROR = 2
#: ``opid check-restore``: the engine restores, but what the state means could not be
#: checked from the previous state given (a Spark checkpoint keeps no plan)
EXIT_UNVERIFIED = 3
#: Longest error line printed; longer messages are cut (they never echo whole inputs).
_MAX_ERROR = 300


class _UsageError(Exception):
    """A command line argparse rejected; reported like any other bad input."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _UsageError(f"{message} (see {self.prog} --help)")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="opid",
        description="Check from the shell whether a changed streaming job restarts on its "
        "state: Spark stateful operators, state schemas, stages and checkpoints; Flink "
        "OperatorIDs, chains and savepoints.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    fp = commands.add_parser(
        "fingerprint",
        help="print the operator IDs and job vertices of a topology",
        description="Print the operator IDs and job vertices (operator chains, stages) of a "
        "topology document, execution plan, saved fingerprint or .opid snapshot, of the "
        "job a Flink jar's main builds (needs the flink extra: PyFlink's JVM runs it), or of "
        "the query a PySpark function returns (--spark MODULE:FUNCTION -- ARGS: called as "
        "FUNCTION(spark, *ARGS) in a local session; give production's session settings with "
        "--conf, e.g. --conf spark.sql.shuffle.partitions=200; without it, 4, as the spark "
        "fixture of the pytest plugin).",
    )
    fp.add_argument("file", metavar="FILE", nargs="?", help="a file, a JOB.jar, or - for stdin")
    fp.add_argument(
        "--spark",
        metavar="MODULE:FUNCTION",
        default=None,
        help="fingerprint the DataFrame, streaming DataFrame or StreamingQuery that "
        "FUNCTION(spark, *ARGS) returns (MODULE is imported from the current directory)",
    )
    fp.add_argument(
        "--conf",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="with --spark: a session setting, as production sets it (repeatable)",
    )
    fp.add_argument("--main-class", default=None, help="a jar's entry class (default: manifest)")
    fp.add_argument("program_args", nargs="*", metavar="-- ARGS", help="a jar's program arguments")
    _common_options(fp)

    pin = commands.add_parser(
        "pin",
        help="Flink: one setUidHash line per stateful operator, to freeze a job's IDs",
        description="Print, for every operator that holds state in a Flink savepoint or "
        "checkpoint (or every operator not known to be stateless in a saved fingerprint or "
        "snapshot), the call that pins it to the ID its state is filed under, in Java and "
        "Python. Add them before a refactor and the job keeps restoring.",
    )
    pin.add_argument("previous", metavar="SAVEPOINT_OR_FINGERPRINT")

    diff = commands.add_parser(
        "diff",
        help="compare two topologies: what the change does to their state",
        description="Compare two topologies (documents, plans, saved fingerprints or .opid "
        "snapshots). Exit 0 when the check passes, 1 when it fails, 2 on bad input.",
    )
    diff.add_argument("old", metavar="OLD", help="the deployed topology (a file, or -)")
    diff.add_argument("new", metavar="NEW", help="the new topology (a file, or -)")
    diff.add_argument(
        "--check",
        choices=[c.value for c in Check],
        default=Check.IDS.value,
        help="what must stay stable, as in @pytest.mark.stable_topology(check=...): ids (the "
        "state restores into the same operators; default), chains, or both",
    )
    diff.add_argument(
        "--allow-reinterpreted-state",
        action="store_true",
        help="Spark: pass a change Spark restarts on although a stateful operator would read "
        "its state under another meaning (still reported)",
    )
    _common_options(diff)
    diff.add_argument(
        "--render",
        choices=PICTURE_FORMATS,
        default=None,
        help="draw the new topology with what the change does to each operator's state "
        "(to stdout, or to -o FILE while stdout gets the usual output)",
    )
    diff.add_argument(
        "--hops",
        type=_count,
        default=None,
        help="with --render: draw only operators within N edges of a change (default: all, "
        "or 2 for a large topology)",
    )
    _picture_options(diff)

    draw = commands.add_parser(
        "render",
        help="draw a topology: its operators, chains and edges (SVG, Mermaid, DOT, HTML)",
        description="Draw a topology (document, plan, saved fingerprint or .opid snapshot): "
        "operators with their short IDs in their chains (job vertices, stages), edges "
        "labelled by partitioner or exchange, stateful operators marked. A snapshot records "
        "no edges: its chains are drawn without their connections.",
    )
    draw.add_argument("file", metavar="PROGRAM_OR_FINGERPRINT", help="a file, or - for stdin")
    draw.add_argument(
        "--format", choices=PICTURE_FORMATS, default="svg", help="the picture's format (svg)"
    )
    draw.add_argument(
        "--input-format",
        choices=data_formats(),
        default=None,
        help="how to read the input (default: detected)",
    )
    _picture_options(draw)

    restore = commands.add_parser(
        "check-restore",
        help="would PROGRAM start from PREVIOUS's state? (as Flink or Spark decides)",
        description="Check a new program against previous state: a Flink savepoint or "
        "checkpoint (directory or _metadata), a Spark checkpoint directory, a saved fingerprint "
        "or an .opid snapshot. Exit 0 when restorable and safe, 1 when not restorable or "
        "not safe (Spark restarts, but a stateful operator reads its state as something "
        "else), 2 on bad input, 3 when restorable but the state's meaning could not be "
        "verified (a Spark checkpoint keeps no window or key expression: add "
        "--previous-fingerprint).",
    )
    restore.add_argument("previous", metavar="PREVIOUS", help="the previous state (a path)")
    restore.add_argument("program", metavar="PROGRAM", help="the new program (a file, or -)")
    restore.add_argument(
        "--allow-non-restored-state",
        action="store_true",
        help="Flink: accept state that maps to no operator (it is dropped)",
    )
    restore.add_argument(
        "--allow-reinterpreted-state",
        action="store_true",
        help="exit 0 when the engine restores, even where a stateful operator would read its "
        "state under another meaning (the results would be wrong)",
    )
    restore.add_argument(
        "--previous-fingerprint",
        metavar="OLD",
        default=None,
        help="Spark: the saved fingerprint or .opid snapshot of the query that wrote the "
        "checkpoint PREVIOUS; the state's meaning (windows, keys, aggregates), which a "
        "checkpoint does not keep, is verified against it",
    )
    restore.add_argument(
        "--spark-version",
        metavar="X.Y",
        default=None,
        help="Spark: judge as that Spark line restarts the query (3.5, 4.0 ... 4.3; default: "
        "the installed PySpark's); on a checkpoint written by an older Spark, the upgrade check",
    )
    restore.add_argument("--json", action="store_true", help="print JSON instead of text")

    savepoint = commands.add_parser(
        "savepoint",
        help="print the operator states of a Flink savepoint or checkpoint",
        description="Read a Flink savepoint or checkpoint (its directory or _metadata file).",
    )
    savepoint.add_argument("path", metavar="PATH")
    savepoint.add_argument("--json", action="store_true", help="print JSON instead of text")

    checkpoint = commands.add_parser(
        "checkpoint",
        help="print what a Spark streaming checkpoint holds",
        description="Read a Spark Structured Streaming checkpoint directory: sources, pinned "
        "confs, stateful operators and their state schemas.",
    )
    checkpoint.add_argument("path", metavar="DIR")
    checkpoint.add_argument(
        "dest", metavar="DEST", nargs="?", help="with --slim: the new directory to write"
    )
    checkpoint.add_argument(
        "--slim",
        action="store_true",
        help="write to DEST the copy of DIR to keep in a repository: metadata, offsets, "
        "commits, sources and the state's metadata and schema files, no state data (DEST "
        "must not exist; the copy is checked to read as DIR); regular files only",
    )
    checkpoint.add_argument(
        "--max-bytes",
        type=int,
        default=None,
        metavar="N",
        help="with --slim: the most bytes the copy may hold in all (default 256 MiB); each "
        "file also within OPID_MAX_INPUT_BYTES",
    )
    checkpoint.add_argument("--json", action="store_true", help="print JSON instead of text")
    return parser


def _common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format",
        choices=data_formats(),
        default=None,
        help="how to read the input (default: detected)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")


def _picture_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", metavar="FILE", help="write the picture to FILE")
    parser.add_argument(
        "--direction",
        choices=("TB", "LR"),
        default="TB",
        help="sources to sinks top-down (TB, default) or left to right (LR)",
    )
    parser.add_argument(
        "--max-nodes",
        type=_count,
        default=500,
        help="draw at most N nodes; larger pictures fold unchanged chains and say what they "
        "left out (default: 500; 0: no cap)",
    )


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {value}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``opid`` with ``argv`` (default: the process's arguments); return the exit status."""
    with gc_paused():  # one command's objects live until it ends: nothing for the collector
        try:
            args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
            _check_paths(args)
            code, output = _COMMANDS[args.command](args)
        except SystemExit as exc:  # --help and --version
            return exc.code if isinstance(exc.code, int) else EXIT_OK
        except _UsageError as exc:
            return _fail(str(exc))
        except (OpidError, OSError, TypeError, ValueError, RecursionError) as exc:
            return _fail(_one_line(exc))
        except KeyboardInterrupt:  # Ctrl-C: one line, no traceback
            return _fail("interrupted")
        problem = _write(output)
        return code if problem is None else _fail(f"cannot write the output: {problem}")


def _check_paths(args: argparse.Namespace) -> None:
    """Usage errors argparse cannot see: an empty path (``Path("")`` would read the current
    folder) and stdin named twice (the second reading would find it empty)."""
    names = ("file", "old", "new", "previous", "program", "path", "dest", "output")
    given = {
        name: getattr(args, name) for name in names if isinstance(getattr(args, name, None), str)
    }
    for name, value in given.items():
        if not value:
            raise _UsageError(f"{name.upper()} is an empty path")
    if [value for name, value in given.items() if name != "output"].count("-") > 1:
        raise _UsageError("only one input can be - (stdin); give the other one as a file")


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


def fingerprint_command(args: argparse.Namespace) -> tuple[int, str | _JsonOutput]:
    """``opid fingerprint``: the table, or the saved form with ``--json``."""
    if args.spark is not None:
        fingerprint = _spark_fingerprint(args)
    elif args.file is None:
        raise _UsageError("the following arguments are required: FILE (or --spark MODULE:FUNCTION)")
    elif args.conf:
        raise _UsageError("--conf is for --spark")
    elif args.file.endswith(".jar"):
        fingerprint = _jar_fingerprint(args.file, args.main_class, args.program_args)
    elif args.main_class or args.program_args:
        raise _UsageError("--main-class and program arguments are for a JOB.jar")
    else:
        fingerprint = load_input(args.file, args.format)
    if args.json:
        return EXIT_OK, _JsonOutput(fingerprint)
    return EXIT_OK, render_table(fingerprint)


class _JsonOutput:
    """A fingerprint's saved form, written to stdout a piece at a time (``write_json``)."""

    def __init__(self, fingerprint: Fingerprint) -> None:
        self.fingerprint = fingerprint

    def write(self, stream: BinaryIO) -> None:
        self.fingerprint.write_json(_Escaping(stream))  # type: ignore[arg-type]
        stream.write(b"\n")


class _Escaping:
    """A binary stream that escapes what text output escapes (line separators, bidi
    controls...) as ``\\uXXXX`` in what is written to it: the saved form's writer hands it
    whole encoded pieces of JSON, so no character is split between two writes."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream

    def write(self, data: bytes) -> int:
        return self.stream.write(escape_unsafe_utf8(data))


def _json(data: object) -> str:
    """JSON output: indented, UTF-8 as is but for the characters that would break or disguise
    a line, escaped as the text output escapes them (docs/cli.md promises every name so)."""
    return escape_unsafe(json.dumps(data, indent=2, ensure_ascii=False)) + "\n"


def diff_command(args: argparse.Namespace) -> tuple[int, str]:
    """``opid diff OLD NEW``: the exit status (by the plugin's verdict) and the output."""
    old = load_input(args.old, args.format)
    new = load_input(args.new, args.format)
    comparison = compare(
        old, new, allow_reinterpreted_state=getattr(args, "allow_reinterpreted_state", False)
    )
    check = Check.parse(getattr(args, "check", Check.IDS.value))
    code = EXIT_FAILED if comparison.breaks(check) else EXIT_OK
    if getattr(args, "render", None):
        drawn = picture(
            comparison,
            direction=args.direction,
            check=check,
            hops=args.hops,
            max_nodes=args.max_nodes or None,
        ).render(args.render)
        if not args.output:
            return code, drawn
        _save(args.output, drawn)
    if args.json:
        data = comparison.to_dict()
        data["check"] = check.value
        data["stable"] = code == EXIT_OK
        return code, _json(data)
    return code, render(comparison, check, accept=None) + "\n"


def render_command(args: argparse.Namespace) -> tuple[int, str]:
    """``opid render FILE``: a picture of the topology (to stdout, or to ``-o FILE``)."""
    fingerprint = load_input(args.file, args.input_format)
    drawn = picture(fingerprint, direction=args.direction, max_nodes=args.max_nodes or None).render(
        args.format
    )
    if args.output:
        _save(args.output, drawn)
        return EXIT_OK, ""
    return EXIT_OK, drawn


def _save(path: str, text: str) -> None:
    """Write the picture to ``path``; a directory there, a missing folder, no permission or a
    full disk is one line naming the path."""
    try:
        with open(path, "w", encoding="utf-8") as stream:
            stream.write(text)
    except OSError as exc:
        raise DocumentError(f"{path}: cannot write: {exc.strerror or exc}") from None


def check_restore_command(args: argparse.Namespace) -> tuple[int, str]:
    """``opid check-restore PREVIOUS PROGRAM``: exit 0 when restorable and safe (or, with
    ``--allow-reinterpreted-state``, restorable), 1 when not, 3 when restorable but the
    state's meaning was not verified."""
    program = load_input(args.program)
    was = None if args.previous_fingerprint is None else load_input(args.previous_fingerprint)
    with _judged_for(args.spark_version):
        result = check_restore(
            args.previous,
            program,
            allow_non_restored_state=args.allow_non_restored_state,
            previous_fingerprint=was,
        )
    accepted = result.safe or (result.restorable and args.allow_reinterpreted_state)
    code = EXIT_OK if accepted else EXIT_FAILED
    if code == EXIT_OK and not result.meaning_verified and not args.allow_reinterpreted_state:
        code = EXIT_UNVERIFIED
    if args.json:
        return code, _json(result.to_dict())
    return code, render_restore(result) + "\n"


def _judged_for(version: str | None) -> AbstractContextManager[object]:
    """Restart checks judge for Spark ``version`` (``--spark-version``) in the block; without
    one, for the installed PySpark (Spark is imported only when asked)."""
    if version is None:
        return nullcontext()
    from pytest_opid.spark import judged_for

    return judged_for(version)


def savepoint_command(args: argparse.Namespace) -> tuple[int, str]:
    """``opid savepoint PATH``: the operator states of a Flink savepoint or checkpoint."""
    savepoint = read_savepoint(args.path)
    if args.json:
        return EXIT_OK, _json(savepoint.to_dict())
    return EXIT_OK, render_savepoint(savepoint) + "\n"


def checkpoint_command(args: argparse.Namespace) -> tuple[int, str]:
    """``opid checkpoint DIR``: what a Spark streaming checkpoint holds; ``--slim DIR DEST``:
    the trimmed copy to keep in a repository."""
    if args.slim or args.dest is not None:
        if not (args.slim and args.dest is not None) or args.json:
            raise _UsageError("write a trimmed copy with: opid checkpoint --slim DIR DEST")
        from pytest_opid.spark import DEFAULT_BUDGET, slim_copy

        budget = DEFAULT_BUDGET if args.max_bytes is None else args.max_bytes
        if budget <= 0:
            raise _UsageError("--max-bytes takes a positive number of bytes")
        return EXIT_OK, slim_copy(args.path, args.dest, budget).summary() + "\n"
    checkpoint = read_checkpoint(args.path)
    if args.json:
        data = checkpoint.to_dict()
        for key in ("batch_watermark_ms", "committed_watermark_ms"):  # the number stays
            ms = data.get(key)
            data[key[: -len("_ms")] + "_iso"] = None if ms is None else watermark_iso(ms)
        return EXIT_OK, _json(data)
    return EXIT_OK, render_checkpoint(checkpoint) + "\n"


def _spark_fingerprint(args: argparse.Namespace) -> Fingerprint:
    """``--spark MODULE:FUNCTION -- ARGS``: what the function returns, fingerprinted."""
    if args.main_class or args.format:
        raise _UsageError("--main-class and --format are not for --spark")
    from pytest_opid.spark import fingerprint_function, parse_conf

    program_args = ([args.file] if args.file is not None else []) + list(args.program_args)
    return fingerprint_function(args.spark, program_args, parse_conf(args.conf))


def _jar_fingerprint(path: str, main_class: str | None, program_args: list[str]) -> Fingerprint:
    try:  # the flink extra: PyFlink and its JVM, imported only when a jar is read
        return fingerprint_jar(path, main_class=main_class, args=tuple(program_args))
    except ImportError as exc:
        raise DocumentError(
            f"{path}: fingerprinting a jar needs PyFlink: pip install -e '.[flink]' in the "
            f"clone ({exc})"
        ) from None


def pin_command(args: argparse.Namespace) -> tuple[int, str]:
    """``opid pin``: the setUidHash lines that freeze a Flink job's state IDs."""
    path = Path(args.previous)
    source = restore_source(path) if path.exists() else None
    previous: Savepoint | Fingerprint
    if source is not None and source.name == "flink-savepoint":
        previous = read_savepoint(path)
    else:
        previous = load_input(args.previous)
        if previous.engine not in ("", "flink"):
            raise DocumentError(
                f"{args.previous}: a {previous.engine} job; setUidHash pins are Flink's "
                "(Spark keeps state by position: keep the stateful operators in order)"
            )
    lines = pin_lines(previous)
    if not lines:
        return EXIT_OK, "no operator holds state: nothing to pin\n"
    return EXIT_OK, "\n".join(lines) + "\n"


_COMMANDS = {
    "pin": pin_command,
    "fingerprint": fingerprint_command,
    "diff": diff_command,
    "render": render_command,
    "check-restore": check_restore_command,
    "savepoint": savepoint_command,
    "checkpoint": checkpoint_command,
}


def _write(output: str | _JsonOutput) -> str | None:
    """Write to stdout as UTF-8 whatever the locale; a closed pipe ends the output quietly.
    Any other failure (stdout closed before the command started, a full disk, an I/O error)
    is returned as one line for :func:`_fail`."""
    if sys.stdout is None:  # Python's stand-in for a file descriptor 1 closed at start
        return "stdout is closed"
    try:
        sys.stdout.flush()
        stream = getattr(sys.stdout, "buffer", None)
        if isinstance(output, _JsonOutput):
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
    text = safe_text(f"error: {message}\n").encode("utf-8", "backslashreplace").decode("utf-8")
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, UnicodeEncodeError, ValueError, AttributeError):
        pass  # no stderr to speak to (closed, full): the exit status says it
    return EXIT_ERROR
