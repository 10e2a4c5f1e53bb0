"""The closed-loop mean-field steps of one workload point, in Python floats.

:func:`~servesize.core.steptime.serving.closed_loop` of a single point runs its fixed point
(``docs/modeling.md`` §2.6) on these: the expressions of ``serving._steady_steps`` and
``serving._prefill_queue_s`` on floats, each step costed by
:class:`~servesize.core.steptime.fast.FastStepTime` (the vectorised path pays numpy's per-call
cost for one or two steps per pass).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from servesize.core.steptime.fast import FastStepTime

__all__ = ["PointSteps", "prefill_queue_point", "steady_point"]


@dataclass(frozen=True, slots=True)
class PointSteps:
    """``serving._Steps`` of one workload point, in Python floats."""

    steps: float
    prefill_steps: float
    mean_step_s: float
    mix_step_s: float
    decode_step_s: float
    mix_share: float
    own_prefill_s: float
    residual_s: float
    parallel_prefills: float


def steady_point(
    fast: FastStepTime,
    resident: float,
    p: float,
    n: float,
    ctx: float,
    budget: float,
    pp: float,
    queue_s: float,
) -> PointSteps:
    """``serving._steady_steps`` of one point: the same expressions on floats, each step costed by
    :class:`~servesize.core.steptime.fast.FastStepTime` (the same sum as
    ``StepTimeModel.step_time``, to a few ulps)."""
    steps = n
    b = 0.0
    chunk = p
    first = 1.0
    mean = t_mix = t_dec = share = 0.0
    for _ in range(3):
        b = resident * (n - 1) / steps
        room = max(budget - b, 1.0)
        first = float(math.ceil(p / room))
        u = resident * p / steps
        chunk = min(room, max(u, p))
        share = min(u / chunk, 1.0)
        prompts = max(chunk / p, 1.0)
        offset = (p - chunk) / 2 if chunk < p else 0.0
        # StepWork.mixed(prefill_tokens=chunk/prompts, prefill_sequences=prompts/pp, ...)
        t, s = chunk / prompts, prompts / pp
        db = b / pp
        t_mix = fast.step_s(
            s * t,
            s if t > 0 else 0.0,
            s * offset,
            s * (t * offset + t * (t + 1) / 2),
            db,
            db * ctx,
        )
        dd = max(db, 0.0)
        t_dec = fast.step_s(0.0, 0.0, 0.0, 0.0, dd, dd * ctx)
        mean = share * t_mix + (1 - share) * t_dec
        waiting = queue_s / max(mean, 1e-12)
        steps = max(n - 1 + first + waiting, resident * (p + n - 1) / budget)
    residual = (share * t_mix**2 + (1 - share) * t_dec**2) / (2 * max(mean, 1e-12))
    fraction = p / chunk if first > 1 else 1.0
    own = first * t_dec + fraction * (t_mix - t_dec)
    return PointSteps(
        steps=steps,
        prefill_steps=first,
        mean_step_s=mean,
        mix_step_s=t_mix,
        decode_step_s=t_dec,
        mix_share=share,
        own_prefill_s=own,
        residual_s=residual,
        parallel_prefills=max(float(math.floor(max(budget - b, 1.0) / p)), 1.0),
    )


def prefill_queue_point(state: PointSteps, rate: float, resident: float, clumping: float) -> float:
    """``serving._prefill_queue_s`` of one point (Poisson-like arrivals, ``c² = 1``)."""
    service = state.own_prefill_s / state.parallel_prefills
    rho = rate * service
    others = max(resident - 1.0, 0.0)
    bound = others * service
    wait = 1.0 * rho * service / (2 * max(1.0 - rho, 1e-9)) + clumping * others * service / 2
    return min(wait, bound) if rho < 1.0 else bound
