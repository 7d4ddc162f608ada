"""docs/cli.md against the real ``opid``: every command and every long option its ``--help``
prints is on the page, and each command's exit statuses in the page's table are the ones the
code can return (``pytest_opid.cli.commands``'s ``EXIT_*``).

Why: the page is written by hand; a new option or exit status (check-restore's 3 was missing
once) must fail here, not surprise a user.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")


def _help(*command: str) -> str:
    """What ``opid COMMAND --help`` prints, from the CLI's own entry point (in-process: fast)."""
    from pytest_opid.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([*command, "--help"]) == 0
    return out.getvalue()


def _commands() -> list[str]:
    """The subcommands ``opid --help`` lists under COMMAND (two-space indented names)."""
    text = _help()
    block = text.split("COMMAND\n", 2)[-1].split("\noptions:", 1)[0]
    return re.findall(r"^ {4}([a-z][a-z-]+)", block, flags=re.MULTILINE)


COMMANDS = _commands()


def test_help_lists_the_commands_we_document() -> None:
    # The expected list is the page's own table; an empty parse would make the tests below vacuous.
    on_page = set(re.findall(r"^\| `opid ([a-z-]+)", PAGE, flags=re.MULTILINE))
    assert on_page, "docs/cli.md: no command table"
    assert set(COMMANDS) == on_page


@pytest.mark.parametrize("command", COMMANDS)
def test_every_option_of_the_command_is_on_the_page(command: str) -> None:
    options = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", _help(command))) - {"--help"}
    missing = sorted(o for o in options if o not in PAGE)
    assert not missing, f"opid {command}: not in docs/cli.md: {missing}"


def _row_statuses(command: str) -> set[int]:
    rows = [r for r in PAGE.splitlines() if r.startswith(f"| `opid {command}")]
    assert rows, command
    return {int(d) for row in rows for d in re.findall(r"\b([0-3])\b", row.rsplit("|", 2)[-2])}


def test_check_restore_exit_statuses_match_the_code() -> None:
    from pytest_opid.cli import commands

    codes = {
        commands.EXIT_OK,
        commands.EXIT_FAILED,
        commands.EXIT_ERROR,
        commands.EXIT_UNVERIFIED,
    }
    assert _row_statuses("check-restore") == codes


@pytest.mark.parametrize("command", ["fingerprint", "savepoint", "checkpoint", "pin", "render"])
def test_reading_commands_exit_0_or_2(command: str) -> None:
    from pytest_opid.cli import commands

    assert _row_statuses(command) == {commands.EXIT_OK, commands.EXIT_ERROR}


def test_diff_exits_0_1_or_2() -> None:
    from pytest_opid.cli import commands

    assert _row_statuses("diff") == {commands.EXIT_OK, commands.EXIT_FAILED, commands.EXIT_ERROR}
