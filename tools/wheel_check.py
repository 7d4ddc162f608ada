"""The package as users get it (``tox -e wheel``), in three steps, each in a fresh virtual
environment under WORK (tox's envtmpdir), deleted afterwards:

1. ``python -m build`` builds the sdist and, from it, the wheel (so the sdist is complete);
2. the CI recipe of docs/install.md ("A wheel for CI"), its commands run as written, in a copy of
   the sources; then the examples run against the installed wheel from a folder that holds no
   ``pytest_opid`` source, and the ``opid`` command answers;
3. README's first command (Getting started) in a fresh copy, timed: what a newcomer runs.

Usage: python tools/wheel_check.py WORK
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: What a fresh clone does not have.
SKIP = {".git", ".venv", ".tox", "__pycache__", ".pytest_cache", ".hypothesis", ".ruff_cache"}
SKIP |= {".mypy_cache", "spark-warehouse", "build", "dist"}


def bash_block(text: str, heading: str) -> list[str]:
    """The command lines of the first ```bash block under ``heading`` (comments dropped)."""
    part = text.split(f"\n{heading}\n", 1)[1]
    block = part.split("```bash\n", 1)[1].split("```", 1)[0]
    lines = []
    for line in block.splitlines():
        line = line.split("  #", 1)[0].strip()
        if line and not line.startswith("#"):
            lines.append(line)
    return lines


def fresh_copy(dest: Path) -> None:
    def ignore(folder: str, names: list[str]) -> set[str]:
        here = Path(folder).resolve()
        skip = {n for n in names if n in SKIP}
        skip |= {n for n in names if n.endswith(".egg-info")}
        if here == ROOT:
            skip |= {"run", "checkpoints", "next.json", "changed.json"} & set(names)
        if here == ROOT / "tests":
            skip |= {"data"} & set(names)
        return skip

    shutil.copytree(ROOT, dest, ignore=ignore, symlinks=True)


def venv(path: Path) -> dict[str, str]:
    """A fresh virtual environment and the environment variables that activate it."""
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "TOX_"))}
    env.pop("PYTHONPATH", None)
    env["VIRTUAL_ENV"] = str(path)
    env["PATH"] = os.pathsep.join([str(path / "bin"), env.get("PATH", "")])
    return env


def run(command: str, cwd: Path, env: dict[str, str]) -> str:
    print(f"$ {command}    (in {cwd.name}/)", flush=True)
    done = subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        sys.exit(
            f"failed with exit {done.returncode}: {command}\n{done.stdout[-4000:]}\n"
            f"{done.stderr[-4000:]}"
        )
    return done.stdout


def passed(output: str) -> int:
    found = re.search(r"(\d+) passed", output)
    if not found or re.search(r"\d+ (failed|error)", output):
        sys.exit(f"the examples did not pass:\n{output[-3000:]}")
    return int(found.group(1))


def main(work: Path) -> None:
    work = work.resolve()
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)

    # 1. sdist, then the wheel built from the sdist.
    src = work / "src"
    fresh_copy(src)
    subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(work / "dist"), str(src)],
        check=True,
        capture_output=True,
    )
    built = sorted(p.name for p in (work / "dist").iterdir())
    print("built:", ", ".join(built))
    if not any(n.endswith(".tar.gz") for n in built) or not any(n.endswith(".whl") for n in built):
        sys.exit(f"python -m build made {built}, not an sdist and a wheel")

    # 2. The recipe of docs/install.md, as written, in a fresh environment.
    recipe = bash_block(
        (ROOT / "docs" / "install.md").read_text(encoding="utf-8"), "## A wheel for CI"
    )
    env = venv(work / "venv")
    for command in recipe:
        run(command, src, env)
    where = run('python -c "import pytest_opid; print(pytest_opid.__file__)"', work, env).strip()
    if not where.startswith(str(work / "venv")):
        sys.exit(f"pytest_opid was imported from {where}, not from the installed wheel")
    run("opid --help > /dev/null", work, env)
    examples = work / "examples-run"
    shutil.copytree(
        ROOT / "examples",
        examples / "examples",
        ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"),
    )
    (examples / "pytest.ini").write_text(
        "[pytest]\naddopts = --import-mode=importlib -p no:cacheprovider\n", encoding="utf-8"
    )
    out = run("python -m pytest examples -q", examples, env)
    print(f"the examples against the wheel: {passed(out)} passed")
    shutil.rmtree(work / "venv")

    # 3. README's first command in a fresh copy of the clone, timed.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = bash_block(readme, "## Getting started")
    if not lines[0].startswith("git clone") or "tox" not in lines[-1]:
        sys.exit(f"README's Getting started is not clone ... tox: {lines}")
    clone = work / "clone"
    fresh_copy(clone)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "TOX_"))}
    env.pop("VIRTUAL_ENV", None)
    started = time.monotonic()
    out = run(" && ".join(lines[1:-1]), clone, env)  # the venv, the install, pytest examples
    took = time.monotonic() - started
    print(f"README's first command in a fresh copy: {passed(out)} passed, {took:.0f} s")
    shutil.rmtree(clone)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
