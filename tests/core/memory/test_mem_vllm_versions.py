"""The vLLM memory plan release by release, against numbers worked out by hand from vLLM's
source (V0 vllm/worker/worker.py and vllm/config.py of v0.6.x; V1 vllm/v1/core/
kv_cache_utils.py), and the predicted start-up log lines."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from servesize.core.architecture import Architecture, parse_architecture
from servesize.core.hardware import HardwareSpec
from servesize.core.memory import (
    DEFAULT_CONSTANTS,
    GIB,
    Deployment,
    InvalidDeploymentError,
    MemoryPlan,
    plan_memory,
)

MODELS = Path(__file__).resolve().parents[3] / "servesize" / "data" / "models"
H100 = HardwareSpec(
    id="h100-sxm",
    vendor="NVIDIA",
    name="H100 SXM",
    memory_bytes=80 * GIB,
    memory_bandwidth_bytes_per_s=3_350_000_000_000,
)
RTX3090 = HardwareSpec(
    id="rtx-3090",
    vendor="NVIDIA",
    name="RTX 3090",
    memory_bytes=24 * GIB,
    memory_bandwidth_bytes_per_s=936_000_000_000,
)
TOTAL_3090 = round(23.58 * GIB)  # "total_gpu_memory=23.58GiB"
LLAMA_KV_PER_TOKEN = 2 * 32 * 8 * 128 * 2  # 131,072 B
GPT_OSS_KV_PER_LAYER_TOKEN = 2 * 8 * 64 * 2  # 2,048 B


def _arch(filename: str, **extra: Any) -> Architecture:
    config: dict[str, Any] = json.loads((MODELS / filename).read_text())
    return parse_architecture({**config, **extra}, name=filename)


def _llama_3090(version: str, max_model_len: int) -> MemoryPlan:
    constants = replace(DEFAULT_CONSTANTS, device_total_bytes=TOTAL_3090)
    deployment = Deployment(
        max_model_len=max_model_len, gpu_memory_utilization=0.9, engine_version=version
    )
    return plan_memory(
        _arch("meta-llama--Llama-3.1-8B.json"), RTX3090, deployment, constants=constants
    )


def test_v0_profiles_a_whole_max_model_len_prompt() -> None:
    # V0 SchedulerConfig: max_num_batched_tokens = max(max_model_len, 2048) = 20,000 and
    # max_num_seqs 256, so the forward pass dominates the sampler:
    # 20,000 tokens · 2 B · (3 · 4096 + 3 · 14336) = 2,211,840,000 B (vLLM logged
    # peak_torch_memory - weights = 17.06 - 14.99 = 2.07 GiB = 2.22e9 B).
    plan = _llama_3090("0.6.4", 20_000)
    assert plan.deployment.max_num_batched_tokens == 20_000
    assert plan.deployment.max_num_seqs == 256
    assert plan.activation_bytes_per_gpu == 2_211_840_000
    # A V1 release profiles max_num_batched_tokens = 2048 on a 24 GiB card instead.
    v1 = _llama_3090("0.10.1", 20_000)
    assert v1.deployment.max_num_batched_tokens == 2048
    assert v1.activation_bytes_per_gpu < plan.activation_bytes_per_gpu / 1.5


def test_v0_turns_chunked_prefill_on_above_32k() -> None:
    plan = _llama_3090("0.6.4", 40_960)
    assert plan.deployment.max_num_batched_tokens == 512
    assert plan.deployment.max_num_seqs == 256
    assert any("chunked prefill" in d.reason for d in plan.defaults_applied)


def test_v064_charges_the_cuda_context_and_v065_does_not() -> None:
    # v0.6.4: non_torch_allocations = used - torch_allocated includes the CUDA context;
    # from v0.6.5 (memory_profiling) only the increase during profiling is charged.
    old, new = _llama_3090("0.6.4", 20_000), _llama_3090("0.6.5", 20_000)
    context = DEFAULT_CONSTANTS.cuda_context_bytes
    assert new.kv_available_bytes_per_gpu - old.kv_available_bytes_per_gpu == context
    requested = int(TOTAL_3090 * 0.9)
    assert old.kv_available_bytes_per_gpu == (
        requested
        - old.weights_bytes_per_gpu
        - 2_211_840_000
        - DEFAULT_CONSTANTS.non_torch_bytes
        - context
    )


def test_v063_charges_no_context() -> None:
    # v0.6.0 - v0.6.3: peak_memory = init_free - free_after_profile, measured after the CUDA
    # context exists, so the budget is the same as v0.6.5's.
    old, new = _llama_3090("0.6.3", 20_000), _llama_3090("0.6.5", 20_000)
    assert old.kv_available_bytes_per_gpu == new.kv_available_bytes_per_gpu
    assert not any(line.startswith("Memory profiling") for line in old.engine_log)
    assert old.engine_log[1].startswith("# GPU blocks: ")


def test_v0_capacity_and_log_lines() -> None:
    plan = _llama_3090("0.6.4", 20_000)
    block_bytes = 16 * LLAMA_KV_PER_TOKEN  # all 32 layers' pages of one 16-token block
    blocks = plan.kv_available_bytes_per_gpu // block_bytes
    assert plan.kv_blocks == blocks
    assert plan.kv_capacity_tokens == blocks * 16
    assert plan.max_concurrency == blocks * 16 / 20_000
    # CPU blocks = swap space 4 GiB // 2 MiB per block = 2048, as vLLM logged.
    assert f"# GPU blocks: {blocks}, # CPU blocks: 2048" in plan.engine_log
    assert (
        f"Maximum concurrency for 20000 tokens per request: {blocks * 16 / 20_000:.2f}x"
        in plan.engine_log
    )
    assert plan.engine_log[0] == "Loading model weights took 14.9888 GB"
    assert plan.engine_log[1].startswith("Memory profiling results: total_gpu_memory=23.58GiB")
    assert "peak_torch_memory=17.05GiB" in plan.engine_log[1]  # logged 17.06


def test_v065_prints_the_memory_profiling_summary() -> None:
    plan = _llama_3090("0.6.5", 20_000)
    assert plan.engine_log[1] == (
        "the current vLLM instance can use total_gpu_memory (23.58GiB) x "
        "gpu_memory_utilization (0.90) = 21.22GiB"
    )
    assert plan.engine_log[2].startswith("model weights take 14.99GiB; non_torch_memory takes")


def test_v1_log_lines() -> None:
    arch = _arch("meta-llama--Llama-3.1-8B.json")
    plan = plan_memory(arch, H100, Deployment(max_model_len=16_000, engine_version="0.11.0"))
    tokens = plan.kv_blocks * 16
    assert plan.engine_log == (
        f"Model loading took {plan.weights_bytes_per_gpu / GIB:.4f} GiB",
        f"Available KV cache memory: {plan.kv_available_bytes_per_gpu / GIB:.2f} GiB",
        f"GPU KV cache size: {tokens:,} tokens",
        f"Maximum concurrency for 16,000 tokens per request: {plan.kv_blocks / 1000:.2f}x",
    )


def _gpt_oss(version: str) -> MemoryPlan:
    arch = _arch("openai--gpt-oss-20b.json")
    return plan_memory(arch, H100, Deployment(max_model_len=131_072, engine_version=version))


def test_gpt_oss_hybrid_groups_and_concurrency() -> None:
    # 12 full + 12 sliding (window 128) layers: one group of 12 each
    # (_get_kv_cache_groups_uniform_page_size), page 16 · 2,048 B = 32 KiB.
    plan = _gpt_oss("0.11.0")
    layout = plan.layout
    assert layout.group_size == 12
    assert sorted(layout.groups) == [1, 1]
    assert layout.page_bytes == 16 * GPT_OSS_KV_PER_LAYER_TOKEN
    assert plan.kv_blocks == plan.kv_available_bytes_per_gpu // (16 * 2048) // 12
    # One 131,072-token request: full cdiv(131072, 16) = 8192 blocks; sliding
    # (SlidingWindowSpec.max_memory_usage_bytes) cdiv(min(128 - 1 + 8192, 131072), 16) + 1
    # = 521 blocks; get_max_concurrency_for_kv_cache_config sums the groups.
    assert layout.blocks_per_request(131_072) == 8192 + 521
    assert plan.max_concurrency == plan.kv_blocks / 8713
    # "GPU KV cache size" (before v0.21) = num_blocks // 2 groups · 16, so the concurrency
    # is not tokens / max_model_len: the sliding half of the pool holds only the window.
    assert plan.kv_capacity_tokens == plan.kv_blocks // 2 * 16
    assert plan.max_concurrency > 1.8 * plan.kv_capacity_tokens / 131_072
    assert (
        f"Maximum concurrency for 131,072 tokens per request: {plan.kv_blocks / 8713:.2f}x"
        in plan.engine_log
    )


def test_gpt_oss_before_the_hybrid_manager_is_all_full_attention() -> None:
    plan = _gpt_oss("0.9.2")
    per_token = 24 * GPT_OSS_KV_PER_LAYER_TOKEN
    assert plan.layout.groups == (1,)
    assert plan.kv_blocks == plan.kv_available_bytes_per_gpu // (16 * per_token)
    assert plan.max_concurrency == plan.kv_blocks / 8192
    assert any("no hybrid KV cache manager" in w for w in plan.warnings)


def test_from_v021_the_token_count_follows_the_concurrency() -> None:
    plan = _gpt_oss("0.21.0")
    assert plan.kv_capacity_tokens == int(plan.kv_blocks / 8713 * 131_072)


def test_releases_before_v060_are_refused_on_the_field() -> None:
    with pytest.raises(InvalidDeploymentError) as info:
        _llama_3090("0.5.4", 20_000)
    assert "/deployment/engine_version" in {i.field for i in info.value.issues}


def test_other_engines_print_no_vllm_lines() -> None:
    arch = _arch("meta-llama--Llama-3.1-8B.json")
    plan = plan_memory(arch, H100, Deployment(max_model_len=16_000, engine="sglang"))
    assert plan.engine_log == ()


def test_v08_serves_with_the_small_batch_defaults_on_every_device() -> None:
    # The >= 70 GiB / non-A100 split of get_batch_defaults came with PR #17885 (v0.9.0).
    arch = _arch("meta-llama--Llama-3.1-8B.json")
    old = plan_memory(arch, H100, Deployment(max_model_len=16_000, engine_version="0.8.5"))
    new = plan_memory(arch, H100, Deployment(max_model_len=16_000, engine_version="0.9.0"))
    assert (old.deployment.max_num_seqs, old.deployment.max_num_batched_tokens) == (256, 2048)
    assert (new.deployment.max_num_seqs, new.deployment.max_num_batched_tokens) == (1024, 8192)


def test_v0_captures_one_decode_graph_per_batch_size() -> None:
    # V0 _BATCH_SIZES_TO_CAPTURE up to max_num_seqs 256: [1, 2, 4] + 8, 16, ..., 256 = 35
    # graphs ("Capturing CUDA graph shapes: 35/35" in V0 logs), outside the KV budget.
    plan = _llama_3090("0.6.5", 20_000)
    graphs = next(i for i in plan.line_items if i.name == "CUDA graphs")
    assert graphs.formula.startswith("V0: 35 decode graphs up to batch 256")
    constants = replace(DEFAULT_CONSTANTS, device_total_bytes=TOTAL_3090)
    eager = plan_memory(
        _arch("meta-llama--Llama-3.1-8B.json"),
        RTX3090,
        Deployment(
            max_model_len=20_000,
            engine_version="0.6.5",
            enforce_eager=True,
            gpu_memory_utilization=0.9,
        ),
        constants=constants,
    )
    assert graphs.bytes_per_gpu > 0
    assert eager.kv_available_bytes_per_gpu == plan.kv_available_bytes_per_gpu
