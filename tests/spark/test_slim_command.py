"""``opid checkpoint --slim SRC DEST`` (issue 20): the trimmed copy of a checkpoint to keep in a
repository holds no state data, reads as the checkpoint itself for all 66 real Spark 4.3
checkpoints of ``tests/data/spark-restart``, and gives the same restart verdicts; bad input is
one line and exit 2, and an existing DEST is never touched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import pytest_opid
from pytest_opid.cli import main
from pytest_opid.spark.checkpoint import read_checkpoint

from .restart_cases import build, extract, load_cases

CASES = load_cases()
STATE_DATA = (".delta", ".snapshot", ".zip", ".sst", ".changelog", ".crc")


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def _slim(capsys: pytest.CaptureFixture[str], src: Path, dest: Path) -> str:
    code = main(["checkpoint", "--slim", str(src), str(dest)])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    return out


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_the_slim_copy_reads_as_the_checkpoint(tmp_path, capsys, case_id):
    folder = extract(CASES[case_id], tmp_path)
    src, dest = folder / "checkpoint", tmp_path / "kept" / "checkpoint"
    out = _slim(capsys, src, dest)
    assert out.startswith(f"wrote {dest}: ") and "no state data" in out
    kept = _files(dest)
    assert not [name for name in kept if name.endswith(STATE_DATA)]
    for name in kept:  # only what the docs say to keep
        top, *rest = name.split("/")
        assert top in ("metadata", "offsets", "commits", "sources") or (
            top == "state" and ("_metadata" in rest or "_stateSchema" in rest)
        ), name
    assert {"metadata"} <= kept and any(n.startswith("offsets/") for n in kept)
    assert len(kept) < len(_files(src))
    expected, got = read_checkpoint(src).to_dict(), read_checkpoint(dest).to_dict()
    expected.pop("path"), got.pop("path")
    assert got == expected
    # the text `opid checkpoint` prints is the same but for the folder's name
    assert main(["checkpoint", str(src)]) == 0
    full_text = capsys.readouterr().out.split("\n", 1)[1]
    assert main(["checkpoint", str(dest)]) == 0
    assert capsys.readouterr().out.split("\n", 1)[1] == full_text


def _one_per_template() -> list[str]:
    chosen: dict[str, str] = {}
    for case_id, rec in sorted(CASES.items()):
        chosen.setdefault(rec["case"]["template"], case_id)
    return sorted(chosen.values())


@pytest.mark.parametrize("case_id", _one_per_template())
def test_the_slim_copy_gives_the_same_verdict(spark, tmp_path, capsys, case_id):
    rec = CASES[case_id]
    folder = extract(rec, tmp_path)
    dest = tmp_path / "kept"
    _slim(capsys, folder / "checkpoint", dest)
    b = pytest_opid.fingerprint(build(spark, rec, "after", folder))
    full = pytest_opid.check_restore(folder / "checkpoint", b)
    slim = pytest_opid.check_restore(dest, b)
    assert (slim.restorable, slim.safe) == (full.restorable, full.safe)
    assert _without_paths(slim.to_dict(), dest) == _without_paths(
        full.to_dict(), folder / "checkpoint"
    )
    assert full.restorable == (rec["spark"]["outcome"] == "restarted")


def _without_paths(data: Any, root: Path) -> Any:
    if isinstance(data, dict):
        return {k: _without_paths(v, root) for k, v in data.items()}
    if isinstance(data, list):
        return [_without_paths(v, root) for v in data]
    if isinstance(data, str):
        return data.replace(str(root), "<checkpoint>")
    return data


def test_an_existing_dest_is_refused_and_left_alone(tmp_path, capsys):
    folder = extract(CASES["dedup_then_agg__no_change__100034"], tmp_path)
    dest = tmp_path / "kept"
    dest.mkdir()
    (dest / "mine.txt").write_text("keep me", encoding="utf-8")
    assert main(["checkpoint", "--slim", str(folder / "checkpoint"), str(dest)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"error: {dest}: already exists; give a new directory to write the copy to\n"
    assert _files(dest) == {"mine.txt"}


def test_a_dest_inside_the_checkpoint_is_refused(tmp_path, capsys):
    folder = extract(CASES["dedup_then_agg__no_change__100034"], tmp_path)
    src = folder / "checkpoint"
    before = _files(src)
    assert main(["checkpoint", "--slim", str(src), str(src / "state" / "kept")]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == (
        "",
        f"error: {src / 'state' / 'kept'}: inside the checkpoint {src}; give a folder outside it\n",
    )
    assert _files(src) == before


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--slim", "{missing}", "{dest}"], "{missing}: not a directory"),
        (["--slim", "{tmp}", "{dest}"], "{tmp}/metadata: "),
        (["--slim", "{missing}"], "write a trimmed copy with: opid checkpoint --slim DIR DEST"),
        (["{missing}", "{dest}"], "write a trimmed copy with: opid checkpoint --slim DIR DEST"),
        (["--slim", "--json", "{tmp}", "{dest}"], "write a trimmed copy with"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv, message):
    names = {
        "missing": str(tmp_path / "nowhere"),
        "dest": str(tmp_path / "d"),
        "tmp": str(tmp_path),
    }
    code = main(["checkpoint", *(a.format(**names) for a in argv)])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err.startswith("error: " + message.format(**names)) and err.count("\n") == 1
    assert "Traceback" not in err
    assert not (tmp_path / "d").exists()
