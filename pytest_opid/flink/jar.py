"""Java and Scala jobs: the fingerprint of the job a jar's ``main`` builds.

:func:`fingerprint_jar` runs the jar's entry point under Flink's own client machinery, as
``flink run`` does before it submits anything: ``PackagedProgram`` (the jar with the libraries
it nests under ``lib/``, in a user-code class loader) and
``PackagedProgramUtils.getPipelineFromProgram``, which lets ``main`` build its pipeline and
stops it at ``execute()``. That happens in the JVM PyFlink ships (its py4j gateway, Flink's
jars on the class path), so PyFlink is the one requirement. The StreamGraph is then read and
hashed exactly as for PyFlink (:mod:`pytest_opid.flink.pyflink`).

Nothing is submitted and no cluster is contacted; the job's ``main`` does run, so whatever it
does before ``execute()`` (reading its arguments or a config file) happens here too.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from pytest_opid.errors import OpidError
from pytest_opid.flink.chaining import ChainingRule
from pytest_opid.flink.jvm import FlinkJvm, root_message
from pytest_opid.flink.stream_graph import (
    StreamGraphReading,
    fingerprint_reading,
    read_stream_graph,
)
from pytest_opid.result import Fingerprint

__all__ = ["JarJob", "fingerprint_jar", "jar_job", "jar_job_graph"]


class JarJob(NamedTuple):
    """A jar's job while it is open: the Java ``StreamGraph`` its main built and the user-code
    class loader its classes live in (Flink's JobGraph generation needs it)."""

    stream_graph: Any
    class_loader: Any
    main_class: str


def fingerprint_jar(
    path: str | os.PathLike[str],
    main_class: str | None = None,
    args: Sequence[str] = (),
    *,
    parallelism: int | None = None,
    chaining: ChainingRule | None = None,
) -> Fingerprint:
    """The fingerprint of the job the jar at ``path`` builds: its manifest's ``Main-Class``
    (or ``main_class``) run with ``args``. ``parallelism`` is the default parallelism the job
    gets (``flink run -p``); without it, Flink's default (``parallelism.default``, 1).

    Raises :class:`~pytest_opid.errors.OpidError` with one line saying what went wrong: no
    such jar, no main class, a main that throws, a main that builds no pipeline."""
    with jar_job(path, main_class, args, parallelism=parallelism) as job:
        reading = read_stream_graph(job.stream_graph)
    return fingerprint_reading(reading, chaining)


def jar_job_graph(
    path: str | os.PathLike[str],
    main_class: str | None = None,
    args: Sequence[str] = (),
    *,
    parallelism: int | None = None,
) -> tuple[StreamGraphReading, list[dict[str, Any]]]:
    """Our reading of the jar's StreamGraph and Flink's own JobGraph of it (the tests' witness,
    see :meth:`~pytest_opid.flink.jvm.FlinkJvm.job_graph`)."""
    jvm = FlinkJvm.get()
    with jar_job(path, main_class, args, parallelism=parallelism) as job:
        reading = read_stream_graph(job.stream_graph)
        vertices = jvm.job_graph(job.stream_graph, job.class_loader)
    return reading, vertices


@contextmanager
def jar_job(
    path: str | os.PathLike[str],
    main_class: str | None = None,
    args: Sequence[str] = (),
    *,
    parallelism: int | None = None,
) -> Iterator[JarJob]:
    """Run the jar's main up to ``execute()`` and hold its StreamGraph for the ``with`` block
    (the program, with its class loader and extracted libraries, is closed afterwards)."""
    jar = Path(path)
    where = os.fspath(path)
    if not jar.is_file():
        raise OpidError(f"{where}: no such jar file")
    if not zipfile.is_zipfile(jar):
        raise OpidError(f"{where}: not a jar (zip) file")
    if parallelism is not None and (
        not isinstance(parallelism, int) or isinstance(parallelism, bool) or parallelism < 1
    ):
        raise ValueError(f"parallelism must be a positive integer, got {parallelism!r}")
    if main_class is None and not _manifest_main_class(jar):
        raise OpidError(
            f"{where}: the jar names no main class (no Main-Class or program-class in its "
            "manifest): pass the job's class (opid fingerprint JOB.jar --main-class C)"
        )
    jvm = FlinkJvm.get()
    gateway = jvm.gateway
    jargs = gateway.new_array(gateway.jvm.java.lang.String, len(args))
    for i, arg in enumerate(args):
        jargs[i] = str(arg)
    try:
        pipeline = jvm.helper.jarPipeline(
            str(jar.resolve()), main_class, jargs, parallelism if parallelism else -1
        )
    except Exception as exc:
        raise _jar_error(jvm, exc, where, main_class) from None
    try:
        graph = pipeline.getPipeline()
        class_name = gateway.jvm.java.lang.Class.forName(
            "org.apache.flink.streaming.api.graph.StreamGraph"
        )
        if not class_name.isInstance(graph):
            raise OpidError(
                f"{where}: the job built a {graph.getClass().getName()}, not a DataStream or "
                "Table API StreamGraph"
            )
        yield JarJob(graph, pipeline.getClassLoader(), str(pipeline.getMainClassName()))
    finally:
        pipeline.close()


def _manifest_main_class(jar: Path) -> str | None:
    try:
        with zipfile.ZipFile(jar) as archive:
            manifest = archive.read("META-INF/MANIFEST.MF").decode("utf-8", "replace")
    except (KeyError, OSError, zipfile.BadZipFile):
        return None
    # Manifest lines wrap at 72 bytes with a leading space on the continuation.
    text = manifest.replace("\r\n", "\n").replace("\n ", "")
    for line in text.split("\n"):
        key, _, value = line.partition(":")
        if key.strip().lower() in ("program-class", "main-class") and value.strip():
            return value.strip()
    return None


def _jar_error(jvm: FlinkJvm, exc: Exception, where: str, main_class: str | None) -> OpidError:
    java = getattr(exc, "java_exception", None)
    if java is None:
        return OpidError(f"{where}: {exc}")
    chain = jvm.describe(java)
    messages = " ".join(message for _, message in chain)
    if "could not be fetched" in messages or "aborted pre-maturely" in messages:
        return OpidError(
            f"{where}: the job's main returned without building a pipeline (it never called "
            "execute() on a StreamExecutionEnvironment or executed a Table API statement)"
        )
    if any(name.endswith("ClassNotFoundException") for name, _ in chain) or (
        "Could not find the entry point" in messages
        or "Could not load the provided entrypoint" in messages
    ):
        return OpidError(
            f"{where}: cannot load the main class {main_class or '(from the manifest)'}: "
            f"{root_message(chain)}"
        )
    if "main method caused an error" in messages:
        cause = _after_main(chain)
        return OpidError(f"{where}: the job's main method failed: {cause}")
    if "does not have a main" in messages or "needs to have a static main" in messages:
        return OpidError(f"{where}: {root_message(chain)}")
    return OpidError(f"{where}: Flink could not run the job's main: {root_message(chain)}")


def _after_main(chain: Sequence[tuple[str, str]]) -> str:
    """The user's own exception behind Flink's "The main method caused an error"."""
    for i, (_, message) in enumerate(chain):
        if "main method caused an error" in message and i + 1 < len(chain):
            name, inner = chain[i + 1]
            first = inner.strip().split("\n", 1)[0].strip()
            return f"{name}: {first}" if first else name
    return root_message(chain)
