"""``opid render`` and ``opid diff --render``."""

from __future__ import annotations

import json

import pytest

import pytest_opid
from pytest_opid.cli import main
from tests.render.fixtures import EXAMPLE, PICTURES
from tests.render.test_pictures import check_dot, check_html, check_mermaid, check_svg

CHANGED = str(PICTURES / "fraud_detection_changed.json")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_render_every_format_to_stdout(capsys):
    fp = pytest_opid.fingerprint(EXAMPLE)
    code, out, err = run(capsys, "render", EXAMPLE)
    assert (code, err) == (0, "")
    check_svg(out, fp)
    code, out, _ = run(capsys, "render", EXAMPLE, "--format", "mermaid", "--direction", "LR")
    assert code == 0 and out.startswith("flowchart LR")
    check_mermaid(out, len(fp.operators))
    code, out, _ = run(capsys, "render", EXAMPLE, "--format", "dot")
    check_dot(out, len(fp.operators))
    code, out, _ = run(capsys, "render", EXAMPLE, "--format", "html")
    check_html(out)


def test_render_to_a_file_prints_nothing(capsys, tmp_path):
    target = tmp_path / "job.svg"
    code, out, err = run(capsys, "render", EXAMPLE, "-o", str(target))
    assert (code, out, err) == (0, "", "")
    check_svg(target.read_text(encoding="utf-8"), pytest_opid.fingerprint(EXAMPLE))


def test_render_reads_a_saved_fingerprint_and_stdin(capsys, tmp_path, monkeypatch):
    import io

    saved = tmp_path / "saved.json"
    saved.write_text(pytest_opid.fingerprint(EXAMPLE).to_json(), encoding="utf-8")
    code, out, _ = run(capsys, "render", str(saved), "--input-format", "fingerprint")
    assert code == 0
    check_svg(out, pytest_opid.fingerprint(EXAMPLE))
    monkeypatch.setattr("sys.stdin", io.StringIO(saved.read_text(encoding="utf-8")))
    code, out, _ = run(capsys, "render", "-", "--format", "mermaid")
    assert code == 0 and "Fraud rules engine" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["render", "nope.json"], "nope.json"),
        (["render", EXAMPLE, "--format", "png"], "invalid choice"),
        (["render", EXAMPLE, "--max-nodes", "x"], "whole number"),
        (["render", EXAMPLE, "--direction", "BT"], "invalid choice"),
        (["diff", EXAMPLE, CHANGED, "--render", "png"], "invalid choice"),
        (["render", EXAMPLE, "-o", "/nonexistent-dir/x.svg"], "nonexistent-dir"),
    ],
)
def test_bad_render_arguments_are_one_error_line(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and message in err and len(err.splitlines()) == 1


def test_diff_render_keeps_the_verdict_as_exit_status(capsys, tmp_path):
    old = pytest_opid.fingerprint(EXAMPLE)
    new = pytest_opid.fingerprint(CHANGED)
    target = tmp_path / "diff.svg"
    code, out, err = run(capsys, "diff", EXAMPLE, CHANGED, "--render", "svg", "-o", str(target))
    assert code == 1 and err == ""
    assert out.startswith("Topology not stable [check=ids]")  # the usual text, on stdout
    root = check_svg(target.read_text(encoding="utf-8"), new, ghosts=1)
    assert "Topology not stable" in "".join(root.itertext())
    code, out, _ = run(capsys, "diff", EXAMPLE, CHANGED, "--render", "mermaid")
    assert code == 1 and out.startswith("flowchart TB")
    check_mermaid(out, len(new.operators) + 1)
    code, out, _ = run(
        capsys,
        "diff",
        EXAMPLE,
        CHANGED,
        "--render",
        "html",
        "--json",
        "-o",
        str(tmp_path / "d.html"),
    )
    assert code == 1 and json.loads(out)["loses_state"] is True
    check_html((tmp_path / "d.html").read_text(encoding="utf-8"))
    code, out, _ = run(capsys, "diff", EXAMPLE, EXAMPLE, "--render", "svg", "--hops", "1")
    assert code == 0
    check_svg(out, old)


def test_the_committed_pictures_are_what_the_cli_draws(capsys):
    """docs/pictures/ holds the pictures of docs/pictures.md; they are redrawn by these commands."""
    assert run(capsys, "render", EXAMPLE)[1] == (PICTURES / "topology.svg").read_text("utf-8")
    mermaid = run(capsys, "render", EXAMPLE, "--format", "mermaid")[1]
    assert mermaid == (PICTURES / "topology.mmd").read_text("utf-8")
    diff = run(capsys, "diff", EXAMPLE, CHANGED, "--render", "svg")[1]
    assert diff == (PICTURES / "diff.svg").read_text("utf-8")
