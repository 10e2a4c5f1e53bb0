"""Parsing: per-layer structure of each family, assumptions, and precise validation errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from servesize.core.architecture import (
    Architecture,
    AttentionKind,
    DenseMlp,
    LatentAttention,
    MoeMlp,
    MultiHeadAttention,
    parse_architecture,
    summarize,
)
from servesize.core.errors import FieldIssue, InvalidArchitectureError

MODELS = Path(__file__).resolve().parents[3] / "servesize" / "data" / "models"


def _config(filename: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((MODELS / filename).read_text())
    return data


def _arch(filename: str) -> Architecture:
    return parse_architecture(_config(filename), name=filename)


def _kinds(arch: Architecture) -> list[str]:
    return [layer.mixer.kind.value for layer in arch.layers]


def _issues(config: Any) -> list[FieldIssue]:
    with pytest.raises(InvalidArchitectureError) as caught:
        parse_architecture(config, name="m")
    return list(caught.value.issues)


LLAMA: dict[str, Any] = {
    "model_type": "llama",
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}


# -- layer patterns ------------------------------------------------------------------------


def test_gemma_3_five_sliding_then_one_full() -> None:
    arch = _arch("google--gemma-3-27b-it.json")
    full = [i for i, kind in enumerate(_kinds(arch)) if kind == "full_attention"]
    assert full == [5, 11, 17, 23, 29, 35, 41, 47, 53, 59]
    assert len(arch.layers) == 62
    layer = arch.layers[0].mixer
    assert isinstance(layer, MultiHeadAttention)
    assert layer.window_tokens == 1024
    assert layer.qk_norm


def test_gemma_2_alternates_starting_with_sliding() -> None:
    kinds = _kinds(_arch("google--gemma-2-9b.json"))
    assert kinds[:4] == ["sliding_attention", "full_attention"] * 2
    assert kinds.count("sliding_attention") == kinds.count("full_attention") == 21


def test_gpt_oss_layer_types_and_sinks() -> None:
    arch = _arch("openai--gpt-oss-120b.json")
    assert _kinds(arch) == ["sliding_attention", "full_attention"] * 18
    first = arch.layers[0].mixer
    assert isinstance(first, MultiHeadAttention)
    assert first.window_tokens == 128
    assert first.sinks


def test_llama_4_every_fourth_layer_is_global() -> None:
    arch = _arch("meta-llama--Llama-4-Scout-17B-16E-Instruct.json")
    kinds = _kinds(arch)
    assert [i for i, k in enumerate(kinds) if k == "full_attention"] == list(range(3, 48, 4))
    mlp = arch.layers[0].mlp
    assert isinstance(mlp, MoeMlp)
    assert (mlp.num_experts, mlp.experts_per_token, mlp.shared_intermediate_size) == (16, 1, 8192)
    assert arch.multimodal


def test_qwen3_next_every_fourth_layer_is_full_attention() -> None:
    kinds = _kinds(_arch("Qwen--Qwen3-Next-80B-A3B-Thinking.json"))
    assert [i for i, k in enumerate(kinds) if k == "full_attention"] == list(range(3, 48, 4))
    assert kinds.count("linear_attention") == 36


def test_deepseek_v3_dense_then_moe() -> None:
    arch = _arch("deepseek-ai--DeepSeek-V3.json")
    kinds = [layer.mlp.kind.value for layer in arch.layers]
    assert kinds[:4] == ["dense", "dense", "dense", "moe"]
    moe = arch.layers[3].mlp
    assert isinstance(moe, MoeMlp)
    assert moe.router_score_bias
    assert moe.shared_intermediate_size == 2048
    assert all(isinstance(layer.mixer, LatentAttention) for layer in arch.layers)


def test_qwen2_moe_shared_expert_and_gate() -> None:
    mlp = _arch("Qwen--Qwen2-57B-A14B.json").layers[0].mlp
    assert isinstance(mlp, MoeMlp)
    assert (mlp.shared_intermediate_size, mlp.shared_gate) == (20480, True)


def test_qwen_mlp_only_layers_and_sparse_step() -> None:
    config = {
        **_config("Qwen--Qwen3-30B-A3B.json"),
        "mlp_only_layers": [0],
        "decoder_sparse_step": 2,
    }
    arch = parse_architecture(config, name="qwen3-moe-variant")
    kinds = [layer.mlp.kind.value for layer in arch.layers]
    # layer 0 forced dense; then MoE where (i + 1) % 2 == 0
    assert kinds[:4] == ["dense", "moe", "dense", "moe"]
    dense = arch.layers[0].mlp
    assert isinstance(dense, DenseMlp)
    assert dense.intermediate_size == 6144


def test_qwen2_use_sliding_window_applies_from_max_window_layers() -> None:
    config = {
        **_config("Qwen--Qwen2.5-7B-Instruct.json"),
        "use_sliding_window": True,
        "sliding_window": 4096,
        "max_window_layers": 20,
    }
    kinds = _kinds(parse_architecture(config, name="qwen2-swa"))
    assert kinds.count("full_attention") == 20
    assert kinds[20:] == ["sliding_attention"] * 8


def test_window_longer_than_the_context_is_full_attention() -> None:
    arch = _arch("microsoft--Phi-3.5-mini-instruct.json")
    assert set(_kinds(arch)) == {"full_attention"}
    assert any("never binds" in a for a in arch.assumptions)


def test_mqa_mha_gqa_variants() -> None:
    assert summarize(_arch("tiiuae--falcon-7b-instruct.json")).attention_variants == {"MQA": 32}
    assert summarize(_arch("microsoft--Phi-3.5-mini-instruct.json")).attention_variants == {
        "MHA": 32
    }
    assert summarize(_arch("meta-llama--Llama-3.1-8B.json")).attention_variants == {"GQA": 32}


# -- assumptions ---------------------------------------------------------------------------


def test_multimodal_wrapper_plans_text_decoder_and_says_so() -> None:
    arch = _arch("google--gemma-3-27b-it.json")
    assert arch.multimodal
    assert arch.hidden_size == 5376
    assert arch.model_type == "gemma3_text"
    assert any("vision" in a and "excluded" in a for a in arch.assumptions)
    assert any(a.startswith("vocab_size absent") for a in arch.assumptions)


def test_derived_head_dim_and_defaulted_kv_heads_are_reported() -> None:
    config = {k: v for k, v in LLAMA.items() if k != "num_key_value_heads"}
    arch = parse_architecture(config, name="llama-mha")
    assert "head_dim absent: derived as hidden_size / num_attention_heads = 128" in (
        arch.assumptions
    )
    assert any(a.startswith("num_key_value_heads absent: 32") for a in arch.assumptions)


def test_unknown_architecture_planned_generically_when_complete() -> None:
    config = {**LLAMA, "model_type": "acme_lm", "architectures": ["AcmeForCausalLM"]}
    arch = parse_architecture(config, name="acme")
    assert arch.family == "generic"
    assert any("not a recognised family" in a for a in arch.assumptions)
    assert arch.layers[0].mixer.kind is AttentionKind.FULL


def test_mtp_layers_reported() -> None:
    s = summarize(_arch("Qwen--Qwen3.5-397B-A17B.json"))
    assert s.mtp_layers == 1
    assert s.parameters_mtp > 0
    assert s.multimodal
    assert s.layer_kinds == {"full_attention": 15, "linear_attention": 45}


# -- validation ----------------------------------------------------------------------------


def test_unknown_architecture_lists_exactly_the_missing_fields() -> None:
    issues = _issues({"model_type": "acme_lm", "hidden_size": 1024, "num_attention_heads": 8})
    assert {i.field for i in issues} == {
        "/num_hidden_layers",
        "/vocab_size",
        "/intermediate_size",
    }
    assert all(i.problem == "required field is missing" for i in issues)


def test_heads_not_divisible_by_kv_heads() -> None:
    issues = _issues({**LLAMA, "num_key_value_heads": 5})
    assert issues == [
        FieldIssue(
            field="/num_attention_heads",
            problem="(32) is not divisible by /num_key_value_heads (5)",
        )
    ]


def test_all_problems_are_reported_at_once() -> None:
    issues = _issues(
        {
            **LLAMA,
            "hidden_size": True,
            "num_hidden_layers": 0,
            "num_key_value_heads": -8,
            "vocab_size": "128256",
            "intermediate_size": 1.5,
        }
    )
    assert {i.field: i.problem for i in issues} == {
        "/hidden_size": "must be an integer, got a boolean",
        "/num_hidden_layers": "must be positive, got 0",
        "/num_key_value_heads": "must be positive, got -8",
        "/vocab_size": "must be an integer, got a string",
        "/intermediate_size": "must be an integer, got a number",
    }


def test_nested_fields_are_addressed_inside_text_config() -> None:
    config = _config("google--gemma-3-27b-it.json")
    config["text_config"] = {**config["text_config"], "num_attention_heads": None}
    issues = _issues(config)
    assert [i.field for i in issues] == ["/text_config/num_attention_heads"]


def test_layer_types_length_and_values_are_checked() -> None:
    config = _config("openai--gpt-oss-20b.json")
    config["layer_types"] = ["sliding_attention", "mystery_attention"]
    fields = {i.field: i.problem for i in _issues(config)}
    assert fields["/layer_types/1"].startswith("unknown layer type 'mystery_attention'")
    assert fields["/layer_types"] == "has 2 entries but /num_hidden_layers is 24"


def test_mla_requires_explicit_q_lora_rank() -> None:
    config = dict(_config("deepseek-ai--DeepSeek-V3.json").items())
    del config["q_lora_rank"]
    del config["kv_lora_rank"]
    assert {i.field for i in _issues(config)} == {"/q_lora_rank", "/kv_lora_rank"}


def test_top_k_cannot_exceed_experts() -> None:
    config = {**_config("mistralai--Mixtral-8x7B-v0.1.json"), "num_experts_per_tok": 9}
    assert [i.field for i in _issues(config)] == ["/num_experts_per_tok"]


@pytest.mark.parametrize("config", [None, [], "config", 42, {"text_config": 3}])
def test_not_an_object(config: Any) -> None:
    assert _issues(config)


def test_error_carries_model_name_and_pointer_text() -> None:
    with pytest.raises(InvalidArchitectureError, match=r"^acme: /vocab_size: required field"):
        parse_architecture({k: v for k, v in LLAMA.items() if k != "vocab_size"}, name="acme")
