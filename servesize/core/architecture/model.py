"""Value objects describing a decoder-only model, layer by layer.

An :class:`Architecture` is a tuple of :class:`DecoderLayer` (token mixer + MLP), plus the
embedding, the output head, optional multi-token-prediction (MTP) layers and the checkpoint's
quantization. Everything is frozen; derived facts (parameters, cache bytes, FLOPs) live in the
sibling modules ``params``, ``cache`` and ``flops``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from servesize.core.architecture.quantization import QuantizationSpec

__all__ = [
    "STATE_KINDS",
    "Architecture",
    "AttentionKind",
    "DecoderLayer",
    "DenseMlp",
    "GatedDeltaNet",
    "LatentAttention",
    "MambaMixer",
    "Mixer",
    "Mlp",
    "MlpKind",
    "MoeMlp",
    "MultiHeadAttention",
]


class AttentionKind(StrEnum):
    """How a layer mixes tokens, which decides what it caches per sequence."""

    FULL = "full_attention"
    """Softmax attention over the whole context; K and V grow with every token."""
    SLIDING = "sliding_attention"
    """Softmax attention over the last ``window_tokens`` tokens; the cache stops growing there."""
    CHUNKED = "chunked_attention"
    """Attention within fixed chunks (Llama 4 ``attention_chunk_size``); at most one chunk kept."""
    MLA = "mla"
    """Multi-head latent attention (DeepSeek-V2/V3): one shared latent per token is cached."""
    LINEAR = "linear_attention"
    """Gated delta-net linear attention: a fixed-size recurrent state, independent of length."""
    MAMBA = "mamba"
    """Selective state-space layer (Mamba-1 or Mamba-2): a conv state and an SSM state per
    sequence, independent of length."""


class MlpKind(StrEnum):
    DENSE = "dense"
    MOE = "moe"


@dataclass(frozen=True, slots=True, kw_only=True)
class MultiHeadAttention:
    """Softmax attention with ``num_kv_heads`` K/V heads shared by ``num_heads`` query heads.

    MHA when ``num_kv_heads == num_heads``, MQA when it is 1, GQA in between.
    """

    kind: AttentionKind
    num_heads: int
    num_kv_heads: int
    head_dim: int
    window_tokens: int | None = None
    """Tokens kept by a sliding or chunked layer; None for full attention."""
    qkv_bias: bool = False
    o_bias: bool = False
    qk_norm: bool = False
    """Learned per-head RMSNorm on queries and keys (Qwen3, Gemma 3): ``2 * head_dim`` weights."""
    sinks: bool = False
    """Learned per-head attention-sink logits (gpt-oss): ``num_heads`` weights."""
    output_gate: bool = False
    """Sigmoid output gate computed by a doubled ``q_proj`` (Qwen3-Next, Qwen3.5)."""

    @property
    def variant(self) -> str:
        """``"MHA"``, ``"GQA"`` or ``"MQA"``."""
        if self.num_kv_heads == self.num_heads:
            return "MHA"
        return "MQA" if self.num_kv_heads == 1 else "GQA"


@dataclass(frozen=True, slots=True, kw_only=True)
class LatentAttention:
    """Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2).

    Queries go through an optional low-rank bottleneck (``q_lora_rank``; None in V2-Lite);
    keys and values are rebuilt from a ``kv_lora_rank`` latent plus a shared
    ``qk_rope_head_dim`` rotary key, and those two are what engines cache.
    """

    num_heads: int
    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int

    @property
    def kind(self) -> AttentionKind:
        return AttentionKind.MLA


@dataclass(frozen=True, slots=True, kw_only=True)
class GatedDeltaNet:
    """Gated delta-net linear attention (Qwen3-Next, Qwen3.5).

    Per sequence it keeps a causal-conv state of ``conv_kernel - 1`` columns over the q, k and v
    channels and one ``key_head_dim x value_head_dim`` recurrent state per value head.
    """

    num_key_heads: int
    num_value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel: int

    @property
    def kind(self) -> AttentionKind:
        return AttentionKind.LINEAR

    @property
    def conv_channels(self) -> int:
        """Channels through the depthwise causal conv: ``2*H_k*d_k + H_v*d_v`` (q, k and v)."""
        return (
            2 * self.num_key_heads * self.key_head_dim + self.num_value_heads * self.value_head_dim
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class MambaMixer:
    """A Mamba-1 (``version=1``) or Mamba-2 (``version=2``) selective state-space mixer.

    ``d_inner = num_heads * head_dim`` channels. Mamba-2 (HF ``modeling_mamba2.py``, vLLM
    ``MambaMixer2``) shares ``n_groups`` B/C projections of width ``d_state`` across heads and
    keeps a ``num_heads x head_dim x d_state`` state; Mamba-1 (``modeling_mamba.py``,
    ``modeling_jamba.py``, vLLM ``MambaMixer``) has one head per channel (``head_dim = 1``,
    ``num_heads = d_inner``), a ``dt_rank`` low-rank time step and a ``d_inner x d_state``
    state.
    """

    version: int
    num_heads: int
    head_dim: int
    d_state: int
    conv_kernel: int
    n_groups: int = 1
    dt_rank: int = 0
    """Mamba-1 only: width of the low-rank ``x_proj -> dt_proj`` path."""
    conv_bias: bool = True
    proj_bias: bool = False
    inner_norms: bool = False
    """Jamba's ``dt_layernorm``, ``b_layernorm`` and ``c_layernorm`` (Mamba-1 only)."""
    ssm_state_dtype: str | None = None
    """Recurrent-state dtype the checkpoint asks for (``mamba_ssm_cache_dtype``); None: as the
    conv state (vLLM ``mamba_ssm_cache_dtype="auto"``)."""

    @property
    def kind(self) -> AttentionKind:
        return AttentionKind.MAMBA

    @property
    def d_inner(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def conv_channels(self) -> int:
        """Channels through the causal conv: ``d_inner`` (v1) or ``d_inner + 2*G*N`` (v2)."""
        if self.version == 1:
            return self.d_inner
        return self.d_inner + 2 * self.n_groups * self.d_state


Mixer = MultiHeadAttention | LatentAttention | GatedDeltaNet | MambaMixer

STATE_KINDS = frozenset({AttentionKind.LINEAR, AttentionKind.MAMBA})
"""Layer kinds that hold a fixed per-sequence state instead of per-token K/V."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DenseMlp:
    """A feed-forward block, gated ``down(act(gate(x)) * up(x))`` or plain ``down(act(up(x)))``."""

    intermediate_size: int
    gated: bool = True
    bias: bool = False

    @property
    def kind(self) -> MlpKind:
        return MlpKind.DENSE


@dataclass(frozen=True, slots=True, kw_only=True)
class MoeMlp:
    """A mixture of experts: a router, ``num_experts`` routed experts, optional shared experts."""

    num_experts: int
    experts_per_token: int
    expert_intermediate_size: int
    gated: bool = True
    expert_bias: bool = False
    """Biases on the expert projections (gpt-oss)."""
    router_bias: bool = False
    """A bias on the router projection (gpt-oss)."""
    router_score_bias: bool = False
    """A per-expert score-correction bias (DeepSeek-V3 ``noaux_tc`` routing)."""
    shared_intermediate_size: int = 0
    """Total width of the always-active shared expert(s); 0 when there are none."""
    shared_gate: bool = False
    """A sigmoid gate ``Linear(hidden, 1)`` on the shared expert (Qwen2-MoE, Qwen3-Next)."""

    @property
    def kind(self) -> MlpKind:
        return MlpKind.MOE


Mlp = DenseMlp | MoeMlp


@dataclass(frozen=True, slots=True, kw_only=True)
class DecoderLayer:
    """One decoder layer: a token mixer, an MLP and the layer's norm weights."""

    index: int
    mixer: Mixer
    mlp: Mlp
    norm_params: int
    """Weights (and biases) of the layer's own normalisation layers."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Architecture:
    """A decoder-only language model as the serving engines see it, before any parallelism."""

    name: str
    model_type: str
    family: str
    """Parser family used (``"llama"``, ``"deepseek_v3"``, ... or ``"generic"``)."""
    architecture: str | None
    """``architectures[0]`` of the config, when present."""
    hidden_size: int
    vocab_size: int
    tie_word_embeddings: bool
    layers: tuple[DecoderLayer, ...]
    final_norm_params: int
    mtp_layers: tuple[DecoderLayer, ...] = ()
    """Multi-token-prediction layers; engines load them only for speculative decoding."""
    mtp_extra_params: int = 0
    """MTP weights outside the decoder layers (input projection and norms), all MTP layers."""
    weight_dtype: str = "bf16"
    """Unquantized parameter dtype (canonical name, from ``torch_dtype``/``dtype``)."""
    quantization: QuantizationSpec | None = None
    multimodal: bool = False
    max_position_embeddings: int | None = None
    assumptions: tuple[str, ...] = ()
