"""Tier B: an iteration-level simulator of LLM serving engines (docs/modeling.md §3).

One serving-engine replica is stepped batch by batch with vLLM v1 scheduling semantics (token
budget, running requests first, chunked prefill, ``max_num_seqs``, KV-block admission, preemption
by recompute), or Sarathi-style stall-free batching, or without chunking, or SGLang's
prefill-first scheduler (:func:`engine_scheduler` picks an engine's own; one module per policy
in :mod:`.policies`). Replicas sit behind a router; prefill/decode disaggregation adds a KV
transfer between two pools. Step durations come from any vectorised :class:`StepTimeModel`.
The run returns a :class:`SimulationResult` of numpy arrays whose
:meth:`~SimulationResult.summary` gives TTFT, TPOT, ITL, E2E, throughput, goodput, failures and a
stability verdict, following docs/modeling.md §4.

============================  ===================================================================
``simulate``                  one pool of identical replicas, open or closed loop
``simulate_disaggregated``    prefill pool + KV transfer + decode pool
``SchedulerConfig``              budget, ``max_num_seqs``, KV blocks, policy, watermark, admission
``ClientOverheads``           preprocessing, output processing, network RTT (client-side latency)
``KVTransfer``                ``latency + bytes / bandwidth`` per request
``StepTimeModel``             the step-time protocol; ``ConstantStepTime``, ``LinearStepTime``
``SimulationResult``          per-request / per-step arrays, percentiles, summary, time series
``SLO``                       targets for goodput and attainment
============================  ===================================================================
"""

from servesize.core.simulation.config import (
    ENGINE_PREFIX_CACHING,
    TRTLLM_CAPACITY_POLICIES,
    CapacityPolicy,
    ClientOverheads,
    HostKVConfig,
    KVTransfer,
    PrefixCaching,
    Routing,
    SchedulerConfig,
    SchedulingPolicy,
    engine_capacity_policy,
    engine_scheduler,
    whole_prompt_overflow,
)
from servesize.core.simulation.metrics import (
    SLO,
    LatencyStats,
    percentile,
    weighted_percentile,
)
from servesize.core.simulation.result import (
    RequestStatus,
    SimulationResult,
    SimulationSummary,
    TimeSeries,
)
from servesize.core.simulation.simulate import simulate, simulate_disaggregated
from servesize.core.simulation.steptime import ConstantStepTime, LinearStepTime, StepTimeModel

__all__ = [
    "ENGINE_PREFIX_CACHING",
    "SLO",
    "TRTLLM_CAPACITY_POLICIES",
    "CapacityPolicy",
    "ClientOverheads",
    "ConstantStepTime",
    "HostKVConfig",
    "KVTransfer",
    "LatencyStats",
    "LinearStepTime",
    "PrefixCaching",
    "RequestStatus",
    "Routing",
    "SchedulerConfig",
    "SchedulingPolicy",
    "SimulationResult",
    "SimulationSummary",
    "StepTimeModel",
    "TimeSeries",
    "engine_capacity_policy",
    "engine_scheduler",
    "percentile",
    "simulate",
    "simulate_disaggregated",
    "weighted_percentile",
    "whole_prompt_overflow",
]
