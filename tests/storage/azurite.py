"""A real Azure Blob Storage API on loopback for the tests and the storage benchmark: Azurite,
Microsoft's emulator, from npm (installed once into a cache folder outside the repository,
``OPID_AZURITE_DIR`` or ``~/.cache/pytest-opid/azurite-<version>``), started on a free port of
127.0.0.1 with its data in memory.

Azurite serves the Blob API, not ADLS Gen2's dfs endpoint; adlfs reads ``abfs://`` and
``abfss://`` URLs through the Blob API of the same account, which is what the tests exercise.
The emulator's one account, ``devstoreaccount1``, and its published key are reached the way a
user reaches an account: ``AZURE_STORAGE_CONNECTION_STRING``, which adlfs reads.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

#: The Azurite release the tests install (npm's azurite package).
VERSION = "3.37.0"
ACCOUNT = "devstoreaccount1"
#: Azurite's well-known development key (published in its README; not a secret anywhere).
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def missing_node() -> str | None:
    """Why Azurite cannot run here (no node or npm), or None."""
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            return f"Azurite needs {tool} (Node.js) on PATH; it is not installed here"
    return None


def _folder() -> Path:
    given = os.environ.get("OPID_AZURITE_DIR")
    if given:
        return Path(given)
    return Path.home() / ".cache" / "pytest-opid" / f"azurite-{VERSION}"


def installed() -> Path:
    """Azurite's blob service command, installed from npm on first use."""
    folder = _folder()
    command = folder / "node_modules" / ".bin" / "azurite-blob"
    if not command.exists():
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(folder),
             f"azurite@{VERSION}"],
            check=True, capture_output=True, timeout=600,
        )  # fmt: skip
    return command


@contextmanager
def azurite(folder: Path) -> Iterator[str]:
    """Azurite's blob service on a free loopback port (data in memory, its workspace files and
    what it says in ``folder``): the blob endpoint of its account."""
    said = folder / "azurite.log"
    with said.open("wb") as log:
        child = subprocess.Popen(
            [str(installed()), "--blobHost", "127.0.0.1", "--blobPort", "0", "--silent",
             "--inMemoryPersistence", "--disableTelemetry", "--skipApiVersionCheck"],
            cwd=folder, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            found = re.search(r"listens on (http://127\.0\.0\.1:\d+)", said.read_text())
            if found or child.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        if not found:
            raise RuntimeError(f"Azurite did not start: {said.read_text()[-500:]}")
        yield f"{found.group(1)}/{ACCOUNT}"
    finally:
        child.terminate()
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(10)


def connection_string(endpoint: str, key: str = KEY) -> str:
    return (
        f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={key};"
        f"BlobEndpoint={endpoint};"
    )


def environment(endpoint: str) -> dict[str, str]:
    """What a user of the account sets: its connection string (adlfs reads it)."""
    return {"AZURE_STORAGE_CONNECTION_STRING": connection_string(endpoint)}


def client(endpoint: str) -> Any:
    from azure.storage.blob import BlobServiceClient

    return BlobServiceClient.from_connection_string(connection_string(endpoint))


def upload(service: Any, container: str, folder: Path, prefix: str) -> int:
    """Every file under ``folder`` to ``container/prefix/...``, and an empty folder as the
    marker blob Hadoop's Azure connectors write for one (``hdi_isfolder``); the number of
    files."""
    box = service.get_container_client(container)
    n = 0
    for dirpath, dirs, files in os.walk(folder):
        rel = Path(dirpath).relative_to(folder).as_posix()
        if not dirs and not files:
            box.upload_blob(f"{prefix}/{rel}", b"", metadata={"hdi_isfolder": "true"})
        for name in files:
            path = Path(dirpath) / name
            box.upload_blob(f"{prefix}/{path.relative_to(folder).as_posix()}", path.read_bytes())
            n += 1
    return n
