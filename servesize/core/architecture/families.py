"""Per-family conventions that ``config.json`` leaves implicit.

HF config classes fill absent fields with class defaults and the modelling code hard-codes
some structure (which projections carry biases, how many norms a layer has). This table
records those conventions for the families we plan, as read from the HF modelling files
``src/transformers/models/<family>/modeling_<family>.py`` (huggingface/transformers) and
vLLM's ``vllm/model_executor/models/<family>.py`` (vllm-project/vllm).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["FAMILIES", "GENERIC", "Family", "LayerRule", "MixerFamily", "MoeRule", "resolve_family"]


class LayerRule(StrEnum):
    """How a family decides which layers use windowed attention, when ``layer_types`` is absent."""

    NONE = "none"
    """Every layer attends to the full context."""
    WINDOW_ALL = "window_all"
    """Mistral/Mixtral/Phi-3: every layer is windowed when ``sliding_window`` is set."""
    QWEN = "qwen"
    """Qwen2/3: layers ``>= max_window_layers`` are windowed when ``use_sliding_window`` is true."""
    ALTERNATE = "alternate"
    """Gemma 2: even layers sliding, odd layers full."""
    PATTERN = "pattern"
    """Gemma 3: every ``sliding_window_pattern``-th layer full, the others sliding."""
    ALTERNATE_DEFAULT = "alternate_default"
    """gpt-oss: ``layer_types`` is expected; HF's default alternates sliding/full."""
    LINEAR_INTERVAL = "linear_interval"
    """Qwen3-Next/Qwen3.5: every ``full_attention_interval``-th layer full, others linear."""
    CHUNKED = "chunked"
    """Llama 4: RoPE layers use chunked attention, every 4th (NoPE) layer is global."""


class MoeRule(StrEnum):
    NONE = "none"
    ALL = "all"
    """Every layer is MoE (Mixtral, gpt-oss)."""
    QWEN = "qwen"
    """``decoder_sparse_step`` and ``mlp_only_layers`` (Qwen2-MoE, Qwen3-MoE, Qwen3-Next)."""
    DEEPSEEK = "deepseek"
    """``first_k_dense_replace`` and ``moe_layer_freq`` (DeepSeek-V2/V3, Kimi-K2)."""
    LLAMA4 = "llama4"
    """``moe_layers`` or ``interleave_moe_layer_step`` (Llama 4)."""


class MixerFamily(StrEnum):
    ATTENTION = "attention"
    MLA = "mla"
    HYBRID_LINEAR = "hybrid_linear"
    SSM = "ssm"
    """Mamba/Mamba-2 layers, alone or mixed with attention (:mod:`.ssm` builds the layers)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Family:
    """Implicit structure of one model family."""

    name: str
    mixer: MixerFamily = MixerFamily.ATTENTION
    layer_rule: LayerRule = LayerRule.NONE
    moe_rule: MoeRule = MoeRule.NONE
    tie_default: bool = False
    """``tie_word_embeddings`` of the HF config class when the key is absent."""
    norms_per_layer: int = 2
    layer_norm_bias: bool = False
    """LayerNorm with a bias (Falcon) instead of a bias-free RMSNorm."""
    gated_mlp: bool = True
    qkv_bias: bool | None = None
    """Fixed q/k/v bias (Qwen2: True); None reads ``attention_bias`` (default False)."""
    o_bias: bool | None = None
    """Fixed output-projection bias; None follows ``attention_bias``."""
    qk_norm: bool = False
    sinks: bool = False
    output_gate: bool = False
    mlp_bias_key: str | None = None
    """Config key that adds biases to the MLP projections (Llama ``mlp_bias``)."""
    vocab_default: int | None = None
    """``vocab_size`` of the HF config class (used only when the key is absent)."""


GENERIC = Family(name="generic")

_FAMILY_LIST = (
    Family(name="llama", mlp_bias_key="mlp_bias"),
    Family(name="mistral", layer_rule=LayerRule.WINDOW_ALL),
    Family(name="mixtral", layer_rule=LayerRule.WINDOW_ALL, moe_rule=MoeRule.ALL),
    Family(name="phi3", layer_rule=LayerRule.WINDOW_ALL),
    Family(name="qwen2", layer_rule=LayerRule.QWEN, qkv_bias=True, o_bias=False),
    Family(
        name="qwen2_moe",
        layer_rule=LayerRule.QWEN,
        moe_rule=MoeRule.QWEN,
        qkv_bias=True,
        o_bias=False,
    ),
    Family(name="qwen3", layer_rule=LayerRule.QWEN, qk_norm=True),
    Family(name="qwen3_moe", layer_rule=LayerRule.QWEN, moe_rule=MoeRule.QWEN, qk_norm=True),
    Family(
        name="qwen3_next",
        mixer=MixerFamily.HYBRID_LINEAR,
        layer_rule=LayerRule.LINEAR_INTERVAL,
        moe_rule=MoeRule.QWEN,
        qk_norm=True,
        output_gate=True,
    ),
    Family(
        name="qwen3_5",
        mixer=MixerFamily.HYBRID_LINEAR,
        layer_rule=LayerRule.LINEAR_INTERVAL,
        moe_rule=MoeRule.QWEN,
        qk_norm=True,
        output_gate=True,
    ),
    Family(name="gemma", tie_default=True),
    Family(name="gemma2", layer_rule=LayerRule.ALTERNATE, tie_default=True, norms_per_layer=4),
    Family(
        name="gemma3",
        layer_rule=LayerRule.PATTERN,
        tie_default=True,
        norms_per_layer=4,
        qk_norm=True,
        vocab_default=262_208,
    ),
    Family(name="deepseek_v2", mixer=MixerFamily.MLA, moe_rule=MoeRule.DEEPSEEK),
    Family(name="deepseek_v3", mixer=MixerFamily.MLA, moe_rule=MoeRule.DEEPSEEK),
    Family(
        name="gpt_oss", layer_rule=LayerRule.ALTERNATE_DEFAULT, moe_rule=MoeRule.ALL, sinks=True
    ),
    Family(name="llama4", layer_rule=LayerRule.CHUNKED, moe_rule=MoeRule.LLAMA4),
    Family(
        name="falcon",
        tie_default=True,
        layer_norm_bias=True,
        gated_mlp=False,
    ),
    # configuration_jamba.py, configuration_bamba.py, configuration_nemotron_h.py,
    # configuration_mamba.py, configuration_mamba2.py (huggingface/transformers).
    Family(name="jamba", mixer=MixerFamily.SSM, vocab_default=65536),
    Family(name="bamba", mixer=MixerFamily.SSM, vocab_default=128000),
    Family(name="nemotron_h", mixer=MixerFamily.SSM, gated_mlp=False, vocab_default=131072),
    Family(name="mamba", mixer=MixerFamily.SSM, tie_default=True, norms_per_layer=1),
    Family(name="mamba2", mixer=MixerFamily.SSM, norms_per_layer=1),
)

FAMILIES: dict[str, Family] = {f.name: f for f in _FAMILY_LIST}

_MODEL_TYPES: dict[str, str] = {
    "llama": "llama",
    "mistral": "mistral",
    "mixtral": "mixtral",
    "phi3": "phi3",
    "qwen2": "qwen2",
    "qwen2_moe": "qwen2_moe",
    "qwen3": "qwen3",
    "qwen3_moe": "qwen3_moe",
    "qwen3_next": "qwen3_next",
    "qwen3_5_moe": "qwen3_5",
    "qwen3_5_moe_text": "qwen3_5",
    "gemma": "gemma",
    "gemma2": "gemma2",
    "gemma3": "gemma3",
    "gemma3_text": "gemma3",
    "deepseek_v2": "deepseek_v2",
    "deepseek_v3": "deepseek_v3",
    "kimi_k2": "deepseek_v3",
    "gpt_oss": "gpt_oss",
    "llama4": "llama4",
    "llama4_text": "llama4",
    "falcon": "falcon",
    "RefinedWeb": "falcon",
    "RefinedWebModel": "falcon",
    "jamba": "jamba",
    "bamba": "bamba",
    "nemotron_h": "nemotron_h",
    "mamba": "mamba",
    "mamba2": "mamba2",
}

_ARCHITECTURES: dict[str, str] = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "MixtralForCausalLM": "mixtral",
    "Phi3ForCausalLM": "phi3",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen2MoeForCausalLM": "qwen2_moe",
    "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3_moe",
    "Qwen3NextForCausalLM": "qwen3_next",
    "GemmaForCausalLM": "gemma",
    "Gemma2ForCausalLM": "gemma2",
    "Gemma3ForCausalLM": "gemma3",
    "Gemma3ForConditionalGeneration": "gemma3",
    "DeepseekV2ForCausalLM": "deepseek_v2",
    "DeepseekV3ForCausalLM": "deepseek_v3",
    "GptOssForCausalLM": "gpt_oss",
    "Llama4ForConditionalGeneration": "llama4",
    "Llama4ForCausalLM": "llama4",
    "FalconForCausalLM": "falcon",
    "JambaForCausalLM": "jamba",
    "BambaForCausalLM": "bamba",
    "NemotronHForCausalLM": "nemotron_h",
    "MambaForCausalLM": "mamba",
    "Mamba2ForCausalLM": "mamba2",
}


def resolve_family(model_type: str | None, architecture: str | None) -> Family | None:
    """The family for ``model_type`` (preferred) or ``architectures[0]``; None if unknown."""
    key = _MODEL_TYPES.get(model_type or "")
    if key is None:
        key = _ARCHITECTURES.get(architecture or "")
    return None if key is None else FAMILIES[key]
