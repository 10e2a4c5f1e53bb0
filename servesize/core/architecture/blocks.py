"""Token-mixer and MLP blocks of a decoder layer, read from ``config.json`` fields.

Structure per family follows the HF modelling code (``modeling_<family>.py`` in
huggingface/transformers) and vLLM's model files (``vllm/model_executor/models/<family>.py`` in
vllm-project/vllm): which projections carry biases, Falcon's multi-query and
``new_decoder_architecture`` spellings, MLA's optional query bottleneck
(``deepseek_v2.py``), the gated delta-net geometry (``modular_qwen3_next.py``) and each MoE
variant's router, shared experts and gates.
"""

from __future__ import annotations

from typing import TypeVar

from servesize.core.architecture._reader import ConfigReader
from servesize.core.architecture.families import GENERIC, Family, MixerFamily
from servesize.core.architecture.model import (
    AttentionKind,
    DenseMlp,
    GatedDeltaNet,
    LatentAttention,
    Mixer,
    MoeMlp,
    MultiHeadAttention,
)

__all__ = ["build_mixers", "build_mlps", "generic_experts_key", "mtp_mixer", "need", "read_int"]

_T = TypeVar("_T")


def need(value: _T | None) -> _T:
    """``value``, which callers only read once the parser has checked it exists."""
    if value is None:  # unreachable: the parser raised for the missing field already
        raise AssertionError("internal: value read after a reported issue")
    return value


def read_int(r: ConfigReader, family: Family, key: str, legacy: str) -> int:
    """Read ``key``, or its pre-2023 Falcon spelling ``legacy``."""
    if family.name == "falcon" and not r.has(key) and r.has(legacy):
        return r.integer(legacy)
    return r.integer(key)


# -- token mixers --------------------------------------------------------------------------


def _heads(r: ConfigReader, family: Family, hidden: int) -> tuple[int, int, int]:
    heads = read_int(r, family, "num_attention_heads", "n_head")
    if family.name == "falcon":
        kv = _falcon_kv_heads(r, heads)
    elif r.has("num_key_value_heads") and r.raw("num_key_value_heads") is not None:
        kv = r.integer("num_key_value_heads")
    else:
        kv = heads
        r.issues.assume(
            f"num_key_value_heads absent: {heads} (one KV head per query head, MHA) assumed"
        )
    if r.has("head_dim") and r.raw("head_dim") is not None:
        head_dim = r.integer("head_dim")
    elif r.ok("hidden_size", "num_attention_heads") and hidden % heads:
        r.issues.add(
            r.where("hidden_size"),
            f"({hidden}) is not divisible by /num_attention_heads ({heads}) and no head_dim "
            "is given",
        )
        head_dim = 1
    else:
        head_dim = hidden // heads
        r.issues.assume(
            f"head_dim absent: derived as hidden_size / num_attention_heads = {head_dim}"
        )
    if r.ok("num_attention_heads", "num_key_value_heads") and heads % kv:
        r.issues.add(
            r.where("num_attention_heads"),
            f"({heads}) is not divisible by /num_key_value_heads ({kv})",
        )
    return heads, kv, head_dim


def _falcon_kv_heads(r: ConfigReader, heads: int) -> int:
    # modeling_falcon.py: num_kv_heads if new_decoder_architecture, else 1 if multi_query.
    if r.boolean("new_decoder_architecture", default=False):
        key = "num_kv_heads" if r.has("num_kv_heads") else "n_head_kv"
        return r.integer(key, default=heads, nullable=True)
    if r.boolean("multi_query", default=True):
        return 1
    return heads


def build_mixers(
    r: ConfigReader,
    family: Family,
    kinds: list[AttentionKind],
    hidden: int,
    max_positions: int | None,
) -> list[Mixer]:
    if family.mixer is MixerFamily.MLA or (family is GENERIC and r.has("kv_lora_rank")):
        mla = _latent(r)
        return [mla] * len(kinds)
    heads, kv, head_dim = _heads(r, family, hidden)
    qkv_bias, o_bias = _attention_bias(r, family)
    output_gate = family.output_gate and r.boolean("attn_output_gate", default=True)
    windows = _windows(r, kinds, max_positions)
    linear = _delta_net(r) if AttentionKind.LINEAR in kinds else None
    out: list[Mixer] = []
    for kind in kinds:
        if kind is AttentionKind.LINEAR:
            out.append(need(linear))
            continue
        if kind is not AttentionKind.FULL and windows.get(kind) is None:
            kind = AttentionKind.FULL
        out.append(
            MultiHeadAttention(
                kind=kind,
                num_heads=heads,
                num_kv_heads=kv,
                head_dim=head_dim,
                window_tokens=windows.get(kind),
                qkv_bias=qkv_bias,
                o_bias=o_bias,
                qk_norm=family.qk_norm,
                sinks=family.sinks,
                output_gate=output_gate,
            )
        )
    return out


def _attention_bias(r: ConfigReader, family: Family) -> tuple[bool, bool]:
    if family.name == "falcon":
        bias = r.boolean("bias", default=False)
        return bias, bias
    flag = r.boolean("attention_bias", default=False)
    qkv = flag if family.qkv_bias is None else family.qkv_bias
    out = flag if family.o_bias is None else family.o_bias
    return qkv, out


def _windows(
    r: ConfigReader, kinds: list[AttentionKind], max_positions: int | None
) -> dict[AttentionKind, int | None]:
    windows: dict[AttentionKind, int | None] = {}
    if AttentionKind.SLIDING in kinds:
        window = r.integer("sliding_window")
        if r.ok("sliding_window") and max_positions is not None and window >= max_positions:
            r.issues.assume(
                f"sliding_window ({window}) >= max_position_embeddings ({max_positions}): the "
                "window never binds, so these layers are planned as full attention"
            )
            windows[AttentionKind.SLIDING] = None
        else:
            windows[AttentionKind.SLIDING] = window
    if AttentionKind.CHUNKED in kinds:
        windows[AttentionKind.CHUNKED] = r.integer("attention_chunk_size")
        r.issues.assume(
            "chunked attention: a sequence keeps at most attention_chunk_size tokens of K/V "
            "in those layers (its current chunk), planned like a sliding window of that size"
        )
    return windows


def _latent(r: ConfigReader) -> LatentAttention:
    heads = r.integer("num_attention_heads")
    if not r.has("q_lora_rank"):
        r.issues.add(
            r.pointer("q_lora_rank"),
            "required field is missing (null when queries are not compressed, as in V2-Lite)",
        )
    return LatentAttention(
        num_heads=heads,
        q_lora_rank=r.optional_integer("q_lora_rank"),
        kv_lora_rank=r.integer("kv_lora_rank"),
        qk_nope_head_dim=r.integer("qk_nope_head_dim", minimum=0),
        qk_rope_head_dim=r.integer("qk_rope_head_dim", minimum=0),
        v_head_dim=r.integer("v_head_dim"),
    )


def _delta_net(r: ConfigReader) -> GatedDeltaNet:
    k_heads = r.integer("linear_num_key_heads")
    v_heads = r.integer("linear_num_value_heads")
    if r.ok("linear_num_key_heads", "linear_num_value_heads") and v_heads % k_heads:
        r.issues.add(
            r.where("linear_num_value_heads"),
            f"({v_heads}) is not divisible by /linear_num_key_heads ({k_heads})",
        )
    return GatedDeltaNet(
        num_key_heads=k_heads,
        num_value_heads=v_heads,
        key_head_dim=r.integer("linear_key_head_dim"),
        value_head_dim=r.integer("linear_value_head_dim"),
        conv_kernel=r.integer("linear_conv_kernel_dim"),
    )


def mtp_mixer(mixers: list[Mixer]) -> Mixer:
    """MTP modules use a full-attention layer of the model's own attention kind."""
    for mixer in mixers:
        if isinstance(mixer, LatentAttention):
            return mixer
        if isinstance(mixer, MultiHeadAttention) and mixer.kind is AttentionKind.FULL:
            return mixer
    for mixer in mixers:
        if isinstance(mixer, MultiHeadAttention):
            return mixer
    return mixers[0]


# -- MLPs ----------------------------------------------------------------------------------


def generic_experts_key(r: ConfigReader) -> str | None:
    for key in ("num_local_experts", "num_experts", "n_routed_experts"):
        if r.has(key) and r.raw(key) not in (None, 0):
            return key
    return None


def build_mlps(
    r: ConfigReader, family: Family, hidden: int, any_moe: bool, any_dense: bool
) -> tuple[DenseMlp | None, MoeMlp | None]:
    dense = _dense(r, family, hidden) if any_dense else None
    moe = _moe(r, family) if any_moe else None
    return dense, moe


def _dense(r: ConfigReader, family: Family, hidden: int) -> DenseMlp:
    bias = r.boolean(family.mlp_bias_key, default=False) if family.mlp_bias_key else False
    if family.name == "falcon":
        width = r.integer(
            "ffn_hidden_size",
            default=4 * hidden,
            nullable=True,
            assumption="ffn_hidden_size absent: Falcon default of 4 * hidden_size used",
        )
        return DenseMlp(intermediate_size=width, gated=False, bias=r.boolean("bias", default=False))
    key = "intermediate_size_mlp" if family.name == "llama4" else "intermediate_size"
    return DenseMlp(intermediate_size=r.integer(key), gated=family.gated_mlp, bias=bias)


def _moe(r: ConfigReader, family: Family) -> MoeMlp:
    name = family.name
    if name in ("deepseek_v2", "deepseek_v3"):
        experts, width = r.integer("n_routed_experts"), r.integer("moe_intermediate_size")
        shared = r.integer(
            "n_shared_experts",
            minimum=0,
            default=0,
            nullable=True,
            assumption="n_shared_experts absent: no shared experts",
        )
        method = r.string("topk_method", default="noaux_tc" if name == "deepseek_v3" else None)
        return MoeMlp(
            num_experts=experts,
            experts_per_token=_top_k(r, experts),
            expert_intermediate_size=width,
            router_score_bias=method == "noaux_tc",
            shared_intermediate_size=shared * width,
        )
    if name in ("qwen2_moe", "qwen3_moe", "qwen3_next", "qwen3_5"):
        experts = r.integer("num_experts")
        shared = r.integer("shared_expert_intermediate_size", minimum=0, default=0)
        return MoeMlp(
            num_experts=experts,
            experts_per_token=_top_k(r, experts),
            expert_intermediate_size=r.integer("moe_intermediate_size"),
            shared_intermediate_size=shared,
            shared_gate=shared > 0,
        )
    if name == "gpt_oss":
        experts = r.integer("num_local_experts")
        return MoeMlp(
            num_experts=experts,
            experts_per_token=_top_k(r, experts, "experts_per_token"),
            expert_intermediate_size=r.integer("intermediate_size"),
            expert_bias=True,
            router_bias=True,
        )
    if name == "llama4":
        experts = r.integer("num_local_experts")
        width = r.integer("intermediate_size")
        return MoeMlp(
            num_experts=experts,
            experts_per_token=_top_k(r, experts),
            expert_intermediate_size=width,
            shared_intermediate_size=width,
        )
    if name == "mixtral":
        experts = r.integer("num_local_experts")
        return MoeMlp(
            num_experts=experts,
            experts_per_token=_top_k(r, experts),
            expert_intermediate_size=r.integer("intermediate_size"),
        )
    key = generic_experts_key(r) or "num_experts"
    experts = r.integer(key)
    width_key = "moe_intermediate_size" if r.has("moe_intermediate_size") else "intermediate_size"
    if width_key == "intermediate_size":
        r.issues.assume("moe_intermediate_size absent: experts assumed intermediate_size wide")
    r.issues.assume("generic MoE: every layer routed, no shared experts, router without bias")
    return MoeMlp(
        num_experts=experts,
        experts_per_token=_top_k(r, experts),
        expert_intermediate_size=r.integer(width_key),
    )


def _top_k(r: ConfigReader, experts: int, alias: str | None = None) -> int:
    key = "num_experts_per_tok"
    if alias is not None and not r.has(key) and r.has(alias):
        key = alias
    top_k = r.integer(key)
    experts_ok = r.ok("num_experts", "num_local_experts", "n_routed_experts")
    if r.ok(key) and experts_ok and top_k > experts:
        r.issues.add(r.where(key), f"({top_k}) exceeds the number of experts ({experts})")
    return top_k
