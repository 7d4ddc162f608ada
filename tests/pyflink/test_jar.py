"""Java jobs from their jar: ``fingerprint_jar`` runs the job's main under Flink's client
(PackagedProgram), and our IDs and chains equal Flink's JobGraph of the same StreamGraph."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from pytest_opid.errors import OpidError
from pytest_opid.flink.jar import fingerprint_jar, jar_job_graph
from tests.pyflink.conftest import compare_with_flink

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "flink"
JAVA = EXAMPLE / "java"


def _example_jars():
    """examples/flink/jars.py (the examples are no package the tests can import from)."""
    spec = importlib.util.spec_from_file_location("opid_example_jars", EXAMPLE / "jars.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build_jar = _example_jars().build_jar
MAIN = "com.example.clicks.ClickStatsJob"

LIBRARY = """
package com.example.lib;

public final class Prefix {
    public static String of(long n) { return "n" + n; }
}
"""

USES_LIBRARY = """
package com.example.uses;

import com.example.lib.Prefix;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

public class UsesLibrary {
    public static void main(String[] args) throws Exception {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.fromSequence(1, 10).map(n -> Prefix.of(n)).returns(String.class).name(Prefix.of(7))
            .print();
        env.execute();
    }
}
"""


@pytest.fixture(scope="session")
def jars(tmp_path_factory, flink_jvm):
    root = tmp_path_factory.mktemp("jars")
    with_main = build_jar(JAVA, root / "clicks.jar", MAIN)
    without_main = build_jar(JAVA, root / "no-main.jar")
    lib_src = root / "lib-src" / "com" / "example" / "lib"
    lib_src.mkdir(parents=True)
    (lib_src / "Prefix.java").write_text(LIBRARY)
    library = build_jar(root / "lib-src", root / "prefix.jar")
    uses_src = root / "uses-src" / "com" / "example" / "uses"
    uses_src.mkdir(parents=True)
    (uses_src / "UsesLibrary.java").write_text(USES_LIBRARY)
    fat = build_jar(
        root / "uses-src", root / "uses.jar", "com.example.uses.UsesLibrary", (library,)
    )
    return {"clicks": with_main, "no_main": without_main, "fat": fat}


@pytest.mark.parametrize(
    "args", [(), ("--parallelism", "1"), ("--parallelism", "3")], ids=["p2", "p1", "p3"]
)
def test_jar_equals_flink(jars, args):
    reading, vertices = jar_job_graph(jars["clicks"], args=args)
    fp = compare_with_flink(reading, vertices)
    assert fp == fingerprint_jar(jars["clicks"], args=args)
    by_uid = {o.uid: o for o in fp.operators if o.uid}
    assert set(by_uid) >= {"clicks", "clicks-per-page", "stats-sink"}


def test_uids_pin_ids_across_parallelism(jars):
    two = fingerprint_jar(jars["clicks"])
    three = fingerprint_jar(jars["clicks"], args=["--parallelism", "3"])
    assert [o.operator_id for o in two.operators] == [o.operator_id for o in three.operators]


def test_main_class_given_on_the_command_line(jars):
    reading, vertices = jar_job_graph(jars["no_main"], main_class=MAIN)
    compare_with_flink(reading, vertices)


def test_the_jar_brings_its_own_libraries(jars):
    reading, vertices = jar_job_graph(jars["fat"])
    fp = compare_with_flink(reading, vertices)
    assert "n7" in [o.name for o in fp.operators]


def test_default_parallelism_like_flink_run_p(jars):
    fp = fingerprint_jar(jars["fat"], parallelism=4)
    assert {v.parallelism for v in fp.job_vertices} == {4}


# -- bad input: one line each ------------------------------------------------------------------


def one_line(info: pytest.ExceptionInfo) -> str:
    text = str(info.value)
    assert "\n" not in text, text
    return text


def test_a_jar_without_a_main_class(jars):
    with pytest.raises(OpidError, match="names no main class") as info:
        fingerprint_jar(jars["no_main"])
    assert "--main-class" in one_line(info)


def test_a_main_class_that_does_not_exist(jars):
    with pytest.raises(OpidError, match=r"com\.example\.Nope") as info:
        fingerprint_jar(jars["clicks"], main_class="com.example.Nope")
    one_line(info)


def test_a_main_that_throws(jars):
    with pytest.raises(OpidError, match="main method failed") as info:
        fingerprint_jar(jars["clicks"], args=["--fail"])
    assert "IllegalArgumentException: unknown region: moon" in one_line(info)


def test_a_main_that_builds_no_pipeline(jars):
    with pytest.raises(OpidError, match="without building a pipeline") as info:
        fingerprint_jar(jars["clicks"], args=["--no-pipeline"])
    one_line(info)


def test_not_a_jar(tmp_path, flink_jvm):
    text = tmp_path / "job.jar"
    text.write_text("not a zip")
    with pytest.raises(OpidError, match="not a jar") as info:
        fingerprint_jar(text)
    one_line(info)
    with pytest.raises(OpidError, match="no such jar") as info:
        fingerprint_jar(tmp_path / "missing.jar")
    one_line(info)
