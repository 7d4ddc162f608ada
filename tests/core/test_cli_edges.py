"""The ``opid`` command's readers and its behaviour at the edges: paths are paths, engines do
not mix, a closed pipe ends quietly, errors are one line."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import pytest_opid
from pytest_opid.cli import main

DATA = Path(__file__).resolve().parents[1] / "data"


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def savepoint(tmp_path_factory) -> tuple[Path, dict]:
    with gzip.open(DATA / "flink-restore" / "cases.jsonl.gz", "rt", encoding="utf-8") as f:
        case = json.loads(f.readline())
    target = tmp_path_factory.mktemp("savepoint")
    with tarfile.open(DATA / "flink-restore" / case["savepoint"]) as archive:
        archive.extractall(target, filter="data")
    return target / case["savepoint_root"], case


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> tuple[Path, dict]:
    with gzip.open(DATA / "spark-restart" / "cases.jsonl.gz", "rt", encoding="utf-8") as f:
        case = json.loads(f.readline())
    target = tmp_path_factory.mktemp("checkpoint")
    with tarfile.open(DATA / "spark-restart" / case["checkpoint"]) as archive:
        archive.extractall(target, filter="data")
    return target / "checkpoint", case


def test_opid_savepoint_lists_what_flinks_loader_lists(capsys, savepoint):
    path, case = savepoint
    code, out, err = run(capsys, "savepoint", "--json", str(path))
    assert code == 0 and err == ""
    data = json.loads(out)
    assert data["checkpoint_id"] == case["case"]["checkpoint_id"]
    assert [o["operator_id"] for o in data["operators"]] == [
        m["operator_id"] for m in case["metadata"]
    ]
    assert [o["has_state"] for o in data["operators"]] == [m["has_state"] for m in case["metadata"]]
    code, out, _ = run(capsys, "savepoint", str(path / "_metadata"))
    assert code == 0 and out.startswith("Flink _metadata version ")


def test_opid_checkpoint_prints_the_state_operators(capsys, checkpoint):
    path, case = checkpoint
    code, out, err = run(capsys, "checkpoint", "--json", str(path))
    assert code == 0 and err == ""
    data = json.loads(out)
    names = {(s["operatorId"], s["operatorName"]) for s in case["state_metadata"]}
    assert {(s["operator_id"], s["operator_name"]) for s in data["state_operators"]} == names
    code, out, _ = run(capsys, "checkpoint", str(path))
    assert code == 0 and out.strip()


@pytest.mark.parametrize("command", ["savepoint", "checkpoint"])
def test_readers_name_the_missing_or_wrong_path(capsys, tmp_path, command):
    code, out, err = run(capsys, command, str(tmp_path / "nope"))
    assert code == 2 and out == "" and err.startswith("error: ") and err.count("\n") == 1
    assert "nope" in err
    (tmp_path / "junk").write_bytes(b"\x00\x01garbage")
    code, out, err = run(capsys, command, str(tmp_path / "junk"))
    assert code == 2 and out == "" and err.count("\n") == 1


def test_a_path_is_a_path_even_if_it_looks_like_json(capsys, tmp_path, monkeypatch):
    doc = {"nodes": [{"id": 1, "name": "Source: Kafka"}], "edges": []}
    monkeypatch.chdir(tmp_path)
    Path("{old}.json").write_text(json.dumps(doc))
    code, _out, err = run(capsys, "diff", "{old}.json", "{old}.json")
    assert (code, err) == (0, "")
    code, _out, err = run(capsys, "fingerprint", '{"nodes": []}')
    assert code == 2 and "no such file" in err


def test_two_engines_do_not_compare(capsys, tmp_path):
    flink = tmp_path / "flink.json"
    flink.write_text(
        pytest_opid.fingerprint({"nodes": [{"id": 1, "name": "S"}], "edges": []}).to_json()
    )
    spark = json.loads(flink.read_text())
    spark["engine"], spark["mode"] = "spark", "batch"
    (tmp_path / "spark.json").write_text(json.dumps(spark))
    code, out, err = run(capsys, "diff", str(flink), str(tmp_path / "spark.json"))
    assert code == 2 and out == ""
    assert "cannot compare a flink streaming fingerprint with a spark batch one" in err


def test_a_closed_pipe_ends_quietly(tmp_path):
    script = tmp_path / "make.py"
    script.write_text(
        "import sys\n"
        "import pytest_opid\n"
        "from pytest_opid.flink.builder import source\n"
        "stream = source('Kafka')\n"
        "for _ in range(3000):\n"
        "    stream = stream.map('M')\n"
        "sys.stdout.write(pytest_opid.fingerprint(stream.sink('Out')).to_json())\n"
    )
    saved = tmp_path / "big.json"
    saved.write_text(
        subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, check=True
        ).stdout
    )
    done = subprocess.run(
        f"{sys.executable} -m pytest_opid fingerprint {saved} | head -1",
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0
    assert done.stdout.startswith("3002 operators in ")
    assert done.stderr == ""  # no "Broken pipe", no traceback


def test_opid_pin_prints_one_line_per_stateful_operator(capsys, savepoint):
    path, case = savepoint
    code, out, err = run(capsys, "pin", str(path))
    assert code == 0 and err == ""
    stateful = [m for m in case["metadata"] if m["has_state"] or m["coordinator_state"]]
    lines = out.splitlines()
    assert len(lines) == len(stateful)
    for line, state in zip(lines, stateful, strict=True):
        assert f'.setUidHash("{state["operator_id"]}")' in line
        assert f'.set_uid_hash("{state["operator_id"]}")' in line


def test_opid_pin_refuses_a_spark_job(capsys, tmp_path):
    saved = json.loads(
        pytest_opid.fingerprint({"nodes": [{"id": 1, "name": "S"}], "edges": []}).to_json()
    )
    saved["engine"], saved["mode"] = "spark", "batch"
    path = tmp_path / "spark.json"
    path.write_text(json.dumps(saved))
    code, out, err = run(capsys, "pin", str(path))
    assert code == 2 and out == "" and "setUidHash pins are Flink's" in err


def test_program_arguments_are_for_jars(capsys, tmp_path):
    doc = tmp_path / "job.json"
    doc.write_text(json.dumps({"nodes": [{"id": 1, "name": "S"}], "edges": []}))
    code, out, err = run(capsys, "fingerprint", str(doc), "--main-class", "x.Main")
    assert code == 2 and out == "" and "JOB.jar" in err


# -- issue 31, finding 7: one escaping of paths for every command's errors and output ---------


@pytest.mark.parametrize(
    "argv",
    [
        ["fingerprint", "{bad}"],
        ["render", "{bad}"],
        ["diff", "{bad}", "{bad}"],
        ["check-restore", "{bad}", "{bad}"],
        ["checkpoint", "--slim", "{bad}", "{dest}"],
        ["pin", "{bad}"],
        ["savepoint", "{bad}"],
        ["checkpoint", "{bad}"],
    ],
)
@pytest.mark.parametrize("char", ["\x1b", "\x07", "\u202e", "\x9b", "\u061c", "\r"])
def test_a_path_s_control_characters_never_reach_the_terminal_raw(tmp_path, capsys, argv, char):
    from pytest_opid.cli import main

    names = {"bad": str(tmp_path / f"x{char}]0;owned{char}y"), "dest": str(tmp_path / "d")}
    code = main([a.format(**names) for a in argv])
    out, err = capsys.readouterr()
    assert code == 2
    assert char not in out + err, (out, err)
    # the core's escape, or a reader's JSON quoting of the path (the checkpoint reader's "\r")
    escaped = {f"\\u{ord(char):04x}", json.dumps(char)[1:-1]}
    assert any(e in err for e in escaped) and err.count("\n") == 1


@pytest.mark.parametrize(
    "argv",
    [
        ["fingerprint", "{bad}"],
        ["render", "{bad}"],
        ["diff", "{bad}", "{bad}"],
        ["check-restore", "{bad}", "{bad}"],
        ["pin", "{bad}"],
        ["savepoint", "{bad}"],
        ["checkpoint", "{bad}"],
        ["checkpoint", "--slim", "{bad}", "{dest}"],
    ],
)
@pytest.mark.parametrize("char", ["\x1b", "\x07", "\u202e"])
def test_an_existing_folder_s_control_characters_never_reach_the_terminal_raw(
    tmp_path, capsys, argv, char
):
    """The folder exists (no savepoint, no checkpoint, no document in it): each command's own
    refusal names it, escaped, on one line."""
    bad = tmp_path / f"x{char}]0;owned{char}y"
    bad.mkdir()
    names = {"bad": str(bad), "dest": str(tmp_path / "d")}
    code = main([a.format(**names) for a in argv])
    out, err = capsys.readouterr()
    assert code == 2
    assert char not in out + err, (out, err)
    escaped = {f"\\u{ord(char):04x}", json.dumps(char)[1:-1]}
    assert any(e in err for e in escaped) and err.count("\n") == 1, err


def test_pin_escapes_the_names_and_uids_it_prints(tmp_path, capsys):
    doc = {
        "nodes": [
            {"id": 1, "name": "Source\x1b[31m", "uid": "src\x07"},
            {"id": 2, "name": "Count\u202e", "uid": "count"},
        ],
        "edges": [{"source": 1, "target": 2}],
    }
    saved = tmp_path / "fp.json"
    saved.write_text(pytest_opid.fingerprint(doc).to_json())
    code, out, err = run(capsys, "pin", str(saved))
    assert (code, err) == (0, "")
    assert not any(c in out for c in "\x1b\x07\u202e"), out
    assert '"Source\\u001b[31m" (uid "src\\u0007")' in out
    assert '"Count\\u202e"' in out


def test_a_jar_without_pyflink_is_one_line_naming_the_extra(tmp_path, capsys, monkeypatch):
    import zipfile

    jar = tmp_path / "job.jar"
    with zipfile.ZipFile(jar, "w") as z:
        z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nMain-Class: a.Job\n")
    # PyFlink not installed (the flink extra is apart from the spark one): importing it fails.
    monkeypatch.setitem(sys.modules, "pyflink", None)
    monkeypatch.setitem(sys.modules, "pyflink.java_gateway", None)
    code, out, err = run(capsys, "fingerprint", str(jar))
    assert (code, out) == (2, "")
    assert err.startswith(f"error: {jar}: fingerprinting a jar needs PyFlink: pip install")
    assert err.count("\n") == 1
