"""Plan behaviour: defaults by GPU, capacity per version, fit reasons, suggestions, warnings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from servesize.core.architecture import Architecture, parse_architecture
from servesize.core.hardware import HardwareSpec, Interconnect
from servesize.core.memory import (
    GIB,
    USAGE_CATEGORIES,
    Deployment,
    MemoryConstants,
    constants_table,
    evaluate_memory,
    plan_memory,
)

MODELS = Path(__file__).resolve().parents[3] / "servesize" / "data" / "models"


def _gpu(name: str, gib: int) -> HardwareSpec:
    return HardwareSpec(
        id=name.lower().replace(" ", "-"),
        vendor="NVIDIA",
        name=name,
        memory_bytes=gib * GIB,
        memory_bandwidth_bytes_per_s=2_000_000_000_000,
        interconnect=Interconnect(kind="nvlink", bandwidth_bytes_per_s=300_000_000_000),
    )


H100 = _gpu("H100 SXM", 80)
A100 = _gpu("A100 SXM 80GB", 80)
L4 = _gpu("L4", 24)


def _arch(filename: str) -> Architecture:
    config: dict[str, Any] = json.loads((MODELS / filename).read_text())
    return parse_architecture(config, name=filename)


LLAMA_8B = _arch("meta-llama--Llama-3.1-8B.json")


def _defaults(plan: Any) -> dict[str, str]:
    return {d.field: d.value for d in plan.defaults_applied}


def test_defaults_depend_on_gpu_and_version() -> None:
    h100 = plan_memory(LLAMA_8B, H100, Deployment(max_model_len=8192))
    assert (h100.deployment.max_num_seqs, h100.deployment.max_num_batched_tokens) == (1024, 8192)
    assert h100.deployment.memory_fraction == 0.92  # newest modelled vLLM (>= 0.21)
    assert _defaults(h100)["engine_version"] == "0.21.0"
    a100 = plan_memory(LLAMA_8B, A100, Deployment(max_model_len=8192, engine_version="0.9.2"))
    assert (a100.deployment.max_num_seqs, a100.deployment.max_num_batched_tokens) == (256, 2048)
    assert a100.deployment.memory_fraction == 0.9
    defaults = _defaults(a100)
    assert {
        "gpu_memory_utilization",
        "max_num_seqs",
        "max_num_batched_tokens",
        "block_size",
    } <= set(defaults)
    assert "engine_version" not in defaults
    # a tiny max_model_len caps the batched tokens: min(1024 · 4, 8192) = 4096
    tiny = plan_memory(LLAMA_8B, H100, Deployment(max_model_len=4))
    assert tiny.deployment.max_num_batched_tokens == 4096
    # MLA models get 64-token blocks (FlashMLA)
    ds = plan_memory(
        _arch("deepseek-ai--DeepSeek-V3.json"),
        _gpu("H200 SXM", 141),
        Deployment(tensor_parallel_size=8, max_model_len=8192),
    )
    assert ds.kv_block_size == 64


def test_capacity_log_formula_by_version() -> None:
    # before 0.21: num_blocks · block_size; from 0.21: int(concurrency · max_model_len)
    old = plan_memory(LLAMA_8B, H100, Deployment(max_model_len=1000, engine_version="0.10.1"))
    assert old.kv_capacity_tokens == old.kv_blocks * 16
    new = plan_memory(LLAMA_8B, H100, Deployment(max_model_len=1000, engine_version="0.22.0"))
    # 1000 tokens = 63 blocks (1,008 slots): int(blocks / 63 · 1000) < blocks · 16
    assert new.kv_capacity_tokens == int(new.kv_blocks / 63 * 1000)
    assert new.max_concurrency == new.kv_blocks / 63


def test_cuda_graphs_and_enforce_eager() -> None:
    # v0.21+: the graph estimate comes out of the budget; enforce_eager removes it
    graphs = plan_memory(LLAMA_8B, H100, Deployment(max_model_len=8192))
    eager = plan_memory(LLAMA_8B, H100, Deployment(max_model_len=8192, enforce_eager=True))
    assert eager.cuda_graph_bytes_per_gpu == 0
    assert (
        eager.kv_available_bytes_per_gpu - graphs.kv_available_bytes_per_gpu
        == graphs.cuda_graph_bytes_per_gpu
    )
    # 51 capture sizes up to 512 (3 + 31 + 17) piecewise plus 51 full decode graphs
    item = next(i for i in graphs.line_items if i.name == "CUDA graphs")
    assert item.formula.startswith("51 piecewise + 51 full graphs")


def test_too_long_context_reason_and_suggestions() -> None:
    # Llama-3.1-70B bf16 on 2 x L4 (24 GiB) cannot even hold its weights.
    arch = _arch("meta-llama--Llama-3.1-70B.json")
    plan = plan_memory(arch, L4, Deployment(tensor_parallel_size=2, max_model_len=8192))
    assert not plan.fits
    assert any("the weights need" in r for r in plan.reasons)
    assert plan.suggestions.largest_max_model_len is None
    # TP 8: 141 GB of bf16 weights / 8 = 16.4 GiB per GPU under a 0.92 · 23.75 = 21.9 GiB
    # budget, leaving ~3 GiB after activations, buffers and graphs for 8,192 tokens
    # (8 KV heads / 8 = 1 per GPU: 2 · 128 · 2 B · 80 layers = 40,960 B/token, 0.31 GiB)
    assert plan.suggestions.smallest_tensor_parallel_size == 8
    # Llama-3.1-8B on an L4 at the full 131,072 tokens: one request needs 16 GiB of KV
    small = plan_memory(LLAMA_8B, L4, Deployment())
    assert not small.fits
    assert small.reasons[0].startswith("max_model_len 131072 needs 16.0 GiB of KV for one sequence")
    largest = small.suggestions.largest_max_model_len
    assert largest is not None
    assert largest < 131_072
    fitted = plan_memory(LLAMA_8B, L4, Deployment(max_model_len=largest))
    assert fitted.fits
    too_long = plan_memory(LLAMA_8B, L4, Deployment(max_model_len=largest + 16))
    assert not too_long.fits
    assert small.suggestions.smallest_tensor_parallel_size == 2


def test_utilization_needed_is_enough() -> None:
    plan = plan_memory(
        LLAMA_8B, H100, Deployment(max_model_len=131_072, gpu_memory_utilization=0.25)
    )
    assert not plan.fits
    needed = plan.suggestions.gpu_memory_utilization_needed
    assert needed is not None
    assert plan_memory(
        LLAMA_8B, H100, Deployment(max_model_len=131_072, gpu_memory_utilization=needed)
    ).fits
    assert not plan_memory(
        LLAMA_8B,
        H100,
        Deployment(max_model_len=131_072, gpu_memory_utilization=round(needed - 0.01, 2)),
    ).fits


def test_warns_when_no_room_is_left() -> None:
    # 0.99 of 79.18 GiB leaves 0.79 GiB for a 0.61 GiB context + 0.15 GiB headroom: allowed,
    # but flagged. 0.995 leaves less than the context: vLLM refuses to start.
    near = plan_memory(LLAMA_8B, H100, Deployment(max_model_len=8192, gpu_memory_utilization=0.99))
    assert near.fits
    assert any("do not allocate every byte" in w for w in near.warnings)
    over = plan_memory(LLAMA_8B, H100, Deployment(max_model_len=8192, gpu_memory_utilization=0.995))
    assert not over.fits
    assert "refuses to start" in over.reasons[0]
    # before 0.21 the graphs live in the slack: (1 - 0.988) · 79.18 = 0.95 GiB is less than
    # context 0.61 + graphs 0.35 + headroom 0.15 = 1.10 GiB; vLLM starts (0.95 > 0.61) but
    # may run out of memory while capturing
    old = plan_memory(
        LLAMA_8B,
        H100,
        Deployment(max_model_len=8192, gpu_memory_utilization=0.988, engine_version="0.10.1"),
    )
    assert old.fits
    assert any("CUDA graphs" in w for w in old.warnings)


def test_concurrency_at_requested_lengths() -> None:
    plan = plan_memory(
        LLAMA_8B,
        H100,
        Deployment(max_model_len=8192),
        request_lengths=[1000, 4000],
        request_weights=[3, 1],
    )
    at_1000, at_4000, mix = plan.concurrency
    assert at_1000.max_concurrency == plan.kv_blocks / 63  # cdiv(1000, 16)
    assert at_4000.max_concurrency == plan.kv_blocks / 250
    assert mix.blocks_per_request == (3 * 63 + 250) / 4


def test_data_parallel_is_per_replica() -> None:
    one = plan_memory(LLAMA_8B, H100, Deployment(max_model_len=8192))
    two = plan_memory(LLAMA_8B, H100, Deployment(max_model_len=8192, data_parallel_size=2))
    assert two.weights_bytes_per_gpu == one.weights_bytes_per_gpu
    assert two.kv_capacity_tokens == one.kv_capacity_tokens
    assert any("per replica" in w for w in two.warnings)


def test_line_items_have_formulas_and_units() -> None:
    plan = plan_memory(LLAMA_8B, H100, Deployment(max_model_len=8192))
    for item in plan.line_items:
        assert item.formula
        assert item.category in (*USAGE_CATEGORIES, "info")
        assert " GB" not in item.formula  # binary units are always written GiB
    per_token = next(i for i in plan.line_items if i.name == "KV per token: full_attention")
    assert per_token.formula == (
        "32 layers · (2 · 8 KV heads · 128 · 2 B = 4,096 B) = 131,072 B/token"
    )


def test_pipeline_parallel_reports_limiting_stage() -> None:
    arch = _arch("meta-llama--Llama-3.1-70B.json")
    plan = plan_memory(
        arch, _gpu("H200 SXM", 141), Deployment(pipeline_parallel_size=3, max_model_len=8192)
    )
    assert [s.num_layers for s in plan.stages] == [27, 27, 26]
    assert plan.kv_blocks == min(s.kv_blocks for s in plan.stages)
    # stage 0 (embedding + 27 layers) is the most loaded and limits the pool
    assert plan.weights_bytes_per_gpu == max(s.weights_bytes_per_gpu for s in plan.stages)
    assert plan.kv_bytes_per_token_per_gpu == 27 * 4096  # 2 · 8 · 128 · 2 B per layer


def test_constants_are_documented_and_overridable() -> None:
    rows = constants_table()
    assert all(row.source for row in rows)
    names = {row.name for row in rows}
    assert {"sampler_bytes_per_request_vocab", "cuda_context_bytes"} <= names
    measured = MemoryConstants(device_total_bytes=80 * GIB)
    plan = plan_memory(LLAMA_8B, H100, Deployment(max_model_len=8192), constants=measured)
    assert plan.device_total_bytes == 80 * GIB


@pytest.mark.parametrize("dtype", ["fp8", "auto"])
def test_fp8_kv_doubles_capacity(dtype: str) -> None:
    plan = plan_memory(LLAMA_8B, H100, Deployment(max_model_len=8192, kv_cache_dtype=dtype))
    expected = 65_536 if dtype == "fp8" else 131_072
    assert plan.kv_bytes_per_token_per_gpu == expected


def test_suggestion_notes_and_fit_predicate() -> None:
    plan = plan_memory(LLAMA_8B, L4, Deployment())
    assert not evaluate_memory(LLAMA_8B, L4, Deployment())
    largest = plan.suggestions.largest_max_model_len
    assert plan.suggestions.notes[:2] == (
        f"set max_model_len to at most {largest}",
        "use tensor_parallel_size 2",
    )
    assert evaluate_memory(LLAMA_8B, L4, Deployment(max_model_len=largest))
