"""Which kind of token mixer and MLP each decoder layer has.

An explicit ``layer_types`` list always wins (HF writes it for Gemma 2/3, gpt-oss, Qwen3.5);
otherwise the family rule reproduces what the HF config class derives:

- Gemma 2: ``is_sliding = not layer_idx % 2`` (``modeling_gemma2.py``).
- Gemma 3: sliding unless ``(i + 1) % sliding_window_pattern == 0`` (``configuration_gemma3.py``).
- Qwen2/3: sliding for ``i >= max_window_layers`` when ``use_sliding_window``
  (``configuration_qwen2.py``).
- Qwen3-Next: full attention when ``(i + 1) % full_attention_interval == 0``, linear otherwise
  (``configuration_qwen3_next.py``).
- Llama 4: ``no_rope_layers[i] = int((i + 1) % 4 != 0)``; RoPE layers use chunked attention,
  NoPE layers are global (``configuration_llama4.py``).
- MoE placement: Qwen ``(i + 1) % decoder_sparse_step == 0`` and ``i not in mlp_only_layers``;
  DeepSeek ``i >= first_k_dense_replace and i % moe_layer_freq == 0``; Llama 4 ``moe_layers``
  or ``range(step - 1, L, step)``.
"""

from __future__ import annotations

from servesize.core.architecture._reader import ConfigReader
from servesize.core.architecture.families import Family, LayerRule, MixerFamily, MoeRule
from servesize.core.architecture.model import AttentionKind

__all__ = ["mixer_kinds", "moe_layer_flags"]

_LAYER_TYPES = {
    "full_attention": AttentionKind.FULL,
    "sliding_attention": AttentionKind.SLIDING,
    "chunked_attention": AttentionKind.CHUNKED,
    "linear_attention": AttentionKind.LINEAR,
}


def mixer_kinds(r: ConfigReader, family: Family, num_layers: int) -> list[AttentionKind]:
    """One :class:`AttentionKind` per layer (before windows and geometry are attached)."""
    if family.mixer is MixerFamily.MLA:
        return [AttentionKind.MLA] * num_layers
    explicit = r.string_list("layer_types")
    if explicit is not None:
        kinds: list[AttentionKind] = []
        for i, name in enumerate(explicit):
            kind = _LAYER_TYPES.get(name)
            if kind is None:
                r.issues.add(
                    r.where("layer_types") + f"/{i}",
                    f"unknown layer type {name!r}; expected one of {', '.join(_LAYER_TYPES)}",
                )
                kind = AttentionKind.FULL
            kinds.append(kind)
        if r.ok("num_hidden_layers") and len(kinds) != num_layers:
            r.issues.add(
                r.where("layer_types"),
                f"has {len(kinds)} entries but /num_hidden_layers is {num_layers}",
            )
        return (kinds + [AttentionKind.FULL] * num_layers)[:num_layers]
    return [_rule_kind(r, family, i, num_layers) for i in range(num_layers)]


def _rule_kind(r: ConfigReader, family: Family, i: int, num_layers: int) -> AttentionKind:
    rule = family.layer_rule
    if rule is LayerRule.WINDOW_ALL:
        windowed = r.optional_integer("sliding_window") is not None
        return AttentionKind.SLIDING if windowed else AttentionKind.FULL
    if rule is LayerRule.QWEN:
        use = r.boolean("use_sliding_window", default=False)
        window = r.optional_integer("sliding_window")
        start = r.integer("max_window_layers", minimum=0, default=num_layers) if use else 0
        windowed = use and window is not None and i >= start
        return AttentionKind.SLIDING if windowed else AttentionKind.FULL
    if rule is LayerRule.ALTERNATE:
        return AttentionKind.SLIDING if i % 2 == 0 else AttentionKind.FULL
    if rule is LayerRule.ALTERNATE_DEFAULT:
        r.issues.assume(
            "layer_types absent: alternating sliding/full attention assumed, starting with sliding"
        )
        return AttentionKind.SLIDING if i % 2 == 0 else AttentionKind.FULL
    if rule is LayerRule.PATTERN:
        pattern = r.integer(
            "sliding_window_pattern",
            default=6,
            assumption="sliding_window_pattern absent: Gemma 3 default of 6 used "
            "(5 sliding layers, then 1 full)",
        )
        return AttentionKind.FULL if (i + 1) % pattern == 0 else AttentionKind.SLIDING
    if rule is LayerRule.LINEAR_INTERVAL:
        interval = r.integer(
            "full_attention_interval",
            default=4,
            assumption="full_attention_interval absent: Qwen3-Next default of 4 used",
        )
        return AttentionKind.FULL if (i + 1) % interval == 0 else AttentionKind.LINEAR
    if rule is LayerRule.CHUNKED:
        if r.optional_integer("attention_chunk_size") is None:
            return AttentionKind.FULL
        flags = r.integer_list("no_rope_layers", minimum=0)
        if flags and len(flags) == num_layers:
            uses_rope = flags[i] != 0
        else:
            if flags and r.ok("num_hidden_layers"):
                r.issues.add(
                    r.where("no_rope_layers"),
                    f"has {len(flags)} entries but /num_hidden_layers is {num_layers}",
                )
            uses_rope = (i + 1) % 4 != 0
        return AttentionKind.CHUNKED if uses_rope else AttentionKind.FULL
    return AttentionKind.FULL


def moe_layer_flags(r: ConfigReader, family: Family, num_layers: int) -> list[bool]:
    """True for each layer whose MLP is a mixture of experts."""
    rule = family.moe_rule
    if rule is MoeRule.NONE:
        return [False] * num_layers
    if rule is MoeRule.ALL:
        return [True] * num_layers
    if rule is MoeRule.QWEN:
        step = r.integer("decoder_sparse_step", default=1)
        dense = set(r.integer_list("mlp_only_layers", minimum=0) or ())
        return [(i + 1) % step == 0 and i not in dense for i in range(num_layers)]
    if rule is MoeRule.DEEPSEEK:
        first = r.integer(
            "first_k_dense_replace",
            minimum=0,
            default=0,
            assumption="first_k_dense_replace absent: every layer is MoE",
        )
        freq = r.integer("moe_layer_freq", default=1)
        if r.ok("first_k_dense_replace", "num_hidden_layers") and first > num_layers:
            r.issues.add(
                r.where("first_k_dense_replace"),
                f"({first}) exceeds /num_hidden_layers ({num_layers})",
            )
        return [i >= first and i % freq == 0 for i in range(num_layers)]
    explicit = r.integer_list("moe_layers", minimum=0)
    if explicit is not None:
        chosen = set(explicit)
    else:
        step = r.integer("interleave_moe_layer_step", default=1)
        chosen = set(range(step - 1, num_layers, step))
    return [i in chosen for i in range(num_layers)]
