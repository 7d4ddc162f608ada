"""The ``opid`` command, in-process (``main(argv)``) and once as a real process."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_opid
from pytest_opid.cli import main

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def published():
    return json.loads((DATA / "published.json").read_text(encoding="utf-8"))


@pytest.fixture
def uid_job(published, tmp_path):
    """The published job with uids, as a topology document file; its IDs come from Flink."""
    path = tmp_path / "job.json"
    path.write_text(json.dumps(published[0]["topology"]), encoding="utf-8")
    return path, published[0]["expected"]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_fingerprint_table(capsys, uid_job):
    path, expected = uid_job
    code, out, err = run(capsys, "fingerprint", str(path))
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == "4 operators in 2 job vertices"
    ids = expected["operator_ids"]
    assert lines[2] == (
        f"job vertex 1: Source: Custom Source -> Map  (id {ids['1']}, parallelism 4)"
    )
    assert lines[3].split() == ["OperatorID", "user-defined", "ID", "uid", "parallelism", "name"]
    assert lines[4].split() == [ids["1"], "-", "source_uid", "4", "Source:", "Custom", "Source"]
    assert lines[5].split() == [ids["2"], "-", "-", "4", "Map"]
    assert lines[7] == f"job vertex 2: Map -> Sink: Unnamed  (id {ids['4']}, parallelism 4)"
    assert lines[9].split() == [ids["4"], "-", "count_uid", "4", "Map"]
    assert lines[10].split()[:4] == [ids["5"], "-", "-", "4"]
    assert [v for v in expected["job_vertex_ids"]] == [ids["1"], ids["4"]]


def test_fingerprint_json(capsys, uid_job):
    path, expected = uid_job
    code, out, err = run(capsys, "fingerprint", "--json", str(path))
    assert code == 0 and err == ""
    data = json.loads(out)
    assert data == pytest_opid.fingerprint(path).to_dict()
    assert {str(o["node"]): o["operator_id"] for o in data["operators"]} == expected["operator_ids"]
    assert [v["id"] for v in data["job_vertices"]] == expected["job_vertex_ids"]


def test_saved_fingerprint_reads_back(capsys, uid_job, tmp_path):
    path, expected = uid_job
    _, saved, _ = run(capsys, "fingerprint", "--json", str(path))
    saved_path = tmp_path / "saved.json"
    saved_path.write_text(saved, encoding="utf-8")
    code, out, _ = run(capsys, "fingerprint", str(saved_path))
    assert code == 0
    assert out.splitlines()[0] == "4 operators in 2 job vertices"
    assert expected["operator_ids"]["5"] in out
    code, again, _ = run(
        capsys, "fingerprint", "--json", "--format", "fingerprint", str(saved_path)
    )
    assert code == 0 and json.loads(again) == json.loads(saved)


def test_plan_input_and_forced_format(capsys, golden_cases, tmp_path):
    case = next(c for c in golden_cases if c["case"]["seed"] == 1012)
    path = tmp_path / "plan.json"
    path.write_text(case["flink_plan"], encoding="utf-8")
    code, out, _ = run(capsys, "fingerprint", "--json", str(path))
    assert code == 0
    detected = json.loads(out)
    code, out, _ = run(capsys, "fingerprint", "--json", "--format", "plan", str(path))
    assert code == 0 and json.loads(out) == detected
    # This plan alone reproduces Flink's IDs (no uid, nothing the plan lacks matters here).
    assert {str(o["node"]): o["operator_id"] for o in detected["operators"]} == case["expected"][
        "operator_ids"
    ]
    code, out, err = run(capsys, "fingerprint", "--format", "document", str(path))
    assert (code, out) == (2, "")
    assert err.startswith(f"error: {path}: ") and "no 'edges' list" in err


def test_stdin(capsys, monkeypatch, published):
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(published[1]["topology"])))
    code, out, _ = run(capsys, "fingerprint", "--json", "-")
    assert code == 0
    ids = {str(o["node"]): o["operator_id"] for o in json.loads(out)["operators"]}
    assert ids == published[1]["expected"]["operator_ids"]


def test_stdin_errors_name_stdin(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"nodes": [{"id": 1}], "edges": []}'))
    code, out, err = run(capsys, "fingerprint", "-")
    assert (code, out) == (2, "")
    assert err == "error: <stdin>: node 1 (#0) has no 'name'\n"
    monkeypatch.setattr(sys, "stdin", io.StringIO("  \n"))
    assert run(capsys, "fingerprint", "-")[2] == "error: <stdin>: the input is empty\n"
    monkeypatch.setattr(sys, "stdin", io.StringIO("[1,"))
    assert run(capsys, "fingerprint", "-")[2].startswith("error: <stdin>: not valid JSON")


def test_version_and_help(capsys):
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out == f"opid {pytest_opid.__version__}\n"
    code, out, _ = run(capsys, "--help")
    assert code == 0 and "fingerprint" in out and "diff" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "error: the following arguments are required: COMMAND"),
        (["fingerprint"], "error: the following arguments are required: FILE"),
        (["fingerprint", "x", "--format", "xml"], "error: argument --format: invalid choice"),
        (["frobnicate"], "error: argument COMMAND: invalid choice: 'frobnicate'"),
        (["diff", "only-one"], "error: the following arguments are required: NEW"),
    ],
)
def test_usage_errors_are_one_line(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    assert err.startswith(message) and err.count("\n") == 1


def test_diff_is_wired_to_the_diff_module(capsys, monkeypatch, uid_job):
    import pytest_opid.cli

    seen = {}

    def fake_cli_diff(args):
        seen.update(old=args.old, new=args.new, format=args.format, json=args.json)
        return 1, ""

    monkeypatch.setitem(pytest_opid.cli._COMMANDS, "diff", fake_cli_diff)
    assert main(["diff", "a.json", "b.json", "--format", "plan", "--json"]) == 1
    assert seen == {"old": "a.json", "new": "b.json", "format": "plan", "json": True}


def test_diff_for_real(capsys, uid_job, tmp_path):
    path, _ = uid_job
    code, _, err = run(capsys, "diff", str(path), str(path))
    assert code == 0 and err == ""
    missing = tmp_path / "missing.json"
    code, out, err = run(capsys, "diff", str(path), str(missing))
    assert (code, out) == (2, "")
    assert err.startswith("error: ") and "missing.json" in err and err.count("\n") == 1


def test_as_a_real_process(uid_job, tmp_path):
    path, expected = uid_job
    done = subprocess.run(
        [sys.executable, "-m", "pytest_opid", "fingerprint", "--json", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    ids = {str(o["node"]): o["operator_id"] for o in json.loads(done.stdout)["operators"]}
    assert ids == expected["operator_ids"]

    bad = tmp_path / "bad.json"
    bad.write_text('{"nodes": [{"id": 1, "name": "a"}], "edges": [{"source": 1, "target": 2}]}')
    script = shutil.which("opid")
    command = [script] if script else [sys.executable, "-m", "pytest_opid"]
    done = subprocess.run(
        [*command, "fingerprint", str(bad)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == (
        f"error: {bad}: edge #0 (1 -> 2) names operator 2, which does not exist\n"
    )
