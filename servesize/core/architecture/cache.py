"""KV-cache and recurrent-state bytes, whole model, before any parallelism.

Per layer and token, with ``s`` the bytes per element of the cache dtype:

- full / sliding / chunked attention: ``2 * H_kv * D * s`` (K and V). Sliding and chunked layers
  stop growing at ``window_tokens``, so a sequence of ``n`` tokens holds
  ``min(n, window_tokens)`` of them;
- MLA: ``(kv_lora_rank + qk_rope_head_dim) * s`` — the compressed latent and the shared
  rotary key, which is what vLLM caches for DeepSeek-V2/V3
  (vllm-project/vllm:vllm/model_executor/models/deepseek_v2.py; the ``fp8_ds_mla`` layout
  with its per-tile scales is not modelled);
- gated delta-net: nothing per token; per sequence a conv state of
  ``(conv_kernel - 1) * (2*H_k*d_k + H_v*d_v)`` elements and a recurrent state of
  ``H_v * d_k * d_v`` elements, as sized by
  ``MambaStateShapeCalculator.gated_delta_net_state_shape`` in
  vllm-project/vllm:vllm/model_executor/layers/mamba/mamba_utils.py. The two may use
  different dtypes (vLLM ``mamba_cache_dtype`` / ``mamba_ssm_cache_dtype``);
- Mamba-2: per sequence a conv state of ``(d_conv - 1) * (D_i + 2*G*N)`` elements and an SSM
  state of ``H * P * N`` (``MambaStateShapeCalculator.mamba2_state_shape``); Mamba-1 (Jamba):
  ``(d_conv - 1) * D_i`` and ``D_i * N`` (``mamba1_state_shape``).

Totals are summed in elements per dtype and rounded up to whole bytes once.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from servesize.core.architecture.model import (
    Architecture,
    AttentionKind,
    GatedDeltaNet,
    LatentAttention,
    MambaMixer,
    Mixer,
    MultiHeadAttention,
)
from servesize.core.dtypes import bytes_for

__all__ = [
    "KvFootprint",
    "kv_bytes_per_sequence",
    "kv_elements_per_token",
    "kv_footprint",
    "state_bytes_per_sequence",
    "state_elements_per_sequence",
]


def kv_elements_per_token(mixer: Mixer) -> int:
    """Cache elements one token adds to one layer (0 for linear-attention layers)."""
    if isinstance(mixer, MultiHeadAttention):
        return 2 * mixer.num_kv_heads * mixer.head_dim
    if isinstance(mixer, LatentAttention):
        return mixer.kv_lora_rank + mixer.qk_rope_head_dim
    return 0


def state_elements_per_sequence(mixer: Mixer) -> tuple[int, int]:
    """``(conv, recurrent)`` state elements a sequence holds in one layer, whatever its length."""
    if isinstance(mixer, GatedDeltaNet):
        conv = (mixer.conv_kernel - 1) * mixer.conv_channels
        recurrent = mixer.num_value_heads * mixer.key_head_dim * mixer.value_head_dim
        return conv, recurrent
    if isinstance(mixer, MambaMixer):
        return (mixer.conv_kernel - 1) * mixer.conv_channels, mixer.d_inner * mixer.d_state
    return 0, 0


@dataclass(frozen=True, slots=True, kw_only=True)
class KvFootprint:
    """Per-token cache bytes of the whole model for one cache dtype."""

    kv_dtype: str
    bytes_per_token: int
    """All attention layers, as long as the context is shorter than every window."""
    bytes_per_token_by_kind: dict[str, int] = field(default_factory=dict)
    """Per layer kind (``full_attention``, ``sliding_attention``, ``mla``, ...), summed over
    the layers of that kind."""
    bytes_per_token_unbounded: int = 0
    """Layers whose cache never stops growing (full attention and MLA): the cost of each token
    past the largest window."""
    window_tokens: dict[str, int] = field(default_factory=dict)
    """Window of each windowed kind (``sliding_attention``, ``chunked_attention``)."""


def kv_footprint(arch: Architecture, kv_dtype: str) -> KvFootprint:
    """KV bytes per token of ``arch`` with a cache of ``kv_dtype`` (canonical or alias name).

    >>> from servesize.core.architecture.parse import parse_architecture
    >>> arch = parse_architecture(
    ...     {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
    ...      "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
    ...      "vocab_size": 128256}, name="llama-3.1-8b")
    >>> kv_footprint(arch, "bf16").bytes_per_token  # 2 * 8 * 128 * 2 bytes * 32 layers
    131072
    """
    elements: Counter[str] = Counter()
    windows: dict[str, int] = {}
    for layer in arch.layers:
        kind = layer.mixer.kind.value
        per_token = kv_elements_per_token(layer.mixer)
        if per_token:
            elements[kind] += per_token
        window = _window(layer.mixer)
        if window is not None:
            windows[kind] = max(windows.get(kind, 0), window)
    unbounded = sum(
        n for kind, n in elements.items() if kind in (AttentionKind.FULL, AttentionKind.MLA)
    )
    return KvFootprint(
        kv_dtype=kv_dtype,
        bytes_per_token=bytes_for(sum(elements.values()), kv_dtype),
        bytes_per_token_by_kind={k: bytes_for(n, kv_dtype) for k, n in sorted(elements.items())},
        bytes_per_token_unbounded=bytes_for(unbounded, kv_dtype),
        window_tokens=windows,
    )


def _window(mixer: Mixer) -> int | None:
    if isinstance(mixer, MultiHeadAttention) and mixer.kind in (
        AttentionKind.SLIDING,
        AttentionKind.CHUNKED,
    ):
        return mixer.window_tokens
    return None


def state_bytes_per_sequence(
    arch: Architecture, conv_dtype: str, recurrent_dtype: str | None = None
) -> int:
    """Fixed recurrent-state bytes one sequence holds across all linear-attention layers.

    ``recurrent_dtype`` defaults to the dtype a Mamba layer's checkpoint asks for
    (``mamba_ssm_cache_dtype`` in its config), else to ``conv_dtype`` (vLLM's
    ``mamba_ssm_cache_dtype="auto"``, ``MambaStateDtypeCalculator``).
    """
    conv = 0
    recurrent: Counter[str] = Counter()
    for layer in arch.layers:
        c, r = state_elements_per_sequence(layer.mixer)
        conv += c
        own = layer.mixer.ssm_state_dtype if isinstance(layer.mixer, MambaMixer) else None
        recurrent[recurrent_dtype or own or conv_dtype] += r
    return bytes_for(conv, conv_dtype) + sum(bytes_for(n, d) for d, n in recurrent.items())


def kv_bytes_per_sequence(
    arch: Architecture,
    context_tokens: int,
    kv_dtype: str,
    state_dtype: str | None = None,
) -> int:
    """Cache bytes of one sequence of ``context_tokens`` tokens: KV (windows applied) + state.

    ``state_dtype`` defaults to the model's weight dtype.
    """
    if context_tokens < 0:
        raise ValueError(f"context_tokens must be >= 0, got {context_tokens}")
    elements = 0
    for layer in arch.layers:
        window = _window(layer.mixer)
        held = context_tokens if window is None else min(context_tokens, window)
        elements += held * kv_elements_per_token(layer.mixer)
    state = state_bytes_per_sequence(arch, state_dtype or arch.weight_dtype)
    return bytes_for(elements, kv_dtype) + state
