"""The same judgement on every Spark line: an unchanged query is judged unchanged whichever two
supported lines made the old and the new fingerprint, and a real change keeps its severity.

``tests/data/line-corpus/<line>/`` holds the same corpus of queries (every query of the
real-restart data sets, every stateful operator kind PySpark builds, the example jobs, the
TPC-DS-like batch queries) fingerprinted by that PySpark line (``tools/line_corpus.py``): the
saved fingerprint as ``opid fingerprint --json`` writes it and the snapshot text the plugin
writes. Nothing here needs PySpark: the comparisons read what each line recorded. Spark names
some things otherwise on older lines (``timeAdd`` for 4.1's ``timestampAddInterval``, 3.5's
``defaultName`` for the session window's operator: :mod:`pytest_opid.spark.renamings`); the
tests first check those names are really in the data, so that they prove the comparison reads
through them.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import json
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

import pytest_opid
from pytest_opid.comparison import compare
from pytest_opid.engine_rules import Check
from pytest_opid.io.snapshot import loads
from pytest_opid.plugin.extension import TopologySnapshotExtension
from pytest_opid.result import Fingerprint, RestoreCheck
from pytest_opid.spark import judged_for

DATA = Path(__file__).resolve().parents[1] / "data"
CORPUS = DATA / "line-corpus"
SUPPORTED = ("3.5", "4.0", "4.1", "4.2", "4.3")
#: The lines whose corpus is in the data (``tools/line_corpus.py`` adds a line's).
LINES = tuple(line for line in SUPPORTED if (CORPUS / line / "fingerprints.jsonl.gz").exists())
PAIRS = list(combinations(LINES, 2))
#: The newest line in the data: the upgrade the issue measured is 3.5 to it.
NEWEST = LINES[-1]

#: The one warning an unchanged query may get across lines: which line made the fingerprint.
VERSION_NOTE = "engine_version"
#: Where the engine itself differs, said by the line that does: Spark 4.3 widens state schemas
#: to nullable, earlier lines do not, so from an earlier line's fingerprint the nullability of
#: 4.3's restart cannot be checked (the warning names both lines and how to check it).
WIDENING_NOTE = "without the state schema widening of Spark 4.3"


@functools.cache
def fingerprints(line: str) -> dict[str, Fingerprint]:
    with gzip.open(CORPUS / line / "fingerprints.jsonl.gz", "rt", encoding="utf-8") as f:
        records = [json.loads(text) for text in f]
    return {r["query"]: pytest_opid.fingerprint(r["fingerprint"]) for r in records}


@functools.cache
def snapshots(line: str) -> dict[str, str]:
    with gzip.open(CORPUS / line / "snapshots.jsonl.gz", "rt", encoding="utf-8") as f:
        return {r["query"]: r["snapshot"] for r in map(json.loads, f)}


def _common(old: str, new: str) -> list[str]:
    return sorted(fingerprints(old).keys() & fingerprints(new).keys())


def _digest_gap(old: str, new: str, query: str) -> bool:
    """PySpark 4.0 hands a transformWithStateInPandas processor over as a closure of the UDF,
    later lines as the processor itself, and the digest of the same code differs between them
    (``unverified`` where the code was run by exec, a changed digest where it has a file). Not
    a renaming in Spark's plan: listed here, and checked to be the only difference."""
    if "4.0" not in (old, new) or old == new:
        return False
    states = fingerprints("4.0")[query].state_operators or ()
    return any(s.kind == "transformWithStateInPandasExec" for s in states)


def _only_the_digest(check: RestoreCheck) -> bool:
    said = [p.message for p in (*check.problems, *check.reinterpreted, *check.unverified)]
    said += [
        p.message
        for p in check.warnings
        if p.kind != VERSION_NOTE and WIDENING_NOTE not in p.message
    ]
    return bool(said) and all("the function that updates state/" in m for m in said)


def _verdict(check: RestoreCheck, ignore: frozenset[str] = frozenset()) -> str:
    """A restart verdict's severity: refused, reinterpreted, unverified, warned or unchanged
    (the version note, and warnings of the kinds in ``ignore``, left aside)."""
    if not check.restorable:
        return "refused"
    if check.reinterpreted:
        return "reinterpreted"
    if check.unverified:
        return "unverified"
    if any(
        w.kind != VERSION_NOTE and w.kind not in ignore and WIDENING_NOTE not in w.message
        for w in check.warnings
    ):
        return "warned"
    return "unchanged"


def _restart(old: Fingerprint, new: Fingerprint, line: str) -> RestoreCheck:
    with judged_for(line):
        return pytest_opid.check_restore(old, new)


# -- the data holds what it should ------------------------------------------------------------


def test_every_line_fingerprinted_the_corpus() -> None:
    """Each line has the corpus (the few queries a line cannot build, transformWithState before
    4.0, are listed with Spark's reason); the 4.x lines build all but a handful."""
    assert {"3.5", "4.0", "4.1"} <= set(LINES)
    counts = {line: len(fingerprints(line)) for line in LINES}
    assert all(n >= 200 for n in counts.values()), counts
    for line in LINES:
        assert snapshots(line).keys() == fingerprints(line).keys()
        missing = json.loads((CORPUS / line / "missing.json").read_text(encoding="utf-8"))
        assert line in missing["pyspark"]


def _raw_names(line: str) -> set[str]:
    """The line-specific names the corpus's fingerprints from ``line`` record."""
    found = set()
    for fp in fingerprints(line).values():
        for state in fp.state_operators or ():
            if state.kind == "defaultName":
                found.add("defaultName")
            values = " ".join(value for _, value in state.meaning)
            if "timeAdd(" in values:
                found.add("timeAdd")
            if "invoke(StructsToJsonEvaluator(" in values:
                found.add("invoke")
    return found


def test_the_lines_name_things_otherwise() -> None:
    """The renamings are in the data: Spark 3.5 files the session window's state as
    ``defaultName``; 3.5 and 4.0 write a timestamp plus an interval as ``timeAdd``
    (``timestampAddInterval`` from 4.1); 4.0 on plan ``to_json`` as a call of its evaluator."""
    assert _raw_names("3.5") == {"defaultName", "timeAdd"}
    assert _raw_names("4.0") == {"timeAdd", "invoke"}
    for line in LINES[2:]:
        assert _raw_names(line) == {"invoke"}


# -- unchanged queries: the same judgement on every pair of lines ---------------------------


@pytest.mark.parametrize(("old", "new"), PAIRS, ids=[f"{a}-{b}" for a, b in PAIRS])
def test_unchanged_queries_from_the_fingerprint(old: str, new: str) -> None:
    """The saved fingerprint of line ``old`` against line ``new``'s of the same query, as
    ``opid diff`` and ``pytest_opid.compare`` compare them, the restart judged by ``new``'s
    rules (the comparison's ``restore``, which ``check_restore`` with the old fingerprint as the
    previous state returns): no change, nothing reinterpreted, refused, unverified or warned.
    From 3.5 to 4.3 (the upgrade the issue measured) through ``check_restore`` itself too."""
    queries = _common(old, new)
    assert len(queries) >= 200
    wrong = []
    for query in queries:
        a, b = fingerprints(old)[query], fingerprints(new)[query]
        with judged_for(new):
            comparison = compare(a, b)
            broken = comparison.breaks(Check.default_for(b))
            checks = [comparison.restore] if b.mode == "streaming" else []
            if (old, new) == ("3.5", NEWEST) and checks:
                checks.append(pytest_opid.check_restore(a, b))
        verdicts = {_verdict(check) for check in checks}
        if _digest_gap(old, new, query):
            if not all(_only_the_digest(c) or _verdict(c) == "unchanged" for c in checks):
                wrong.append(f"{query}: more than the processor's digest differs")
        elif broken or comparison.state_operator_changes or verdicts - {"unchanged"}:
            said = [p.message for c in checks for p in (*c.reinterpreted, *c.warnings)]
            wrong.append(f"{query}: {sorted(verdicts)} {said[:2]}")
    assert not wrong, f"{len(wrong)} of {len(queries)}:\n" + "\n".join(wrong[:20])


@pytest.mark.parametrize(("old", "new"), PAIRS, ids=[f"{a}-{b}" for a, b in PAIRS])
def test_unchanged_queries_from_the_snapshot(old: str, new: str) -> None:
    """A snapshot line ``old`` wrote, checked by a test running on line ``new``: the plugin's
    own comparison (its extension's ``matches`` on both texts) passes every query; from 3.5 to
    4.3 the recorder's too (the snapshot read back and compared with the live fingerprint)."""
    extension = TopologySnapshotExtension()
    wrong = []
    queries = _common(old, new)
    for query in queries:
        text_old, text_new = snapshots(old)[query], snapshots(new)[query]
        if _digest_gap(old, new, query):
            continue  # the processor's digest: test_unchanged_queries_from_the_fingerprint
        with judged_for(new):
            if not extension.matches(serialized_data=text_new, snapshot_data=text_old):
                wrong.append(f"{query}: the extension")
            elif (old, new) == ("3.5", NEWEST):
                b = fingerprints(new)[query]
                if compare(loads(text_old), b).breaks(Check.default_for(b)):
                    wrong.append(f"{query}: the recorder")
    assert not wrong, f"{len(wrong)} of {len(queries)}:\n" + "\n".join(wrong[:20])


def test_the_two_real_cases() -> None:
    """The two renamings the issue found, on the queries that show them, 3.5 -> 4.3, from the
    fingerprint, the snapshot and ``opid diff``'s comparison."""
    cases = {"defaultName": [], "timeAdd": []}  # type: dict[str, list[str]]
    for query, fp in fingerprints("3.5").items():
        for state in fp.state_operators or ():
            if state.kind == "defaultName":
                cases["defaultName"].append(query)
            if any("timeAdd(" in value for _, value in state.meaning):
                cases["timeAdd"].append(query)
    assert all(cases.values()), cases
    for queries in cases.values():
        for query in queries:
            if query not in fingerprints(NEWEST):
                continue
            a, b = fingerprints("3.5")[query], fingerprints(NEWEST)[query]
            assert not compare(a, b).state_operator_changes
            assert _verdict(_restart(a, b, NEWEST)) == "unchanged", query
            assert not compare(loads(snapshots("3.5")[query]), b).breaks(Check.default_for(b))


def _reading_folders_of(old: Fingerprint, new: Fingerprint) -> Fingerprint:
    """``old`` reading ``new``'s folders: a file source moved out of its folder is refused
    (Wrong basePath), and here the folders differ only because A ran elsewhere."""
    if old.sources is None or new.sources is None or len(old.sources) != len(new.sources):
        return old
    sources = tuple(
        b if a.rsplit(" ", 1)[0] == b.rsplit(" ", 1)[0] else a
        for a, b in zip(old.sources, new.sources, strict=True)
    )
    return dataclasses.replace(old, sources=sources)


def test_previous_fingerprints_saved_by_an_earlier_pytest_opid() -> None:
    """The upgrade data set's fingerprints of A, made by PySpark 3.5.9 with an earlier
    pytest-opid (older names in them), against the same A on 4.3: unchanged, every one."""
    by_code = {}
    for line in (DATA / "upgrade-restart" / "cases.jsonl").read_text("utf-8").splitlines():
        rec = json.loads(line)
        by_code.setdefault(rec["pair"], rec["before_code"])
    made = {}
    for line in (DATA / "upgrade-restart" / "previous-3.5.9.jsonl").read_text("utf-8").splitlines():
        rec = json.loads(line)
        made[rec["pair"]] = pytest_opid.fingerprint(rec["fingerprint"])
    now = fingerprints(NEWEST)
    wrong = []
    compared = 0
    for pair, fp in made.items():
        query = aliases()[f"upgrade-restart/{pair}/before"]
        compared += 1
        # its A read other folders than the corpus's: the sources' paths are no question here;
        # nor the function digest those fingerprints predate (a warning says so, rightly)
        check = _restart(_reading_folders_of(fp, now[query]), now[query], NEWEST)
        old_form = all(
            "records no digest of the function" in w.message
            for w in check.warnings
            if w.kind == "state_meaning"
        )
        verdict = _verdict(
            check, frozenset({"sources", "state_meaning"} if old_form else {"sources"})
        )
        if verdict != "unchanged" or compare(fp, now[query]).state_operator_changes:
            wrong.append(f"{pair}: {verdict}")
    assert compared == len(made) >= 30
    assert not wrong, wrong


# -- real changes: still changes, with one severity on every pair of lines -------------------


def _meaning_cases() -> list[dict[str, Any]]:
    text = (DATA / "meaning-restart" / "cases.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


@functools.cache
def aliases() -> dict[str, str]:
    """A restart pair's query -> the name the corpus files it by (the first pair with the same
    code and session confs)."""
    found: dict[str, str] = json.loads((CORPUS / "aliases.json").read_text(encoding="utf-8"))
    return found


def _query(set_name: str, rec: dict[str, Any], which: str, line: str) -> Fingerprint | None:
    name = f"{set_name}/{_ident(rec)}/{which}"
    return fingerprints(line).get(aliases().get(name, name))


def test_real_changes_still_differ_across_lines() -> None:
    """The meaning-restart pairs whose B Spark 4.3 restarted on A's checkpoint with results
    other than B's own (``results_differ``, by real runs): with A's fingerprint from any line
    and B's from any later or the same line, the restart is judged "reinterpreted" (or, before
    4.3, which does not widen state schemas, "refused") on every pair, so reading through the
    renamings hid no change."""
    wrong = []
    judged = 0
    for rec in _meaning_cases():
        if not rec.get("results_differ") or rec.get("b_restart") is None or rec.get("by_design"):
            continue
        for old, new in [*PAIRS, *((line, line) for line in LINES)]:
            a = _query("meaning-restart", rec, "before", old)
            b = _query("meaning-restart", rec, "after", new)
            if a is None or b is None or b.mode != "streaming":
                continue
            judged += 1
            verdict = _verdict(_restart(a, b, new))
            # refused: lines before 4.3 do not widen state schemas and refuse some of these
            # (tumbling -> sliding window) where 4.3 restarts them; either way not "unchanged"
            if verdict not in ("reinterpreted", "refused"):
                wrong.append(f"{_ident(rec)} {old}->{new}: {verdict}")
    assert judged >= 100
    assert not wrong, "\n".join(wrong)


def test_a_change_has_one_severity_on_every_route() -> None:
    """Every A -> B pair of the meaning-restart set, A's fingerprint from one line and B's from
    the same or a later one, judged by B's line: ``check_restore`` with A's fingerprint as the
    previous state, the comparison's own verdict (``opid diff``, the plugin) and whether the
    comparison fails a test say the same."""
    differ = []
    judged = 0
    for rec in _meaning_cases():
        for old, new in [*PAIRS, *((line, line) for line in LINES)]:
            a = _query("meaning-restart", rec, "before", old)
            b = _query("meaning-restart", rec, "after", new)
            if a is None or b is None or b.mode != "streaming":
                continue
            judged += 1
            with judged_for(new):
                comparison = compare(a, b)
                routes = {
                    "check_restore": _verdict(pytest_opid.check_restore(a, b)),
                    "compare": _verdict(comparison.restore),
                }
                fails = comparison.breaks(Check.default_for(b))
            if len(set(routes.values())) > 1 or fails != (
                routes["compare"] in ("refused", "reinterpreted")
            ):
                differ.append(f"{_ident(rec)} {old}->{new}: {routes}, fails the test: {fails}")
    assert judged >= 150
    assert not differ, "\n".join(differ[:30])


def test_a_change_has_one_severity_on_every_line() -> None:
    """The same A -> B pair restarted on each line (A's and B's fingerprints from that line,
    judged by its rules): the same severity on every line, but where the engine itself differs
    (:data:`ENGINE_DIFFERS`), and then the refusing line's message names it."""
    differ = []
    for rec in _meaning_cases():
        verdicts = {}
        messages = {}
        for line in LINES:
            a = _query("meaning-restart", rec, "before", line)
            b = _query("meaning-restart", rec, "after", line)
            if a is None or b is None or b.mode != "streaming":
                continue
            with judged_for(line):
                check = pytest_opid.check_restore(a, b)
            verdicts[line] = _verdict(check)
            messages[line] = " ".join(
                p.message for p in (*check.problems, *check.reinterpreted, *check.warnings)
            )
        case = _ident(rec)
        if len(set(verdicts.values())) <= 1:
            continue
        expected = ENGINE_DIFFERS.get(case)
        if expected is None or {k: expected.get(k) for k in verdicts} != verdicts:
            differ.append(f"{case}: {verdicts}")
            continue
        for line in (k for k, v in verdicts.items() if v == "refused"):  # the lines that refuse
            if f"Spark {line}" not in messages[line]:
                differ.append(f"{case}: Spark {line}'s message does not name it")
    assert not differ, "\n".join(differ)


#: Where Spark's lines really restart the same change differently (case -> line -> verdict):
#: Spark 4.3 widens state schemas to nullable on its own checkpoints, 3.5 to 4.2 do not and
#: refuse what the widening lets 4.3 restart (docs/spark-versions.md; the 4.3 verdicts are the
#: meaning-restart set's real runs).
_BEFORE_WIDENING = {"3.5": "refused", "4.0": "refused", "4.1": "refused", "4.2": "refused"}
ENGINE_DIFFERS: dict[str, dict[str, str]] = {
    "tumbling_to_sliding_window": {**_BEFORE_WIDENING, "4.3": "reinterpreted"},
    "join_inner_to_left_outer": {**_BEFORE_WIDENING, "4.3": "warned"},
}


def _records(set_name: str) -> list[dict[str, Any]]:
    folder = DATA / set_name
    if (folder / "cases.jsonl.gz").exists():
        with gzip.open(folder / "cases.jsonl.gz", "rt", encoding="utf-8") as f:
            return [json.loads(line) for line in f]
    text = (folder / "cases.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def _ident(rec: dict[str, Any]) -> str:
    case = rec.get("case")
    return str(case["id"] if isinstance(case, dict) else case or rec.get("pair") or rec["id"])
