"""PyFlink fixtures for pytest: one JVM for the whole session, fresh environments per test.

Registered as the ``opid_flink`` pytest11 entry point. PyFlink is imported only when a test asks
for one of these fixtures, so the plugin costs nothing where PyFlink is not installed. A fixture
of the same name in the user's conftest overrides these.

* ``flink_jvm``: PyFlink's JVM (started once per test process, as PyFlink always does) with
  pytest-opid's stream graph reader loaded into it: a
  :class:`~pytest_opid.flink.jvm.FlinkJvm`.
* ``flink_env_factory``: a function making a new ``StreamExecutionEnvironment`` on that JVM:
  ``flink_env_factory(parallelism=1, batch=False, config=None)``.
* ``flink_env``: one new environment for the test (parallelism 1, streaming).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

import pytest

__all__ = ["flink_env", "flink_env_factory", "flink_jvm", "make_flink_env"]


def _require_pyflink() -> None:
    try:
        import pyflink  # noqa: F401
    except ImportError:
        pytest.fail(
            "the flink fixtures need PyFlink (and Java 11+): "
            "pip install -e '.[flink]' in the pytest-opid clone",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def flink_jvm() -> Any:
    """PyFlink's JVM with pytest-opid's reader loaded (one per test process)."""
    _require_pyflink()
    from pytest_opid.flink import FlinkJvm

    return FlinkJvm.get()


def make_flink_env(
    parallelism: int = 1, *, batch: bool = False, config: Mapping[str, Any] | None = None
) -> Any:
    """A new PyFlink ``StreamExecutionEnvironment``: default ``parallelism``, ``BATCH`` runtime
    mode where ``batch``, and any Flink options in ``config`` (``{"pipeline.max-parallelism":
    128}``). Python functions run with this interpreter (``python.executable``)."""
    from pyflink.common import Configuration
    from pyflink.datastream import RuntimeExecutionMode, StreamExecutionEnvironment

    conf = Configuration()
    # Python functions run in workers started with this interpreter (PyFlink's default is
    # whatever "python" is on PATH, often not the one with PyFlink installed).
    conf.set_string("python.executable", sys.executable)
    conf.set_string("python.client.executable", sys.executable)
    for key, value in (config or {}).items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        conf.set_string(key, text)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    if batch:
        env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    return env


@pytest.fixture(scope="session")
def flink_env_factory(flink_jvm: Any) -> Callable[..., Any]:
    """Makes new PyFlink environments on the session's JVM (see :func:`make_flink_env`)."""
    return make_flink_env


@pytest.fixture
def flink_env(flink_env_factory: Callable[..., Any]) -> Any:
    """A new streaming ``StreamExecutionEnvironment`` with parallelism 1."""
    return flink_env_factory()
