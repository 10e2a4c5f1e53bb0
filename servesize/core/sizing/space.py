"""The candidate deployments of a sizing search: hardware × engine × parallelism × engine knobs.

Every combination of the allowed sets is a :class:`Candidate`; the serving features offered
(``speculative``: draft configurations, ``kv_offload``: host KV tiers, each with ``None`` for
"without") multiply the aggregated candidates, so a plan with a feature and one without are
screened, verified and ranked alike (docs/modeling.md §3.11). With ``disaggregation`` each
parallel layout also appears once as a prefill/decode pair (both pools on the same GPU type and
layout, with the engine's default knobs). The default knob grids are small on purpose (the
search screens every candidate): the token budget at Sarathi's latency-friendly 2048 and vLLM's
throughput default 8192, and the KV cache in the model dtype or fp8.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from servesize.core.hardware import HardwareSpec
from servesize.core.memory import KVOffload
from servesize.core.speculative import SpeculativeDecoding

__all__ = [
    "DEFAULT_KV_CACHE_DTYPES",
    "DEFAULT_MAX_NUM_BATCHED_TOKENS",
    "Candidate",
    "CandidateKind",
    "SearchSpace",
    "enumerate_candidates",
]

CandidateKind = Literal["aggregated", "disaggregated"]
DEFAULT_TENSOR_PARALLEL = (1, 2, 4, 8)
DEFAULT_MAX_NUM_BATCHED_TOKENS: tuple[int | None, ...] = (2048, 8192)
DEFAULT_KV_CACHE_DTYPES = ("auto", "fp8")


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchSpace:
    """What the search may choose from. ``None`` in a knob grid means the engine's default."""

    hardware: tuple[HardwareSpec, ...]
    engines: tuple[str, ...] = ("vllm",)
    tensor_parallel: tuple[int, ...] = DEFAULT_TENSOR_PARALLEL
    pipeline_parallel: tuple[int, ...] = (1,)
    data_parallel: tuple[int, ...] = (1,)
    expert_parallel: tuple[bool, ...] = (False,)
    max_num_seqs: tuple[int | None, ...] = (None,)
    max_num_batched_tokens: tuple[int | None, ...] = DEFAULT_MAX_NUM_BATCHED_TOKENS
    gpu_memory_utilization: tuple[float | None, ...] = (None,)
    kv_cache_dtype: tuple[str, ...] = DEFAULT_KV_CACHE_DTYPES
    max_model_len: tuple[int | None, ...] = (None,)
    speculative: tuple[SpeculativeDecoding | None, ...] = (None,)
    """Speculative decoding configurations to try (``None``: without)."""
    kv_offload: tuple[KVOffload | None, ...] = (None,)
    """Host KV tiers to try (``None``: without)."""
    disaggregation: bool = False
    max_gpus: int | None = None
    """Most GPUs a plan may use in total (all replicas, both pools)."""

    def __post_init__(self) -> None:
        if not self.hardware:
            raise ValueError("hardware: give at least one hardware profile")
        for name in (
            "engines",
            "tensor_parallel",
            "pipeline_parallel",
            "data_parallel",
            "expert_parallel",
            "max_num_seqs",
            "max_num_batched_tokens",
            "gpu_memory_utilization",
            "kv_cache_dtype",
            "max_model_len",
            "speculative",
            "kv_offload",
        ):
            if not getattr(self, name):
                raise ValueError(f"{name}: the allowed set is empty")
        for name in ("tensor_parallel", "pipeline_parallel", "data_parallel"):
            if any(v < 1 for v in getattr(self, name)):
                raise ValueError(f"{name}: sizes must be >= 1")
        if self.max_gpus is not None and self.max_gpus < 1:
            raise ValueError(f"max_gpus must be >= 1, got {self.max_gpus}")
        ids = [h.id for h in self.hardware]
        if len(set(ids)) != len(ids):
            twice = sorted({i for i in ids if ids.count(i) > 1})
            raise ValueError(f"hardware: {', '.join(twice)} listed more than once")

    @property
    def candidate_count(self) -> int:
        """How many candidates :func:`enumerate_candidates` yields: parallel layouts × knob
        settings, plus one disaggregated pair per layout."""
        layouts = math.prod(
            len(getattr(self, name))
            for name in (
                "hardware",
                "engines",
                "tensor_parallel",
                "pipeline_parallel",
                "data_parallel",
                "expert_parallel",
            )
        )
        knobs = math.prod(
            len(getattr(self, name))
            for name in (
                "max_num_seqs",
                "max_num_batched_tokens",
                "gpu_memory_utilization",
                "kv_cache_dtype",
                "max_model_len",
                "speculative",
                "kv_offload",
            )
        )
        return layouts * knobs + (layouts if self.disaggregation else 0)


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """One deployment of one replica (for ``disaggregated``: of each pool's replica)."""

    kind: CandidateKind
    hardware_id: str
    engine: str
    tensor_parallel_size: int
    pipeline_parallel_size: int
    data_parallel_size: int
    enable_expert_parallel: bool
    max_num_seqs: int | None
    max_num_batched_tokens: int | None
    gpu_memory_utilization: float | None
    kv_cache_dtype: str
    max_model_len: int | None
    speculative: SpeculativeDecoding | None = None
    """The draft this candidate speculates with (None: plain decoding)."""
    kv_offload: KVOffload | None = None
    """Its host KV tier (None: none)."""

    @property
    def features(self) -> tuple[str, ...]:
        """The serving features it uses, as label words: ``spec=eagle3/k3/E2.95``,
        ``offload=64GiB`` (SGLang: ``offload=ratio2`` or ``offload=100GB``)."""
        out: list[str] = []
        s = self.speculative
        if s is not None:
            out.append(f"spec={s.method}/k{s.k}/E{s.expected_tokens:.3g}")
        o = self.kv_offload
        if o is not None:
            if o.size_gib is not None:
                size = f"{o.size_gib:g}GiB"
            elif o.hicache_size_gb is not None:
                size = f"{o.hicache_size_gb}GB"
            else:
                size = f"ratio{o.hicache_ratio if o.hicache_ratio is not None else 'default'}"
            out.append(f"offload={size}")
        return tuple(out)

    @property
    def gpus_per_replica(self) -> int:
        """``TP × PP × DP``."""
        return self.tensor_parallel_size * self.pipeline_parallel_size * self.data_parallel_size

    def _parts(self, *, full: bool, engine: bool) -> list[str]:
        """The label's words; without ``full``, PP and DP of 1 and ``max_model_len`` are left
        out and the engine only shown when ``engine``."""
        parts = [self.hardware_id]
        if full or engine:
            parts.append(self.engine)
        parts.append(f"TP{self.tensor_parallel_size}")
        for name, size in (("PP", self.pipeline_parallel_size), ("DP", self.data_parallel_size)):
            if full or size > 1:
                parts.append(f"{name}{size}")
        if self.enable_expert_parallel:
            parts.append("EP")
        knobs: list[tuple[str, float | int | None]] = [
            ("seqs", self.max_num_seqs),
            ("budget", self.max_num_batched_tokens),
            ("mem", self.gpu_memory_utilization),
        ]
        if full:
            knobs.append(("len", self.max_model_len))
        parts.extend(f"{name}={value}" for name, value in knobs if value is not None)
        parts.append(f"kv={self.kv_cache_dtype}")
        parts.extend(self.features)
        if self.kind == "disaggregated":
            parts.append("P/D")
        return parts

    @property
    def label(self) -> str:
        """``h100-sxm vllm TP2 PP1 DP1 ...``: unique within one search."""
        return " ".join(self._parts(full=True, engine=True))

    def brief(self, *, engine: bool = False) -> str:
        """:attr:`label` without what is at its default: the engine unless ``engine``, PP and DP
        of 1, unset knobs; the KV dtype is always shown.

        >>> Candidate(kind="aggregated", hardware_id="h100-sxm", engine="vllm",
        ...           tensor_parallel_size=2, pipeline_parallel_size=1, data_parallel_size=1,
        ...           enable_expert_parallel=False, max_num_seqs=None,
        ...           max_num_batched_tokens=8192, gpu_memory_utilization=None,
        ...           kv_cache_dtype="fp8", max_model_len=4096).brief()
        'h100-sxm TP2 budget=8192 kv=fp8'
        """
        return " ".join(self._parts(full=False, engine=engine))


_Layout = tuple[HardwareSpec, str, int, int, int, bool]
"""Hardware, engine, TP, PP, DP, expert parallelism."""
_Knobs = tuple[int | None, int | None, float | None, str, int | None]
"""max_num_seqs, max_num_batched_tokens, gpu_memory_utilization, kv_cache_dtype, max_model_len."""


_Features = tuple[SpeculativeDecoding | None, KVOffload | None]
"""Speculative decoding, KV offload."""


def _candidate(
    kind: CandidateKind, layout: _Layout, knob: _Knobs, feature: _Features = (None, None)
) -> Candidate:
    hw, engine, tp, pp, dp, ep = layout
    seqs, budget, mem, kv, length = knob
    return Candidate(
        kind=kind,
        hardware_id=hw.id,
        engine=engine,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        data_parallel_size=dp,
        enable_expert_parallel=ep,
        max_num_seqs=seqs,
        max_num_batched_tokens=budget,
        gpu_memory_utilization=mem,
        kv_cache_dtype=kv,
        max_model_len=length,
        speculative=feature[0],
        kv_offload=feature[1],
    )


def enumerate_candidates(space: SearchSpace) -> Iterator[Candidate]:
    """Every combination, aggregated first; disaggregated pairs (one per hardware, engine and
    parallel layout, with the last value of each knob grid: the largest token budget and the
    most compact KV cache of the defaults, without speculation or offload) when
    ``space.disaggregation``."""
    layouts = list(
        itertools.product(
            space.hardware,
            space.engines,
            space.tensor_parallel,
            space.pipeline_parallel,
            space.data_parallel,
            space.expert_parallel,
        )
    )
    knobs = list(
        itertools.product(
            space.max_num_seqs,
            space.max_num_batched_tokens,
            space.gpu_memory_utilization,
            space.kv_cache_dtype,
            space.max_model_len,
        )
    )
    features = list(itertools.product(space.speculative, space.kv_offload))
    for layout, knob, feature in itertools.product(layouts, knobs, features):
        yield _candidate("aggregated", layout, knob, feature)
    if space.disaggregation:
        # One disaggregated pair per layout, with the last knob setting.
        for layout in layouts:
            yield _candidate("disaggregated", layout, knobs[-1])
