"""``opid demonstrate --spark A --spark B``: run both versions of a streaming query on
generated rows and show what restarting B on A's checkpoint does (the subcommand's arguments and
what it does, kept apart from the other subcommands')."""

from __future__ import annotations

import argparse
import json
from typing import Any

from pytest_opid.errors import DocumentError
from pytest_opid.spark import demonstrate_functions, parse_conf

#: Exit status: 0 "same" (no difference found), 1 "differs" or "refused".
EXIT_SAME = 0
EXIT_SHOWN = 1


def add_parser(commands: Any) -> None:
    demo = commands.add_parser(
        "demonstrate",
        help="Spark: run two versions of a streaming query on generated rows and show what "
        "the restart does",
        description="Run two versions of a streaming query on rows Hypothesis draws from their "
        "sources' schemas: the first (--spark A) for some batches into a temporary checkpoint, "
        "the second (--spark B) restarted on a copy of it with more batches, and B from scratch "
        "on every batch. Prints 'refused' (Spark's error), 'differs' (the input rows and the "
        "rows the two runs of B emit differently) or 'same' (no difference found in N examples: "
        "not a proof). Each FUNCTION(spark, *ARGS) returns a streaming DataFrame or a "
        "DataStreamWriter (its output mode is used). Exit 0 same, 1 differs or refused.",
    )
    demo.add_argument(
        "--spark",
        metavar="MODULE:FUNCTION",
        action="append",
        default=[],
        help="the previous query, then the new one (give it twice)",
    )
    demo.add_argument(
        "--conf",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="a session setting for both, as production sets it (repeatable)",
    )
    demo.add_argument("--examples", type=int, default=None, help="examples at most (default 3)")
    demo.add_argument("--batches", type=int, default=None, help="batches per example (default 3)")
    demo.add_argument("--seed", type=int, default=None, help="repeat a run: its seed")
    demo.add_argument(
        "--output-mode",
        choices=("append", "update", "complete"),
        default=None,
        help="for functions returning a DataFrame (default: append)",
    )
    demo.add_argument("--json", action="store_true", help="print JSON instead of text")
    demo.add_argument("program_args", nargs="*", metavar="-- ARGS", help="passed to both")


def demonstrate_command(args: argparse.Namespace) -> tuple[int, str]:
    if len(args.spark) != 2:
        raise DocumentError("give --spark twice: the previous query, then the new one")
    knobs = {
        name: getattr(args, name)
        for name in ("examples", "batches", "seed", "output_mode")
        if getattr(args, name) is not None
    }
    result = demonstrate_functions(
        args.spark[0], args.spark[1], args.program_args, parse_conf(args.conf), **knobs
    )
    code = EXIT_SAME if result.outcome == "same" else EXIT_SHOWN
    if args.json:
        return code, json.dumps(result.to_dict(), indent=1, sort_keys=True) + "\n"
    return code, result.render() + "\n"
