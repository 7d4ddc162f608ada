"""A real S3 API on loopback for the tests and the storage benchmark: moto's server (the
same WSGI application ``moto_server`` runs) on a free port of 127.0.0.1, behind a counter of
the HTTP requests it answers and the bytes of their bodies (moto keeps no such figures), and a
socket that accepts connections and never answers (a hung store)."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

KEY_ID = "AKIDLOOPBACKTEST"
SECRET = "loopback-secret-5f3a9c1e7b"  # grepped for in every output of the tests


class Counted:
    """Requests and response body bytes the server answered."""

    def __init__(self) -> None:
        self.requests = 0
        self.bytes = 0
        self.lock = threading.Lock()

    def reset(self) -> None:
        with self.lock:
            self.requests = self.bytes = 0


class _Counting:
    def __init__(self, app: Any, counted: Counted) -> None:
        self.app, self.counted = app, counted

    def __call__(self, environ: dict[str, Any], start: Callable[..., Any]) -> Iterable[bytes]:
        with self.counted.lock:
            self.counted.requests += 1
        for chunk in self.app(environ, start):
            with self.counted.lock:
                self.counted.bytes += len(chunk)
            yield chunk


@contextmanager
def moto_s3() -> Iterator[tuple[str, Counted]]:
    """moto's S3 on a free loopback port: (endpoint URL, its counter)."""
    from moto.server import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import WSGIRequestHandler, make_server

    class Quiet(WSGIRequestHandler):
        def log_request(self, *args: Any, **kwargs: Any) -> None:
            pass

    counted = Counted()
    app = _Counting(DomainDispatcherApplication(create_backend_app), counted)
    server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", counted
    finally:
        server.shutdown()
        server.server_close()


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
