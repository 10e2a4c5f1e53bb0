"""The datasheet spec of the GPU the packaged tables were measured on."""

from __future__ import annotations

import json
from pathlib import Path

from servesize.core.hardware import HardwareSpec, datasheet_spec

__all__ = ["GPUS_JSON", "reference_gpu"]

GPUS_JSON = Path(__file__).resolve().parent.parent / "data" / "gpus.json"


def reference_gpu(name: str = "H100 SXM", path: Path = GPUS_JSON) -> HardwareSpec:
    """The datasheet :class:`HardwareSpec` of ``name`` from the reference GPU table."""
    entries = json.loads(path.read_text(encoding="utf-8"))["gpus"]
    for entry in entries:
        if entry["name"] == name:
            return datasheet_spec(entry)
    raise KeyError(f"{name!r} is not in {path.name}")
