"""Steady-state serving estimates (no queueing simulation): zero-load TTFT, closed loop, max
throughput.

**Closed loop.** ``C`` clients each send a request of ``P`` prompt tokens and ``n`` output
tokens and send the next one as soon as the last token arrives (what a benchmark at
concurrency ``C`` does). In steady state the engine holds ``L`` resident sequences: fewer than
``C`` while clients spend the per-request overhead ``Z`` outside the engine (HTTP,
tokenisation) or wait for admission because ``max_num_seqs`` or the KV cache caps residency at
``L_cap``. Mean-field, every resident request lives ``N`` steps: ``k = ⌈P/(M − b̄)⌉`` steps
carrying its prompt, ``W_q/τ̄`` steps queued behind other prompts, and ``n − 1`` decode steps.
Per step there are

``b̄ = L(n−1)/N`` decodes and ``ū = L·P/N`` prefill tokens, with
``N = max(n − 1 + k + W_q/τ̄, L(P + n − 1)/M)``

(the second term: every step filled to the token budget ``M``). Prefill tokens come in chunks
of ``c = min(M − b̄, max(ū, P))``, so a fraction ``f = ū/c`` of steps carries one:

``τ̄ = f·τ_mix + (1 − f)·τ_dec``, ``τ_mix = τ(c prefill tokens + b̄ decodes)``,
``τ_dec = τ(b̄ decodes)``,

decodes attending to ``P + n/2`` tokens on average. Then

- throughput ``X = L / (N·τ̄)`` requests/s, ``n·X`` output tokens/s;
- ``TPOT = τ̄``: a decoding request advances one token per step, mixed steps included;
- ``TTFT = Z + W + R + W_q + S``: request overhead; admission wait ``W = C/X − Z − N·τ̄``
  (response-time law, positive only when ``L_cap`` binds); the rest of the step running at
  arrival ``R = E[τ²]/(2E[τ])`` (length-biased); the wait behind other prompts ``W_q``; and
  the request's own prefill ``S`` (one step when its prompt fits, else its share of ``k``
  chunked steps);
- ``W_q``: prompts are served ``m = ⌊(M − b̄)/P⌋`` per step, so with ``ρ = X·S/m``,
  ``W_q = ρ(S/m)/(2(1 − ρ)) + κ(L − 1)(S/m)/2`` (M/D/1 plus the mean position in a clump of
  ``1 + κ(L − 1)`` arrivals), at most ``(L − 1)S/m``. ``κ`` is the engine's
  ``arrival_clumping``: closed-loop clients with equal lengths finish together and so return
  together;
- ``L`` solves ``L = min(L_cap, C·Nτ̄/(Z + Nτ̄))``, iterated to a fixed point with ``W_q``.

This is AIConfigurator's mix-step / decode-step decomposition
(ai-dynamo/aiconfigurator:aic-core/src/aiconfigurator_core/sdk/backends/base_backend.py,
``run_agg``) with its empirical TTFT factors (``vllm_backend.py: _ttft_queuing_factor``)
replaced by explicit queue terms, and the fixed point of docs/modeling.md §2.8 at a fixed
concurrency instead of a fixed arrival rate. With pipeline parallelism, ``PP`` micro-batches of
``1/PP`` of the batch are in flight (vLLM V1's batch queue of
``MultiprocExecutor.max_concurrent_batches`` = ``pipeline_parallel_size`` batches) and a
token crosses every stage (and ``PP − 1`` hand-offs) once per step; with fewer sequences than
stages the idle stages are the pipeline bubble, and TPOT is the full latency through the
pipeline.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from servesize.core.steptime._arrays import ArrayLike, FloatArray, StrArray, as_float_array
from servesize.core.steptime.fast import fast_step_time
from servesize.core.steptime.memo import memoized_estimate
from servesize.core.steptime.model import StepTime, StepTimeModel
from servesize.core.steptime.point import CONVERGED_RTOL, residency_point, steady_point
from servesize.core.steptime.wave import WAVE_POLICIES, engine_wave_policy, lockstep_loop
from servesize.core.steptime.work import StepWork

__all__ = [
    "FIXED_POINT_ITERATIONS",
    "ServingEstimate",
    "closed_loop",
    "max_throughput",
    "prefill_time_s",
    "resident_capacity",
    "zero_load_ttft_s",
]

FIXED_POINT_ITERATIONS = 16
"""Most passes of the residency fixed point (see ``_residency``); the damped fallback runs this
many (within 1e-5 relative of the fixed point on the H100 set)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingEstimate:
    """Closed-loop steady state at each workload point (all fields have shape ``(n,)``)."""

    concurrency: FloatArray
    input_tokens: FloatArray
    output_tokens: FloatArray
    prefill_time_s: FloatArray
    """One prompt alone on an idle engine (engine time, no request overhead)."""
    ttft_zero_load_s: FloatArray
    decode_step_time_s: FloatArray
    """A decode-only step with every resident sequence decoding."""
    step_time_s: FloatArray
    """Mean step time ``τ̄`` in steady state."""
    ttft_s: FloatArray
    tpot_s: FloatArray
    throughput_output_tokens_per_s: FloatArray
    request_rate_per_s: FloatArray
    resident_sequences: FloatArray
    admission_wait_s: FloatArray
    prefill_bound: StrArray
    decode_bound: StrArray
    prefill_arithmetic_intensity: FloatArray
    decode_arithmetic_intensity: FloatArray
    sources: Mapping[str, str]


def _budget(model: StepTimeModel) -> tuple[float, float]:
    dp = model.inventory.data_parallel_size
    eng = model.engine
    return float(eng.max_num_batched_tokens * dp), float(eng.max_num_seqs * dp)


def _prefill_chunks(model: StepTimeModel, prompt: FloatArray) -> tuple[StepWork, int]:
    """Every prompt alone, chunked by the step budget: ``chunks`` rows of ``len(prompt)``
    steps (a prompt's later rows are empty once it is done)."""
    budget, _ = _budget(model)
    chunks = int(np.max(np.ceil(prompt / budget))) if prompt.size else 0
    chunks = max(chunks, 1)
    starts = np.arange(chunks)[:, None] * budget
    sizes = np.clip(prompt[None, :] - starts, 0.0, budget)
    work = StepWork.prefill(sizes.ravel(), sequences=1, cached_tokens=starts.repeat(prompt.size))
    return work, chunks


def _chunked_prefill(model: StepTimeModel, prompt: FloatArray) -> tuple[FloatArray, StepTime]:
    """Engine time of each prompt alone, chunked by the step budget."""
    work, chunks = _prefill_chunks(model, prompt)
    steps = model.step_time(work)
    total = steps.total_s.reshape(chunks, prompt.size).sum(axis=0)
    return np.asarray(total, dtype=np.float64), steps[0 : prompt.size]


def _reported_steps(
    model: StepTimeModel, decodes: FloatArray, ctx: FloatArray, prompt: FloatArray
) -> tuple[StepTime, FloatArray, StepTime]:
    """The decode step of ``max(decodes, 1)`` sequences at ``ctx`` and :func:`_chunked_prefill`
    of ``prompt``, in one vectorised call (each step is costed on its own, so the numbers are
    those of two calls)."""
    n = prompt.size
    decode_work = StepWork.decode(np.maximum(decodes, 1.0), ctx)
    prefill_work, chunks = _prefill_chunks(model, prompt)
    steps = model.step_time(StepWork.concatenate([decode_work, prefill_work]))
    total = steps.total_s[n:].reshape(chunks, n).sum(axis=0)
    return steps[0:n], np.asarray(total, dtype=np.float64), steps[n : 2 * n]


def prefill_time_s(model: StepTimeModel, input_tokens: ArrayLike) -> FloatArray:
    """Engine time to prefill one prompt of ``input_tokens`` on an idle engine.

    >>> from servesize.core.architecture import parse_architecture
    >>> from servesize.core.hardware import HardwareSpec
    >>> from servesize.core.steptime import build_step_model
    >>> gpu = HardwareSpec(id="x", vendor="v", name="X", memory_bytes=2**30,
    ...                    memory_bandwidth_bytes_per_s=10**12, peak_tflop_per_s={"bf16": 100.0})
    >>> arch = parse_architecture(
    ...     {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "head_dim": 16,
    ...      "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 128,
    ...      "vocab_size": 100}, name="toy")
    >>> t = prefill_time_s(build_step_model(arch, gpu, calibrated=False), [100, 20_000])
    >>> bool(t[1] > t[0] > 0)
    True
    """
    total, _ = _chunked_prefill(model, as_float_array(input_tokens))
    return total


def zero_load_ttft_s(model: StepTimeModel, input_tokens: ArrayLike) -> FloatArray:
    """TTFT of a lone request: the engine's request overhead plus :func:`prefill_time_s`."""
    return prefill_time_s(model, input_tokens) + model.engine.request_overhead_s


def resident_capacity(
    model: StepTimeModel,
    *,
    input_tokens: ArrayLike,
    output_tokens: ArrayLike,
    kv_capacity_tokens: ArrayLike | None = None,
) -> FloatArray:
    """Most sequences the engine keeps resident: ``max_num_seqs``, and the KV cache divided by
    the tokens a sequence holds (``P + n`` when reserved at admission, ``P + n/2`` on average
    when allocated as it grows)."""
    p = as_float_array(input_tokens)
    n = as_float_array(output_tokens)
    _, seqs = _budget(model)
    cap = np.full(np.broadcast(p, n).shape, seqs)
    if kv_capacity_tokens is not None:
        held = p + (n if model.engine.kv_reservation == "full" else n / 2)
        cap = np.minimum(cap, np.maximum(np.floor(as_float_array(kv_capacity_tokens) / held), 1.0))
    return np.asarray(cap, dtype=np.float64)


def closed_loop(
    model: StepTimeModel,
    *,
    concurrency: ArrayLike,
    input_tokens: ArrayLike,
    output_tokens: ArrayLike,
    kv_capacity_tokens: ArrayLike | None = None,
    policy: str | None = None,
    output_delay_steps: int = 0,
    mean_field: bool = False,
) -> ServingEstimate:
    """Steady state of ``concurrency`` clients with fixed lengths (see the module docstring).

    ``kv_capacity_tokens``: KV-cache tokens the engine can hold (from the memory ledger); None
    leaves only ``max_num_seqs`` to cap residency. ``policy``: the simulator's scheduling
    policy (``SchedulingPolicy``; None: the engine's default), ``output_delay_steps`` its
    overlap-scheduler delay. Where the engine holds every client (``C ≤ L_cap``), TTFT, TPOT and
    throughput are those of the lock-step loop (:func:`~servesize.core.steptime.wave.
    lockstep_loop`), which is what the simulator does with such clients; beyond, the
    mean-field model with its admission wait. ``mean_field=True`` keeps the mean-field model
    everywhere (clients out of step, as lengths drawn from a range leave them). One point is
    kept by its inputs for this model object (:mod:`~servesize.core.steptime.memo`): asked
    again, it is the same answer without the computation.
    """
    c, p, n = np.broadcast_arrays(
        as_float_array(concurrency), as_float_array(input_tokens), as_float_array(output_tokens)
    )
    c, p, n = (np.asarray(v, dtype=np.float64) for v in (c, p, n))
    if np.any(c < 1) or np.any(p < 1) or np.any(n < 1):
        raise ValueError("concurrency, input_tokens and output_tokens must all be >= 1")
    if c.size == 1:
        kv = None if kv_capacity_tokens is None else as_float_array(kv_capacity_tokens)
        if kv is None or kv.size == 1:
            point = (float(c[0]), float(p[0]), float(n[0]), None if kv is None else float(kv[0]))
            return memoized_estimate(
                model,
                (*point, policy, output_delay_steps, mean_field),
                lambda: _closed_loop_point(
                    model,
                    *point,
                    policy=policy,
                    output_delay_steps=output_delay_steps,
                    mean_field=mean_field,
                ),
            )
    budget, _ = _budget(model)
    z = model.engine.request_overhead_s
    cap = resident_capacity(
        model, input_tokens=p, output_tokens=n, kv_capacity_tokens=kv_capacity_tokens
    )
    pp = float(model.inventory.pipeline_parallel_size)
    ctx = p + n / 2
    resident, queue = _residency(model, c, cap, p, n, ctx, budget, pp)
    state = _steady_steps(model, resident, p, n, ctx, budget, pp, queue)
    life = state.steps * state.mean_step_s
    rate = resident / life
    wait = np.maximum(c / rate - z - life, 0.0)
    queued = np.maximum(state.steps - (n - 1) - state.prefill_steps, 0.0) * state.mean_step_s
    ttft = z + wait + state.residual_s + queued + state.own_prefill_s
    tpot = _decode_phase_step_s(state, n)
    rule = WAVE_POLICIES.get(policy or "", engine_wave_policy(model.engine.name))
    for i in np.flatnonzero(c <= cap) if not mean_field else ():
        loop = lockstep_loop(
            model,
            clients=int(c[i]),
            input_tokens=int(p[i]),
            output_tokens=int(n[i]),
            policy=rule,
            overhead_s=z,
            output_delay_steps=output_delay_steps,
        )
        ttft[i], tpot[i], rate[i] = loop.ttft_s, loop.tpot_s, loop.request_rate_per_s
        wait[i] = 0.0
    decode, prefill_total, prefill_steps = _reported_steps(model, resident / pp, ctx, p)
    return ServingEstimate(
        concurrency=c,
        input_tokens=p,
        output_tokens=n,
        prefill_time_s=prefill_total,
        ttft_zero_load_s=prefill_total + z,
        decode_step_time_s=decode.total_s,
        step_time_s=state.mean_step_s,
        ttft_s=ttft,
        tpot_s=np.where(n > 1, tpot, 0.0),
        throughput_output_tokens_per_s=rate * n,
        request_rate_per_s=rate,
        resident_sequences=resident,
        admission_wait_s=wait,
        prefill_bound=prefill_steps.bound,
        decode_bound=decode.bound,
        prefill_arithmetic_intensity=prefill_steps.arithmetic_intensity,
        decode_arithmetic_intensity=decode.arithmetic_intensity,
        sources=dict(model.sources),
    )


def _residency(
    model: StepTimeModel,
    c: FloatArray,
    cap: FloatArray,
    p: FloatArray,
    n: FloatArray,
    ctx: FloatArray,
    budget: float,
    pp: float,
) -> tuple[FloatArray, FloatArray]:
    """The fixed point ``(L, W_q)`` of ``L = min(L_cap, C·Nτ̄/(Z + Nτ̄))`` with the prefill
    queue. The map is nearly flat (``L`` enters only through the step times), so it is iterated
    undamped from ``(min(C, L_cap), 0)`` until a pass moves both by at most
    :data:`~servesize.core.steptime.point.CONVERGED_RTOL` relative (about 6 passes, against the
    16 damped ones that stopped ``2^-16`` of the first gap short of the fixed point). A point
    whose passes do not halve their move every pass (a step in ``⌈P/(M − b̄)⌉``, a queue near
    saturation), or that has not converged after ``FIXED_POINT_ITERATIONS`` passes, takes the
    damped iteration instead: ``FIXED_POINT_ITERATIONS`` passes of
    ``x ← x/2 + g(x)/2`` from the same start. Every point is decided on its own, as
    ``point.residency_point`` decides one."""
    z = model.engine.request_overhead_s
    clumping = model.engine.arrival_clumping
    resident = np.minimum(c, cap)
    queue = np.zeros_like(c)
    active = np.ones(c.shape, dtype=bool)
    damped = np.zeros(c.shape, dtype=bool)
    moved_r = np.full(c.shape, np.inf)
    moved_q = np.full(c.shape, np.inf)
    for _ in range(FIXED_POINT_ITERATIONS):
        state = _steady_steps(model, resident, p, n, ctx, budget, pp, queue)
        life = state.steps * state.mean_step_s
        new_r = np.minimum(cap, np.maximum(c * life / (z + life), 1.0))
        new_q = _prefill_queue_s(state, new_r / life, new_r, clumping)
        dr, dq = np.abs(new_r - resident), np.abs(new_q - queue)
        resident = np.where(active, new_r, resident)
        queue = np.where(active, new_q, queue)
        done = (dr <= CONVERGED_RTOL * np.abs(new_r)) & (dq <= CONVERGED_RTOL * np.abs(new_q))
        stuck = ~done & ((dr > 0.5 * moved_r) | (dq > 0.5 * moved_q))
        damped |= active & stuck
        active &= ~done & ~stuck
        moved_r, moved_q = dr, dq
        if not active.any():
            break
    damped |= active
    if damped.any():
        slow_r, slow_q = _damped_residency(model, c, cap, p, n, ctx, budget, pp)
        resident = np.where(damped, slow_r, resident)
        queue = np.where(damped, slow_q, queue)
    return resident, queue


def _damped_residency(
    model: StepTimeModel,
    c: FloatArray,
    cap: FloatArray,
    p: FloatArray,
    n: FloatArray,
    ctx: FloatArray,
    budget: float,
    pp: float,
) -> tuple[FloatArray, FloatArray]:
    """``FIXED_POINT_ITERATIONS`` passes damped by one half (see :func:`_residency`)."""
    z = model.engine.request_overhead_s
    resident = np.minimum(c, cap)
    queue = np.zeros_like(c)
    for _ in range(FIXED_POINT_ITERATIONS):
        state = _steady_steps(model, resident, p, n, ctx, budget, pp, queue)
        life = state.steps * state.mean_step_s
        demand = c * life / (z + life)
        before = resident, queue
        resident = 0.5 * resident + 0.5 * np.minimum(cap, np.maximum(demand, 1.0))
        queue = 0.5 * queue + 0.5 * _prefill_queue_s(
            state, resident / life, resident, model.engine.arrival_clumping
        )
        if np.array_equal(resident, before[0]) and np.array_equal(queue, before[1]):
            break  # a fixed point to the last bit: further passes repeat it
    return resident, queue


def max_throughput(
    model: StepTimeModel,
    *,
    input_tokens: ArrayLike,
    output_tokens: ArrayLike,
    kv_capacity_tokens: ArrayLike | None = None,
) -> ServingEstimate:
    """The closed loop with as many clients as the engine can keep resident (throughput is
    non-decreasing in concurrency up to that point; beyond it only the admission wait grows)."""
    p = as_float_array(input_tokens)
    n = as_float_array(output_tokens)
    cap = resident_capacity(
        model, input_tokens=p, output_tokens=n, kv_capacity_tokens=kv_capacity_tokens
    )
    return closed_loop(
        model,
        concurrency=cap,
        input_tokens=p,
        output_tokens=n,
        kv_capacity_tokens=kv_capacity_tokens,
    )


@dataclass(frozen=True, slots=True)
class _Steps:
    steps: FloatArray
    """Steps a request stays in the engine: queued, prefilling and decoding."""
    prefill_steps: FloatArray
    """Steps carrying its own prompt: ``⌈P / (M − b̄)⌉``."""
    mean_step_s: FloatArray
    mix_step_s: FloatArray
    decode_step_s: FloatArray
    """A step carrying only decodes."""
    mix_share: FloatArray
    """Fraction of steps that carry prefill tokens."""
    own_prefill_s: FloatArray
    """Time from a request's first prefill step to its first token: one whole step when its
    prompt fits (it shares the step with others), else ``k·τ_dec + (P/c)·(τ_mix − τ_dec)``."""
    residual_s: FloatArray
    """Mean remaining time of the step a new request arrives in: ``E[τ²] / (2 E[τ])``."""
    parallel_prefills: FloatArray
    """Whole prompts that fit in one step's free budget (at least 1)."""


def _decode_phase_step_s(state: _Steps, n: FloatArray) -> FloatArray:
    """Mean step after a request's first token (its TPOT): of the ``f·N`` mixed steps of its
    lifetime its own ``k`` prefill steps come before the first token, so the other ``f·N − k``
    fall on its ``N − k`` other steps evenly and its decode steps are mixed with probability
    ``f_d = (f·N − k)/(N − k)``; ``TPOT = f_d·τ_mix + (1 − f_d)·τ_dec`` (``= τ_dec`` for one
    client, whose only prefill is its own)."""
    others = np.maximum(state.mix_share * state.steps - state.prefill_steps, 0.0)
    rest = np.maximum(state.steps - state.prefill_steps, 1e-12)
    share = np.clip(others / rest, 0.0, 1.0)
    return np.asarray(
        share * state.mix_step_s + (1 - share) * state.decode_step_s, dtype=np.float64
    )


def _prefill_queue_s(
    state: _Steps,
    rate: FloatArray,
    resident: FloatArray,
    clumping: float,
    arrival_scv: float = 1.0,
) -> FloatArray:
    """Mean wait behind other prompts. Prompts are served ``m`` per step, each in ``S`` (own
    prefill time), so the effective service is ``S/m`` and ``ρ = X·S/m``. Poisson-like
    arrivals wait ``ρ·(S/m)/(2(1 − ρ))`` (M/D/1); arrivals in clumps of
    ``g = 1 + κ(L − 1)`` add ``(g − 1)/2·(S/m)`` (the mean position in the clump). The total is
    at most ``(L − 1)·S/m``: everyone else ahead. Renewal arrivals of squared gap CV ``c²``
    scale the M/D/1 term by ``c²`` (Kingman's G/D/1 form, ``(c_a² + c_s²)/2`` with ``c_s = 0``
    against Poisson's ``1/2``)."""
    m = state.parallel_prefills
    service = state.own_prefill_s / m
    rho = rate * service
    others = np.maximum(resident - 1.0, 0.0)
    bound = others * service
    wait = (
        arrival_scv * rho * service / (2 * np.maximum(1.0 - rho, 1e-9))
        + clumping * others * service / 2
    )
    return np.asarray(np.where(rho < 1.0, np.minimum(wait, bound), bound), dtype=np.float64)


def _steady_steps(
    model: StepTimeModel,
    resident: FloatArray,
    p: FloatArray,
    n: FloatArray,
    ctx: FloatArray,
    budget: float,
    pp: float,
    queue_s: FloatArray,
) -> _Steps:
    """Steps per request lifetime and step times for ``resident`` sequences, given the mean
    prefill queueing ``queue_s`` (from the previous fixed-point iterate)."""
    steps = n.copy()
    b = np.zeros_like(n)
    chunk = p.copy()
    first = np.ones_like(n)
    mean = np.zeros_like(n)
    t_mix = np.zeros_like(n)
    t_dec = np.zeros_like(n)
    share = np.zeros_like(n)
    prompts = np.ones_like(n)
    for _ in range(3):
        b = resident * (n - 1) / steps
        room = np.maximum(budget - b, 1.0)
        first = np.ceil(p / room)
        u = resident * p / steps
        chunk = np.minimum(room, np.maximum(u, p))
        share = np.minimum(u / chunk, 1.0)
        prompts = np.maximum(chunk / p, 1.0)
        offset = np.where(chunk < p, (p - chunk) / 2, 0.0)
        mixed = StepWork.mixed(
            prefill_tokens=chunk / prompts,
            prefill_sequences=prompts / pp,
            prefill_cached_tokens=offset,
            decode_sequences=b / pp,
            decode_context_tokens=ctx,
        )
        decode_only = StepWork.decode(np.maximum(b / pp, 0.0), ctx)
        times = model.step_time(StepWork.concatenate([mixed, decode_only])).total_s
        t_mix, t_dec = times[: len(p)], times[len(p) :]
        mean = share * t_mix + (1 - share) * t_dec
        waiting = queue_s / np.maximum(mean, 1e-12)
        steps = np.maximum(n - 1 + first + waiting, resident * (p + n - 1) / budget)
    residual = (share * t_mix**2 + (1 - share) * t_dec**2) / (2 * np.maximum(mean, 1e-12))
    fraction = np.where(first > 1, p / chunk, 1.0)
    own = first * t_dec + fraction * (t_mix - t_dec)
    return _Steps(
        steps=steps,
        prefill_steps=first,
        mean_step_s=mean,
        mix_step_s=t_mix,
        decode_step_s=t_dec,
        mix_share=share,
        own_prefill_s=own,
        residual_s=residual,
        parallel_prefills=np.maximum(np.floor(np.maximum(budget - b, 1.0) / p), 1.0),
    )


def _closed_loop_point(
    model: StepTimeModel,
    c: float,
    p: float,
    n: float,
    kv_capacity_tokens: float | None,
    *,
    policy: str | None,
    output_delay_steps: int,
    mean_field: bool,
) -> ServingEstimate:
    """:func:`closed_loop` of one workload point on floats: the fixed point costs its steps
    with :class:`~servesize.core.steptime.fast.FastStepTime` instead of one vectorised call of
    one or two steps per pass (numpy's per-call cost, not arithmetic, is what a pass spends
    there); the reported decode and prefill steps are one vectorised call."""
    fast = fast_step_time(model)
    budget, seqs = _budget(model)
    z = model.engine.request_overhead_s
    cap = seqs
    if kv_capacity_tokens is not None:
        held = p + (n if model.engine.kv_reservation == "full" else n / 2)
        cap = min(cap, max(float(math.floor(kv_capacity_tokens / held)), 1.0))
    pp = float(model.inventory.pipeline_parallel_size)
    ctx = p + n / 2
    resident, queue = residency_point(
        fast,
        c,
        cap,
        p,
        n,
        ctx,
        budget,
        pp,
        z,
        model.engine.arrival_clumping,
        FIXED_POINT_ITERATIONS,
    )
    state = steady_point(fast, resident, p, n, ctx, budget, pp, queue)
    life = state.steps * state.mean_step_s
    rate = resident / life
    wait = max(c / rate - z - life, 0.0)
    queued = max(state.steps - (n - 1) - state.prefill_steps, 0.0) * state.mean_step_s
    ttft = z + wait + state.residual_s + queued + state.own_prefill_s
    others = max(state.mix_share * state.steps - state.prefill_steps, 0.0)
    rest = max(state.steps - state.prefill_steps, 1e-12)
    share = min(max(others / rest, 0.0), 1.0)
    tpot = share * state.mix_step_s + (1 - share) * state.decode_step_s
    if c <= cap and not mean_field:
        loop = lockstep_loop(
            model,
            clients=int(c),
            input_tokens=int(p),
            output_tokens=int(n),
            policy=WAVE_POLICIES.get(policy or "", engine_wave_policy(model.engine.name)),
            overhead_s=z,
            output_delay_steps=output_delay_steps,
        )
        ttft, tpot, rate = loop.ttft_s, loop.tpot_s, loop.request_rate_per_s
        wait = 0.0
    one = np.ones(1)
    decode, prefill_total, prefill_steps = _reported_steps(
        model, one * (resident / pp), one * ctx, one * p
    )
    return ServingEstimate(
        concurrency=one * c,
        input_tokens=one * p,
        output_tokens=one * n,
        prefill_time_s=prefill_total,
        ttft_zero_load_s=prefill_total + z,
        decode_step_time_s=decode.total_s,
        step_time_s=one * state.mean_step_s,
        ttft_s=one * ttft,
        tpot_s=one * (tpot if n > 1 else 0.0),
        throughput_output_tokens_per_s=one * (rate * n),
        request_rate_per_s=one * rate,
        resident_sequences=one * resident,
        admission_wait_s=one * wait,
        prefill_bound=prefill_steps.bound,
        decode_bound=decode.bound,
        prefill_arithmetic_intensity=prefill_steps.arithmetic_intensity,
        decode_arithmetic_intensity=decode.arithmetic_intensity,
        sources=dict(model.sources),
    )
