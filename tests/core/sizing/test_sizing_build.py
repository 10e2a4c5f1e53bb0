"""The per-candidate build: a layout the step-time model cannot run is an ``unsupported``
rejection with its reason; any other error a builder raises is a bug and leaves ``size``."""

from __future__ import annotations

from dataclasses import replace

import pytest

from servesize.core.sizing import SearchSpace, SizingResult, SizingTraffic, size
from servesize.core.sizing import build as build_module
from servesize.core.slo import LatencyTarget, ServiceLevelObjective
from servesize.core.steptime import StepTimeModel
from servesize.core.traffic import FixedLength
from tests.core.sizing.fixtures import GPUS, LLAMA_8B

TRAFFIC = SizingTraffic(
    rate_per_s=4.0, input_tokens=FixedLength(512), output_tokens=FixedLength(128)
)
SLO = ServiceLevelObjective(targets=(LatencyTarget(metric="ttft", statistic="p95", limit_s=2.0),))
# An H100 whose profile lists only an FP8 peak: no 16/32-bit peak for bf16 GEMMs to use.
FP8_ONLY = replace(GPUS["h100-sxm"], id="fp8-only", peak_tflop_per_s={"fp8": 1979.0})


def _space(*hardware_ids: str) -> SearchSpace:
    hardware = tuple(FP8_ONLY if i == FP8_ONLY.id else GPUS[i] for i in hardware_ids)
    return SearchSpace(
        hardware=hardware,
        tensor_parallel=(1,),
        max_num_batched_tokens=(8192,),
        kv_cache_dtype=("auto",),
        max_model_len=(2048,),
    )


def _size(space: SearchSpace) -> SizingResult:
    return size(
        LLAMA_8B,
        model_name="llama-3.1-8b",
        space=space,
        traffic=TRAFFIC,
        objective=SLO,
        prices={"h100-sxm": 2.5, FP8_ONLY.id: 2.0},
        verify_top=0,
    )


def test_a_layout_the_step_model_cannot_run_is_rejected_with_its_reason() -> None:
    result = _size(_space("fp8-only", "h100-sxm"))
    [rejection] = [r for r in result.rejected if r.candidate.hardware_id == FP8_ONLY.id]
    assert rejection.reason == "unsupported"
    assert "has no dense peak for bf16 or any 16/32-bit dtype" in rejection.detail
    assert [p.candidate.hardware_id for p in result.plans] == ["h100-sxm"]


def test_a_bug_in_the_step_model_builder_propagates(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> StepTimeModel:
        raise KeyError("a bug in build_step_model")

    monkeypatch.setattr(build_module, "build_step_model", broken)
    with pytest.raises(KeyError, match="a bug in build_step_model"):
        _size(_space("h100-sxm"))


def test_a_value_error_from_the_builder_is_not_taken_for_unsupported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*args: object, **kwargs: object) -> StepTimeModel:
        raise ValueError("operands could not be broadcast together")

    monkeypatch.setattr(build_module, "build_step_model", broken)
    with pytest.raises(ValueError, match="could not be broadcast"):
        _size(_space("h100-sxm"))
