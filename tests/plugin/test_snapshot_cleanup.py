"""Issue 21, items 2 and 3: a snapshot survives a session that did not run its test, and a cut
snapshot is an error, never an empty baseline.

syrupy deletes, under ``--snapshot-update``, the snapshots of every collected test that asserted
none; ``-x``, ``--maxfail``, an interrupt or a deselection leaves tests that never ran, whose
snapshots must stay byte for byte. A snapshot cut short (a crash of another tool, a bad merge)
used to read as a topology of no operators, against which every change passed with a warning.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_opid.errors import DocumentError
from pytest_opid.io.snapshot import dumps, loads
from pytest_opid.plugin.extension import SnapshotPathError, TopologySnapshotExtension, atomic_write
from pytest_opid.result import Fingerprint

# Eight marked tests, one job each; the first fails when fail.txt says so.
MODULE = """
import json
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def job(n):
    nodes = [{"id": 1, "name": f"Source {n}", "parallelism": 2, "source": "new"},
             {"id": 2, "name": "Sink", "parallelism": 2}]
    return {"nodes": nodes, "edges": [{"source": 1, "target": 2, "partitioner": "HASH"}]}


@pytest.mark.stable_topology
def test_0_first(opid):
    assert (HERE / "fail.txt").read_text() != "yes", "the first test fails"
    opid.record(job(0))

""" + "".join(
    f"""
@pytest.mark.stable_topology
def test_{i}_job(opid):
    opid.record(job({i}))
"""
    for i in range(1, 8)
)


@pytest.fixture(autouse=True)
def _not_an_xdist_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", *args)


def snapshots(pytester: pytest.Pytester) -> dict[str, bytes]:
    root = pytester.path / "__snapshots__"
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*.opid")}


@pytest.fixture
def suite(pytester: pytest.Pytester) -> dict[str, bytes]:
    """The eight tests with their eight snapshots written, the first test set to fail."""
    pytester.makepyfile(test_jobs=MODULE)
    (pytester.path / "fail.txt").write_text("no")
    run(pytester, "--snapshot-update").assert_outcomes(passed=8)
    written = snapshots(pytester)
    assert len(written) == 8
    (pytester.path / "fail.txt").write_text("yes")
    return written


@pytest.mark.parametrize("stop", [["-x"], ["--maxfail=1"]])
def test_a_session_stopped_by_the_first_failure_deletes_no_snapshot(
    pytester: pytest.Pytester, suite: dict[str, bytes], stop: list[str]
) -> None:
    result = run(pytester, "--snapshot-update", *stop)
    result.assert_outcomes(failed=1)
    assert snapshots(pytester) == suite  # syrupy alone deletes 7 of the 8
    out = result.stdout.str()
    assert "deleted no unused snapshot, because 7 tests did not run" in out
    assert "deleted." not in out


def test_a_deselection_deletes_no_snapshot(
    pytester: pytest.Pytester, suite: dict[str, bytes]
) -> None:
    result = run(pytester, "--snapshot-update", "-k", "test_3 or test_4")
    result.assert_outcomes(passed=2)
    assert snapshots(pytester) == suite
    assert "6 collected tests were deselected" in result.stdout.str()


def test_a_whole_session_still_deletes_what_no_test_uses(
    pytester: pytest.Pytester, suite: dict[str, bytes]
) -> None:
    """The guard only holds cleanup back: after a run of every test, an unused snapshot (here a
    test removed from the module) is deleted as before, and the others are kept."""
    (pytester.path / "fail.txt").write_text("no")
    pytester.makepyfile(test_jobs=MODULE.split("\n@pytest.mark.stable_topology\ndef test_7")[0])
    result = run(pytester, "--snapshot-update")
    result.assert_outcomes(passed=7)
    left = snapshots(pytester)
    assert sorted(left) == sorted(name for name in suite if "test_7" not in name)
    assert "deleted no unused snapshot" not in result.stdout.str()


def test_a_failing_first_test_without_x_keeps_every_snapshot(
    pytester: pytest.Pytester, suite: dict[str, bytes]
) -> None:
    result = run(pytester, "--snapshot-update")
    result.assert_outcomes(failed=1, passed=7)
    assert snapshots(pytester) == suite


# -- 3. a cut snapshot is damaged, not empty ----------------------------------------------------


def example_snapshot() -> str:
    """A Flink snapshot with every table a Flink job has ([operator details] included)."""
    document = {
        "nodes": [
            {"id": 1, "name": "Source: orders", "parallelism": 2, "source": "new", "uid": "src"},
            {"id": 2, "name": "Parse", "parallelism": 2},
            {"id": 3, "name": "Window", "parallelism": 4, "max_parallelism": 128, "state": True},
            {"id": 4, "name": "Sink", "parallelism": 4},
        ],
        "edges": [
            {"source": 1, "target": 2},
            {"source": 2, "target": 3, "partitioner": "HASH"},
            {"source": 3, "target": 4},
        ],
    }
    return TopologySnapshotExtension().serialize(document)


def test_every_cut_of_a_snapshot_is_an_error_or_the_whole_snapshot() -> None:
    text = example_snapshot()
    assert "[operator details]" in text and text.count("\nv") == 6
    whole = loads(text)
    for end in range(len(text)):
        try:
            read = loads(text[:end])
        except DocumentError:
            continue
        # Only the final newline may go: the text is the same snapshot without it.
        assert read == whole, f"cut at byte {end} of {len(text)} read as another job"
        assert end == len(text) - 1


@pytest.mark.parametrize("keep_lines", [1, 2, 8, 12])
def test_a_cut_snapshot_says_it_is_damaged(keep_lines: int) -> None:
    cut = "\n".join(example_snapshot().split("\n")[:keep_lines]) + "\n"
    with pytest.raises(DocumentError, match=r"^x\.opid: snapshot file is damaged: it has no \["):
        loads(cut, origin="x.opid")


def test_an_empty_job_is_still_read() -> None:
    """Not every small snapshot is damaged: a job of no operators has all its sections."""
    empty = dumps(Fingerprint((), (), None, "flink", "streaming", None))
    assert loads(empty).operators == ()
    assert dumps(loads(empty)) == empty


def test_a_test_fails_against_a_cut_snapshot_and_update_replaces_it(
    pytester: pytest.Pytester, suite: dict[str, bytes]
) -> None:
    (pytester.path / "fail.txt").write_text("no")
    path = pytester.path / "__snapshots__" / "test_jobs" / "test_3_job.opid"
    path.write_bytes(path.read_bytes().split(b"\n")[0] + b"\n")  # cut to its first line
    # The job changes in a way that fails against the whole file (a new source id breaks IDs).
    module = pytester.path / "test_jobs.py"
    module.write_text(module.read_text().replace('f"Source {n}"', 'f"Source {n}", "uid": "s"'))
    result = run(pytester, "-k", "test_3")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "test_3_job.opid: snapshot file is damaged: it has no [job] section" in out
    assert "to replace it, run pytest --snapshot-update" in out
    run(pytester, "--snapshot-update", "-k", "test_3").assert_outcomes(passed=1)
    assert json.dumps(loads(path.read_text()).to_dict()).count('"uid": "s"') == 1
    assert snapshots(pytester).keys() == suite.keys()


def test_a_snapshot_whose_schemas_expand_past_the_bound_is_replaced_by_update(
    pytester: pytest.Pytester, suite: dict[str, bytes]
) -> None:
    """A 3 KB format 6 snapshot nesting runs of five fields eleven deep (48 million fields):
    one line naming file and row, and --snapshot-update replaces it (issue 42)."""
    committed = Path(__file__).resolve().parents[1] / "data" / "snapshots-format5"
    text = dumps(loads((committed / "test_page_view_stats.opid").read_text()), ids_once=True)
    kind = "bigint"
    for _ in range(11):
        kind = f"struct<`A[0]`..`A[4]`: {kind}>"
    buffer = "struct<count: bigint, `MS[0]`..`MS[51]`: bigint>"
    assert buffer in text
    path = pytester.path / "__snapshots__" / "test_jobs" / "test_3_job.opid"
    path.write_text(text.replace(buffer, kind), encoding="utf-8")
    result = run(pytester, "-k", "test_3")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "test_3_job.opid, line " in out and "more than 400000 fields" in out
    assert "to replace it, run pytest --snapshot-update" in out
    assert "MemoryError" not in out and "Traceback" not in out
    run(pytester, "--snapshot-update", "-k", "test_3").assert_outcomes(passed=1)
    assert snapshots(pytester) == suite


# -- 6. what the session's end cannot write or delete --------------------------------------------


def test_a_directory_as_the_html_report_is_one_line(
    pytester: pytest.Pytester, suite: dict[str, bytes]
) -> None:
    (pytester.path / "fail.txt").write_text("no")
    folder = pytester.mkdir("report")
    result = run(pytester, f"--opid-html={folder}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=8)
    out = result.stdout.str()
    assert f"pytest-opid: error: --opid-html: {folder}: cannot write the report: it is a " in out
    assert "Traceback" not in out + result.stderr.str()


def test_an_unused_snapshot_that_cannot_be_deleted_is_reported(
    pytester: pytest.Pytester, suite: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read-only snapshot folder (simulated: tests may run as root, whom no mode stops)."""
    real_unlink = os.unlink

    def read_only(path: object, *args: object, **kwargs: object) -> None:
        if str(path).endswith(".opid"):
            raise PermissionError(13, "Permission denied")
        real_unlink(path, *args, **kwargs)  # type: ignore[arg-type]

    (pytester.path / "fail.txt").write_text("no")
    stale = pytester.path / "__snapshots__" / "test_jobs" / "test_gone.opid"
    stale.write_bytes(suite["test_jobs/test_1_job.opid"])
    monkeypatch.setattr(os, "unlink", read_only)
    result = run(pytester, "--snapshot-update")
    monkeypatch.undo()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    assert f"pytest-opid: error: {stale}: unused, but cannot be deleted (Permission denied)" in out
    assert stale.exists() and "Traceback" not in out
    # syrupy's summary does not claim what did not happen (it said "1 unused snapshot deleted")
    assert "snapshot deleted" not in out and "snapshots deleted" not in out
    assert not [line for line in out.splitlines() if line.startswith("Deleted ")]


def test_the_summary_counts_only_what_was_deleted(
    pytester: pytest.Pytester, suite: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two unused snapshots, one in a read-only place: syrupy's summary says one deleted."""
    real_unlink = os.unlink

    def read_only(path: object, *args: object, **kwargs: object) -> None:
        if str(path).endswith("test_kept.opid"):
            raise PermissionError(13, "Permission denied")
        real_unlink(path, *args, **kwargs)  # type: ignore[arg-type]

    (pytester.path / "fail.txt").write_text("no")
    folder = pytester.path / "__snapshots__" / "test_jobs"
    kept, gone = folder / "test_kept.opid", folder / "test_gone.opid"
    kept.write_bytes(suite["test_jobs/test_1_job.opid"])
    gone.write_bytes(suite["test_jobs/test_1_job.opid"])
    monkeypatch.setattr(os, "unlink", read_only)
    result = run(pytester, "--snapshot-update")
    monkeypatch.undo()
    out = result.stdout.str()
    assert kept.exists() and not gone.exists()
    assert "1 unused snapshot deleted." in out
    deleted = [line for line in out.splitlines() if line.startswith("Deleted ")]
    assert len(deleted) == 1 and "test_gone" in deleted[0], deleted
    assert f"pytest-opid: error: {kept}: unused, but cannot be deleted (Permission denied)" in out


def test_a_snapshot_that_cannot_be_written_names_its_path(tmp_path: Path) -> None:
    path = str(tmp_path / "missing folder" / "x.opid")
    with pytest.raises(SnapshotPathError) as caught:
        atomic_write(path, b"text")
    assert str(caught.value) == (
        f"{path}: cannot be written (No such file or directory); the old file, if any, is unchanged"
    )


def test_a_snapshot_larger_than_the_input_limit_is_unreadable_not_read_whole(
    pytester: pytest.Pytester, suite: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    (pytester.path / "fail.txt").write_text("no")
    monkeypatch.setenv("OPID_MAX_INPUT_BYTES", "100")
    result = run(pytester, "-k", "test_2")
    result.assert_outcomes(failed=1)
    assert "more than the 100-byte limit of an input (OPID_MAX_INPUT_BYTES)" in result.stdout.str()
    assert snapshots(pytester) == suite


def test_a_directory_that_appears_after_the_look_is_refused_without_a_leak(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A directory in the snapshot's place after the extension looked (simulated: the look
    sees none): refused naming the path, its descriptor closed (fdopen of a directory raised
    'Is a directory: <fd>' and left it open)."""
    import pytest_opid.plugin.extension as extension

    folder = tmp_path / "test_x.opid"
    folder.mkdir()
    monkeypatch.setattr(extension, "_existing", lambda path: os.stat(path))
    before = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    with pytest.raises(SnapshotPathError) as caught:
        TopologySnapshotExtension().read_snapshot_data_from_location(
            snapshot_location=str(folder), snapshot_name="x", session_id="s"
        )
    assert str(caught.value).startswith(f"{folder}: is not a regular file")
    if before is not None:
        assert len(os.listdir("/proc/self/fd")) == before
