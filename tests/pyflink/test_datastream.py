"""PyFlink DataStream programs: our IDs and chains equal Flink's JobGraph, and fingerprinting
leaves the environment as it found it."""

from __future__ import annotations

import pytest

import pytest_opid
from pytest_opid.errors import OpidError
from tests.pyflink.programs import PROGRAMS, python_chain, random_program

#: Environment options some programs need (set before the program builds).
CONFIG = {
    "python_chain_without_pyflink_optimizer": {"python.operator-chaining.enabled": False},
    "different_max_parallelism_not_chained": {
        "pipeline.operator-chaining.chain-operators-with-different-max-parallelism": False
    },
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_equals_flink(name, flink_env_factory, cross_check):
    env = flink_env_factory(config=CONFIG.get(name))
    PROGRAMS[name](env)
    fp = cross_check(env)
    assert fp.engine == "flink" and fp.mode == "streaming"


@pytest.mark.parametrize("name", ["key_by_reduce", "union", "keyed_state", "partitioners"])
def test_batch_program_equals_flink(name, flink_env_factory, cross_check):
    env = flink_env_factory(batch=True)
    PROGRAMS[name](env)
    fp = cross_check(env)
    assert fp.mode == "batch"


@pytest.mark.parametrize("seed", range(12))
def test_random_program_equals_flink(seed, flink_env_factory, cross_check):
    env = flink_env_factory()
    random_program(seed)(env)
    cross_check(env)


def test_python_operators_are_chained_as_pyflink_submits_them(flink_env, cross_check):
    python_chain(flink_env)
    fp = cross_check(flink_env)
    # PyFlink fuses consecutive Python functions into one operator before Flink sees them.
    assert [o.name for o in fp.operators] == [
        "Source: Collection Source",
        "Sink: Print to Std. Out",
        # PyFlink's print() of a Python stream adds a Map that turns records into strings.
        "Map, Filter, FlatMap, Map, Map",
    ]


def test_operator_ids_survive_the_jvm_wide_node_counter(flink_env_factory):
    """Flink numbers nodes with a JVM-wide counter; the same job built twice gets other node
    ids but the same fingerprint (our nodes are numbered by their order)."""
    first, second = flink_env_factory(), flink_env_factory()
    python_chain(first)
    python_chain(second)
    assert pytest_opid.fingerprint(first) == pytest_opid.fingerprint(second)


def test_uid_pins_the_id_whatever_comes_before(flink_env_factory):
    def job(env, with_filter):
        ds = env.from_collection([1, 2])
        if with_filter:
            ds = ds.filter(lambda n: True)
        ds.key_by(lambda n: n).reduce(lambda a, b: a).uid("state").print()
        return pytest_opid.fingerprint(env)

    before = job(flink_env_factory(), False)
    after = job(flink_env_factory(), True)
    ids = {o.uid: o.operator_id for o in before.operators if o.uid}
    assert ids == {o.uid: o.operator_id for o in after.operators if o.uid}


# -- the environment is left alone ------------------------------------------------------------


def test_fingerprint_leaves_the_environment_unchanged(flink_env_factory, flink_jvm):
    env = flink_env_factory()
    python_chain(env)
    j_env = env._j_stream_execution_environment
    before = [t.getId() for t in j_env.getTransformations()]
    first = pytest_opid.fingerprint(env)
    assert [t.getId() for t in j_env.getTransformations()] == before
    assert pytest_opid.fingerprint(env) == first
    # The plan PyFlink itself would show is the one of an environment never fingerprinted.
    fresh = flink_env_factory()
    python_chain(fresh)
    assert pytest_opid.fingerprint(fresh) == first


def test_the_environment_still_executes_after_a_fingerprint(flink_env_factory, tmp_path):
    env = flink_env_factory()
    out = tmp_path / "out"
    from pyflink.common import Encoder, Types
    from pyflink.datastream.connectors.file_system import FileSink

    ds = env.from_collection([1, 2, 3], type_info=Types.INT())
    ds = ds.map(lambda n: n * 10, output_type=Types.INT()).filter(lambda n: n > 10)
    ds.map(str, output_type=Types.STRING()).sink_to(
        FileSink.for_row_format(str(out), Encoder.simple_string_encoder()).build()
    )
    before = pytest_opid.fingerprint(env)
    env.execute("after a fingerprint")
    written = sorted(line for f in out.rglob("*") if f.is_file() for line in f.read_text().split())
    assert written == ["20", "30"]
    assert before.operators  # fingerprinted before the run


def test_a_datastream_fingerprints_its_environment(flink_env):
    ds = flink_env.from_collection([1]).map(lambda n: n)
    ds.print()
    assert pytest_opid.fingerprint(ds) == pytest_opid.fingerprint(flink_env)


# -- bad input ---------------------------------------------------------------------------------


def test_an_empty_environment_is_one_clear_error(flink_env):
    with pytest.raises(OpidError, match="holds no operators") as info:
        pytest_opid.fingerprint(flink_env)
    assert "\n" not in str(info.value)


def test_other_pyflink_objects_are_refused_with_what_is_accepted(flink_env_factory):
    from pyflink.table import StreamTableEnvironment

    t_env = StreamTableEnvironment.create(flink_env_factory())
    with pytest.raises(TypeError, match="create_statement_set"):
        pytest_opid.fingerprint(t_env)
    with pytest.raises(TypeError, match="StreamExecutionEnvironment"):
        pytest_opid.fingerprint(t_env.get_config())
