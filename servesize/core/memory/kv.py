"""KV-cache bytes per token per GPU, paged blocks and the engine's grouping of hybrid layers.

Per layer and token on one GPU (vllm-project/vllm:vllm/v1/kv_cache_interface.py,
vllm/config/model.py ``get_num_kv_heads`` / ``get_head_size``):

- full, sliding and chunked attention: ``2 · max(1, H_kv // TP) · D · s`` (heads replicated
  when TP exceeds them); MLA: ``(kv_lora_rank + qk_rope_head_dim) · s`` on every TP rank
  (the latent is not split); linear attention: nothing per token, a fixed state per sequence
  (``(k - 1) · C / TP`` conv plus ``H_v / TP · d_k · d_v`` recurrent elements); Mamba-2: a
  fixed state per sequence of ``(k - 1) · (D_i + 2 · G' · N) / TP`` conv and
  ``H / TP · P · N`` SSM elements, ``G' = G + extra_groups_for_head_shards(G, TP)`` (groups
  replicated when TP does not divide them); Mamba-1: ``(k - 1) · D_i / TP`` and
  ``D_i / TP · N`` (vllm/model_executor/layers/mamba/mamba_utils.py
  ``MambaStateShapeCalculator.mamba2_state_shape`` / ``mamba1_state_shape``). The conv state
  uses the model dtype (``mamba_cache_dtype="auto"``), the SSM state the checkpoint's
  ``mamba_ssm_cache_dtype`` when it names one (``MambaStateDtypeCalculator``); each is one
  ``MambaSpec`` page per request (vllm/v1/kv_cache_interface.py).

A vLLM page holds ``block_size`` tokens of one layer. Worst-case blocks one request of ``T``
tokens holds (``max_memory_usage_bytes``): full/MLA ``cdiv(T, bs)``; sliding window ``W``
``cdiv(min(W - 1 + mnbt, T), bs) + 1``; chunked ``C`` ``cdiv(min(C + mnbt, T), bs)``;
linear-attention state one block (``MambaSpec``, mode ``none``).

Hybrid models (vllm/v1/core/kv_cache_utils.py ``_get_kv_cache_groups_uniform_page_size``):
layers of each kind are split into groups of ``group_size = max_n if max_n < 1.5 · min_n else
min_n`` layers (``min_n``/``max_n`` the fewest/most layers of one kind), padding the last
group of a kind. The pool has ``group_size`` tensors of ``num_blocks`` pages, so
``num_blocks = available // page // group_size`` and a request holds the sum of its groups'
blocks. With linear-attention or Mamba layers the attention block size is raised to
``max(bs, 16 · cdiv(state_page, 16 · attention_bytes_per_token))`` tokens so one attention
page covers one state page, and state pages are padded to that page
(vllm/model_executor/models/config.py ``HybridAttentionMambaModelConfig.
verify_and_update_config``, ``mamba_page_size_padded``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from servesize.core.architecture import (
    Architecture,
    AttentionKind,
    LatentAttention,
    MambaMixer,
    Mixer,
    MultiHeadAttention,
)
from servesize.core.dtypes import bytes_for
from servesize.core.memory.kv_format import KvCacheFormat
from servesize.core.memory.sharding import kv_heads_per_rank
from servesize.core.memory.units import cdiv

__all__ = ["KvLayerSpec", "KvLayout", "kv_layer_specs", "kv_layout"]


_STATE_KINDS = frozenset({AttentionKind.LINEAR.value, AttentionKind.MAMBA.value})


@dataclass(frozen=True, slots=True, kw_only=True)
class KvLayerSpec:
    """One kind of cache-holding layer on a GPU, and how many such layers it holds."""

    kind: str
    """``full_attention``, ``sliding_attention``, ``chunked_attention``, ``mla`` or
    ``linear_attention`` or ``mamba``."""
    layers: int
    bytes_per_token: int
    """Per layer, per GPU (0 for linear attention)."""
    formula: str
    """How ``bytes_per_token`` (or ``state_bytes``) was computed, numbers substituted."""
    window_tokens: int | None = None
    state_bytes: int = 0
    """Per layer and sequence, per GPU (linear-attention and Mamba layers only)."""

    def blocks(self, tokens: int, block_size: int, batched_tokens: int, state_blocks: int) -> int:
        """Worst-case blocks one request of ``tokens`` tokens holds in one layer group."""
        if self.kind in _STATE_KINDS:
            return state_blocks
        if self.kind == AttentionKind.SLIDING.value and self.window_tokens is not None:
            held = min(self.window_tokens - 1 + batched_tokens, tokens)
            return cdiv(held, block_size) + 1
        if self.kind == AttentionKind.CHUNKED.value and self.window_tokens is not None:
            return cdiv(min(self.window_tokens + batched_tokens, tokens), block_size)
        return cdiv(tokens, block_size)


@dataclass(frozen=True, slots=True, kw_only=True)
class KvLayout:
    """How one GPU's KV pool is paged and grouped."""

    specs: tuple[KvLayerSpec, ...]
    block_size: int
    """Tokens per block of the attention groups (raised for hybrid linear-attention models)."""
    page_bytes: int
    """Bytes of one block of one layer (every group shares this page size)."""
    group_size: int
    """Layers per group, i.e. tensors in the pool."""
    groups: tuple[int, ...]
    """Number of groups of each entry of ``specs``."""
    padding_layers: int
    batched_tokens: int
    state_blocks: int = 1
    engine_grouping: bool = True
    """False for engines that pool all layers per token (SGLang, TensorRT-LLM)."""

    @property
    def kv_bytes_per_token(self) -> int:
        """Attention bytes one token adds on this GPU while shorter than every window."""
        return sum(s.bytes_per_token * s.layers for s in self.specs)

    @property
    def block_bytes(self) -> int:
        """Pool bytes of one block id: one page in each of ``group_size`` tensors."""
        return self.page_bytes * self.group_size

    def num_blocks(self, available_bytes: int) -> int:
        """``available // page // group_size`` (``get_num_blocks``), never negative."""
        if available_bytes <= 0 or self.page_bytes == 0:
            return 0
        return available_bytes // self.page_bytes // self.group_size

    def blocks_by_spec(self, tokens: int) -> tuple[int, ...]:
        """Worst-case blocks per layer of each entry of ``specs`` for ``tokens`` tokens."""
        return tuple(
            s.blocks(tokens, self.block_size, self.batched_tokens, self.state_blocks)
            for s in self.specs
        )

    def blocks_per_request(self, tokens: int) -> int:
        """Blocks one request of ``tokens`` tokens holds across all its groups."""
        return sum(
            count * spec.blocks(tokens, self.block_size, self.batched_tokens, self.state_blocks)
            for spec, count in zip(self.specs, self.groups, strict=True)
        )

    def request_bytes(self, tokens: int) -> int:
        """Worst-case bytes of one request summed layer by layer, as vLLM's fit check adds
        them (``max_memory_usage_bytes`` over all layers; no group padding)."""
        return sum(
            s.layers
            * s.blocks(tokens, self.block_size, self.batched_tokens, self.state_blocks)
            * self.page_bytes
            for s in self.specs
        )


def _mamba_spec(mixer: MambaMixer, tp: int, state_dtype: str, layers: int) -> KvLayerSpec:
    if mixer.version == 2:
        groups = mixer.n_groups + (0 if mixer.n_groups % tp == 0 else tp - mixer.n_groups)
        channels = (mixer.d_inner + 2 * groups * mixer.d_state) // tp
        heads, head_dim = mixer.num_heads // tp, mixer.head_dim
    else:
        channels = mixer.d_inner // tp
        heads, head_dim = mixer.d_inner // tp, 1
    conv = (mixer.conv_kernel - 1) * channels
    ssm = heads * head_dim * mixer.d_state
    ssm_dtype = mixer.ssm_state_dtype or state_dtype
    state = bytes_for(conv, state_dtype) + bytes_for(ssm, ssm_dtype)
    conv_s = f"{bytes_for(8, state_dtype) / 8:g} B"
    ssm_s = f"{bytes_for(8, ssm_dtype) / 8:g} B"
    dims = (
        f"{heads} · {head_dim} · {mixer.d_state}"
        if mixer.version == 2
        else (f"{heads} · {mixer.d_state}")
    )
    formula = (
        f"{mixer.conv_kernel - 1} · {channels} conv · {conv_s} + {dims} SSM · {ssm_s} = "
        f"{state:,} B per sequence"
    )
    return KvLayerSpec(
        kind=mixer.kind.value, layers=layers, bytes_per_token=0, formula=formula, state_bytes=state
    )


def _spec(
    mixer: Mixer,
    tp: int,
    kv: KvCacheFormat,
    state_dtype: str,
    layers: int,
) -> KvLayerSpec:
    if isinstance(mixer, MultiHeadAttention):
        heads = kv_heads_per_rank(mixer.num_kv_heads, tp)
        size = kv.mha_bytes(kv_heads=heads, head_dim=mixer.head_dim)
        formula = f"{kv.mha_formula(kv_heads=heads, head_dim=mixer.head_dim)} = {size:,} B"
        return KvLayerSpec(
            kind=mixer.kind.value,
            layers=layers,
            bytes_per_token=size,
            formula=formula,
            window_tokens=mixer.window_tokens,
        )
    if isinstance(mixer, LatentAttention):
        size = kv.mla_bytes(kv_lora_rank=mixer.kv_lora_rank, rope_dim=mixer.qk_rope_head_dim)
        text = kv.mla_formula(kv_lora_rank=mixer.kv_lora_rank, rope_dim=mixer.qk_rope_head_dim)
        return KvLayerSpec(
            kind=mixer.kind.value,
            layers=layers,
            bytes_per_token=size,
            formula=f"{text} = {size:,} B (same on every TP rank)",
        )
    if isinstance(mixer, MambaMixer):
        return _mamba_spec(mixer, tp, state_dtype, layers)
    conv = (mixer.conv_kernel - 1) * (mixer.conv_channels // tp)
    recurrent = mixer.num_value_heads // tp * mixer.key_head_dim * mixer.value_head_dim
    state = bytes_for(conv, state_dtype) + bytes_for(recurrent, state_dtype)
    s = f"{bytes_for(8, state_dtype) / 8:g} B"
    formula = (
        f"({mixer.conv_kernel - 1} · {mixer.conv_channels // tp} conv + "
        f"{mixer.num_value_heads // tp} · {mixer.key_head_dim} · {mixer.value_head_dim} "
        f"state) · {s} = {state:,} B per sequence"
    )
    return KvLayerSpec(
        kind=mixer.kind.value, layers=layers, bytes_per_token=0, formula=formula, state_bytes=state
    )


def kv_layer_specs(
    arch: Architecture, layers: range, tp: int, kv: KvCacheFormat, state_dtype: str
) -> tuple[KvLayerSpec, ...]:
    """Cache-holding layer kinds among ``layers``, with their per-GPU sizes."""
    counts: Counter[Mixer] = Counter(arch.layers[i].mixer for i in layers)
    return tuple(_spec(mixer, tp, kv, state_dtype, n) for mixer, n in counts.items())


def kv_layout(
    specs: tuple[KvLayerSpec, ...],
    *,
    block_size: int,
    batched_tokens: int,
    state_blocks: int = 1,
    hybrid_grouping: bool = True,
) -> KvLayout:
    """Page and group the cache layers of one GPU.

    With ``hybrid_grouping`` off (SGLang, TensorRT-LLM, or vLLM with the hybrid manager
    disabled) every attention layer is pooled per token as full attention.

    >>> spec = KvLayerSpec(kind="full_attention", layers=32, bytes_per_token=4096, formula="")
    >>> layout = kv_layout((spec,), block_size=16, batched_tokens=8192)
    >>> layout.page_bytes, layout.group_size, layout.blocks_per_request(4097)
    (65536, 32, 257)
    """
    if not hybrid_grouping:
        attention = [s for s in specs if s.bytes_per_token]
        per_token = sum(s.bytes_per_token * s.layers for s in attention)
        merged = KvLayerSpec(
            kind=AttentionKind.FULL.value,
            layers=1,
            bytes_per_token=per_token,
            formula=" + ".join(f"{s.layers} · {s.bytes_per_token:,} B" for s in attention)
            + f" = {per_token:,} B per token (all layers pooled)",
        )
        return KvLayout(
            specs=(merged,),
            block_size=block_size,
            page_bytes=block_size * per_token,
            group_size=1,
            groups=(1,),
            padding_layers=0,
            batched_tokens=batched_tokens,
            state_blocks=state_blocks,
            engine_grouping=False,
        )
    specs = tuple(s for s in specs if s.layers)
    attention = [s for s in specs if s.bytes_per_token]
    states = [s for s in specs if s.state_bytes]
    bs = block_size
    if attention and states:
        per_token = max(s.bytes_per_token for s in attention)
        state_page = max(s.state_bytes for s in states)
        # HybridAttentionMambaModelConfig.verify_and_update_config: the attention block grows
        # to 16 * cdiv(mamba_page, 16 * attention_page_1_token) unless already larger.
        bs = max(block_size, 16 * cdiv(state_page, 16 * per_token))
    page = max([bs * s.bytes_per_token for s in attention] + [s.state_bytes for s in states] + [0])
    if len(specs) == 1:
        only = specs[0]
        return KvLayout(
            specs=specs,
            block_size=bs,
            page_bytes=page,
            group_size=only.layers,
            groups=(1,),
            padding_layers=0,
            batched_tokens=batched_tokens,
            state_blocks=state_blocks,
        )
    fewest = min(s.layers for s in specs)
    most = max(s.layers for s in specs)
    group_size = most if most < 1.5 * fewest else fewest
    groups = tuple(cdiv(s.layers, group_size) for s in specs)
    padding = sum(n * group_size for n in groups) - sum(s.layers for s in specs)
    return KvLayout(
        specs=specs,
        block_size=bs,
        page_bytes=page,
        group_size=group_size,
        groups=groups,
        padding_layers=padding,
        batched_tokens=batched_tokens,
        state_blocks=state_blocks,
    )
