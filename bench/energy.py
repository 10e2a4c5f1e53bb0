"""Predicted against published energy per output token (``servesize/data/validation/
energy.json``), through the path ``/v1/performance`` takes: the compiled replica's closed loop
at the published batch and its energy (docs/modeling.md, "Energy and power").

``python -m bench.accuracy --energy``
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from servesize.calibration import load_measured_profile
from servesize.catalog import ModelCatalog
from servesize.core.energy import estimate_energy, power_profile
from servesize.core.hardware import datasheet_spec
from servesize.core.memory import Deployment
from servesize.core.replica import compile_replica
from servesize.core.steptime import closed_loop
from servesize.db.seed import datasheet_entries
from servesize.settings import get_settings

VALIDATION = Path(__file__).resolve().parents[1] / "servesize/data/validation/energy.json"


def predicted(row: dict[str, Any]) -> tuple[float, float, float]:
    """``(J per output token, W per GPU, output tokens/s)`` predicted for one published row."""
    arch = ModelCatalog(get_settings().models_dir).architecture(row["model"])
    specs = {s.id: s for s in (datasheet_spec(e) for e in datasheet_entries())}
    gpu = specs[row["hardware"]]
    measured = load_measured_profile() if gpu.id == "h100-sxm" else None
    deployment = Deployment(
        engine=row["engine"], tensor_parallel_size=row["gpus"], max_num_seqs=row["max_num_seqs"]
    )
    replica = compile_replica(arch, gpu, deployment, measured)
    est = closed_loop(
        replica.step_model,
        concurrency=row["max_num_seqs"],
        input_tokens=row["input_tokens"],
        output_tokens=row["output_tokens"],
    )
    profile = power_profile(gpu)
    assert profile is not None
    energy = estimate_energy(replica, profile, est)
    assert energy is not None
    tokens_per_s = float(est.throughput_output_tokens_per_s[0])
    return energy.energy_per_output_token_j, energy.power_per_gpu_w, tokens_per_s


def print_energy() -> None:
    rows = json.loads(VALIDATION.read_text())["measurements"]
    print("energy per output token: predicted vs published (GPU energy only)")
    heads = ("published J", "predicted J", "error", "W/GPU", "tok/s")
    widths = (11, 11, 7, 6, 7)
    print(f"{'point':40} " + " ".join(f"{h:>{w}}" for h, w in zip(heads, widths, strict=True)))
    for row in rows:
        j, watts, tps = predicted(row)
        published = row["energy_per_output_token_j"]
        error = j / published - 1
        print(f"{row['id']:40} {published:11.3f} {j:11.3f} {error:+7.0%} {watts:6.0f} {tps:7.0f}")
    print(f"sources: {VALIDATION.relative_to(VALIDATION.parents[3])}")


if __name__ == "__main__":
    print_energy()
