"""Run a compiled :class:`~servesize.core.replica.Replica` through the simulator (Tier B)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from servesize.core.replica.compile import Replica
from servesize.core.replica.errors import (
    RequestTooLongError,
    SimulationTooLargeError,
    WholePromptOverflowError,
)
from servesize.core.replica.speculative import (
    SpeculativeStepTime,
    restore_tokens,
    speculative_workload,
)
from servesize.core.simulation import (
    ClientOverheads,
    KVTransfer,
    Routing,
    SchedulerConfig,
    SimulationResult,
    simulate,
    simulate_disaggregated,
    whole_prompt_overflow,
)
from servesize.core.simulation import StepTimeModel as SimStepTime
from servesize.core.simulation.adapters import steptime_adapter
from servesize.core.steptime import StepTimeModel, simulator_constants
from servesize.core.traffic import Workload

__all__ = [
    "MAX_PREFILL_STEPS",
    "DisaggregatedPools",
    "Progress",
    "ReplicaRun",
    "check_workload",
    "simulate_replica",
    "simulator_step_model",
]

Progress = Callable[[int, int], None]
"""``progress(finished_requests, total_requests)``, called as the run advances."""

MAX_PREFILL_STEPS = 2_000_000
"""Most prefill steps one run may need (prompt tokens over the token budget): a tiny budget
multiplies the scheduler's work per request."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DisaggregatedPools:
    """A prefill pool and a decode pool of one compiled replica each (the replica's KV link
    joins them); requests reach the prefill pool by the run's ``routing``."""

    prefill_replicas: int = 1
    decode_replicas: int = 1
    decode_routing: Routing = "least_loaded"


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaRun:
    """One simulated run and what it was given."""

    result: SimulationResult
    scheduler: SchedulerConfig
    replicas: int
    """Replicas simulated (both pools together when disaggregated)."""
    overheads: ClientOverheads
    overheads_from_profile: bool
    """True when no overheads were given and the profile's ``request_overhead_s`` stands in."""
    warnings: tuple[str, ...]
    """The memory plan's and the scheduler's."""
    transfer: KVTransfer | None = None


def simulator_step_model(replica: Replica) -> StepTimeModel:
    """The step-time model under the constants fitted through the simulator
    (:func:`~servesize.core.steptime.simulator_constants`): the steady-state ones absorb
    queueing that a simulation produces itself."""
    model = replica.step_model
    return model.with_engine(simulator_constants(model.engine))


def check_workload(replica: Replica, workload: Workload) -> None:
    """Refuse a run the engine (or one simulation) cannot take, in this order:

    1. a request longer than ``max_model_len`` (prompt plus output): :class:`RequestTooLongError`;
    2. prompts needing over :data:`MAX_PREFILL_STEPS` steps (``Σ prompt / budget``, the pooled
       budget): :class:`SimulationTooLargeError`;
    3. under a whole-prompt scheduler, a request of more than one *rank's* budget
       (:func:`~servesize.core.simulation.whole_prompt_overflow`):
       :class:`WholePromptOverflowError`. It is never switched to chunking silently; a caller
       that wants chunked prefill compiles with ``chunked_prefill=True``.
    """
    prompt, output = workload.prompt_tokens, workload.output_tokens
    context = replica.memory.max_model_len
    total = prompt + output
    over = np.flatnonzero(total > context)
    if over.size:
        raise RequestTooLongError(int(over.size), int(over[0]), int(np.max(total)), context)
    scheduler = replica.scheduler
    steps = float(np.sum(prompt)) / scheduler.max_num_batched_tokens
    if steps > MAX_PREFILL_STEPS:
        raise SimulationTooLargeError(steps, scheduler.max_num_batched_tokens, MAX_PREFILL_STEPS)
    budget = replica.rank_budget_tokens
    longest = whole_prompt_overflow(
        scheduler.policy, prompt, output, budget, scheduler.capacity_policy
    )
    if longest:
        raise WholePromptOverflowError(longest, budget, explicit=replica.policy_source == "request")


def simulate_replica(
    replica: Replica,
    workload: Workload,
    *,
    replicas: int = 1,
    routing: Routing = "round_robin",
    routing_rng: np.random.Generator | None = None,
    overheads: ClientOverheads | None = None,
    pools: DisaggregatedPools | None = None,
    progress: Progress | None = None,
) -> ReplicaRun:
    """Simulate ``replicas`` copies of ``replica`` behind ``routing`` under ``workload``, or
    with ``pools`` a disaggregated prefill pool and decode pool joined by the replica's KV link.

    The workload is checked first (:func:`check_workload`). Steps are costed by
    :func:`simulator_step_model`; without ``overheads`` the profile's ``request_overhead_s`` is
    the client-side preprocessing.
    """
    check_workload(replica, workload)
    step_model = simulator_step_model(replica)
    from_profile = overheads is None
    if overheads is None:
        overheads = ClientOverheads(preprocess_s=step_model.engine.request_overhead_s)
    step_time: SimStepTime = steptime_adapter(step_model)
    original = workload
    if replica.draft is not None:  # one simulated output per verification step (§3.17)
        step_time = SpeculativeStepTime(step_time, step_model, replica.draft)
        workload = speculative_workload(workload, replica.draft.spec)
    scheduler = replica.scheduler
    if pools is None:
        result = simulate(
            workload,
            scheduler,
            step_time,
            replicas=replicas,
            routing=routing,
            routing_rng=routing_rng,
            overheads=overheads,
            progress=progress,
        )
    else:
        if replica.kv_transfer is None:
            raise ValueError("a disaggregated run needs a replica compiled with a kv_link")
        replicas = pools.prefill_replicas + pools.decode_replicas
        result = simulate_disaggregated(
            workload,
            prefill=scheduler,
            decode=scheduler,
            prefill_step_time=step_time,
            decode_step_time=step_time,
            transfer=replica.kv_transfer,
            prefill_replicas=pools.prefill_replicas,
            decode_replicas=pools.decode_replicas,
            prefill_routing=routing,
            decode_routing=pools.decode_routing,
            routing_rng=routing_rng,
            overheads=overheads,
            progress=progress,
        )
    if replica.draft is not None:
        result = restore_tokens(result, original, replica.draft.spec)
    return ReplicaRun(
        result=result,
        scheduler=scheduler,
        replicas=replicas,
        overheads=overheads,
        overheads_from_profile=from_profile,
        warnings=(*replica.memory.warnings, *replica.scheduler_warnings),
        transfer=replica.kv_transfer if pools is not None else None,
    )
