"""``opid checkpoint --slim SRC DEST`` (issue 20): the trimmed copy of a checkpoint to keep in a
repository holds no state data, reads as the checkpoint itself for all 66 real Spark 4.3
checkpoints of ``tests/data/spark-restart``, and gives the same restart verdicts; bad input is
one line and exit 2, and an existing DEST is never touched."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import pytest_opid
from pytest_opid.cli import main
from pytest_opid.spark.checkpoint.read import read_checkpoint
from tests.spark.restart_cases import build, extract, load_cases

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
        assert top in ("metadata", "offsets", "commits", "sources", "_opid_slim.json") or (
            top == "state" and ("_metadata" in rest or "_stateSchema" in rest)
        ), name
    assert {"metadata"} <= kept and any(n.startswith("offsets/") for n in kept)
    assert len(kept) < len(_files(src))
    expected, got = read_checkpoint(src).to_dict(), read_checkpoint(dest).to_dict()
    expected.pop("path"), got.pop("path")
    # the copy knows the checkpoint it was copied from
    assert got.pop("copied_from") == str(src)
    assert got == expected
    # the text `opid checkpoint` prints is the same but for the folder's name
    assert main(["checkpoint", str(src)]) == 0
    full_text = capsys.readouterr().out.split("\n", 1)[1]
    assert main(["checkpoint", str(dest)]) == 0
    assert capsys.readouterr().out.split("\n", 1)[1] == full_text


#: Templates whose queries need a newer PySpark than 3.5 to be built at all.
NEEDS = {
    "transform_with_state_pandas": ("4.0", "transformWithStateInPandas is in PySpark from 4.0 on"),
    "named_sources_union": (
        "4.3",
        "named sources (DataStreamReader.name(), PySpark 4.2+) as Spark 4.3 restarted them",
    ),
}


def _one_per_template() -> list[Any]:
    chosen: dict[str, str] = {}
    for case_id, rec in sorted(CASES.items()):
        chosen.setdefault(rec["case"]["template"], case_id)
    out = []
    for template, case_id in sorted(chosen.items(), key=lambda item: item[1]):
        need = NEEDS.get(template)
        marks = () if need is None else (pytest.mark.spark_line(need[0], reason=need[1]),)
        out.append(pytest.param(case_id, marks=marks, id=case_id))
    return out


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


# -- issue 31, finding 1: regular files only, a budget, DEST only when complete -----------------


def _source(tmp_path: Path) -> Path:
    return extract(CASES["dedup_then_agg__no_change__100034"], tmp_path) / "checkpoint"


def _leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.endswith(".tmp"))


def _refused(capsys, src: Path, dest: Path, *extra: str) -> str:
    code = main(["checkpoint", "--slim", *extra, str(src), str(dest)])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "") and err.count("\n") == 1, err
    assert not dest.exists() and _leftovers(dest.parent) == []
    return err


def test_a_fifo_where_a_kept_file_should_be_is_refused_naming_it(tmp_path, capsys):
    """Before: copyfile() waited on the FIFO for ever."""
    src = _source(tmp_path)
    os.mkfifo(src / "sources" / "pipe")
    err = _refused(capsys, src, tmp_path / "kept")
    assert err.startswith(f"error: {src / 'sources' / 'pipe'}: it is a FIFO (named pipe)")


def test_a_character_device_where_a_kept_file_should_be_is_refused(tmp_path, capsys):
    """Before: a device under sources/ (tar x as root makes one) was copied without end."""
    src = _source(tmp_path)
    device = src / "sources" / "zero"
    zero = os.stat("/dev/zero").st_rdev
    try:
        os.mknod(device, 0o600 | stat.S_IFCHR, zero)
    except PermissionError:  # not root: the same path as a FIFO's, through a link's target
        pytest.skip("creating a device node needs CAP_MKNOD")
    err = _refused(capsys, src, tmp_path / "kept")
    assert err.startswith(f"error: {device}: it is a device, not a regular file")


def test_a_file_over_the_budget_is_refused_before_anything_is_written(tmp_path, capsys):
    """Before: a 3 GB sparse junk file was written out dense."""
    src = _source(tmp_path)
    junk = src / "sources" / "junk"
    with open(junk, "wb") as f:
        f.truncate(3 * 1024**3)  # sparse: no disk used
    err = _refused(capsys, src, tmp_path / "kept")
    assert err.startswith(f"error: {junk}: 3072.0 MB, over the 256.0 MB a kept file may hold")


def test_the_budget_in_all_is_a_flag(tmp_path, capsys):
    from pytest_opid.spark.checkpoint.slim import _plan

    src = _source(tmp_path)
    sizes = _plan(src, 10**9)[0].values()
    budget = max(sizes)  # every file fits, all of them do not
    assert sum(sizes) > budget
    err = _refused(capsys, src, tmp_path / "kept", "--max-bytes", str(budget))
    assert "the copy would exceed " in err and "in all; raise it with --max-bytes" in err
    _slim(capsys, src, tmp_path / "kept")  # the default budget holds the whole copy


def test_a_link_is_skipped_and_listed(tmp_path, capsys):
    src = _source(tmp_path)
    (src / "sources" / "elsewhere").symlink_to(tmp_path)
    out = _slim(capsys, src, tmp_path / "kept")
    assert out.splitlines()[1] == "skipped 1 symbolic links (not followed): sources/elsewhere"
    assert not (tmp_path / "kept" / "sources" / "elsewhere").exists()


def test_ctrl_c_removes_the_partial_copy_and_is_one_line(tmp_path, capsys, monkeypatch):
    """Before: a traceback (KeyboardInterrupt escaped main())."""
    from pytest_opid.spark.checkpoint import slim

    real = slim._copy_file
    calls = []

    def interrupted(*args: Any) -> int:
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(slim, "_copy_file", interrupted)
    err = _refused(capsys, _source(tmp_path), tmp_path / "kept")
    assert (
        err == f"error: {tmp_path / 'kept'}: interrupted; the partial copy was removed, "
        "nothing was written\n"
    )


def test_sigterm_removes_the_partial_copy_and_is_one_line(tmp_path):
    """Before: the process died at once and left a half-written DEST."""
    src, dest = _source(tmp_path), tmp_path / "kept"
    script = (
        "import os, signal, sys\n"
        "from pytest_opid.spark.checkpoint import slim\n"
        "from pytest_opid.cli import main\n"
        "real = slim._copy_file\n"
        "def term(*args):\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    return real(*args)\n"
        "slim._copy_file = term\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, "checkpoint", "--slim", str(src), str(dest)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert (
        done.stderr == f"error: {dest}: interrupted; the partial copy was removed, "
        "nothing was written\n"
    )
    assert not dest.exists() and _leftovers(tmp_path) == []
