"""Every catalogue model on representative GPUs: planned or refused, never a crash."""

from __future__ import annotations

from pathlib import Path

import pytest

from servesize.catalog import ModelCatalog
from servesize.core.hardware import HardwareSpec, datasheet_spec
from servesize.core.memory import Deployment, plan_memory
from servesize.core.steptime import build_step_model, closed_loop
from servesize.db.seed import datasheet_entries

CATALOG = ModelCatalog(Path(__file__).resolve().parents[3] / "servesize" / "data" / "models")
GPUS = {spec.id: spec for spec in (datasheet_spec(e) for e in datasheet_entries())}


def _plan(model_id: str, gpu: HardwareSpec) -> None:
    arch = CATALOG.architecture(model_id)
    plan = plan_memory(arch, gpu, Deployment(max_model_len=4096))
    if not plan.fits:
        assert plan.reasons
        return
    res = plan.deployment
    model = build_step_model(arch, gpu, engine=res.engine, kv_dtype=res.kv_cache.element_dtype)
    estimate = closed_loop(
        model,
        concurrency=8,
        input_tokens=1024,
        output_tokens=128,
        kv_capacity_tokens=plan.kv_capacity_tokens,
    )
    assert estimate.tpot_s[0] > 0
    assert estimate.ttft_s[0] >= estimate.ttft_zero_load_s[0] * 0.999


@pytest.mark.parametrize("model_id", CATALOG.ids())
@pytest.mark.parametrize("gpu", ["h100-sxm", "l40s", "mi300x"])
def test_every_model_on_representative_gpus(model_id: str, gpu: str) -> None:
    _plan(model_id, GPUS[gpu])


@pytest.mark.parametrize("gpu", sorted(GPUS))
def test_llama_8b_on_every_datasheet_gpu(gpu: str) -> None:
    _plan("meta-llama/Llama-3.1-8B", GPUS[gpu])
