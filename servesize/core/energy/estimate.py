"""Energy per request and per output token of a replica at a load.

See docs/modeling.md, "Energy and power". A replica of ``g`` GPUs (TP × PP × DP, all at
the same power by symmetry) serving ``λ`` requests/s of ``n`` output tokens: a request
keeps the GPUs busy for

    b = t_prefill / DP + (n − 1) · τ_decode / B

(its prompt on one data-parallel rank, and its share of ``n − 1`` decode steps of ``B``
sequences each). The busy fraction is ``u = min(1, λ · b)`` and the activity of the busy
time ``ā = (a_p · t_prefill / DP + a_d · (n − 1) τ_decode / B) / b``
(:func:`~servesize.core.energy.power.step_activity`), so each GPU draws

    P = P_idle + (P_busy − P_idle) · ā · u

and the replica ``g · P``. Energy per request ``E_req = g · P / λ``, per output token
``E_tok = E_req / n`` and per million output tokens ``E_tok · 10^6 / 3.6·10^6`` kWh. A closed
loop keeps the engine busy (``u`` about 1); a plan's replicas at utilisation below one pay the
idle power of their spare time. The simulator's version sums the energy of every recorded step
instead (:func:`simulation_energy`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from servesize.core.energy.power import PowerProfile, step_activity
from servesize.core.simulation import SimulationResult
from servesize.core.simulation.adapters import step_work
from servesize.core.steptime import StepTimeModel, StepWork

__all__ = [
    "JOULES_PER_KWH",
    "EnergyEstimate",
    "closed_loop_energy",
    "energy_at_busy",
    "energy_at_rate",
    "simulation_energy",
    "step_activities",
]

JOULES_PER_KWH = 3.6e6


@dataclass(frozen=True, slots=True, kw_only=True)
class EnergyEstimate:
    """Power and energy of one replica (or a plan's fleet: ``gpus`` over all replicas)."""

    gpus: int
    power_per_gpu_w: float
    power_w: float
    """All ``gpus`` together."""
    busy_fraction: float
    activity: float
    """Mean activity ``ā`` of the busy time."""
    energy_per_request_j: float
    energy_per_output_token_j: float
    energy_per_million_output_tokens_kwh: float
    power_source: str

    def scaled(self, replicas: int) -> EnergyEstimate:
        """The same per-GPU figures over ``replicas`` identical replicas sharing the load."""
        return EnergyEstimate(
            gpus=self.gpus * replicas,
            power_per_gpu_w=self.power_per_gpu_w,
            power_w=self.power_w * replicas,
            busy_fraction=self.busy_fraction,
            activity=self.activity,
            energy_per_request_j=self.energy_per_request_j,
            energy_per_output_token_j=self.energy_per_output_token_j,
            energy_per_million_output_tokens_kwh=self.energy_per_million_output_tokens_kwh,
            power_source=self.power_source,
        )


def _estimate(
    profile: PowerProfile,
    gpus: int,
    power_per_gpu_w: float,
    busy: float,
    activity: float,
    rate_per_s: float,
    output_tokens: float,
) -> EnergyEstimate:
    power = gpus * power_per_gpu_w
    per_request = power / rate_per_s
    per_token = per_request / output_tokens
    return EnergyEstimate(
        gpus=gpus,
        power_per_gpu_w=power_per_gpu_w,
        power_w=power,
        busy_fraction=busy,
        activity=activity,
        energy_per_request_j=per_request,
        energy_per_output_token_j=per_token,
        energy_per_million_output_tokens_kwh=per_token * 1e6 / JOULES_PER_KWH,
        power_source=profile.source,
    )


def energy_at_rate(
    profile: PowerProfile,
    *,
    gpus: int,
    rate_per_s: float,
    output_tokens: float,
    prefill_busy_s: float,
    prefill_activity: float,
    decode_step_s: float,
    decode_batch: float,
    decode_activity: float,
) -> EnergyEstimate | None:
    """The module docstring's formulas (``prefill_busy_s`` already divided by DP); ``None``
    at no load or no output."""
    if not (rate_per_s > 0 and output_tokens > 0 and gpus > 0):
        return None
    decode_s = max(output_tokens - 1.0, 0.0) * decode_step_s / max(decode_batch, 1.0)
    per_request_busy = prefill_busy_s + decode_s
    if per_request_busy > 0:
        activity = (prefill_activity * prefill_busy_s + decode_activity * decode_s) / (
            per_request_busy
        )
    else:
        activity = 0.0
    busy = min(1.0, rate_per_s * per_request_busy)
    per_gpu = profile.power_w(activity * busy)
    return _estimate(profile, gpus, per_gpu, busy, activity, rate_per_s, output_tokens)


def energy_at_busy(
    profile: PowerProfile,
    *,
    gpus: int,
    rate_per_s: float,
    output_tokens: float,
    busy_fraction: float,
    activity: float,
) -> EnergyEstimate | None:
    """``P = P_idle + (P_busy − P_idle) · activity · busy_fraction`` per GPU when the busy
    fraction is known (a Tier A open-loop point); ``None`` at no load or no output."""
    if not (rate_per_s > 0 and output_tokens > 0 and gpus > 0):
        return None
    busy = min(max(busy_fraction, 0.0), 1.0)
    per_gpu = profile.power_w(activity * busy)
    return _estimate(profile, gpus, per_gpu, busy, activity, rate_per_s, output_tokens)


def step_activities(
    model: StepTimeModel, prefill_tokens: float, decode_batch: float, decode_context: float
) -> tuple[float, float]:
    """Activity of one prefill chunk of ``prefill_tokens`` (capped at the step budget) and of
    the decode step of ``decode_batch`` sequences at ``decode_context`` tokens each."""
    return _activities(model, prefill_tokens, decode_batch, decode_context)


def _activities(
    model: StepTimeModel, prefill_tokens: float, decode_batch: float, decode_context: float
) -> tuple[float, float]:
    """Activity of one prefill chunk of ``prefill_tokens`` (capped at the step budget) and of
    the decode step of ``decode_batch`` sequences at ``decode_context`` tokens each."""
    budget = float(model.engine.max_num_batched_tokens)
    chunk = max(min(prefill_tokens, budget), 1.0)
    batch = max(decode_batch, 1.0)
    steps = model.step_time(StepWork.prefill([chunk, 0.0]))
    decode = model.step_time(StepWork.decode([batch], [max(decode_context, 1.0)]))
    return float(step_activity(steps)[0]), float(step_activity(decode)[0])


def closed_loop_energy(
    model: StepTimeModel,
    profile: PowerProfile,
    *,
    gpus: int,
    data_parallel_size: int,
    rate_per_s: float,
    input_tokens: float,
    output_tokens: float,
    prefill_time_s: float,
    decode_step_s: float,
    decode_batch: float,
) -> EnergyEstimate | None:
    """Energy of a replica whose steady state (closed loop or a Tier A open-loop point) has
    request rate ``rate_per_s``, a prompt's engine time ``prefill_time_s`` and decode steps of
    ``decode_batch`` sequences taking ``decode_step_s``; activities from the step-time model
    at the mean decode context ``input + output / 2``."""
    if not all(math.isfinite(v) for v in (rate_per_s, prefill_time_s, decode_step_s)):
        return None
    a_p, a_d = _activities(model, input_tokens, decode_batch, input_tokens + output_tokens / 2)
    return energy_at_rate(
        profile,
        gpus=gpus,
        rate_per_s=rate_per_s,
        output_tokens=output_tokens,
        prefill_busy_s=prefill_time_s / max(data_parallel_size, 1),
        prefill_activity=a_p,
        decode_step_s=decode_step_s,
        decode_batch=decode_batch,
        decode_activity=a_d,
    )


def simulation_energy(
    model: StepTimeModel, profile: PowerProfile, result: SimulationResult, *, gpus_per_replica: int
) -> EnergyEstimate | None:
    """Energy over the measurement window of a simulated run: every replica's GPUs at idle
    power for the window, plus ``(P_busy − P_idle) · a_i · d_i`` per GPU for each step ``i``
    ending in it (``a_i`` from the step's work, as the simulator costed it); per output token
    over the tokens those steps produced, per request over the requests finishing in it."""
    ws, we = result.window_start_s, result.window_end_s
    span = we - ws
    if not span > 0:
        return None
    end = result.step_start_s + result.step_duration_s
    sel = (end >= ws) & (end <= we)
    tokens = float(result.step_output_tokens[sel].sum())
    done = result.ok & (result.finish_s >= ws) & (result.finish_s <= we)
    requests = float(done.sum())
    if tokens <= 0 or requests <= 0:
        return None
    work = step_work(
        result.step_prefill_tokens[sel],
        result.step_prefill_attention_work[sel],
        result.step_decode_seqs[sel],
        result.step_decode_context_tokens[sel],
        result.step_num_seqs[sel],
    )
    activity = step_activity(model.step_time(work))
    durations = result.step_duration_s[sel]
    replicas = int(result.kv_blocks_total.size)
    gpus = replicas * gpus_per_replica
    busy_s = float(durations.sum())
    active_s = float(np.dot(activity, durations))
    dynamic = profile.busy_w - profile.idle_w
    energy = gpus_per_replica * (replicas * profile.idle_w * span + dynamic * active_s)
    power = energy / span
    per_token = energy / tokens
    return EnergyEstimate(
        gpus=gpus,
        power_per_gpu_w=power / gpus,
        power_w=power,
        busy_fraction=min(1.0, busy_s / (replicas * span)),
        activity=active_s / busy_s if busy_s > 0 else 0.0,
        energy_per_request_j=energy / requests,
        energy_per_output_token_j=per_token,
        energy_per_million_output_tokens_kwh=per_token * 1e6 / JOULES_PER_KWH,
        power_source=profile.source,
    )
