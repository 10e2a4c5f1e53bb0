"""The seed's figures and the KV calculator (two of concurrency, length, memory -> the third)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from servesize.core.architecture import Architecture, parse_architecture
from servesize.core.memory import GIB, InvalidDeploymentError, kv_budget
from servesize.core.memory.formats import dense_format
from servesize.core.memory.units import gib_text

MODELS = Path(__file__).resolve().parents[3] / "servesize" / "data" / "models"


def _arch(filename: str) -> Architecture:
    config: dict[str, Any] = json.loads((MODELS / filename).read_text())
    return parse_architecture(config, name=filename)


def test_seed_kv_two_gib() -> None:
    # 2 (K, V) · 4 seqs · 4096 tokens · 32 layers · 8 KV heads · 128 · 2 B (fp16)
    # = 2 · 4 · 4096 · 32 · 8 · 128 · 2 = 2,147,483,648 B = exactly 2 GiB
    result = kv_budget(
        num_layers=32,
        num_kv_heads=8,
        head_dim=128,
        bytes_per_element=2,
        concurrency=4,
        tokens_per_sequence=4096,
    )
    assert result.kv_bytes == 2_147_483_648 == 2 * GIB
    assert result.bytes_per_token == 131_072  # 2 · 32 · 8 · 128 · 2
    assert "2,147,483,648 B (2.00 GiB)" in result.formula
    assert result.formula.startswith("2 · 4 seqs · 4096 tokens · 32 layers · 8 KV heads · 128")


def test_seed_weights_gb_versus_gib() -> None:
    # 7e9 parameters · 2 B = 14,000,000,000 B = 14 GB (decimal) = 13.04 GiB (binary)
    weights = 7 * dense_format("fp16").tensor_bytes(1_000_000_000, 1)
    assert weights == 14 * 10**9
    assert gib_text(weights, 1) == "13.0 GiB"
    assert weights / GIB == pytest.approx(13.0385, abs=1e-4)


def test_max_concurrency_at_length() -> None:
    # 2 GiB holds 4 sequences of 4096 tokens at 131,072 B/token: 2^31 / (4096 · 131072) = 4
    result = kv_budget(
        num_layers=32,
        num_kv_heads=8,
        head_dim=128,
        bytes_per_element=2,
        tokens_per_sequence=4096,
        memory_bytes=2 * GIB + 5,
    )
    assert result.max_concurrency == 4
    assert result.kv_bytes == 2 * GIB


def test_max_tokens_at_concurrency() -> None:
    # 10 GiB over 3 sequences at 131,072 B/token: floor(10·2^30 / (3 · 131072)) = 27,306
    result = kv_budget(
        num_layers=32,
        num_kv_heads=8,
        head_dim=128,
        bytes_per_element=2,
        concurrency=3,
        memory_bytes=10 * GIB,
    )
    assert result.max_tokens_per_sequence == 27_306
    # with 16-token blocks the length is rounded down to whole blocks: 27,296 = 1706 · 16
    blocked = kv_budget(
        num_layers=32,
        num_kv_heads=8,
        head_dim=128,
        bytes_per_element=2,
        concurrency=3,
        memory_bytes=10 * GIB,
        block_size=16,
    )
    assert blocked.max_tokens_per_sequence == 27_296


def test_block_rounding_and_kv_head_replication() -> None:
    # 1000 tokens round up to 1008 (63 blocks of 16). TP 16 over 8 KV heads keeps one head per
    # GPU: 2 · 1 seq · 1008 · 32 layers · 1 head · 128 · 2 B = 16,515,072 B
    result = kv_budget(
        num_layers=32,
        num_kv_heads=8,
        head_dim=128,
        bytes_per_element=2,
        concurrency=1,
        tokens_per_sequence=1000,
        block_size=16,
        tensor_parallel_size=16,
    )
    assert result.kv_bytes == 16_515_072


def test_fp4_elements_round_up_once() -> None:
    # 0.5 B elements: 2 · 1 layer · 1 head · 3 dims · 0.5 B = 3 B per token; 5 tokens -> 15 B
    result = kv_budget(
        num_layers=1,
        num_kv_heads=1,
        head_dim=3,
        bytes_per_element=0.5,
        concurrency=1,
        tokens_per_sequence=5,
    )
    assert result.kv_bytes == 15


def test_model_form_applies_windows() -> None:
    # gemma-2-9b: 21 sliding (window 4096) + 21 full layers, 2 · 8 heads · 256 · 2 B = 8,192 B
    # per layer and token. 8,000 tokens: 21 · 4096 · 8192 + 21 · 8000 · 8192 = 2,080,899,072 B
    result = kv_budget(
        model=_arch("google--gemma-2-9b.json"), concurrency=1, tokens_per_sequence=8000
    )
    assert result.kv_bytes == 2_080_899_072
    assert result.bytes_per_token == 42 * 8192


def test_model_form_largest_length() -> None:
    # Llama-3.1-8B, 131,072 B/token; 1 sequence in 1 GiB: 2^30 / 131072 = 8192 tokens exactly
    result = kv_budget(
        model=_arch("meta-llama--Llama-3.1-8B.json"), concurrency=1, memory_bytes=GIB
    )
    assert result.max_tokens_per_sequence == 8192


def test_exactly_two_of_three() -> None:
    with pytest.raises(InvalidDeploymentError) as caught:
        kv_budget(num_layers=32, num_kv_heads=8, head_dim=128, bytes_per_element=2, concurrency=4)
    assert {i.field for i in caught.value.issues} == {
        "/concurrency",
        "/tokens_per_sequence",
        "/memory_bytes",
    }


def test_geometry_or_model_required() -> None:
    with pytest.raises(InvalidDeploymentError) as caught:
        kv_budget(num_layers=32, head_dim=0, concurrency=1, tokens_per_sequence=1)
    fields = {i.field for i in caught.value.issues}
    assert fields == {"/num_kv_heads", "/head_dim", "/bytes_per_element"}
