"""``opid`` as installed (``pytest_opid.cli:run``) ends its process without freeing the job's
objects: everything it printed must still be there, and its exit status must be main()'s."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from pytest_opid import fingerprint

RUN = "import sys; from pytest_opid.cli import run; sys.argv[0] = 'opid'; run()"
CASES = Path(__file__).resolve().parents[1] / "data" / "cases.jsonl"


def opid(*args: str, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", RUN, *args], stdout=stdout, stderr=subprocess.PIPE, check=False
    )


def test_output_written_to_a_file_is_whole(tmp_path: Path) -> None:
    document = json.loads(CASES.read_text(encoding="utf-8").splitlines()[3])["topology"]
    path = tmp_path / "job.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    out = tmp_path / "out.json"
    with out.open("wb") as f:
        done = opid("fingerprint", str(path), "--json", stdout=f)
    assert done.returncode == 0, done.stderr
    assert out.read_text(encoding="utf-8") == fingerprint(document).to_json() + "\n"


def test_exit_status_and_error_line(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_text("{}", encoding="utf-8")
    done = opid("fingerprint", str(path))
    assert done.returncode == 2
    assert done.stdout == b""
    assert done.stderr.decode().splitlines() == [f"error: {path}: the document has no 'nodes' list"]
