"""Issue 21 for the checkpoint reader: linear time whatever the logs hold, only regular files,
and errors in words.

Each checkpoint is built here, small, with only what the reader needs: ``metadata``, one offset
log entry and its commit, a file source log, a state store schema.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest

from pytest_opid.errors import DocumentError
from pytest_opid.spark.checkpoint.read import read_checkpoint


def entry(batch: int, name: str | None = None) -> str:
    path = f"file:/in/{name or batch}.csv"
    return json.dumps({"path": path, "timestamp": 1, "batchId": batch})


def checkpoint(root: Path, offsets: str, *, commit: bool = True) -> Path:
    (root / "offsets").mkdir(parents=True)
    (root / "metadata").write_text('{"id":"q"}')
    (root / "offsets" / "0").write_text(offsets)
    if commit:
        (root / "commits").mkdir()
        (root / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}\n')
    return root


def file_source(root: Path, log_offset: int) -> Path:
    cp = checkpoint(root, f'v1\n{{"conf":{{}}}}\n{{"logOffset":{log_offset}}}\n')
    (cp / "sources" / "0").mkdir(parents=True)
    return cp / "sources" / "0"


def failure(path: Path) -> str:
    with pytest.raises(DocumentError) as caught:
        read_checkpoint(path)
    message = str(caught.value)
    assert "\n" not in message
    return message


# -- 4. linear time ------------------------------------------------------------------------------


def test_many_named_sources_and_a_repeated_one(tmp_path: Path) -> None:
    lines = [f'source{i}:{{"offset":{i}}}' for i in range(3000)]
    cp = checkpoint(tmp_path / "a", "v2\n{}\n" + "\n".join(lines) + "\n")
    sources = read_checkpoint(cp).sources
    assert [s.source_id for s in sources] == [f"source{i}" for i in range(3000)]
    lines.append(lines[1234])
    cp = checkpoint(tmp_path / "b", "v2\n{}\n" + "\n".join(lines) + "\n")
    assert 'source "source1234" appears twice' in failure(cp)


def test_a_compaction_holding_many_batches_of_a_long_span(tmp_path: Path) -> None:
    """logOffset 200,000 with one 1,000-entry compaction and a few batches of their own: every
    batch of the span read from the file holding it, in batch order (the old reader scanned
    the compaction once per batch of the span)."""
    src = file_source(tmp_path / "cp", 200_000)
    folded = sorted({(i * 197) % 150_000 for i in range(1000)})
    (src / "150000.compact").write_text(
        "v1\n" + "\n".join(entry(b) for b in folded) + "\n" + entry(150_000, "last") + "\n"
    )
    # Batches after the compaction have their own files; one of them repeats a folded batch,
    # which its own file wins for (FileStreamSourceLog.get reads a batch's own file first).
    own = [*range(150_001, 200_001)]
    for b in own:
        (src / str(b)).write_text(f"v1\n{entry(b)}\n")
    (src / str(folded[3])).write_text(f"v1\n{entry(folded[3], 'own')}\n")
    files = read_checkpoint(tmp_path / "cp").sources[0].files
    expected = [f"file:/in/{b}.csv" for b in folded]
    expected[3] = "file:/in/own.csv"
    expected += ["file:/in/last.csv"] + [f"file:/in/{b}.csv" for b in own]
    assert files == tuple(expected)
    (src / "199999").unlink()
    assert "no log file holds file source batch 199999" in failure(tmp_path / "cp")


# -- 7. only regular files -----------------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_a_fifo_batch_file_is_refused_not_called_missing(tmp_path: Path) -> None:
    cp = checkpoint(tmp_path / "cp", 'v1\n{"conf":{}}\n{"logOffset":0}\n')
    os.mkfifo(cp / "offsets" / "1")
    message = failure(cp)
    assert message.startswith(f"{cp / 'offsets' / '1'}: cannot read it: it is a FIFO")
    assert "has no offset log entry" not in message


def test_a_directory_where_a_file_source_log_entry_should_be_is_named(tmp_path: Path) -> None:
    """Issue 31, finding 7: "error: [Errno 21] Is a directory: 3" named a descriptor, not the
    path, and left the descriptor open."""
    src = file_source(tmp_path / "cp", 3)
    for b in (0, 1, 2):
        (src / str(b)).write_text(f"v1\n{entry(b)}\n")
    (src / "3").mkdir()
    open_before = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    message = failure(tmp_path / "cp")
    assert message == f"{src / '3'}: cannot read it: it is a directory, not a file", message
    if open_before is not None:
        assert len(os.listdir("/proc/self/fd")) == open_before


def utf(text: str) -> bytes:
    """DataOutputStream.writeUTF for ASCII text."""
    return struct.pack(">H", len(text)) + text.encode()


STRUCT = '{"type":"struct","fields":[]}'


def with_schema(root: Path) -> Path:
    cp = checkpoint(root, 'v1\n{"conf":{}}\n-\n')
    schema = cp / "state" / "0" / "0" / "_metadata" / "schema"
    schema.parent.mkdir(parents=True)
    schema.write_bytes(utf("v1") + utf(STRUCT) + utf(STRUCT))
    return schema


def test_a_schema_that_is_a_directory_or_a_device_is_refused(tmp_path: Path) -> None:
    schema = with_schema(tmp_path / "cp")
    cp = tmp_path / "cp"
    assert read_checkpoint(cp).state_operators[0].stores[0].schema_version == 1
    schema.unlink()
    schema.mkdir()
    assert "schema: cannot read it: it is a directory" in failure(cp)
    if os.path.exists("/dev/zero"):
        schema.rmdir()
        schema.symlink_to("/dev/zero")
        assert "schema: cannot read it: it is a device, not a regular file" in failure(cp)


# -- 8. wording ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b"\xff", "byte 0xff, which UTF-8 never holds"),
        (b"\xf0\x9f\x98\x80", "byte 0xf0 starts a 4-byte sequence, which modified UTF-8"),
        (b"\xed\xa0\x80", "a lone surrogate (U+D800), which is not text"),
        (b"\xc3(", "byte 0xc3 is not valid there (invalid continuation byte)"),
    ],
)
def test_a_malformed_schema_string_is_named_in_words(
    tmp_path: Path, raw: bytes, words: str
) -> None:
    schema = with_schema(tmp_path / "cp")
    text = b'{"type":"struct","fields":[{"name":"' + raw + b'"}]}'
    schema.write_bytes(utf("v1") + struct.pack(">H", len(text)) + text + utf(STRUCT))
    message = failure(tmp_path / "cp")
    assert words in message
    assert "codec" not in message
