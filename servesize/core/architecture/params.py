"""Exact parameter counts, per component, from the layer structure.

With ``h`` the hidden size, ``H``/``H_kv`` query/KV heads and ``D`` the head dim:

- softmax attention: ``h*H*D*(2 if output-gated else 1) + 2*h*H_kv*D + H*D*h``, plus
  ``H*D + 2*H_kv*D`` q/k/v biases, ``h`` output bias, ``2*D`` q/k norms, ``H`` sinks where
  present (``modeling_llama.py``, ``modeling_qwen2.py``, ``modeling_qwen3.py``,
  ``modeling_gpt_oss.py``, ``modeling_qwen3_next.py`` in huggingface/transformers);
- MLA (``modeling_deepseek_v3.py``; vllm-project/vllm:vllm/model_executor/models/deepseek_v2.py):
  ``q_a_proj h*r_q + q_a_layernorm r_q + q_b_proj r_q*H*(d_nope+d_rope)`` (or
  ``q_proj h*H*(d_nope+d_rope)`` without ``q_lora_rank``), ``kv_a_proj_with_mqa
  h*(r_kv+d_rope) + kv_a_layernorm r_kv + kv_b_proj r_kv*H*(d_nope+d_v) + o_proj H*d_v*h``;
- gated delta-net (``modular_qwen3_next.py``): ``in_proj_qkvz h*(2*K+2*V) + in_proj_ba h*2*H_v +
  conv1d C*k + dt_bias H_v + A_log H_v + norm d_v + out_proj V*h`` with ``K = H_k*d_k``,
  ``V = H_v*d_v``, ``C = 2*K + V``;
- Mamba-1/Mamba-2 mixers: see :func:`_mamba_parameters`;
- gated MLP ``3*h*I`` (plain ``2*h*I``), plus ``2*I + h`` biases when present; MoE: ``E`` such
  experts, a router ``h*E`` (+``E`` bias), a DeepSeek-V3 score-correction bias ``E``, shared
  experts as one MLP of the summed width and a Qwen shared-expert gate ``h``;
- embedding ``V*h`` and, unless tied, an output head ``V*h``.

*Active* parameters are those a token touches: everything except the routed experts it is not
sent to. Vendors differ on whether the input embedding counts (Mistral and Qwen include it,
DeepSeek and OpenAI do not), so both totals are exposed.
"""

from __future__ import annotations

from dataclasses import dataclass

from servesize.core.architecture.model import (
    Architecture,
    DecoderLayer,
    DenseMlp,
    LatentAttention,
    MambaMixer,
    Mixer,
    Mlp,
    MoeMlp,
    MultiHeadAttention,
)

__all__ = [
    "MlpParameters",
    "ParameterCounts",
    "count_parameters",
    "mixer_parameters",
    "mlp_parameters",
]


def mixer_parameters(mixer: Mixer, hidden_size: int) -> int:
    """Weights and biases of one token mixer (attention, MLA or gated delta-net)."""
    h = hidden_size
    if isinstance(mixer, MultiHeadAttention):
        q_width = mixer.num_heads * mixer.head_dim
        kv_width = mixer.num_kv_heads * mixer.head_dim
        total = h * q_width * (2 if mixer.output_gate else 1) + 2 * h * kv_width + q_width * h
        if mixer.qkv_bias:
            total += q_width * (2 if mixer.output_gate else 1) + 2 * kv_width
        if mixer.o_bias:
            total += h
        if mixer.qk_norm:
            total += 2 * mixer.head_dim
        if mixer.sinks:
            total += mixer.num_heads
        return total
    if isinstance(mixer, LatentAttention):
        n = mixer.num_heads
        qk_dim = mixer.qk_nope_head_dim + mixer.qk_rope_head_dim
        if mixer.q_lora_rank is None:
            q = h * n * qk_dim
        else:
            q = h * mixer.q_lora_rank + mixer.q_lora_rank + mixer.q_lora_rank * n * qk_dim
        kv = (
            h * (mixer.kv_lora_rank + mixer.qk_rope_head_dim)
            + mixer.kv_lora_rank
            + mixer.kv_lora_rank * n * (mixer.qk_nope_head_dim + mixer.v_head_dim)
        )
        return q + kv + n * mixer.v_head_dim * h
    if isinstance(mixer, MambaMixer):
        return _mamba_parameters(mixer, h)
    key_width = mixer.num_key_heads * mixer.key_head_dim
    value_width = mixer.num_value_heads * mixer.value_head_dim
    return (
        h * (2 * key_width + 2 * value_width)
        + h * 2 * mixer.num_value_heads
        + mixer.conv_channels * mixer.conv_kernel
        + 2 * mixer.num_value_heads
        + mixer.value_head_dim
        + value_width * h
    )


def _mamba_parameters(m: MambaMixer, h: int) -> int:
    """Mamba-2: ``in_proj h*(2*D_i + 2*G*N + H)``, ``conv1d C*k`` (+``C`` bias), ``dt_bias``,
    ``A_log``, ``D`` (``H`` each), gated ``norm D_i``, ``out_proj D_i*h`` (``modeling_mamba2.py``;
    vLLM ``MambaMixer2``). Mamba-1: ``in_proj h*2*D_i``, ``conv1d D_i*k`` (+``D_i``),
    ``x_proj D_i*(R + 2*N)``, ``dt_proj R*D_i + D_i``, ``A_log D_i*N``, ``D D_i``,
    ``out_proj D_i*h``, plus Jamba's dt/B/C norms ``R + 2*N`` (``modeling_mamba.py``,
    ``modeling_jamba.py``). ``proj_bias`` adds in/out projection biases."""
    d_inner, n, c = m.d_inner, m.d_state, m.conv_channels
    conv = c * m.conv_kernel + (c if m.conv_bias else 0)
    if m.version == 2:
        in_width = 2 * d_inner + 2 * m.n_groups * n + m.num_heads
        rest = 3 * m.num_heads + d_inner
    else:
        in_width = 2 * d_inner
        rest = d_inner * (m.dt_rank + 2 * n) + m.dt_rank * d_inner + d_inner
        rest += d_inner * n + d_inner
        rest += (m.dt_rank + 2 * n) if m.inner_norms else 0
    bias = (in_width + h) if m.proj_bias else 0
    return h * in_width + conv + rest + d_inner * h + bias


def _ffn(hidden_size: int, width: int, *, gated: bool, bias: bool) -> int:
    matrices = 3 if gated else 2
    total = matrices * hidden_size * width
    if bias:
        total += (matrices - 1) * width + hidden_size
    return total


@dataclass(frozen=True, slots=True, kw_only=True)
class MlpParameters:
    """Parameters of one MLP block, split the way MoE serving cares about."""

    dense: int = 0
    experts_routed: int = 0
    experts_routed_active: int = 0
    experts_shared: int = 0
    router: int = 0


def mlp_parameters(mlp: Mlp, hidden_size: int) -> MlpParameters:
    """Parameters of one dense MLP or mixture-of-experts block."""
    if isinstance(mlp, DenseMlp):
        dense = _ffn(hidden_size, mlp.intermediate_size, gated=mlp.gated, bias=mlp.bias)
        return MlpParameters(dense=dense)
    assert isinstance(mlp, MoeMlp)
    expert = _ffn(hidden_size, mlp.expert_intermediate_size, gated=mlp.gated, bias=mlp.expert_bias)
    router = hidden_size * mlp.num_experts
    router += mlp.num_experts * (int(mlp.router_bias) + int(mlp.router_score_bias))
    shared = 0
    if mlp.shared_intermediate_size:
        shared = _ffn(hidden_size, mlp.shared_intermediate_size, gated=mlp.gated, bias=False)
        router += hidden_size if mlp.shared_gate else 0
    return MlpParameters(
        experts_routed=mlp.num_experts * expert,
        experts_routed_active=mlp.experts_per_token * expert,
        experts_shared=shared,
        router=router,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ParameterCounts:
    """Parameter counts of the main model (MTP modules are reported separately in ``mtp``)."""

    embedding: int
    lm_head: int
    """0 when the output head is tied to the embedding."""
    attention: int
    """All token mixers: attention, MLA and linear-attention layers, with their internal norms."""
    mlp_dense: int
    experts_routed: int
    experts_routed_active: int
    """Routed-expert parameters one token uses (``experts_per_token`` experts per MoE layer)."""
    experts_shared: int
    router: int
    """Router projections and biases, and shared-expert gates."""
    norms: int
    """Per-layer norms and the final norm."""
    mtp: int
    """Multi-token-prediction modules (not loaded by engines unless speculating with them)."""

    @property
    def total(self) -> int:
        return (
            self.embedding
            + self.lm_head
            + self.attention
            + self.mlp_dense
            + self.experts_routed
            + self.experts_shared
            + self.router
            + self.norms
        )

    @property
    def active(self) -> int:
        """Parameters used per token, input embedding table included (Mistral/Qwen style)."""
        return self.total - self.experts_routed + self.experts_routed_active

    @property
    def active_excluding_embedding(self) -> int:
        """Parameters used per token without the input embedding (DeepSeek/OpenAI style)."""
        return self.active - self.embedding

    def by_component(self) -> dict[str, int]:
        return {
            "embedding": self.embedding,
            "lm_head": self.lm_head,
            "attention": self.attention,
            "mlp_dense": self.mlp_dense,
            "experts_routed": self.experts_routed,
            "experts_shared": self.experts_shared,
            "router": self.router,
            "norms": self.norms,
        }


def _layer_total(layer: DecoderLayer, hidden_size: int) -> int:
    mlp = mlp_parameters(layer.mlp, hidden_size)
    return (
        mixer_parameters(layer.mixer, hidden_size)
        + mlp.dense
        + mlp.experts_routed
        + mlp.experts_shared
        + mlp.router
        + layer.norm_params
    )


def count_parameters(arch: Architecture) -> ParameterCounts:
    """Exact parameter counts of ``arch`` (text decoder only; no vision tower).

    >>> from servesize.core.architecture.parse import parse_architecture
    >>> arch = parse_architecture(
    ...     {"model_type": "llama", "hidden_size": 8, "num_hidden_layers": 1, "head_dim": 2,
    ...      "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 16,
    ...      "vocab_size": 10, "tie_word_embeddings": True},
    ...     name="toy")
    >>> counts = count_parameters(arch)  # q,o 8*8 each; k,v 8*4 each; mlp 3*8*16; norms 3*8
    >>> (counts.attention, counts.mlp_dense, counts.norms, counts.embedding, counts.total)
    (192, 384, 24, 80, 680)
    """
    h = arch.hidden_size
    attention = dense = routed = routed_active = shared = router = 0
    norms = arch.final_norm_params
    for layer in arch.layers:
        attention += mixer_parameters(layer.mixer, h)
        mlp = mlp_parameters(layer.mlp, h)
        dense += mlp.dense
        routed += mlp.experts_routed
        routed_active += mlp.experts_routed_active
        shared += mlp.experts_shared
        router += mlp.router
        norms += layer.norm_params
    embedding = arch.vocab_size * h
    mtp = sum(_layer_total(layer, h) for layer in arch.mtp_layers) + arch.mtp_extra_params
    return ParameterCounts(
        embedding=embedding,
        lm_head=0 if arch.tie_word_embeddings else embedding,
        attention=attention,
        mlp_dense=dense,
        experts_routed=routed,
        experts_routed_active=routed_active,
        experts_shared=shared,
        router=router,
        norms=norms,
        mtp=mtp,
    )
