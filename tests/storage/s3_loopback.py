"""A real S3 API on loopback for the tests and the storage benchmark: moto's server (the
same WSGI application ``moto_server`` runs) on a free port of 127.0.0.1, behind a counter of
the HTTP requests it answers and the bytes of their bodies (moto keeps no such figures), and a
socket that accepts connections and never answers (a hung store)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

KEY_ID = "AKIDLOOPBACKTEST"
SECRET = "loopback-secret-5f3a9c1e7b"  # grepped for in every output of the tests


class Counted:
    """Requests and response body bytes the server answered, asked of the server."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint

    def _ask(self, what: str) -> dict[str, int]:
        with urllib.request.urlopen(f"{self.endpoint}/__opid_{what}", timeout=30) as answer:
            return json.loads(answer.read())  # type: ignore[no-any-return]

    def reset(self) -> None:
        self._ask("reset")

    @property
    def requests(self) -> int:
        return self._ask("counts")["requests"]

    @property
    def bytes(self) -> int:
        return self._ask("counts")["bytes"]


class _Counting:
    """The WSGI wrapper that counts (and answers the two questions above itself)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.requests = self.bytes = 0
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path in ("/__opid_counts", "/__opid_reset"):
            with self.lock:
                if path.endswith("reset"):
                    self.requests = self.bytes = 0
                body = json.dumps({"requests": self.requests, "bytes": self.bytes}).encode()
            start("200 OK", [("Content-Type", "application/json")])
            return [body]
        answer = self.app(environ, start)
        try:
            chunks = list(answer)
        finally:
            close = getattr(answer, "close", None)
            if close is not None:
                close()
        with self.lock:
            self.requests += 1
            self.bytes += sum(len(chunk) for chunk in chunks)
        return chunks


def _serve() -> None:
    """The child process: moto's S3 on a free loopback port, the port on stdout."""
    from moto.server import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    class Quiet(MotoRequestHandler):
        def log_request(self, *args: Any, **kwargs: Any) -> None:
            pass

    app = _Counting(DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=Quiet)
    print(server.server_port, flush=True)
    server.serve_forever()


@contextmanager
def moto_s3(check_credentials: bool = False) -> Iterator[tuple[str, Counted]]:
    """moto's S3 on a free loopback port, in a child process: (endpoint URL, its counter).
    ``check_credentials``: every request's key is checked, as S3 does (moto's IAM on)."""
    env = {**os.environ}
    if check_credentials:
        env["INITIAL_NO_AUTH_ACTION_COUNT"] = "0"
    child = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve())], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        endpoint = f"http://127.0.0.1:{port}"
        yield endpoint, Counted(endpoint)
    finally:
        child.terminate()
        child.wait(10)


@contextmanager
def hung_server() -> Iterator[str]:
    """A socket that accepts connections and never answers: (endpoint URL)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        sock.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(sock.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(2)
        for conn in held:
            conn.close()
        sock.close()


def environment(endpoint: str) -> dict[str, str]:
    """What a user of an S3-compatible store sets: the endpoint and the credentials."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": KEY_ID,
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
    }


def client(endpoint: str) -> Any:
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=KEY_ID,
        aws_secret_access_key=SECRET,
        region_name="us-east-1",
    )


def upload(s3: Any, bucket: str, folder: Path, prefix: str) -> int:
    """Every file under ``folder`` to ``s3://bucket/prefix/...`` (Hadoop's .crc files too, as
    an S3A sync would copy them), and an empty folder as the marker object S3A's mkdirs
    writes (``folder/``); the number of files."""
    n = 0
    for dirpath, dirs, files in os.walk(folder):
        if not dirs and not files:
            rel = Path(dirpath).relative_to(folder).as_posix()
            s3.put_object(Bucket=bucket, Key=f"{prefix}/{rel}/", Body=b"")
        for name in files:
            path = Path(dirpath) / name
            key = f"{prefix}/{path.relative_to(folder).as_posix()}"
            s3.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())
            n += 1
    return n


if __name__ == "__main__":
    _serve()
