"""One identity for a location (pytest_opid.io.location_identity): every spelling of one folder
as the store resolves it is the same location; another bucket, container, account, host or
folder is not; credentials are no part of it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_opid.io.location_identity import (
    local_folder,
    location_identity,
    qualified_location,
    same_location,
)
from pytest_opid.text import without_userinfo

SAME = [
    ("s3://b/q", "s3a://b/q"),
    ("s3://b/q", "s3n://b/q"),
    ("s3://b/q", "s3://b//q"),
    ("s3://b/q", "s3://b/./q"),
    ("s3://b/q", "S3://b/q"),
    ("s3://b/q", "s3a://b/q/"),
    ("s3://b/w/q", "s3://b/w/x/../q"),
    ("s3a://AKID:SECRET@b/q", "s3://b/q"),
    ("gs://b/q", "gcs://b/q/"),
    ("abfss://c@acct.dfs.core.windows.net/q", "abfs://c@acct.dfs.core.windows.net/q"),
    ("abfss://c@acct.dfs.core.windows.net/q", "wasbs://c@acct.blob.core.windows.net/q"),
    ("abfss://c@acct.dfs.core.windows.net/q", "wasb://c@ACCT.blob.core.windows.net//q/"),
    ("hdfs://nn:8020/q", "HDFS://nn:8020/q/"),
    ("dbfs:/q", "dbfs:/q/"),
    ("/srv/q", "file:///srv/q"),
    ("/srv/q", "file:/srv/q/"),
    ("/srv/q", "/srv//./q/"),
]

OTHER = [
    ("s3://b/q", "s3://b2/q"),
    ("s3://b/q", "s3://b/q2"),
    ("s3://b/q", "gs://b/q"),
    ("abfss://c@acct.dfs.core.windows.net/q", "abfss://d@acct.dfs.core.windows.net/q"),
    ("abfss://c@acct.dfs.core.windows.net/q", "abfss://c@other.dfs.core.windows.net/q"),
    ("hdfs://nn/q", "hdfs://nn2/q"),
    ("/srv/q", "file://host/srv/q"),
    ("/srv/q", "s3://srv/q"),
]


@pytest.mark.parametrize(("a", "b"), SAME)
def test_spellings_of_one_folder_are_one_location(a: str, b: str) -> None:
    assert same_location(a, b) and same_location(b, a)
    assert location_identity(a) == location_identity(b)


@pytest.mark.parametrize(("a", "b"), OTHER)
def test_other_folders_are_other_locations(a: str, b: str) -> None:
    assert not same_location(a, b) and not same_location(b, a)


def test_credentials_are_no_part_of_it() -> None:
    assert "SECRET" not in location_identity("s3a://AKID:SECRET@b/q")
    assert without_userinfo("s3a://AKID:SECRET@b/q") == "s3a://b/q"
    # Azure's container@account is the location, not a credential
    kept = "abfss://c@acct.dfs.core.windows.net/q"
    assert without_userinfo(kept) == kept
    assert without_userinfo("/srv/q") == "/srv/q"


def test_the_qualified_spelling_keeps_the_scheme_spark_compares() -> None:
    """A file source's path is compared as Spark compares it: qualified, aliases apart."""
    assert qualified_location("S3A://b//w/./q/") == "s3a://b/w/q"
    assert qualified_location("s3a://b/q") != qualified_location("s3://b/q")
    assert qualified_location("file:///srv//q/") == qualified_location("/srv/q") == "file:/srv/q"


def test_relative_and_linked_local_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    monkeypatch.chdir(tmp_path)
    assert same_location("real", str(real)) and same_location("./real/", f"file://{real}")
    assert same_location(str(tmp_path / "link"), str(real))
    assert local_folder("real") == os.path.join(str(tmp_path), "real")
    assert local_folder("s3://b/q") is None and local_folder("file://host/q") is None


def test_a_secret_holding_a_slash_is_no_part_of_the_identity() -> None:
    # AWS secret keys hold unencoded "/": the credentials run to the last "@", not the first "/"
    assert same_location("s3a://AKID:abc/def+ghi@bucket/q", "s3://bucket/q/")
    assert "abc" not in location_identity("s3a://AKID:abc/def+ghi@bucket/q")
