"""Nothing lost: a committed snapshot is the user's record of production.

No path through the plugin may delete, truncate or overwrite a snapshot the user did not ask to
replace: a failing test keeps its baseline under ``--snapshot-update``, two tests sharing one
snapshot file are an error, writes are atomic (checked by killing a real ``pytest
--snapshot-update`` with SIGKILL mid-write), links and directories at a snapshot path are
refused, unreadable snapshots get one short line, and names cannot forge output lines.

Inner sessions run in-process through pytester unless a real process is the point (SIGKILL,
pytest-xdist). They read their jobs from JSON files next to the test module, so a scenario
changes the job by rewriting data, never the already imported module.
"""

from __future__ import annotations

import json
import os
import random
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

import pytest_opid
from pytest_opid.io.snapshot import loads
from pytest_opid.plugin.extension import SnapshotPathError, TopologySnapshotExtension, atomic_write

LOADER = """
import json
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def load(name):
    return json.loads((HERE / name).read_text(encoding="utf-8"))


def mode():
    return (HERE / "mode.txt").read_text().strip()
"""

MODULE = (
    LOADER
    + """

@pytest.mark.stable_topology
def test_orders(opid):
    opid.record(load("orders.json"))
"""
)


def job(*, renamed: bool = False, insert: bool = False, names: dict | None = None) -> dict:
    """Kafka -> Parse -> keyBy -> Window -> Sink as a topology document; ``insert`` adds a
    filter behind the source (which changes every ID below it)."""
    names = {
        1: "Source: Kafka orders",
        2: "Map: parse" if renamed else "Parse JSON",
        3: "Count per customer" if renamed else "Window(Tumbling 1 min)",
        4: "Sink: Postgres",
        **(names or {}),
    }
    nodes = [{"id": 1, "name": names[1], "parallelism": 4, "source": "new"}]
    edges = []
    upstream = 1
    if insert:
        nodes.append({"id": 7, "name": names.get(7, "Filter: valid"), "parallelism": 4})
        edges.append({"source": 1, "target": 7})
        upstream = 7
    nodes += [{"id": i, "name": names[i], "parallelism": 4} for i in (2, 3, 4)]
    edges += [
        {"source": upstream, "target": 2},
        {"source": 2, "target": 3, "partitioner": "HASH"},
        {"source": 3, "target": 4},
    ]
    return {"nodes": nodes, "edges": edges}


@pytest.fixture(autouse=True)
def _not_an_xdist_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """When this suite itself runs under pytest-xdist, the inner sessions must not believe
    they are workers (syrupy asks the environment), or they print no snapshot report."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)


def write(pytester: pytest.Pytester, name: str, data: dict | str) -> None:
    text = data if isinstance(data, str) else json.dumps(data)
    (pytester.path / name).write_text(text, encoding="utf-8")


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", *args)


def snapshots(pytester: pytest.Pytester) -> dict[str, bytes]:
    """Every file under ``__snapshots__``, byte for byte."""
    root = pytester.path / "__snapshots__"
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def one_line_about(out: str, needle: str) -> str:
    """The only output line that holds ``needle``."""
    lines = [line for line in out.splitlines() if needle in line]
    assert len(lines) == 1, lines
    return lines[0]


# -- 1. a failing or erroring test keeps its snapshot -------------------------------------------

FAILING = (
    LOADER
    + """

@pytest.mark.stable_topology
def test_raises_before_record(opid):
    if mode() == "broken":
        raise RuntimeError("the job could not be built")
    opid.record(load("orders.json"))


@pytest.mark.stable_topology
def test_records_an_invalid_topology(opid):
    opid.record(load("broken.json" if mode() == "broken" else "orders.json"))


@pytest.mark.stable_topology
def test_assert_fails_after_record(opid):
    opid.record(load("orders.json"))
    assert mode() != "broken"


@pytest.mark.stable_topology
def test_second_record_raises(opid):
    opid.record(load("orders.json"), name="first")
    opid.record(load("broken.json" if mode() == "broken" else "orders.json"), name="second")


@pytest.fixture
def database():
    if mode() == "broken":
        raise RuntimeError("no database")


@pytest.mark.stable_topology
def test_setup_errors(database, opid):
    opid.record(load("orders.json"))


@pytest.mark.stable_topology
def test_passes(opid):
    opid.record(load("orders.json"))
"""
)


def test_a_failing_or_erroring_test_keeps_its_snapshot(pytester: pytest.Pytester):
    pytester.makepyfile(test_jobs=FAILING)
    write(pytester, "orders.json", job())
    write(pytester, "broken.json", {"nodes": [{"id": 1}], "edges": []})  # no name: OpidError
    write(pytester, "mode.txt", "ok")
    result = run(pytester, "--snapshot-update")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*7 snapshots generated.*"])
    baseline = snapshots(pytester)
    assert len(baseline) == 7

    # The job changes (an update would rewrite every snapshot) and the tests break, in every
    # way a test can: an exception before record(), an invalid topology, a failing assert
    # after record(), a second record() that raises, an error in a fixture.
    write(pytester, "orders.json", job(insert=True))
    write(pytester, "mode.txt", "broken")
    result = run(pytester, "--snapshot-update", "-rfE")
    result.assert_outcomes(passed=1, failed=4, errors=1)
    out = result.stdout.str()
    assert "deleted" not in out and "unused" not in out
    result.stdout.fnmatch_lines(["*6 snapshots failed. 1 snapshot updated.*"])
    after = snapshots(pytester)
    updated = "test_jobs/test_passes.opid"
    assert after.keys() == baseline.keys()
    assert {k: v for k, v in after.items() if k != updated} == {
        k: v for k, v in baseline.items() if k != updated
    }
    assert after[updated] != baseline[updated]  # only what passed its own body is updated
    assert '"Filter: valid"' in after[updated].decode()

    # Without --snapshot-update the kept snapshots are not reported unused either.
    result = run(pytester)
    result.assert_outcomes(passed=1, failed=4, errors=1)
    assert "unused" not in result.stdout.str()

    # Fixed again: the kept baselines are what the tests compare with (and fail: the job
    # changed), and an update then accepts the change.
    write(pytester, "mode.txt", "ok")
    result = run(pytester)
    result.assert_outcomes(passed=1, failed=5)
    assert result.stdout.str().count("3 operators would lose their state") == 6  # 2 in one test
    run(pytester, "--snapshot-update").assert_outcomes(passed=6)
    run(pytester).assert_outcomes(passed=6)
    assert snapshots(pytester).keys() == baseline.keys()


def test_a_failed_check_keeps_the_snapshots_the_test_no_longer_asserts(pytester: pytest.Pytester):
    """A test that fails its check under --snapshot-update (here: a link refuses the write)
    keeps its other snapshots too, even one it stopped recording."""
    if os.name == "nt":
        pytest.skip("symbolic links need privileges on Windows")
    pytester.makepyfile(
        test_jobs=LOADER
        + """

@pytest.mark.stable_topology
def test_two(opid):
    opid.record(load("orders.json"), name="a")
    if mode() == "both":
        opid.record(load("orders.json"), name="b")
"""
    )
    write(pytester, "orders.json", job())
    write(pytester, "mode.txt", "both")
    run(pytester, "--snapshot-update").assert_outcomes(passed=1)
    folder = pytester.path / "__snapshots__" / "test_jobs"
    target = pytester.path / "elsewhere.opid"
    target.write_bytes((folder / "test_two[a].opid").read_bytes())
    (folder / "test_two[a].opid").unlink()
    (folder / "test_two[a].opid").symlink_to(target)
    old_b = (folder / "test_two[b].opid").read_bytes()
    write(pytester, "mode.txt", "one")
    write(pytester, "orders.json", job(renamed=True))
    result = run(pytester, "--snapshot-update")
    result.assert_outcomes(failed=1)
    assert "deleted" not in result.stdout.str()
    assert (folder / "test_two[b].opid").read_bytes() == old_b
    assert target.read_text() == (folder / "test_two[a].opid").read_text()
    assert "Map: parse" not in target.read_text()


# -- 2. two tests, one snapshot file: an error naming both ---------------------------------------

COLLIDING = """
import pytest
from pytest_opid.flink.builder import source

LONG = "x" * 260


@pytest.mark.stable_topology
@pytest.mark.parametrize("name", ["job:0", "job0"])
def test_punctuation(opid, name):
    opid.record(source(name).map("Parse"))


@pytest.mark.stable_topology
@pytest.mark.parametrize("name", ["1", "2"], ids=[LONG + "1", LONG + "2"])
def test_long_ids(opid, name):
    opid.record(source(name).map("Parse"))


@pytest.mark.stable_topology
@pytest.mark.parametrize("name", ["x"], ids=[LONG])
def test_two_names_one_file(opid, name):
    opid.record(source("a").map("Parse"), name="a")
    opid.record(source("b").map("Parse"), name="b")
"""


def test_two_tests_that_map_to_one_snapshot_file_are_an_error(pytester: pytest.Pytester):
    pytester.makepyfile(test_collide=COLLIDING)
    for args in (["--snapshot-update"], []):
        result = run(pytester, *args)
        result.assert_outcomes(passed=2, failed=3)
        out = result.stdout.str()
        punctuation = one_line_about(out, "test_punctuation[job0] map to one snapshot file")
        assert punctuation.startswith(
            "test_collide.py::test_punctuation[job:0] and test_collide.py::test_punctuation[job0]"
            " map to one snapshot file, __snapshots__/test_collide/test_punctuation[job0].opid,"
            " and would overwrite each other's snapshot"
        )
        assert "pytest.param(..., id=...)" in punctuation
        long_ids = one_line_about(out, "2] map to one snapshot file")
        assert "test_long_ids[" + "x" * 260 + "1] and test_collide.py::test_long_ids[" in long_ids
        assert "cuts them at 250 characters" in long_ids
        one_line_about(out, "records two topologies ('a' and 'b') that map to one snapshot file")
    folder = pytester.path / "__snapshots__" / "test_collide"
    # The first test of each pair wrote its snapshot; the second never overwrote it.
    punctuation_file = (folder / "test_punctuation[job0].opid").read_text()
    assert '"Source: job:0"' in punctuation_file and '"Source: job0"' not in punctuation_file
    (long_file,) = [p for p in folder.iterdir() if p.name.startswith("test_long_ids")]
    assert len(long_file.name) == 255 and '"Source: 1"' in long_file.read_text()


def test_xdist_finds_collisions_across_workers_and_keeps_failed_snapshots(
    pytester: pytest.Pytester,
):
    """Each worker only sees its own tests; the controller compares their claims at the end
    and fails the session naming both tests. A failed test's snapshot survives the controller's
    unused-snapshot cleanup: its worker's report says the snapshot is in use."""
    pytester.makepyfile(
        test_failing=MODULE.replace(
            "    opid.record(", "    assert mode() == 'ok'\n    opid.record("
        )
    )
    write(pytester, "orders.json", job())
    write(pytester, "mode.txt", "ok")
    run(pytester, "--snapshot-update", "test_failing.py").assert_outcomes(passed=1)
    kept = pytester.path / "__snapshots__" / "test_failing" / "test_orders.opid"
    baseline = kept.read_bytes()
    write(pytester, "mode.txt", "broken")
    write(pytester, "orders.json", job(insert=True))
    pytester.makepyfile(
        test_collide="""
import pytest
from pytest_opid.flink.builder import source


@pytest.mark.stable_topology
@pytest.mark.parametrize("name", [
    pytest.param("job:0", marks=pytest.mark.xdist_group("one")),
    pytest.param("job0", marks=pytest.mark.xdist_group("two")),
])
def test_punctuation(opid, name):
    opid.record(source(name).map("Parse"))
"""
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup", "-v", "--snapshot-update"
    )
    out = result.stdout.str()
    workers = {
        line.split("]")[0]
        for line in out.splitlines()
        if line.startswith("[gw") and "test_punctuation" in line
    }
    if len(workers) == 2:  # one test per worker: both pass there, the controller objects
        result.assert_outcomes(passed=2, failed=1)
        result.stdout.fnmatch_lines(["*pytest-opid: tests sharing a snapshot file*"])
    else:  # both on one worker: found there, as without xdist
        result.assert_outcomes(passed=1, failed=2)
    assert result.ret != 0
    line = one_line_about(out, "map to one snapshot file")
    assert "test_punctuation[job0]" in line and "test_punctuation[job:0]" in line
    assert kept.read_bytes() == baseline
    assert "deleted" not in out and "unused" not in out


# -- 3. atomic writes, checked with SIGKILL ------------------------------------------------------

BIG = """
from pathlib import Path

import pytest
from pytest_opid.flink.builder import source

HERE = Path(__file__).parent
SIZE = 20_000


def big_job(version, size=SIZE):
    stream = source("Events")
    for i in range(size):
        stream = stream.map(f"step {i} of a long linear pipeline ({version})")
        if i % 3 == 0:
            stream = stream.disable_chaining()
    return stream.sink("Archive")


@pytest.mark.stable_topology
def test_big(opid):
    opid.record(big_job((HERE / "version.txt").read_text()))
"""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")
def test_a_killed_update_leaves_the_old_or_the_new_snapshot_never_a_part(
    pytester: pytest.Pytester,
):
    """A real ``pytest --snapshot-update`` of a multi-MB snapshot, killed with SIGKILL at
    random moments while it writes (from when its temporary file appears to a little after
    the rename): the snapshot is the old baseline or the new text, byte for byte."""
    pytester.makepyfile(test_big=BIG)
    folder = pytester.path / "__snapshots__" / "test_big"
    folder.mkdir(parents=True)
    path = folder / "test_big.opid"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--snapshot-update"]
    command.append("test_big.py")

    def attempt(kill_after: float | None, baseline: bytes | None) -> tuple[bool, float]:
        """Run the update from ``baseline``; kill it ``kill_after`` seconds after its
        temporary file appears. Whether a temporary file was seen, and for how long."""
        for leftover in folder.iterdir():
            leftover.unlink()
        if baseline is not None:
            path.write_bytes(baseline)
        process = subprocess.Popen(
            command,
            cwd=pytester.path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        seen = gone = None
        try:
            while process.poll() is None:
                temporary = any(n.endswith(".tmp") for n in os.listdir(folder))
                now = time.monotonic()
                if temporary and seen is None:
                    seen = now
                    if kill_after is not None:
                        time.sleep(kill_after)
                        process.send_signal(signal.SIGKILL)
                        break
                elif seen is not None and not temporary and gone is None:
                    gone = now
                time.sleep(0.0002)
        finally:
            process.wait(timeout=60)
        if kill_after is None:
            assert process.returncode == 0
        else:
            assert process.returncode == -signal.SIGKILL
        return seen is not None, (gone or seen or 0) - (seen or 0)

    # The old baseline and the new text, each written by an uninterrupted run; the second
    # also measures how long a write takes (temporary file created -> renamed over the file).
    write(pytester, "version.txt", "v1")
    attempt(None, None)
    old = path.read_bytes()
    write(pytester, "version.txt", "v2")
    seen, duration = attempt(None, old)
    new = path.read_bytes()
    assert seen and len(old) > 3_000_000 and old != new
    assert new == old.replace(b"(v1)", b"(v2)")
    rng = random.Random(20240229)
    outcomes = []
    # The first kill comes as soon as the temporary file shows, the others at random moments
    # up to a little after the write would have finished.
    for delay in [0.0] + [rng.uniform(0, 1.5 * max(duration, 0.002)) for _ in range(4)]:
        seen, _ = attempt(delay, old)
        assert seen
        data = path.read_bytes()
        assert data in (old, new), f"a cut snapshot: {len(data)} of {len(old)} or {len(new)}"
        assert stat.S_ISREG(path.lstat().st_mode)
        outcomes.append("new" if data == new else "old")
    assert "old" in outcomes  # at least one kill landed before the rename


def test_a_failed_write_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    path = tmp_path / "test_x.opid"
    path.write_bytes(b"old")
    path.chmod(0o640)

    def full_disk(fd: int) -> None:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(os, "fsync", full_disk)
        # One line naming the file (SnapshotPathError), as the failing test shows it.
        with pytest.raises(SnapshotPathError, match="cannot be written \\(No space left"):
            atomic_write(str(path), b"new")
    assert path.read_bytes() == b"old" and os.listdir(tmp_path) == ["test_x.opid"]
    atomic_write(str(path), b"new")
    assert path.read_bytes() == b"new" and os.listdir(tmp_path) == ["test_x.opid"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o640  # the old file's permissions are kept


# -- 4. a symbolic link at a snapshot path is refused --------------------------------------------


@pytest.mark.skipif(os.name == "nt", reason="symbolic links need privileges on Windows")
def test_a_link_at_a_snapshot_path_is_refused(pytester: pytest.Pytester):
    pytester.makepyfile(test_pipeline=MODULE)
    write(pytester, "orders.json", job())
    run(pytester, "--snapshot-update").assert_outcomes(passed=1)
    path = pytester.path / "__snapshots__" / "test_pipeline" / "test_orders.opid"
    target = pytester.path / "shared" / "orders.opid"
    target.parent.mkdir()
    target.write_bytes(path.read_bytes())
    baseline = target.read_bytes()
    path.unlink()
    path.symlink_to(target)
    write(pytester, "orders.json", job(renamed=True))
    for args in (["--snapshot-update"], []):
        result = run(pytester, *args)
        result.assert_outcomes(failed=1)
        line = one_line_about(result.stdout.str(), "is a symbolic link")
        assert line.startswith(
            "Snapshot test_orders (__snapshots__/test_pipeline/test_orders.opid): is a symbolic "
            "link; pytest-opid never reads or writes a snapshot through a link"
        )
        assert path.is_symlink() and os.readlink(path) == str(target)
        assert target.read_bytes() == baseline
        assert os.listdir(path.parent) == ["test_orders.opid"]

    # A dangling link is refused too: the file it names is not created.
    target.unlink()
    result = run(pytester, "--snapshot-update")
    result.assert_outcomes(failed=1)
    one_line_about(result.stdout.str(), "is a symbolic link")
    assert not target.exists() and path.is_symlink()

    # Directly: atomic_write refuses it, and an unused link is removed, never its target.
    target.write_bytes(baseline)
    with pytest.raises(SnapshotPathError, match="symbolic link"):
        atomic_write(str(path), b"new")
    TopologySnapshotExtension().delete_snapshots(snapshot_location=str(path), snapshot_names=set())
    assert not path.is_symlink() and target.read_bytes() == baseline


# -- 5. an unreadable snapshot: one line, then --snapshot-update ---------------------------------


def test_a_snapshot_that_is_not_utf8_is_one_line_and_is_replaced(pytester: pytest.Pytester):
    pytester.makepyfile(test_pipeline=MODULE)
    write(pytester, "orders.json", job())
    path = pytester.path / "__snapshots__" / "test_pipeline" / "test_orders.opid"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"# pytest-opid topology snapshot, format 2\n\xff\xfe\x00garbage\n")
    result = run(pytester)
    result.assert_outcomes(failed=1)
    line = one_line_about(result.stdout.str(), "not UTF-8")
    assert line == (
        "Snapshot test_orders (__snapshots__/test_pipeline/test_orders.opid): not UTF-8 text "
        "(byte 42 is 0xff); to replace it, run pytest --snapshot-update"
    )
    assert len(line) < 300
    result = run(pytester, "--snapshot-update")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*1 snapshot updated.*"])
    assert loads(path.read_text(encoding="utf-8")).operators[1].name == "Parse JSON"
    run(pytester).assert_outcomes(passed=1)


def test_a_snapshot_that_is_garbage_text_is_one_line(pytester: pytest.Pytester):
    pytester.makepyfile(test_pipeline=MODULE)
    write(pytester, "orders.json", job())
    path = pytester.path / "__snapshots__" / "test_pipeline" / "test_orders.opid"
    path.parent.mkdir(parents=True)
    path.write_text("<<<<<<< HEAD\n", encoding="utf-8")  # say, a merge conflict
    result = run(pytester)
    result.assert_outcomes(failed=1)
    line = one_line_about(result.stdout.str(), "not a pytest-opid topology snapshot")
    assert line.startswith("Snapshot test_orders: __snapshots__/test_pipeline/test_orders.opid:")
    assert line.endswith("to replace it, run pytest --snapshot-update") and len(line) < 300
    run(pytester, "--snapshot-update").assert_outcomes(passed=1)
    run(pytester).assert_outcomes(passed=1)


def test_a_directory_at_a_snapshot_path_is_never_deleted(pytester: pytest.Pytester):
    """Decision: pytest-opid never deletes a directory, even under --snapshot-update; it says
    so in one line, and the user moves it away."""
    pytester.makepyfile(test_pipeline=MODULE)
    write(pytester, "orders.json", job())
    path = pytester.path / "__snapshots__" / "test_pipeline" / "test_orders.opid"
    path.mkdir(parents=True)
    (path / "notes.txt").write_text("someone's work")
    expected = (
        "Snapshot test_orders (__snapshots__/test_pipeline/test_orders.opid): is a directory, "
        "not a snapshot file; pytest-opid never deletes a directory: move it away, then run "
        "pytest --snapshot-update"
    )
    for args in ([], ["--snapshot-update"]):
        result = run(pytester, *args)
        result.assert_outcomes(failed=1)
        assert one_line_about(result.stdout.str(), "is a directory") == expected
        assert len(expected) < 300
        assert (path / "notes.txt").read_text() == "someone's work"
    with pytest.raises(SnapshotPathError, match="is a directory"):
        atomic_write(str(path), b"new")
    with pytest.warns(UserWarning, match="never deletes a directory"):
        TopologySnapshotExtension().delete_snapshots(
            snapshot_location=str(path), snapshot_names=set()
        )
    assert (path / "notes.txt").is_file()
    (path / "notes.txt").unlink()
    path.rmdir()
    run(pytester, "--snapshot-update").assert_outcomes(passed=1)
    run(pytester).assert_outcomes(passed=1)


# -- 6. names cannot forge output ----------------------------------------------------------------

FORGED = "\n\x1b[31mE   forged\u2028\u202e"


def uids(doc: dict, **changed: str) -> dict:
    """Every operator pinned with a uid (so only what a test changes moves an ID)."""
    for node in doc["nodes"]:
        node["uid"] = changed.get(f"n{node['id']}", f"uid-{node['id']}")
    return doc


def test_names_cannot_forge_lines_or_escapes_in_messages_and_warnings(pytester: pytest.Pytester):
    pytester.makepyfile(test_pipeline=MODULE)
    write(pytester, "orders.json", uids(job(names={2: "Parse" + FORGED})))
    run(pytester, "--snapshot-update").assert_outcomes(passed=1)

    # A new operator with that name: the OpidSnapshotWarning names it.
    doc = uids(job(insert=True, names={2: "Parse" + FORGED, 7: "Filter" + FORGED}))
    doc["nodes"][1].pop("uid")
    write(pytester, "orders.json", doc)
    result = run(pytester, "-W", "default")
    result.assert_outcomes(passed=1, warnings=1)
    # The operator with that name changes its ID: the failure names it.
    write(pytester, "orders.json", uids(job(names={2: "Parse" + FORGED}), n2="another"))
    failed = run(pytester)
    failed.assert_outcomes(failed=1)
    for name, out in (("Filter", result.stdout.str()), ("Parse", failed.stdout.str())):
        assert f'"{name}\\n\\u001b[31mE   forged\\u2028\\u202e"' in out
        assert not any(line.lstrip().startswith("E   forged") for line in out.splitlines())
        for raw in ("\x1b", "\u2028", "\u2029", "\u202e", "\x85", "\r"):
            assert raw not in out


def test_the_message_filter_escapes_what_a_quote_might_miss():
    from pytest_opid.plugin.session import safe as _safe

    assert _safe('a\tb\n"c"') == 'a\tb\n"c"'
    assert _safe("x\x1b[31m\r\x85\u2028\u2029\u202e\u2066\ufeff") == (
        "x\\u001b[31m\\u000d\\u0085\\u2028\\u2029\\u202e\\u2066\\ufeff"
    )


# -- 7. line and paragraph separators in names survive every change ------------------------------

SEPARATORS = {
    1: "Source: Kafka\u2028orders",
    2: "Parse\u2029JSON",
    3: "Window\x85(1 min)",
    4: "Sink:\u2028\u2029\x85Postgres",
}


def test_names_with_unicode_line_separators_round_trip_through_updates(
    pytester: pytest.Pytester,
):
    pytester.makepyfile(test_pipeline=MODULE)
    path = pytester.path / "__snapshots__" / "test_pipeline" / "test_orders.opid"

    def stored() -> list[str]:
        text = path.read_text(encoding="utf-8")
        for raw in ("\u2028", "\u2029", "\x85", "\r"):
            assert raw not in text
        assert len(text.splitlines()) == text.count("\n")
        return [op.name for op in loads(text).operators]

    write(pytester, "orders.json", job(names=SEPARATORS))
    run(pytester, "--snapshot-update").assert_outcomes(passed=1)
    assert stored() == [SEPARATORS[i] for i in (1, 2, 3, 4)]
    run(pytester).assert_outcomes(passed=1)

    # Renamed (other separators): passes, and an update rewrites the names.
    renamed = {i: name.replace("\u2028", "\x85") + "\u2029v2" for i, name in SEPARATORS.items()}
    write(pytester, "orders.json", job(names=renamed))
    run(pytester).assert_outcomes(passed=1)
    run(pytester, "--snapshot-update").assert_outcomes(passed=1)
    assert stored() == [renamed[i] for i in (1, 2, 3, 4)]

    # An operator inserted upstream: fails with an explanation, then the update records it.
    inserted = {**renamed, 7: "Filter\u2028\x85\u2029bots"}
    write(pytester, "orders.json", job(insert=True, names=inserted))
    result = run(pytester)
    result.assert_outcomes(failed=1)
    assert '"Filter\\u2028\\u0085\\u2029bots"' in result.stdout.str()
    run(pytester, "--snapshot-update").assert_outcomes(passed=1)
    assert stored() == [inserted[i] for i in (1, 7, 2, 3, 4)]
    run(pytester).assert_outcomes(passed=1)
    expected = pytest_opid.fingerprint(job(insert=True, names=inserted))
    assert loads(path.read_text(encoding="utf-8")).operators == expected.operators
