"""Non-weight, non-KV memory: profile-run activations, CUDA graphs, non-torch, context.

vLLM measures these at start-up (vllm-project/vllm:vllm/v1/worker/gpu_worker.py
``determine_available_memory``, vllm/utils/mem_utils.py ``memory_profiling``):

- **activations** = torch peak increase of ``profile_run``: a forward pass over
  ``max_num_batched_tokens`` tokens split into ``R = min(max_num_seqs, mnbt)`` dummy requests,
  then (last pipeline stage only) the sampler on ``R`` rows of full-vocabulary logits with
  top-k/top-p forced on (vllm/v1/worker/gpu_model_runner.py ``_dummy_sampler_run``). We model
  ``max(A_fwd, c_s · R · pad64(V) + c_h · mnbt · h)``; the sampler term dominates at the
  defaults (``c_s``, ``c_h`` fitted to published vLLM logs), and
  ``A_fwd = mnbt · s · (n_h · h + n_i · I_local)`` bounds large-MLP cases (placeholder copies).
  SGLang is given the same shape with ``R = cuda_graph_max_bs`` decode rows and TensorRT-LLM
  with ``R = cdiv(max_num_tokens, max_model_len)`` dummy context requests (both unverified);
- **CUDA graphs** (unless ``enforce_eager``): sizes from ``_set_cudagraph_sizes``
  (vllm/config/vllm.py): ``[1, 2, 4] + range(8, 256, 8) + range(256, max + 1, 16)`` up to
  ``min(2 · max_num_seqs, 512, mnbt)``; mode ``FULL_AND_PIECEWISE`` captures a piecewise graph
  per size plus a full graph per decode size ``<= max_num_seqs``. Memory is modelled the way
  vLLM >= 0.21 estimates it (``profile_cudagraph_memory``): first graph plus a constant per
  further graph;
- **non-torch** = growth of memory outside PyTorch's allocator during profiling (cuBLAS
  workspaces, NCCL and custom all-reduce buffers);
- **CUDA context**: used before vLLM's snapshot, so outside its budget.
"""

from __future__ import annotations

from dataclasses import dataclass

from servesize.core.architecture import Architecture, DenseMlp, MoeMlp
from servesize.core.dtypes import bytes_for
from servesize.core.memory.constants import MemoryConstants
from servesize.core.memory.deployment import ResolvedDeployment
from servesize.core.memory.engine_defaults import VLLM_V1_VERSION
from servesize.core.memory.ledger import LineItem
from servesize.core.memory.sharding import VOCAB_PADDING
from servesize.core.memory.units import cdiv, gib_text, round_up

__all__ = [
    "activation_item",
    "cuda_context_item",
    "cuda_graph_item",
    "cuda_graph_sizes",
    "non_torch_item",
]


@dataclass(frozen=True, slots=True)
class _Width:
    value: int
    text: str


def _intermediate(arch: Architecture, res: ResolvedDeployment, layers: range) -> _Width:
    best = _Width(0, "0")
    tp = res.tensor_parallel_size
    for i in layers:
        mlp = arch.layers[i].mlp
        if isinstance(mlp, DenseMlp):
            text = f"{mlp.intermediate_size}" + (f"/{tp}" if tp > 1 else "")
            width = _Width(mlp.intermediate_size // tp, text)
        else:
            assert isinstance(mlp, MoeMlp)
            moe_tp = res.moe_tensor_parallel_size
            routed = mlp.experts_per_token * mlp.expert_intermediate_size // moe_tp
            shared = mlp.shared_intermediate_size // tp
            text = f"{mlp.experts_per_token}·{mlp.expert_intermediate_size}" + (
                f"/{moe_tp}" if moe_tp > 1 else ""
            )
            if shared:
                text += f" + {mlp.shared_intermediate_size}" + (f"/{tp}" if tp > 1 else "")
            width = _Width(routed + shared, text)
        if width.value > best.value:
            best = width
    return best


def activation_item(
    arch: Architecture,
    res: ResolvedDeployment,
    constants: MemoryConstants,
    layers: range,
    *,
    last: bool,
) -> LineItem:
    """Peak activation memory of the profile run on a GPU of the stage holding ``layers``."""
    mnbt = res.max_num_batched_tokens
    h = arch.hidden_size
    s = bytes_for(8, res.dtype) // 8
    inter = _intermediate(arch, res, layers)
    n_h, n_i = constants.forward_hidden_copies, constants.forward_intermediate_copies
    forward = int(mnbt * s * (n_h * h + n_i * inter.value))
    fwd_text = f"A_fwd = {mnbt} tokens · {s} B · ({n_h:g}·{h} + {n_i:g}·({inter.text}))"
    if not last:
        return LineItem(
            name="activations: profile-run peak",
            bytes_per_gpu=forward,
            formula=f"{fwd_text} = {forward:,} B (no sampler on this pipeline stage)",
            category="activations",
        )
    if res.engine == "sglang":
        requests = min(res.cuda_graph_max_bs or 1, mnbt)
    elif res.engine == "trtllm":
        requests = cdiv(mnbt, res.max_model_len)
    else:
        requests = min(res.max_num_seqs or mnbt, mnbt)
    vocab = round_up(arch.vocab_size, VOCAB_PADDING)
    c_s, c_h = (
        constants.sampler_bytes_per_request_vocab,
        constants.profile_hidden_bytes_per_token_hidden,
    )
    sampler = int(c_s * requests * vocab + c_h * mnbt * h)
    peak = max(forward, sampler)
    which = "sampler" if sampler >= forward else "forward"
    formula = (
        f"max({fwd_text} = {forward:,} B, A_sampler = {c_s:g} B · {requests} requests · "
        f"{vocab} vocab + {c_h:g} B · {mnbt} tokens · {h} = {sampler:,} B) = {peak:,} B "
        f"({which} dominates)"
    )
    return LineItem(
        name="activations: profile-run peak",
        bytes_per_gpu=peak,
        formula=formula,
        category="activations",
    )


def cuda_graph_sizes(max_num_seqs: int, max_num_batched_tokens: int) -> tuple[int, ...]:
    """Batch sizes vLLM captures (``_set_cudagraph_sizes``, no speculative decoding).

    >>> len(cuda_graph_sizes(1024, 8192)), cuda_graph_sizes(1024, 8192)[-1]
    (51, 512)
    """
    largest = min(max_num_seqs * 2, 512, max_num_batched_tokens)
    candidates = [1, 2, 4, *range(8, 256, 8), *range(256, largest + 1, 16)]
    return tuple(size for size in candidates if size <= largest)


def cuda_graph_item(res: ResolvedDeployment, constants: MemoryConstants) -> LineItem:
    """Estimated CUDA-graph memory (0 with ``enforce_eager``)."""
    if res.enforce_eager:
        return LineItem(
            name="CUDA graphs",
            bytes_per_gpu=0,
            formula="enforce_eager: no graphs are captured",
            category="cuda_graphs",
        )
    if res.engine == "sglang":
        top = res.cuda_graph_max_bs or 0
        sizes: tuple[int, ...] = tuple(
            b
            for b in [
                1,
                2,
                4,
                8,
                12,
                *range(16, 257, 8),
                *range(272, 512, 16),
                *range(512, top + 1, 32),
            ]
            if b <= top
        )
        graphs = len(sizes)
        detail = f"{graphs} decode graphs up to cuda_graph_max_bs {top}"
    elif res.engine == "vllm" and res.version[:2] < VLLM_V1_VERSION:
        # V0 (vllm/worker/model_runner.py _BATCH_SIZES_TO_CAPTURE): [1, 2, 4] + multiples of
        # 8 up to min(max_num_seqs, 256), one full decode graph each.
        top = min(res.max_num_seqs or 256, 256)
        sizes = tuple(b for b in [1, 2, 4, *range(8, 257, 8)] if b <= top)
        graphs = len(sizes)
        detail = f"V0: {graphs} decode graphs up to batch {sizes[-1]}"
    else:
        seqs = res.max_num_seqs or res.max_num_batched_tokens
        sizes = cuda_graph_sizes(seqs, res.max_num_batched_tokens)
        full = sum(1 for size in sizes if size <= seqs)
        graphs = len(sizes) + full
        detail = f"{len(sizes)} piecewise + {full} full graphs (sizes 1..{sizes[-1]})"
    pool, per = constants.cuda_graph_pool_bytes, constants.cuda_graph_bytes_per_graph
    size = pool + max(graphs - 1, 0) * per
    return LineItem(
        name="CUDA graphs",
        bytes_per_gpu=size,
        formula=(
            f"{detail}: first graph {gib_text(pool)} + ({graphs} - 1) · {per:,} B = {size:,} B"
        ),
        category="cuda_graphs",
    )


def non_torch_item(res: ResolvedDeployment, constants: MemoryConstants) -> LineItem:
    """cuBLAS/NCCL/custom all-reduce memory that grows during the profile run."""
    tp, pp = res.tensor_parallel_size, res.pipeline_parallel_size
    base = constants.non_torch_bytes
    if tp >= 4:
        comm, text = constants.comm_buffer_bytes_tp4_plus, f"TP {tp} communication buffers"
    elif tp == 2 or pp > 1:
        comm, text = constants.comm_buffer_bytes_tp2, f"TP {tp}·PP {pp} communication buffers"
    else:
        comm, text = 0, "single GPU: no communication buffers"
    size = base + comm
    return LineItem(
        name="non-torch memory",
        bytes_per_gpu=size,
        formula=f"base {base:,} B + {text} {comm:,} B = {size:,} B",
        category="non_torch",
    )


def cuda_context_item(res: ResolvedDeployment, constants: MemoryConstants) -> LineItem:
    """CUDA context (and communicator init) in use before the engine takes its snapshot."""
    multi = res.tensor_parallel_size * res.pipeline_parallel_size > 1
    size = constants.cuda_context_bytes_multi_gpu if multi else constants.cuda_context_bytes
    where = "with a TP/PP process group" if multi else "single GPU"
    return LineItem(
        name="CUDA context",
        bytes_per_gpu=size,
        formula=f"measured before start-up profiling, {where}: {size:,} B ({gib_text(size)})",
        category="reserve",
    )
