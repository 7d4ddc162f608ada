"""Fuzzing every loader and the CLI: only the project's own errors, ever.

Two fuzzers, both deterministic in CI: a Hypothesis property that mutates parsed inputs
(values replaced by other JSON values, keys dropped, lists cut), and a byte-level mutation
fuzzer over real input files (documents, execution plans, saved fingerprints, ``.opid``
snapshots) fed through the ``opid`` command. Any exception other than an ``OpidError``, any
traceback, any exit status other than 0/1/2, or output that is not UTF-8 is a finding.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pytest_opid
from pytest_opid.cli import main
from pytest_opid.engines import engine_rules
from pytest_opid.errors import OpidError
from pytest_opid.inputs import read_data
from pytest_opid.io.snapshot import dumps

DATA = Path(__file__).resolve().parents[1] / "data"


def _seeds() -> dict[str, Any]:
    lines = (DATA / "cases.jsonl").read_text(encoding="utf-8").splitlines()
    case = json.loads(lines[3])
    plan_case = next(json.loads(line) for line in lines if '"flink_plan":"' in line)
    document = case["topology"]
    fp = pytest_opid.fingerprint(document)
    return {
        "document": document,
        "plan": json.loads(plan_case["flink_plan"]),
        "fingerprint": fp.to_dict(),
        "snapshot": dumps(fp, engine_rules(fp.engine).snapshot_preamble(fp)),
    }


SEEDS = _seeds()

# -- a property over parsed inputs ----------------------------------------------------------------

_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
    | st.text(st.characters(codec=None, categories=["Cs", "Zl", "Zp", "Cc", "Cf"]), max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a parsed JSON value, walked with a stack."""
    found = []
    stack = [(value, prefix)]
    while stack:
        node, at = stack.pop()
        found.append(at)
        if isinstance(node, dict):
            stack.extend((v, (*at, k)) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, (*at, i)) for i, v in enumerate(node))
    return found


def _mutated(seed: Any, draw: Any) -> Any:
    data = json.loads(json.dumps(seed))
    for _ in range(draw(st.integers(1, 3))):
        places = _paths(data)
        at = draw(st.sampled_from(places))
        if not at:
            data = draw(_JSON)
            continue
        parent = data
        for key in at[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["replace", "delete", "duplicate"]))
        if action == "replace":
            parent[at[-1]] = draw(_JSON)
        elif action == "delete":
            del parent[at[-1]]
        elif isinstance(parent, list):
            parent.append(json.loads(json.dumps(parent[at[-1]])))
    return data


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(data=st.data(), kind=st.sampled_from(["document", "plan", "fingerprint"]))
def test_parsed_inputs_fail_only_with_opid_errors(data, kind):
    mutated = _mutated(SEEDS[kind], data.draw)
    for form in (kind, None):
        try:
            fp = read_data(mutated, form, None, "fuzzed.json")
        except OpidError as exc:
            message = str(exc)
            assert "\n" not in message and len(message) < 1000
            continue
        fp.to_json()  # what was accepted can be written back out


# -- a byte-level mutation fuzzer through the CLI -------------------------------------------------


def _mutate_bytes(raw: bytes, rng: random.Random) -> bytes:
    data = bytearray(raw)
    for _ in range(rng.randint(1, 4)):
        choice = rng.random()
        at = rng.randrange(len(data)) if data else 0
        if choice < 0.3 and data:
            data[at] = rng.randrange(256)
        elif choice < 0.5:
            data[at:at] = rng.choice(
                [
                    b"\\ud800",
                    b"1e999",
                    b"NaN",
                    b"9" * 30,
                    b"\xff",
                    b"[" * 300,
                    "\u2028".encode(),
                    b'"',
                    b"{",
                ]
            )
        elif choice < 0.7 and data:
            del data[at : at + rng.randint(1, 40)]
        elif choice < 0.85:
            data = data[: rng.randrange(len(data) + 1)]
        else:
            data[at:at] = data[at : at + rng.randint(1, 200)]
    return bytes(data)


def _run_cli(argv: list[str]) -> tuple[int, bytes, bytes]:
    out, err = io.BytesIO(), io.BytesIO()
    stdout = io.TextIOWrapper(out, encoding="utf-8")
    stderr = io.TextIOWrapper(err, encoding="utf-8")
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(argv)
        stdout.flush()
        stderr.flush()
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("kind", ["document", "plan", "fingerprint", "snapshot"])
def test_mutated_files_through_the_cli(tmp_path, kind):
    seed = SEEDS[kind]
    raw = (seed if isinstance(seed, str) else json.dumps(seed, ensure_ascii=False)).encode()
    rng = random.Random(f"opid-{kind}")  # a fixed seed: the same inputs on every run
    path = tmp_path / ("input.opid" if kind == "snapshot" else "input.json")
    findings = []
    for round_ in range(600):
        path.write_bytes(_mutate_bytes(raw, rng))
        for argv in (["fingerprint", str(path)], ["diff", str(path), str(path)]):
            try:
                code, out, err = _run_cli(argv)
            except BaseException as exc:
                findings.append(f"round {round_} {argv[0]}: {type(exc).__name__}: {exc}")
                continue
            if code not in (0, 1, 2):
                findings.append(f"round {round_} {argv[0]}: exit {code}")
            for stream in (out, err):
                try:
                    stream.decode("utf-8")
                except UnicodeDecodeError:
                    findings.append(f"round {round_} {argv[0]}: output is not UTF-8")
            if b"Traceback" in err:
                findings.append(f"round {round_} {argv[0]}: traceback")
            if code == 2 and (out or err.count(b"\n") != 1 or len(err) > 400):
                findings.append(f"round {round_} {argv[0]}: error output {err[:120]!r}")
    assert findings == []


def test_a_real_process_never_shows_a_traceback(tmp_path):
    bad = tmp_path / "deep.json"
    bad.write_text("[" * 100_000)
    surrogate = tmp_path / "surrogate.json"
    surrogate.write_text('{"nodes": [{"id": 1, "name": "\\ud800"}], "edges": []}')
    for path in (bad, surrogate):
        done = subprocess.run(
            [sys.executable, "-m", "pytest_opid", "fingerprint", str(path)],
            capture_output=True,
            timeout=120,
        )
        assert done.returncode == 2
        assert done.stdout == b""
        assert done.stderr.startswith(b"error: ") and b"Traceback" not in done.stderr
        assert done.stderr.count(b"\n") == 1
