"""Run a workload through engine replicas: one replica, several behind a router, or
prefill/decode disaggregation.

Execution strategy (docs/modeling.md §3.5):

* one replica, or round-robin / random routing of an open loop: the routing does not depend on
  replica state, so requests are split up front and each replica runs on its own (exact);
* least-loaded routing, closed loops and disaggregation couple the replicas: a conservative
  event loop lets every replica decide only before the earliest time something could still be
  sent to it (the next request to route into its pool, or the next decision of a replica that
  feeds the pool — what that replica emits comes strictly later), and routes each request once
  no replica can emit anything earlier. A decided step is applied at once even if it ends after
  that time; the router counts departures only once they happened
  (:meth:`ReplicaSimulator.outstanding_at`). Requests sent at one instant route in id order.

Routing (Vidur's ``vidur/scheduler/global_scheduler``): ``round_robin`` — request ``k`` of a pool
to replica ``k mod R``; ``random`` — uniform, pre-drawn from the caller's generator;
``least_loaded`` — fewest outstanding (routed, not yet left), ties to the lowest index.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from servesize.core.simulation.config import ClientOverheads, KVTransfer, Routing, SchedulerConfig
from servesize.core.simulation.replica_simulator import ReplicaSimulator
from servesize.core.simulation.requests import ACTIVE, UNSENT, RequestTable
from servesize.core.simulation.result import SimulationResult
from servesize.core.simulation.steptime import StepTimeModel
from servesize.core.traffic.sessions import SessionWorkload
from servesize.core.traffic.workload import (
    CLOSED_LOOP_WARNING,
    ClosedLoopWorkload,
    OpenLoopWorkload,
    Workload,
)

_INF = math.inf
_ROUTINGS = ("round_robin", "random", "least_loaded")
# Progress reports per run (about).
_PROGRESS_REPORTS = 100

Progress = Callable[[int, int], None]
"""``progress(finished, total)``: requests that have left the replicas so far, of all."""


def _finished(table: RequestTable) -> int:
    return int(np.count_nonzero(table.status >= 0))


def _advance_reporting(
    sim: ReplicaSimulator, times_s: np.ndarray, table: RequestTable, progress: Progress
) -> None:
    """``sim.advance()`` in slices that end at every ``1/100``-th of its send times,
    reporting after each (the same decisions as one call: each slice stops at a horizon)."""
    stride = max(1, times_s.size // _PROGRESS_REPORTS)
    for horizon in times_s[stride::stride].tolist():
        sim.advance(horizon, False)
        progress(_finished(table), table.size)
    sim.advance()


def _tighter(h: tuple[float, bool], t: float, inclusive: bool) -> tuple[float, bool]:
    """The earlier of two horizons; at equal times the exclusive one wins."""
    if t < h[0]:
        return t, inclusive
    if t == h[0]:
        return t, h[1] and inclusive
    return h


def _window_mask(size: int, warmup: int, cooldown: int) -> np.ndarray:
    mask = np.zeros(size, dtype=bool)
    mask[warmup : size - cooldown] = True
    return mask


def _table(workload: Workload, overhead_s: float) -> RequestTable:
    size = workload.num_requests
    table = RequestTable(
        prompt_tokens=workload.prompt_tokens,
        output_tokens=workload.output_tokens,
        timeout_s=workload.timeout_s,
        in_window=_window_mask(size, workload.warmup_requests, workload.cooldown_requests),
        overhead_s=overhead_s,
    )
    if workload.prefix is not None:
        table.prefix_group = workload.prefix.group
        table.prefix_shared_tokens = workload.prefix.shared_tokens
    return table


def _check_routing(routing: Routing, replicas: int, rng: np.random.Generator | None) -> None:
    if routing not in _ROUTINGS:
        raise ValueError(f"unknown routing {routing!r}; expected one of {_ROUTINGS}")
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise ValueError(f"replicas must be an integer >= 1, got {replicas!r}")
    if routing == "random" and replicas > 1 and rng is None:
        raise ValueError("random routing needs routing_rng (a numpy Generator)")


@dataclass(slots=True)
class _Pool:
    """Replicas that share a router."""

    members: list[ReplicaSimulator]
    routing: Routing
    choices: np.ndarray | None
    routed: int = 0
    heap: list[tuple[float, int, int]] = field(default_factory=list)
    static_ids: np.ndarray | None = None
    static_times: list[float] = field(default_factory=list)
    static_ptr: int = 0

    def next_send(self) -> float:
        t = self.heap[0][0] if self.heap else _INF
        if self.static_ptr < len(self.static_times):
            t = min(t, self.static_times[self.static_ptr])
        return t

    def pop(self) -> tuple[float, int]:
        """The earliest unrouted request (static sends win ties: they have lower ids)."""
        if self.static_ids is not None and self.static_ptr < len(self.static_times):
            ts = self.static_times[self.static_ptr]
            if not self.heap or ts <= self.heap[0][0]:
                r = int(self.static_ids[self.static_ptr])
                self.static_ptr += 1
                return ts, r
        t, _, r = heapq.heappop(self.heap)
        return t, r

    def choose(self, t: float) -> ReplicaSimulator:
        k = self.routed
        self.routed += 1
        n = len(self.members)
        if n == 1:
            return self.members[0]
        if self.routing == "round_robin":
            return self.members[k % n]
        if self.routing == "random":
            assert self.choices is not None
            return self.members[int(self.choices[k])]
        return min(self.members, key=lambda s: (s.outstanding_at(t), s.index))


def _draw_choices(
    routing: Routing, replicas: int, size: int, rng: np.random.Generator | None
) -> np.ndarray | None:
    if routing != "random" or replicas == 1:
        return None
    assert rng is not None
    return rng.integers(0, replicas, size=size)


class _Coupled:
    """Conservative event loop over pools that feed each other (see the module docstring)."""

    def __init__(
        self,
        table: RequestTable,
        pools: list[_Pool],
        feeders: list[set[int]],
        *,
        closed: ClosedLoopWorkload | None,
        entry_pool: int,
        decode_pool: int | None,
        progress: Progress | None = None,
        sessions: SessionWorkload | None = None,
    ) -> None:
        self.tab = table
        self.sessions = sessions
        self.progress = progress
        self.report_every = max(1, table.size // _PROGRESS_REPORTS)
        self.pools = pools
        self.closed = closed
        self.entry = entry_pool
        self.decode = decode_pool
        self.seq = 0
        self.next_request = 0
        self.closure: list[set[int]] = []  # pools that can feed pool i, directly or via others
        for i in range(len(pools)):
            reach, frontier = set(feeders[i]), list(feeders[i])
            while frontier:
                added = feeders[frontier.pop()] - reach
                reach |= added
                frontier.extend(added)
            self.closure.append(reach)
        self.pool_of = {id(s): i for i, p in enumerate(pools) for s in p.members}

    def inject(self, pool: int, t: float, r: int) -> None:
        heapq.heappush(self.pools[pool].heap, (t, self.seq, r))
        self.seq += 1

    def send_next(self, t: float) -> None:
        """A closed-loop client sends the next request (if any are left) at ``t``."""
        assert self.closed is not None
        j = self.next_request
        if j >= self.tab.size:
            return
        self.next_request += 1
        send = t + float(self.closed.think_time_s[j])
        self.tab.send(j, send)
        self.inject(self.entry, send, j)

    def collect(self, sim: ReplicaSimulator) -> None:
        tab = self.tab
        for r in sim.exits:
            if tab.status[r] == ACTIVE:  # prefill done: hand over to the decode pool
                assert self.decode is not None
                tab.computed_tokens[r] = 0
                self.inject(self.decode, float(tab.handoff_s[r]), r)
            elif self.closed is not None:
                self.send_next(float(tab.exit_s[r]) + tab.overhead_s)
            elif self.sessions is not None and (n := self.sessions.next_turn(r)) >= 0:
                send = float(tab.exit_s[r]) + tab.overhead_s + float(self.sessions.think_time_s[n])
                tab.send(n, send)  # the session's next turn, after the answer and a think time
                self.inject(self.entry, send, n)
        sim.exits.clear()

    def horizon(self, pool: int, sim: ReplicaSimulator) -> tuple[float, bool]:
        """Latest decision time for replica ``sim``: ``(t, inclusive)``.

        A request routed to its own pool at ``t`` must be seen by a decision at ``t``
        (exclusive). A replica that feeds the pool, directly or through another pool, and next
        decides at ``t`` can only emit requests strictly after ``t``; so can a send due at ``t``
        into a feeding pool (inclusive).
        """
        h = (self.pools[pool].next_send(), False)
        for q in self.closure[pool]:
            if q != pool:
                h = _tighter(h, self.pools[q].next_send(), True)
            for f in self.pools[q].members:
                if f is not sim:
                    h = _tighter(h, f.next_decision_s(), True)
        return h

    def routable(self, pool: int, t: float) -> bool:
        """No replica feeding ``pool`` can still emit a request before ``t``."""
        return all(
            f.next_decision_s() >= t for q in self.closure[pool] for f in self.pools[q].members
        )

    def run(self) -> None:
        pools = self.pools
        tab = self.tab
        routed = 0
        while True:
            progressed = False
            for i, pool in enumerate(pools):
                for s in pool.members:
                    h_t, h_incl = self.horizon(i, s)
                    if s.advance(h_t, h_incl):
                        progressed = True
                    if s.exits:
                        self.collect(s)
                        progressed = True
            while True:
                best, t = -1, _INF
                for i, pool in enumerate(pools):
                    ti = pool.next_send()
                    if ti < t:
                        best, t = i, ti
                if best < 0 or not self.routable(best, t):
                    break
                pool = pools[best]
                for s in pool.members:
                    s.advance(t, False)
                    if s.exits:
                        self.collect(s)
                if pool.next_send() < t:
                    continue  # an exit at <= t created an earlier send; route that first
                t, r = pool.pop()
                target = pool.choose(t)
                if best == self.decode:
                    tab.decode_replica[r] = target.index
                else:
                    tab.replica[r] = target.index
                target.push(r, t)
                if target.exits:  # rejected on arrival
                    self.collect(target)
                progressed = True
                routed += 1
                if self.progress is not None and routed % self.report_every == 0:
                    self.progress(_finished(tab), tab.size)
            if not progressed:
                if any(p.next_send() < _INF for p in pools) or any(
                    s.next_decision_s() < _INF for p in pools for s in p.members
                ):
                    raise RuntimeError("simulation stalled with work left (internal error)")
                return


def _collect_result(
    table: RequestTable,
    sims: list[ReplicaSimulator],
    roles: tuple[str, ...],
    *,
    overhead_s: float,
    closed_loop: bool,
) -> SimulationResult:
    for s in sims:
        s.close()
    if np.any(table.status < 0):
        stuck = int(np.sum(table.status == ACTIVE)) + int(np.sum(table.status == UNSENT))
        raise RuntimeError(f"{stuck} requests never finished (internal error)")
    logs = [s.log.finish() for s in sims]
    step_replica = np.concatenate(
        [
            np.full(log["start_s"].size, s.index, dtype=np.int32)
            for s, log in zip(sims, logs, strict=True)
        ]
    )

    def steps(name: str) -> np.ndarray:
        return np.concatenate([log[name] for log in logs])

    itl_irregular = np.array([g for s in sims for g in s.itl_extra_s], dtype=np.float64)
    idle = sum(n * (b - a) for s in sims for a, b, n in s.idle)
    measured_arrivals = table.arrival_s[table.in_window]
    caches = [s.pool.prefix for s in sims if s.pool.prefix is not None]
    hits = None
    if caches:
        hits = np.zeros(table.size, dtype=np.int64)
        for c in caches:
            hits += c.hit_tokens
    hosts = [s.pool.host for s in sims if s.pool.host is not None]
    host_hits = None
    if hosts:
        host_hits = np.zeros(table.size, dtype=np.int64)
        for h in hosts:
            host_hits += h.hit_tokens
    return SimulationResult(
        arrival_s=table.arrival_s.copy(),
        prompt_tokens=table.prompt_tokens.copy(),
        output_tokens=table.output_tokens.copy(),
        status=table.status.copy(),
        in_window=table.in_window.copy(),
        replica=table.replica.copy(),
        decode_replica=table.decode_replica.copy(),
        first_scheduled_s=table.first_scheduled_s.copy(),
        first_token_s=table.first_token_s.copy(),
        finish_s=table.finish_s.copy(),
        exit_s=table.exit_s.copy(),
        generated_tokens=table.num_tokens - table.prompt_tokens,
        num_preemptions=table.num_preemptions.copy(),
        preemption_s=np.sort(np.array([t for s in sims for t in s.preemption_s], dtype=np.float64)),
        prefill_done_s=table.handoff_s.copy(),
        transfer_start_s=table.transfer_start_s.copy(),
        transfer_end_s=table.transfer_end_s.copy(),
        step_replica=step_replica,
        step_start_s=steps("start_s"),
        step_duration_s=steps("duration_s"),
        step_prefill_tokens=steps("prefill_tokens"),
        step_prefill_attention_work=steps("prefill_attention_work"),
        step_decode_seqs=steps("decode_seqs"),
        step_decode_context_tokens=steps("decode_context_tokens"),
        step_num_seqs=steps("num_seqs"),
        step_kv_blocks_used=steps("kv_blocks_used"),
        step_num_waiting=steps("num_waiting"),
        step_num_running=steps("num_running"),
        step_output_tokens=steps("output_tokens"),
        step_itl_weight=steps("itl_weight"),
        itl_irregular_s=itl_irregular,
        idle_in_system_integral_s=float(idle),
        arrival_lag_integral_s=float(sum(s.lag_s for s in sims)),
        kv_blocks_total=np.array([s.total_blocks for s in sims], dtype=np.int64),
        engine_roles=roles,
        overhead_s=overhead_s,
        window_start_s=float(measured_arrivals.min()),
        window_end_s=float(measured_arrivals.max()),
        closed_loop=closed_loop,
        warnings=(CLOSED_LOOP_WARNING,) if closed_loop else (),
        prefix_hit_tokens=hits,
        host_kv_hit_tokens=host_hits,
        host_kv_load_s=float(sum(h.load_s for h in hosts)),
    )


def simulate(
    workload: Workload,
    scheduler: SchedulerConfig,
    step_time: StepTimeModel,
    *,
    replicas: int = 1,
    routing: Routing = "round_robin",
    routing_rng: np.random.Generator | None = None,
    overheads: ClientOverheads | None = None,
    skip_decode_runs: bool = True,
    progress: Progress | None = None,
) -> SimulationResult:
    """Simulate ``replicas`` identical engine replicas serving ``workload``.

    Parameters
    ----------
    workload : OpenLoopWorkload or ClosedLoopWorkload
        Requests, send times (or clients) and the measurement window.
    scheduler : SchedulerConfig
        Scheduler and KV settings of every replica.
    step_time : StepTimeModel
        Vectorised step duration (see :mod:`servesize.core.simulation.steptime`).
    replicas : int
        Number of replicas behind the router.
    routing : {"round_robin", "random", "least_loaded"}
        How requests are spread over replicas.
    routing_rng : numpy.random.Generator, optional
        Required for ``random`` routing with more than one replica.
    overheads : ClientOverheads, optional
        Client-side latency added to TTFT and E2E (none by default).
    skip_decode_runs : bool
        Advance runs of identical pure-decode steps in one vectorised call. Results are
        identical either way; turning it off is for testing.
    progress : callable, optional
        ``progress(finished, total)`` is called about a hundred times during the run and once
        at the end with ``finished == total`` (for progress bars); the result is the same.

    Returns
    -------
    SimulationResult
        Per-request timestamps, per-step records and the metric helpers.

    Examples
    --------
    >>> from servesize.core.simulation.steptime import ConstantStepTime
    >>> from servesize.core.traffic import trace_workload
    >>> w = trace_workload(arrival_s=np.array([0.0]), prompt_tokens=np.array([4]),
    ...                    output_tokens=np.array([3]))
    >>> cfg = SchedulerConfig(max_num_batched_tokens=16, max_num_seqs=4, block_size_tokens=4,
    ...                    num_kv_blocks=8)
    >>> r = simulate(w, cfg, ConstantStepTime(0.5))
    >>> float(r.first_token_s[0]), float(r.finish_s[0])  # prefill step, then 2 decode steps
    (0.5, 1.5)
    """
    _check_routing(routing, replicas, routing_rng)
    total_overhead = (overheads or ClientOverheads()).total_s
    table = _table(workload, total_overhead)
    closed = isinstance(workload, ClosedLoopWorkload)
    feedback = closed or isinstance(workload, SessionWorkload)
    coupled = feedback or (routing == "least_loaded" and replicas > 1)
    sims = [
        ReplicaSimulator(
            i,
            table,
            scheduler,
            step_time,
            skip_decode_runs=skip_decode_runs,
            stop_on_exit=feedback,
        )
        for i in range(replicas)
    ]
    roles = ("mixed",) * replicas
    choices = _draw_choices(routing, replicas, table.size, routing_rng)
    if not coupled:
        assert isinstance(workload, OpenLoopWorkload)
        table.send_all(workload.arrival_s)
        ids = np.arange(table.size, dtype=np.int64)
        if replicas == 1:
            assignment = np.zeros(table.size, dtype=np.int64)
        elif routing == "round_robin":
            assignment = ids % replicas
        else:
            assert choices is not None
            assignment = choices
        table.replica[:] = assignment
        for i, s in enumerate(sims):
            mine = ids[assignment == i]
            s.push_many(mine, workload.arrival_s[mine])
            if progress is None:
                s.advance()
            else:
                _advance_reporting(s, workload.arrival_s[mine], table, progress)
            s.exits.clear()
        if progress is not None:
            progress(table.size, table.size)
        return _collect_result(table, sims, roles, overhead_s=total_overhead, closed_loop=False)
    pool = _Pool(members=sims, routing=routing, choices=choices)
    driver = _Coupled(
        table,
        [pool],
        [{0} if feedback else set()],
        closed=workload if isinstance(workload, ClosedLoopWorkload) else None,
        entry_pool=0,
        decode_pool=None,
        progress=progress,
        sessions=workload if isinstance(workload, SessionWorkload) else None,
    )
    _start(driver, pool, workload, table)
    driver.run()
    if progress is not None:
        progress(table.size, table.size)
    return _collect_result(table, sims, roles, overhead_s=total_overhead, closed_loop=closed)


def _start(driver: _Coupled, entry: _Pool, workload: Workload, table: RequestTable) -> None:
    if isinstance(workload, OpenLoopWorkload):
        table.send_all(workload.arrival_s)
        entry.static_ids = np.arange(table.size, dtype=np.int64)
        entry.static_times = workload.arrival_s.tolist()
    elif isinstance(workload, SessionWorkload):
        entry.static_ids = workload.first_turns()
        entry.static_times = workload.session_start_s.tolist()
        for r, t in zip(entry.static_ids.tolist(), entry.static_times, strict=True):
            table.send(r, t)
    else:
        for _ in range(min(workload.clients, table.size)):
            driver.send_next(0.0)


def simulate_disaggregated(
    workload: Workload,
    *,
    prefill: SchedulerConfig,
    decode: SchedulerConfig,
    prefill_step_time: StepTimeModel,
    decode_step_time: StepTimeModel,
    transfer: KVTransfer,
    prefill_replicas: int = 1,
    decode_replicas: int = 1,
    prefill_routing: Routing = "round_robin",
    decode_routing: Routing = "least_loaded",
    routing_rng: np.random.Generator | None = None,
    overheads: ClientOverheads | None = None,
    skip_decode_runs: bool = True,
    progress: Progress | None = None,
) -> SimulationResult:
    """Simulate prefill/decode disaggregation: a prefill pool, a KV transfer, a decode pool.

    A request runs its prompt on a prefill replica (which emits the first token and releases the
    request), is routed to a decode replica, waits there until ``ceil(prompt / block)`` blocks are
    free, reserves them and pulls its KV (``transfer.transfer_time_s``); the blocks stay reserved
    from the start of the transfer (vLLM ``WAITING_FOR_REMOTE_KVS``). Then it is admitted like a
    resumed request with its prompt already computed and decodes the remaining ``N - 1`` tokens.
    Requests with ``N = 1`` finish on the prefill replica. Replica ids: prefill replicas first,
    then decode replicas; ``replica`` is the prefill replica and ``decode_replica`` the decode one.

    The prefill replica frees its KV when the prefill completes (vLLM keeps it until the decode
    side has read it; that extra hold is not modelled).
    """
    _check_routing(prefill_routing, prefill_replicas, routing_rng)
    _check_routing(decode_routing, decode_replicas, routing_rng)
    total_overhead = (overheads or ClientOverheads()).total_s
    table = _table(workload, total_overhead)
    table.transfer_s[:] = transfer.transfer_time_s(table.prompt_tokens)
    closed = isinstance(workload, ClosedLoopWorkload)
    feedback = closed or isinstance(workload, SessionWorkload)
    prefill_sims = [
        ReplicaSimulator(
            i, table, prefill, prefill_step_time, prefill_only=True, stop_on_exit=feedback
        )
        for i in range(prefill_replicas)
    ]
    decode_sims = [
        ReplicaSimulator(
            prefill_replicas + i,
            table,
            decode,
            decode_step_time,
            remote_kv=True,
            skip_decode_runs=skip_decode_runs,
            stop_on_exit=feedback,
            first_token_after_transfer=transfer.first_token_after_transfer,
        )
        for i in range(decode_replicas)
    ]
    p_choices = _draw_choices(prefill_routing, prefill_replicas, table.size, routing_rng)
    d_choices = _draw_choices(decode_routing, decode_replicas, table.size, routing_rng)
    pools = [
        _Pool(members=prefill_sims, routing=prefill_routing, choices=p_choices),
        _Pool(members=decode_sims, routing=decode_routing, choices=d_choices),
    ]
    # Prefill replicas feed the decode pool; in a closed loop every finish (on a decode replica,
    # or on a prefill replica for one-token outputs) makes a client send again.
    feeders: list[set[int]] = [{0, 1} if feedback else set(), {0}]
    driver = _Coupled(
        table,
        pools,
        feeders,
        closed=workload if isinstance(workload, ClosedLoopWorkload) else None,
        entry_pool=0,
        decode_pool=1,
        progress=progress,
        sessions=workload if isinstance(workload, SessionWorkload) else None,
    )
    _start(driver, pools[0], workload, table)
    driver.run()
    if progress is not None:
        progress(table.size, table.size)
    roles = ("prefill",) * prefill_replicas + ("decode",) * decode_replicas
    return _collect_result(
        table,
        prefill_sims + decode_sims,
        roles,
        overhead_s=total_overhead,
        closed_loop=closed,
    )
