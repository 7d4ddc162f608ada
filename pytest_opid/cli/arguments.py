"""The ``opid`` command line: its subcommands, their arguments and help, and the usage
errors argparse cannot see. Parsing apart from running (:mod:`pytest_opid.cli`) and from what
each subcommand does (:mod:`.commands`), so the help text reads as one page.
"""

from __future__ import annotations

import argparse
from typing import NoReturn

from pytest_opid.cli.demonstrate import add_parser as add_demonstrate
from pytest_opid.engine_rules import Check
from pytest_opid.inputs import data_formats
from pytest_opid.render.picture import FORMATS as PICTURE_FORMATS


class UsageError(Exception):
    """A command line argparse rejected; reported like any other bad input."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see {self.prog} --help)")


def parse_command_line(version: str, argv: list[str]) -> argparse.Namespace:
    """``argv`` parsed; what follows the first ``--`` is the program's arguments
    (``program_args``) wherever the positional arguments before it stand. argparse matches
    every positional argument the first time it meets one, so ``check-restore CHECKPOINT
    --spark M:F -- ARGS`` would find no place left for ARGS."""
    if "--" in argv:
        cut = argv.index("--")
        args = parser(version).parse_args(argv[:cut])
        if hasattr(args, "program_args"):
            args.program_args = [*args.program_args, *argv[cut + 1 :]]
            return args
    return parser(version).parse_args(argv)


def parser(version: str) -> argparse.ArgumentParser:
    """The ``opid`` parser; ``version`` is what ``opid --version`` prints after the name."""
    parser = _Parser(
        prog="opid",
        description="Check from the shell whether a changed streaming job restarts on its "
        "state: Spark stateful operators, state schemas, stages and checkpoints; Flink "
        "OperatorIDs, chains and savepoints.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version}")
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
    _spark_program_options(fp)
    fp.add_argument("--main-class", default=None, help="a jar's entry class (default: manifest)")
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
        "or an .opid snapshot. The new program is a file (a saved fingerprint, snapshot or "
        "topology document) or, with --spark MODULE:FUNCTION -- ARGS, the PySpark query "
        "FUNCTION(spark, *ARGS) returns, planned with the settings the checkpoint pins as "
        "Spark plans the restarted query (its shuffle partitions too, unless --conf sets "
        "them: then the check says what Spark does with yours). Exit 0 when restorable and "
        "safe, 1 when not restorable or not safe (Spark restarts, but a stateful operator "
        "reads its state as something else), 2 on bad input, 3 when restorable but the "
        "state's meaning could not be verified (a Spark checkpoint keeps no window or key "
        "expression: add --previous-fingerprint).",
    )
    restore.add_argument(
        "previous",
        metavar="PREVIOUS",
        help="the previous state: a path, or a URL (s3://, s3a://, gs://, abfss://, hdfs://, "
        "file://, dbfs:/) where it lives",
    )
    restore.add_argument(
        "program", metavar="PROGRAM", nargs="?", help="the new program (a file, or -)"
    )
    _spark_program_options(restore)
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
    _verbose(restore)

    record = commands.add_parser(
        "record-deploy",
        help="Spark: keep the deployed query's fingerprint in its checkpoint folder",
        description="At deploy time, write the fingerprint of the streaming query that runs on "
        "CHECKPOINT into that folder (_opid_deployed.json, a file Spark ignores). "
        "check-restore on the checkpoint then verifies the next version's state meaning "
        "(windows, keys, aggregate inputs, which no checkpoint keeps) against it by itself. "
        "The query: a saved fingerprint FINGERPRINT, or --spark MODULE:FUNCTION -- ARGS as "
        "for fingerprint, planned with the settings the checkpoint pins.",
    )
    record.add_argument(
        "path",
        metavar="CHECKPOINT",
        help="the query's checkpoint location: a folder, or its URL in a store (s3a://...)",
    )
    record.add_argument(
        "file", metavar="FINGERPRINT", nargs="?", help="the query's saved fingerprint"
    )
    record.add_argument(
        "--spark",
        metavar="MODULE:FUNCTION",
        default=None,
        help="record the query FUNCTION(spark, *ARGS) returns (MODULE is imported from the "
        "current directory)",
    )
    record.add_argument(
        "--conf",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="with --spark: a session setting, as production sets it (repeatable)",
    )
    record.add_argument("program_args", nargs="*", metavar="-- ARGS", help="FUNCTION's arguments")

    savepoint = commands.add_parser(
        "savepoint",
        help="print the operator states of a Flink savepoint or checkpoint",
        description="Read a Flink savepoint or checkpoint (its directory or _metadata file).",
    )
    savepoint.add_argument("path", metavar="PATH")
    savepoint.add_argument("--json", action="store_true", help="print JSON instead of text")
    _verbose(savepoint)

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
    add_demonstrate(commands)
    _verbose(checkpoint)
    return parser


def _verbose(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="say on stderr how many requests and bytes were read from a store (a URL)",
    )


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


def _spark_program_options(parser: argparse.ArgumentParser) -> None:
    """``--spark MODULE:FUNCTION [--conf KEY=VALUE ...] [-- ARGS]``: a PySpark program from the
    team's own code (``fingerprint`` and ``check-restore`` take it alike)."""
    parser.add_argument(
        "--spark",
        metavar="MODULE:FUNCTION",
        default=None,
        help="the DataFrame, streaming DataFrame, DataStreamWriter or StreamingQuery that "
        "FUNCTION(spark, *ARGS) returns (MODULE is imported from the current directory)",
    )
    parser.add_argument(
        "--conf",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="with --spark: a session setting, as production sets it (repeatable)",
    )
    parser.add_argument(
        "program_args",
        nargs="*",
        metavar="-- ARGS",
        help="with --spark: the function's arguments (for fingerprint, also a jar's)",
    )


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {value}")
    return value


def check_paths(args: argparse.Namespace) -> None:
    """Usage errors argparse cannot see: an empty path (``Path("")`` would read the current
    folder) and stdin named twice (the second reading would find it empty)."""
    names = ("file", "old", "new", "previous", "program", "path", "dest", "output")
    given = {
        name: getattr(args, name) for name in names if isinstance(getattr(args, name, None), str)
    }
    for name, value in given.items():
        if not value:
            raise UsageError(f"{name.upper()} is an empty path")
    if [value for name, value in given.items() if name != "output"].count("-") > 1:
        raise UsageError("only one input can be - (stdin); give the other one as a file")
