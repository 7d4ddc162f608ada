"""The plugin end to end, in real inner pytest sessions (pytester).

The inner sessions get the plugin the way users do, through the installed ``pytest11`` entry
point. They read their topology documents from JSON files next to the test module, so a scenario
changes the job between runs by rewriting data, never the (already imported) module.
Most sessions run in-process (fast); pytest-xdist needs a subprocess.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import pytest_opid
from pytest_opid.io.snapshot import loads

MODULE = """
import json
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def load(name):
    return json.loads((HERE / name).read_text())


@pytest.mark.stable_topology
def test_orders(opid):
    opid.record(load("orders.json"))
"""


def orders(*, insert_filter=False, renamed=False, pins=None, window_parallelism=4) -> dict:
    """Kafka -> Parse JSON -> keyBy -> Window -> Sink, as a topology document."""
    names = {
        2: "Map: parse" if renamed else "Parse JSON",
        3: "Count per customer" if renamed else "Window(Tumbling 1 min)",
    }
    nodes = [{"id": 1, "name": "Source: Kafka orders", "parallelism": 4, "source": "new"}]
    edges = []
    upstream = 1
    if insert_filter:
        nodes.append({"id": 7, "name": "Filter: valid", "parallelism": 4})
        edges.append({"source": 1, "target": 7})
        upstream = 7
    nodes += [
        {"id": 2, "name": names[2], "parallelism": 4},
        {"id": 3, "name": names[3], "parallelism": window_parallelism},
        {"id": 4, "name": "Sink: Postgres", "parallelism": window_parallelism},
    ]
    edges += [
        {"source": upstream, "target": 2},
        {"source": 2, "target": 3, "partitioner": "HASH"},
        {"source": 3, "target": 4},
    ]
    for node in nodes:
        if pins and node["id"] in pins:
            node["uid_hash"] = pins[node["id"]]
    return {"nodes": nodes, "edges": edges}


@pytest.fixture(autouse=True)
def _not_an_xdist_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """When this suite itself runs under pytest-xdist, the inner sessions must not believe
    they are workers (syrupy asks the environment), or they print no snapshot report."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def project(pytester: pytest.Pytester):
    pytester.makepyfile(test_pipeline=MODULE)
    return pytester


def write(pytester: pytest.Pytester, name: str, doc: dict) -> None:
    (pytester.path / name).write_text(json.dumps(doc))


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", *args)


def snapshot_file(pytester: pytest.Pytester, name: str = "test_orders") -> Path:
    return pytester.path / "__snapshots__" / "test_pipeline" / f"{name}.opid"


def test_the_life_of_a_snapshot(project: pytest.Pytester):
    write(project, "orders.json", orders())
    (project.path / "test_gone.py").write_text(
        MODULE.replace("test_orders", "test_retired").replace("orders.json", "orders.json")
    )

    # 1. --snapshot-update writes the snapshots.
    result = run(project, "--snapshot-update")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*2 snapshots generated*"])
    stored = loads(snapshot_file(project).read_text())
    expected = pytest_opid.fingerprint(orders())
    assert [o.operator_id for o in stored.operators] == [o.operator_id for o in expected.operators]
    assert (project.path / "__snapshots__" / "test_gone" / "test_retired.opid").is_file()

    # 2. Unchanged: passes.
    result = run(project)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*2 snapshots passed*"])

    # 3. Renaming operators: Flink restores state by ID, so it passes.
    write(project, "orders.json", orders(renamed=True))
    run(project).assert_outcomes(passed=2)

    # 4. An operator inserted upstream changes downstream IDs: fails and explains.
    (project.path / "test_gone.py").unlink()
    write(project, "orders.json", orders(insert_filter=True))
    result = run(project, "--snapshot-warn-unused")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    old = {o.name: o.operator_id for o in stored.operators}
    new = {
        o.name: o.operator_id for o in pytest_opid.fingerprint(orders(insert_filter=True)).operators
    }
    assert "3 operators would lose their state" in out
    for name in ("Parse JSON", "Window(Tumbling 1 min)", "Sink: Postgres"):
        assert re.search(rf'node \d+\s+"{re.escape(name)}"\s+{old[name]} -> {new[name]}', out), name
        assert f'.setUidHash("{old[name]}")' in out
    assert f"Cannot map checkpoint/savepoint\nstate for operator {old['Parse JSON']}" in out
    assert '.uid("' in out and "--allowNonRestoredState" in out
    assert '"Filter: valid"' in out  # the new operator, starting empty
    assert "pytest --snapshot-update" in out
    # ...and the snapshot of the deleted test module is reported unused.
    result.stdout.fnmatch_lines(["*1 snapshot failed. 1 snapshot unused.*"])

    # 5. Pinning the changed operators with the suggested setUidHash passes again.
    pins = dict(re.findall(r'"([^"]+)"\s+\.setUidHash\("([0-9a-f]{32})"\)', out))
    by_name = {n["name"]: n["id"] for n in orders(insert_filter=True)["nodes"]}
    write(
        project,
        "orders.json",
        orders(insert_filter=True, pins={by_name[k]: v for k, v in pins.items()}),
    )
    result = run(project, "--snapshot-warn-unused")
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(
        ["*OpidSnapshotWarning*1 operator not in the snapshot yet*Filter: valid*"]
    )

    # 6. Unused snapshots fail the session unless told otherwise, as in syrupy.
    result = run(project)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*1 snapshot unused*"])

    # 7. --snapshot-update accepts the unpinned change and deletes the unused snapshot.
    write(project, "orders.json", orders(insert_filter=True))
    result = run(project, "--snapshot-update")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*1 snapshot updated*1 unused snapshot deleted*"])
    assert not (project.path / "__snapshots__" / "test_gone").exists()
    assert loads(snapshot_file(project).read_text()).operators[1].name == "Filter: valid"
    result = run(project)
    assert result.ret == 0
    result.assert_outcomes(passed=1)


MISUSE = """
import pytest
from pytest_opid import Operator, Topology

JOB = Topology([Operator(1, "Source: Kafka"), Operator(2, "Sink: S3")], [])


def test_unmarked_records(opid):
    opid.record(JOB)


@pytest.mark.stable_topology
def test_marked_records_nothing(opid):
    pass


@pytest.mark.stable_topology
def test_marked_without_fixture():
    pass


@pytest.mark.stable_topology(chek="ids")
def test_misspelt_argument(opid):
    opid.record(JOB)


@pytest.mark.stable_topology(check="everything")
def test_unknown_check(opid):
    opid.record(JOB)


@pytest.mark.stable_topology
def test_same_name_twice(opid):
    opid.record(JOB, name="a")
    opid.record(JOB, name="a")


@pytest.mark.stable_topology
def test_bad_document(opid):
    opid.record({"nodes": [{"id": 1}], "edges": []})


@pytest.mark.stable_topology
def test_body_fails_first(opid):
    opid.record(JOB)
    assert 1 == 2
"""


def test_misuse_gets_clear_errors(pytester: pytest.Pytester):
    pytester.makepyfile(test_misuse=MISUSE)
    result = run(pytester, "--strict-markers", "--snapshot-update", "-rf")
    result.assert_outcomes(failed=6, errors=2)  # a misspelt marker is an error in setup
    out = result.stdout.str()
    assert "test_unmarked_records records a topology with opid.record() but is not marked" in out
    assert (
        "test_marked_records_nothing is marked @pytest.mark.stable_topology but records no "
        "topology, so there is nothing to hold stable: call opid.record(" in out
    )
    assert (
        "test_marked_without_fixture is marked @pytest.mark.stable_topology but records no "
        "topology, so there is nothing to hold stable: request the `opid` fixture" in out
    )
    assert "@pytest.mark.stable_topology: unknown argument 'chek'" in out
    assert "check must be one of 'ids', 'chains', 'both', got 'everything'" in out
    assert "During handling" not in out
    assert "records two topologies named 'a'" in out
    assert "node 1 (#0) has no 'name'" in out
    assert "assert 1 == 2" in out
    # Nothing was written for any of them (the failing body stops before the check).
    assert not (pytester.path / "__snapshots__").exists()


SHAPES = """
import pytest
from pytest_opid import Edge, Operator, Partitioner, SourceKind, Topology


def job(parallelism=4, sink_parallelism=4, uids=False):
    def op(i, name, p):
        return Operator(i, name, parallelism=p, uid=name.lower() if uids else None,
                        source=SourceKind.NEW if i == 1 else None)
    return Topology(
        [op(1, "Source: Kafka", parallelism), op(2, "Enrich", parallelism),
         op(3, "Sink: Kafka", sink_parallelism)],
        [Edge(1, 2), Edge(2, 3, Partitioner.REBALANCE if sink_parallelism != parallelism
                          else Partitioner.FORWARD)],
    )


SINK = int(open(__file__.replace(".py", ".txt")).read())


@pytest.mark.stable_topology(check="ids")
@pytest.mark.parametrize("parallelism", [2, 4])
def test_ids_only(opid, parallelism):
    opid.record(job(parallelism, SINK if parallelism == 4 else parallelism, uids=True))


@pytest.mark.stable_topology(check="chains")
def test_chains_only(opid):
    opid.record(job(4, SINK, uids=True))


@pytest.mark.stable_topology(name="orders")
class TestJobs:
    def test_two_topologies(self, opid):
        opid.record(job())
        opid.record(job(2, 2), name="small")
        opid.record(job(3, 3))
"""


def test_parametrized_classes_names_and_checks(pytester: pytest.Pytester):
    pytester.makepyfile(test_shapes=SHAPES)
    (pytester.path / "test_shapes.txt").write_text("4")
    result = run(pytester, "--snapshot-update", "--opid-report")
    result.assert_outcomes(passed=4)
    names = sorted(p.name for p in (pytester.path / "__snapshots__" / "test_shapes").iterdir())
    assert names == [
        "TestJobs.test_two_topologies[orders.1].opid",
        "TestJobs.test_two_topologies[orders].opid",
        "TestJobs.test_two_topologies[small].opid",
        "test_chains_only.opid",
        "test_ids_only[2].opid",
        "test_ids_only[4].opid",
    ]
    result.stdout.fnmatch_lines(
        [
            "*pytest-opid: 6 recorded topologies*",
            "test_shapes.py::TestJobs::test_two_topologies[orders]  (1 job vertex, 3 operators)",
            '  v1 * parallelism 4   "Source: Kafka -> Enrich -> Sink: Kafka"',
        ]
    )
    # The sink no longer chains (other parallelism): with uids no ID changes, so only the test
    # that holds chains stable fails.
    (pytester.path / "test_shapes.txt").write_text("2")
    result = run(pytester)
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*Topology not stable [[]check=chains[]]: 1 operator chain split or merged.",
            '*split: "Source: Kafka -> Enrich -> Sink: Kafka" now runs as '
            '"Source: Kafka -> Enrich" + "Sink: Kafka"',
            "FAILED test_shapes.py::test_chains_only*",
        ]
    )


def test_options_and_marker_are_registered(pytester: pytest.Pytester):
    result = run(pytester, "--help")
    result.stdout.fnmatch_lines(
        [
            "opid: changes that break a streaming job's restart, Spark or Flink (pytest-opid):",
            "  --opid-report*",
            "  --opid-check={default,ids,chains,both}*",
        ]
    )
    result.stdout.fnmatch_lines(["  opid_check (string):*", "  opid_report (bool):*"])
    result = run(pytester, "--markers")
    result.stdout.fnmatch_lines(
        [
            "@pytest.mark.stable_topology(check=None, name=None, previous=None, "
            "allow_non_restored_state=False, allow_reinterpreted_state=False, "
            "allow_unverified=False, spark_version=None): *"
        ]
    )
    markers = result.stdout.str()
    assert "Spark" in markers and "state/<n>" in markers and "checkpoint" in markers
    pytester.makeini("[pytest]\nopid_check = sometimes\n")
    result = run(pytester)
    result.stderr.fnmatch_lines(
        ["*opid_check must be one of default, ids, chains, both, got 'sometimes'*"]
    )


def test_xdist(project: pytest.Pytester):
    """Under ``-n 2`` the checks run in the workers, syrupy merges their snapshot reports and
    the workers hand their --opid-report blocks to the controller."""
    project.makepyfile(
        test_more="\n".join(MODULE.replace("test_orders", f"test_orders_{i}") for i in range(3))
    )
    write(project, "orders.json", orders())
    run(project, "--snapshot-update").assert_outcomes(passed=4)
    write(project, "orders.json", orders(renamed=True))
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "--opid-report")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*2 workers [[]4 items[]]*"])
    result.stdout.fnmatch_lines(["*pytest-opid: 4 recorded topologies*", "*Map: parse*"])
    result.stdout.fnmatch_lines(["*4 snapshots passed.*"])
    assert result.ret == 0


DIRECT = """
import json
from pathlib import Path

import pytest
from pytest_opid.plugin.extension import TopologySnapshotExtension

HERE = Path(__file__).parent


def load():
    return json.loads((HERE / "orders.json").read_text())


def test_with_syrupy_directly(snapshot):
    assert load() == snapshot.use_extension(TopologySnapshotExtension)


@pytest.mark.stable_topology
def test_default_check(opid):
    opid.record(load())
"""


def test_syrupy_extension_directly_and_the_default_check(pytester: pytest.Pytester):
    pytester.makepyfile(test_direct=DIRECT)
    write(pytester, "orders.json", orders())
    run(pytester, "--snapshot-update").assert_outcomes(passed=2)
    write(pytester, "orders.json", orders(insert_filter=True))
    result = run(pytester)
    result.assert_outcomes(failed=2)
    # syrupy's own assertion report shows the explanation, not a text diff.
    result.stdout.fnmatch_lines(
        [
            "E       assert [[]+ received[]] == [[]- snapshot[]]",
            "E         Topology not stable [[]check=ids[]]: 3 operators would lose their state.",
        ]
    )
    # The filter joins the source's chain: no chain split or merged, so check=chains passes.
    result = run(pytester, "--opid-check=chains")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["FAILED test_direct.py::test_with_syrupy_directly*"])
    pytester.makeini("[pytest]\nopid_check = chains\n")
    run(pytester).assert_outcomes(passed=1, failed=1)

    # Renames pass without touching the file; --snapshot-update writes them (the marked test).
    write(pytester, "orders.json", orders(renamed=True))
    marked = pytester.path / "__snapshots__" / "test_direct" / "test_default_check.opid"
    before = marked.read_text()
    run(pytester).assert_outcomes(passed=2)
    assert marked.read_text() == before
    result = run(pytester, "--snapshot-update")
    result.stdout.fnmatch_lines(["*1 snapshot passed. 1 snapshot updated.*"])
    assert '"Count per customer"' in marked.read_text()


def test_the_plugin_imports_nothing_heavy():
    """Every pytest session imports the plugin; PySpark, Hypothesis, syrupy and the snapshot
    machinery must wait until a test uses them."""
    import subprocess
    import sys

    code = (
        "import sys, pytest_opid.plugin; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pyspark', 'hypothesis', 'syrupy', 'py4j') or m in "
        "('pytest_opid.io.snapshot', 'pytest_opid.plugin.extension', 'pytest_opid.render.report', "
        "'pytest_opid.spark')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
