"""``/v1/performance``'s response: the closed-loop estimate of a compiled replica as JSON."""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import fields as dataclass_fields

from servesize.api.exceptions import UnprocessableError
from servesize.api.resolved import ResolvedReplica
from servesize.core.energy import estimate_energy
from servesize.core.replica import (
    PrefixedEstimate,
    SpeculativeEstimate,
    closed_loop_with_prefix,
    closed_loop_with_speculation,
)
from servesize.schemas.energy import EnergyOut
from servesize.schemas.memory import AppliedDefaultOut
from servesize.schemas.performance import (
    ArithmeticIntensity,
    PerformanceResponse,
    PhaseBound,
    WorkloadPoint,
)
from servesize.schemas.prefix import PrefixCacheOut, prefix_traffic
from servesize.schemas.speculative import SpeculativeOut

__all__ = ["PointEstimate", "performance_estimate", "performance_response"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PointEstimate(PrefixedEstimate):
    """The closed loop with its prefix cache and, with ``deployment.speculative``, corrected
    for speculation (``speculative`` holds the figures and the uncorrected loop)."""

    speculative: SpeculativeEstimate | None = None


def _warnings(built: ResolvedReplica, work: WorkloadPoint, resident: float) -> list[str]:
    warnings = list(built.memory.warnings)
    if resident < work.concurrency:
        warnings.append(
            f"only {resident:.1f} of {work.concurrency} requests fit in the batch at once "
            "(max_num_seqs or KV capacity); the rest wait for admission"
        )
    return warnings


def performance_estimate(built: ResolvedReplica, work: WorkloadPoint) -> PointEstimate:
    """The closed loop at ``work`` on the compiled replica, under its simulated scheduler's
    policy and with its prefix cache on ``work.prefix``; a request longer than
    ``max_model_len`` is refused as ``/v1/simulate`` refuses one (422 ``request-too-long``
    naming the workload's lengths)."""
    total = work.input_tokens + work.output_tokens
    context = built.memory.max_model_len
    if total > context:
        detail = (
            f"a request of {work.input_tokens} + {work.output_tokens} = {total} tokens exceeds "
            f"max_model_len ({context} tokens of prompt plus output): the engine would refuse "
            "it; shorten the lengths or raise deployment.max_model_len"
        )
        raise UnprocessableError(
            detail,
            slug="request-too-long",
            errors=[
                {"location": "body", "pointer": "/workload/input_tokens", "detail": detail},
                {"location": "body", "pointer": "/workload/output_tokens", "detail": detail},
            ],
        )
    prefixed = closed_loop_with_prefix(
        built.replica,
        concurrency=work.concurrency,
        input_tokens=work.input_tokens,
        output_tokens=work.output_tokens,
        prefix=prefix_traffic(work.prefix),
    )
    fields = {f.name: getattr(prefixed, f.name) for f in dataclass_fields(prefixed)}
    if built.replica.draft is None:
        return PointEstimate(**fields)
    spec = closed_loop_with_speculation(built.replica, prefixed.estimate)
    return PointEstimate(**{**fields, "estimate": spec.estimate}, speculative=spec)


def performance_response(
    built: ResolvedReplica, work: WorkloadPoint, prefixed: PrefixedEstimate
) -> PerformanceResponse:
    """The first (only) point of the closed loop at ``work``."""
    estimate = prefixed.estimate
    memory = built.memory
    res = memory.deployment
    ttft = float(estimate.ttft_s[0])
    tpot = float(estimate.tpot_s[0])
    resident = float(estimate.resident_sequences[0])
    return PerformanceResponse(
        model=built.model.id,
        hardware=built.hardware.id,
        engine=res.engine,
        concurrency=work.concurrency,
        input_tokens=work.input_tokens,
        output_tokens=work.output_tokens,
        prefill_time_s=float(estimate.prefill_time_s[0]),
        decode_step_time_s=float(estimate.decode_step_time_s[0]),
        ttft_zero_load_s=float(estimate.ttft_zero_load_s[0]),
        ttft_s=ttft,
        tpot_s=tpot,
        e2e_s=ttft + tpot * (work.output_tokens - 1),
        throughput_output_tokens_per_s=float(estimate.throughput_output_tokens_per_s[0]),
        throughput_requests_per_s=float(estimate.request_rate_per_s[0]),
        resident_sequences=resident,
        admission_wait_s=float(estimate.admission_wait_s[0]),
        bound=PhaseBound(
            prefill=str(estimate.prefill_bound[0]), decode=str(estimate.decode_bound[0])
        ),
        arithmetic_intensity=ArithmeticIntensity(
            prefill=float(estimate.prefill_arithmetic_intensity[0]),
            decode=float(estimate.decode_arithmetic_intensity[0]),
        ),
        ridge_point_flops_per_byte=float(built.step_model.ridge_point_flops_per_byte),
        kv_capacity_tokens=memory.kv_capacity_tokens,
        weights_bytes_per_gpu=memory.weights_bytes_per_gpu,
        sources=dict(estimate.sources),
        defaults_applied=[
            AppliedDefaultOut.model_validate(d, from_attributes=True) for d in res.defaults
        ],
        warnings=_warnings(built, work, resident),
        prefix_cache=PrefixCacheOut.of(prefixed),
        energy=EnergyOut.of(
            None if built.power is None else estimate_energy(built.replica, built.power, estimate)
        ),
        speculative=_speculative(built, prefixed),
    )


def _speculative(built: ResolvedReplica, prefixed: PrefixedEstimate) -> SpeculativeOut | None:
    draft = built.replica.draft
    spec = prefixed.speculative if isinstance(prefixed, PointEstimate) else None
    return SpeculativeOut.of(draft.spec, spec) if draft is not None and spec is not None else None
