"""The ``opid`` command: fingerprints and diffs of topologies from the shell.

``opid fingerprint FILE`` prints what Flink would call every operator and every chain of a
topology document, a Flink execution plan or a saved fingerprint (``-`` reads stdin);
``opid diff OLD NEW`` compares two of them. Bad input never shows a traceback: one line
``error: ...`` on stderr naming the file and the node or edge at fault, exit status 2 and
nothing on stdout, so scripts can rely on the output being complete or absent.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from pytest_opid.document import describe_json, parse_json
from pytest_opid.errors import DocumentError, OpidError

__all__ = ["main"]

FORMATS = ("document", "plan", "fingerprint")
EXIT_OK = 0
EXIT_ERROR = 2


class _UsageError(Exception):
    """A command line argparse rejected; reported like any other bad input."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _UsageError(f"{message} (see {self.prog} --help)")


def _parser() -> argparse.ArgumentParser:
    from pytest_opid import __version__

    parser = _Parser(
        prog="opid",
        description="Flink-exact OperatorIDs and operator chains of a topology.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    fp = commands.add_parser(
        "fingerprint",
        help="print the OperatorIDs and job vertices of a topology",
        description="Print the OperatorIDs and job vertices (operator chains) of a topology "
        "document, Flink execution plan or saved fingerprint.",
    )
    fp.add_argument("file", metavar="FILE", help="a JSON file, or - for stdin")
    _common_options(fp)

    diff = commands.add_parser(
        "diff",
        help="compare two topologies: which operators would lose their state",
        description="Compare two topologies (documents, plans or saved fingerprints).",
    )
    diff.add_argument("old", metavar="OLD", help="the deployed topology (a JSON file, or -)")
    diff.add_argument("new", metavar="NEW", help="the new topology (a JSON file, or -)")
    _common_options(diff)
    return parser


def _common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default=None,
        help="how to read the input (default: detected from its keys)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``opid`` with ``argv`` (default: the process's arguments); return the exit status."""
    try:
        args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
        if args.command == "fingerprint":
            output = _fingerprint_command(args)
        else:
            return _diff_command(args)
    except SystemExit as exc:  # --help and --version
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    except _UsageError as exc:
        return _fail(str(exc))
    except (OpidError, OSError, TypeError, ValueError, UnicodeError, RecursionError) as exc:
        return _fail(_one_line(exc))
    try:
        sys.stdout.write(output)
        sys.stdout.flush()
    except BrokenPipeError:  # `opid fingerprint big.json | head`: the reader left, not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return EXIT_OK


def _fingerprint_command(args: argparse.Namespace) -> str:
    fingerprint = load(args.file, args.format)
    if args.json:
        return fingerprint.to_json() + "\n"
    return render_table(fingerprint)


def _diff_command(args: argparse.Namespace) -> int:
    try:
        from pytest_opid.diff import cli_diff
    except ModuleNotFoundError as exc:
        if exc.name not in ("pytest_opid.diff",):
            raise
        return _fail("opid diff is not available in this installation (no pytest_opid.diff)")
    try:
        return cli_diff(args)
    except (OpidError, OSError, TypeError, ValueError, UnicodeError, RecursionError) as exc:
        return _fail(_one_line(exc))


def load(path: str, format: str | None = None) -> Any:
    """The fingerprint of the file at ``path`` (``-``: stdin), errors prefixed with the file."""
    from pytest_opid.document import read_json
    from pytest_opid.fingerprint import fingerprint

    if path == "-":
        origin = "<stdin>"
        data = _parse_stdin()
    else:
        origin = path
        data = read_json(path)
    if not isinstance(data, dict):
        raise DocumentError(
            f"{origin}: expected a JSON object (a topology document, Flink execution plan or "
            f"saved fingerprint), got {describe_json(data)}"
        )
    try:
        return fingerprint(data, format=format)
    except OpidError as exc:
        raise type(exc)(f"{origin}: {exc}") from None


def _parse_stdin() -> Any:
    return parse_json(sys.stdin.read(), "<stdin>")


# -- the table ------------------------------------------------------------------------------------


def render_table(fingerprint: Any) -> str:
    """Job vertices in Flink's order, each with its operators (OperatorID, user-defined ID,
    uid, parallelism, name). Operators are listed in node order within their vertex."""
    members: dict[str | None, list[Any]] = {}
    for op in fingerprint.operators:
        members.setdefault(op.job_vertex, []).append(op)
    vertices = list(fingerprint.job_vertices)
    lines = [
        f"{_count(len(fingerprint.operators), 'operator')} in "
        f"{_count(len(vertices), 'job vertex', 'job vertices')}",
    ]
    header = ("OperatorID", "user-defined ID", "uid", "parallelism", "name")
    rows_by_vertex = []
    for vertex in vertices:
        rows_by_vertex.append(
            [
                (
                    op.operator_id,
                    op.user_operator_id or "-",
                    "-" if op.uid is None else _printable(op.uid),
                    str(vertex.parallelism),
                    _printable(op.name),
                )
                for op in members.get(vertex.id, [])
            ]
        )
    all_rows = [header] + [row for rows in rows_by_vertex for row in rows]
    widths = [max(len(row[i]) for row in all_rows) for i in range(len(header) - 1)]

    def fmt(row: tuple[str, ...]) -> str:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        return "    " + "  ".join([*cells, row[-1]])

    for number, (vertex, rows) in enumerate(zip(vertices, rows_by_vertex, strict=True), start=1):
        lines.append("")
        lines.append(
            f"job vertex {number}: {_printable(vertex.name)}  "
            f"(id {vertex.id}, parallelism {vertex.parallelism})"
        )
        lines.append(fmt(header))
        lines.extend(fmt(row) for row in rows)
    orphans = members.get(None, [])
    if orphans:
        lines.append("")
        lines.append("operators in no job vertex")
        lines.extend(
            fmt((op.operator_id, op.user_operator_id or "-", "-", "", _printable(op.name)))
            for op in orphans
        )
    return "\n".join(lines) + "\n"


def _count(n: int, singular: str, plural: str | None = None) -> str:
    return f"{n} {singular if n == 1 else plural or singular + 's'}"


def _printable(text: str) -> str:
    """Names and uids may hold newlines or control characters; keep one line per operator."""
    if text.isprintable():
        return text
    return json.dumps(text, ensure_ascii=False)[1:-1]


# -- errors ---------------------------------------------------------------------------------------


def _one_line(exc: BaseException) -> str:
    message = str(exc) or type(exc).__name__
    if isinstance(exc, RecursionError):
        message = "the input is nested too deeply"
    return " ".join(message.split())


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_ERROR
