"""KV bytes per token per GPU for each layer kind, paged blocks and hybrid grouping, by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from servesize.core.architecture import Architecture, parse_architecture
from servesize.core.memory import (
    KvLayerSpec,
    concurrency_at,
    concurrency_for_lengths,
    kv_layer_specs,
    kv_layout,
    resolve_kv_format,
)

MODELS = Path(__file__).resolve().parents[3] / "servesize" / "data" / "models"


def _arch(filename: str) -> Architecture:
    config: dict[str, Any] = json.loads((MODELS / filename).read_text())
    return parse_architecture(config, name=filename)


def _per_token(arch: Architecture, tp: int, kv_dtype: str = "auto") -> dict[str, int]:
    fmt = resolve_kv_format(kv_dtype, arch.weight_dtype)
    assert fmt is not None
    specs = kv_layer_specs(arch, range(len(arch.layers)), tp, fmt, arch.weight_dtype)
    return {s.kind: s.bytes_per_token * s.layers for s in specs}


def test_full_attention_replicates_kv_heads() -> None:
    # Llama-3.1-8B, 8 KV heads of 128, bf16: 2 · 8 · 128 · 2 B · 32 layers = 131,072 B.
    # TP 2: 4 heads per GPU -> 65,536 B; TP 16: max(1, 8 // 16) = 1 head (replicated), not
    # half a head: 2 · 1 · 128 · 2 · 32 = 16,384 B
    arch = _arch("meta-llama--Llama-3.1-8B.json")
    assert _per_token(arch, 1) == {"full_attention": 131_072}
    assert _per_token(arch, 2) == {"full_attention": 65_536}
    assert _per_token(arch, 16) == {"full_attention": 16_384}


def test_mla_latent_replicated_on_tp8() -> None:
    # DeepSeek-V3: (kv_lora_rank 512 + rope 64) · 2 B · 61 layers = 70,272 B on EVERY rank;
    # splitting it by TP 8 (8,784 B) would overstate capacity eightfold.
    arch = _arch("deepseek-ai--DeepSeek-V3.json")
    assert _per_token(arch, 8) == {"mla": 70_272}
    assert _per_token(arch, 8, "fp8") == {"mla": 35_136}  # 576 · 1 B · 61
    assert _per_token(arch, 8, "fp8_ds_mla") == {"mla": 656 * 61}


def test_fp8_kv_and_per_token_head_scales() -> None:
    # fp8: 1 B per element -> 65,536 B/token for Llama-3.1-8B. fp8_per_token_head adds an fp32
    # scale per (token, head) for K and V: 2 · 8 · 4 B · 32 layers = 2,048 B -> 67,584 B.
    arch = _arch("meta-llama--Llama-3.1-8B.json")
    assert _per_token(arch, 1, "fp8") == {"full_attention": 65_536}
    assert _per_token(arch, 1, "fp8_e5m2") == {"full_attention": 65_536}
    assert _per_token(arch, 1, "fp8_per_token_head") == {"full_attention": 67_584}
    # nvfp4: (128/2 + 128/16) B per head for K and V = 2 · 8 · 72 · 32 = 36,864 B
    assert _per_token(arch, 1, "nvfp4") == {"full_attention": 36_864}


def test_sliding_window_blocks_gpt_oss_20b() -> None:
    # gpt-oss-20b: 12 sliding (window 128) + 12 full layers, 8 KV heads of 64:
    # 2 · 8 · 64 · 2 B = 2,048 B per layer and token; page = 16 · 2,048 = 32,768 B.
    # Equal counts -> one group of 12 per kind. A 16,000-token request with 8,192 batched
    # tokens holds cdiv(16000, 16) = 1,000 full blocks + cdiv(min(127 + 8192, 16000), 16) + 1
    # = 520 + 1 = 521 sliding blocks = 1,521 blocks.
    arch = _arch("openai--gpt-oss-20b.json")
    fmt = resolve_kv_format("auto", "bf16")
    assert fmt is not None
    specs = kv_layer_specs(arch, range(24), 1, fmt, "bf16")
    layout = kv_layout(specs, block_size=16, batched_tokens=8192)
    assert layout.page_bytes == 32_768
    assert layout.group_size == 12
    assert layout.blocks_per_request(16_000) == 1_521
    # num_blocks = available // page // group_size: 10 GiB -> 10·2^30 / 32768 / 12 = 27,306
    assert layout.num_blocks(10 * 2**30) == 27_306
    # below the window both kinds grow: 24 · 2,048 = 49,152 B per token
    assert layout.kv_bytes_per_token == 49_152
    # vLLM's one-request check adds layers: 12 · 1000 · 32768 + 12 · 521 · 32768 B
    assert layout.request_bytes(16_000) == 12 * 1521 * 32_768


def test_hybrid_linear_attention_state_qwen3_next_tp2() -> None:
    # Qwen3-Next: 36 gated-delta-net + 12 full-attention layers. Per GPU at TP 2:
    #   state: conv (4-1) · (2·16·128 + 32·128)/2 = 3 · 4096 = 12,288 elements
    #          + recurrent 32/2 · 128 · 128 = 262,144 elements -> 274,432 · 2 B = 548,864 B
    #   attention: 2 KV heads -> 1 per GPU: 2 · 1 · 256 · 2 B = 1,024 B per token
    # The attention block grows until one page holds the state:
    #   16 · cdiv(548,864, 16 · 1,024) = 16 · 34 = 544 tokens -> page 557,056 B.
    # Groups: min 12, max 36 >= 1.5 · 12 -> group_size 12: 3 state groups + 1 attention group.
    arch = _arch("Qwen--Qwen3-Next-80B-A3B-Thinking.json")
    fmt = resolve_kv_format("auto", "bf16")
    assert fmt is not None
    specs = kv_layer_specs(arch, range(48), 2, fmt, "bf16")
    states = {s.kind: s.state_bytes for s in specs}
    assert states["linear_attention"] == 548_864
    layout = kv_layout(specs, block_size=16, batched_tokens=8192)
    assert layout.block_size == 544
    assert layout.page_bytes == 557_056
    assert layout.group_size == 12
    assert sorted(layout.groups) == [1, 3]
    # a 10,000-token request: 3 state blocks + cdiv(10000, 544) = 19 attention blocks
    assert layout.blocks_per_request(10_000) == 22


def test_grouping_pads_uneven_hybrids_gemma_3() -> None:
    # gemma-3-27b: 52 sliding + 10 full layers. max 52 >= 1.5 · 10 -> group_size 10;
    # sliding needs cdiv(52, 10) = 6 groups = 60 slots -> 8 padding layers.
    arch = _arch("google--gemma-3-27b-it.json")
    fmt = resolve_kv_format("auto", "bf16")
    assert fmt is not None
    specs = kv_layer_specs(arch, range(len(arch.layers)), 1, fmt, "bf16")
    layout = kv_layout(specs, block_size=16, batched_tokens=8192)
    assert layout.group_size == 10
    assert layout.padding_layers == 8
    # vLLM's rule keeps both kinds whole when they are within 1.5x: 13 vs 12 -> 13
    full = KvLayerSpec(kind="full_attention", layers=13, bytes_per_token=64, formula="")
    sliding = KvLayerSpec(
        kind="sliding_attention", layers=12, bytes_per_token=64, formula="", window_tokens=128
    )
    assert kv_layout((full, sliding), block_size=16, batched_tokens=64).group_size == 13


def test_pooled_layout_for_other_engines() -> None:
    # SGLang/TensorRT-LLM pool all layers per token: gpt-oss-20b 24 · 2,048 = 49,152 B/token,
    # 32-token blocks (TensorRT-LLM tokens_per_block) -> page 1,572,864 B, cdiv(T, 32) blocks.
    arch = _arch("openai--gpt-oss-20b.json")
    fmt = resolve_kv_format("auto", "bf16")
    assert fmt is not None
    specs = kv_layer_specs(arch, range(24), 1, fmt, "bf16")
    layout = kv_layout(specs, block_size=32, batched_tokens=8192, hybrid_grouping=False)
    assert layout.page_bytes == 32 * 49_152
    assert layout.blocks_per_request(100) == 4


def test_concurrency_with_block_rounding() -> None:
    # 32 full layers, 16-token blocks, 1,000 blocks in the pool.
    # 1,000 tokens -> cdiv(1000, 16) = 63 blocks = 1,008 tokens held -> 1000 / 63 = 15.87
    spec = KvLayerSpec(kind="full_attention", layers=32, bytes_per_token=4096, formula="")
    layout = kv_layout((spec,), block_size=16, batched_tokens=8192)
    one = concurrency_at(layout, 1000, 1000)
    assert one.blocks_per_request == 63
    assert one.kv_tokens_per_request == 1008
    assert one.max_concurrency == 1000 / 63
    # a mix: 3 parts 100 tokens (7 blocks), 1 part 1,600 tokens (100 blocks)
    # expected blocks = (3 · 7 + 100) / 4 = 30.25 -> 1000 / 30.25 = 33.06 requests
    mix = concurrency_for_lengths(layout, 1000, [100, 1600], [3, 1])
    assert mix.blocks_per_request == 30.25
    assert mix.tokens_per_request == 475
    assert mix.max_concurrency == 1000 / 30.25
