"""A foreachBatch function or foreach writer changed, judged from two fingerprints' sink facts
(no Spark job): what the function's DataFrameWriter calls show is a finding of its own (an
overwrite, another target, another format), anything else "not verified", and a writer whose
code could not be digested is never "safe"."""

from __future__ import annotations

import pytest

import pytest_opid
from pytest_opid.result import ChainedOperator, Fingerprint, JobVertex, OperatorFingerprint

HEX = "0123456789abcdef0123456789abcdef"


def writer(kind: str, function: str, *writes: tuple[str, str, str, str]) -> Fingerprint:
    rows = [
        ("source 0", "format", "json"),
        ("source 0", "path", "/data/in"),
        ("sink", "kind", kind),
        ("sink", "function", function),
    ]
    if writes:
        rows.append(("sink", "writes", str(len(writes))))
    for i, (mode, fmt, target, where) in enumerate(writes):
        prefix = "write" if i == 0 else f"write {i + 1}"
        rows += [
            ("sink", f"{prefix} mode", mode),
            ("sink", f"{prefix} format", fmt),
            ("sink", f"{prefix} {target}", where),
        ]
    rows += [("sink", "outputMode", "append"), ("sink", "trigger", "AvailableNowTrigger")]
    ops = (OperatorFingerprint(0, "Project", HEX, parallelism=2, job_vertex=HEX),)
    vertices = (JobVertex(HEX, "stage 0", 2, (ChainedOperator(HEX),), (0,)),)
    return Fingerprint(
        ops, vertices, (), "spark", "streaming", ("FileSource json …/in",), endpoints=tuple(rows)
    )


A = "1111111111111111 (source)"
B = "2222222222222222 (source)"
APPEND = ("append", "parquet", "path", "/data/fb")


@pytest.mark.parametrize(
    ("now", "kind", "words"),
    [
        (("overwrite", "parquet", "path", "/data/fb"), "rows_lost", "save mode overwrite"),
        (("append", "parquet", "path", "/data/fb2"), "rows_lost", "now writes to /data/fb2"),
        (("append", "parquet", "table", "events"), "rows_lost", "now writes to events"),
        (("append", "json", "path", "/data/fb"), "results_changed", "now writes json into"),
    ],
)
def test_what_the_writes_show(now: tuple[str, str, str, str], kind: str, words: str) -> None:
    check = pytest_opid.check_restore(
        writer("foreachBatch", A, APPEND), writer("foreachBatch", B, now)
    )
    assert check.safe is False
    (found,) = check.reinterpreted
    assert found.kind == kind and words in found.message, found.message


def test_the_same_writes_are_not_verified() -> None:
    check = pytest_opid.check_restore(
        writer("foreachBatch", A, APPEND), writer("foreachBatch", B, APPEND)
    )
    assert check.restorable and check.safe is None and not check.reinterpreted
    (item,) = [u for u in check.unverified if u.kind == "sink"]
    assert "writes as before" in item.message and "was not shown" in item.message
    # per batch into its own folder: an overwrite there replaces only that batch
    per_batch = ("overwrite", "parquet", "path", "/data/fb/batch_id=<batch_id>")
    check = pytest_opid.check_restore(
        writer("foreachBatch", A, per_batch), writer("foreachBatch", B, per_batch)
    )
    assert check.safe is None


@pytest.mark.parametrize("kind", ["foreachBatch", "foreach"])
def test_a_writer_never_digested_is_not_safe(kind: str) -> None:
    check = pytest_opid.check_restore(writer(kind, "?"), writer(kind, "?"))
    assert check.safe is None, check.to_dict()
    assert any("could not be compared" in u.message for u in check.unverified)
    same = pytest_opid.check_restore(writer(kind, A), writer(kind, A))
    assert same.safe is True, same.to_dict()
