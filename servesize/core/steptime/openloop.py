"""Open-loop steady state (Tier A "model mode"): Poisson arrivals at a rate, not clients.

The mean-field model of :mod:`servesize.core.steptime.serving` is reused with the concurrency
replaced by the arrival rate ``λ`` (docs/modeling.md §2.8):

- ``X(L) = L / (N(L)·τ̄(L))`` is the completion rate with ``L`` resident sequences, each
  living ``N`` steps of mean length ``τ̄``; it grows with ``L`` up to the residency cap
  ``L_cap`` (``max_num_seqs`` or the KV cache), so the **saturation rate** is
  ``λ_sat = X(L_cap)``;
- for ``λ < λ_sat`` the steady state solves ``X(L) = λ`` (Little's law, ``L = λ·N·τ̄``), found
  on successively finer grids of ``L`` (vectorised); at ``λ ≥ λ_sat`` the queue grows without bound
  (:class:`~servesize.core.errors.UnstableQueueError`);
- ``TPOT = τ̄``; ``TTFT = Z + min(L, 1)·R + W_q + S`` with the request overhead ``Z``, the
  residual of the running step ``R = E[τ²]/(2E[τ])`` (met only while the engine is busy),
  the wait behind other prompts ``W_q`` (M/D/1 on the
  prefill share of each step, Poisson arrivals: no clumping) and the request's own prefill
  ``S``.

TTFT when the token budget left by the steady decodes holds at least
:data:`CHAIN_MIN_PROMPTS` prompts (no pipeline): the **batch chain**
(:mod:`servesize.core.steptime.batchchain`). The prompts that arrive during a step are prefilled
together in the next one, so a request waits a uniform part of the step it arrives in and then
the whole next step, which carries it and every other arrival of that step; the law of the
number of prompts per step is solved exactly, and mean and quantiles follow in closed form. Long
steps draw more prompts into the next step, which is where the heavy tail at high load comes
from (``python -m bench.simulate`` compares it with the simulator: within a few per cent of its
mean and p95 TTFT from 10 to 85 % load, where the FIFO model below was 20-40 % low on p95).

Otherwise (long prompts: a step holds few of them) TTFT is ``Z + R + W_q + S`` and its
percentiles treat ``R`` and ``W_q`` as random. An arrival finds a step running with
probability ``min(L, 1)``, a mixed step with the mixed steps' share of busy time, and waits a
uniform part of it; with the prefill utilisation ``ρ`` it also waits behind other prompts for
an exponential time of mean ``W_q/ρ`` (the tail exact for M/M/1, matched to the P-K mean
otherwise). The quantiles of ``Z + S + R + W_q`` are taken from 20,000 samples drawn with a fixed
seed, so the answer is deterministic.
Validity: mean-field (fixed lengths, steady state), accurate below about 90 % of ``λ_sat``;
the simulator (Tier B) decides beyond that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from servesize.core.errors import UnstableQueueError
from servesize.core.steptime.backlogchain import BacklogChain, backlog_chain
from servesize.core.steptime.batchchain import BatchChain, batch_chain
from servesize.core.steptime.memo import shared_value
from servesize.core.steptime.model import StepTimeModel
from servesize.core.steptime.serving import (
    _budget,
    _prefill_queue_s,
    _steady_steps,
    _Steps,
    resident_capacity,
)
from servesize.core.steptime.work import StepWork

__all__ = ["OpenLoopCurve", "OpenLoopEstimate", "open_loop", "open_loop_curve"]

GRID_POINTS = 64
REFINEMENTS = 3
"""Three geometric grids of 64 points pin ``L`` to about 1e-6 of the residency cap."""
QUEUE_ITERATIONS = 6
TAIL_SAMPLES = 20_000
TAIL_SEED = 20_261_129
CHAIN_MIN_PROMPTS = 4
"""The batch chain models TTFT when one step's budget holds at least this many prompts."""
CHAIN_MAX_PROMPTS = 64
ASSUMPTIONS = (
    "Poisson arrivals, fixed input and output lengths, steady state (mean-field)",
    "TTFT when a step's budget holds several prompts: the prompts arriving during a step are "
    "prefilled together in the next one (batch chain); otherwise the residual of the running "
    "step (uniform) plus the wait behind other prompts (exponential tail, P(wait) = prefill "
    "utilisation)",
    "accurate below about 90 % of the saturation rate; the simulator decides beyond it",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenLoopEstimate:
    """Steady state at one arrival rate."""

    arrival_rate_per_s: float
    saturation_rate_per_s: float
    utilization: float
    """``λ / λ_sat``."""
    resident_sequences: float
    mean_step_s: float
    tpot_s: float
    ttft_mean_s: float
    ttft_p50_s: float
    ttft_p95_s: float
    ttft_p99_s: float
    prefill_wait_mean_s: float
    prefill_utilization: float
    e2e_mean_s: float
    throughput_output_tokens_per_s: float
    assumptions: tuple[str, ...] = ASSUMPTIONS


@dataclass(frozen=True, slots=True)
class _Points:
    """The steady state at each of several resident counts (arrays of one shape)."""

    resident: np.ndarray
    rate_per_s: np.ndarray
    state: _Steps
    queue_s: np.ndarray
    prefill_utilization: np.ndarray


def _points(
    model: StepTimeModel, resident: np.ndarray, p: float, n: float, cv: float = 1.0
) -> _Points:
    """Completion rate and step structure for each resident count (Poisson arrivals).

    Kept by its inputs (:func:`~servesize.core.steptime.memo.shared_value`): every rate asks
    for the saturation point and the first grid again (a capacity bisection asks a dozen
    rates), and the answer is a deterministic function of them. Nothing modifies a
    ``_Points``."""
    grid = np.array(resident, dtype=np.float64)
    key = ("open_loop_points", p, n, cv, grid.shape, grid.tobytes())
    return shared_value(model, key, lambda: _compute_points(model, grid, p, n, cv))


def _compute_points(
    model: StepTimeModel, resident: np.ndarray, p: float, n: float, cv: float
) -> _Points:
    budget, _ = _budget(model)
    pp = float(model.inventory.pipeline_parallel_size)
    pa, na = np.full_like(resident, p), np.full_like(resident, n)
    ctx = pa + na / 2
    queue = np.zeros_like(resident)
    state = _steady_steps(model, resident, pa, na, ctx, budget, pp, queue)
    for _ in range(QUEUE_ITERATIONS):
        rate = resident / (state.steps * state.mean_step_s)
        queue = _prefill_queue_s(state, rate, resident, 0.0, cv * cv)
        state = _steady_steps(model, resident, pa, na, ctx, budget, pp, queue)
    rate = resident / (state.steps * state.mean_step_s)
    rho = rate * state.own_prefill_s / state.parallel_prefills
    return _Points(
        resident=resident,
        rate_per_s=rate,
        state=state,
        queue_s=_prefill_queue_s(state, rate, resident, 0.0, cv * cv),
        prefill_utilization=np.minimum(rho, 1.0),
    )


def _chain(
    model: StepTimeModel, point: _Points, p: float, n: float, cv: float = 1.0
) -> BatchChain | BacklogChain | None:
    """The batch chain at each point (:mod:`.batchchain`), or None where it does not apply:
    the budget holds fewer than :data:`CHAIN_MIN_PROMPTS` prompts, or there is a pipeline.
    Steps carry ``b`` decodes (the steady decode batch) and up to ``budget/P`` whole prompts; a
    step without prompts is running only a fraction ``min(L, 1)`` of the time."""
    budget, _ = _budget(model)
    # One model and one cap along the whole load axis: switching either as the decodes grow
    # would make TTFT fall with load. (With chunked prefill the decodes' share of the budget
    # only delays a part of the last prompt.)
    cap_prompts = min(math.floor(budget / p), CHAIN_MAX_PROMPTS)
    if cap_prompts < CHAIN_MIN_PROMPTS or model.inventory.pipeline_parallel_size != 1:
        return None
    resident = point.resident
    decodes = resident * (n - 1) / np.maximum(point.state.steps, 1e-12)
    size = cap_prompts + 1
    count = resident.size
    prompts = np.tile(np.arange(1, size, dtype=np.float64), count)
    ctx = p + n / 2
    work = StepWork.concatenate(
        [
            StepWork.decode(decodes, ctx),
            StepWork.mixed(
                prefill_tokens=p,
                prefill_sequences=prompts,
                decode_sequences=np.repeat(decodes, size - 1),
                decode_context_tokens=ctx,
            ),
        ]
    )
    times = np.asarray(model.step_time(work).total_s, dtype=np.float64)
    step = np.empty((count, size))
    step[:, 0] = times[:count] * np.minimum(resident, 1.0)
    step[:, 1:] = times[count:].reshape(count, size - 1)
    if cv > 1.0:
        # Bursts overflow a step's K prompts: the backlog carries over (.backlogchain).
        return backlog_chain(step, point.rate_per_s, cap_prompts, cv)
    cap = np.full(count, cap_prompts, dtype=np.int64)
    return batch_chain(step, point.rate_per_s, cap=cap)


def _ttft_quantiles(
    *,
    fixed_s: float,
    busy: float,
    mix_time_share: float,
    mix_step_s: float,
    decode_step_s: float,
    wait_s: float,
    rho: float,
    quantiles: tuple[float, ...],
) -> dict[float, float]:
    """Quantiles of ``fixed + R + W_q`` by sampling (fixed seed, so deterministic).

    ``R``: with probability ``busy`` the arrival finds a step running, a mixed one with
    probability ``mix_time_share`` (its share of busy time), and waits for a uniform fraction of
    it. ``W_q``: with probability ``ρ`` an exponential wait of mean ``W_q/ρ``."""
    rng = np.random.default_rng(TAIL_SEED)
    u = rng.random((3, TAIL_SAMPLES))
    step = np.where(u[0] < mix_time_share, mix_step_s, decode_step_s)
    residual = np.where(u[1] < busy, rng.random(TAIL_SAMPLES) * step, 0.0)
    waits = np.zeros(TAIL_SAMPLES)
    if rho > 0 and wait_s > 0:
        waiting = u[2] < rho
        waits[waiting] = rng.exponential(wait_s / rho, int(waiting.sum()))
    values = np.quantile(fixed_s + residual + waits, quantiles)
    return {q: float(v) for q, v in zip(quantiles, values, strict=True)}


def open_loop(
    model: StepTimeModel,
    *,
    arrival_rate_per_s: float,
    input_tokens: int,
    output_tokens: int,
    kv_capacity_tokens: int | None = None,
    arrival_cv: float = 1.0,
) -> OpenLoopEstimate:
    """Steady state of arrivals at ``arrival_rate_per_s`` (see the module docstring), Poisson
    or, with ``arrival_cv`` > 1, a renewal process of that gap CV (gamma gaps, as the
    simulator's ``process="gamma"`` draws): the prompts that arrive during a step are
    negative-binomial (:func:`~servesize.core.steptime.batchchain.arrivals_pmf`), the wait
    behind other prompts scaled by ``c²``.

    Raises
    ------
    ValueError
        For a non-positive rate or lengths.
    UnstableQueueError
        When the rate reaches the saturation rate.
    """
    if not (math.isfinite(arrival_rate_per_s) and arrival_rate_per_s > 0):
        raise ValueError(f"arrival_rate_per_s must be > 0, got {arrival_rate_per_s!r}")
    if input_tokens < 1 or output_tokens < 1:
        raise ValueError("input_tokens and output_tokens must be >= 1")
    p, n = float(input_tokens), float(output_tokens)
    cap = float(
        resident_capacity(
            model, input_tokens=p, output_tokens=n, kv_capacity_tokens=kv_capacity_tokens
        )[0]
    )
    cv = float(arrival_cv)
    saturation = float(_points(model, np.array([cap]), p, n, cv).rate_per_s[0])
    if arrival_rate_per_s >= saturation:
        raise UnstableQueueError(arrival_rate_per_s / saturation)
    # Bracket X(L) = λ on a geometric grid, then refine once inside the bracket.
    low, high = 1e-6, cap
    for _ in range(REFINEMENTS):
        grid = np.geomspace(low, high, GRID_POINTS)
        rates = _points(model, grid, p, n, cv).rate_per_s
        above = int(np.searchsorted(np.maximum.accumulate(rates), arrival_rate_per_s))
        low, high = grid[max(above - 1, 0)], grid[min(above, GRID_POINTS - 1)]
    point = _points(model, np.array([0.5 * (low + high)]), p, n, cv)
    state = point.state
    queue_s = float(point.queue_s[0])
    rho = float(point.prefill_utilization[0])
    z = model.engine.request_overhead_s
    resident = float(point.resident[0])
    # A request finds a step running only while the engine is busy: with fewer than one
    # resident sequence on average that is a fraction ``L`` of the time.
    base = z + min(resident, 1.0) * float(state.residual_s[0]) + float(state.own_prefill_s[0])
    ttft_mean = base + queue_s
    tpot = float(state.mean_step_s[0]) if output_tokens > 1 else 0.0
    mean_step = float(state.mean_step_s[0])
    share = float(state.mix_share[0])
    mix_step = float(state.mix_step_s[0])
    chain = _chain(model, point, p, n, cv)
    if chain is not None:
        ttft_mean = z + float(chain.mean_s()[0])
        quantiles = {q: z + float(chain.quantile_s(q)[0]) for q in (0.5, 0.95, 0.99)}
    else:
        quantiles = _ttft_quantiles(
            fixed_s=z + float(state.own_prefill_s[0]),
            busy=min(resident, 1.0),
            mix_time_share=share * mix_step / max(mean_step, 1e-12),
            mix_step_s=mix_step,
            decode_step_s=float(state.decode_step_s[0]),
            wait_s=queue_s,
            rho=rho,
            quantiles=(0.5, 0.95, 0.99),
        )
    return OpenLoopEstimate(
        arrival_rate_per_s=arrival_rate_per_s,
        saturation_rate_per_s=saturation,
        utilization=arrival_rate_per_s / saturation,
        resident_sequences=resident,
        mean_step_s=float(state.mean_step_s[0]),
        tpot_s=tpot,
        ttft_mean_s=ttft_mean,
        ttft_p50_s=quantiles[0.5],
        ttft_p95_s=quantiles[0.95],
        ttft_p99_s=quantiles[0.99],
        prefill_wait_mean_s=queue_s,
        prefill_utilization=rho,
        e2e_mean_s=ttft_mean + tpot * (output_tokens - 1),
        throughput_output_tokens_per_s=arrival_rate_per_s * output_tokens,
    )


CURVE_POINTS = 96
"""Resident counts on the curve's geometric grid: neighbouring rates differ by about 15 %."""
CURVE_LOW_RESIDENT = 1e-3
QUANTILE_BISECTIONS = 48


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenLoopCurve:
    """The open-loop steady state along the whole load axis, one entry per grid point (arrays of
    one shape, rates strictly increasing; the last point is the saturation rate).

    With a batch chain (:attr:`chain`), TTFT follows it as in :func:`open_loop`. Without one
    it is ``fixed_s + R + W``: ``R`` is ``0`` with
    probability ``1 − busy``, else uniform on ``[0, τ_mix]`` (probability
    ``busy·mix_time_share``) or on ``[0, τ_dec]``; ``W`` is ``0`` with probability ``ρ``'s
    complement, else exponential of mean ``W_q/ρ``. :meth:`ttft_quantile` inverts that
    distribution exactly (no sampling), so it agrees with :func:`open_loop`'s sampled quantiles
    up to their Monte-Carlo error.
    """

    rate_per_s: np.ndarray
    saturation_rate_per_s: float
    resident_sequences: np.ndarray
    output_tokens: float
    tpot_s: np.ndarray
    mean_step_s: np.ndarray
    mix_step_s: np.ndarray
    decode_step_s: np.ndarray
    mix_share: np.ndarray
    """Fraction of steps that carry prefill tokens: the share of a decode's token gaps that are
    mixed steps."""
    fixed_s: np.ndarray
    """Request overhead plus the request's own prefill."""
    busy: np.ndarray
    """Probability that an arrival finds a step running: ``min(L, 1)``."""
    mix_time_share: np.ndarray
    prefill_wait_mean_s: np.ndarray
    prefill_utilization: np.ndarray
    request_overhead_s: float = 0.0
    chain: BatchChain | BacklogChain | None = None
    """The batch chain at each point, which then gives TTFT (None: ``fixed + R + W`` does)."""

    @property
    def ttft_mean_s(self) -> np.ndarray:
        """``fixed + busy·E[τ²]/(2E[τ]) + W_q``, or the batch chain's mean."""
        if self.chain is not None:
            return np.asarray(self.request_overhead_s + self.chain.mean_s())
        residual = 0.5 * (
            self.mix_time_share * self.mix_step_s + (1 - self.mix_time_share) * self.decode_step_s
        )
        return np.asarray(self.fixed_s + self.busy * residual + self.prefill_wait_mean_s)

    def ttft_cdf(self, ttft_s: np.ndarray | float) -> np.ndarray:
        """``P(TTFT <= ttft_s)`` at every point (``ttft_s`` broadcast against the grid).

        With ``U·a + E`` for a uniform ``U`` on ``[0, 1]`` and an exponential ``E`` of mean
        ``m``: ``P(U·a + E <= t) = (min(t, a) − m·(e^{−(t − min(t, a))/m} − e^{−t/m}))/a``.
        """
        if self.chain is not None:
            after = np.broadcast_to(
                np.asarray(ttft_s, dtype=np.float64) - self.request_overhead_s, self.fixed_s.shape
            )
            return np.asarray(np.clip(self.chain.cdf(after), 0.0, 1.0), dtype=np.float64)
        t = np.asarray(ttft_s, dtype=np.float64) - self.fixed_s
        rho = self.prefill_utilization
        wait = self.prefill_wait_mean_s
        has_wait = (rho > 0) & (wait > 0)
        mean_exp = np.where(has_wait, wait / np.where(has_wait, rho, 1.0), 1.0)
        rho = np.where(has_wait, rho, 0.0)
        tp = np.maximum(t, 0.0)

        def uniform_plus_wait(a: np.ndarray) -> np.ndarray:
            safe = np.maximum(a, 1e-300)
            head = np.minimum(tp, a)
            alone = np.where(a > 0, head / safe, 1.0)
            with np.errstate(over="ignore"):
                joint_u = (
                    head - mean_exp * (np.exp(-(tp - head) / mean_exp) - np.exp(-tp / mean_exp))
                ) / safe
            joint = np.where(a > 0, joint_u, 1.0 - np.exp(-tp / mean_exp))
            return np.asarray((1 - rho) * alone + rho * joint)

        idle = (1 - rho) + rho * (1.0 - np.exp(-tp / mean_exp))
        share = self.mix_time_share
        cdf = (1 - self.busy) * idle + self.busy * (
            share * uniform_plus_wait(self.mix_step_s)
            + (1 - share) * uniform_plus_wait(self.decode_step_s)
        )
        return np.asarray(np.where(t < 0, 0.0, np.clip(cdf, 0.0, 1.0)), dtype=np.float64)

    def ttft_quantile(self, q: float) -> np.ndarray:
        """The ``q``-quantile of TTFT at every point, by bisection on :meth:`ttft_cdf` (on the
        batch chain's own law when there is one)."""
        if not 0.0 < q < 1.0:
            raise ValueError(f"q must be in (0, 1), got {q}")
        if self.chain is not None:
            return np.asarray(self.request_overhead_s + self.chain.quantile_s(q))
        rho = self.prefill_utilization
        wait = self.prefill_wait_mean_s
        mean_exp = np.where((rho > 0) & (wait > 0), wait / np.maximum(rho, 1e-300), 0.0)
        low = np.array(self.fixed_s, dtype=np.float64)
        # P(R <= max step) = 1 and P(E <= m·ln(1/(1-q))) = q bound the quantile from above.
        high = (
            low + np.maximum(self.mix_step_s, self.decode_step_s) + mean_exp * math.log(1 / (1 - q))
        )
        for _ in range(QUANTILE_BISECTIONS):
            mid = 0.5 * (low + high)
            below = self.ttft_cdf(mid) < q
            low = np.where(below, mid, low)
            high = np.where(below, high, mid)
        return np.asarray(high, dtype=np.float64)

    def itl_quantile(self, q: float) -> np.ndarray:
        """Mean-field ITL quantile (docs/modeling.md §2.8): a decode's gaps are mixed steps with
        probability ``mix_share``, so the ``q``-quantile is ``τ_mix`` once
        ``mix_share > 1 − q``, else ``τ_dec``."""
        return np.asarray(np.where(self.mix_share > 1 - q, self.mix_step_s, self.decode_step_s))

    def take(self, index: np.ndarray | list[int] | int) -> OpenLoopCurve:
        """The curve at the given grid points only."""
        i = np.atleast_1d(np.asarray(index, dtype=np.int64))
        return OpenLoopCurve(
            rate_per_s=self.rate_per_s[i],
            saturation_rate_per_s=self.saturation_rate_per_s,
            resident_sequences=self.resident_sequences[i],
            output_tokens=self.output_tokens,
            tpot_s=self.tpot_s[i],
            mean_step_s=self.mean_step_s[i],
            mix_step_s=self.mix_step_s[i],
            decode_step_s=self.decode_step_s[i],
            mix_share=self.mix_share[i],
            fixed_s=self.fixed_s[i],
            busy=self.busy[i],
            mix_time_share=self.mix_time_share[i],
            prefill_wait_mean_s=self.prefill_wait_mean_s[i],
            prefill_utilization=self.prefill_utilization[i],
            request_overhead_s=self.request_overhead_s,
            chain=None if self.chain is None else self.chain.take(i),
        )

    def interpolate(self, values: np.ndarray, rate_per_s: float) -> float:
        """A per-point quantity at ``rate_per_s``, linear in the rate between grid points."""
        return float(np.interp(rate_per_s, self.rate_per_s, values))


def open_loop_curve(
    model: StepTimeModel,
    *,
    input_tokens: float,
    output_tokens: float,
    kv_capacity_tokens: int | None = None,
    points: int = CURVE_POINTS,
    arrival_cv: float = 1.0,
) -> OpenLoopCurve:
    """:func:`open_loop` at every rate at once: the mean-field state on a geometric grid of
    resident counts from ``1e-3`` to the residency cap, in one vectorised pass (~100× fewer step
    evaluations than bisecting over :func:`open_loop`). Quantities between grid points are
    interpolated in the rate.
    """
    if input_tokens < 1 or output_tokens < 1:
        raise ValueError("input_tokens and output_tokens must be >= 1")
    if points < 2:
        raise ValueError(f"points must be >= 2, got {points}")
    p, n = float(input_tokens), float(output_tokens)
    cap = float(
        resident_capacity(
            model, input_tokens=p, output_tokens=n, kv_capacity_tokens=kv_capacity_tokens
        )[0]
    )
    grid = np.geomspace(min(CURVE_LOW_RESIDENT, cap / 2), cap, points)
    cv = float(arrival_cv)
    point = _points(model, grid, p, n, cv)
    rate = point.rate_per_s
    # Keep the points where the completion rate still grows (X(L) is increasing in the
    # mean-field model up to rounding; the cap point is the saturation rate).
    keep = np.concatenate([[True], rate[1:] > np.maximum.accumulate(rate)[:-1]])
    state = point.state
    mean = state.mean_step_s
    share = state.mix_share
    resident = point.resident
    z = model.engine.request_overhead_s
    chain = _chain(model, point, p, n, cv)

    def kept(values: np.ndarray) -> np.ndarray:
        return np.asarray(values[keep], dtype=np.float64)

    return OpenLoopCurve(
        rate_per_s=kept(rate),
        saturation_rate_per_s=float(np.max(rate)),
        resident_sequences=kept(resident),
        output_tokens=n,
        tpot_s=kept(mean if n > 1 else np.zeros_like(mean)),
        mean_step_s=kept(mean),
        mix_step_s=kept(state.mix_step_s),
        decode_step_s=kept(state.decode_step_s),
        mix_share=kept(share),
        fixed_s=kept(z + state.own_prefill_s),
        busy=kept(np.minimum(resident, 1.0)),
        mix_time_share=kept(share * state.mix_step_s / np.maximum(mean, 1e-12)),
        prefill_wait_mean_s=kept(point.queue_s),
        prefill_utilization=kept(point.prefill_utilization),
        request_overhead_s=z,
        chain=None if chain is None else chain.take(np.flatnonzero(keep)),
    )
