"""Hand-worked roofline cases: Llama-3.1-8B in bf16 on one H100 SXM.

Numbers are derived here from the published architecture and the datasheet, not read back
from the code:

- linear weights per layer: q, o ``4096·4096`` each, k, v ``4096·1024`` each, gated MLP
  ``3·4096·14336``: ``41,943,040 + 176,160,768 = 218,103,808``; 32 layers plus the untied
  output head ``128256·4096 = 525,336,576`` give ``7,504,658,432`` weights = 15.009 GB in bf16
  (the input embedding is a lookup, not a GEMM);
- H100 SXM: 3.35 TB/s HBM, 989 TFLOP/s dense bf16; default efficiencies 0.85 (bandwidth) and
  0.78 (GEMM), so a weight-streaming decode step needs ``15.009e9 / (3.35e12·0.85) = 5.271 ms``
  and the ridge point is ``989e12·0.78 / (3.35e12·0.85) = 270.9`` FLOPs per byte.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from servesize.core.architecture import Architecture, parse_architecture
from servesize.core.hardware import datasheet_spec
from servesize.core.steptime import StepTimeModel, StepWork, build_step_model, engine_profile

ROOT = Path(__file__).resolve().parents[3]
H100 = datasheet_spec(
    {
        "name": "H100 SXM",
        "vendor": "NVIDIA",
        "memory_gb": 80,
        "memory_bandwidth_tb_s": 3.35,
        "dense_tflops": {"bf16": 989, "fp16": 989, "fp8": 1979},
        "interconnect": {"nvlink_gb_s_bidirectional": 900},
    }
)
WEIGHT_BYTES = 2 * (32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336) + 128256 * 4096)
WEIGHT_STREAM_S = WEIGHT_BYTES / (3.35e12 * 0.85)
RIDGE = 989e12 * 0.78 / (3.35e12 * 0.85)


def llama_8b() -> Architecture:
    config = json.loads(
        (ROOT / "servesize" / "data" / "models" / "meta-llama--Llama-3.1-8B.json").read_text()
    )
    return parse_architecture(config, name="meta-llama/Llama-3.1-8B")


@pytest.fixture(scope="module")
def roofline() -> StepTimeModel:
    return build_step_model(llama_8b(), H100, engine="vllm", calibrated=False)


def test_weight_bytes_match_the_hand_count(roofline: StepTimeModel) -> None:
    assert WEIGHT_BYTES == 15_009_316_864
    assert roofline.weight_bytes_per_gpu == pytest.approx(WEIGHT_BYTES)


def test_batch_one_decode_is_weight_bytes_over_bandwidth(roofline: StepTimeModel) -> None:
    step = roofline.step_time(StepWork.decode(batch_size=1, context_tokens=128))
    # Above the pure stream time only by kernel floors: 129 GEMMs x 4 us + 32 attention x 8 us
    # (0.77 ms) and 16 MiB of KV and activations.
    assert round(WEIGHT_STREAM_S * 1e3, 3) == 5.271
    assert WEIGHT_STREAM_S < step.total_s[0] < WEIGHT_STREAM_S + 0.9e-3
    assert step.bound[0] == "memory"
    assert step.arithmetic_intensity[0] == pytest.approx(1.0, rel=0.05)  # 2 FLOPs per bf16 weight


def test_calibrated_decode_adds_the_engine_overhead() -> None:
    plain = build_step_model(llama_8b(), H100, engine="vllm", calibrated=False)
    tuned = plain.with_engine(
        dataclasses.replace(engine_profile("vllm"), compute_slowdown=1.0, memory_slowdown=1.0)
    )
    work = StepWork.decode(batch_size=1, context_tokens=128)
    gap = tuned.step_time(work).total_s[0] - plain.step_time(work).total_s[0]
    # A one-token step replays a CUDA graph: only the per-step CPU time is added.
    assert gap == pytest.approx(tuned.engine.step_overhead_s, rel=1e-9)
    assert tuned.sources["engine_overheads"].startswith("calibrated")


def test_long_prefill_is_compute_bound(roofline: StepTimeModel) -> None:
    step = roofline.step_time(StepWork.prefill(16_384))
    assert step.bound[0] == "compute"
    # Linear layers: 2 FLOPs per weight per token at 0.78 of 989 TFLOP/s.
    gemm_s = 2 * (WEIGHT_BYTES / 2) * 16_384 / (989e12 * 0.78)
    assert step.compute_s[0] > gemm_s
    assert step.arithmetic_intensity[0] > 4 * RIDGE


def test_ridge_point_is_peak_over_bandwidth(roofline: StepTimeModel) -> None:
    assert roofline.ridge_point_flops_per_byte == pytest.approx(RIDGE, rel=1e-9)
    assert round(RIDGE, 1) == 270.9


def test_decode_turns_compute_bound_near_the_ridge_batch(roofline: StepTimeModel) -> None:
    # With a short context the step is GEMMs only: a batch of B tokens does 2 FLOPs per weight
    # per token against 2 bytes per weight, so it crosses the ridge at B ~ 271 (a little above,
    # because activations add (n + k)·B bytes: for 4096 x 4096, B = 271 / (1 - 2·271/4096)).
    batches = np.arange(64, 1025, 8, dtype=np.float64)
    step = roofline.step_time(StepWork.decode(batches, context_tokens=1))
    crossover = batches[np.argmax(step.compute_s > step.memory_s)]
    assert RIDGE <= crossover <= RIDGE / (1 - 2 * RIDGE / 4096) + 8
    assert step.bound[0] == "memory"
    assert step.bound[-1] == "compute"
