"""No secret is written (issue 48): option values a connector's credentials hide in are kept as
digests, a URL's credentials are stripped from every recorded path and masked in every
message, whatever characters the secret holds, and a fingerprint written before this rule
(its values verbatim) reads as the new one would be written: compared digest to digest, never a
"changed" for a value that did not change."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_opid.cli import main
from pytest_opid.errors import DocumentError
from pytest_opid.io.endpoint_values import SHOWN, digest, is_digest, safe_value
from pytest_opid.io.snapshot import dumps, loads
from pytest_opid.io.storage import locate
from pytest_opid.plugin.judge import judge
from pytest_opid.result import ChainedOperator, Fingerprint, JobVertex, OperatorFingerprint
from pytest_opid.text import printable, quote, quote_all, safe_text, without_userinfo

HEX = "0123456789abcdef0123456789abcdef"

#: The nine option values the issue found written verbatim, by the key a connector reads them
#: under, and the part of each that must appear nowhere.
SECRETS = {
    "fs.azure.account.key.acct.dfs.core.windows.net": ("AzKey0k1Q2w3E4r5T6y==", "AzKey0k1Q2"),
    "fs.azure.sas.cont.acct.blob.core.windows.net": (
        "sv=2022-11-02&ss=b&srt=co&sig=SasSigZ9y8X7w6%3D",
        "SasSigZ9y8",
    ),
    "connection.uri": ("mongodb://mongouser:MongoPw42x@db.example:27017/shop", "MongoPw42x"),
    "url": ("jdbc:sqlserver://db.example:1433;user=sa;pwd=JdbcPw77q", "JdbcPw77q"),
    "es.net.http.auth.pass": ("ElasticPw9k", "ElasticPw9k"),
    "gcp.credentials": ("eyJwcml2YXRlX2tleV9pZCI6IkdjcEtleTEyMyJ9", "eyJwcml2YXRl"),
    "header.Authorization": ("Bearer BearerTok555z", "BearerTok555z"),
    "api.key": ("ApiKey31337v", "ApiKey31337v"),
    "private.key": (
        "-----BEGIN PRIVATE KEY-----\nMIIEvQPemBody8h\n-----END PRIVATE KEY-----",
        "MIIEvQPemBody8h",
    ),
}

#: A sink path and a checkpoint location with credentials in them (a "/" in each secret: AWS
#: secret keys hold one).
SINK = "s3a://AKIAEXAMPLE:SinkSec/ret+9@bucket/out"
CHECKPOINT = "s3a://AKIAEXAMPLE:CkptSec/ret+8@bucket/ckpt"
PLANTED = [part for _, part in SECRETS.values()] + ["SinkSec", "CkptSec"]


def rows() -> tuple[tuple[str, str, str], ...]:
    """A writer's rows as pytest-opid 0.x recorded them: every value verbatim."""
    return (
        ("source 0", "format", "json"),
        ("source 0", "path", "/data/in"),
        ("source 0", "option maxFilesPerTrigger", "10"),
        ("sink", "kind", "file"),
        ("sink", "format", "parquet"),
        ("sink", "path", SINK),
        ("sink", "outputMode", "append"),
        ("sink", "checkpointLocation", CHECKPOINT),
        *(("sink", f"option {key}", value) for key, (value, _) in SECRETS.items()),
    )


def streaming(endpoints: tuple[tuple[str, str, str], ...]) -> Fingerprint:
    ops = (OperatorFingerprint(0, "Project", HEX, parallelism=2, job_vertex=HEX),)
    vertices = (JobVertex(HEX, "stage 0", 2, (ChainedOperator(HEX),), (0,)),)
    return Fingerprint(
        ops, vertices, (), "spark", "streaming", (f"FileSource json {SINK}",), endpoints=endpoints
    )


def leaked(text: str) -> list[str]:
    return [part for part in PLANTED if part in text]


def old_saved_form() -> str:
    """The saved fingerprint as it was written before the digests: the rows verbatim."""
    data = streaming(()).to_dict()
    data["endpoints"] = [list(row) for row in rows()]
    data["sources"] = [f"FileSource json {SINK}"]
    return json.dumps(data)


def old_snapshot() -> str:
    """The snapshot as it was written before the digests: each digest put back verbatim."""
    text = dumps(streaming(rows()))
    for key, (value, _) in SECRETS.items():
        text = text.replace(json.dumps(digest(key, value)), json.dumps(value))
    text = text.replace('"s3a://bucket/out"', json.dumps(SINK))
    return text.replace('"s3a://bucket/ckpt"', json.dumps(CHECKPOINT))


def test_no_option_value_outside_the_shown_keys_is_kept() -> None:
    fp = streaming(rows())
    kept = {fact: value for _, fact, value in fp.endpoints or ()}
    for key, (value, _) in SECRETS.items():
        assert kept[f"option {key}"] == digest(key, value)
    assert kept["option maxFilesPerTrigger"] == "10"
    assert kept["path"] == "s3a://bucket/out"
    assert kept["checkpointLocation"] == "s3a://bucket/ckpt"
    assert fp.sources == ("FileSource json s3a://bucket/out",)
    assert leaked(fp.to_json()) == []
    assert leaked(dumps(fp)) == []


def test_a_digest_detects_a_change_and_is_each_options_own() -> None:
    first = digest("es.net.http.auth.pass", "ElasticPw9k")
    assert first == digest("ES.net.http.auth.PASS", "ElasticPw9k")  # keys read case-insensitively
    assert first != digest("es.net.http.auth.pass", "ElasticPw9l")
    assert first != digest("api.key", "ElasticPw9k")
    assert is_digest(first) and first.startswith("scrypt:") and len(first) == len("scrypt:") + 16
    # a digest read back stays the digest (never the digest of a digest)
    assert safe_value("option es.net.http.auth.pass", first) == first
    # a shown key's value is kept, without a URL's credentials
    assert "sourcearchivedir" in SHOWN
    assert safe_value("option sourceArchiveDir", "s3a://k:s/x@b/archive") == "s3a://b/archive"


def test_an_old_saved_fingerprint_reads_as_digests_and_compares_equal() -> None:
    old = Fingerprint.from_json(old_saved_form())
    fast = Fingerprint.decode_fast(old_saved_form())
    new = streaming(rows())
    assert old.endpoints == new.endpoints and fast is not None and fast == new
    assert leaked(old.to_json()) == []
    changed = streaming(
        tuple((e, f, "ElasticPw9l" if f.endswith("auth.pass") else v) for e, f, v in rows())
    )
    assert changed.endpoints != old.endpoints


def test_an_old_snapshot_holding_verbatim_values_is_not_a_change() -> None:
    stored = old_snapshot()
    assert leaked(stored) != []  # what the snapshots users committed hold
    new = streaming(rows())
    assert loads(stored).endpoints == new.endpoints
    judgement = judge(stored, dumps(new))
    assert judgement.passes and judgement.kind == "harmless", judgement
    assert leaked(judgement.message or "") == []


@pytest.mark.parametrize(
    ("url", "secret"),
    [
        ("s3a://AKIAEXAMPLE:wJal/rXUtnF+EMI@bucket/ckpt", "wJal"),  # an unencoded "/"
        ("s3://AKIAEXAMPLE:qS3cr3tQ@bucket/ckpt?versionId=3", "qS3cr3tQ"),  # and a query
        ("s3://AKIAEXAMPLE:fS3cr3tF@bucket/ckpt#part", "fS3cr3tF"),  # and a fragment
        ("s3://user:a?b#c/d@bucket/ckpt", "a?b#c/d"),  # all of them in the secret
    ],
)
def test_credentials_in_a_url_never_reach_an_error_line(
    url: str, secret: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        shown = str(locate(url))
    except DocumentError as exc:
        shown = str(exc)
    assert secret not in shown and "***@bucket" in shown
    fp = tmp_path / "new.json"
    fp.write_text(streaming(()).to_json(), encoding="utf-8")
    code = main(["check-restore", f"{url}/nothing?x#y", str(fp)])
    err = capsys.readouterr().err
    assert code == 2 and secret not in err and err.count("\n") == 1, err


@pytest.mark.parametrize(
    "text",
    [
        "cannot read s3a://AKIAEXAMPLE:Sec/ret@bucket/x: access denied",
        'the path "abfss://c:Sec/ret?x#y@acct.dfs.core.windows.net/p" failed',
        "jdbc:postgresql://app:Sec/ret@db:5432/shop",
        "https://h/p?sv=2022&sig=Sec%2Fret&se=1",
    ],
)
def test_every_printing_helper_masks_credentials(text: str) -> None:
    for out in (printable(text), quote(text), quote_all([text])[0], safe_text(text)):
        assert "Sec" not in out, out
    assert "Sec" not in without_userinfo(text)


def test_what_is_no_credential_is_kept() -> None:
    for text in (
        "abfss://container@account.dfs.core.windows.net/ckpt",  # Azure's container@account
        "hdfs://namenode:8020/data/user@example.com/in",  # a port, an "@" in the path
        "/data/user@example.com/in",
        "file:///tmp/a@b",
        "s3://***@bucket/ckpt",  # already masked
    ):
        assert without_userinfo(text) == text
        assert printable(text) == text
