"""Speculative decoding on the replica path: draft memory, Tier A and the simulator.

**Memory.** :func:`~servesize.core.speculative.with_draft` puts the draft's weights (its
parameters at the checkpoint's bytes per parameter, split over the tensor-parallel ranks) and
its KV (``draft_kv_layers`` layers of the target's KV shape: 1 for EAGLE-3,
``num_nextn_predict_layers`` for MTP, the draft model's KV in target-layer equivalents) into
the deployment that :func:`~servesize.core.replica.compile_replica` plans.

**Tier A.** :func:`closed_loop_with_speculation` corrects the closed loop as
:mod:`~servesize.core.replica.prefix` does: a step of ``B`` decodes costs
``Δτ = τ_ver(B) + τ_draft(B) − τ_dec(B)`` more (``B`` the resident batch, context
``ISL + n/2``) and yields ``E`` tokens per sequence; the prefill work a step carries,
``τ̄ − τ_dec(B)``, is the same prompts over ``1 + (n − 1)/E`` steps of a request's life instead
of ``n``. So ``TPOT = (τ_dec + Δτ + (τ̄ − τ_dec)·n/(1 + (n − 1)/E)) / E`` and the closed-loop
throughput ``C / (C/X + (n − 1)(TPOT − τ̄))``.

**Simulator.** :func:`speculative_workload` gives each request ``1 + ⌈(n − 1)/E⌉`` outputs:
with fractional credit the ``j``-th verification step of a request delivers
``⌊jE⌋ − ⌊(j − 1)E⌋`` tokens, so it finishes after ``⌈(n − 1)/E⌉`` steps (deterministic, no
sampling). :class:`SpeculativeStepTime` costs each decode of a step as ``1 + k`` rows with its
KV read once plus the draft's ``k`` forwards. :func:`restore_tokens` puts the requests' real
output lengths back, so TPOT is ``(E2E − TTFT)/(n − 1)`` in real tokens; an ITL sample is the gap
between verification steps (several tokens arrive in one gap). Left out: a decode takes one
token of the step budget, not ``1 + k``, and its KV grows one slot per step, not ``E``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from servesize.core.replica.compile import Replica
from servesize.core.simulation import SimulationResult
from servesize.core.simulation import StepTimeModel as SimStepTime
from servesize.core.speculative import (
    DraftPlan,
    SpeculativeDecoding,
    SpeedupPoint,
    speedup_by_batch,
    verification_step_s,
)
from servesize.core.steptime import ServingEstimate, StepTimeModel, StepWork
from servesize.core.traffic import Workload

__all__ = [
    "SpeculativeEstimate",
    "SpeculativeStepTime",
    "closed_loop_with_speculation",
    "restore_tokens",
    "speculative_workload",
    "verification_steps",
]

BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
"""Batch sizes of the speed-up table (cut at the deployment's ``max_num_seqs``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeculativeEstimate:
    """Tier A with speculation: the corrected closed loop, ``E``, and the speed-up table."""

    estimate: ServingEstimate
    baseline: ServingEstimate
    expected_tokens_per_step: float
    step_cost_s: float
    """``Δτ`` of the resident batch."""
    speedup_by_batch: tuple[SpeedupPoint, ...]
    break_even_batch: int | None
    """The smallest batch of the table where speculation no longer pays (speed-up < 1)."""
    draft_weight_bytes_per_gpu: int
    draft_kv_layers: int


def closed_loop_with_speculation(replica: Replica, base: ServingEstimate) -> SpeculativeEstimate:
    """The closed loop ``base`` (point 0) with ``replica.draft`` (module docstring)."""
    plan = replica.draft
    assert plan is not None
    spec = plan.spec
    model = replica.step_model
    p, n = float(base.input_tokens[0]), float(base.output_tokens[0])
    ctx = p + n / 2.0
    b = np.array([max(float(base.resident_sequences[0]), 1.0)])
    c = np.array([ctx])
    plain = float(model.step_time(StepWork.decode(b, c)).total_s[0])
    verify = float(verification_step_s(model, b, c, spec.k)[0])
    draft = float(plan.draft_s(model, b, c)[0])
    delta = verify + draft - plain
    e = spec.expected_tokens
    tau = base.tpot_s
    # Prefill work per step: the same prompts over n/E + 1 instead of n steps per request.
    mix = np.maximum(tau - plain, 0.0) * n / ((n - 1.0) / e + 1.0)
    tpot = (plain + delta + mix) / e
    conc = base.concurrency
    x = base.request_rate_per_s
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = conc / (conc / x + (n - 1.0) * (tpot - tau))
    estimate = replace(
        base,
        tpot_s=tpot,
        request_rate_per_s=rate,
        throughput_output_tokens_per_s=rate * n,
    )
    limit = replica.scheduler.max_num_seqs
    sizes = [s for s in BATCH_SIZES if s <= max(limit, 1)] or [1]
    table = speedup_by_batch(
        model,
        spec,
        plan.shape,
        context_tokens=ctx,
        batch_sizes=sizes,
        bytes_per_param=plan.bytes_per_param,
        gpus=plan.gpus,
    )
    even = next((pt.batch_size for pt in table if pt.speedup < 1.0), None)
    res = replica.deployment
    return SpeculativeEstimate(
        estimate=estimate,
        baseline=base,
        expected_tokens_per_step=e,
        step_cost_s=delta,
        speedup_by_batch=tuple(table),
        break_even_batch=even,
        draft_weight_bytes_per_gpu=res.draft_weight_bytes_per_gpu,
        draft_kv_layers=res.draft_kv_layers,
    )


def verification_steps(output_tokens: np.ndarray, expected_tokens: float) -> np.ndarray:
    """Verification steps of requests of ``n`` outputs, ``⌈(n − 1)/E⌉`` (fractional credit).

    >>> verification_steps(np.array([1, 2, 128]), 2.952).tolist()
    [0, 1, 44]
    """
    n = np.asarray(output_tokens, dtype=np.int64)
    steps = np.ceil((n - 1) / expected_tokens - 1e-12)
    return np.maximum(steps, 0).astype(np.int64)


def speculative_workload(workload: Workload, spec: SpeculativeDecoding) -> Workload:
    """``workload`` with ``1 + ⌈(n − 1)/E⌉`` outputs per request (one per verification step)."""
    steps = verification_steps(workload.output_tokens, spec.expected_tokens)
    return replace(workload, output_tokens=(1 + steps).astype(workload.output_tokens.dtype))


def restore_tokens(
    result: SimulationResult, original: Workload, spec: SpeculativeDecoding
) -> SimulationResult:
    """The result of a :func:`speculative_workload` run in real tokens: each request's output
    length, the tokens it generated (``1 + ⌊jE⌋`` after ``j`` steps, at most ``n``) and each
    step's output tokens scaled to the real total."""
    e = spec.expected_tokens
    real = np.asarray(original.output_tokens, dtype=result.output_tokens.dtype)
    steps_done = np.maximum(result.generated_tokens - 1, 0)
    generated = np.where(
        result.generated_tokens > 0,
        np.minimum(1 + np.floor(steps_done * e + 1e-9), real),
        0,
    ).astype(result.generated_tokens.dtype)
    sim_total = float(result.step_output_tokens.sum())
    scale = float(generated.sum()) / sim_total if sim_total else 1.0
    return replace(
        result,
        output_tokens=real,
        generated_tokens=generated,
        step_output_tokens=result.step_output_tokens * scale,
    )


class SpeculativeStepTime:
    """The simulator's step time with every decode a verification of ``1 + k`` rows plus the
    draft's ``k`` forwards (:mod:`~servesize.core.speculative.cost`)."""

    __slots__ = ("_base", "_model", "_plan")

    def __init__(self, base: SimStepTime, model: StepTimeModel, plan: DraftPlan) -> None:
        self._base = base
        self._model = model
        self._plan = plan

    def __call__(
        self,
        prefill_tokens: np.ndarray,
        prefill_attention_work: np.ndarray,
        decode_seqs: np.ndarray,
        decode_context_tokens: np.ndarray,
        num_seqs: np.ndarray,
        /,
    ) -> np.ndarray:
        k = self._plan.spec.k
        extra = decode_seqs * k
        target = self._base(
            prefill_tokens,
            prefill_attention_work,
            decode_seqs + extra,
            decode_context_tokens + extra,
            num_seqs + extra,
        )
        b = np.asarray(decode_seqs, dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            mean = np.where(b > 0, decode_context_tokens / np.maximum(b, 1.0), 0.0)
        draft = self._plan.draft_s(self._model, b, mean)
        return np.asarray(target + draft, dtype=np.float64)
