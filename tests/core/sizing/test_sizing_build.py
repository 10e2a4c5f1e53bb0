"""The per-candidate build: a layout the step-time model cannot run is an ``unsupported``
rejection with its reason; any other error a builder raises is a bug and leaves ``size``."""

from __future__ import annotations

from dataclasses import replace

import pytest

from servesize.core.replica import compile as replica_compile
from servesize.core.sizing import SearchSpace, SizingResult, SizingTraffic, size
from servesize.core.slo import LatencyTarget, ServiceLevelObjective
from servesize.core.steptime import StepTimeModel
from servesize.core.traffic import FixedLength, GeometricLength
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

    monkeypatch.setattr(replica_compile, "build_step_model", broken)
    with pytest.raises(KeyError, match="a bug in build_step_model"):
        _size(_space("h100-sxm"))


def test_a_value_error_from_the_builder_is_not_taken_for_unsupported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*args: object, **kwargs: object) -> StepTimeModel:
        raise ValueError("operands could not be broadcast together")

    monkeypatch.setattr(replica_compile, "build_step_model", broken)
    with pytest.raises(ValueError, match="could not be broadcast"):
        _size(_space("h100-sxm"))


def test_a_kv_transfer_over_an_unknown_link_is_costed_over_pcie_and_said_so() -> None:
    # L40S is a PCIe card: its profile gives no interconnect bandwidth; the H100's NVLink does.
    result = size(
        LLAMA_8B,
        model_name="llama-3.1-8b",
        space=SearchSpace(
            hardware=(GPUS["l40s"], GPUS["h100-sxm"]),
            tensor_parallel=(1,),
            max_num_batched_tokens=(8192,),
            kv_cache_dtype=("fp8",),
            max_model_len=(2048,),
            disaggregation=True,
        ),
        traffic=TRAFFIC,
        objective=SLO,
        prices={"h100-sxm": 2.5, "l40s": 1.0},
        verify_top=0,
    )
    pd = {p.candidate.hardware_id: p for p in result.plans if p.candidate.kind == "disaggregated"}
    assert set(pd) == {"l40s", "h100-sxm"}
    assert pd["l40s"].notes == (
        "KV transfer between the pools costed over PCIe at 25 GB/s per direction: the L40S "
        "profile gives no interconnect bandwidth",
    )
    assert pd["h100-sxm"].notes == ()
    # 25 GB/s: 1 ms + 512 tokens × the fp8 KV bytes per token per GPU / 25e9.
    kv_bytes = pd["l40s"].memory.kv_bytes_per_token_per_gpu
    assert pd["l40s"].kv_transfer_s == pytest.approx(1e-3 + 512 * kv_bytes / 25e9)


def test_a_drawn_request_over_max_model_len_rejects_the_plan_in_verification() -> None:
    # Geometric outputs are unbounded, so no context check before the screen; a mean of 300
    # tokens puts about e^(-1536/300) = 0.6 % of the draws over 2048 - 512 tokens.
    traffic = SizingTraffic(
        rate_per_s=2.0, input_tokens=FixedLength(512), output_tokens=GeometricLength(300.0)
    )
    result = size(
        LLAMA_8B,
        model_name="llama-3.1-8b",
        space=_space("h100-sxm"),
        traffic=traffic,
        objective=SLO,
        prices={"h100-sxm": 2.5},
        verify_top=1,
    )
    assert not result.plans
    [rejection] = result.rejected
    assert rejection.reason == "context-too-short"
    assert "exceed max_model_len (2048 tokens" in rejection.detail
    assert result.simulations == 0
