"""Attention data parallelism: CUDA graphs are captured per rank, the MoE sees every rank's
tokens."""

from __future__ import annotations

import numpy as np
import pytest

from servesize.core.architecture import parse_architecture
from servesize.core.hardware import HardwareSpec
from servesize.core.steptime import StepWork, build_step_model, engine_profile

GPU = HardwareSpec(
    id="x",
    vendor="v",
    name="X",
    memory_bytes=80 * 2**30,
    memory_bandwidth_bytes_per_s=3_000_000_000_000,
    peak_tflop_per_s={"bf16": 1000.0},
)
MOE = parse_architecture(
    {
        "model_type": "qwen3_moe",
        "hidden_size": 1024,
        "num_hidden_layers": 4,
        "head_dim": 64,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "intermediate_size": 2048,
        "moe_intermediate_size": 256,
        "num_experts": 64,
        "num_experts_per_tok": 4,
        "vocab_size": 1000,
        "torch_dtype": "bfloat16",
    },
    name="toy-moe",
)


def test_graph_limit_applies_to_one_rank() -> None:
    engine = engine_profile("trtllm")  # decode graphs up to 2048 tokens per rank
    model = build_step_model(MOE, GPU, engine=engine, data_parallel_size=8, expert_parallel_size=8)
    # 8 ranks x 1024 decodes: each rank replays its 1024-token graph; 8 x 4096 does not fit.
    overhead = model.overhead_s(np.array([8 * 1024.0, 8 * 4096.0]), np.zeros(2))
    launches = engine.eager_overhead_per_layer_s * 4
    assert overhead[0] == engine.step_overhead_s
    assert overhead[1] == engine.step_overhead_s + launches


def test_experts_see_every_rank_tokens_and_attention_one_rank_share() -> None:
    one = build_step_model(MOE, GPU, calibrated=False)
    dp = build_step_model(MOE, GPU, calibrated=False, data_parallel_size=4, expert_parallel_size=4)
    # 4 ranks of 64 decodes: attention and dense GEMMs see 64 tokens per rank; each GPU holds 16
    # of the 64 experts and is routed 4·64·4/4 = 256 rows, as 64 decodes on one GPU with all
    # experts are. FLOPs per GPU are therefore equal; the group adds two all-to-alls per layer.
    single = one.step_time(StepWork.decode(64, 100))
    grouped = dp.step_time(StepWork.decode(4 * 64, 100))
    assert float(grouped.flops[0]) == pytest.approx(float(single.flops[0]), rel=1e-12)
    assert float(single.communication_s[0]) == 0.0
    assert float(grouped.communication_s[0]) > 0.0
