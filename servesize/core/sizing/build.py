"""The per-candidate build: a candidate's memory plan, its step-time model with the plan's
scheduler limits, the simulated scheduler and the KV transfer between disaggregated pools.

:func:`plan_candidate` prunes what cannot run before any model is built (over the GPU limit,
expert parallelism on a dense model, a deployment the engine refuses, a context shorter than
the longest request, weights that do not fit), each with its reason. The step-time model of
one layout is shared by every knob setting of it (:class:`StepModelCache`); a builder raises
:class:`~servesize.core.errors.UnsupportedDeploymentError` for a deployment it cannot run, and
any other error propagates as the bug it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from servesize.core.hardware import HardwareSpec
from servesize.core.memory import Deployment, InvalidDeploymentError, MemoryPlan, plan_memory
from servesize.core.simulation import KVTransfer, SchedulerConfig, engine_scheduler
from servesize.core.sizing.inputs import SizingInputs
from servesize.core.sizing.result import Rejection
from servesize.core.sizing.space import Candidate
from servesize.core.steptime import StepTimeModel, build_step_model, engine_profile

__all__ = [
    "KV_TRANSFER_LATENCY_S",
    "PCIE_BANDWIDTH_BYTES_PER_S",
    "StepModelCache",
    "deployment_of",
    "kv_transfer",
    "plan_candidate",
    "scheduler_config",
]

KV_TRANSFER_LATENCY_S = 1e-3
"""Fixed cost per KV transfer (connection set-up, first byte): an assumption, not a
measurement."""
PCIE_BANDWIDTH_BYTES_PER_S = 25e9
"""PCIe 4.0 x16 moves about 25 GB/s each way in practice (32 GB/s raw); used when a profile
has no interconnect bandwidth."""


def deployment_of(c: Candidate) -> Deployment:
    """The deployment one replica of ``c`` runs (each pool's replica for P/D)."""
    return Deployment(
        tensor_parallel_size=c.tensor_parallel_size,
        pipeline_parallel_size=c.pipeline_parallel_size,
        data_parallel_size=c.data_parallel_size,
        enable_expert_parallel=c.enable_expert_parallel,
        kv_cache_dtype=c.kv_cache_dtype,
        gpu_memory_utilization=c.gpu_memory_utilization,
        max_model_len=c.max_model_len,
        max_num_seqs=c.max_num_seqs,
        max_num_batched_tokens=c.max_num_batched_tokens,
        engine=c.engine,
    )


def plan_candidate(inputs: SizingInputs, c: Candidate, *, is_moe: bool) -> MemoryPlan | Rejection:
    """The memory plan of one replica of ``c``, or why ``c`` cannot run: over the GPU limit even
    with one replica per pool, expert parallelism without experts, a deployment the engine
    refuses, a context shorter than the longest request, or weights and runtime that do not
    fit."""
    pools = 2 if c.kind == "disaggregated" else 1
    if inputs.max_gpus is not None and c.gpus_per_replica * pools > inputs.max_gpus:
        return Rejection(
            candidate=c,
            reason="over-gpu-limit",
            detail=f"at least {pools * c.gpus_per_replica} GPUs > max_gpus {inputs.max_gpus}",
        )
    if c.enable_expert_parallel and not is_moe:
        return Rejection(
            candidate=c,
            reason="invalid-deployment",
            detail="expert parallelism needs an MoE model",
        )
    try:
        memory = plan_memory(inputs.arch, inputs.hardware[c.hardware_id], deployment_of(c))
    except InvalidDeploymentError as exc:
        detail = "; ".join(f"{i.field}: {i.problem}" for i in exc.issues) or str(exc)
        return Rejection(candidate=c, reason="invalid-deployment", detail=detail)
    longest = inputs.traffic.longest_tokens
    context = memory.deployment.max_model_len
    if longest is not None and context < longest:
        return Rejection(
            candidate=c,
            reason="context-too-short",
            detail=(
                f"max_model_len {context} < the longest request, {longest} tokens of "
                "prompt + output: the engine would refuse it; raise max_model_len or "
                "bound the lengths"
            ),
        )
    if not memory.fits:
        return Rejection(
            candidate=c,
            reason="does-not-fit",
            detail="; ".join(memory.reasons) or "the deployment does not fit",
        )
    return memory


_LayoutKey = tuple[str, str, int, int, int, int, str, bool]
"""Hardware id, engine, TP, PP, DP, EP, KV element dtype, eager: what the base model depends
on besides the sizing's inputs."""


def _layout_key(hardware_id: str, memory: MemoryPlan) -> _LayoutKey:
    res = memory.deployment
    return (
        hardware_id,
        res.engine,
        res.tensor_parallel_size,
        res.pipeline_parallel_size,
        res.data_parallel_size,
        res.expert_parallel_size,
        res.kv_cache.element_dtype,
        res.enforce_eager,
    )


def _base_step_model(inputs: SizingInputs, hardware_id: str, memory: MemoryPlan) -> StepTimeModel:
    """The step-time model of the plan's layout, with the engine's default scheduler limits."""
    res = memory.deployment
    return build_step_model(
        inputs.arch,
        inputs.hardware[hardware_id],
        engine=engine_profile(res.engine, calibrated=inputs.calibrated),
        tensor_parallel_size=res.tensor_parallel_size,
        pipeline_parallel_size=res.pipeline_parallel_size,
        data_parallel_size=res.data_parallel_size,
        expert_parallel_size=res.expert_parallel_size,
        kv_dtype=res.kv_cache.element_dtype,
        cuda_graphs=not res.enforce_eager,
        measured=inputs.measured.get(hardware_id),
        calibrated=inputs.calibrated,
    )


def _with_scheduler_limits(base: StepTimeModel, memory: MemoryPlan) -> StepTimeModel:
    """``base`` with the plan's token budget and sequence limit (the KV blocks when unset)."""
    res = memory.deployment
    seqs = res.max_num_seqs if res.max_num_seqs is not None else max(memory.kv_blocks, 1)
    profile = replace(
        base.engine, max_num_batched_tokens=res.max_num_batched_tokens, max_num_seqs=seqs
    )
    return replace(base, engine=profile)


@dataclass(slots=True)
class StepModelCache:
    """Base step-time models by layout, built once per sizing and shared by every knob setting
    of one layout. It is an accumulator: :meth:`get_or_build` adds what it builds."""

    inputs: SizingInputs
    _base_models: dict[_LayoutKey, StepTimeModel] = field(default_factory=dict)

    def get_or_build(self, c: Candidate, memory: MemoryPlan) -> StepTimeModel:
        """The step-time model of ``c`` with the plan's scheduler limits, building (and keeping)
        its layout's base model on first use.

        Raises :class:`~servesize.core.errors.UnsupportedDeploymentError` when the layout
        cannot run on the hardware."""
        key = _layout_key(c.hardware_id, memory)
        base = self._base_models.get(key)
        if base is None:
            base = _base_step_model(self.inputs, c.hardware_id, memory)
            self._base_models[key] = base
        return _with_scheduler_limits(base, memory)


def scheduler_config(memory: MemoryPlan) -> SchedulerConfig:
    """The simulated replica: one engine stands for the DP group, limits and blocks pooled."""
    res = memory.deployment
    dp = res.data_parallel_size
    seqs = res.max_num_seqs if res.max_num_seqs is not None else memory.kv_blocks
    return SchedulerConfig(
        max_num_batched_tokens=res.max_num_batched_tokens * dp,
        max_num_seqs=max(seqs, 1) * dp,
        block_size_tokens=memory.kv_block_size,
        num_kv_blocks=max(memory.kv_blocks, 1) * dp,
        policy=engine_scheduler(res.engine),
    )


def kv_transfer(hardware: HardwareSpec, memory: MemoryPlan) -> KVTransfer:
    """The prefill-to-decode KV transfer ``latency + P·kv_bytes/bandwidth`` over the hardware
    interconnect (PCIe when the profile gives no bandwidth)."""
    link = hardware.interconnect
    bandwidth = (
        float(link.bandwidth_bytes_per_s)
        if link is not None and link.bandwidth_bytes_per_s
        else PCIE_BANDWIDTH_BYTES_PER_S
    )
    return KVTransfer(
        latency_s=KV_TRANSFER_LATENCY_S,
        bandwidth_bytes_per_s=bandwidth,
        kv_bytes_per_token=float(memory.kv_bytes_per_token_per_gpu),
    )
