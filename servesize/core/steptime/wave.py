"""The closed loop of clients with fixed lengths: the lock-step loop (docs/modeling.md §2.13).

``C`` clients that send requests of the same ``P`` prompt and ``n`` output tokens, with no
think time, start together and stay in phase: the requests of a wave finish within a few decode
steps of one another, and the ones that return while the next wave's first long prefill step
runs queue behind it. No mean-field average describes that (the queue is a staircase of whole
prefill steps), and nothing in it is random, so Tier A plays it: the ``C`` clients step by step
under the engine's own rule, each step costed as the simulator costs it
(:class:`~servesize.core.steptime.fast.FastStepTime` on the features of
``servesize.core.simulation.adapters``: prefill tokens, chunks, attention work, decodes and
their contexts ``Σ (computed + 1)``), and stretches of pure-decode steps in one call:

* ``chunked`` (vLLM v1, ``vllm-project/vllm:vllm/v1/core/sched/scheduler.py: schedule``):
  running requests first — one token per decode, then the unfinished prompts — and waiting
  prompts FCFS in the budget left, ``M − d`` tokens with ``d`` decodes, up to ``max_num_seqs``;
* ``whole_prompt`` (TensorRT-LLM's PyTorch flow, ``enable_chunked_prefill = False``): the same,
  but a waiting prompt is admitted only whole (``P ≤`` the budget left; FCFS, so the head that
  does not fit blocks the rest);
* ``prefill_first`` (SGLang, ``sgl-project/sglang:python/sglang/srt/managers/scheduler.py:
  get_next_batch_to_run``): a step of prefills only (unfinished chunks first, then waiting
  prompts, chunked, within ``M``) whenever one can run, the decodes waiting; else one decode step
  of every running request.

With TensorRT-LLM's overlap scheduler (``output_delay_steps = 1``, as the simulator's
``SchedulerConfig``) a request computes one hidden token more: its first token comes out one of
its own decode steps after its prefill and it leaves after the extra step. A client sends again
``Z`` (the request overhead) after its response, as the simulator's closed loop does; TTFT and
E2E include ``Z`` once, TPOT is ``(E2E − TTFT)/(n − 1)``. Means are over every client's
requests after its first :data:`WARMUP_CYCLES` (the wave from an idle engine, and the one that
settles); the loop runs :data:`CYCLES` requests per client, later clients' next requests loading
the engine while the last measured ones finish, as a simulation's cool-down requests do.

Validity: exact for the simulator's rules when the engine holds every client
(:func:`~servesize.core.steptime.serving.closed_loop` uses it only for ``C ≤ L_cap``); KV blocks
are not tracked (no preemption), so a loop whose peak ``C·(P + n)`` exceeds the KV cache is
costed as if it fit.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections import deque
from dataclasses import dataclass
from itertools import accumulate
from typing import Literal

import numpy as np

from servesize.core.steptime.fast import fast_step_time
from servesize.core.steptime.model import StepTimeModel

__all__ = [
    "CYCLES",
    "WARMUP_CYCLES",
    "WAVE_POLICIES",
    "LockstepLoop",
    "WavePolicy",
    "engine_wave_policy",
    "lockstep_loop",
]

CYCLES = 8
"""Requests each client sends in :func:`lockstep_loop`."""
WARMUP_CYCLES = 2
"""Leading requests per client left out of the means: the first wave starts from an idle
engine, and the waves take a cycle or two to settle into their periodic pattern."""

WavePolicy = Literal["chunked", "whole_prompt", "prefill_first"]
WAVE_POLICIES: dict[str, WavePolicy] = {
    "vllm_v1": "chunked",
    "sarathi": "chunked",
    "no_chunking": "whole_prompt",
    "prefill_first": "prefill_first",
}
"""The simulator's scheduling policies (``SchedulingPolicy``) by the wave rule they follow."""
_ENGINE_POLICY: dict[str, WavePolicy] = {
    "vllm": "chunked",
    "sglang": "prefill_first",
    "trtllm": "whole_prompt",
}


def engine_wave_policy(engine: str) -> WavePolicy:
    """The wave rule of an engine's default scheduler (the simulator's ``ENGINE_SCHEDULERS``).

    >>> engine_wave_policy("sglang"), engine_wave_policy("trtllm"), engine_wave_policy("x")
    ('prefill_first', 'whole_prompt', 'chunked')
    """
    return _ENGINE_POLICY.get(engine, "chunked")


@dataclass(frozen=True, slots=True, kw_only=True)
class LockstepLoop:
    """Means over the measured requests (client-side: the request overhead included)."""

    ttft_s: float
    tpot_s: float
    e2e_s: float
    request_rate_per_s: float
    first_wave_ttft_s: float
    """Mean TTFT of the first request of every client (the wave from an idle engine)."""
    cycle_ttft_s: tuple[float, ...] = ()
    """Mean TTFT of every client's ``k``-th request, ``k = 1, 2, …`` (request overhead in)."""
    cycle_tpot_s: tuple[float, ...] = ()
    """Mean TPOT of every client's ``k``-th request."""


_IDLE, _QUEUED, _PREFILL, _DECODE = 0, 1, 2, 3


class _Loop:
    """``C`` identical clients against one engine, stepped by the engine's rule.

    The clients' state is kept in Python lists (a step touches a few dozen clients, where
    numpy's per-call cost exceeds the arithmetic); every time and token count is computed by
    the same expressions in the same order as on arrays.
    """

    def __init__(
        self,
        model: StepTimeModel,
        *,
        clients: int,
        prompt: int,
        output: int,
        policy: WavePolicy,
        delay: int,
        budget: int,
        max_seqs: int,
        overhead_s: float,
    ) -> None:
        self.fast = fast_step_time(model)
        self.c, self.p, self.policy = clients, prompt, policy
        self.after = output - 1 + delay  # decodes after the prefill (one hidden with δ = 1)
        self.delay, self.budget, self.max_seqs, self.z = delay, budget, max_seqs, overhead_s
        self.phase = [_QUEUED] * clients
        self.arrive = [0.0] * clients
        self.order = [float(i) for i in range(clients)]  # admission / FCFS order
        self.comp = [0] * clients  # prompt tokens computed
        self.left = [0] * clients  # decodes left
        self.first = [0.0] * clients
        self.t = 0.0
        self.seq = float(clients)
        self.ttft: list[float] = []
        self.e2e: list[float] = []
        self.cycle: list[int] = []
        self.done = [0] * clients
        self.running: list[int] = []  # prefilling or decoding, in admission order
        self.queued: list[int] = list(range(clients))  # waiting, in FCFS order
        self.idle: deque[int] = deque()  # between requests, by arrival time

    def _step_s(self, chunks: list[tuple[int, int]], decodes: list[int]) -> float:
        """The simulator's step cost (``servesize.core.simulation.adapters``: the same
        features, the same reconstruction of the cached context from the attention work)."""
        count = len(decodes)
        b = float(count)
        # Σ (p + after − left[r]) over the decodes, in integers (exact in any order).
        ctx = float(count * (self.p + self.after) - sum(map(self.left.__getitem__, decodes))) + b
        if not chunks:
            return self.fast.step_s(0.0, 0.0, 0.0, 0.0, b, max(ctx, b))
        t_p = float(sum(c[0] for c in chunks))
        work = float(sum(c[0] * (c[1] + 0.5 * c[0]) for c in chunks))
        n_chunks = max(float(len(chunks)), 1.0)
        cached = n_chunks * work / t_p - t_p / 2.0
        return self.fast.step_s(t_p, n_chunks, max(cached, 0.0), work + t_p / 2.0, b, max(ctx, b))

    def step(self) -> None:
        """Plan, cost and apply one step (or a run of pure-decode steps)."""
        ph, order, t = self.phase, self.order, self.t
        idle, queued = self.idle, self.queued
        # Returned clients join the queue in their FCFS order (``order``).
        while idle and self.arrive[idle[0]] <= t:
            r = idle.popleft()
            ph[r] = _QUEUED
            insort(queued, r, key=order.__getitem__)
        running = self.running
        if not running and not queued:
            self.t = self.arrive[idle[0]]
            return
        decodes: list[int] = []
        partial: list[int] = []
        for r in running:
            (decodes if ph[r] == _DECODE else partial).append(r)
        if not partial and not queued:
            self._decode_run(decodes)
            return
        room = self.budget - (0 if self.policy == "prefill_first" else len(decodes))
        chunks: list[tuple[int, int]] = []
        touched: list[tuple[int, int]] = []
        p, comp = self.p, self.comp
        for r in partial:
            take = min(p - comp[r], room)
            if take <= 0:
                break
            chunks.append((take, comp[r]))
            touched.append((r, take))
            room -= take
        count = len(running)
        admitted = 0
        for r in queued:
            if room <= 0 or count >= self.max_seqs:
                break
            if self.policy == "whole_prompt" and p > room:
                break
            take = min(p, room)
            chunks.append((take, 0))
            touched.append((r, take))
            room -= take
            count += 1
            admitted += 1
            ph[r] = _PREFILL
            order[r] = self.seq
            self.seq += 1.0
            running.append(r)  # the newest admission order: ``running`` stays sorted
        if admitted:
            del queued[:admitted]
        if not chunks:
            self._decode_run(decodes)
            return
        if self.policy == "prefill_first":
            decodes = []
        self.t += self._step_s(chunks, decodes)
        self._emit(decodes)
        for r, take in touched:
            comp[r] += take
            if comp[r] == p:
                ph[r] = _DECODE
                self.left[r] = self.after
                if self.delay == 0:
                    self.first[r] = self.t
                if self.after == 0:
                    self._exit([r])

    def _emit(self, decodes: list[int]) -> None:
        if not decodes:
            return
        left, after = self.left, self.after
        if self.delay:
            first, t = self.first, self.t
            for r in decodes:
                if left[r] == after:
                    first[r] = t
        gone: list[int] = []
        for r in decodes:
            left[r] -= 1
            if not left[r]:
                gone.append(r)
        if gone:
            self._exit(gone)

    def _exit(self, gone: list[int]) -> None:
        t, first, arrive, done = self.t, self.first, self.arrive, self.done
        self.ttft.extend(first[r] - arrive[r] for r in gone)
        self.e2e.extend(t - arrive[r] for r in gone)
        self.cycle.extend(done[r] for r in gone)
        for r in gone:
            done[r] += 1
            self.phase[r] = _IDLE
            arrive[r] = t + self.z
            self.comp[r] = 0
        # Exits come in time order, so ``idle`` stays sorted by arrival.
        self.idle.extend(gone)
        out = set(gone)
        self.running = [r for r in self.running if r not in out]

    def _decode_run(self, decodes: list[int]) -> None:
        """Pure-decode steps until a request finishes or the next arrival is due."""
        left, after = self.left, self.after
        steps = min(map(left.__getitem__, decodes))
        due = self.arrive[self.idle[0]] if self.idle else math.inf
        hidden = [r for r in decodes if left[r] == after] if self.delay else []
        if hidden:
            steps = min(steps, 1)
        count = len(decodes)
        b = float(count)
        ctx0 = float(count * (self.p + after) - sum(map(left.__getitem__, decodes))) + b
        contexts = [ctx0 + k * b for k in range(steps)]
        # Sequential sums, as numpy's cumsum.
        times = list(accumulate(self.fast.decode_steps_s(b, contexts)))
        # Steps end at decision times; an arrival is seen at the first one at or after it.
        take = min(bisect_left(times, due - self.t) + 1, steps)
        self.t += times[take - 1]
        for r in hidden:
            self.first[r] = self.t - (times[take - 1] - times[0])
        gone: list[int] = []
        for r in decodes:
            left[r] -= take
            if not left[r]:
                gone.append(r)
        if gone:
            self._exit(gone)


def lockstep_loop(
    model: StepTimeModel,
    *,
    clients: int,
    input_tokens: int,
    output_tokens: int,
    policy: WavePolicy,
    overhead_s: float,
    output_delay_steps: int = 0,
    budget_tokens: int | None = None,
    max_num_seqs: int | None = None,
    requests_per_client: int = CYCLES,
    warmup_per_client: int = WARMUP_CYCLES,
) -> LockstepLoop:
    """Play ``requests_per_client`` requests of every client (module docstring); the means
    leave out the first ``warmup_per_client`` of each."""
    if clients < 1 or input_tokens < 1 or output_tokens < 1:
        raise ValueError("clients, input_tokens and output_tokens must all be >= 1")
    if not 0 <= warmup_per_client < requests_per_client:
        raise ValueError("warmup_per_client must be in [0, requests_per_client)")
    dp = model.inventory.data_parallel_size
    budget = budget_tokens or model.engine.max_num_batched_tokens * dp
    seqs = max_num_seqs or model.engine.max_num_seqs * dp
    if policy == "whole_prompt" and input_tokens > budget:
        raise ValueError(f"a {input_tokens}-token prompt never fits a {budget}-token step whole")
    loop = _Loop(
        model,
        clients=clients,
        prompt=int(input_tokens),
        output=int(output_tokens),
        policy=policy,
        delay=int(output_delay_steps),
        budget=int(budget),
        max_seqs=int(seqs),
        overhead_s=overhead_s,
    )
    first_wave: np.ndarray | None = None
    # Each iteration advances time by at least one step; a loop needs at most one per token.
    limit = 4 * requests_per_client * clients * (input_tokens + output_tokens + 2)
    while min(loop.done) < requests_per_client:
        limit -= 1
        if limit < 0:
            raise RuntimeError("the lock-step loop did not finish (internal error)")
        loop.step()
        if first_wave is None and min(loop.done) >= 1:
            first_wave = np.array(loop.ttft[:clients])
    ttft = np.array(loop.ttft)
    e2e = np.array(loop.e2e)
    cycle = np.array(loop.cycle, dtype=np.int64)
    n = output_tokens
    every_tpot = (e2e - ttft) / (n - 1) if n > 1 else np.zeros_like(ttft)
    per_ttft = tuple(
        float(np.mean(ttft[cycle == k])) + overhead_s for k in range(requests_per_client)
    )
    per_tpot = tuple(float(np.mean(every_tpot[cycle == k])) for k in range(requests_per_client))
    keep = (cycle >= warmup_per_client) & (cycle < requests_per_client)
    ttft, e2e, tpot = ttft[keep], e2e[keep], every_tpot[keep]
    return LockstepLoop(
        ttft_s=float(np.mean(ttft)) + overhead_s,
        tpot_s=float(np.mean(tpot)),
        e2e_s=float(np.mean(e2e)) + overhead_s,
        request_rate_per_s=clients / (float(np.mean(e2e)) + overhead_s),
        first_wave_ttft_s=float(np.mean(first_wave if first_wave is not None else ttft))
        + overhead_s,
        cycle_ttft_s=per_ttft,
        cycle_tpot_s=per_tpot,
    )
