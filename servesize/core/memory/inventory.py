"""The weight tensors one GPU holds, with their per-GPU shapes (before any byte format).

Shapes follow vLLM's parallel layers (vllm-project/vllm:vllm/model_executor/layers/linear.py,
vocab_parallel_embedding.py, fused_moe/layer.py and the model files llama.py,
deepseek_v2.py, qwen3_next.py, gpt_oss.py), with ``h`` the hidden size:

- column-parallel (``q/k/v_proj``, ``gate/up_proj``, MLA ``q_b_proj``/``kv_b_proj``, delta-net
  ``in_proj_*``): output rows ``/ TP``; K and V keep ``max(1, H_kv // TP)`` heads;
- row-parallel (``o_proj``, ``down_proj``, ``out_proj``): input columns ``/ TP``; their
  biases are replicated;
- replicated: norms, router gates, MLA ``q_a_proj`` and ``kv_a_proj_with_mqa``;
- vocab-parallel embedding and ``lm_head``: ``ceil(pad64(V) / TP)`` rows, on the first and
  last pipeline stage; a tied head costs nothing at ``PP = 1`` and a second copy on the last
  stage otherwise;
- routed experts: ``ceil(E / EP)`` whole experts with expert parallelism, else all ``E`` with
  widths ``/ (TP * DP)``; shared experts follow the dense rule.

Checkpoint names (``model.layers.3.self_attn.q_proj``) are kept so that a quantization
config's ignore list can be matched against them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from servesize.core.architecture import (
    Architecture,
    DecoderLayer,
    DenseMlp,
    GatedDeltaNet,
    LatentAttention,
    MambaMixer,
    MoeMlp,
    MultiHeadAttention,
)
from servesize.core.memory.sharding import kv_heads_per_rank, local_experts, padded_vocab_per_rank

__all__ = ["ShardingView", "WeightTensor", "stage_tensors"]


class ShardingView(Protocol):
    """The parallel layout the weight inventory reads (a ``ResolvedDeployment`` is one)."""

    @property
    def tensor_parallel_size(self) -> int: ...
    @property
    def pipeline_parallel_size(self) -> int: ...
    @property
    def expert_parallel_size(self) -> int: ...
    @property
    def moe_tensor_parallel_size(self) -> int: ...
    @property
    def enable_expert_parallel(self) -> bool: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class WeightTensor:
    """One weight (or a stack of identical expert weights) as stored on one GPU."""

    component: str
    """Ledger component: embedding, lm_head, attention, mlp_dense, experts_routed,
    experts_shared, router or norms."""
    module: str
    """Checkpoint module name, matched against ignore lists."""
    name: str
    """Short name used in formulas (``q_proj``, ``w13``...)."""
    rows: int
    cols: int = 1
    copies: int = 1
    """Identical tensors stacked (local experts)."""
    linear: bool = True
    """A matrix a quantization method may quantize."""
    expert: bool = False
    shards: int = 1
    dtype: str | None = None
    """Fixed dtype (fp32 router score bias); None follows the model dtype or format."""


def _prefixes(arch: Architecture, i: int) -> tuple[str, str, str]:
    m = arch.layers[i].mixer
    mixer = "linear_attn" if isinstance(m, GatedDeltaNet) else "self_attn"
    if isinstance(m, MambaMixer):
        mixer = "mamba" if arch.family in ("jamba", "bamba") else "mixer"
    mlp = {"mixtral": "block_sparse_moe", "llama4": "feed_forward"}.get(arch.family, "mlp")
    base = f"model.layers.{i}"
    return f"{base}.{mixer}", f"{base}.{mlp}", base


def _router_name(arch: Architecture) -> str:
    return {"gpt_oss": "router", "llama4": "router"}.get(arch.family, "gate")


def _mixer(arch: Architecture, layer: DecoderLayer, tp: int) -> list[WeightTensor]:
    h = arch.hidden_size
    pre, _, _ = _prefixes(arch, layer.index)
    m = layer.mixer
    out: list[WeightTensor] = []

    def mat(name: str, rows: int, cols: int, shards: int = 1) -> None:
        out.append(
            WeightTensor(
                component="attention",
                module=f"{pre}.{name}",
                name=name,
                rows=rows,
                cols=cols,
                shards=shards,
            )
        )

    def vec(name: str, size: int, dtype: str | None = None) -> None:
        out.append(
            WeightTensor(
                component="attention",
                module=f"{pre}.{name}",
                name=name,
                rows=size,
                linear=False,
                dtype=dtype,
            )
        )

    if isinstance(m, MultiHeadAttention):
        q_rows = m.num_heads // tp * m.head_dim * (2 if m.output_gate else 1)
        kv_rows = kv_heads_per_rank(m.num_kv_heads, tp) * m.head_dim
        mat("q_proj", q_rows, h)
        mat("k_proj", kv_rows, h)
        mat("v_proj", kv_rows, h)
        mat("o_proj", h, m.num_heads // tp * m.head_dim)
        if m.qkv_bias:
            vec("qkv_proj.bias", q_rows + 2 * kv_rows)
        if m.o_bias:
            vec("o_proj.bias", h)
        if m.qk_norm:
            vec("q_norm+k_norm", 2 * m.head_dim)
        if m.sinks:
            vec("sinks", m.num_heads // tp)
    elif isinstance(m, LatentAttention):
        heads = m.num_heads // tp
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        if m.q_lora_rank is None:
            mat("q_proj", heads * qk, h)
        else:
            mat("q_a_proj", m.q_lora_rank, h)
            vec("q_a_layernorm", m.q_lora_rank)
            mat("q_b_proj", heads * qk, m.q_lora_rank)
        mat("kv_a_proj_with_mqa", m.kv_lora_rank + m.qk_rope_head_dim, h)
        vec("kv_a_layernorm", m.kv_lora_rank)
        mat("kv_b_proj", heads * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank)
        mat("o_proj", h, heads * m.v_head_dim)
    elif isinstance(m, MambaMixer):
        _mamba_tensors(m, tp, h, mat, vec)
    else:
        assert isinstance(m, GatedDeltaNet)
        k_width = m.num_key_heads * m.key_head_dim
        v_width = m.num_value_heads * m.value_head_dim
        mat("in_proj_qkvz", (2 * k_width + 2 * v_width) // tp, h)
        mat("in_proj_ba", 2 * m.num_value_heads // tp, h)
        out.append(
            WeightTensor(
                component="attention",
                module=f"{pre}.conv1d",
                name="conv1d",
                rows=m.conv_channels // tp,
                cols=m.conv_kernel,
                linear=False,
            )
        )
        vec("dt_bias+A_log", 2 * m.num_value_heads // tp)
        vec("norm", m.value_head_dim)
        mat("out_proj", h, v_width // tp)
    return out


def _mamba_tensors(
    m: MambaMixer,
    tp: int,
    h: int,
    mat: Callable[[str, int, int], None],
    vec: Callable[[str, int], None],
) -> None:
    """Mamba weights on one TP rank (vLLM ``MambaMixer2`` / ``MambaMixer``: in_proj, conv1d and
    the per-head vectors column-split, out_proj row-split)."""
    d_inner, n = m.d_inner // tp, m.d_state
    if m.version == 2:
        mat("in_proj", (2 * m.d_inner + 2 * m.n_groups * n + m.num_heads) // tp, h)
        vec("conv1d", m.conv_channels // tp * (m.conv_kernel + int(m.conv_bias)))
        vec("dt_bias+A_log+D+norm", 3 * m.num_heads // tp + d_inner)
    else:
        mat("in_proj", 2 * d_inner, h)
        vec("conv1d", d_inner * (m.conv_kernel + int(m.conv_bias)))
        mat("x_proj", m.dt_rank + 2 * n, d_inner)
        mat("dt_proj", d_inner, m.dt_rank)
        norms = (m.dt_rank + 2 * n) if m.inner_norms else 0
        vec("A_log+D+dt_bias+norms", d_inner * n + 2 * d_inner + norms)
    mat("out_proj", h, d_inner)


def _ffn(
    component: str,
    prefix: str,
    h: int,
    width: int,
    *,
    gated: bool,
    bias: bool,
    copies: int = 1,
    expert: bool = False,
) -> list[WeightTensor]:
    names = ("gate_proj", "up_proj", "down_proj") if not expert else ("w1", "w3", "w2")
    out: list[WeightTensor] = []

    def add(name: str, rows: int, cols: int, linear: bool = True) -> None:
        out.append(
            WeightTensor(
                component=component,
                module=prefix if expert else f"{prefix}.{name}",
                name=name,
                rows=rows,
                cols=cols,
                copies=copies,
                linear=linear,
                expert=expert,
            )
        )

    if gated:
        add(names[0], width, h)
    add(names[1], width, h)
    add(names[2], h, width)
    if bias:
        up_bias = (2 if gated else 1) * width
        add("up_bias" if not expert else "w13_bias", up_bias, 1, linear=False)
        add("down_bias" if not expert else "w2_bias", h, 1, linear=False)
    return out


def _mlp(arch: Architecture, layer: DecoderLayer, res: ShardingView) -> list[WeightTensor]:
    h = arch.hidden_size
    tp = res.tensor_parallel_size
    _, pre, _ = _prefixes(arch, layer.index)
    mlp = layer.mlp
    if isinstance(mlp, DenseMlp) and mlp.intermediate_size == 0:
        return []  # a mixer-only layer (Mamba, Mamba-2, Nemotron-H mixer block)
    if isinstance(mlp, DenseMlp):
        return _ffn(
            "mlp_dense", pre, h, mlp.intermediate_size // tp, gated=mlp.gated, bias=mlp.bias
        )
    assert isinstance(mlp, MoeMlp)
    experts = (
        local_experts(mlp.num_experts, res.expert_parallel_size)
        if res.enable_expert_parallel
        else mlp.num_experts
    )
    width = mlp.expert_intermediate_size // res.moe_tensor_parallel_size
    out = _ffn(
        "experts_routed",
        f"{pre}.experts",
        h,
        width,
        gated=mlp.gated,
        bias=mlp.expert_bias,
        copies=experts,
        expert=True,
    )
    router = f"{pre}.{_router_name(arch)}"
    out.append(
        WeightTensor(
            component="router",
            module=router,
            name="router",
            rows=mlp.num_experts,
            cols=h,
            linear=False,
        )
    )
    if mlp.router_bias:
        out.append(
            WeightTensor(
                component="router",
                module=router,
                name="router.bias",
                rows=mlp.num_experts,
                linear=False,
            )
        )
    if mlp.router_score_bias:
        out.append(
            WeightTensor(
                component="router",
                module=router,
                name="e_score_correction_bias",
                rows=mlp.num_experts,
                linear=False,
                dtype="fp32",
            )
        )
    if mlp.shared_intermediate_size:
        shared = "shared_experts" if arch.family.startswith("deepseek") else "shared_expert"
        out += _ffn(
            "experts_shared",
            f"{pre}.{shared}",
            h,
            mlp.shared_intermediate_size // tp,
            gated=mlp.gated,
            bias=False,
        )
        if mlp.shared_gate:
            out.append(
                WeightTensor(
                    component="router",
                    module=f"{pre}.shared_expert_gate",
                    name="shared_expert_gate",
                    rows=1,
                    cols=h,
                    linear=False,
                )
            )
    return out


def stage_tensors(
    arch: Architecture, res: ShardingView, layers: range, *, first: bool, last: bool
) -> list[WeightTensor]:
    """Every weight tensor of the pipeline stage holding ``layers``, per GPU."""
    tp = res.tensor_parallel_size
    h = arch.hidden_size
    vocab_rows = padded_vocab_per_rank(arch.vocab_size, tp)
    out: list[WeightTensor] = []
    if first:
        out.append(
            WeightTensor(
                component="embedding",
                module="model.embed_tokens",
                name="embed_tokens",
                rows=vocab_rows,
                cols=h,
                linear=False,
            )
        )
    for i in layers:
        layer = arch.layers[i]
        out += _mixer(arch, layer, tp)
        out += _mlp(arch, layer, res)
        _, _, base = _prefixes(arch, i)
        out.append(
            WeightTensor(
                component="norms",
                module=f"{base}.norms",
                name="layer norms",
                rows=layer.norm_params,
                linear=False,
            )
        )
    if last:
        out.append(
            WeightTensor(
                component="norms",
                module="model.norm",
                name="final norm",
                rows=arch.final_norm_params,
                linear=False,
            )
        )
        if not arch.tie_word_embeddings or res.pipeline_parallel_size > 1:
            out.append(
                WeightTensor(
                    component="lm_head",
                    module="lm_head",
                    name="lm_head",
                    rows=vocab_rows,
                    cols=h,
                    linear=False,
                )
            )
    return out
