"""Build a job jar from Java sources in a test: ``javac`` against the Flink jars PyFlink ships.

A project whose Flink jobs are in Java or Scala usually builds the jar with Maven or Gradle and
hands its path to :func:`pytest_opid.flink.jar.fingerprint_jar`; this helper does the same for
the small example job in ``java/`` without a build tool.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from pathlib import Path


def flink_lib() -> Path:
    """The directory of Flink's jars inside the installed PyFlink package."""
    import pyflink

    return Path(pyflink.__file__).resolve().parent / "lib"


def javac() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "javac").is_file():
        return str(Path(home) / "bin" / "javac")
    found = shutil.which("javac")
    if found is None:
        raise RuntimeError("building the example job needs a JDK (javac on PATH or JAVA_HOME)")
    return found


def build_jar(
    sources: Path,
    jar: Path,
    main_class: str | None = None,
    libraries: tuple[Path, ...] = (),
) -> Path:
    """Compile every ``.java`` file under ``sources`` and pack the classes into ``jar``, with
    ``main_class`` as the manifest's Main-Class (none if ``None``) and ``libraries`` nested
    under ``lib/`` (Flink's PackagedProgram puts those on the job's class path)."""
    classes = jar.with_suffix(".classes")
    classes.mkdir(parents=True, exist_ok=True)
    files = sorted(str(p) for p in sources.rglob("*.java"))
    classpath = os.pathsep.join([str(flink_lib() / "*"), *map(str, libraries)])
    subprocess.run(
        [javac(), "-nowarn", "-encoding", "UTF-8", "-d", str(classes), "-cp", classpath, *files],
        check=True,
        capture_output=True,
        text=True,
    )
    manifest = "Manifest-Version: 1.0\r\n"
    if main_class:
        manifest += f"Main-Class: {main_class}\r\n"
    with zipfile.ZipFile(jar, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("META-INF/MANIFEST.MF", manifest + "\r\n")
        for path in sorted(classes.rglob("*.class")):
            archive.write(path, path.relative_to(classes).as_posix())
        for library in libraries:
            archive.write(library, f"lib/{library.name}")
    return jar
