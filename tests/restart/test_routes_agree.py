"""One judgement per route (issue 47, part 8): the marked test, the ``opid`` fixture, the API
(``pytest_opid.check_restore``) and the CLI (``opid check-restore``) give the same verdict on
the same real pair (tests/data/sources-sinks, tests/data/sink-restarts), given the same
evidence:

* the checkpoint alone: the API, the CLI, the fixture's ``check_restore(B, previous=CKPT)``;
* the checkpoint and A's fingerprint: the API and the fixture with ``previous_fingerprint``,
  the CLI with ``--previous-fingerprint``;
* A's fingerprint alone: the API, the CLI on A's saved fingerprint, the marked test against its
  snapshot (which passes a restart it cannot show unsafe: "not verified" and "safe" alike).

And across the evidence: the checkpoint with A's fingerprint never says "safe" where the
checkpoint alone says Spark refuses or the sink goes wrong (or the other way round); A's
fingerprint alone, where only the code changed, is never "safe" on a bad restart.

A verdict is ``refused``, ``not safe``, ``not verified`` or ``safe``. The fixture and the marked
test run in a pytester project (in process: one JVM); the CLI in process too. A sample of the
pairs runs by default (about 20 s a pair here: 4 to 6 minutes); ``OPID_ALL_ROUTES=1`` runs
every pair.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.restart.test_sink_restart_corpus import (
    CORPORA,
    session_conf,
    unpack_lock,
    unpacked,
)

__all__ = ["unpack_lock"]  # the fixture, used by name

#: Pairs of every kind of verdict and route question, among them the known disagreement (a
#: moved source folder: the CLI said Spark refuses, the marked test passed with a warning).
SAMPLE = (
    "sources-sinks/src_path_changed",
    "sources-sinks/fs_path_changed",
    "sources-sinks/fs_newckpt_samepath_all",
    "sources-sinks/om_fb_window_update_to_append",
    "sink-restarts/c_parquet_control",
    "sink-restarts/fsf_parquet_alias_control",
    "sink-restarts/fsf_alias_path_changed",
    "sink-restarts/om_fs_stateless_append_to_update",
    "sink-restarts/om_mem_stateless_append_to_complete",
    "sink-restarts/om_fb_agg_update_to_append_nowm",
    "sink-restarts/custom_sink_path_changed",
    "sink-restarts/fb_function_changed_folder",
    "sink-restarts/om_mem_agg_complete_to_update",
    "sink-restarts/proj_filter_added",
    "sink-restarts/src_format_json_to_csv_samefolder",
)

BAD = frozenset({"refused", "rows_lost", "rows_duplicated", "wrong"})

#: Bad restarts A's fingerprint alone still calls safe, each with why (issue 47's other parts).
FINGERPRINT_BLIND = {
    "sources-sinks/src_glob_other_folder": "a glob over another folder (sources, part 6)",
    "sources-sinks/rate_to_rate_micro_batch": "rate -> rate-micro-batch from a fingerprint",
    "sources-sinks/pyds_offset_key_renamed_lenient": "a Python source's offsets (part 6)",
    "sink-restarts/pyds_offset_key_renamed_strict": "a Python source's offsets (part 6)",
    "sink-restarts/pyds_offset_nested_lenient": "a Python source's offsets (part 6)",
    "sink-restarts/pyds_offset_unit_changed": "a Python source's offsets (part 6)",
}

TEST = """
import importlib
import os
import sys

import pytest

CKPT = {ckpt!r}


def build(spark):
    # the job module the outer test wrote for this side (A's code, then B's)
    sys.modules.pop({module!r}, None)
    return importlib.import_module({module!r}).job(spark)


@pytest.mark.stable_topology
def test_marked_alone(spark, opid):
    opid.record(build(spark))


@pytest.mark.parametrize("given", ["checkpoint", "previous"])
def test_fixture(spark, opid, given):
    if os.environ["ROUTE_SIDE"] == "a":
        pytest.skip("B only")
    previous = {snapshot!r} if given == "previous" else None
    opid.check_restore(build(spark), previous=CKPT, previous_fingerprint=previous)
"""


def _pairs() -> list[Any]:
    chosen = None if os.environ.get("OPID_ALL_ROUTES") else set(SAMPLE)
    out = []
    for corpus in CORPORA:
        for line in (corpus / "cases.jsonl").read_text(encoding="utf-8").splitlines():
            case = json.loads(line)
            key = f"{corpus.name}/{case['id']}"
            if case["spark_version"].startswith("4.") and (chosen is None or key in chosen):
                out.append(pytest.param(corpus, case, id=key))
    return out


def category(check: Any) -> str:
    if not check.restorable:
        return "refused"
    if check.reinterpreted:
        return "not safe"
    return "not verified" if check.safe is None else "safe"


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    from pytest_opid.cli import main

    capsys.readouterr()
    main([*argv, "--json"])
    data = json.loads(capsys.readouterr().out)
    if not data["restorable"]:
        return "refused"
    if data.get("reinterpreted"):
        return "not safe"
    return "not verified" if data.get("unverified") else "safe"


def _failed_as(text: str) -> str:
    """A failing test's verdict, by its headline (render_restore's, or the snapshot's)."""
    if "Not restorable" in text or "Not restartable from the old checkpoint" in text:
        return "refused"
    if "Restorable, but not safe" in text or "Not safe to restart" in text:
        return "not safe"
    if "was not verified" in text:
        return "not verified"
    raise AssertionError(f"a failure of no known verdict:\n{text[-3000:]}")


def _outcomes(report: Any) -> dict[str, str]:
    """Each pytester test's verdict: ``safe`` (passed), ``skip`` or its failure's."""
    out: dict[str, str] = {}
    for rep in report.getreports("pytest_runtest_logreport"):
        name = rep.nodeid.split("::", 1)[1]
        if rep.when == "call" or (rep.when == "setup" and not rep.passed):
            out[name] = "skip" if rep.skipped else ("safe" if rep.passed else "")
            if rep.failed:
                out[name] = _failed_as(str(rep.longrepr))
        elif rep.when == "teardown" and rep.failed:  # the marked test's judgement
            out[name] = _failed_as(str(rep.longrepr))
    return out


@pytest.mark.spark_line("4.3", reason="the corpus's writers and checkpoints are judged by 4.3")
@pytest.mark.parametrize(("corpus", "case"), _pairs())
def test_every_route_gives_one_verdict(
    spark: Any,
    unpack_lock: None,
    corpus: Path,
    case: dict[str, Any],
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import pytest_opid

    paths = case["paths_at_run"]
    ckpt = paths["ckpt"]
    module = f"route_job_{abs(hash(case['id']))}"
    monkeypatch.syspath_prepend(str(pytester.path))

    def side(code: str) -> Any:
        """The side's ``job(spark)`` from one module file, as a team's job module holds it
        (a function's digest is its code's, made the same way on both sides)."""
        (pytester.path / f"{module}.py").write_text(
            code + f"\n\ndef job(spark):\n    return build(spark, {paths!r})\n",
            encoding="utf-8",
        )
        shutil.rmtree(pytester.path / "__pycache__", ignore_errors=True)  # no stale bytecode
        sys.modules.pop(module, None)
        return importlib.import_module(module).job(spark)

    saved_a = pytester.path / "a.json"
    conf = [
        arg
        for key, value in case["session_conf"].items()
        if key.startswith("spark.sql.")
        for arg in ("--conf", f"{key}={value}")
    ]
    job = ["--spark", f"{module}:job", *conf]
    with unpacked(corpus, case), session_conf(spark, case["session_conf"]):
        a = pytest_opid.fingerprint(side(case["a_code"]))
        saved_a.write_text(a.to_json(), encoding="utf-8")
        b = side(case["b_code"])  # the module the CLI imports holds B's code from here on
        api = {
            "checkpoint": category(pytest_opid.check_restore(ckpt, b)),
            "previous": category(pytest_opid.check_restore(ckpt, b, previous_fingerprint=a)),
            "fingerprint": category(pytest_opid.check_restore(a, b)),
        }
        cli = {
            "checkpoint": _cli(["check-restore", ckpt, *job], capsys),
            "previous": _cli(
                ["check-restore", ckpt, *job, "--previous-fingerprint", str(saved_a)], capsys
            ),
            "fingerprint": _cli(["check-restore", str(saved_a), *job], capsys),
        }
        pytester.makepyfile(
            test_routes=TEST.format(ckpt=ckpt, module=module, snapshot=str(saved_a))
        )
        side(case["a_code"])
        monkeypatch.setenv("ROUTE_SIDE", "a")
        pytester.inline_run("-p", "no:cacheprovider", "--snapshot-update", "-W", "ignore")
        side(case["b_code"])
        monkeypatch.setenv("ROUTE_SIDE", "b")
        ran = _outcomes(pytester.inline_run("-p", "no:cacheprovider", "-W", "ignore"))
    where = f"{case['id']} (Spark {case['truth']})"
    assert api["checkpoint"] == cli["checkpoint"] == ran["test_fixture[checkpoint]"], (
        where,
        api,
        cli,
        ran,
    )
    assert api["previous"] == cli["previous"] == ran["test_fixture[previous]"], (
        where,
        api,
        cli,
        ran,
    )
    assert api["fingerprint"] == cli["fingerprint"], (where, api, cli)
    assert _marked(ran["test_marked_alone"], api["fingerprint"]) == api["fingerprint"], (
        where,
        api,
        ran,
    )
    # the checkpoint with and without A's fingerprint: A's adds what the checkpoint does not
    # keep, never the other verdict on what it does
    decided = {v for k, v in api.items() if k != "fingerprint" and v != "not verified"}
    assert not ("safe" in decided and decided & {"refused", "not safe"}), (where, api)
    # A's fingerprint alone sees a change of code, not what happened to the folders between
    # the runs: where only the code changed (and input arrived), it is never "safe" on a bad
    # restart
    key = f"{corpus.name}/{case['id']}"
    code_only = case["b_checkpoint"] == "same" and all(
        step.startswith("add:") for step in case["between_runs"]
    )
    if case["truth"] in BAD and code_only and key not in FINGERPRINT_BLIND:
        assert api["fingerprint"] != "safe", (where, api)


def _marked(outcome: str, api: str) -> str:
    """A marked test that passed: "safe", or "not verified" where that is what the API says
    (the snapshot's route passes a restart it cannot show unsafe, with a warning)."""
    if outcome == "safe":
        return api if api in ("safe", "not verified") else "safe"
    return outcome
