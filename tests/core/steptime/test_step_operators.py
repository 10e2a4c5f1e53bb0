"""Per-GPU operator shapes under tensor, expert and data parallelism."""

from __future__ import annotations

import pytest

from servesize.core.architecture import AttentionKind, parse_architecture
from servesize.core.steptime import operator_inventory
from servesize.core.steptime.model import checkpoint_weight_dtypes

GQA = parse_architecture(
    {
        "model_type": "llama",
        "hidden_size": 4096,
        "num_hidden_layers": 2,
        "head_dim": 128,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "vocab_size": 128256,
        "torch_dtype": "bfloat16",
    },
    name="gqa",
)
MOE = parse_architecture(
    {
        "model_type": "qwen3_moe",
        "hidden_size": 4096,
        "num_hidden_layers": 2,
        "head_dim": 128,
        "num_attention_heads": 64,
        "num_key_value_heads": 4,
        "intermediate_size": 12288,
        "moe_intermediate_size": 1536,
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "vocab_size": 151936,
        "torch_dtype": "bfloat16",
    },
    name="moe",
)


def _gemm(inventory: object, name: str) -> tuple[int, int]:
    for op in inventory.gemms:  # type: ignore[attr-defined]
        if op.name == name:
            return op.n, op.k
    raise KeyError(name)


def test_tensor_parallelism_splits_columns_and_rows() -> None:
    inv = operator_inventory(GQA, tensor_parallel_size=4)
    # q: 32·128/4 = 1024, k and v: 8/4 = 2 heads of 128 each.
    assert _gemm(inv, "qkv_proj") == (1024 + 2 * 2 * 128, 4096)
    assert _gemm(inv, "o_proj") == (4096, 1024)
    assert _gemm(inv, "gate_up_proj") == (2 * 14336 // 4, 4096)
    assert _gemm(inv, "down_proj") == (4096, 14336 // 4)
    assert inv.all_reduces_per_step == 4  # two per layer


def test_kv_heads_are_replicated_beyond_their_count() -> None:
    inv = operator_inventory(GQA, tensor_parallel_size=16)
    (attention,) = inv.attention
    assert attention.num_kv_heads == 1
    # One K and one V head of 128 bf16 values per token per layer.
    assert attention.kv_bytes_per_token == 2 * 128 * 2


def test_weight_bytes_halve_with_two_gpus() -> None:
    one = operator_inventory(GQA)
    two = operator_inventory(GQA, tensor_parallel_size=2)
    assert two.weight_bytes_per_gpu == pytest.approx(one.weight_bytes_per_gpu / 2)


def test_experts_split_over_expert_parallel_ranks() -> None:
    inv = operator_inventory(MOE, tensor_parallel_size=4, expert_parallel_size=4)
    (moe,) = inv.moe
    assert moe.local_experts == 32
    assert moe.expert_tensor_parallel_size == 1
    assert moe.params_per_expert_per_gpu == 3 * 4096 * 1536
    assert inv.all_to_alls_per_step == 0  # attention is tensor-parallel: outputs are reduced


def test_data_parallel_attention_routes_tokens_by_all_to_all() -> None:
    inv = operator_inventory(MOE, data_parallel_size=4, expert_parallel_size=4)
    assert inv.all_to_alls_per_step == 2 * 2
    # All-gather of the 4 ranks' hidden states, bf16 (the (EP-1)/EP share is applied later).
    assert inv.all_to_all_bytes_per_token == 4 * 4096 * 2


def test_expert_parallelism_must_divide_the_group() -> None:
    with pytest.raises(ValueError, match="expert_parallel_size"):
        operator_inventory(MOE, tensor_parallel_size=4, expert_parallel_size=3)


def test_fp8_weights_cost_one_byte() -> None:
    inv = operator_inventory(GQA, weight_dtype="fp8_e4m3")
    head = next(op for op in inv.gemms if op.name == "lm_head")
    body = next(op for op in inv.gemms if op.name == "qkv_proj")
    assert (body.weight_bytes_per_element, body.compute_dtype) == (1.0, "fp8")
    assert (head.weight_bytes_per_element, head.compute_dtype) == (2.0, "bf16")


def test_window_layers_keep_their_window() -> None:
    arch = parse_architecture(
        {
            "model_type": "gpt_oss",
            "hidden_size": 2880,
            "num_hidden_layers": 2,
            "head_dim": 64,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
            "intermediate_size": 2880,
            "num_local_experts": 32,
            "num_experts_per_tok": 4,
            "vocab_size": 201088,
            "sliding_window": 128,
            "layer_types": ["sliding_attention", "full_attention"],
            "torch_dtype": "bfloat16",
            "quantization_config": {
                "quant_method": "mxfp4",
                "modules_to_not_convert": ["model.layers.*.self_attn"],
            },
        },
        name="oss",
    )
    kinds = {op.kind: op.window_tokens for op in operator_inventory(arch).attention}
    assert kinds == {AttentionKind.SLIDING: 128, AttentionKind.FULL: None}
    assert checkpoint_weight_dtypes(arch) == ("bf16", "mxfp4")
