"""Every catalogue model compiles and answers on the H100, and one model on every datasheet GPU."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from servesize.core.architecture import parse_architecture
from servesize.core.hardware import datasheet_spec
from servesize.core.steptime import build_step_model
from servesize.core.steptime.serving import closed_loop

ROOT = Path(__file__).resolve().parents[3]
MODELS = sorted((ROOT / "servesize" / "data" / "models").glob("*.json"))
GPUS = json.loads((ROOT / "servesize" / "data" / "gpus.json").read_text())["gpus"]
H100 = datasheet_spec(next(g for g in GPUS if g["name"] == "H100 SXM"))


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.stem)
def test_catalogue_model_on_h100(path: Path) -> None:
    arch = parse_architecture(json.loads(path.read_text()), name=path.stem)
    model = build_step_model(arch, H100, engine="vllm", tensor_parallel_size=8)
    est = closed_loop(model, concurrency=[1, 64], input_tokens=2048, output_tokens=256)
    assert np.all(np.isfinite(est.ttft_s))
    assert np.all(est.tpot_s > 0)
    assert est.tpot_s[1] >= est.tpot_s[0]
    assert set(est.decode_bound) <= {"compute", "memory", "communication", "overhead"}


@pytest.mark.parametrize("entry", GPUS, ids=lambda g: g["name"])
def test_every_datasheet_gpu_answers(entry: dict[str, object]) -> None:
    gpu = datasheet_spec(entry)
    arch = parse_architecture(
        json.loads((ROOT / "servesize" / "data" / "models" / "Qwen--Qwen3-8B.json").read_text()),
        name="Qwen/Qwen3-8B",
    )
    model = build_step_model(arch, gpu, engine="trtllm")
    est = closed_loop(model, concurrency=8, input_tokens=1024, output_tokens=128)
    assert est.ttft_s[0] > est.prefill_time_s[0] > 0
    assert model.sources["hardware"].startswith("datasheet")
