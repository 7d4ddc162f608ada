"""The values of a fingerprint's endpoint rows as they are kept and written: facts that cannot
carry a secret.

A source's or sink's options are what a team hands its connectors, credentials included
(an account key, a SAS token, a password in a connection URI or a JDBC URL, a bearer header,
a private key), under any key a connector chooses: no pattern of key names finds them all
(the engine's own redaction pattern misses most). So the rule is the other way round: an
option's value is kept as written only for the options known to be harmless and read by the
restart checks (:data:`SHOWN`: limits, offsets, topics, formats, folders); every other
value is kept as a digest (:func:`digest`), which says whether it changed and nothing more.
Every URL in every value loses its credentials (:func:`pytest_opid.text.without_userinfo`).

:class:`~pytest_opid.result.Fingerprint` applies :func:`safe_endpoints` to every fingerprint
made or read, so that a snapshot, a saved fingerprint or a deploy record written before this
rule is compared digest to digest (never a "changed" for a value that did not change), and
written again without its secrets.

The digest is scrypt (RFC 7914; N=2**14, r=8, p=1: 16 MiB and tens of milliseconds per value)
keyed by a fixed tag and the option's key, 64 bits of it. No key can be secret: a snapshot
written on a laptop is compared on CI and against the record a deploy step wrote, and
whatever key all three share is as public as the snapshot. The key makes each option's
digests its own (no table of digests serves two options or two tools); the cost is what
protects a short password against guessing: a guess costs what computing the digest costs,
some hundred thousand times what an unkeyed SHA-256 costs on a GPU.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Sequence

from pytest_opid.text import without_userinfo

__all__ = [
    "DIGEST",
    "REDACTED",
    "SHOWN",
    "digest",
    "is_digest",
    "safe_endpoints",
    "safe_value",
]

#: How a digest of an option's value is written: ``scrypt:`` and 16 hexadecimal digits.
DIGEST = "scrypt:"

#: What fingerprints before the digest wrote for a value the redaction pattern matched; read
#: as it is (it holds no secret).
REDACTED = "*********(redacted)"

_DIGEST_TEXT = re.compile(r"scrypt:[0-9a-f]{16}")

#: The options whose values are shown, by key as the connectors read them (case-insensitively):
#: how much a batch reads, where a source starts and what it subscribes to, file formats and
#: folders, the rate and socket sources' settings, a Delta table's reading options. A value
#: here never holds a secret by what it is; any other option's value is a digest.
SHOWN = frozenset(
    {
        # file sources and sinks (FileStreamSource, FileStreamSink, the file formats)
        "maxfilespertrigger", "maxbytespertrigger", "latestfirst", "maxfileage",
        "filenameonly", "cleansource", "sourcearchivedir", "maxcachedfiles",
        "discardcachedinputratio", "basepath", "pathglobfilter", "recursivefilelookup",
        "modifiedbefore", "modifiedafter", "ignorecorruptfiles", "ignoremissingfiles",
        "header", "inferschema", "sep", "delimiter", "quote", "escape", "comment",
        "encoding", "charset", "multiline", "mode", "columnnameofcorruptrecord",
        "dateformat", "timestampformat", "timestampntzformat", "timezone", "linesep",
        "nullvalue", "emptyvalue", "nanvalue", "samplingratio", "enforceschema",
        "ignoreleadingwhitespace", "ignoretrailingwhitespace", "mergeschema",
        "datetimerebasemode", "int96rebasemode", "compression", "codec",
        "primitivesasstring", "prefersdecimal", "allowcomments", "allowsinglequotes",
        "allowunquotedfieldnames", "allownumericleadingzeros", "dropfieldifallnull",
        "wholetext", "rowtag", "maxrecordsperfile", "partitionoverwritemode",
        # Kafka (KafkaSourceProvider): what is read, where it starts, how much per batch
        "subscribe", "subscribepattern", "assign", "topic", "startingoffsets",
        "endingoffsets", "startingoffsetsbytimestamp", "endingoffsetsbytimestamp",
        "startingtimestamp", "endingtimestamp", "startingoffsetsbytimestampstrategy",
        "failondataloss", "maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay",
        "minpartitions", "maxrecordsperpartition", "groupidprefix", "kafka.group.id",
        "includeheaders", "kafka.bootstrap.servers", "kafka.security.protocol",
        "kafka.sasl.mechanism", "kafka.isolation.level", "fetchoffset.numretries",
        "fetchoffset.retryintervalms", "kafkaconsumer.polltimeoutms",
        # the rate, rate-micro-batch and socket sources, the console sink
        "rowspersecond", "rampuptime", "numpartitions", "rowsperbatch", "starttimestamp",
        "advancemillisperbatch", "host", "port", "includetimestamp", "numrows", "truncate",
        # Delta tables
        "ignorechanges", "ignoredeletes", "skipchangecommits", "readchangefeed",
        "startingversion", "txnversion", "txnappid", "overwriteschema",
        "maxrowspertrigger", "maxrecordspertrigger",
    }
)  # fmt: skip

#: A tag that makes these digests this tool's own (with the option's key: the scrypt salt).
_TAG = b"pytest-opid option value 1\x00"


@functools.lru_cache(maxsize=1024)
def digest(key: str, value: str) -> str:
    """``scrypt:`` and 64 bits of the scrypt of ``value`` keyed by the option's ``key``
    (case-insensitively, as connectors read options): equal values give equal digests on every
    machine, a changed value another one (see the module's docstring for why scrypt)."""
    salt = _TAG + key.lower().encode("utf-8", "surrogatepass")
    data = value.encode("utf-8", "surrogatepass")
    return DIGEST + hashlib.scrypt(data, salt=salt, n=2**14, r=8, p=1, dklen=8).hex()


def is_digest(value: str) -> bool:
    """Whether ``value`` is already kept as a fact without its secret: a digest, or the
    redaction mark older fingerprints wrote."""
    return value == REDACTED or _DIGEST_TEXT.fullmatch(value) is not None


def safe_value(fact: str, value: str) -> str:
    """An endpoint row's value as kept: an option (``option <key>``) shown where its key is
    in :data:`SHOWN`, else its digest; any value without a URL's credentials."""
    if fact.startswith("option "):
        key = fact[len("option ") :]
        if key.lower() not in SHOWN:
            return value if is_digest(value) else digest(key, value)
    return without_userinfo(value)


def safe_endpoints(
    rows: Sequence[tuple[str, str, str]],
) -> tuple[tuple[str, str, str], ...]:
    """``rows`` with every value as :func:`safe_value` keeps it (the same tuple where nothing
    changes)."""
    out = []
    changed = False
    for endpoint, fact, value in rows:
        kept = safe_value(fact, value)
        changed = changed or kept is not value
        out.append((endpoint, fact, kept))
    return tuple(rows) if not changed and isinstance(rows, tuple) else tuple(out)
