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

__all__ = [
    "CONVERGED_RTOL",
    "PointSteps",
    "prefill_queue_point",
    "residency_point",
    "steady_point",
]

CONVERGED_RTOL = 1e-13
"""The undamped residency iteration stops once a pass moves ``L`` and ``W_q`` by at most this
much relative (far below any tolerance of the estimate, far above rounding)."""


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


def residency_point(
    fast: FastStepTime,
    c: float,
    cap: float,
    p: float,
    n: float,
    ctx: float,
    budget: float,
    pp: float,
    z: float,
    clumping: float,
    iterations: int,
) -> tuple[float, float]:
    """The fixed point ``(L, W_q)`` of ``serving.closed_loop`` for one point
    (``serving._residency`` on floats, the same decisions)."""
    resident, queue = min(c, cap), 0.0
    moved_r = moved_q = math.inf
    for _ in range(iterations):
        state = steady_point(fast, resident, p, n, ctx, budget, pp, queue)
        life = state.steps * state.mean_step_s
        new_r = min(cap, max(c * life / (z + life), 1.0))
        new_q = prefill_queue_point(state, new_r / life, new_r, clumping)
        dr, dq = abs(new_r - resident), abs(new_q - queue)
        resident, queue = new_r, new_q
        if dr <= CONVERGED_RTOL * abs(new_r) and dq <= CONVERGED_RTOL * abs(new_q):
            return resident, queue
        if dr > 0.5 * moved_r or dq > 0.5 * moved_q:
            break  # not contracting: the damped iteration
        moved_r, moved_q = dr, dq
    return _damped_point(fast, c, cap, p, n, ctx, budget, pp, z, clumping, iterations)


def _damped_point(
    fast: FastStepTime,
    c: float,
    cap: float,
    p: float,
    n: float,
    ctx: float,
    budget: float,
    pp: float,
    z: float,
    clumping: float,
    iterations: int,
) -> tuple[float, float]:
    """``iterations`` passes damped by one half from ``(min(C, L_cap), 0)``."""
    resident, queue = min(c, cap), 0.0
    for _ in range(iterations):
        state = steady_point(fast, resident, p, n, ctx, budget, pp, queue)
        life = state.steps * state.mean_step_s
        demand = c * life / (z + life)
        before = resident, queue
        resident = 0.5 * resident + 0.5 * min(cap, max(demand, 1.0))
        queue = 0.5 * queue + 0.5 * prefill_queue_point(state, resident / life, resident, clumping)
        if (resident, queue) == before:
            break  # a fixed point to the last bit: further passes repeat it
    return resident, queue
