"""Issue 21: bounded reads, output errors and wording at the edges of the ``opid`` command.

Every input is a regular file (or stdin) read to at most a limit; a device, a FIFO or an endless
stream is refused in one line instead of read until memory runs out or waited on forever.
Output that cannot be written (a closed stdout, a full disk) is one line and exit status 2.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_opid.cli import main
from pytest_opid.errors import DocumentError
from pytest_opid.io.json import read_bytes, read_stream

JOB = {
    "nodes": [
        {"id": 1, "name": "Source: a", "parallelism": 2, "source": "new"},
        {"id": 2, "name": "Sink: b", "parallelism": 2},
    ],
    "edges": [{"source": 1, "target": 2}],
}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_error(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


@pytest.fixture
def job(tmp_path: Path) -> Path:
    path = tmp_path / "job.json"
    path.write_text(json.dumps(JOB), encoding="utf-8")
    return path


# -- 1. only regular files, at most a limit -------------------------------------------------------

needs_dev_zero = pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")


@needs_dev_zero
@pytest.mark.parametrize(
    "argv",
    [
        ["fingerprint", "{zero}"],
        ["render", "{zero}"],
        ["pin", "{zero}"],
        ["diff", "{job}", "{zero}"],
        ["check-restore", "{job}", "{zero}"],
        ["fingerprint", "{link}"],
    ],
)
def test_a_device_is_refused_at_once(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, job: Path, argv: list[str]
) -> None:
    link = tmp_path / "zero.opid"
    link.symlink_to("/dev/zero")  # an .opid link to /dev/zero: the snapshot sniffing too
    names = {"zero": "/dev/zero", "job": str(job), "link": str(link)}
    code, out, err = run(capsys, *(a.format(**names) for a in argv))
    assert (code, out) == (2, "")
    assert one_error(err).endswith(": cannot read: it is a device, not a regular file")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
@pytest.mark.parametrize("command", ["fingerprint", "render", "pin", "check-restore"])
def test_a_fifo_without_a_writer_is_refused_not_waited_on(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str
) -> None:
    fifo = tmp_path / "job.json"
    os.mkfifo(fifo)
    argv = [command, str(fifo)]
    if command == "check-restore":  # the previous state a FIFO, the program a real file
        job = tmp_path / "program.json"
        job.write_text(json.dumps(JOB), encoding="utf-8")
        argv.append(str(job))
    code, out, err = run(capsys, *argv)  # would block forever before
    assert (code, out) == (2, "")
    assert f"{fifo}: cannot read: it is a FIFO (named pipe)" in one_error(err)


@needs_dev_zero
def test_dev_zero_on_stdin_stops_at_its_first_byte() -> None:
    with open("/dev/zero", "rb") as zero:
        done = subprocess.run(
            [sys.executable, "-m", "pytest_opid", "fingerprint", "-"],
            stdin=zero,
            capture_output=True,
            timeout=60,
        )
    assert (done.returncode, done.stdout) == (2, b"")
    assert done.stderr == b"error: <stdin>: cannot read: binary data (a NUL byte), not text\n"


def test_an_input_over_the_limit_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, job: Path
) -> None:
    monkeypatch.setenv("OPID_MAX_INPUT_BYTES", "20")
    code, _, err = run(capsys, "fingerprint", str(job))
    size = job.stat().st_size
    assert code == 2
    assert one_error(err) == (
        f"error: {job}: {size} bytes, more than the 20-byte limit of an input "
        "(set OPID_MAX_INPUT_BYTES to read a larger one)"
    )
    monkeypatch.setenv("OPID_MAX_INPUT_BYTES", "a lot")
    code, _, err = run(capsys, "fingerprint", str(job))
    assert code == 2 and 'OPID_MAX_INPUT_BYTES="a lot": expected a number' in one_error(err)
    monkeypatch.setenv("OPID_MAX_INPUT_BYTES", str(size))
    assert run(capsys, "fingerprint", str(job))[0] == 0


def test_an_endless_stream_is_read_to_the_limit_only() -> None:
    class Endless:
        def __init__(self) -> None:
            self.given = 0

        def read(self, n: int) -> bytes:
            self.given += n
            return b" " * n

    stream = Endless()
    with pytest.raises(DocumentError, match="<stdin>: longer than the 4096-byte limit"):
        read_stream(stream, "<stdin>", limit=4096)  # type: ignore[arg-type]
    assert stream.given == 4097
    assert read_bytes(Path(__file__), limit=1 << 20).startswith(b'"""Issue 21')


# -- 6. output errors, paths --------------------------------------------------------------------


def opid(*argv: str, **kwargs: object) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_opid", *argv], capture_output=True, timeout=60, **kwargs
    )


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
@pytest.mark.parametrize("json_output", [False, True])
def test_a_full_disk_is_one_line_and_exit_2(job: Path, json_output: bool) -> None:
    with open("/dev/full", "wb") as full:
        done = subprocess.run(
            [sys.executable, "-m", "pytest_opid", "fingerprint", str(job)]
            + (["--json"] if json_output else []),
            stdout=full,
            stderr=subprocess.PIPE,
            timeout=60,
        )
    assert done.returncode == 2
    assert done.stderr == b"error: cannot write the output: No space left on device\n"


def test_a_closed_stdout_is_one_line_and_exit_2(job: Path) -> None:
    closing = "import os, sys; os.close(1); os.execv(sys.argv[1], sys.argv[1:])"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            closing,
            sys.executable,
            "-m",
            "pytest_opid",
            "fingerprint",
            str(job),
        ],
        stderr=subprocess.PIPE,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr == b"error: cannot write the output: stdout is closed\n"


def test_a_picture_to_a_directory_names_the_path(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, job: Path
) -> None:
    code, out, err = run(capsys, "render", str(job), "-o", str(tmp_path))
    assert (code, out) == (2, "")
    assert one_error(err) == f"error: {tmp_path}: cannot write: Is a directory"


def test_the_html_report_follows_the_umask(tmp_path: Path) -> None:
    from pytest_opid import fingerprint
    from pytest_opid.render.html import write_html_report

    entries = [("t", fingerprint(JOB), None, None)]
    old = os.umask(0o027)
    try:
        path = write_html_report(tmp_path / "report.html", entries)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640  # mkstemp alone gives 0600
    path.chmod(0o604)  # a report rewritten keeps the mode it was given
    write_html_report(path, entries)
    assert stat.S_IMODE(path.stat().st_mode) == 0o604
    with pytest.raises(OSError, match=f"{tmp_path}: cannot write the report: it is a directory"):
        write_html_report(tmp_path, entries)


# -- 8. wording -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["savepoint", ""], "PATH is an empty path"),
        (["checkpoint", ""], "PATH is an empty path"),
        (["fingerprint", ""], "FILE is an empty path"),
        (["diff", "-", "-"], "only one input can be - (stdin)"),
    ],
)
def test_usage_the_readers_cannot_see(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    assert one_error(err).startswith(f"error: {message}")


# -- 5. --json escapes what text output escapes -----------------------------------------------

UNSAFE = "\u202e\u2066\u2067\u2068\u2069\u200f\u2028\u2029\u0085\x9b\ufeff"


def test_the_utf8_pattern_finds_exactly_the_unsafe_characters() -> None:
    from pytest_opid.text import _UNSAFE, _UNSAFE_UTF8

    for code in range(0x110000):
        c = chr(code)
        encoded = c.encode("utf-8", "surrogatepass")
        assert bool(_UNSAFE.search(c)) == bool(_UNSAFE_UTF8.search(encoded)), hex(code)


@pytest.mark.parametrize("command", ["fingerprint", "diff", "check-restore"])
def test_json_output_escapes_bidi_and_line_separators(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str
) -> None:
    old = json.loads(json.dumps(JOB))
    old["nodes"][0]["name"] = f"Source: {UNSAFE}end"
    new = json.loads(json.dumps(old))
    new["nodes"][0]["uid"] = f"uid{UNSAFE}"  # a new ID: every report names the operator
    (tmp_path / "new.json").write_text(json.dumps(new), encoding="utf-8")
    (tmp_path / "old.json").write_text(json.dumps(old), encoding="utf-8")
    if command == "check-restore":
        code, saved, _ = run(capsys, "fingerprint", "--json", str(tmp_path / "old.json"))
        (tmp_path / "old.json").write_text(saved, encoding="utf-8")
    paths = [str(tmp_path / "new.json")]
    if command != "fingerprint":
        paths.insert(0, str(tmp_path / "old.json"))
    code, out, err = run(capsys, command, "--json", *paths)
    assert err == "" and code in (0, 1)
    assert not any(c in out for c in UNSAFE), "a raw bidi or line-separator character"
    assert "\\u202e\\u2066\\u2067\\u2068\\u2069\\u200f\\u2028\\u2029\\u0085\\u009b\\ufeff" in out
    assert f"Source: {UNSAFE}end" in json.dumps(json.loads(out), ensure_ascii=False)


# -- 9. a parsed document nested deeper than the stack ------------------------------------------


def nested(depth: int) -> dict:
    deep: dict = {}
    inner = deep
    for _ in range(depth):
        inner["x"] = [{}]
        inner = inner["x"][0]
    return deep


def places(value: object, path: tuple = ()) -> list[tuple]:
    """Every place in a parsed JSON value (dict keys and list indices), the value itself too."""
    out, todo = [], [(value, path)]
    while todo:
        item, where = todo.pop()
        out.append(where)
        if isinstance(item, dict):
            todo += [(v, (*where, k)) for k, v in item.items()]
        elif isinstance(item, list):
            todo += [(v, (*where, i)) for i, v in enumerate(item)]
    return [p for p in out if p]


PLAN = {
    "nodes": [
        {"id": 1, "type": "Source", "pact": "Data Source", "contents": "S", "parallelism": 1},
        {
            "id": 2,
            "type": "Map",
            "pact": "Operator",
            "contents": "Map",
            "parallelism": 1,
            "predecessors": [{"id": 1, "ship_strategy": "FORWARD", "side": "second"}],
        },
    ]
}


def test_a_value_nested_deeper_than_the_stack_is_an_error_at_every_place() -> None:
    """fingerprint() of a dict: a value nested 3,000 levels deep anywhere in a document, a plan
    or a saved fingerprint is an error in one short line, never a RecursionError while the
    message is built (repr and json.dumps of such a value recurse)."""
    from pytest_opid import fingerprint
    from pytest_opid.errors import OpidError

    deep = nested(3000)
    job = dict(JOB, edges=[{"source": 1, "target": 2, "partitioner": "HASH"}])
    refused = 0
    for shape in (job, PLAN, fingerprint(JOB).to_dict()):
        for place in places(shape):
            document = json.loads(json.dumps(shape))
            target = document
            for key in place[:-1]:
                target = target[key]
            target[place[-1]] = deep
            try:
                fingerprint(document)  # a RecursionError fails the test
            except OpidError as exc:
                assert "\n" not in str(exc) and len(str(exc)) < 400
                refused += 1
    assert refused > 60  # all but the plan's "side", which Flink's plan importer ignores
