"""The ``spark`` fixture of the ``opid_spark`` pytest plugin."""

from __future__ import annotations

from pytest_opid.plugin.spark import SPARK_CONF


def test_fixture_session_is_small_local_and_static(spark):
    conf = spark.sparkContext.getConf()
    assert spark.sparkContext.master == "local[2]"
    assert conf.get("spark.ui.enabled") == "false"
    assert spark.conf.get("spark.sql.adaptive.enabled") == "false"
    assert conf.get("spark.sql.shuffle.partitions") == "4"
    assert spark.conf.get("spark.sql.shuffle.partitions") == "4"  # no test left its own
    assert SPARK_CONF["spark.sql.adaptive.enabled"] == "false"


def test_fixture_reuses_the_active_session(pytester, spark):
    # In-process: the inner test session sees this session's SparkSession as the active one.
    app_id = spark.sparkContext.applicationId
    pytester.makepyfile(
        f"""
        def test_same_session(spark):
            assert spark.sparkContext.applicationId == {app_id!r}
            assert spark.range(3).count() == 3
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    # ... and left it running: the fixture stops only a session it built itself.
    assert spark.range(2).count() == 2


def test_a_spark_fixture_of_the_users_conftest_wins(pytester):
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture(scope="session")
        def spark():
            return "the user's session"
        """
    )
    pytester.makepyfile(
        """
        def test_uses_it(spark):
            assert spark == "the user's session"
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
