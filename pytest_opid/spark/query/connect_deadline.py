"""How long a replay's requests to a Spark Connect server may take (:mod:`.connect`): one
deadline for all the requests of a replay, carried by each gRPC call, and PySpark's retries of
an unreachable server bounded within it.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from pytest_opid.time_limits import seconds_from_environment

#: How long the requests of one replay to a Connect server may take in all, unless
#: ``PYTEST_OPID_CONNECT_TIMEOUT`` (seconds) says otherwise.
CONNECT_TIMEOUT = 60.0
TIMEOUT_VARIABLE = "PYTEST_OPID_CONNECT_TIMEOUT"
#: Retries of a request the server could not take (gRPC ``UNAVAILABLE``), within the limit.
_RETRIES = 2


def connect_timeout() -> float:
    """``PYTEST_OPID_CONNECT_TIMEOUT`` or :data:`CONNECT_TIMEOUT` (one line where malformed)."""
    return seconds_from_environment(TIMEOUT_VARIABLE, CONNECT_TIMEOUT)


class _DeadlineStub:
    """The client's gRPC stub with every call given what is left of one deadline as its
    ``timeout`` (the smaller of that and the client's own): gRPC then ends the call with
    ``DEADLINE_EXCEEDED``, which PySpark's retry policies do not retry."""

    def __init__(self, stub: Any, deadline: float) -> None:
        self._stub = stub
        self._deadline = deadline

    def __getattr__(self, method: str) -> Any:
        import time

        call = getattr(self._stub, method)

        def bounded(*args: Any, **kwargs: Any) -> Any:
            left = max(self._deadline - time.monotonic(), 0.001)
            given = kwargs.get("timeout")
            kwargs["timeout"] = left if given is None else min(float(given), left)
            return call(*args, **kwargs)

        return bounded


@contextmanager
def bounded_calls(client: Any, seconds: float) -> Iterator[None]:
    """Within the block, ``client``'s requests give up after ``seconds`` in all: each carries
    the time left as its gRPC deadline, and an unreachable server is retried :data:`_RETRIES`
    times with short waits (PySpark's ``DefaultPolicy``, bounded), not for ten minutes. The
    client's own stub and policies come back after."""
    import time

    from pyspark.sql.connect.client.retries import DefaultPolicy

    stub = client._stub
    policies = client.get_retry_policies()
    deadline = time.monotonic() + seconds
    client._stub = _DeadlineStub(stub, deadline)
    token = _LIMIT.set((deadline, seconds))
    client.set_retry_policies(
        [DefaultPolicy(max_retries=_RETRIES, initial_backoff=100, max_backoff=1000)]
    )
    try:
        with warnings.catch_warnings():
            # PySpark warns as it gives up retrying; the refusal says it in its own line
            warnings.filterwarnings("ignore", message=r"\[RETRIES_EXCEEDED\]")
            yield
    finally:
        _LIMIT.reset(token)
        client._stub = stub
        client.set_retry_policies(policies)


#: The deadline of the requests under way (:func:`bounded_calls`) and its length in seconds.
_LIMIT: ContextVar[tuple[float, float] | None] = ContextVar("opid_connect_limit", default=None)


def current_limit() -> tuple[float, float] | None:
    """The deadline of the requests under way (:func:`bounded_calls`) and its length in
    seconds; None outside :func:`bounded_calls`."""
    return _LIMIT.get()
