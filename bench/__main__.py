"""``python -m bench`` runs every benchmark module that defines ``main()``."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path


def main() -> None:
    for module in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]), key=lambda m: m.name):
        if module.name.startswith("bench_"):
            runner = getattr(importlib.import_module(f"bench.{module.name}"), "main", None)
            if callable(runner):
                runner()


main()
