"""Build an :class:`Architecture` from a Hugging Face ``config.json`` dict.

Recognised families are listed in :mod:`servesize.core.architecture.families`; anything else is
planned generically as a Llama-style decoder when every field that path needs is present.
Malformed input never raises anything but :class:`InvalidArchitectureError`, which lists every
missing or inconsistent field at once. Every default or derivation applied is recorded in
``Architecture.assumptions``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from servesize.core.architecture._reader import ConfigReader, Issues
from servesize.core.architecture.blocks import (
    build_mixers,
    build_mlps,
    generic_experts_key,
    mtp_mixer,
    need,
    read_int,
)
from servesize.core.architecture.families import GENERIC, Family, MixerFamily, resolve_family
from servesize.core.architecture.layout import mixer_kinds, moe_layer_flags
from servesize.core.architecture.model import (
    Architecture,
    DecoderLayer,
)
from servesize.core.architecture.quantization import parse_quantization
from servesize.core.architecture.ssm import HYBRID_MARKERS, build_ssm_layers
from servesize.core.dtypes import canonical_dtype

__all__ = ["parse_architecture"]

_MAX_LAYERS = 4096


def parse_architecture(config: Mapping[str, Any], *, name: str) -> Architecture:
    """Parse ``config`` (a decoded ``config.json``) into an :class:`Architecture`.

    Raises
    ------
    InvalidArchitectureError
        When fields the plan needs are missing, mistyped, out of range or inconsistent; the
        error lists every such field as a JSON pointer.

    Examples
    --------
    >>> arch = parse_architecture(
    ...     {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
    ...      "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100},
    ...     name="tiny")
    >>> [layer.mixer.kind.value for layer in arch.layers]
    ['full_attention', 'full_attention']
    >>> for assumption in arch.assumptions:
    ...     print(assumption)
    tie_word_embeddings absent: llama default (false) used
    num_key_value_heads absent: 4 (one KV head per query head, MHA) assumed
    head_dim absent: derived as hidden_size / num_attention_heads = 16
    torch_dtype absent: weights assumed to be bf16
    """
    return _parse(config, name=name, issues=Issues(model=name))


def _parse(config: Mapping[str, Any], *, name: str, issues: Issues) -> Architecture:
    if not isinstance(config, Mapping):
        issues.add("", "a model config must be a JSON object")
        issues.raise_if_any()
    top = ConfigReader(section=config, issues=issues)
    architectures = top.string_list("architectures")
    architecture = architectures[0] if architectures else None
    text = top.mapping("text_config")
    multimodal = text is not None
    r = (
        ConfigReader(section=text, issues=issues, prefix=("text_config",), fallback=config)
        if text is not None
        else top
    )
    model_type = r.string("model_type") or ""
    family = resolve_family(model_type, architecture)
    if family is None:
        family = GENERIC
        _refuse_unknown_hybrid(r, model_type, architecture)
        issues.assume(
            f"model_type {model_type or None!r} (architectures[0] {architecture!r}) is not a "
            "recognised family: planned as a generic Llama-style decoder (gated MLP, two "
            "RMSNorms per layer, biases only where attention_bias/mlp_bias say so)"
        )
    if multimodal:
        issues.assume(
            f"multimodal wrapper ({architecture or model_type}): the text decoder in "
            "/text_config is planned; vision/audio towers and projectors are excluded from "
            "parameter counts"
        )

    num_layers = _layers_key(r, family)
    hidden = read_int(r, family, "hidden_size", "n_embed")
    vocab = r.integer(
        "vocab_size",
        default=family.vocab_default,
        assumption=f"vocab_size absent: {family.name} default ({family.vocab_default}) used",
    )
    tie = r.boolean(
        "tie_word_embeddings",
        default=family.tie_default,
        assumption=(
            f"tie_word_embeddings absent: {family.name} default "
            f"({str(family.tie_default).lower()}) used"
        ),
    )
    max_positions = r.optional_integer("max_position_embeddings")
    norm_width = hidden * (2 if family.layer_norm_bias else 1)
    norms_per_layer = _norms_per_layer(r, family)
    if family.mixer is MixerFamily.SSM:
        ssm = build_ssm_layers(r, family, hidden, num_layers)
        mixers = [layer.mixer for layer in ssm]
        layers_list = [
            DecoderLayer(index=i, mixer=x.mixer, mlp=x.mlp, norm_params=x.norms * norm_width)
            for i, x in enumerate(ssm)
        ]
    else:
        kinds = mixer_kinds(r, family, num_layers)
        moe_flags = moe_layer_flags(r, family, num_layers)
        if family is GENERIC and generic_experts_key(r) is not None:
            moe_flags = [True] * num_layers
        mixers = build_mixers(r, family, kinds, hidden, max_positions)
        dense, moe = build_mlps(r, family, hidden, any(moe_flags), not all(moe_flags))
    quantization = parse_quantization(r)
    weight_dtype = _dtype(r)

    mtp_count = _mtp_layers(r, family)
    issues.raise_if_any()

    if family.mixer is MixerFamily.SSM:
        layers = tuple(layers_list)
    else:
        layers = tuple(
            DecoderLayer(
                index=i,
                mixer=mixers[i],
                mlp=moe if (moe_flags[i] and moe is not None) else need(dense),
                norm_params=norms_per_layer * norm_width,
            )
            for i in range(num_layers)
        )
    mtp_layers: tuple[DecoderLayer, ...] = ()
    if mtp_count:
        mtp_attention = mtp_mixer(mixers)
        mtp_layers = tuple(
            DecoderLayer(
                index=num_layers + k,
                mixer=mtp_attention,
                mlp=moe if moe is not None else need(dense),
                norm_params=norms_per_layer * norm_width,
            )
            for k in range(mtp_count)
        )
    return Architecture(
        name=name,
        model_type=model_type,
        family=family.name,
        architecture=architecture,
        hidden_size=hidden,
        vocab_size=vocab,
        tie_word_embeddings=tie,
        layers=layers,
        final_norm_params=norm_width,
        mtp_layers=mtp_layers,
        # eh_proj (2h -> h) and three h-wide norms per MTP module (DeepSeek: enorm, hnorm,
        # shared_head.norm; Qwen3.5: pre_fc_norm_hidden, pre_fc_norm_embedding, norm).
        mtp_extra_params=mtp_count * (2 * hidden * hidden + 3 * hidden),
        weight_dtype=weight_dtype,
        quantization=quantization,
        multimodal=multimodal,
        max_position_embeddings=max_positions,
        assumptions=tuple(issues.assumptions),
    )


def _refuse_unknown_hybrid(r: ConfigReader, model_type: str, architecture: str | None) -> None:
    """An unknown family carrying hybrid/state-space keys is a problem, never a silent Llama."""
    for key in sorted(HYBRID_MARKERS):
        if r.has(key):
            r.issues.add(
                r.where(key),
                f"hybrid or state-space field of an unsupported family (model_type "
                f"{model_type or None!r}, architectures[0] {architecture!r}): supported "
                "families with such layers are jamba, bamba, nemotron_h, mamba, mamba2, "
                "qwen3_next and qwen3_5",
            )


def _layers_key(r: ConfigReader, family: Family) -> int:
    key = "n_layer" if family.name == "falcon" and not r.has("num_hidden_layers") else None
    key = key or "num_hidden_layers"
    layers = r.integer(key)
    if layers > _MAX_LAYERS:
        r.issues.add(r.where(key), f"({layers}) is implausibly large (more than {_MAX_LAYERS})")
        r.bad.add(key)
        return 1
    return layers


def _norms_per_layer(r: ConfigReader, family: Family) -> int:
    if family.name != "falcon":
        return family.norms_per_layer
    # modeling_falcon.py: a single input_layernorm for the parallel 7B block; ln_attn and
    # ln_mlp for new_decoder_architecture (40B/180B); two sequential norms otherwise.
    if r.boolean("new_decoder_architecture", default=False):
        return r.integer("num_ln_in_parallel_attn", default=2)
    return 1 if r.boolean("parallel_attn", default=True) else 2


def _dtype(r: ConfigReader) -> str:
    key = "torch_dtype" if r.has("torch_dtype") else "dtype"
    value = r.string(key)
    if value is None:
        r.issues.assume("torch_dtype absent: weights assumed to be bf16")
        return "bf16"
    try:
        return canonical_dtype(value)
    except KeyError:
        r.issues.add(r.where(key), f"unknown dtype {value!r}")
        return "bf16"


def _mtp_layers(r: ConfigReader, family: Family) -> int:
    if family.name in ("deepseek_v2", "deepseek_v3"):
        return r.integer("num_nextn_predict_layers", minimum=0, default=0)
    if family.name in ("qwen3_next", "qwen3_5"):
        return r.integer("mtp_num_hidden_layers", minimum=0, default=0)
    return 0
