"""Each engine's published rule for the memory left to the KV cache, reproduced by hand.

The classic mistake these guard against: vLLM's ``gpu_memory_utilization`` is a fraction of
*total* memory, SGLang's ``mem_fraction_static`` covers weights plus KV of the memory free
before loading, TensorRT-LLM's ``free_gpu_memory_fraction`` is a fraction of memory *still
free* after weights and activations.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from servesize.core.architecture import Architecture, parse_architecture
from servesize.core.hardware import HardwareSpec, Interconnect
from servesize.core.memory import (
    GIB,
    Deployment,
    MemoryConstants,
    parse_version,
    plan_memory,
    sglang_kv_budget,
    sglang_memory_defaults,
    trtllm_kv_budget,
    vllm_batch_defaults,
    vllm_gpu_memory_utilization,
    vllm_kv_budget,
)

MODELS = Path(__file__).resolve().parents[3] / "servesize" / "data" / "models"


def _gpu(name: str, gib: int) -> HardwareSpec:
    return HardwareSpec(
        id=name.lower().replace(" ", "-"),
        vendor="NVIDIA",
        name=name,
        memory_bytes=gib * GIB,
        memory_bandwidth_bytes_per_s=3_350_000_000_000,
        interconnect=Interconnect(kind="nvlink", bandwidth_bytes_per_s=450_000_000_000),
    )


def _arch(filename: str) -> Architecture:
    config: dict[str, Any] = json.loads((MODELS / filename).read_text())
    return parse_architecture(config, name=filename)


def test_vllm_fraction_of_total() -> None:
    # requested = 0.9 · 80 GiB = 72 GiB; KV = 72 - 15 (weights) - 5 (activations) - 1 (non-torch)
    # = 51 GiB. Before v0.21 the 1 GiB of CUDA graphs is not charged (captured afterwards).
    budget = vllm_kv_budget(
        total_bytes=80 * GIB,
        gpu_memory_utilization=0.9,
        version=(0, 10, 1),
        weights_bytes=15 * GIB,
        activation_bytes=5 * GIB,
        non_torch_bytes=1 * GIB,
        cuda_graph_bytes=1 * GIB,
        context_bytes=GIB // 2,
    )
    assert budget.budget_bytes == 72 * GIB
    assert budget.kv_available_bytes == 51 * GIB
    assert not budget.cuda_graphs_charged
    # from v0.21 the CUDA-graph estimate is subtracted too: 51 - 1 = 50 GiB
    newer = vllm_kv_budget(
        total_bytes=80 * GIB,
        gpu_memory_utilization=0.9,
        version=(0, 21, 0),
        weights_bytes=15 * GIB,
        activation_bytes=5 * GIB,
        non_torch_bytes=1 * GIB,
        cuda_graph_bytes=1 * GIB,
        context_bytes=GIB // 2,
    )
    assert newer.kv_available_bytes == 50 * GIB
    assert "fraction of total device memory" in newer.semantics


def test_vllm_refuses_when_free_memory_is_short() -> None:
    # util 0.995 of 80 GiB = 79.6 GiB requested, but 80 - 0.61 = 79.39 GiB is free at start-up
    budget = vllm_kv_budget(
        total_bytes=80 * GIB,
        gpu_memory_utilization=0.995,
        version=(0, 10, 1),
        weights_bytes=GIB,
        activation_bytes=GIB,
        non_torch_bytes=0,
        cuda_graph_bytes=0,
        context_bytes=int(0.61 * GIB),
    )
    assert budget.start_error is not None
    assert "refuses to start" in budget.start_error


def test_vllm_version_defaults() -> None:
    # gpu_memory_utilization 0.9 up to v0.20, 0.92 from v0.21.0 (PR #38284)
    assert vllm_gpu_memory_utilization((0, 20, 2)) == 0.9
    assert vllm_gpu_memory_utilization((0, 21, 0)) == 0.92
    assert parse_version("v0.10.1.post1") == (0, 10, 1)
    # vllm serve batch defaults: >= 70 GiB and not an A100 -> 1024 seqs / 8192 tokens
    assert vllm_batch_defaults(79 * GIB, "H100 SXM") == (1024, 8192)
    assert vllm_batch_defaults(79 * GIB, "A100 SXM 80GB") == (256, 2048)
    assert vllm_batch_defaults(44 * GIB, "L40S") == (256, 2048)


def test_sglang_mem_fraction_static_heuristic() -> None:
    # H100 80 GB reports 81,559 MiB. Bucket < 160 GB, TP 1: chunked_prefill_size 8192,
    # cuda_graph_max_bs 256. reserved = 512 + 1.5 · 8192 + 2 · 256 + 1 · 1 / 8 · 1024
    # = 512 + 12,288 + 512 + 128 = 13,440 MB (>= the 10 GiB floor on > 60 GB GPUs).
    # mem_fraction_static = round((81559 - 13440) / 81559, 3) = round(0.83521, 3) = 0.835
    defaults = sglang_memory_defaults(81_559, 1, 1)
    assert defaults.reserved_mb == 13_440
    assert defaults.mem_fraction_static == 0.835
    # a 24 GB card (L4-class, 23,034 MiB): chunk 2048, graph bs 24, reserved 512 + 3072 + 48
    # + 128 = 3,760 MB -> round((23034 - 3760) / 23034, 3) = 0.837
    small = sglang_memory_defaults(23_034, 1, 1)
    assert (small.chunked_prefill_size, small.cuda_graph_max_bs) == (2048, 24)
    assert small.mem_fraction_static == 0.837


def test_sglang_kv_is_fraction_of_free_minus_weights() -> None:
    # F0 = 80 - 1 = 79 GiB free before loading; KV = 0.8 · 79 - 20 = 43.2 GiB
    budget = sglang_kv_budget(
        total_bytes=80 * GIB,
        mem_fraction_static=0.8,
        weights_bytes=20 * GIB,
        context_bytes=GIB,
    )
    assert budget.kv_available_bytes == int(0.8 * 79 * GIB) - 20 * GIB
    assert not budget.activations_charged


def test_trtllm_fraction_of_free_after_peak() -> None:
    # peak non-KV = 15 + 3 + 1 + 0.5 + 0.5 = 20 GiB; KV = (80 - 20) · 0.9 = 54 GiB
    budget = trtllm_kv_budget(
        total_bytes=80 * GIB,
        free_gpu_memory_fraction=0.9,
        weights_bytes=15 * GIB,
        activation_bytes=3 * GIB,
        non_torch_bytes=GIB,
        cuda_graph_bytes=GIB // 2,
        context_bytes=GIB // 2,
    )
    assert budget.kv_available_bytes == int(60 * GIB * 0.9)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_plan_states_its_semantics(engine: str) -> None:
    plan = plan_memory(
        _arch("meta-llama--Llama-3.1-8B.json"),
        _gpu("H100 SXM", 80),
        Deployment(engine=engine, max_model_len=8192),
    )
    assert plan.engine == engine
    assert plan.budget_semantics.lower().startswith(
        {"vllm": "vllm", "sglang": "sglang", "trtllm": "tensorrt-llm"}[engine]
    )
    assert plan.fits


def test_sglang_plan_uses_defaults_and_page_size_one() -> None:
    # Llama-3.1-8B on an H100: CUDA total 80 · (1 - 0.01025) GiB = 81,080 MiB; the heuristic
    # gives round((81080 - 13440) / 81080, 3) = 0.834. Pool in tokens: floor(KV / 131,072 B).
    plan = plan_memory(
        _arch("meta-llama--Llama-3.1-8B.json"),
        _gpu("H100 SXM", 80),
        Deployment(engine="sglang", max_model_len=8192),
    )
    assert plan.deployment.memory_fraction == 0.834
    assert plan.kv_block_size == 1
    assert plan.kv_capacity_tokens == plan.kv_available_bytes_per_gpu // 131_072
    # weights + KV = 0.834 · (total - context)
    free = plan.device_total_bytes - MemoryConstants().cuda_context_bytes
    assert plan.weights_bytes_per_gpu + plan.kv_available_bytes_per_gpu == int(0.834 * free)


def test_trtllm_plan_counts_tokens_of_all_layers() -> None:
    plan = plan_memory(
        _arch("meta-llama--Llama-3.1-8B.json"),
        _gpu("H100 SXM", 80),
        Deployment(engine="trtllm", max_model_len=8192),
    )
    assert plan.kv_block_size == 32
    assert plan.deployment.memory_fraction == 0.9
    assert plan.kv_capacity_tokens == plan.kv_available_bytes_per_gpu // 131_072
    free = plan.device_total_bytes - (
        plan.weights_bytes_per_gpu
        + plan.activation_bytes_per_gpu
        + plan.non_torch_bytes_per_gpu
        + plan.cuda_graph_bytes_per_gpu
        + MemoryConstants().cuda_context_bytes
    )
    assert plan.kv_available_bytes_per_gpu == int(free * 0.9)
