"""PyFlink's JVM with pytest-opid's helper class loaded into it: compiled on first use with the
JDK's compiler inside PyFlink's own JVM and cached on disk, so reading a StreamGraph of any size
takes a few py4j calls.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_opid.errors import OpidError
from pytest_opid.flink.java_helper import HELPER_CLASS, HELPER_SOURCE

__all__ = ["FlinkJvm", "root_message"]

#: Characters fetched per py4j call: py4j answers through an 8 KiB buffer without TCP_NODELAY,
#: so a longer answer waits for a delayed ACK (~40 ms); JSON comes in pieces that fit it.
_CHUNK = 7500


class FlinkJvm:
    """PyFlink's JVM (its py4j gateway) with pytest-opid's helper class loaded into it.

    One per gateway, built on first use: PyFlink starts its JVM once per Python process, so a
    test session shares one JVM and compiles (or loads from the cache) the helper once.
    """

    _instances: dict[int, FlinkJvm] = {}

    def __init__(self, gateway: Any) -> None:
        self.gateway = gateway
        self.jvm = gateway.jvm
        self.helper = self._load_helper()

    @classmethod
    def get(cls) -> FlinkJvm:
        """The helper on PyFlink's gateway (starting PyFlink's JVM if it is not running)."""
        from pyflink.java_gateway import get_gateway

        gateway = get_gateway()
        found = cls._instances.get(id(gateway))
        if found is None or found.gateway is not gateway:
            found = cls._instances[id(gateway)] = cls(gateway)
        return found

    # -- helper class ------------------------------------------------------------------------

    def _load_helper(self) -> Any:
        jvm = self.jvm
        system = jvm.java.lang.System
        flink_version = jvm.org.apache.flink.runtime.util.EnvironmentInformation.getVersion()
        key = hashlib.sha256(
            "\0".join(
                [HELPER_SOURCE, str(system.getProperty("java.version")), str(flink_version)]
            ).encode()
        ).hexdigest()[:20]
        classes = _cache_root() / f"flink-helper-{key}"
        class_file = classes.joinpath(*HELPER_CLASS.split(".")).with_suffix(".class")
        if not class_file.is_file():
            self._compile(classes)
        url = jvm.java.io.File(str(classes)).toURI().toURL()
        urls = self.gateway.new_array(jvm.java.net.URL, 1)
        urls[0] = url
        parent = jvm.java.lang.Class.forName(
            "org.apache.flink.streaming.api.graph.StreamGraph"
        ).getClassLoader()
        loader = jvm.java.net.URLClassLoader(urls, parent)
        cls = loader.loadClass(HELPER_CLASS)
        constructor = cls.getDeclaredConstructor(self.gateway.new_array(jvm.java.lang.Class, 0))
        return constructor.newInstance(self.gateway.new_array(jvm.java.lang.Object, 0))

    def _compile(self, target: Path) -> None:
        """Compile the helper with the JDK compiler of PyFlink's JVM into ``target`` (through a
        temporary directory renamed into place, so concurrent sessions never see half a class)."""
        jvm = self.jvm
        compiler = jvm.javax.tools.ToolProvider.getSystemJavaCompiler()
        if compiler is None:
            raise OpidError(
                "pytest-opid reads Flink's stream graph with a small Java class it compiles on "
                "first use, and PyFlink's Java runtime "
                f"({jvm.java.lang.System.getProperty('java.home')}) has no compiler: run PyFlink "
                "on a JDK (JAVA_HOME pointing at a JDK 11+), not a JRE"
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
        source = work / "src" / (HELPER_CLASS.rsplit(".", 1)[1] + ".java")
        source.parent.mkdir(parents=True)
        source.write_text(HELPER_SOURCE, encoding="utf-8")
        out = work / "classes"
        out.mkdir()
        classpath = str(jvm.java.lang.System.getProperty("java.class.path"))
        args = ["-nowarn", "-proc:none", "-encoding", "UTF-8", "-cp", classpath]
        args += ["-d", str(out), str(source)]
        jargs = self.gateway.new_array(jvm.java.lang.String, len(args))
        for i, arg in enumerate(args):
            jargs[i] = arg
        errors = jvm.java.io.ByteArrayOutputStream()
        status = compiler.run(None, errors, errors, jargs)
        if status != 0:
            raise OpidError(
                "could not compile pytest-opid's Flink helper against this Flink: "
                + str(errors.toString())[:2000]
            )
        try:
            out.rename(target)
        except OSError:  # another session compiled it meanwhile
            if not target.is_dir():
                raise
        finally:
            _remove_tree(work)

    # -- reading -----------------------------------------------------------------------------

    def fetch(self, builder: Any) -> str:
        """The text of a JVM ``StringBuilder``, in pieces that avoid py4j's delayed ACKs."""
        size = builder.length()
        if size <= _CHUNK:
            return str(builder.toString())
        return "".join(
            str(builder.substring(start, min(start + _CHUNK, size)))
            for start in range(0, size, _CHUNK)
        )

    def stream_graph_json(self, j_graph: Any) -> dict[str, Any]:
        """The StreamGraph's nodes and edges, parsed (see :func:`topology_from_graph_json`)."""
        data: dict[str, Any] = json.loads(self.fetch(self.helper.streamGraph(j_graph)))
        return data

    def job_graph(self, j_graph: Any, class_loader: Any = None) -> list[dict[str, Any]]:
        """Flink's own JobGraph of a StreamGraph: vertices in topological order, each with id,
        name, parallelism, max parallelism and its (generated, user-defined) operator IDs."""
        vertices: list[dict[str, Any]] = json.loads(
            self.fetch(self.helper.jobGraph(j_graph, class_loader))
        )
        return vertices

    def describe(self, java_exception: Any) -> list[tuple[str, str]]:
        """A Java exception's chain as (class name, message) pairs, outermost first."""
        text = str(self.helper.describe(java_exception))
        pairs = []
        for line in text.split("\n"):
            name, _, message = line.partition("\t")
            pairs.append((name, message.replace("\r", "\n")))
        return pairs


def _cache_root() -> Path:
    base = os.environ.get("PYTEST_OPID_CACHE") or os.environ.get("XDG_CACHE_HOME")
    root = Path(base) if base else Path.home() / ".cache"
    root = root / "pytest-opid" if not os.environ.get("PYTEST_OPID_CACHE") else root
    try:
        root.mkdir(parents=True, exist_ok=True)
        probe = root / f".probe-{os.getpid()}"
        probe.write_text("", encoding="utf-8")
        probe.unlink()
        return root
    except OSError:
        return (
            Path(tempfile.gettempdir())
            / f"pytest-opid-{os.getuid() if hasattr(os, 'getuid') else 0}"
        )


def _remove_tree(path: Path) -> None:
    if not path.exists():
        return
    for child in sorted(path.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if child.is_dir():
            child.rmdir()
        else:
            child.unlink()
    path.rmdir()


def root_message(chain: Sequence[tuple[str, str]]) -> str:
    """The most telling message of a Java exception chain, on one line: the innermost one
    that says something (wrappers like InvocationTargetException say nothing)."""
    for name, message in reversed(chain):
        first = message.strip().split("\n", 1)[0].strip()
        if first:
            return f"{first} ({name.rsplit('.', 1)[-1]})"
    return chain[0][0] if chain else "unknown error"
