"""``Fingerprint.to_json`` and ``write_json`` write the saved form a chunk of entries at a time;
the text must be the standard library's, whatever falls at a chunk's edge.

Random fingerprints (names with escapes, non-ASCII and lone surrogates, chains with no nodes
or no members, optional lists empty, absent or long) are written whole and in chunks of every
small size, and compared byte for byte with ``json.dumps(to_dict(), indent=2)``.
"""

from __future__ import annotations

import io
import json
import random
from concurrent.futures import ThreadPoolExecutor

import pytest

from pytest_opid.io import saved_write
from pytest_opid.result import (
    ChainedOperator,
    Fingerprint,
    JobVertex,
    OperatorFingerprint,
    StateOperator,
    StateStore,
)

ALPHABET = 'ab:,"{}[]\\\n\t\x00\x1f é\u2028😀'


def text(rng: random.Random, surrogates: bool = False) -> str:
    chars = [rng.choice(ALPHABET) for _ in range(rng.randrange(8))]
    if surrogates and rng.random() < 0.3:
        chars.append("\ud800")
    return "".join(chars)


def hex_id(rng: random.Random) -> str:
    return f"{rng.getrandbits(128):032x}"


def maybe(rng: random.Random, value: object) -> object:
    return value if rng.random() < 0.5 else None


def random_fingerprint(rng: random.Random, surrogates: bool = False) -> Fingerprint:
    n = rng.randrange(30)
    ids = [hex_id(rng) for _ in range(n)]
    operators = tuple(
        OperatorFingerprint(
            node,
            text(rng, surrogates),
            ids[node],
            maybe(rng, hex_id(rng)),  # type: ignore[arg-type]
            maybe(rng, text(rng)),  # type: ignore[arg-type]
            rng.choice((-1, 1, 2**31 - 1)),
            None,
            rng.choice((-1, 128, -(2**31))),
            rng.choice((None, True, False)),
        )
        for node in range(n)
    )
    vertices = []
    for _ in range(rng.randrange(12)):
        members = rng.sample(range(n), rng.randrange(min(n, 4) + 1))
        vertices.append(
            JobVertex(
                hex_id(rng),
                text(rng, surrogates),
                rng.choice((1, 7)),
                tuple(ChainedOperator(ids[m], maybe(rng, hex_id(rng))) for m in members),  # type: ignore[arg-type]
                tuple(members) if rng.random() < 0.7 else (),
                rng.choice((-1, 4096)),
            )
        )
    vertex_of = {m.generated: v.id for v in vertices for m in v.operators}  # as read back
    operators = tuple(op._replace(job_vertex=vertex_of.get(op.operator_id)) for op in operators)
    states = None
    if rng.random() < 0.5:
        states = tuple(
            StateOperator(
                i,
                hex_id(rng),
                text(rng),
                text(rng),
                tuple(
                    StateStore(text(rng), maybe(rng, text(rng)), maybe(rng, '{"a": 1}'))  # type: ignore[arg-type]
                    for _ in range(rng.randrange(3))
                ),
            )
            for i in range(rng.randrange(4))
        )
    sources = tuple(text(rng) for _ in range(rng.randrange(4))) if rng.random() < 0.5 else None
    edges = None
    if rng.random() < 0.7 and n:
        edges = tuple(
            (rng.randrange(n), rng.randrange(n), text(rng)) for _ in range(rng.randrange(40))
        )
    return Fingerprint(
        operators,
        tuple(vertices),
        states,
        rng.choice(("flink", "spark", "", "é")),
        rng.choice(("streaming", "batch")),
        sources,
        edges,
    )


def standard(fp: Fingerprint) -> str:
    return json.dumps(fp.to_dict(), indent=2, ensure_ascii=False)


def written(fp: Fingerprint, rows_per_chunk: int) -> bytes:
    stream = io.BytesIO()
    fp.write_json(stream, rows_per_chunk)
    return stream.getvalue()


@pytest.mark.parametrize("seed", range(60))
def test_random_fingerprints_are_written_as_the_standard_library_writes_them(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    fp = random_fingerprint(rng, surrogates=seed % 3 == 0)
    expected = standard(fp)
    assert fp.to_json() == expected
    for rows in (1, 2, 3, 7, 10_000):
        monkeypatch.setattr(saved_write, "CHUNK_ROWS", rows)
        assert fp.to_json() == expected
        assert written(fp, rows) == expected.encode("utf-8", "backslashreplace")
    if seed % 3:  # the saved form reads back (a lone surrogate does not: not UTF-8)
        assert Fingerprint.from_json(expected.encode()) == fp


def test_chains_without_members_or_nodes() -> None:
    op = OperatorFingerprint(3, "x", "a" * 32)
    fp = Fingerprint((op,), (JobVertex("b" * 32, "empty", 1, ()), JobVertex("c" * 32, "v", 2, ())))
    assert fp.to_json() == standard(fp)
    assert written(fp, 1) == standard(fp).encode()
    assert fp.to_dict()["job_vertices"][0] == {
        "id": "b" * 32,
        "name": "empty",
        "parallelism": 1,
        "max_parallelism": -1,
        "operators": [],
        "nodes": [],
    }


def test_to_dict_holds_lists_only() -> None:
    rng = random.Random(7)
    fp = random_fingerprint(rng)
    while not (fp.edges and fp.sources is not None and fp.job_vertices):
        fp = random_fingerprint(rng)
    data = fp.to_dict()
    assert type(data["sources"]) is list
    assert all(type(e) is list for e in data["edges"])
    assert all(type(v["nodes"]) is list for v in data["job_vertices"])
    assert all(type(v["operators"]) is list for v in data["job_vertices"])


def test_keys_left_out_are_counted_per_decoding_in_threads_at_once() -> None:
    """The fast reader counts the defaults msgspec hands out; decodings in other threads must
    not mix into that count (a repeated key would pass, or a good file be read slowly)."""
    rng = random.Random(3)
    fps = [random_fingerprint(rng) for _ in range(8)]
    data = [fp.to_dict() for fp in fps]
    for d in data:  # version 1 style: keys left out, so defaults are taken
        for op in d["operators"]:
            del op["uid"], op["stateful"]
    good = [json.dumps(d).encode() for d in data]
    expected = [Fingerprint.from_dict(d) for d in data]  # the precise reader's
    repeated = [g.replace(b'{"node": ', b'{"node": 0, "node": ', 1) for g in good]

    def work(i: int) -> None:
        for _ in range(50):
            read = Fingerprint.decode_fast(good[i])
            assert read == expected[i] and read.edges == expected[i].edges
            if b'"node"' in repeated[i]:
                assert Fingerprint.decode_fast(repeated[i]) is None

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(work, range(len(good))))
