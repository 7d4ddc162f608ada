"""Run every benchmark in this folder: ``python benchmarks/run.py [name ...]``.

Each ``bench_*.py`` module has a ``main()`` that prints its own figures.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(HERE.parent))
    selected = set(argv)
    for path in sorted(HERE.glob("bench_*.py")):
        name = path.stem.removeprefix("bench_")
        if selected and name not in selected:
            continue
        print(f"== {name} ({path.name})", flush=True)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.main()
        print(flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
