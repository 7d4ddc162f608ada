"""Opening an object store for :mod:`.storage`: the fsspec file system each URL scheme is read
with (its own instance, a deadline on every call, few retries), the credentials a URL carries
for Azure (a SAS token, the account a connection string names), and a store's failure said in
a few words.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import unquote

from pytest_opid.errors import DocumentError
from pytest_opid.text import printable, quote
from pytest_opid.time_limits import seconds_from_environment

#: The environment variable that bounds each call to a store, in seconds.
TIMEOUT_ENV = "OPID_STORAGE_TIMEOUT"


_DEFAULT_TIMEOUT = 60.0


def what_the_store_said(exc: BaseException) -> str:
    """A store's failure in a few words: the kind users recognise, then its own text."""
    name = type(exc).__name__
    text = " ".join(str(exc).split()) or name
    lowered = f"{name} {text}".lower()
    if isinstance(exc, PermissionError) or "accessdenied" in lowered or "forbidden" in lowered:
        kind = "access denied"
    elif any(w in lowered for w in ("nosuchbucket", "bucket does not exist", "containernotfound")):
        kind = "no such bucket"
    elif "timeout" in lowered or "timed out" in lowered:
        kind = f"the store did not answer in {store_timeout():g} s ({TIMEOUT_ENV})"
    elif "slowdown" in lowered or "throttl" in lowered or "503" in lowered:
        kind = "the store is throttling requests"
    elif "connect" in lowered or "unreachable" in lowered:
        kind = "the store is unreachable"
    else:
        kind = name
    return f"{kind} ({quote(text, 160)[1:-1]})" if text != name else kind


def store_timeout() -> float:
    """``OPID_STORAGE_TIMEOUT`` or the default: how long one request to a store may take."""
    return seconds_from_environment(TIMEOUT_ENV, _DEFAULT_TIMEOUT)


def is_sas(query: str) -> bool:
    """Whether a URL's query is an Azure shared access signature (its ``sig``, and the
    ``sv`` version or ``se`` expiry every SAS carries)."""
    keys = {part.partition("=")[0] for part in query.split("&")}
    return "sig" in keys and bool(keys & {"sv", "se"})


def sas_secrets(sas: str) -> tuple[str, ...]:
    """A SAS token's texts that must appear in no message: the token, its signature (as
    written and decoded)."""
    if not sas:
        return ()
    sigs = [part[4:] for part in sas.split("&") if part.startswith("sig=")]
    return (sas, *sigs, *(unquote(sig) for sig in sigs))


#: The connection string adlfs and Azure's own tools read.
_AZURE_CONNECTION = "AZURE_STORAGE_CONNECTION_STRING"


def azure_options(account: str, sas: str, shown: str) -> dict[str, Any]:
    """adlfs's options for a URL naming ``account`` (empty for ``az://container/path``),
    with the URL's SAS token if any. A connection string in the environment names the
    account's endpoint (an emulator's, a sovereign cloud's); one naming another account than
    the URL is an error, never a read of the other account. A SAS token in the URL is the
    credential: with the connection string's endpoint where there is one (Azure's SAS
    connection string, ``BlobEndpoint=...;SharedAccessSignature=...``), else the account's."""
    options: dict[str, Any] = {}
    if account:
        options["account_name"] = account
    given = os.environ.get(_AZURE_CONNECTION, "")
    parts = dict(
        (key.strip().lower(), value.strip())
        for key, _, value in (item.partition("=") for item in given.split(";"))
        if key.strip()
    )
    named = parts.get("accountname", "")
    endpoint = parts.get("blobendpoint", "")
    if account and named and named != account:
        raise DocumentError(
            f"{printable(shown)}: the account is {printable(account)}, but "
            f"{_AZURE_CONNECTION} is {printable(named)}'s; set the account's own connection string"
        )
    if sas:
        if endpoint:
            options["connection_string"] = f"BlobEndpoint={endpoint};SharedAccessSignature={sas}"
        elif account:
            options["sas_token"] = sas
            if given:  # adlfs would take it before the token
                raise DocumentError(
                    f"{printable(shown)}: a SAS token in the URL, and {_AZURE_CONNECTION} "
                    "without a BlobEndpoint: unset one of them"
                )
        else:
            raise DocumentError(
                f"{printable(shown)}: a SAS token needs the account: "
                "abfss://container@account.dfs.core.windows.net/path?sv=..."
            )
    return options


def open_filesystem(
    protocol: str, extra: str, package: str, options: dict[str, Any], shown: str
) -> Any:
    """The fsspec file system for ``protocol``: no instance shared with other callers (their
    listings cached there would hide a file deleted meanwhile), bounded retries."""
    try:
        import fsspec
    except ImportError:
        raise DocumentError(
            f"{printable(shown)}: reading a URL needs fsspec: "
            f"pip install 'pytest-opid[{extra or 's3'}]'"
        ) from None
    options = {**options, "skip_instance_cache": True}
    if protocol == "s3":
        timeout = store_timeout()
        options.update(
            use_listings_cache=False,
            config_kwargs={
                "connect_timeout": min(timeout, 10.0),
                "read_timeout": timeout,
                "retries": {"max_attempts": 2, "mode": "standard"},
            },
        )
    elif protocol == "gcs":
        options.update(requests_timeout=store_timeout(), use_listings_cache=False)
    elif protocol == "dbfs":
        options.update(
            instance=os.environ.get("DATABRICKS_HOST", "").removeprefix("https://"),
            token=os.environ.get("DATABRICKS_TOKEN", ""),
        )
    try:
        fs = fsspec.filesystem(protocol, **options)
    except ImportError as exc:
        hint = f"pip install 'pytest-opid[{extra}]'" if extra else f"install {package}"
        raise DocumentError(
            f"{printable(shown)}: reading {protocol} needs {package} ({hint}): {exc}"
        ) from None
    except Exception as exc:
        raise DocumentError(
            f"{printable(shown)}: cannot open the store: {what_the_store_said(exc)}"
        ) from None
    if protocol == "s3":
        fs.retries = 2  # s3fs's own retries (5) around botocore's: a throttled store is said
    return fs
