"""Power and energy of a sizing plan at the target load, and ranking by energy.

An aggregated plan of ``R`` replicas of ``g`` GPUs serves ``λ / R`` requests/s per replica.
Its Tier A open-loop curve gives, at that load, the probability that a step is running
(``busy``), the share of the busy time in steps with prefill tokens (``mix_time_share``) and
the resident batch; each GPU draws ``P_idle + (P_busy − P_idle) · ā · busy`` with
``ā = s · a_prefill + (1 − s) · a_decode`` (docs/modeling.md, "Energy and power"), so the
spare capacity of a plan costs its idle power. The plan's energy per request is
``R · g · P / λ``. Disaggregated plans: the prefill pool at its prefill utilisation with the
prefill chunk's activity, the decode pool busy all the time at the decode step's activity.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from servesize.core.energy import (
    EnergyEstimate,
    PowerProfile,
    energy_at_busy,
    replica_gpus,
    step_activities,
)
from servesize.core.sizing.inputs import SizingInputs
from servesize.core.sizing.result import Plan
from servesize.core.sizing.tier_a import Screened

__all__ = ["plan_energy", "with_energy"]


def _at(rate: float, xs: np.ndarray, ys: np.ndarray) -> float:
    return float(np.interp(rate, xs, ys))


def plan_energy(
    inputs: SizingInputs, screened: Screened, plan: Plan, profile: PowerProfile
) -> EnergyEstimate | None:
    """The plan's fleet power and energy at the target load (module docstring)."""
    replica, curve = screened.replica, screened.curve
    gpus = replica_gpus(replica)
    rate = inputs.target_rate_per_s
    n_in, n_out = inputs.input_tokens, inputs.output_tokens
    if plan.prefill_replicas is None or plan.decode_replicas is None:
        per = rate / plan.replicas
        batch = _at(per, curve.rate_per_s, curve.resident_sequences)
        a_p, a_d = step_activities(replica.step_model, n_in, batch, n_in + n_out / 2)
        share = _at(per, curve.rate_per_s, curve.mix_time_share)
        one = energy_at_busy(
            profile,
            gpus=gpus,
            rate_per_s=per,
            output_tokens=n_out,
            busy_fraction=_at(per, curve.rate_per_s, curve.busy),
            activity=share * a_p + (1.0 - share) * a_d,
        )
        return None if one is None else one.scaled(plan.replicas)
    x, y = plan.prefill_replicas, plan.decode_replicas
    a_p, a_d = step_activities(replica.step_model, n_in, 1.0, n_in + n_out / 2)
    prefill = energy_at_busy(
        profile,
        gpus=gpus,
        rate_per_s=rate / x,
        output_tokens=n_out,
        busy_fraction=_at(rate / x, curve.rate_per_s, curve.prefill_utilization),
        activity=a_p,
    )
    decode = energy_at_busy(
        profile,
        gpus=gpus,
        rate_per_s=rate / y,
        output_tokens=n_out,
        busy_fraction=1.0,
        activity=a_d,
    )
    if prefill is None or decode is None:
        return None
    power = x * prefill.power_w + y * decode.power_w
    total_gpus = (x + y) * gpus
    per_request = power / rate
    return EnergyEstimate(
        gpus=total_gpus,
        power_per_gpu_w=power / total_gpus,
        power_w=power,
        busy_fraction=(x * prefill.busy_fraction + y) / (x + y),
        activity=(x * prefill.activity + y * decode.activity) / (x + y),
        energy_per_request_j=per_request,
        energy_per_output_token_j=per_request / n_out,
        energy_per_million_output_tokens_kwh=per_request / n_out * 1e6 / 3.6e6,
        power_source=profile.source,
    )


def with_energy(inputs: SizingInputs, screened: Mapping[str, Screened], plan: Plan) -> Plan:
    """The plan with :func:`plan_energy` filled in (unchanged without a power profile)."""

    profile = inputs.power.get(plan.candidate.hardware_id)
    if profile is None:
        return plan
    basis = screened.get(plan.candidate.label)
    if basis is None:
        return plan
    return replace(plan, energy=plan_energy(inputs, basis, plan, profile))
