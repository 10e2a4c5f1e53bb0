"""A plain, serialisable digest of an :class:`Architecture` for API responses."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from servesize.core.architecture.cache import kv_footprint, state_bytes_per_sequence
from servesize.core.architecture.model import Architecture, MoeMlp, MultiHeadAttention
from servesize.core.architecture.params import count_parameters
from servesize.core.architecture.quantization import QuantizationSpec

__all__ = ["DEFAULT_KV_DTYPES", "DEFAULT_STATE_DTYPES", "ArchitectureSummary", "summarize"]

DEFAULT_KV_DTYPES: tuple[str, ...] = ("fp32", "bf16", "fp16", "fp8")
DEFAULT_STATE_DTYPES: tuple[str, ...] = ("fp32", "bf16")


@dataclass(frozen=True, slots=True, kw_only=True)
class ArchitectureSummary:
    """Derived facts of one model; ints, strings, tuples and mappings only."""

    name: str
    model_type: str
    family: str
    architecture: str | None
    multimodal: bool
    num_layers: int
    layer_kinds: Mapping[str, int]
    """Layers per token-mixer kind (``full_attention``, ``sliding_attention``, ``mla``, ...)."""
    mlp_kinds: Mapping[str, int]
    """Layers per MLP kind (``dense``, ``moe``)."""
    attention_variants: Mapping[str, int]
    """Softmax-attention layers per head layout (``MHA``, ``GQA``, ``MQA``)."""
    hidden_size: int
    vocab_size: int
    tie_word_embeddings: bool
    num_experts: int
    experts_per_token: int
    parameters_total: int
    parameters_active: int
    """Per token, input embedding included (how Mistral and Qwen report active parameters)."""
    parameters_active_excluding_embedding: int
    """Per token, input embedding excluded (how DeepSeek and OpenAI report them)."""
    parameters_embedding: int
    parameters_lm_head: int
    parameters_by_component: Mapping[str, int]
    parameters_mtp: int
    mtp_layers: int
    kv_bytes_per_token: Mapping[str, int]
    """Whole model, by KV dtype, while the context is shorter than every window."""
    kv_bytes_per_token_unbounded: Mapping[str, int]
    """By KV dtype: full-attention and MLA layers only (each token past every window)."""
    kv_bytes_per_token_by_kind: Mapping[str, Mapping[str, int]]
    """By KV dtype, then by layer kind."""
    window_tokens: Mapping[str, int]
    """Window of each windowed layer kind."""
    state_bytes_per_sequence: Mapping[str, int]
    """Fixed linear-attention state per sequence, by state dtype (0 without such layers)."""
    weight_dtype: str
    quantization: QuantizationSpec | None
    max_position_embeddings: int | None
    assumptions: tuple[str, ...]


def summarize(
    arch: Architecture,
    *,
    kv_dtypes: Sequence[str] = DEFAULT_KV_DTYPES,
    state_dtypes: Sequence[str] = DEFAULT_STATE_DTYPES,
) -> ArchitectureSummary:
    """Summarise ``arch``: parameter counts, layer kinds, cache bytes, assumptions.

    >>> from servesize.core.architecture.parse import parse_architecture
    >>> s = summarize(parse_architecture(
    ...     {"model_type": "mistral", "hidden_size": 4096, "num_hidden_layers": 32,
    ...      "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
    ...      "intermediate_size": 14336, "vocab_size": 32000, "sliding_window": 4096,
    ...      "torch_dtype": "bfloat16"}, name="mistral-7b-v0.1"))
    >>> dict(s.layer_kinds), s.kv_bytes_per_token["bf16"], dict(s.window_tokens)
    ({'sliding_attention': 32}, 131072, {'sliding_attention': 4096})
    """
    counts = count_parameters(arch)
    footprints = {dtype: kv_footprint(arch, dtype) for dtype in kv_dtypes}
    layer_kinds = Counter(layer.mixer.kind.value for layer in arch.layers)
    mlp_kinds = Counter(layer.mlp.kind.value for layer in arch.layers)
    variants = Counter(
        layer.mixer.variant for layer in arch.layers if isinstance(layer.mixer, MultiHeadAttention)
    )
    moe = next((layer.mlp for layer in arch.layers if isinstance(layer.mlp, MoeMlp)), None)
    windows = next(iter(footprints.values())).window_tokens if footprints else {}
    return ArchitectureSummary(
        name=arch.name,
        model_type=arch.model_type,
        family=arch.family,
        architecture=arch.architecture,
        multimodal=arch.multimodal,
        num_layers=len(arch.layers),
        layer_kinds=dict(sorted(layer_kinds.items())),
        mlp_kinds=dict(sorted(mlp_kinds.items())),
        attention_variants=dict(sorted(variants.items())),
        hidden_size=arch.hidden_size,
        vocab_size=arch.vocab_size,
        tie_word_embeddings=arch.tie_word_embeddings,
        num_experts=moe.num_experts if moe else 0,
        experts_per_token=moe.experts_per_token if moe else 0,
        parameters_total=counts.total,
        parameters_active=counts.active,
        parameters_active_excluding_embedding=counts.active_excluding_embedding,
        parameters_embedding=counts.embedding,
        parameters_lm_head=counts.lm_head,
        parameters_by_component=counts.by_component(),
        parameters_mtp=counts.mtp,
        mtp_layers=len(arch.mtp_layers),
        kv_bytes_per_token={d: f.bytes_per_token for d, f in footprints.items()},
        kv_bytes_per_token_unbounded={
            d: f.bytes_per_token_unbounded for d, f in footprints.items()
        },
        kv_bytes_per_token_by_kind={d: f.bytes_per_token_by_kind for d, f in footprints.items()},
        window_tokens=dict(windows),
        state_bytes_per_sequence={d: state_bytes_per_sequence(arch, d) for d in state_dtypes},
        weight_dtype=arch.weight_dtype,
        quantization=arch.quantization,
        max_position_embeddings=arch.max_position_embeddings,
        assumptions=arch.assumptions,
    )
