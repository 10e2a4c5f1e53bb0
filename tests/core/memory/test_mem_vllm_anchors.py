"""Agreement with what vLLM itself logged at start-up.

Source: llm-d/llm-d-benchmark:config_explorer/empirical-vllm-memory-results.md (commit
2593348): ``vllm serve`` on one H100-80GB (79.18 GiB reported total), defaults
(gpu_memory_utilization 0.9, max_num_seqs 1024, max_num_batched_tokens 8192),
max_model_len 16000. The release predates CUDA-graph memory profiling (its logs have no
estimate line and graphs are measured after the KV cache), so these plans use
``engine_version="0.10.1"``; any pre-0.21 release gives the same numbers here.

Tolerances: weights ("Model loading took X GiB") within 1 %, peak activation within 1 %, and
"Available KV cache memory" within 2 %. Logged values are rounded to 0.01 GiB. The activation
constants were fitted on these same runs (leave-one-out error < 0.2 %), so the activation
checks confirm the fit, while the weight and KV checks test the ledger itself.
gpt-oss-120b's logged KV (3.33 GiB) contradicts its own logged weights + activations
(64.38 + 7.38 + 0.13 > 71.26 GiB budget), so only its weights are checked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from servesize.core.architecture import Architecture, parse_architecture
from servesize.core.hardware import HardwareSpec, Interconnect
from servesize.core.memory import GIB, Deployment, MemoryPlan, plan_memory

MODELS = Path(__file__).resolve().parents[3] / "servesize" / "data" / "models"
H100 = HardwareSpec(
    id="h100-sxm",
    vendor="NVIDIA",
    name="H100 SXM",
    memory_bytes=80 * GIB,
    memory_bandwidth_bytes_per_s=3_350_000_000_000,
    interconnect=Interconnect(kind="nvlink", bandwidth_bytes_per_s=450_000_000_000),
)
# RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic: compressed-tensors fp8, per-channel weights,
# dynamic per-token activations, lm_head ignored.
FP8_DYNAMIC = {
    "quant_method": "compressed-tensors",
    "format": "float-quantized",
    "ignore": ["lm_head"],
    "config_groups": {
        "group_0": {
            "targets": ["Linear"],
            "weights": {"num_bits": 8, "type": "float", "strategy": "channel"},
            "input_activations": {
                "num_bits": 8,
                "type": "float",
                "strategy": "token",
                "dynamic": True,
            },
        }
    },
}
# Qwen/Qwen3-32B config.json (not in the catalogue)
QWEN3_32B = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "hidden_size": 5120,
    "intermediate_size": 25600,
    "num_hidden_layers": 64,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151936,
    "tie_word_embeddings": False,
    "max_position_embeddings": 40960,
    "torch_dtype": "bfloat16",
}


def _arch(filename: str, **extra: Any) -> Architecture:
    config: dict[str, Any] = json.loads((MODELS / filename).read_text())
    return parse_architecture({**config, **extra}, name=filename)


def _plan(arch: Architecture, tp: int = 1, max_model_len: int = 16_000) -> MemoryPlan:
    deployment = Deployment(
        tensor_parallel_size=tp, max_model_len=max_model_len, engine_version="0.10.1"
    )
    return plan_memory(arch, H100, deployment)


ANCHORS = [
    # name, model, TP, logged weights / peak activation / available KV (GiB)
    ("Llama-3.1-8B", "meta-llama--Llama-3.1-8B.json", None, 1, 14.99, 4.76, 51.38),
    ("Qwen3-0.6B", "Qwen--Qwen3-0.6B.json", None, 1, 1.12, 5.56, 64.45),
    ("Qwen3-32B", None, None, 1, 61.03, 5.64, 4.45),
    ("Llama-3.3-70B-FP8 TP2", "meta-llama--Llama-3.3-70B-Instruct.json", FP8_DYNAMIC, 2,
     33.88, 4.84, 32.0),
    ("gpt-oss-20b", "openai--gpt-oss-20b.json", None, 1, 13.47, 7.38, 50.28),
]  # fmt: skip


def _anchor_arch(filename: str | None, quant: dict[str, Any] | None) -> Architecture:
    if filename is None:
        return parse_architecture(QWEN3_32B, name="Qwen/Qwen3-32B")
    if quant is None:
        return _arch(filename)
    return _arch(filename, quantization_config=quant)


@pytest.mark.parametrize(
    ("filename", "quant", "tp", "weights", "activations", "kv"),
    [a[1:] for a in ANCHORS],
    ids=[a[0] for a in ANCHORS],
)
def test_vllm_log_anchor(
    filename: str | None,
    quant: dict[str, Any] | None,
    tp: int,
    weights: float,
    activations: float,
    kv: float,
) -> None:
    plan = _plan(_anchor_arch(filename, quant), tp)
    assert plan.weights_bytes_per_gpu / GIB == pytest.approx(weights, rel=0.01)
    assert plan.activation_bytes_per_gpu / GIB == pytest.approx(activations, rel=0.01)
    assert plan.kv_available_bytes_per_gpu / GIB == pytest.approx(kv, rel=0.02)
    assert plan.fits


def test_device_total_is_what_cuda_reports() -> None:
    # "Free memory on device 78.57/79.18 GiB on startup"
    plan = _plan(_arch("meta-llama--Llama-3.1-8B.json"))
    assert plan.device_total_bytes / GIB == pytest.approx(79.18, abs=0.005)
    assert plan.budget_bytes / GIB == pytest.approx(71.26, abs=0.01)  # "0.9 (71.26 GiB)"


def test_llama_70b_fp8_tp1_has_no_room_for_kv() -> None:
    # Logged: weights 67.72 GiB, "Available KV cache memory: -1.44 GiB", engine failed with
    # "No available memory for the cache blocks".
    arch = _arch("meta-llama--Llama-3.3-70B-Instruct.json", quantization_config=FP8_DYNAMIC)
    plan = _plan(arch, 1)
    assert plan.weights_bytes_per_gpu / GIB == pytest.approx(67.72, rel=0.01)
    assert plan.kv_available_bytes_per_gpu / GIB == pytest.approx(-1.44, abs=0.03)
    assert not plan.fits
    assert any("No available memory for the cache blocks" in r for r in plan.reasons)
    assert plan.suggestions.smallest_tensor_parallel_size == 2  # TP 2 worked in the same study


def test_qwen3_32b_at_32k_does_not_fit() -> None:
    # Logged: 4.45 GiB of KV; max_model_len 32000 failed, 16000 worked. One 32,000-token request
    # needs 2 · 8 · 128 · 2 B · 64 layers = 262,144 B/token · 32,000 = 7.81 GiB > 4.45 GiB.
    # vLLM's estimate of the largest length: 4.45 GiB / (16 · 262,144 B) = 1,139 blocks
    # -> about 18,224 tokens (logged KV is rounded, so allow a block or two either way).
    arch = parse_architecture(QWEN3_32B, name="Qwen/Qwen3-32B")
    plan = _plan(arch, 1, 32_000)
    assert not plan.fits
    assert plan.reasons == (
        "max_model_len 32000 needs 7.8 GiB of KV for one sequence; 4.5 GiB is left",
    )
    largest = plan.suggestions.largest_max_model_len
    assert largest is not None
    assert 18_176 <= largest <= 18_288


def test_gpt_oss_120b_weights() -> None:
    # Logged "Model loading took 64.38 GiB"
    plan = _plan(_arch("openai--gpt-oss-120b.json"))
    assert plan.weights_bytes_per_gpu / GIB == pytest.approx(64.38, rel=0.01)


def test_llama_8b_blocks_and_concurrency() -> None:
    # 51.38 GiB / (16 tokens · 131,072 B) = 26,306.6 blocks; the plan's own available bytes
    # give 26,309. Capacity (pre-0.21 log formula) = blocks · 16; concurrency at 16,000 tokens
    # = blocks / cdiv(16000, 16) = blocks / 1000.
    plan = _plan(_arch("meta-llama--Llama-3.1-8B.json"))
    assert plan.kv_blocks == pytest.approx(26_306, abs=30)
    assert plan.kv_capacity_tokens == plan.kv_blocks * 16
    assert plan.max_concurrency == plan.kv_blocks / 1000
