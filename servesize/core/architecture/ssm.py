"""Layers of state-space and hybrid Mamba/attention models, read from ``config.json``.

Layouts follow the HF config classes and vLLM's model files (vllm-project/vllm
``vllm/model_executor/models/{jamba,bamba,nemotron_h,mamba,mamba2}.py``):

- Jamba (``configuration_jamba.py``): layer ``i`` is attention when
  ``i % attn_layer_period == attn_layer_offset`` (defaults 8, 4), else Mamba-1; its MLP is a
  mixture of experts when ``i % expert_layer_period == expert_layer_offset`` (defaults 2, 1).
- Bamba (``configuration_bamba.py``): attention at ``attn_layer_indices``, Mamba-2 elsewhere;
  every layer has a gated MLP.
- Nemotron-H (``configuration_nemotron_h.py``): one *block* per character of
  ``hybrid_override_pattern`` (``M`` Mamba-2, ``*`` attention, ``-`` MLP, ``E`` MoE), each with
  one RMSNorm. A mixer block and the MLP block right after it are planned as one decoder layer;
  a mixer followed by another mixer gets an empty MLP (``intermediate_size`` 0).
- Mamba / Mamba-2 (``configuration_mamba.py``, ``configuration_mamba2.py``): every layer is a
  mixer with one norm and no MLP.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from servesize.core.architecture._reader import ConfigReader
from servesize.core.architecture.blocks import _heads, _top_k
from servesize.core.architecture.families import Family
from servesize.core.architecture.model import (
    AttentionKind,
    DenseMlp,
    MambaMixer,
    Mixer,
    Mlp,
    MoeMlp,
    MultiHeadAttention,
)
from servesize.core.dtypes import canonical_dtype

__all__ = ["HYBRID_MARKERS", "SsmLayer", "build_ssm_layers"]

HYBRID_MARKERS = frozenset(
    {
        "attn_layer_period",
        "attn_layer_offset",
        "attn_layer_indices",
        "expert_layer_period",
        "hybrid_override_pattern",
        "hybrid_layer_ids",
        "layers_block_type",
        "attn_type_list",
        "mamba_d_state",
        "mamba_d_conv",
        "mamba_expand",
        "mamba_n_heads",
        "mamba_num_heads",
        "mamba_d_ssm",
        "ssm_state_size",
        "state_size",
        "ssm_cfg",
        "time_step_rank",
        "linear_num_key_heads",
        "linear_num_value_heads",
        "linear_conv_kernel_dim",
        "linear_key_head_dim",
        "linear_value_head_dim",
        "full_attention_interval",
    }
)
"""Keys that only hybrid or state-space configs carry: a family the parser does not know that
has any of them is refused rather than planned as a Llama."""

_PATTERN = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
_BLOCK_TYPES = {"mamba": "M", "attention": "*", "mlp": "-", "moe": "E"}


@dataclass(frozen=True, slots=True)
class SsmLayer:
    mixer: Mixer
    mlp: Mlp
    norms: int
    """RMSNorms in this decoder layer (each ``hidden_size`` weights)."""


_EMPTY = DenseMlp(intermediate_size=0)


def build_ssm_layers(
    r: ConfigReader, family: Family, hidden: int, num_layers: int
) -> list[SsmLayer]:
    """The decoder layers of a Jamba, Bamba, Nemotron-H, Mamba or Mamba-2 config."""
    name = family.name
    if name in ("mamba", "mamba2"):
        mamba = _mamba1(r, hidden) if name == "mamba" else _mamba2(r, family, hidden)
        return [SsmLayer(mamba, _EMPTY, 1)] * num_layers
    if name == "nemotron_h":
        return _nemotron(r, family, hidden, num_layers)
    attention = _attention(r, family, hidden)
    dense = DenseMlp(intermediate_size=r.integer("intermediate_size"))
    if name == "jamba":
        mamba = _mamba1(r, hidden, jamba=True)
        period = r.integer("attn_layer_period", default=8)
        offset = r.integer("attn_layer_offset", minimum=0, default=4)
        e_period = r.integer("expert_layer_period", default=2)
        e_offset = r.integer("expert_layer_offset", minimum=0, default=1)
        _offset_ok(r, "attn_layer_offset", offset, "attn_layer_period", period)
        _offset_ok(r, "expert_layer_offset", e_offset, "expert_layer_period", e_period)
        experts = r.integer("num_experts", default=16)
        moe = None
        if experts > 1 and any(i % e_period == e_offset for i in range(num_layers)):
            moe = MoeMlp(
                num_experts=experts,
                experts_per_token=_top_k(r, experts),
                expert_intermediate_size=dense.intermediate_size,
            )
        return [
            SsmLayer(
                attention if i % period == offset else mamba,
                moe if (moe is not None and i % e_period == e_offset) else dense,
                2,
            )
            for i in range(num_layers)
        ]
    mamba = _mamba2(r, family, hidden)
    indices = set(r.integer_list("attn_layer_indices", minimum=0) or ())
    for i in sorted(indices):
        if r.ok("num_hidden_layers") and i >= num_layers:
            r.issues.add(
                r.where("attn_layer_indices"),
                f"layer {i} is past /num_hidden_layers ({num_layers})",
            )
    return [SsmLayer(attention if i in indices else mamba, dense, 2) for i in range(num_layers)]


def _offset_ok(r: ConfigReader, key: str, offset: int, period_key: str, period: int) -> None:
    if r.ok(key, period_key) and offset >= period:
        r.issues.add(r.where(key), f"({offset}) must be below /{period_key} ({period})")


def _attention(r: ConfigReader, family: Family, hidden: int) -> MultiHeadAttention:
    if not r.has("head_dim") and r.has("attention_head_dim"):
        heads = r.integer("num_attention_heads")
        kv = r.integer("num_key_value_heads", default=heads)
        head_dim = r.integer("attention_head_dim")
    else:
        heads, kv, head_dim = _heads(r, family, hidden)
    return MultiHeadAttention(
        kind=AttentionKind.FULL,
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=head_dim,
        qkv_bias=r.boolean("attention_bias", default=False),
        o_bias=r.boolean("attention_bias", default=False),
    )


def _auto_int(r: ConfigReader, key: str, auto: int, default: int | str = "auto") -> int:
    """An integer field that may be the string ``"auto"`` (then ``auto``)."""
    value = r.raw(key) if r.has(key) else default
    if value == "auto" or value is None:
        return auto
    return r.integer(key)


def _ssm_dtype(r: ConfigReader) -> str | None:
    value = r.string("mamba_ssm_cache_dtype")
    if value is None or value == "auto":
        return None
    try:
        return canonical_dtype(value)
    except KeyError:
        r.issues.add(r.where("mamba_ssm_cache_dtype"), f"unknown dtype {value!r}")
        return None


def _mamba1(r: ConfigReader, hidden: int, *, jamba: bool = False) -> MambaMixer:
    """Mamba-1: HF ``MambaMixer`` (``time_step_rank``, ``state_size``, ...) or Jamba's
    ``JambaMambaMixer`` (``mamba_*`` keys, plus dt/B/C RMSNorms)."""
    p = "mamba_" if jamba else ""
    expand = r.integer(f"{p}expand", default=2)
    if not jamba and r.has("intermediate_size"):
        d_inner = r.integer("intermediate_size")
    else:
        d_inner = expand * hidden
    rank_key = "mamba_dt_rank" if jamba else "time_step_rank"
    return MambaMixer(
        version=1,
        num_heads=d_inner,
        head_dim=1,
        d_state=r.integer("mamba_d_state" if jamba else "state_size", default=16),
        conv_kernel=r.integer("mamba_d_conv" if jamba else "conv_kernel", default=4),
        dt_rank=_auto_int(r, rank_key, math.ceil(hidden / 16)),
        conv_bias=r.boolean("mamba_conv_bias" if jamba else "use_conv_bias", default=True),
        proj_bias=r.boolean("mamba_proj_bias" if jamba else "use_bias", default=False),
        inner_norms=jamba,
        ssm_state_dtype=_ssm_dtype(r),
    )


def _mamba2(r: ConfigReader, family: Family, hidden: int) -> MambaMixer:
    """Mamba-2 (``MambaMixer2`` in vLLM) under the key names of each family."""
    if family.name == "bamba":
        keys = ("mamba_n_heads", "mamba_d_head", "mamba_n_groups", "mamba_d_state")
        conv_key, expand_key = "mamba_d_conv", "mamba_expand"
        bias_keys = ("mamba_conv_bias", "mamba_proj_bias")
        defaults = (128, 1, 256)
    elif family.name == "nemotron_h":
        keys = ("mamba_num_heads", "mamba_head_dim", "n_groups", "ssm_state_size")
        conv_key, expand_key = "conv_kernel", "expand"
        bias_keys = ("use_conv_bias", "use_bias")
        defaults = (128, 8, 128)
    else:
        keys = ("num_heads", "head_dim", "n_groups", "state_size")
        conv_key, expand_key = "conv_kernel", "expand"
        bias_keys = ("use_conv_bias", "use_bias")
        defaults = (128, 1, 128)
    heads = r.integer(keys[0], default=defaults[0])
    d_inner = r.integer(expand_key, default=2) * hidden
    head_dim = _auto_int(r, keys[1], max(1, d_inner // heads), default=64)
    if family.name == "nemotron_h":
        d_inner = heads * head_dim  # NemotronHMamba2Mixer: intermediate = heads * head_dim
    if r.ok(keys[0], keys[1], expand_key) and heads * head_dim != d_inner:
        r.issues.add(
            r.where(keys[0]),
            f"{keys[0]} ({heads}) x {keys[1]} ({head_dim}) must equal {expand_key} x "
            f"hidden_size ({d_inner})",
        )
    groups = r.integer(keys[2], default=defaults[1])
    if r.ok(keys[0], keys[2]) and heads % groups:
        r.issues.add(r.where(keys[2]), f"({groups}) must divide {keys[0]} ({heads})")
    return MambaMixer(
        version=2,
        num_heads=heads,
        head_dim=head_dim,
        d_state=r.integer(keys[3], default=defaults[2]),
        conv_kernel=r.integer(conv_key, default=4),
        n_groups=groups,
        conv_bias=r.boolean(bias_keys[0], default=True),
        proj_bias=r.boolean(bias_keys[1], default=False),
        ssm_state_dtype=_ssm_dtype(r),
    )


def _pattern(r: ConfigReader, num_layers: int) -> str:
    if r.has("hybrid_override_pattern"):
        text = r.string("hybrid_override_pattern") or ""
        key = "hybrid_override_pattern"
        for i, ch in enumerate(text):
            if ch not in _PATTERN:
                r.issues.add(
                    r.where(key) + f"/{i}",
                    f"unknown block {ch!r}; expected one of {', '.join(_PATTERN)}",
                )
    else:
        key = "layers_block_type"
        names = r.string_list(key)
        if names is None:
            r.issues.add(r.pointer("hybrid_override_pattern"), "required field is missing")
            return "M" * num_layers
        for i, block in enumerate(names):
            if block not in _BLOCK_TYPES:
                r.issues.add(
                    r.where(key) + f"/{i}",
                    f"unknown block type {block!r}; expected one of {', '.join(_BLOCK_TYPES)}",
                )
        text = "".join(_BLOCK_TYPES.get(b, "M") for b in names)
    if r.ok("num_hidden_layers", key) and len(text) != num_layers:
        r.issues.add(r.where(key), f"has {len(text)} blocks but /num_hidden_layers is {num_layers}")
    if text[:1] in ("-", "E"):
        r.issues.add(r.where(key), "starts with an MLP block that follows no mixer")
    return text


def _nemotron(r: ConfigReader, family: Family, hidden: int, num_layers: int) -> list[SsmLayer]:
    text = _pattern(r, num_layers)
    mamba = _mamba2(r, family, hidden) if "M" in text else None
    attention = _attention(r, family, hidden) if "*" in text else None
    dense = None
    if "-" in text:
        dense = DenseMlp(
            intermediate_size=r.integer("intermediate_size"),
            gated=False,
            bias=r.boolean("mlp_bias", default=False),
        )
    moe = None
    if "E" in text:
        experts = r.integer("n_routed_experts")
        moe = MoeMlp(
            num_experts=experts,
            experts_per_token=_top_k(r, experts),
            expert_intermediate_size=r.integer("moe_intermediate_size"),
            gated=False,
            router_score_bias=True,
            shared_intermediate_size=r.integer(
                "moe_shared_expert_intermediate_size", minimum=0, default=0
            ),
        )
    out: list[SsmLayer] = []
    for ch in text:
        if ch in "M*":
            mixer = mamba if ch == "M" else attention
            assert mixer is not None
            out.append(SsmLayer(mixer, _EMPTY, 1))
        elif out and ch in "-E":
            mlp = dense if ch == "-" else moe
            assert mlp is not None
            last = out[-1]
            if last.mlp is _EMPTY:
                out[-1] = SsmLayer(last.mixer, mlp, last.norms + 1)
            else:
                r.issues.add(r.pointer("hybrid_override_pattern"), "two MLP blocks in a row")
    return out
