"""Configuration of a simulated engine replica, client-side overheads and KV transfer."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

SchedulingPolicy = Literal["vllm_v1", "sarathi", "no_chunking", "prefill_first"]
CapacityPolicy = Literal["incremental", "guaranteed_no_evict", "max_utilization", "new_token_ratio"]
"""How a replica admits requests against its KV pool and frees blocks when it runs out
(:mod:`servesize.core.simulation.policies.capacity`): ``incremental`` (vLLM v1: blocks for the
tokens scheduled now, preemption of the newest running request by recompute),
``guaranteed_no_evict`` (TensorRT-LLM's default: a request is admitted only if the blocks of its
whole prompt + output are free after every running request's remaining growth; nothing is
evicted), ``max_utilization`` (TensorRT-LLM: blocks for the next step only; the most recently
started request is paused, its KV freed and its tokens recomputed on resumption),
``new_token_ratio`` (SGLang: a request is admitted if its prompt + output fit beside the running
requests' remaining outputs scaled by an adaptive ratio; on a decode shortage the decodes with
the fewest outputs are retracted to the back of the queue and recomputed)."""
Routing = Literal["round_robin", "random", "least_loaded"]
PrefixCaching = Literal["off", "free_queue_lru", "radix_lru"]
"""Whether a replica reuses cached prefix blocks and how it evicts them
(:mod:`servesize.core.simulation.prefix_cache`): ``free_queue_lru`` (vLLM v1 ``BlockPool``,
TensorRT-LLM block reuse: the least recently freed block is reused first, cached or not),
``radix_lru`` (SGLang ``RadixCache``: cached leaves are evicted, least recently used first, only
when no uncached block is free)."""

ENGINE_PREFIX_CACHING: dict[str, PrefixCaching] = {
    "vllm": "free_queue_lru",
    "sglang": "radix_lru",
    "trtllm": "free_queue_lru",
}
"""Each engine's prefix cache when it is on (``enable_prefix_caching``)."""

ENGINE_SCHEDULERS: dict[str, SchedulingPolicy] = {
    "vllm": "vllm_v1",
    "sglang": "prefill_first",
    "trtllm": "no_chunking",
}
"""Each engine's own scheduler at its defaults: vLLM v1 chunks prompts into steps led by the
running requests; SGLang runs prefill-only steps first unless ``--enable-mixed-chunk``;
TensorRT-LLM's PyTorch flow has ``enable_chunked_prefill = False``."""


ENGINE_CAPACITY_POLICIES: dict[str, CapacityPolicy] = {
    "vllm": "incremental",
    "sglang": "new_token_ratio",
    "trtllm": "guaranteed_no_evict",
}
"""Each engine's KV admission and eviction at its defaults (TensorRT-LLM's
``CapacitySchedulerPolicy.GUARANTEED_NO_EVICT``)."""

SGLANG_INIT_NEW_TOKEN_RATIO = 0.7
"""``global_config.default_init_new_token_ratio`` (``SGLANG_INIT_NEW_TOKEN_RATIO``) times
``schedule_conservativeness`` 1.0: the share of the running requests' remaining output that
admission keeps free, at start (sgl-project/sglang v0.5.1.post1,
``python/sglang/srt/managers/scheduler.py: Scheduler.__init__``)."""
SGLANG_MIN_NEW_TOKEN_RATIO = SGLANG_INIT_NEW_TOKEN_RATIO * 0.14
"""``init_new_token_ratio · default_min_new_token_ratio_factor`` (0.14): the floor it decays to."""
SGLANG_NEW_TOKEN_RATIO_DECAY = (SGLANG_INIT_NEW_TOKEN_RATIO - SGLANG_MIN_NEW_TOKEN_RATIO) / 600
"""``(init - min) / default_new_token_ratio_decay_steps`` (600): decay per decode step."""
SGLANG_RETRACT_DECODE_STEPS = 20
"""``global_config.retract_decode_steps``: decode steps of headroom the ratio is reset to after a
retraction (``ScheduleBatch.retract_decode``)."""
SGLANG_CLIP_MAX_NEW_TOKENS = 4096
"""``CLIP_MAX_NEW_TOKENS_ESTIMATION`` (``SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION``): the most
output tokens admission counts per request (``schedule_policy.py``)."""

TRTLLM_CAPACITY_POLICIES: tuple[CapacityPolicy, ...] = ("guaranteed_no_evict", "max_utilization")
"""TensorRT-LLM's ``capacity_scheduler_policy`` values the simulator models."""


def engine_capacity_policy(engine: str) -> CapacityPolicy:
    """The capacity policy of ``engine`` at its defaults (vLLM's for others).

    >>> engine_capacity_policy("trtllm"), engine_capacity_policy("sglang")
    ('guaranteed_no_evict', 'new_token_ratio')
    """
    return ENGINE_CAPACITY_POLICIES.get(engine, "incremental")


def whole_prompt_overflow(
    policy: SchedulingPolicy,
    prompt_tokens: np.ndarray,
    output_tokens: np.ndarray,
    budget: int,
    capacity: CapacityPolicy = "incremental",
) -> int:
    """Under ``no_chunking``, the tokens of the longest request when they exceed ``budget``
    (an engine refuses such a request), else 0. A request counts its prompt and all but its
    last output token: a request preempted late recomputes them all in one step; under
    ``guaranteed_no_evict``, which never preempts, only its prompt.

    >>> prompt, output = np.array([100, 8000]), np.array([500, 50])
    >>> whole_prompt_overflow("no_chunking", prompt, output, 8192)
    0
    >>> whole_prompt_overflow("no_chunking", prompt, output, 8000)
    8049
    >>> whole_prompt_overflow("no_chunking", prompt, output, 8000, "guaranteed_no_evict")
    0
    >>> whole_prompt_overflow("vllm_v1", prompt, output, 8000)
    0
    """
    if policy != "no_chunking" or prompt_tokens.size == 0:
        return 0
    if capacity == "guaranteed_no_evict":
        longest = int(np.max(prompt_tokens))
    else:
        longest = int(np.max(prompt_tokens + output_tokens - 1))
    return longest if longest > budget else 0


def engine_scheduler(engine: str) -> SchedulingPolicy:
    """The scheduling policy that mirrors ``engine`` at its defaults (vLLM v1 for others).

    >>> engine_scheduler("sglang"), engine_scheduler("trtllm"), engine_scheduler("vllm")
    ('prefill_first', 'no_chunking', 'vllm_v1')
    """
    return ENGINE_SCHEDULERS.get(engine, "vllm_v1")


def _positive_int(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulerConfig:
    """Scheduler and KV-cache settings of one engine replica.

    Attributes
    ----------
    max_num_batched_tokens : int
        Token budget per step (vLLM ``max_num_batched_tokens``; Sarathi ``chunk_size``).
    max_num_seqs : int
        Most requests in the running set (vLLM ``max_num_seqs``).
    block_size_tokens : int
        Tokens per KV block (vLLM ``block_size``, 16 by default).
    num_kv_blocks : int
        KV blocks on the replica (vLLM ``num_gpu_blocks``); a request holds
        ``ceil(tokens in KV / block_size)`` of them.
    policy : {"vllm_v1", "sarathi", "no_chunking", "prefill_first"}
        ``vllm_v1``: running requests first in admission order, each taking
        ``min(remaining, budget left)``; KV allocated per scheduled chunk; on shortage the
        most recently admitted running request is preempted (recompute); no admission in a step
        that preempted (``vllm-project/vllm:vllm/v1/core/sched/scheduler.py: schedule``).
        ``sarathi``: decodes first, then partial prefills, then new requests with
        ``min(remaining, budget - batched)`` tokens; the whole prompt's blocks are allocated at
        admission (``microsoft/sarathi-serve:sarathi/core/scheduler/sarathi_scheduler.py``).
        ``no_chunking``: ``vllm_v1`` with chunked prefill disabled — a waiting request is admitted
        only if its whole prompt fits in the budget left.
        ``prefill_first``: SGLang's scheduler without ``--enable-mixed-chunk`` (its default):
        a step runs prefills only whenever one can run — unfinished prompt chunks first, then
        waiting requests FCFS within the budget (SGLang ``max_prefill_tokens``) — and the
        running decodes wait; otherwise one decode step of every running request, not limited
        by the budget (``sgl-project/sglang:python/sglang/srt/managers/scheduler.py:
        get_next_batch_to_run``). On the decode replica of a disaggregated pair, whose prompts
        arrive as KV, it admits as ``vllm_v1`` does.
    watermark_blocks : int
        Blocks that must stay free after admitting a waiting request (vLLM v0/Sarathi
        ``watermark · num_gpu_blocks``). 0 disables it.
    admit_full_prompt : bool
        ``vllm_v1`` only: admit a waiting request only if the blocks for its *whole* prompt are
        free, not just its first chunk (newer vLLM ``full_sequence_must_fit``). Sarathi always
        checks the full prompt.
    max_waiting_requests : int or None
        Admission control: an arrival that finds this many requests waiting is rejected.
    capacity_policy : {"incremental", "guaranteed_no_evict", "max_utilization", "new_token_ratio"}
        KV admission and eviction (:data:`CapacityPolicy`); ``incremental`` by default, the
        behaviour the policy descriptions above assume. Orthogonal to ``policy``, which forms
        the batch within the budget.
    output_delay_steps : {0, 1}
        1 models an overlap scheduler (TensorRT-LLM's ``PyExecutor._executor_loop_overlap``,
        ``disable_overlap_scheduler = False``): the host launches step ``k + 1`` before it reads
        step ``k``'s samples, so a request only learns it has finished after it has taken part
        in the next step. Modelled as one extra decode per request: the request computes
        ``output + 1`` tokens, its ``j``-th visible token comes out when its ``(j + 1)``-th is
        computed (first token one decode after its prefill), and it leaves — freeing its KV and,
        in a closed loop, letting its client send again — at the end of that extra step.
        Aggregated engines only. 0 (default): tokens come out at the end of the step that
        computed them.
    prefix_caching : {"off", "free_queue_lru", "radix_lru"}
        Prefix cache (:data:`PrefixCaching`); it acts only on a workload that carries shared
        prefixes. ``off`` by default.
    """

    max_num_batched_tokens: int
    max_num_seqs: int
    block_size_tokens: int
    num_kv_blocks: int
    policy: SchedulingPolicy = "vllm_v1"
    watermark_blocks: int = 0
    admit_full_prompt: bool = False
    max_waiting_requests: int | None = None
    output_delay_steps: int = 0
    capacity_policy: CapacityPolicy = "incremental"
    prefix_caching: PrefixCaching = "off"
    host_kv: HostKVConfig | None = None
    """A host-memory KV tier (CPU offload, :mod:`.host_cache`); None: none."""

    def __post_init__(self) -> None:
        _positive_int("max_num_batched_tokens", self.max_num_batched_tokens)
        _positive_int("max_num_seqs", self.max_num_seqs)
        _positive_int("block_size_tokens", self.block_size_tokens)
        _positive_int("num_kv_blocks", self.num_kv_blocks)
        if self.policy not in get_args(SchedulingPolicy):
            raise ValueError(f"unknown policy {self.policy!r}")
        if (
            isinstance(self.watermark_blocks, bool)
            or not isinstance(self.watermark_blocks, int)
            or not 0 <= self.watermark_blocks < self.num_kv_blocks
        ):
            raise ValueError(
                f"watermark_blocks must be an integer in [0, num_kv_blocks), "
                f"got {self.watermark_blocks!r}"
            )
        if self.capacity_policy not in get_args(CapacityPolicy):
            raise ValueError(f"unknown capacity_policy {self.capacity_policy!r}")
        if self.prefix_caching not in get_args(PrefixCaching):
            raise ValueError(f"unknown prefix_caching {self.prefix_caching!r}")
        if self.max_waiting_requests is not None:
            _positive_int("max_waiting_requests", self.max_waiting_requests)
        if isinstance(self.output_delay_steps, bool) or self.output_delay_steps not in (0, 1):
            raise ValueError(f"output_delay_steps must be 0 or 1, got {self.output_delay_steps!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class HostKVConfig:
    """A replica's host-memory KV tier (docs/modeling.md §3.15).

    Attributes
    ----------
    blocks : int
        Host blocks of ``block_size_tokens`` tokens (per GPU, as the device pool counts them).
    block_load_s : float
        Seconds to load one block: its per-GPU bytes over the host link
        (``kv_bytes_per_token_per_gpu · block_size / host_link_bytes_per_s``).
    overlap : bool
        True: the load runs layer by layer under the step's forward pass, which then lasts
        ``max(compute, load)`` (SGLang ``HiCacheController.load``); False: the step waits for it,
        ``compute + load`` (vLLM's request waits for its blocks before it is scheduled).
    reload_preempted : bool
        Whether a preempted request loads its own blocks back instead of recomputing them
        (vLLM 0.14.0 and later; SGLang retracts and recomputes).
    """

    blocks: int
    block_load_s: float
    overlap: bool = False
    reload_preempted: bool = True

    def __post_init__(self) -> None:
        _positive_int("blocks", self.blocks)
        if not (math.isfinite(self.block_load_s) and self.block_load_s >= 0):
            raise ValueError(f"block_load_s must be finite and >= 0, got {self.block_load_s}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientOverheads:
    """Fixed latency outside the engine, added to every client-observed TTFT and E2E.

    The engine is simulated in its own clock (a request enters at its send time); the client sees
    ``TTFT = engine TTFT + total_s`` and ``E2E = engine E2E + total_s``. ITL and TPOT are gaps
    between tokens and are unchanged.

    Attributes
    ----------
    preprocess_s : float
        Tokenisation, validation and routing before the request reaches the engine queue.
    output_processing_s : float
        Detokenisation and streaming of each output chunk.
    network_rtt_s : float
        Client-server round trip (request leg plus response leg).
    """

    preprocess_s: float = 0.0
    output_processing_s: float = 0.0
    network_rtt_s: float = 0.0

    def __post_init__(self) -> None:
        for name in ("preprocess_s", "output_processing_s", "network_rtt_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be finite and >= 0, got {value}")

    @property
    def total_s(self) -> float:
        """``preprocess_s + output_processing_s + network_rtt_s``."""
        return self.preprocess_s + self.output_processing_s + self.network_rtt_s


@dataclass(frozen=True, slots=True, kw_only=True)
class KVTransfer:
    """Prefill-to-decode KV transfer: ``t = latency_s + bytes / bandwidth_bytes_per_s``.

    Bytes per request come from ``kv_bytes`` (a vectorised callable of the prompt lengths) or from
    ``kv_bytes_per_token · prompt_tokens``; exactly one must be given. Pass the per-rank bytes and
    per-rank link bandwidth when TP shards the KV (docs/modeling.md §3.4). Layer-wise overlap can be
    folded in by scaling the bandwidth (Splitwise uses 10x for 90 % overlap).

    Attributes
    ----------
    latency_s : float
        Fixed cost per transfer (handshake, first byte).
    bandwidth_bytes_per_s : float
        Effective link bandwidth.
    kv_bytes_per_token : float or None
        ``2 · layers · kv_heads · head_dim · dtype_bytes`` (per rank).
    kv_bytes : callable or None
        ``prompt_tokens (int64 array) -> bytes (float64 array)``.
    first_token_after_transfer : bool
        False: the client sees the first token when the prefill worker emits it. True: only once
        the KV (and the token) has reached the decode worker.
    """

    latency_s: float
    bandwidth_bytes_per_s: float
    kv_bytes_per_token: float | None = None
    kv_bytes: Callable[[np.ndarray], np.ndarray] | None = None
    first_token_after_transfer: bool = False

    def __post_init__(self) -> None:
        if not (math.isfinite(self.latency_s) and self.latency_s >= 0):
            raise ValueError(f"latency_s must be finite and >= 0, got {self.latency_s}")
        if not (self.bandwidth_bytes_per_s > 0):
            raise ValueError(f"bandwidth_bytes_per_s must be > 0, got {self.bandwidth_bytes_per_s}")
        if (self.kv_bytes_per_token is None) == (self.kv_bytes is None):
            raise ValueError("give exactly one of kv_bytes_per_token and kv_bytes")
        if self.kv_bytes_per_token is not None and not (
            math.isfinite(self.kv_bytes_per_token) and self.kv_bytes_per_token >= 0
        ):
            raise ValueError(f"kv_bytes_per_token must be >= 0, got {self.kv_bytes_per_token}")

    def transfer_time_s(self, prompt_tokens: np.ndarray) -> np.ndarray:
        """Transfer duration per request, ``latency_s + bytes / bandwidth_bytes_per_s``."""
        tokens = np.asarray(prompt_tokens, dtype=np.int64)
        if self.kv_bytes is not None:
            size_bytes = np.asarray(self.kv_bytes(tokens), dtype=np.float64)
            if size_bytes.shape != tokens.shape or np.any(~np.isfinite(size_bytes)):
                raise ValueError("kv_bytes must return one finite size per request")
            if np.any(size_bytes < 0):
                raise ValueError("kv_bytes must return sizes >= 0")
        else:
            assert self.kv_bytes_per_token is not None
            size_bytes = tokens.astype(np.float64) * self.kv_bytes_per_token
        return self.latency_s + size_bytes / self.bandwidth_bytes_per_s
