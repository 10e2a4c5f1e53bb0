"""The per-GPU operator inventory of a model under tensor, expert and data parallelism.

One decoder layer becomes a handful of GEMMs, one attention operator and (for MoE layers) one
expert block; identical operators of different layers are merged with a multiplicity. Shapes
are per GPU, following Megatron-style sharding as vLLM implements it
(vllm-project/vllm:vllm/model_executor/layers/linear.py, ``models/llama.py``,
``models/deepseek_v2.py``, ``models/qwen3_next.py``):

- column-parallel (output split by TP): ``qkv_proj``, ``gate_up_proj``, ``q_b_proj``,
  ``kv_b_proj``, GDN ``in_proj``, the output head;
- row-parallel (input split by TP): ``o_proj``, ``down_proj``, GDN ``out_proj``;
- replicated: MLA ``q_a_proj`` and ``kv_a_proj_with_mqa``, the MoE router;
- K/V heads are split by TP and replicated when ``H_kv < TP`` (``ceil(H_kv / TP)`` per GPU);
  the MLA latent is replicated on every TP rank.

Experts use ``EP`` ranks, each holding ``E / EP`` experts sharded ``TP·DP / EP`` ways. With
attention data parallelism (``DP > 1``) each DP rank attends to its own ``1/DP`` of the batch
and tokens reach experts by an all-gather of every rank's hidden states and leave by a
reduce-scatter (TensorRT-LLM's CUTLASS MoE); otherwise the MoE output is all-reduced like a
dense MLP's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from servesize.core.architecture import (
    Architecture,
    AttentionKind,
    DenseMlp,
    GatedDeltaNet,
    LatentAttention,
    MambaMixer,
    MoeMlp,
    MultiHeadAttention,
)
from servesize.core.dtypes import bytes_per_element, canonical_dtype

__all__ = [
    "AttentionOp",
    "GemmOp",
    "MoeOp",
    "OperatorInventory",
    "compute_dtype_for",
    "operator_inventory",
]


def compute_dtype_for(weight_dtype: str) -> str:
    """Tensor-core dtype a weight format computes in, before hardware support is checked.

    FP8 checkpoints run W8A8 (``fp8``); FP4 formats run FP4 where the GPU has it (``fp4``,
    the model falls back to ``bf16`` otherwise, as W4A16 kernels do on Hopper); integer and
    16-bit formats run in ``bf16``/``fp16``.

    >>> compute_dtype_for("fp8_e4m3"), compute_dtype_for("mxfp4"), compute_dtype_for("int4")
    ('fp8', 'fp4', 'bf16')
    """
    name = canonical_dtype(weight_dtype)
    if name.startswith("fp8"):
        return "fp8"
    if name in ("fp4", "mxfp4", "nvfp4"):
        return "fp4"
    if name in ("fp16", "fp32"):
        return name
    return "bf16"


@dataclass(frozen=True, slots=True, kw_only=True)
class GemmOp:
    """``layers`` GEMMs of per-GPU shape ``(m, k) @ (k, n)`` per step."""

    name: str
    n: int
    k: int
    layers: int
    weight_bytes_per_element: float
    compute_dtype: str
    per_sequence: bool = False
    """True for the output head, which engines apply to one token per sequence."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AttentionOp:
    """``layers`` token-mixer layers of one kind, per GPU."""

    kind: AttentionKind
    layers: int
    num_heads: int
    """Query heads per GPU."""
    num_kv_heads: int
    """K/V heads per GPU (1 for the MLA latent, 0 for linear attention)."""
    head_dim: int
    window_tokens: int | None
    kv_bytes_per_token: float
    """Cache bytes one token adds to one layer on one GPU."""
    decode_flops_per_pair: float
    """FLOPs per (query, key) pair in decode (MLA: absorbed, latent-space form)."""
    prefill_flops_per_pair: float
    """FLOPs per (query, key) pair in prefill (MLA: decompressed heads)."""
    state_bytes_per_sequence: float = 0.0
    """Linear attention: conv + recurrent state per sequence (read and written each step)."""
    recurrent_flops_per_token: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class MoeOp:
    """``layers`` routed-expert blocks (shared experts and router are GEMMs)."""

    layers: int
    num_experts: int
    experts_per_token: int
    expert_parallel_size: int
    expert_tensor_parallel_size: int
    hidden_size: int
    expert_intermediate_size: int
    gated: bool
    weight_bytes_per_element: float
    compute_dtype: str
    weight_dtype: str

    @property
    def local_experts(self) -> float:
        return self.num_experts / self.expert_parallel_size

    @property
    def params_per_expert_per_gpu(self) -> float:
        """``(3 if gated else 2)·h·I / TP_expert``."""
        matrices = 3 if self.gated else 2
        h, i = self.hidden_size, self.expert_intermediate_size
        return matrices * h * i / self.expert_tensor_parallel_size


@dataclass(frozen=True, slots=True, kw_only=True)
class OperatorInventory:
    """Every operator one step runs on one GPU, plus the communication it needs."""

    model: str
    gemms: tuple[GemmOp, ...]
    attention: tuple[AttentionOp, ...]
    moe: tuple[MoeOp, ...]
    num_layers: int
    hidden_size: int
    activation_bytes: float
    elementwise_bytes_per_token: float
    """Norms, residual adds, activations: bytes per token, all layers, one GPU."""
    tensor_parallel_size: int
    pipeline_parallel_size: int
    data_parallel_size: int
    expert_parallel_size: int
    all_reduces_per_step: int
    """TP all-reduces of ``tokens·h`` activations per step (two per layer when TP > 1)."""
    all_to_alls_per_step: int
    """EP dispatch + combine collectives per step (two per MoE layer when DP > 1 and EP > 1)."""
    all_to_all_bytes_per_token: float
    """Bytes per local token of each of the two MoE collectives under attention data
    parallelism: ``DP·h·a``. TensorRT-LLM's CUTLASS MoE all-gathers every rank's hidden states
    before the experts and reduce-scatters the output after them
    (``tensorrt_llm/_torch/modules/fused_moe/fused_moe_cutlass.py``: ``forward_chunk``,
    ``reducescatter_or_allreduce``), so each GPU's buffer is the whole group's ``T·h·a``, of
    which :func:`~servesize.core.steptime.communication.all_to_all_time_s` moves the
    ``(EP−1)/EP`` share."""
    weight_bytes_per_gpu: float
    kv_bytes_per_token_per_gpu: float
    """Full-attention-equivalent cache bytes per token (before any window cap)."""


def _bytes(dtype: str) -> float:
    return float(bytes_per_element(dtype))


def _kv_heads_per_gpu(num_kv_heads: int, tp: int) -> int:
    return max(1, math.ceil(num_kv_heads / tp))


def operator_inventory(
    arch: Architecture,
    *,
    tensor_parallel_size: int = 1,
    pipeline_parallel_size: int = 1,
    data_parallel_size: int = 1,
    expert_parallel_size: int = 1,
    weight_dtype: str = "bf16",
    expert_weight_dtype: str | None = None,
    kv_dtype: str = "bf16",
    activation_dtype: str = "bf16",
) -> OperatorInventory:
    """The per-GPU operators of one step of ``arch`` (all layers, summed over pipeline stages).

    ``expert_parallel_size`` must divide ``tensor_parallel_size · data_parallel_size``; the
    remaining factor shards each expert. Weight dtypes are canonical names of
    :mod:`servesize.core.dtypes`; the output head stays in ``activation_dtype``.

    >>> from servesize.core.architecture import parse_architecture
    >>> arch = parse_architecture(
    ...     {"model_type": "llama", "hidden_size": 8, "num_hidden_layers": 2, "head_dim": 2,
    ...      "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 16,
    ...      "vocab_size": 10, "tie_word_embeddings": True}, name="toy")
    >>> inv = operator_inventory(arch, tensor_parallel_size=2)
    >>> [(g.name, g.n, g.k) for g in inv.gemms]  # doctest: +NORMALIZE_WHITESPACE
    [('qkv_proj', 8, 8), ('o_proj', 8, 4), ('gate_up_proj', 16, 8), ('down_proj', 8, 8),
     ('lm_head', 5, 8)]
    """
    tp, pp, dp, ep = (
        tensor_parallel_size,
        pipeline_parallel_size,
        data_parallel_size,
        expert_parallel_size,
    )
    for label, value in (("tensor", tp), ("pipeline", pp), ("data", dp), ("expert", ep)):
        if value < 1:
            raise ValueError(f"{label}_parallel_size must be >= 1, got {value}")
    if (tp * dp) % ep:
        raise ValueError(
            f"expert_parallel_size {ep} must divide tensor x data parallel size {tp * dp}"
        )
    if pp > len(arch.layers):
        raise ValueError(f"pipeline_parallel_size {pp} exceeds the {len(arch.layers)} layers")
    w_dtype = canonical_dtype(weight_dtype)
    e_dtype = canonical_dtype(expert_weight_dtype or weight_dtype)
    a_dtype = canonical_dtype(activation_dtype)
    w_b, e_b, a_b, kv_b = _bytes(w_dtype), _bytes(e_dtype), _bytes(a_dtype), _bytes(kv_dtype)
    w_compute, e_compute = compute_dtype_for(w_dtype), compute_dtype_for(e_dtype)
    a_compute = compute_dtype_for(a_dtype)
    h = arch.hidden_size

    gemms: dict[tuple[str, int, int, float, str], int] = {}
    attention: dict[AttentionOp, int] = {}
    moe: dict[tuple[int, int, int, bool], int] = {}
    elementwise = 0.0
    kv_full = 0.0

    def add_gemm(name: str, n: float, k: float, wb: float = w_b, comp: str = w_compute) -> None:
        key = (name, max(1, round(n)), max(1, round(k)), wb, comp)
        gemms[key] = gemms.get(key, 0) + 1

    for layer in arch.layers:
        mixer, mlp = layer.mixer, layer.mlp
        elementwise += 10 * h * a_b  # two norms, two residual adds, rotary: ~10 reads+writes of h
        if isinstance(mixer, MultiHeadAttention):
            d = mixer.head_dim
            kv_heads = _kv_heads_per_gpu(mixer.num_kv_heads, tp)
            q_heads = mixer.num_heads / tp
            gate = 2 if mixer.output_gate else 1
            add_gemm("qkv_proj", q_heads * d * gate + 2 * kv_heads * d, h)
            add_gemm("o_proj", h, q_heads * d)
            kv_token = 2 * kv_heads * d * kv_b
            kv_full += kv_token
            flops = 4 * q_heads * d
            op = AttentionOp(
                kind=mixer.kind,
                layers=0,
                num_heads=round(q_heads),
                num_kv_heads=kv_heads,
                head_dim=d,
                window_tokens=mixer.window_tokens if mixer.kind is not AttentionKind.FULL else None,
                kv_bytes_per_token=kv_token,
                decode_flops_per_pair=flops,
                prefill_flops_per_pair=flops,
            )
        elif isinstance(mixer, LatentAttention):
            n_heads = mixer.num_heads / tp
            qk = mixer.qk_nope_head_dim + mixer.qk_rope_head_dim
            latent = mixer.kv_lora_rank + mixer.qk_rope_head_dim
            if mixer.q_lora_rank is None:
                add_gemm("q_proj", n_heads * qk, h)
            else:
                add_gemm("q_a_proj", mixer.q_lora_rank, h)
                add_gemm("q_b_proj", n_heads * qk, mixer.q_lora_rank)
            add_gemm("kv_a_proj", latent, h)
            add_gemm(
                "kv_b_proj",
                n_heads * (mixer.qk_nope_head_dim + mixer.v_head_dim),
                mixer.kv_lora_rank,
            )
            add_gemm("o_proj", h, n_heads * mixer.v_head_dim)
            kv_token = latent * kv_b
            kv_full += kv_token
            # Absorbed decode: q·[c;k_rope] over the latent (2·(r+d_rope)) and the value
            # product in latent space (2·r), per head; prefill decompresses K and V.
            decode_flops = n_heads * (2 * latent + 2 * mixer.kv_lora_rank)
            prefill_flops = 2 * n_heads * (qk + mixer.v_head_dim)
            op = AttentionOp(
                kind=AttentionKind.MLA,
                layers=0,
                num_heads=round(n_heads),
                num_kv_heads=1,
                head_dim=qk,
                window_tokens=None,
                kv_bytes_per_token=kv_token,
                decode_flops_per_pair=decode_flops,
                prefill_flops_per_pair=prefill_flops,
            )
        elif isinstance(mixer, MambaMixer):
            op = _mamba_op(mixer, tp, h, a_b, add_gemm)
        else:
            assert isinstance(mixer, GatedDeltaNet)
            kw = mixer.num_key_heads * mixer.key_head_dim
            vw = mixer.num_value_heads * mixer.value_head_dim
            add_gemm("in_proj_qkvz", (2 * kw + 2 * vw) / tp, h)
            add_gemm("in_proj_ba", 2 * mixer.num_value_heads / tp, h)
            add_gemm("out_proj", h, vw / tp)
            conv = (mixer.conv_kernel - 1) * mixer.conv_channels
            recurrent = mixer.num_value_heads * mixer.key_head_dim * mixer.value_head_dim
            state = (conv + recurrent) / tp * a_b
            op = AttentionOp(
                kind=AttentionKind.LINEAR,
                layers=0,
                num_heads=round(mixer.num_value_heads / tp),
                num_kv_heads=0,
                head_dim=mixer.value_head_dim,
                window_tokens=None,
                kv_bytes_per_token=0.0,
                decode_flops_per_pair=0.0,
                prefill_flops_per_pair=0.0,
                state_bytes_per_sequence=state,
                recurrent_flops_per_token=6 * recurrent / tp,
            )
        attention[op] = attention.get(op, 0) + 1

        if isinstance(mlp, DenseMlp) and mlp.intermediate_size == 0:
            pass  # a Mamba-only layer (Mamba, Mamba-2, Nemotron-H mixer block): no MLP
        elif isinstance(mlp, DenseMlp):
            width = mlp.intermediate_size / tp
            add_gemm("gate_up_proj" if mlp.gated else "up_proj", width * (2 if mlp.gated else 1), h)
            add_gemm("down_proj", h, width)
            elementwise += 3 * width * a_b
        else:
            assert isinstance(mlp, MoeMlp)
            add_gemm("router", mlp.num_experts, h, a_b, a_compute)
            if mlp.shared_intermediate_size:
                width = mlp.shared_intermediate_size / tp
                add_gemm("shared_gate_up_proj", 2 * width if mlp.gated else width, h)
                add_gemm("shared_down_proj", h, width)
            moe_key = (
                mlp.num_experts,
                mlp.experts_per_token,
                mlp.expert_intermediate_size,
                mlp.gated,
            )
            moe[moe_key] = moe.get(moe_key, 0) + 1

    add_gemm("lm_head", arch.vocab_size / tp, h, a_b, a_compute)

    gemm_ops = tuple(
        GemmOp(
            name=name,
            n=n,
            k=k,
            layers=count,
            weight_bytes_per_element=wb,
            compute_dtype=comp,
            per_sequence=name == "lm_head",
        )
        for (name, n, k, wb, comp), count in gemms.items()
    )
    attention_ops = tuple(replace(op, layers=count) for op, count in attention.items())
    moe_tp = tp * dp // ep
    moe_ops = tuple(
        MoeOp(
            layers=count,
            num_experts=e,
            experts_per_token=k,
            expert_parallel_size=ep,
            expert_tensor_parallel_size=moe_tp,
            hidden_size=h,
            expert_intermediate_size=i,
            gated=gated,
            weight_bytes_per_element=e_b,
            compute_dtype=e_compute,
            weight_dtype=e_dtype,
        )
        for (e, k, i, gated), count in moe.items()
    )
    moe_layers = sum(op.layers for op in moe_ops)
    a2a = 2 * moe_layers if (dp > 1 and ep > 1) else 0
    top_k = max((op.experts_per_token for op in moe_ops), default=0)
    weights = sum(g.n * g.k * g.layers * g.weight_bytes_per_element for g in gemm_ops)
    weights += sum(
        op.layers * op.local_experts * op.params_per_expert_per_gpu * op.weight_bytes_per_element
        for op in moe_ops
    )
    return OperatorInventory(
        model=arch.name,
        gemms=gemm_ops,
        attention=attention_ops,
        moe=moe_ops,
        num_layers=len(arch.layers),
        hidden_size=h,
        activation_bytes=a_b,
        elementwise_bytes_per_token=elementwise,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        data_parallel_size=dp,
        expert_parallel_size=ep,
        all_reduces_per_step=2 * len(arch.layers) if tp > 1 else 0,
        all_to_alls_per_step=a2a,
        all_to_all_bytes_per_token=dp * h * a_b if top_k else 0.0,
        weight_bytes_per_gpu=weights / pp,
        kv_bytes_per_token_per_gpu=kv_full / pp,
    )


def _mamba_op(
    m: MambaMixer,
    tp: int,
    h: int,
    a_b: float,
    add_gemm: Callable[[str, float, float], None],
) -> AttentionOp:
    """GEMMs and the state-pass of one Mamba layer on one TP rank.

    Mamba-2 (vLLM ``MambaMixer2``): ``in_proj`` to ``(2*D_i + 2*G*N + H) / TP`` and
    ``out_proj`` from ``D_i / TP``; Mamba-1 (``MambaMixer``) adds ``x_proj`` (``D_i/TP -> R +
    2N``) and ``dt_proj`` (``R -> D_i/TP``). Per token the scan costs ``6 * D_i * N / TP`` FLOPs
    plus ``2 * C * k / TP`` for the causal conv; decode reads and writes each sequence's conv and
    SSM state once per layer (``state_bytes_per_sequence``, the SSM part in the checkpoint's
    ``mamba_ssm_cache_dtype`` when it names one), prefill does the same once per chunk.
    """
    d_inner = m.d_inner / tp
    if m.version == 2:
        add_gemm("in_proj", (2 * m.d_inner + 2 * m.n_groups * m.d_state + m.num_heads) / tp, h)
    else:
        add_gemm("in_proj", 2 * d_inner, h)
        add_gemm("x_proj", m.dt_rank + 2 * m.d_state, d_inner)
        add_gemm("dt_proj", d_inner, m.dt_rank)
    add_gemm("out_proj", h, d_inner)
    ssm_b = _bytes(m.ssm_state_dtype) if m.ssm_state_dtype else a_b
    conv = (m.conv_kernel - 1) * m.conv_channels / tp
    state = conv * a_b + d_inner * m.d_state * ssm_b
    heads = m.num_heads / tp
    return AttentionOp(
        kind=AttentionKind.MAMBA,
        layers=0,
        num_heads=max(1, round(heads)),
        num_kv_heads=0,
        head_dim=m.head_dim,
        window_tokens=None,
        kv_bytes_per_token=0.0,
        decode_flops_per_pair=0.0,
        prefill_flops_per_pair=0.0,
        state_bytes_per_sequence=state,
        recurrent_flops_per_token=(6 * m.d_inner * m.d_state + 2 * m.conv_channels * m.conv_kernel)
        / tp,
    )
