"""One way from a deployment to a prediction: compile a replica, then run it.

:func:`compile_replica` turns ``(architecture, hardware, deployment, measurements, engine)``
into a :class:`Replica` — the memory plan, the step-time model, the simulated scheduler
(:class:`~servesize.core.simulation.SchedulerConfig`) and, for disaggregation, the KV-transfer
model — and :func:`simulate_replica` runs it through :mod:`servesize.core.simulation`. The API,
the CLI and the planners all go through these two; nothing else builds the four objects.

Policies (one per choice; each was written differently by an earlier caller):

Memory
    :func:`~servesize.core.memory.plan_memory` of the deployment; a plan that does not fit
    raises :class:`~servesize.core.errors.InsufficientMemoryError` with the plan's reasons.
Step-time model
    :func:`~servesize.core.steptime.build_step_model` with every parallel degree of the resolved
    deployment (TP, PP, DP, EP), its KV dtype, CUDA graphs unless ``enforce_eager``, and weights
    in ``fp8`` when an unquantized checkpoint is served with ``--quantization fp8`` (online
    quantization). Its engine profile carries the *deployment's* scheduler limits: one rank's
    ``max_num_batched_tokens`` and ``max_num_seqs`` (the KV blocks when the engine sizes its
    batch from the pool, as SGLang does), so Tier A chunks prompts and caps the batch as the
    simulated scheduler does. Its fitted constants are the simulator's
    (:func:`~servesize.core.steptime.simulator_constants`): one set for both tiers.
Scheduler
    One simulated engine stands for the data-parallel group: ``max_num_batched_tokens · dp``,
    ``max_num_seqs · dp`` (KV blocks when unset, with a warning) and ``kv_blocks · dp``; the
    policy is the caller's ``policy``, else the engine's own scheduler
    (:func:`~servesize.core.simulation.engine_scheduler`). ``chunked_prefill=True`` turns a
    whole-prompt scheduler into ``vllm_v1`` (TensorRT-LLM ``enable_chunked_prefill: true``) —
    an explicit request, never a fallback.
KV transfer
    ``latency + prompt · kv_bytes_per_token_per_gpu / bandwidth``, the bandwidth being the
    caller's or the profile's interconnect; a profile without one raises
    :class:`MissingInterconnectBandwidthError` (the only PCIe figure is
    :data:`~servesize.core.steptime.model.PCIE_LINK_BYTES_PER_S`, which the step-time model's
    collectives use and a caller may pass explicitly).
Workload (:func:`check_workload`, before every run)
    a request over ``max_model_len`` raises :class:`RequestTooLongError`; more than
    :data:`MAX_PREFILL_STEPS` prefill steps :class:`SimulationTooLargeError`; a request over one
    rank's budget under a whole-prompt scheduler :class:`WholePromptOverflowError`.
Simulation
    steps costed under the simulator's fitted constants
    (:func:`~servesize.core.steptime.simulator_constants`); without client overheads, the
    profile's ``request_overhead_s`` is the preprocessing time.

Callers that compile many replicas of one model (sizing) pass one :class:`StepModelCache`:
replicas that differ only in scheduler knobs share a compiled step-time model, and
:meth:`Replica.configured` re-derives the scheduler and KV link without recompiling. A service
that answers many requests keeps compiled replicas by their inputs in a :class:`ReplicaCache`.
"""

from servesize.core.replica.cache import REPLICA_CACHE_SIZE, ReplicaCache
from servesize.core.replica.compile import (
    KVLink,
    PolicySource,
    Replica,
    StepModelCache,
    compile_replica,
    host_tier,
    kv_transfer,
    replica_from_plan,
    scheduler_config,
)
from servesize.core.replica.errors import (
    MissingInterconnectBandwidthError,
    ReplicaError,
    RequestTooLongError,
    SimulationTooLargeError,
    WholePromptOverflowError,
)
from servesize.core.replica.prefix import (
    PrefixedEstimate,
    closed_loop_with_prefix,
    steady_prompt_tokens,
    warm_prompt_tokens,
)
from servesize.core.replica.simulate import (
    MAX_PREFILL_STEPS,
    DisaggregatedPools,
    Progress,
    ReplicaRun,
    check_workload,
    simulate_replica,
    simulator_step_model,
)
from servesize.core.replica.speculative import (
    SpeculativeEstimate,
    SpeculativeStepTime,
    closed_loop_with_speculation,
    restore_tokens,
    speculative_workload,
    verification_steps,
)

__all__ = [
    "MAX_PREFILL_STEPS",
    "REPLICA_CACHE_SIZE",
    "DisaggregatedPools",
    "KVLink",
    "MissingInterconnectBandwidthError",
    "PolicySource",
    "PrefixedEstimate",
    "Progress",
    "Replica",
    "ReplicaCache",
    "ReplicaError",
    "ReplicaRun",
    "RequestTooLongError",
    "SimulationTooLargeError",
    "SpeculativeEstimate",
    "SpeculativeStepTime",
    "StepModelCache",
    "WholePromptOverflowError",
    "check_workload",
    "closed_loop_with_prefix",
    "closed_loop_with_speculation",
    "compile_replica",
    "host_tier",
    "kv_transfer",
    "replica_from_plan",
    "restore_tokens",
    "scheduler_config",
    "simulate_replica",
    "simulator_step_model",
    "speculative_workload",
    "steady_prompt_tokens",
    "verification_steps",
    "warm_prompt_tokens",
]
