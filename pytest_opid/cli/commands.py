"""What each ``opid`` subcommand does: read its inputs, judge, and return its exit status
with the output (text, or :class:`JsonOutput` written a piece at a time).
:mod:`pytest_opid.cli` parses the command line, writes the output and turns bad input into one
line; the Spark and Flink extras are imported only by the subcommands that need them.
"""

from __future__ import annotations

import argparse
import json
from contextlib import AbstractContextManager, nullcontext
from typing import BinaryIO

from pytest_opid.cli.arguments import UsageError
from pytest_opid.comparison import compare
from pytest_opid.engine_rules import Check
from pytest_opid.engines import engine_rules
from pytest_opid.errors import DocumentError
from pytest_opid.flink import (
    Savepoint,
    fingerprint_jar,
    is_savepoint,
    pin_lines,
    read_savepoint,
    render_savepoint,
)
from pytest_opid.inputs import load_input
from pytest_opid.io.storage import path_or_location
from pytest_opid.render.explain import render
from pytest_opid.render.picture import picture
from pytest_opid.render.restore import render_restore
from pytest_opid.render.table import render_table
from pytest_opid.restore import check_restore
from pytest_opid.result import Fingerprint
from pytest_opid.spark import read_checkpoint, render_checkpoint, watermark_iso
from pytest_opid.text import escape_unsafe, escape_unsafe_utf8

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_ERROR = 2
#: ``opid check-restore``: the engine restores, but what the state means could not be
#: checked from the previous state given (a Spark checkpoint keeps no plan)
EXIT_UNVERIFIED = 3


def fingerprint_command(args: argparse.Namespace) -> tuple[int, str | JsonOutput]:
    """``opid fingerprint``: the table, or the saved form with ``--json``."""
    if args.spark is not None:
        fingerprint = _spark_fingerprint(args)
    elif args.file is None:
        raise UsageError("the following arguments are required: FILE (or --spark MODULE:FUNCTION)")
    elif args.conf:
        raise UsageError("--conf is for --spark")
    elif args.file.endswith(".jar"):
        fingerprint = _jar_fingerprint(args.file, args.main_class, args.program_args)
    elif args.main_class or args.program_args:
        raise UsageError("--main-class and program arguments are for a JOB.jar")
    else:
        fingerprint = load_input(args.file, args.format)
    if args.json:
        return EXIT_OK, JsonOutput(fingerprint)
    return EXIT_OK, render_table(fingerprint)


class JsonOutput:
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
    """``opid check-restore PREVIOUS PROGRAM`` (or ``--spark MODULE:FUNCTION``): exit 0 when
    restorable and safe (or, with ``--allow-reinterpreted-state``, restorable), 1 when not, 3
    when restorable but the state's meaning was not verified."""
    was = None if args.previous_fingerprint is None else load_input(args.previous_fingerprint)
    with _judged_for(args.spark_version), _program(args) as program:
        result = check_restore(
            args.previous,
            program,
            allow_non_restored_state=args.allow_non_restored_state,
            previous_fingerprint=was,
        )
    if result.safe is True or (result.restorable and args.allow_reinterpreted_state):
        code = EXIT_OK
    elif result.safe is None:
        code = EXIT_UNVERIFIED
    else:
        code = EXIT_FAILED
    if args.json:
        return code, _json(result.to_dict())
    return code, render_restore(result) + "\n"


def record_deploy_command(args: argparse.Namespace) -> tuple[int, str]:
    """``opid record-deploy CHECKPOINT (FINGERPRINT | --spark MODULE:FUNCTION -- ARGS)``: the
    running query's fingerprint kept in its checkpoint folder, for check-restore."""
    if (args.file is None) == (args.spark is None):
        raise UsageError(
            "give the deployed query: opid record-deploy CHECKPOINT FINGERPRINT, or "
            "opid record-deploy CHECKPOINT --spark MODULE:FUNCTION -- ARGS"
        )
    if args.file is not None and (args.conf or args.program_args):
        raise UsageError("--conf and program arguments are for --spark")
    from pytest_opid.spark import called_function, parse_conf, record_deploy

    if args.spark is None:
        path = record_deploy(args.path, load_input(args.file))
    else:
        with called_function(args.spark, args.program_args, parse_conf(args.conf)) as program:
            path = record_deploy(args.path, program)
    return EXIT_OK, f"recorded: {path}\n"


def _program(args: argparse.Namespace) -> AbstractContextManager[object]:
    """The new program: a file (a saved fingerprint, snapshot or document), or with
    ``--spark MODULE:FUNCTION`` what the function returns, live in its session for the block,
    so that the restore entrance plans it as Spark plans a restarted query."""
    if args.spark is None:
        if args.program is None:
            raise UsageError(
                "the following arguments are required: PROGRAM (or --spark MODULE:FUNCTION)"
            )
        if args.conf or args.program_args:
            raise UsageError("--conf and program arguments are for --spark")
        return nullcontext(load_input(args.program))
    from pytest_opid.spark import called_function, parse_conf, restart_settings

    program_args = ([args.program] if args.program is not None else []) + list(args.program_args)
    conf = restart_settings(args.previous, parse_conf(args.conf))
    return called_function(args.spark, program_args, conf)


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
            raise UsageError("write a trimmed copy with: opid checkpoint --slim DIR DEST")
        from pytest_opid.spark import DEFAULT_BUDGET, slim_copy

        budget = DEFAULT_BUDGET if args.max_bytes is None else args.max_bytes
        if budget <= 0:
            raise UsageError("--max-bytes takes a positive number of bytes")
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
        raise UsageError("--main-class and --format are not for --spark")
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
    path = path_or_location(args.previous)
    previous: Savepoint | Fingerprint
    if path.exists() and is_savepoint(path):
        previous = read_savepoint(path)
    else:
        previous = load_input(args.previous)
        rules = engine_rules(previous.engine, previous)
        if not rules.ids_find_state:  # pins are IDs: useless where state is found by position
            raise DocumentError(
                f"{args.previous}: a {rules.name} job; setUidHash pins are Flink's "
                f"({rules.name.capitalize()} keeps state by position: keep the stateful "
                "operators in order)"
            )
    lines = pin_lines(previous)
    if not lines:
        return EXIT_OK, "no operator holds state: nothing to pin\n"
    return EXIT_OK, "\n".join(lines) + "\n"
