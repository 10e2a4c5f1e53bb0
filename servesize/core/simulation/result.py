"""The simulation result: per-request and per-step arrays, metric helpers and a summary.

Clocks. The engine is simulated in its own clock, in which a request enters at its send time.
Client-observed TTFT and E2E add :attr:`SimulationResult.overhead_s` (preprocessing, output
processing, network round trip); ``engine_*`` figures leave it out.

Metric definitions (docs/modeling.md §4, normative):

* TTFT ``= first token - send`` (queueing, prefill, and for disaggregation optionally the KV
  transfer) ``+ overhead``.
* E2E ``= last token - send + overhead``.
* TPOT ``= (E2E - TTFT) / (N - 1)`` per request with ``N >= 2`` output tokens (vLLM bench
  ``calculate_metrics``; GenAI-Perf's per-request "inter token latency").
* ITL: every gap between consecutive streamed tokens, pooled over tokens; stored as step durations
  weighted by the number of measured requests that streamed in the step, plus the irregular gaps
  (after a preemption or a KV transfer) one by one.
* Throughput: requests that completed, and tokens emitted, *during* the measurement window, per
  second of window. Goodput: measured requests that completed and meet every SLO, per second.
* Failures (timeouts, rejections) stay in every denominator: in the all-requests statistics they
  are ``+inf``; the ``*_completed`` statistics leave them out (comparable with vLLM bench).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import IntEnum
from typing import Literal

import numpy as np

from servesize.core.simulation.metrics import SLO, LatencyStats, percentile, weighted_percentile

RequestMetric = Literal["ttft", "tpot", "e2e", "queueing_delay", "engine_ttft", "engine_e2e"]

# Stability verdict: throughput below this fraction of the offered rate means the queue grows.
STABLE_THROUGHPUT_FRACTION = 0.98
# ... or the time-averaged number in the system grows from the first to the last third of the
# window by more than max(this floor, the window mean).
_GROWTH_FLOOR = 5.0
CLOSED_LOOP_STABLE = (
    "closed loop: the clients bound the number in the system, so the queue cannot grow "
    "(overload shows as latency)"
)
_TOO_SHORT = (
    "too short to tell a growing queue from one still filling up; measure more requests or add "
    "warm-up"
)


class RequestStatus(IntEnum):
    """How a request ended."""

    OK = 0
    TIMED_OUT = 1
    REJECTED = 2


@dataclass(frozen=True, slots=True, kw_only=True)
class TimeSeries:
    """Fleet-wide state sampled on an even time grid (step-hold: the value of the step running at
    that instant, 0 while a replica idles)."""

    time_s: np.ndarray
    num_waiting: np.ndarray
    num_running: np.ndarray
    kv_blocks_used: np.ndarray
    preemptions: np.ndarray
    """Preemptions since the previous sample (at the first: up to it), from the simulator's
    own events (:attr:`SimulationResult.preemption_s`); they sum to every preemption of the
    run."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulationSummary:
    """Headline figures of one run over its measurement window.

    Latency statistics without a suffix count every measured request, failures as ``inf``;
    ``*_completed`` ones only requests that completed. ITL is pooled over tokens.

    The outcome counts are disjoint and add up: ``completed + failed + timed_out + rejected
    = measured``. ``failed`` counts measured requests that ended any other way than completing,
    timing out or being rejected (none do in this simulator); requests that did not complete
    are ``measured - completed``.
    """

    ttft_s: LatencyStats
    tpot_s: LatencyStats
    itl_s: LatencyStats
    e2e_s: LatencyStats
    queueing_delay_s: LatencyStats
    ttft_completed_s: LatencyStats
    tpot_completed_s: LatencyStats
    e2e_completed_s: LatencyStats
    queueing_delay_completed_s: LatencyStats
    engine_ttft_completed_s: LatencyStats
    offered_rate_per_s: float
    throughput_requests_per_s: float
    throughput_output_tokens_per_s: float
    goodput_requests_per_s: float | None
    slo_attainment: float | None
    measured: int
    completed: int
    failed: int
    timed_out: int
    rejected: int
    preemptions: int
    peak_kv_utilization: float
    mean_in_system: float
    littles_law_in_system: float
    stable: bool
    stability_reason: str
    stability_conclusive: bool
    """False when the window was too short to tell a growing queue from one filling up (the
    run is then reported unstable, with a reason that says to measure longer)."""
    window_start_s: float
    window_end_s: float
    warnings: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulationResult:
    """Everything a run produced.

    Request arrays are indexed by request id (send order for an open loop, issue order for a
    closed loop); step arrays hold every step of every replica, grouped by replica, in time order
    within one. Times are in the engine clock (seconds); NaN marks "did not happen" (a rejected
    request has no first token). ``finish_s`` is when the last token was produced, also for a
    request whose client had already timed out; ``exit_s`` is when it left the engine (finish,
    drop at the first step boundary after its deadline, or rejection). ``status`` holds
    :class:`RequestStatus` values. For disaggregation ``replica`` is the prefill replica,
    ``decode_replica`` the decode one (-1 if none) and ``first_token_s`` the time the client can
    see the first token.
    """

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    status: np.ndarray
    in_window: np.ndarray
    replica: np.ndarray
    decode_replica: np.ndarray
    first_scheduled_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    exit_s: np.ndarray
    generated_tokens: np.ndarray
    num_preemptions: np.ndarray
    preemption_s: np.ndarray
    """Every preemption (vLLM recompute, SGLang retraction) of every request, sorted: the start
    of the step whose scheduling evicted it (engine clock; ``num_preemptions`` per request)."""
    prefill_done_s: np.ndarray
    transfer_start_s: np.ndarray
    transfer_end_s: np.ndarray
    step_replica: np.ndarray
    step_start_s: np.ndarray
    step_duration_s: np.ndarray
    step_prefill_tokens: np.ndarray
    step_prefill_attention_work: np.ndarray
    step_decode_seqs: np.ndarray
    step_decode_context_tokens: np.ndarray
    step_num_seqs: np.ndarray
    step_kv_blocks_used: np.ndarray
    step_num_waiting: np.ndarray
    step_num_running: np.ndarray
    step_output_tokens: np.ndarray
    step_itl_weight: np.ndarray
    itl_irregular_s: np.ndarray
    idle_in_system_integral_s: float
    arrival_lag_integral_s: float
    kv_blocks_total: np.ndarray
    engine_roles: tuple[str, ...]
    overhead_s: float
    window_start_s: float
    window_end_s: float
    closed_loop: bool
    warnings: tuple[str, ...]
    prefix_hit_tokens: np.ndarray | None = None
    """Prompt tokens each request found in its replica's prefix cache (summed over its
    admissions; None without a prefix cache)."""
    host_kv_hit_tokens: np.ndarray | None = None
    """Tokens each request loaded from its replica's host KV tier (summed over its admissions;
    None without one)."""
    host_kv_load_s: float = 0.0
    """Seconds of host-to-GPU loads, over all replicas and the whole run."""

    # ----------------------------------------------------------------- per request

    @property
    def prefix_hit_rate(self) -> float | None:
        """Share of the measured requests' prompt tokens served from the prefix cache (vLLM's
        ``prefix_cache_hits / prefix_cache_queries``, counted at first admission and after
        preemptions alike); None without a prefix cache."""
        if self.prefix_hit_tokens is None:
            return None
        m = self.in_window
        queried = int(self.prompt_tokens[m].sum())
        return float(self.prefix_hit_tokens[m].sum()) / queried if queried else 0.0

    @property
    def host_kv_hit_rate(self) -> float | None:
        """Share of the measured requests' prompt tokens loaded from the host KV tier; None
        without one."""
        if self.host_kv_hit_tokens is None:
            return None
        m = self.in_window
        queried = int(self.prompt_tokens[m].sum())
        return float(self.host_kv_hit_tokens[m].sum()) / queried if queried else 0.0

    @property
    def ok(self) -> np.ndarray:
        """Requests that completed within their timeout."""
        return np.asarray(self.status == RequestStatus.OK)

    @property
    def ttft_s(self) -> np.ndarray:
        """Client-observed TTFT per request (NaN unless it completed)."""
        v = self.first_token_s - self.arrival_s + self.overhead_s
        return np.where(self.ok, v, np.nan)

    @property
    def engine_ttft_s(self) -> np.ndarray:
        """TTFT inside the engine (no client overheads; NaN unless it completed)."""
        return np.where(self.ok, self.first_token_s - self.arrival_s, np.nan)

    @property
    def e2e_s(self) -> np.ndarray:
        """Client-observed end-to-end latency (NaN unless it completed)."""
        return np.where(self.ok, self.finish_s - self.arrival_s + self.overhead_s, np.nan)

    @property
    def engine_e2e_s(self) -> np.ndarray:
        """End-to-end latency inside the engine (NaN unless it completed)."""
        return np.where(self.ok, self.finish_s - self.arrival_s, np.nan)

    @property
    def tpot_s(self) -> np.ndarray:
        """``(E2E - TTFT) / (N - 1)``; NaN unless it completed with ``N >= 2``."""
        n = self.output_tokens
        with np.errstate(divide="ignore", invalid="ignore"):
            v = (self.finish_s - self.first_token_s) / (n - 1)
        return np.where(self.ok & (n >= 2), v, np.nan)

    @property
    def queueing_delay_s(self) -> np.ndarray:
        """Send to first scheduling (engine clock; NaN unless it completed)."""
        return np.where(self.ok, self.first_scheduled_s - self.arrival_s, np.nan)

    @property
    def residence_s(self) -> np.ndarray:
        """Time each request spent in the engine(s): send to exit (finish, drop or rejection)."""
        return np.asarray(self.exit_s - self.arrival_s)

    def _metric_values(self, metric: RequestMetric, completed_only: bool) -> np.ndarray:
        values = {
            "ttft": self.ttft_s,
            "tpot": self.tpot_s,
            "e2e": self.e2e_s,
            "queueing_delay": self.queueing_delay_s,
            "engine_ttft": self.engine_ttft_s,
            "engine_e2e": self.engine_e2e_s,
        }[metric]
        measured = self.in_window
        if metric == "tpot":
            measured = measured & (self.output_tokens >= 2)
        if completed_only:
            return np.asarray(values[measured & self.ok])
        return np.asarray(np.where(self.ok, values, np.inf)[measured])

    def latency(self, metric: RequestMetric, *, completed_only: bool = False) -> LatencyStats:
        """Mean and p50/p90/p95/p99 of a per-request metric over the measured requests."""
        return LatencyStats.of(self._metric_values(metric, completed_only))

    def percentile(self, metric: RequestMetric, q: float, *, completed_only: bool = False) -> float:
        """One percentile of a per-request metric (failures ``inf`` unless ``completed_only``)."""
        return percentile(self._metric_values(metric, completed_only), q)

    # ----------------------------------------------------------------- ITL

    def itl_samples(self) -> tuple[np.ndarray, np.ndarray]:
        """``(gap_s, weight)``: step durations weighted by measured tokens, then irregular gaps."""
        values = np.concatenate((self.step_duration_s, self.itl_irregular_s))
        weights = np.concatenate(
            (self.step_itl_weight, np.ones(self.itl_irregular_s.size, dtype=np.int64))
        )
        return values, weights

    def itl(self) -> LatencyStats:
        """Pooled inter-token latency over every streamed token of the measured requests."""
        return LatencyStats.of_weighted(*self.itl_samples())

    def itl_percentile(self, q: float) -> float:
        """One percentile of the pooled ITL."""
        values, weights = self.itl_samples()
        return weighted_percentile(values, weights, q)

    # ----------------------------------------------------------------- occupancy

    @property
    def in_system_time_integral_s(self) -> float:
        """``∫ (requests in the engines) dt`` from the engines' own per-step counts."""
        steps = float(np.dot(self.step_num_waiting + self.step_num_running, self.step_duration_s))
        return steps + self.idle_in_system_integral_s + self.arrival_lag_integral_s

    @property
    def horizon_s(self) -> tuple[float, float]:
        """First send and last exit."""
        return float(np.min(self.arrival_s)), float(np.nanmax(self.exit_s))

    def time_series(self, points: int = 200) -> TimeSeries:
        """Queue length, running batch and KV blocks in use, summed over replicas, and the
        preemptions between consecutive samples."""
        if points < 2:
            raise ValueError(f"points must be >= 2, got {points}")
        t0, t1 = self.horizon_s
        grid = np.linspace(t0, t1, points)
        waiting = np.zeros(points, dtype=np.int64)
        running = np.zeros(points, dtype=np.int64)
        kv = np.zeros(points, dtype=np.int64)
        for replica in range(self.kv_blocks_total.size):
            sel = self.step_replica == replica
            start = self.step_start_s[sel]
            if start.size == 0:
                continue
            end = start + self.step_duration_s[sel]
            i = np.searchsorted(start, grid, side="right") - 1
            active = (i >= 0) & (grid < end[np.maximum(i, 0)])
            j = i[active]
            waiting[active] += self.step_num_waiting[sel][j]
            running[active] += self.step_num_running[sel][j]
            kv[active] += self.step_kv_blocks_used[sel][j]
        # Events up to each sample (t <= grid[i]); the last sample is the last exit, after
        # every preemption.
        upto = np.searchsorted(self.preemption_s, grid, side="right")
        return TimeSeries(
            time_s=grid,
            num_waiting=waiting,
            num_running=running,
            kv_blocks_used=kv,
            preemptions=np.diff(upto, prepend=0).astype(np.int64),
        )

    def _window_mean_in_system(
        self, lo_s: float, hi_s: float, *, running_only: bool = False
    ) -> float:
        """Time-averaged requests in the engines (waiting + running, or running only) over
        ``[lo_s, hi_s)``."""
        if hi_s <= lo_s:
            return math.nan
        start = self.step_start_s
        sel = (start >= lo_s) & (start < hi_s)
        count = self.step_num_running[sel]
        if not running_only:
            count = count + self.step_num_waiting[sel]
        return float(np.dot(count, self.step_duration_s[sel])) / (hi_s - lo_s)

    # ----------------------------------------------------------------- summary

    def summary(self, slo: SLO | None = None) -> SimulationSummary:
        """Latency statistics, throughput, goodput, failures and the stability verdict."""
        measured = self.in_window
        ok = self.ok
        n_measured = int(measured.sum())
        ws, we = self.window_start_s, self.window_end_s
        span = we - ws
        done_in_window = ok & (self.finish_s >= ws) & (self.finish_s <= we)
        step_end = self.step_start_s + self.step_duration_s
        tokens_in_window = self.step_output_tokens[(step_end >= ws) & (step_end <= we)]
        if span > 0:
            offered = (n_measured - 1) / span
            throughput = float(done_in_window.sum()) / span
            token_throughput = float(tokens_in_window.sum()) / span
        else:
            offered = throughput = token_throughput = math.nan

        goodput: float | None = None
        attainment: float | None = None
        if slo is not None:
            good = measured & ok
            if slo.ttft_s is not None:
                good &= self.ttft_s <= slo.ttft_s
            if slo.tpot_s is not None:
                good &= (self.output_tokens < 2) | (self.tpot_s <= slo.tpot_s)
            if slo.e2e_s is not None:
                good &= self.e2e_s <= slo.e2e_s
            attainment = float(good.sum()) / n_measured

        stable, reason, conclusive = self._stability(offered, throughput)
        if not stable and span > 0:
            # Overloaded: the in-window departure rate can be anything from 0 (a short window
            # before the first completion) up; the measured requests drain at the saturation
            # rate, so count them over the time until the last of them finished.
            done = measured & ok
            if np.any(done):
                throughput = float(done.sum()) / (float(np.max(self.finish_s[done])) - ws)
        if attainment is not None:
            # Good requests leave at the departure rate times the share of them that is good,
            # so goodput never exceeds throughput and both cover the same window.
            goodput = throughput * attainment
        t0, t1 = self.horizon_s
        total = t1 - t0
        if total > 0:
            mean_in_system = self.in_system_time_integral_s / total
            little = float(np.sum(self.residence_s)) / total
        else:
            mean_in_system = little = math.nan
        kv_total = self.kv_blocks_total[self.step_replica]
        peak_kv = float(np.max(self.step_kv_blocks_used / kv_total)) if kv_total.size else 0.0
        status_m = self.status[measured]
        return SimulationSummary(
            ttft_s=self.latency("ttft"),
            tpot_s=self.latency("tpot"),
            itl_s=self.itl(),
            e2e_s=self.latency("e2e"),
            queueing_delay_s=self.latency("queueing_delay"),
            ttft_completed_s=self.latency("ttft", completed_only=True),
            tpot_completed_s=self.latency("tpot", completed_only=True),
            e2e_completed_s=self.latency("e2e", completed_only=True),
            queueing_delay_completed_s=self.latency("queueing_delay", completed_only=True),
            engine_ttft_completed_s=self.latency("engine_ttft", completed_only=True),
            offered_rate_per_s=offered,
            throughput_requests_per_s=throughput,
            throughput_output_tokens_per_s=token_throughput,
            goodput_requests_per_s=goodput,
            slo_attainment=attainment,
            measured=n_measured,
            completed=int((status_m == RequestStatus.OK).sum()),
            failed=int(np.isin(status_m, tuple(RequestStatus), invert=True).sum()),
            timed_out=int((status_m == RequestStatus.TIMED_OUT).sum()),
            rejected=int((status_m == RequestStatus.REJECTED).sum()),
            preemptions=int(self.num_preemptions[measured].sum()),
            peak_kv_utilization=peak_kv,
            mean_in_system=mean_in_system,
            littles_law_in_system=little,
            stable=stable,
            stability_reason=reason,
            stability_conclusive=conclusive,
            window_start_s=ws,
            window_end_s=we,
            warnings=self.warnings,
        )

    def _in_system_at(self, t_s: float) -> int:
        """Requests sent at or before ``t_s`` that have not left by then (every request)."""
        sent = int(np.count_nonzero(self.arrival_s <= t_s))
        return sent - int(np.count_nonzero(self.exit_s <= t_s))

    def _keeps_up_after_fill(self) -> tuple[bool | None, float, float]:
        """The throughput test with the fill-up discounted: ``(verdict, W̄, span)``.

        By conservation, sends minus completions over ``(t, we]`` equal the growth of the
        number in the system ``B(we) − B(t)``. A run that starts (nearly) empty shows a shortfall
        of about ``L = λ W̄`` while it fills up, however stable it is; counting from
        ``t = ws + W̄`` (``W̄`` the mean residence of the measured completed requests) leaves
        only growth. The shortfall may be ``2 %`` of the sends plus ``max(5, 2 √(2 R̄))``
        requests of noise: two standard deviations of the difference of two numbers in service,
        each about Poisson with mean ``R̄`` (the mean running batch after ``t``; a growing
        waiting queue is what the test looks for, so it does not widen the allowance).
        ``None`` when the window is under ``2 W̄``: too short to tell a growing queue from one
        still filling up.
        """
        ws, we = self.window_start_s, self.window_end_s
        span = we - ws
        done = self.in_window & self.ok
        if not np.any(done):
            return None, math.inf, span
        residence = float(np.mean(self.exit_s[done] - self.arrival_s[done]))
        start = ws + residence
        if 2.0 * residence > span:
            return None, residence, span
        sent = int(np.count_nonzero((self.arrival_s > start) & (self.arrival_s <= we)))
        completed = int(np.count_nonzero(self.ok & (self.finish_s > start) & (self.finish_s <= we)))
        running = self._window_mean_in_system(start, we, running_only=True)
        noise = max(_GROWTH_FLOOR, 2.0 * math.sqrt(2.0 * max(running, 0.0)))
        allowed = (1.0 - STABLE_THROUGHPUT_FRACTION) * sent + noise
        return sent - completed <= allowed, residence, span

    def _stability(self, offered: float, throughput: float) -> tuple[bool, str, bool]:
        """Stable when the service keeps up with the sends and the queue does not grow.

        Returns ``(stable, reason, conclusive)``. A closed loop is always stable. Throughput
        below ``98 %`` of the offered rate is a growing queue unless the shortfall is the system
        filling up (see
        :meth:`_keeps_up_after_fill`) or a burst of late sends (the queue did not grow); when the
        window is too short to tell, the run is called unstable, ``conclusive`` is False and the
        reason says to measure longer.
        """
        if self.closed_loop:
            # Each client waits for its response before sending again: the number in the
            # system is bounded by the clients, so no queue can grow (the open-loop test would
            # only see the last requests draining). Overload shows as latency instead.
            return True, CLOSED_LOOP_STABLE, True
        ws, we = self.window_start_s, self.window_end_s
        if not we > ws:
            return True, "window too short to judge", False
        third = (we - ws) / 3.0
        first = self._window_mean_in_system(ws, ws + third)
        last = self._window_mean_in_system(we - third, we)
        overall = self._window_mean_in_system(ws, we)
        growth = last - first
        grew = f"requests in the system grew from {first:.4g} to {last:.4g} over the window"
        if throughput < STABLE_THROUGHPUT_FRACTION * offered:
            verdict, residence, span = self._keeps_up_after_fill()
            reason = (
                f"throughput {throughput:.4g}/s is below {STABLE_THROUGHPUT_FRACTION:.0%} of the "
                f"offered {offered:.4g}/s"
            )
            if verdict is None:
                too_short = (
                    f"{reason}, and the window ({span:.4g} s) is under twice the mean residence "
                    f"({residence:.4g} s): {_TOO_SHORT}"
                )
                return False, too_short, False
            # A shortfall beyond the noise counts only if the queue also grew: a burst of sends
            # just before the window closes leaves a shortfall in a steady system too.
            if not verdict and growth > _GROWTH_FLOOR:
                return False, f"{reason}, and {grew}", True
        if growth > max(_GROWTH_FLOOR, overall):
            return False, grew, True
        return True, "throughput keeps up with the offered rate and the queue does not grow", True
