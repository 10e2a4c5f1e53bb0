"""Runtime constants that cannot be derived from a config, with their defaults and sources.

Every field is a named, documented default; a measured hardware or engine profile can replace
any of them by passing ``MemoryConstants(...)`` (or ``dataclasses.replace``) to the planner.
Byte values are ints. ``constants_table`` lists name, value and source for API responses.

Sources, cited as ``owner/repo:path``:

- LDP: llm-d/llm-d-benchmark:config_explorer/empirical-vllm-memory-results.md (vLLM start-up
  logs on H100-80GB, ``vllm serve`` defaults, gpu_memory_utilization 0.9).
- vLLM: vllm-project/vllm:vllm/v1/worker/gpu_worker.py (``determine_available_memory``),
  vllm/utils/mem_utils.py (``memory_profiling``), vllm/v1/worker/gpu_model_runner.py
  (``profile_run``, ``profile_cudagraph_memory``).
- AIC: ai-dynamo/aiconfigurator:aic-core/src/aiconfigurator_core/sdk/backends/base_backend.py
  (``nccl_mem`` per TP from its system YAMLs).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from servesize.core.memory.units import GIB, MIB

__all__ = ["DEFAULT_CONSTANTS", "ConstantRow", "MemoryConstants", "constants_table"]


def _src(text: str) -> dict[str, str]:
    return {"source": text}


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryConstants:
    """Named runtime constants of the memory ledger (all overridable)."""

    device_reserved_fraction: float = field(
        default=0.01025,
        metadata=_src(
            "LDP: CUDA reports 79.18 GiB total on an 80 GiB H100 (1 - 79.18/80); the driver "
            "keeps the rest. Replace with device_total_bytes when measured."
        ),
    )
    """Share of the datasheet memory that ``cudaMemGetInfo`` does not report as total."""
    device_total_bytes: int | None = field(
        default=None,
        metadata=_src("measured cudaMemGetInfo total; None derives it from the datasheet"),
    )
    """Total device memory as CUDA reports it; overrides ``device_reserved_fraction``."""
    cuda_context_bytes: int = field(
        default=round(0.61 * GIB),
        metadata=_src("LDP: 79.18 - 78.57 GiB free at start-up, H100, TP 1"),
    )
    """Memory used before vLLM's start-up snapshot on a single-GPU worker (CUDA context)."""
    cuda_context_bytes_multi_gpu: int = field(
        default=round(1.54 * GIB),
        metadata=_src("LDP: 79.18 - 77.64 GiB free at start-up, H100, TP 2 (context + NCCL)"),
    )
    """The same when the worker joins a TP/PP group (context plus communicator init)."""
    non_torch_bytes: int = field(
        default=round(0.13 * GIB),
        metadata=_src("LDP: 'non-torch memory' 0.13-0.14 GiB at TP 1 (H100, five models)"),
    )
    """Growth of non-torch memory during the profile run at TP 1 (cuBLAS handles etc.)."""
    comm_buffer_bytes_tp2: int = field(
        default=round(0.42 * GIB),
        metadata=_src("LDP: non-torch 0.55 GiB at TP 2 minus 0.13 GiB at TP 1"),
    )
    """Extra non-torch memory of NCCL and custom all-reduce buffers with 2 ranks."""
    comm_buffer_bytes_tp4_plus: int = field(
        default=round(0.48 * GIB),
        metadata=_src(
            "0.42 GiB (TP 2, LDP) scaled by AIC nccl_mem 392 MB (TP 4/8) / 342 MB (TP 2); "
            "unverified"
        ),
    )
    """The same with 4 or more ranks."""
    sampler_bytes_per_request_vocab: float = field(
        default=38.2,
        metadata=_src(
            "fitted to LDP peak activation (Llama-3.1-8B, Llama-3.3-70B TP2, Qwen3-0.6B, "
            "Qwen3-32B, gpt-oss): peak = c * min(max_num_seqs, mnbt) * pad64(V) + "
            "c_h * mnbt * h; leave-one-out error < 0.2 %"
        ),
    )
    """Profile-run sampler bytes per (dummy request x padded vocab entry)."""
    profile_hidden_bytes_per_token_hidden: float = field(
        default=2.7,
        metadata=_src("fitted with sampler_bytes_per_request_vocab (same LDP data)"),
    )
    """Profile-run bytes per (batched token x hidden unit) alive while the sampler runs."""
    forward_hidden_copies: float = field(
        default=3.0,
        metadata=_src(
            "vllm/model_executor/models/llama.py LlamaDecoderLayer/LlamaMLP.forward: when "
            "down_proj allocates its output the residual, the MLP input and that output are "
            "alive (the attention output was folded into the residual by fused_add_rms_norm)"
        ),
    )
    """Hidden-sized activation copies live at the forward peak, in activation dtype."""
    forward_intermediate_copies: float = field(
        default=3.0,
        metadata=_src(
            "same point: gate_up_proj output (2 I, still bound in LlamaMLP.forward) and the "
            "SiluAndMul output (I)"
        ),
    )
    """Intermediate-sized activation copies live at the forward peak."""
    cuda_graph_pool_bytes: int = field(
        default=round(0.15 * GIB),
        metadata=_src(
            "unverified; reported vLLM >= 0.21 estimates 0.17-0.36 GiB (gpustack/runner#251, "
            "TP 4 report), actual captures -0.9..+1.0 GiB (LDP)"
        ),
    )
    """Memory of the first captured CUDA graph (its shared pool)."""
    cuda_graph_bytes_per_graph: int = field(
        default=2 * MIB,
        metadata=_src(
            "unverified; vLLM's estimator floors each extra graph at 1 MiB "
            "(gpu_model_runner.py: max(mem_samples[1], 1 << 20))"
        ),
    )
    """Memory of each further captured graph."""
    allocator_headroom_bytes: int = field(
        default=150 * MIB,
        metadata=_src("vLLM gpu_worker.py: redundancy_buffer_memory = 150 MiB"),
    )
    """Fragmentation headroom the caching allocator needs beyond the profiled peak."""
    mxfp4_load_overhead_bytes_per_expert: int = field(
        default=round(0.83 * MIB),
        metadata=_src(
            "fitted: LDP 'model loading took' 13.47 / 64.38 GiB for gpt-oss-20b / 120b on H100 "
            "vs checkpoint bytes (Triton backend); ~0.8 MiB per (layer x expert); v0.11.0's "
            "Triton branch explains up to 794,880 B of it (fp32 biases, checkpoint scales kept)"
        ),
    )
    """Extra bytes per (MoE layer x local expert) vLLM's Triton MXFP4 backend holds after
    loading (the Marlin backend is priced by its padding, :mod:`servesize.core.memory.mxfp4`)."""
    include_rope_cache: bool = field(
        default=True,
        metadata=_src(
            "vLLM RotaryEmbedding cos_sin_cache [max_position, rotary_dim]; explains the +32 MiB "
            "of Llama-3.1-8B 'model loading took 14.99 GiB' (LDP)"
        ),
    )
    """Count the shared RoPE cos/sin cache among the weights."""
    mamba_blocks_per_request: int = field(
        default=1,
        metadata=_src(
            "vLLM kv_cache_interface.py MambaSpec, mamba_cache_mode 'none' without speculation"
        ),
    )
    """Blocks a linear-attention (Mamba-style) group holds per request."""


DEFAULT_CONSTANTS = MemoryConstants()


@dataclass(frozen=True, slots=True, kw_only=True)
class ConstantRow:
    """One row of the defaults table."""

    name: str
    value: int | float | bool | None
    source: str


def constants_table(constants: MemoryConstants = DEFAULT_CONSTANTS) -> tuple[ConstantRow, ...]:
    """Name, value and source of every constant.

    >>> constants_table()[0].name
    'device_reserved_fraction'
    """
    return tuple(
        ConstantRow(name=f.name, value=getattr(constants, f.name), source=f.metadata["source"])
        for f in fields(constants)
    )
