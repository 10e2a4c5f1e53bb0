"""Compile a deployment into a :class:`Replica`: memory plan, step-time model, scheduler, KV link.

Every choice on the way from a deployment to a prediction is made here, once (the policies are
listed in :mod:`servesize.core.replica`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Literal

from servesize.core.architecture import Architecture
from servesize.core.errors import InsufficientMemoryError
from servesize.core.hardware import HardwareSpec
from servesize.core.memory import (
    Deployment,
    HostKVTier,
    MemoryPlan,
    ResolvedDeployment,
    plan_host_tier,
    plan_memory,
)
from servesize.core.replica.errors import MissingInterconnectBandwidthError
from servesize.core.simulation import (
    ENGINE_PREFIX_CACHING,
    TRTLLM_CAPACITY_POLICIES,
    CapacityPolicy,
    HostKVConfig,
    KVTransfer,
    SchedulerConfig,
    SchedulingPolicy,
    engine_capacity_policy,
)
from servesize.core.simulation import engine_scheduler as _engine_scheduler
from servesize.core.speculative import DraftPlan, SpeculativeDecoding, with_draft
from servesize.core.steptime import (
    EngineProfile,
    MeasuredProfile,
    StepTimeModel,
    build_step_model,
    engine_profile,
    simulator_constants,
)

__all__ = [
    "KVLink",
    "PolicySource",
    "Replica",
    "StepModelCache",
    "capacity_policy",
    "compile_replica",
    "kv_transfer",
    "replica_from_plan",
    "scheduler_config",
]

PolicySource = Literal["engine", "request", "chunked_prefill"]
"""Where the scheduling policy came from: the engine's own scheduler at its defaults, the
caller's ``policy``, or the engine's scheduler with chunked prefill turned on."""


@dataclass(frozen=True, slots=True, kw_only=True)
class KVLink:
    """The prefill-to-decode KV hand-off of a disaggregated replica, as the caller gives it.

    ``bandwidth_bytes_per_s`` None: the hardware profile's interconnect (pools in one NVLink
    domain); a profile without one raises :class:`MissingInterconnectBandwidthError`.
    """

    latency_s: float
    bandwidth_bytes_per_s: float | None = None
    first_token_after_transfer: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Replica:
    """One engine replica, compiled: what every planner (Tier A and Tier B) runs on."""

    hardware: HardwareSpec
    memory: MemoryPlan
    step_model: StepTimeModel
    """Step times with the deployment's scheduler limits (one rank's) and the simulator's
    fitted constants, which both tiers use."""
    scheduler: SchedulerConfig
    """The simulated engine: one stands for the data-parallel group, limits and blocks pooled."""
    policy_source: PolicySource
    scheduler_warnings: tuple[str, ...] = ()
    """What the simulated scheduler cannot model (the memory plan's warnings are its own)."""
    kv_transfer: KVTransfer | None = None
    """The KV hand-off when compiled with a :class:`KVLink` (disaggregation), else None."""
    kv_bandwidth_from_hardware: bool = False
    """True when the KV link's bandwidth is the hardware profile's interconnect."""
    draft: DraftPlan | None = None
    """Speculative decoding's sized draft (:mod:`~servesize.core.replica.speculative`)."""

    @property
    def speculative(self) -> SpeculativeDecoding | None:
        return self.draft.spec if self.draft is not None else None

    @property
    def deployment(self) -> ResolvedDeployment:
        return self.memory.deployment

    @property
    def host_kv_tier(self) -> HostKVTier | None:
        """One GPU's host KV tier (docs/modeling.md §1.10), None without KV offload."""
        return host_tier(self.hardware, self.memory)

    @property
    def kv_capacity_tokens(self) -> int:
        """KV tokens of the whole data-parallel group (``memory.kv_capacity_tokens`` is one
        rank's): the pool the simulated scheduler holds, ``kv_blocks · dp`` blocks, and so the
        residency cap Tier A must use to agree with it."""
        return self.memory.kv_capacity_tokens * self.memory.deployment.data_parallel_size

    @property
    def rank_budget_tokens(self) -> int:
        """One rank's token budget per step (``max_num_batched_tokens``)."""
        return self.memory.deployment.max_num_batched_tokens

    def configured(
        self,
        *,
        policy: SchedulingPolicy | None = None,
        chunked_prefill: bool = False,
        kv_link: KVLink | None = None,
    ) -> Replica:
        """The same compiled replica with its scheduler and KV link derived anew from these
        arguments alone (as :func:`compile_replica`'s; no ``kv_link`` means no KV transfer).
        Cheap: the memory plan and the step-time model are kept."""
        scheduler, source, warnings = scheduler_config(
            self.memory, policy=policy, chunked_prefill=chunked_prefill
        )
        scheduler = with_host_kv(scheduler, self.hardware, self.memory)
        transfer, from_hardware = (
            kv_transfer(self.hardware, self.memory, kv_link) if kv_link else (None, False)
        )
        return replace(
            self,
            scheduler=scheduler,
            policy_source=source,
            scheduler_warnings=warnings,
            kv_transfer=transfer,
            kv_bandwidth_from_hardware=from_hardware,
        )


@dataclass(slots=True)
class StepModelCache:
    """Compiled step-time models by layout, for a caller that compiles many replicas of one
    model (sizing): replicas that differ only in scheduler knobs or memory fraction share one
    compiled model. Entries hold their inputs, so the ``id``-based keys stay unique."""

    _models: dict[tuple[object, ...], tuple[StepTimeModel, object, object, object]] = field(
        default_factory=dict
    )

    def __len__(self) -> int:
        return len(self._models)

    def get_or_build(
        self,
        architecture: Architecture,
        hardware: HardwareSpec,
        measurements: MeasuredProfile | None,
        layout: tuple[object, ...],
        build: Callable[[], StepTimeModel],
    ) -> StepTimeModel:
        key = (id(architecture), id(hardware), id(measurements), *layout)
        entry = self._models.get(key)
        if entry is None:
            entry = (build(), architecture, hardware, measurements)
            self._models[key] = entry
        return entry[0]


def _online_weight_dtype(architecture: Architecture, res: ResolvedDeployment) -> str | None:
    """``fp8`` when an unquantized checkpoint is quantized at load time (``--quantization fp8``,
    the only online method :func:`~servesize.core.memory.resolve_weight_scheme` accepts), else
    None (the checkpoint's own dtypes)."""
    return "fp8" if architecture.quantization is None and res.weights.quantized else None


def _max_num_seqs(memory: MemoryPlan) -> int:
    """One rank's running-batch limit: ``max_num_seqs``, or the KV blocks when the engine sizes
    it from the pool (SGLang): a running request holds at least one block."""
    seqs = memory.deployment.max_num_seqs
    return max(seqs if seqs is not None else memory.kv_blocks, 1)


def _step_model(
    architecture: Architecture,
    hardware: HardwareSpec,
    memory: MemoryPlan,
    measurements: MeasuredProfile | None,
    engine: EngineProfile | None,
    calibrated: bool,
    cache: StepModelCache | None,
) -> StepTimeModel:
    res = memory.deployment
    profile = engine if engine is not None else engine_profile(res.engine, calibrated=calibrated)
    weight_dtype = _online_weight_dtype(architecture, res)
    build = partial(
        build_step_model,
        architecture,
        hardware,
        engine=profile,
        tensor_parallel_size=res.tensor_parallel_size,
        pipeline_parallel_size=res.pipeline_parallel_size,
        data_parallel_size=res.data_parallel_size,
        expert_parallel_size=res.expert_parallel_size,
        weight_dtype=weight_dtype,
        kv_dtype=res.kv_cache.element_dtype,
        cuda_graphs=not res.enforce_eager,
        measured=measurements,
        calibrated=calibrated,
    )
    if cache is None:
        base = build()
    else:
        layout = (
            profile,
            res.tensor_parallel_size,
            res.pipeline_parallel_size,
            res.data_parallel_size,
            res.expert_parallel_size,
            weight_dtype,
            res.kv_cache.element_dtype,
            res.enforce_eager,
            calibrated,
        )
        base = cache.get_or_build(architecture, hardware, measurements, layout, build)
    # One set of fitted constants for both tiers: the simulator's (docs/modeling.md §0).
    fitted = base.with_engine(simulator_constants(base.engine))
    limits = replace(
        fitted.engine,
        max_num_batched_tokens=res.max_num_batched_tokens,
        max_num_seqs=_max_num_seqs(memory),
    )
    return replace(fitted, engine=limits)


def scheduler_config(
    memory: MemoryPlan,
    *,
    policy: SchedulingPolicy | None = None,
    chunked_prefill: bool = False,
) -> tuple[SchedulerConfig, PolicySource, tuple[str, ...]]:
    """The simulated engine of a memory plan, where its policy came from, and what it cannot
    model.

    One simulated engine stands for the data-parallel group (the step-time model splits a
    step's work evenly over the ranks): with ``dp`` ranks, ``max_num_batched_tokens · dp``,
    ``max_num_seqs · dp`` and ``kv_blocks · dp``. The policy is ``policy`` when given, else the
    engine's own scheduler (:func:`~servesize.core.simulation.engine_scheduler`); with
    ``chunked_prefill`` a whole-prompt scheduler (``no_chunking``) becomes ``vllm_v1``
    (TensorRT-LLM's ``enable_chunked_prefill: true``). KV admission and eviction are the
    engine's (:func:`capacity_policy`, TensorRT-LLM's ``capacity_scheduler_policy`` as resolved);
    the prefix cache the engine's (``ENGINE_PREFIX_CACHING``) when the deployment has
    ``enable_prefix_caching``, and acting only on traffic with shared prefixes.

    >>> from types import SimpleNamespace as NS
    >>> plan = NS(deployment=NS(data_parallel_size=2, max_num_seqs=None,
    ...           max_num_batched_tokens=8192, engine="trtllm",
    ...           capacity_scheduler_policy="max_utilization", enable_prefix_caching=False),
    ...           kv_blocks=1000, kv_block_size=32)
    >>> config, source, warnings = scheduler_config(plan, chunked_prefill=True)
    >>> config.max_num_batched_tokens, config.max_num_seqs, config.num_kv_blocks, config.policy
    (16384, 2000, 2000, 'vllm_v1')
    >>> config.capacity_policy
    'max_utilization'
    >>> source
    'chunked_prefill'
    """
    if chunked_prefill and policy == "no_chunking":
        raise ValueError("policy 'no_chunking' contradicts chunked_prefill=True")
    res = memory.deployment
    dp = res.data_parallel_size
    warnings: tuple[str, ...] = ()
    if res.max_num_seqs is None:
        warnings = (
            f"{res.engine} sizes its running batch from the KV pool; the simulation bounds it by "
            "KV blocks only",
        )
    source: PolicySource = "request" if policy is not None else "engine"
    chosen = policy if policy is not None else _engine_scheduler(res.engine)
    if chunked_prefill and chosen == "no_chunking":
        chosen, source = "vllm_v1", "chunked_prefill"
    config = SchedulerConfig(
        max_num_batched_tokens=res.max_num_batched_tokens * dp,
        max_num_seqs=_max_num_seqs(memory) * dp,
        block_size_tokens=memory.kv_block_size,
        num_kv_blocks=max(memory.kv_blocks, 1) * dp,
        policy=chosen,
        capacity_policy=capacity_policy(res.engine, res.capacity_scheduler_policy),
        prefix_caching=ENGINE_PREFIX_CACHING[res.engine] if res.enable_prefix_caching else "off",
    )
    return config, source, warnings


def host_tier(hardware: HardwareSpec, memory: MemoryPlan) -> HostKVTier | None:
    """The host KV tier of one GPU of the plan's limiting stage, None without KV offload."""
    res = memory.deployment
    return plan_host_tier(
        res.kv_offload,
        hardware=hardware,
        kv_bytes_per_token_per_gpu=memory.kv_bytes_per_token_per_gpu,
        block_size=memory.kv_block_size,
        device_tokens=memory.kv_capacity_tokens,
        tensor_parallel_size=res.tensor_parallel_size,
        pipeline_parallel_size=res.pipeline_parallel_size,
    )


def with_host_kv(
    scheduler: SchedulerConfig, hardware: HardwareSpec, memory: MemoryPlan
) -> SchedulerConfig:
    """``scheduler`` with the deployment's host KV tier (its blocks pooled over the DP ranks,
    as the device pool's are; a block loads in ``block_load_s`` on each rank's own link)."""
    tier = host_tier(hardware, memory)
    if tier is None or tier.blocks < 1:
        return scheduler
    offload = memory.deployment.kv_offload
    assert offload is not None
    host = HostKVConfig(
        blocks=tier.blocks * memory.deployment.data_parallel_size,
        block_load_s=tier.block_load_s,
        overlap=offload.overlap,
        reload_preempted=offload.reloads_preempted,
    )
    return replace(scheduler, host_kv=host)


def capacity_policy(engine: str, capacity_scheduler_policy: str | None) -> CapacityPolicy:
    """The simulated KV admission and eviction of an engine: TensorRT-LLM's
    ``capacity_scheduler_policy`` as resolved, else the engine's own
    (:func:`~servesize.core.simulation.engine_capacity_policy`).

    >>> capacity_policy("trtllm", "max_utilization"), capacity_policy("trtllm", None)
    ('max_utilization', 'guaranteed_no_evict')
    >>> capacity_policy("sglang", None), capacity_policy("vllm", None)
    ('new_token_ratio', 'incremental')
    """
    if engine == "trtllm" and capacity_scheduler_policy in TRTLLM_CAPACITY_POLICIES:
        return TRTLLM_CAPACITY_POLICIES[TRTLLM_CAPACITY_POLICIES.index(capacity_scheduler_policy)]
    return engine_capacity_policy(engine)


def kv_transfer(
    hardware: HardwareSpec, memory: MemoryPlan, link: KVLink
) -> tuple[KVTransfer, bool]:
    """The KV hand-off ``latency + prompt · kv_bytes_per_token_per_gpu / bandwidth`` (each
    tensor-parallel rank sends its own shard over its own link), and whether the bandwidth is
    the hardware profile's interconnect.

    The bandwidth is the link's, else the profile's interconnect; a profile without one raises
    :class:`MissingInterconnectBandwidthError` (no silent PCIe figure: a caller that means PCIe
    says so with ``bandwidth_bytes_per_s``).
    """
    bandwidth = link.bandwidth_bytes_per_s
    from_hardware = bandwidth is None
    if bandwidth is None:
        interconnect = hardware.interconnect
        bandwidth = interconnect.bandwidth_bytes_per_s if interconnect is not None else None
        if not bandwidth:
            raise MissingInterconnectBandwidthError(hardware.id)
    transfer = KVTransfer(
        latency_s=link.latency_s,
        bandwidth_bytes_per_s=float(bandwidth),
        kv_bytes_per_token=float(memory.kv_bytes_per_token_per_gpu),
        first_token_after_transfer=link.first_token_after_transfer,
    )
    return transfer, from_hardware


def replica_from_plan(
    architecture: Architecture,
    hardware: HardwareSpec,
    memory: MemoryPlan,
    measurements: MeasuredProfile | None = None,
    engine: EngineProfile | None = None,
    *,
    calibrated: bool = True,
    policy: SchedulingPolicy | None = None,
    chunked_prefill: bool = False,
    kv_link: KVLink | None = None,
    step_models: StepModelCache | None = None,
    draft: DraftPlan | None = None,
) -> Replica:
    """:func:`compile_replica` of a plan already made by
    :func:`~servesize.core.memory.plan_memory` for ``architecture`` on ``hardware`` (a caller
    that screens plans first does not plan twice)."""
    if not memory.fits:
        raise InsufficientMemoryError("; ".join(memory.reasons) or "the deployment does not fit")
    step_model = _step_model(
        architecture, hardware, memory, measurements, engine, calibrated, step_models
    )
    scheduler, source, warnings = scheduler_config(
        memory, policy=policy, chunked_prefill=chunked_prefill
    )
    scheduler = with_host_kv(scheduler, hardware, memory)
    transfer, from_hardware = (
        kv_transfer(hardware, memory, kv_link) if kv_link is not None else (None, False)
    )
    return Replica(
        hardware=hardware,
        memory=memory,
        step_model=step_model,
        scheduler=scheduler,
        policy_source=source,
        scheduler_warnings=warnings,
        kv_transfer=transfer,
        kv_bandwidth_from_hardware=from_hardware,
        draft=draft,
    )


def compile_replica(
    architecture: Architecture,
    hardware: HardwareSpec,
    deployment: Deployment,
    measurements: MeasuredProfile | None = None,
    engine: EngineProfile | None = None,
    *,
    calibrated: bool = True,
    policy: SchedulingPolicy | None = None,
    chunked_prefill: bool = False,
    kv_link: KVLink | None = None,
    step_models: StepModelCache | None = None,
    speculative: SpeculativeDecoding | None = None,
) -> Replica:
    """Plan the memory of ``deployment`` and compile the replica it serves.

    ``measurements`` replace roofline defaults for every operator they cover; ``engine`` is the
    serving engine's profile (None: the deployment engine's, fitted unless ``calibrated`` is
    False); ``policy`` overrides the engine's own scheduler and ``chunked_prefill`` turns chunked
    prefill on for one that runs prompts whole; ``kv_link`` adds the KV hand-off of a
    disaggregated pair; ``step_models`` shares compiled step-time models between calls;
    ``speculative`` sizes a draft and adds its memory (:func:`~.speculative.with_draft`).

    Raises :class:`~servesize.core.memory.InvalidDeploymentError` (the deployment cannot be
    served as written), :class:`~servesize.core.errors.InsufficientMemoryError` (it does not
    fit) and :class:`MissingInterconnectBandwidthError` (a KV link of unknown bandwidth).
    """
    draft = None
    if speculative is not None:
        deployment, draft = with_draft(deployment, architecture, speculative)
    memory = plan_memory(architecture, hardware, deployment)
    return replica_from_plan(
        architecture,
        hardware,
        memory,
        measurements,
        engine,
        calibrated=calibrated,
        policy=policy,
        chunked_prefill=chunked_prefill,
        kv_link=kv_link,
        step_models=step_models,
        draft=draft,
    )
