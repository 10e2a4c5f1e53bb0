"""Weight bytes per GPU, by component, for the pipeline stage a GPU serves.

Each tensor from :mod:`servesize.core.memory.inventory` is priced in its storage format
(:mod:`servesize.core.memory.formats`): quantized linear layers in the checkpoint's format,
everything else in the model dtype. Two load-time extras are added as their own lines:

- the RoPE ``cos_sin_cache`` (``[max_position_embeddings, rotary_dim]`` in the model dtype,
  one instance per worker process; vllm/model_executor/layers/rotary_embedding.py,
  ``get_rope`` caches instances), which vLLM's "Model loading took" includes;
- MLA with a quantized ``kv_b_proj``: ``process_weights_after_loading`` keeps a dequantized
  copy as ``W_UK_T``/``W_UV`` (``get_and_maybe_dequant_weights``, vLLM MLA attention
  backends), ``H/TP · (d_nope + d_v) · kv_lora_rank`` elements per layer in the model dtype;
- MXFP4 experts on vLLM: through Marlin, the padding of ``Mxfp4MoEMethod.create_weights``
  (:mod:`servesize.core.memory.mxfp4`); through Triton, a fitted per (layer x expert) load
  overhead (``MemoryConstants.mxfp4_load_overhead_bytes_per_expert``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache

from servesize.core.architecture import Architecture, LatentAttention, MoeMlp, MultiHeadAttention
from servesize.core.dtypes import bytes_for
from servesize.core.memory.constants import MemoryConstants
from servesize.core.memory.deployment import ResolvedDeployment
from servesize.core.memory.formats import FormatKind, element_text
from servesize.core.memory.inventory import WeightTensor, stage_tensors
from servesize.core.memory.ledger import LineItem
from servesize.core.memory.mxfp4 import marlin_padding_item
from servesize.core.memory.scheme import WeightScheme
from servesize.core.memory.sharding import local_experts

__all__ = ["COMPONENT_TITLES", "WeightLedger", "weight_ledger"]

COMPONENT_TITLES = {
    "embedding": "weights: embedding",
    "lm_head": "weights: lm_head",
    "attention": "weights: attention",
    "mlp_dense": "weights: dense MLP",
    "experts_routed": "weights: routed experts",
    "experts_shared": "weights: shared experts",
    "router": "weights: router",
    "norms": "weights: norms",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class WeightLedger:
    """Weight bytes of one GPU of one pipeline stage."""

    items: tuple[LineItem, ...]
    by_component: dict[str, int]

    @property
    def total_bytes(self) -> int:
        return sum(i.bytes_per_gpu for i in self.items)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Layout:
    """What the weight ledger reads of a resolved deployment, and so its cache key: the
    scheduler and KV knobs (``max_model_len``, ``kv_cache_dtype``, token budget, memory
    fraction) do not change the weights."""

    engine: str
    dtype: str
    weights: WeightScheme
    tensor_parallel_size: int
    pipeline_parallel_size: int
    expert_parallel_size: int
    moe_tensor_parallel_size: int
    enable_expert_parallel: bool
    mxfp4_backend: str | None = None

    @classmethod
    def of(cls, res: ResolvedDeployment) -> _Layout:
        return cls(
            engine=res.engine,
            dtype=res.dtype,
            weights=res.weights,
            tensor_parallel_size=res.tensor_parallel_size,
            pipeline_parallel_size=res.pipeline_parallel_size,
            expert_parallel_size=res.expert_parallel_size,
            moe_tensor_parallel_size=res.moe_tensor_parallel_size,
            enable_expert_parallel=res.enable_expert_parallel,
            mxfp4_backend=res.mxfp4_backend,
        )


def _price(t: WeightTensor, res: _Layout) -> tuple[int, str]:
    """Bytes of ``t`` (all copies) and its formula term."""
    if not t.linear:
        return _price_plain(t.name, t.rows, t.cols, t.copies, t.dtype or res.dtype)
    fmt = res.weights.format_for(t.module, linear=True, expert=t.expert)
    size, formula = fmt.priced(t.rows, t.cols, shards=t.shards)
    return t.copies * size, f"{t.name} ({formula})"


@lru_cache(maxsize=4096)
def _price_plain(name: str, rows: int, cols: int, copies: int, dtype: str) -> tuple[int, str]:
    """A tensor no quantization method touches, in ``dtype`` (memoised: pure)."""
    size = bytes_for(rows * cols * copies, dtype)
    dims = f"{rows}" if cols == 1 else f"{rows}·{cols}"
    return size, f"{name} {dims}·{element_text(dtype)} B"


def _component_formula(terms: dict[tuple[str, int], int], total: int) -> str:
    parts = []
    for (term, copies), count in terms.items():
        scale = f"{count} × " if count > 1 else ""
        experts = f"{copies} experts × " if copies > 1 else ""
        parts.append(f"{scale}{experts}{term}")
    return " + ".join(parts) + f" = {total:,} B"


def _extras(
    arch: Architecture,
    res: _Layout,
    constants: MemoryConstants,
    layers: range,
    tensors: list[WeightTensor],
) -> list[LineItem]:
    items: list[LineItem] = []
    # Jamba and Nemotron-H attention carries no positional encoding (vLLM jamba.py and
    # nemotron_h.py build no rotary embedding), so there is no cos/sin cache.
    nope = arch.family in ("jamba", "nemotron_h")
    if constants.include_rope_cache and arch.max_position_embeddings and not nope:
        rotary = None
        for i in layers:
            mixer = arch.layers[i].mixer
            if isinstance(mixer, MultiHeadAttention):
                rotary = mixer.head_dim
                break
            if isinstance(mixer, LatentAttention):
                rotary = mixer.qk_rope_head_dim
                break
        if rotary:
            positions = arch.max_position_embeddings
            size = bytes_for(positions * rotary, res.dtype)
            items.append(
                LineItem(
                    name="weights: RoPE cos/sin cache",
                    bytes_per_gpu=size,
                    formula=(
                        f"{positions} positions · {rotary} rotary dims · "
                        f"{element_text(res.dtype)} B = {size:,} B"
                    ),
                    category="weights",
                )
            )
    kv_b = [t for t in tensors if t.name == "kv_b_proj"]
    if kv_b:
        fmt = res.weights.format_for(kv_b[0].module, linear=True, expert=False)
        if fmt.kind is not FormatKind.DENSE:
            rows, cols = kv_b[0].rows, kv_b[0].cols
            size = len(kv_b) * bytes_for(rows * cols, res.dtype)
            items.append(
                LineItem(
                    name="weights: MLA W_UK/W_UV (dequantized kv_b_proj)",
                    bytes_per_gpu=size,
                    formula=(
                        f"{len(kv_b)} layers · {rows}·{cols} · {element_text(res.dtype)} B "
                        f"= {size:,} B"
                    ),
                    category="weights",
                )
            )
    quantized = res.weights.quantized
    mxfp4 = res.engine == "vllm" and quantized is not None and quantized.kind is FormatKind.MXFP4
    if mxfp4 and res.mxfp4_backend == "marlin":
        padding = marlin_padding_item(
            arch,
            layers,
            moe_tensor_parallel_size=res.moe_tensor_parallel_size,
            expert_parallel_size=res.expert_parallel_size,
            enable_expert_parallel=res.enable_expert_parallel,
            dtype=res.dtype,
        )
        if padding is not None:
            items.append(padding)
    elif mxfp4 and constants.mxfp4_load_overhead_bytes_per_expert:
        moe_layers = [arch.layers[i].mlp for i in layers if isinstance(arch.layers[i].mlp, MoeMlp)]
        expert_layers = 0
        for mlp in moe_layers:
            assert isinstance(mlp, MoeMlp)
            expert_layers += (
                local_experts(mlp.num_experts, res.expert_parallel_size)
                if res.enable_expert_parallel
                else mlp.num_experts
            )
        if expert_layers:
            per = constants.mxfp4_load_overhead_bytes_per_expert
            size = expert_layers * per
            items.append(
                LineItem(
                    name="weights: MXFP4 load overhead (vLLM)",
                    bytes_per_gpu=size,
                    formula=f"{expert_layers} layer-experts · {per:,} B = {size:,} B",
                    category="weights",
                )
            )
    return items


def weight_ledger(
    arch: Architecture,
    res: ResolvedDeployment,
    constants: MemoryConstants,
    layers: range,
    *,
    first: bool,
    last: bool,
) -> WeightLedger:
    """Weight line items of one GPU on the stage holding ``layers``.

    >>> from servesize.core.architecture import parse_architecture
    >>> from servesize.core.hardware import HardwareSpec
    >>> from servesize.core.memory.deployment import Deployment, resolve_deployment
    >>> from servesize.core.memory.constants import MemoryConstants
    >>> arch = parse_architecture(
    ...     {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
    ...      "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
    ...      "vocab_size": 100, "torch_dtype": "bfloat16"}, name="toy")
    >>> gpu = HardwareSpec(id="g", vendor="x", name="g", memory_bytes=2**30,
    ...                    memory_bandwidth_bytes_per_s=1)
    >>> res = resolve_deployment(arch, gpu, Deployment(max_model_len=64))
    >>> ledger = weight_ledger(arch, res, MemoryConstants(include_rope_cache=False),
    ...                        range(2), first=True, last=True)
    >>> ledger.by_component["embedding"]  # pad64(100) = 128 rows · 64 · 2 B
    16384
    """
    layout = _Layout.of(res)
    try:
        ledger = _cached_ledger(arch, layout, constants, layers, first, last)
    except TypeError:  # an unhashable architecture: price it without the cache
        ledger = _ledger(arch, layout, constants, layers, first, last)
    return WeightLedger(items=ledger.items, by_component=dict(ledger.by_component))


def _ledger(
    arch: Architecture,
    res: _Layout,
    constants: MemoryConstants,
    layers: range,
    first: bool,
    last: bool,
) -> WeightLedger:
    tensors = stage_tensors(arch, res, layers, first=first, last=last)
    sizes: dict[str, int] = defaultdict(int)
    terms: dict[str, dict[tuple[str, int], int]] = defaultdict(lambda: defaultdict(int))
    for t in tensors:
        size, term = _price(t, res)
        sizes[t.component] += size
        terms[t.component][(term, t.copies)] += 1
    items = [
        LineItem(
            name=COMPONENT_TITLES[component],
            bytes_per_gpu=sizes[component],
            formula=_component_formula(terms[component], sizes[component]),
            category="weights",
        )
        for component in COMPONENT_TITLES
        if component in sizes
    ]
    items += _extras(arch, res, constants, layers, tensors)
    return WeightLedger(items=tuple(items), by_component=dict(sizes))


_cached_ledger = lru_cache(maxsize=256)(_ledger)
"""Searches plan one model many times with knobs that leave the weights alone."""
