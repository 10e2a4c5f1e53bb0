"""The per-candidate build: a candidate's memory plan, then its compiled replica (step-time
model with the plan's scheduler limits, simulated scheduler, KV transfer between disaggregated
pools) through :func:`~servesize.core.replica.replica_from_plan`, the one path every caller
takes.

:func:`plan_candidate` prunes what cannot run before any model is built (over the GPU limit,
expert parallelism on a dense model, a deployment the engine refuses, a context shorter than
the longest request, weights that do not fit), each with its reason. The step-time model of
one layout is shared by every knob setting of it
(:class:`~servesize.core.replica.StepModelCache`); a builder raises
:class:`~servesize.core.errors.UnsupportedDeploymentError` for a deployment it cannot run, and
any other error propagates as the bug it is. A profile without interconnect bandwidth has its
KV transfer costed over PCIe, explicitly (:func:`kv_link`), and the plan says so
(:func:`kv_link_notes`).
"""

from __future__ import annotations

from servesize.core.hardware import HardwareSpec
from servesize.core.memory import Deployment, InvalidDeploymentError, MemoryPlan, plan_memory
from servesize.core.replica import KVLink, Replica, StepModelCache, replica_from_plan
from servesize.core.sizing.engine_args import unsupported_kv, unsupported_layout
from servesize.core.sizing.inputs import SizingInputs
from servesize.core.sizing.result import Rejection
from servesize.core.sizing.space import Candidate
from servesize.core.speculative import DraftPlan, sglang_speculative_args, with_draft
from servesize.core.steptime.model import PCIE_LINK_BYTES_PER_S

__all__ = [
    "KV_TRANSFER_LATENCY_S",
    "assumes_pcie",
    "compile_candidate",
    "deployment_of",
    "drafted",
    "kv_link",
    "kv_link_notes",
    "plan_candidate",
]

KV_TRANSFER_LATENCY_S = 1e-3
"""Fixed cost per KV transfer (connection set-up, first byte): an assumption, not a
measurement."""


def deployment_of(c: Candidate) -> Deployment:
    """The deployment one replica of ``c`` runs (each pool's replica for P/D), without a
    speculative draft's memory (:func:`drafted`)."""
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
        kv_offload=c.kv_offload,
    )


def drafted(inputs: SizingInputs, c: Candidate) -> tuple[Deployment, DraftPlan | None]:
    """:func:`deployment_of` with the draft's weights and KV layers when ``c`` speculates
    (:func:`~servesize.core.speculative.with_draft`, as ``compile_replica`` adds them), and the
    sized draft. Raises :class:`~servesize.core.memory.InvalidDeploymentError` for a draft the
    engines refuse."""
    deployment = deployment_of(c)
    if c.speculative is None:
        return deployment, None
    return with_draft(deployment, inputs.arch, c.speculative)


def plan_candidate(inputs: SizingInputs, c: Candidate, *, is_moe: bool) -> MemoryPlan | Rejection:
    """The memory plan of one replica of ``c``, or why ``c`` cannot run: over the GPU limit even
    with one replica per pool, expert parallelism without experts, a deployment the engine
    refuses, a context shorter than the longest request, weights and runtime that do not
    fit, or a KV format or layout the engine release cannot launch
    (:func:`~.engine_args.unsupported_kv`, :func:`~.engine_args.unsupported_layout`)."""
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
    spec = c.speculative
    if spec is not None and c.engine == "sglang" and sglang_speculative_args(spec) is None:
        return Rejection(
            candidate=c,
            reason="engine-unsupported",
            detail=f"SGLang has no {spec.method} speculative algorithm",
        )
    try:
        deployment, _ = drafted(inputs, c)
        memory = plan_memory(inputs.arch, inputs.hardware[c.hardware_id], deployment)
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
    link = inputs.hardware[c.hardware_id].interconnect
    refused = unsupported_kv(memory.deployment) or unsupported_layout(
        memory.deployment, is_moe=is_moe, gpus_per_node=link.gpus_per_node if link else None
    )
    if refused is not None:
        return Rejection(candidate=c, reason="engine-unsupported", detail=refused)
    return memory


def kv_link(hardware: HardwareSpec) -> KVLink:
    """The KV hand-off of a disaggregated candidate: :data:`KV_TRANSFER_LATENCY_S`, over the
    profile's interconnect, or over PCIe (:data:`PCIE_LINK_BYTES_PER_S`, said so explicitly)
    when the profile gives no bandwidth (:func:`assumes_pcie`)."""
    return KVLink(
        latency_s=KV_TRANSFER_LATENCY_S,
        bandwidth_bytes_per_s=PCIE_LINK_BYTES_PER_S if assumes_pcie(hardware) else None,
    )


def assumes_pcie(hardware: HardwareSpec) -> bool:
    """True when the profile gives no interconnect bandwidth, so the KV transfer between pools
    is costed over PCIe."""
    link = hardware.interconnect
    return link is None or not link.bandwidth_bytes_per_s


def kv_link_notes(hardware: HardwareSpec) -> tuple[str, ...]:
    """What a disaggregated plan on ``hardware`` says about its KV link: the PCIe assumption
    when :func:`assumes_pcie`, else nothing."""
    if not assumes_pcie(hardware):
        return ()
    return (
        f"KV transfer between the pools costed over PCIe at {PCIE_LINK_BYTES_PER_S / 1e9:g} GB/s "
        f"per direction: the {hardware.name} profile gives no interconnect bandwidth",
    )


def compile_candidate(
    inputs: SizingInputs, c: Candidate, memory: MemoryPlan, step_models: StepModelCache
) -> Replica:
    """The replica of ``c`` from its memory plan
    (:func:`~servesize.core.replica.replica_from_plan`): the step-time model with the plan's
    scheduler limits (weights in FP8 when the checkpoint is quantized online), the engine's
    own scheduler and, for P/D, the KV link of :func:`kv_link`. ``step_models`` is the
    sizing's accumulator of compiled models, shared by every knob setting of one layout.

    Raises :class:`~servesize.core.errors.UnsupportedDeploymentError` when the layout cannot
    run on the hardware; any other error is a bug and propagates."""
    hardware = inputs.hardware[c.hardware_id]
    draft = drafted(inputs, c)[1] if c.speculative is not None else None
    return replica_from_plan(
        inputs.arch,
        hardware,
        memory,
        inputs.measured.get(c.hardware_id),
        calibrated=inputs.calibrated,
        kv_link=kv_link(hardware) if c.kind == "disaggregated" else None,
        step_models=step_models,
        draft=draft,
    )
