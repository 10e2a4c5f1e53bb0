"""KV-cache and recurrent-state bytes worked out by hand, one model per attention kind."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from servesize.core.architecture import (
    Architecture,
    kv_bytes_per_sequence,
    kv_footprint,
    parse_architecture,
    state_bytes_per_sequence,
)

MODELS = Path(__file__).resolve().parents[3] / "servesize" / "data" / "models"


def _arch(filename: str) -> Architecture:
    config: dict[str, Any] = json.loads((MODELS / filename).read_text())
    return parse_architecture(config, name=filename)


def test_gqa_llama_3_1_8b() -> None:
    # 32 layers * (K and V: 2) * 8 KV heads * 128 head_dim = 65,536 elements per token
    # bf16 (2 bytes): 131,072 B; fp8 (1 byte): 65,536 B; fp32: 262,144 B
    arch = _arch("meta-llama--Llama-3.1-8B.json")
    assert kv_footprint(arch, "bf16").bytes_per_token == 131_072
    assert kv_footprint(arch, "fp8_e4m3").bytes_per_token == 65_536
    assert kv_footprint(arch, "fp32").bytes_per_token == 262_144
    # 1,000 tokens of context hold 1,000 times the per-token bytes; no recurrent state
    assert kv_bytes_per_sequence(arch, 1000, "bf16") == 131_072_000


def test_mqa_falcon_7b() -> None:
    # multi_query: one KV head shared by 71 query heads; head_dim = 4544 / 71 = 64
    # 32 layers * 2 * 1 * 64 = 4,096 elements per token -> 8,192 B in bf16
    arch = _arch("tiiuae--falcon-7b-instruct.json")
    assert kv_footprint(arch, "bf16").bytes_per_token == 8_192


def test_mla_deepseek_v3() -> None:
    # MLA caches the latent (kv_lora_rank 512) and the shared rotary key (64) per layer:
    # 61 layers * 576 elements = 35,136 per token -> 70,272 B in bf16. Treating the 128
    # nominal KV heads as GQA would claim 61 * 2 * 128 * 128 * 2 = 3,997,696 B instead.
    arch = _arch("deepseek-ai--DeepSeek-V3.json")
    footprint = kv_footprint(arch, "bf16")
    assert footprint.bytes_per_token == 70_272
    assert footprint.bytes_per_token_by_kind == {"mla": 70_272}
    assert footprint.bytes_per_token_unbounded == 70_272


def test_sliding_window_gemma_2_9b() -> None:
    # 42 layers alternating sliding (window 4096) and full; per layer 2 * 8 * 256 = 4,096
    # elements = 8,192 B in bf16. Below the window all 42 layers grow: 344,064 B per token;
    # past it only the 21 full layers do: 172,032 B per token.
    arch = _arch("google--gemma-2-9b.json")
    footprint = kv_footprint(arch, "bf16")
    assert footprint.bytes_per_token == 344_064
    assert footprint.bytes_per_token_unbounded == 172_032
    assert footprint.window_tokens == {"sliding_attention": 4096}
    # A 10,000-token sequence: 21 sliding layers hold 4,096 tokens, 21 full layers 10,000:
    # 21 * 8,192 * (4,096 + 10,000) = 2,424,963,072 B
    assert kv_bytes_per_sequence(arch, 10_000, "bf16") == 2_424_963_072


def test_sliding_window_mistral_v0_1_style() -> None:
    # Mistral-7B-v0.1 shape: every layer windowed at 4096 tokens.
    # 32 layers * 2 * 8 * 128 * 2 B = 131,072 B per token, capped at 4096 tokens.
    config = {
        "model_type": "mistral",
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "vocab_size": 32000,
        "sliding_window": 4096,
        "max_position_embeddings": 32768,
    }
    arch = parse_architecture(config, name="mistral-v0.1-like")
    assert kv_footprint(arch, "bf16").bytes_per_token_unbounded == 0
    assert kv_bytes_per_sequence(arch, 32_768, "bf16") == 4096 * 131_072


def test_hybrid_state_qwen3_next() -> None:
    # 12 full-attention layers: 2 * 2 KV heads * 256 = 1,024 elements -> 2,048 B bf16 each,
    # 24,576 B per token in all.
    # 36 gated delta-net layers hold, per sequence and whatever its length:
    #   conv state (4 - 1) * (2 * 16 * 128 + 32 * 128) = 3 * 8,192 = 24,576 elements
    #   recurrent state 32 value heads * 128 * 128 = 524,288 elements
    #   (24,576 + 524,288) * 2 B = 1,097,728 B per layer; 36 layers = 39,518,208 B
    arch = _arch("Qwen--Qwen3-Next-80B-A3B-Thinking.json")
    assert kv_footprint(arch, "bf16").bytes_per_token == 24_576
    assert state_bytes_per_sequence(arch, "bf16") == 39_518_208
    assert state_bytes_per_sequence(arch, "fp32") == 2 * 39_518_208
    # conv state bf16, recurrent state fp32: 36 * (24,576 * 2 + 524,288 * 4) = 77,266,944
    assert state_bytes_per_sequence(arch, "bf16", "fp32") == 77_266_944


@pytest.mark.parametrize("context", [1, 100, 100_000])
def test_hybrid_state_does_not_grow_with_length(context: int) -> None:
    arch = _arch("Qwen--Qwen3-Next-80B-A3B-Thinking.json")
    total = kv_bytes_per_sequence(arch, context, "bf16", state_dtype="bf16")
    assert total - context * 24_576 == 39_518_208


def test_chunked_attention_llama_4_scout() -> None:
    # 36 chunked (8192-token chunks) + 12 global layers; 2 * 8 * 128 * 2 B = 4,096 B per layer
    arch = _arch("meta-llama--Llama-4-Scout-17B-16E-Instruct.json")
    footprint = kv_footprint(arch, "bf16")
    assert footprint.bytes_per_token_by_kind == {
        "chunked_attention": 36 * 4_096,
        "full_attention": 12 * 4_096,
    }
    assert footprint.window_tokens == {"chunked_attention": 8192}


def test_sub_byte_kv_dtype_rounds_the_total_up() -> None:
    # nvfp4 costs 4.5 bits per element (E2M1 + an FP8 scale per 16); 65,536 elements per
    # token for Llama-3.1-8B -> 65,536 * 4.5 / 8 = 36,864 B (exact, no rounding needed)
    arch = _arch("meta-llama--Llama-3.1-8B.json")
    assert kv_footprint(arch, "nvfp4").bytes_per_token == 36_864
