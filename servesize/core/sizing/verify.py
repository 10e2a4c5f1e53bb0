"""Verification by simulation: the best plans simulated at the target load.

A small fleet (at most :data:`FLEET_MAX_REPLICAS` replicas) is simulated whole, with
least-loaded routing (``verification = "fleet"``). A larger one is checked on one replica at
``target / R`` (``"one-replica-thinned"``): with random routing each replica's arrivals are an
independent thinning of the fleet's, a Poisson stream of rate ``target / R`` when the fleet's is
Poisson (renewal arrivals of squared CV ``c²`` thin to ``1 + (c² − 1)/R``, simulated as gamma
gaps with that CV), so the one-replica run is exact for a randomly routed fleet and
conservative for least-loaded routing, which only shortens queues. A large disaggregated plan
runs a sub-fleet of ``p + d <= FLEET_MAX_REPLICAS`` replicas whose ratio is nearest ``x : y``,
at the rate that gives each pool at least its share (``"sub-fleet-thinned"``, conservative).
Runs measure at least :data:`VERIFY_MIN_MEASURED` requests and :data:`VERIFY_RESIDENCES` Tier A
mean residences ``W̄`` (after a warm-up of at least two), so the simulator's stability verdict
is conclusive; a plan whose run is still inconclusive stays, decided by Tier A, with a note —
only a conclusive miss rejects. A plan that misses gets one more replica (the busier pool for
P/D) and is simulated again, at most :data:`MAX_EXTRA_REPLICAS` times, else it is rejected with
the simulated reason. Verification walks the ranking until ``verify_top`` plans pass, so the
plan ranked first is a verified one whenever any passes. Simulated work is bounded per sizing
(:data:`MAX_SIMULATED_REQUESTS`, :data:`MAX_SIMULATED_WORK`): a plan whose run would exceed
what is left stays decided by Tier A, with a note.

What the walk has spent is a value (:class:`SimulationSpent`) threaded through it and
returned, not a counter kept on the side.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats

from servesize.core.replica import DisaggregatedPools, RequestTooLongError, simulate_replica
from servesize.core.simulation import SimulationResult, SimulationSummary, whole_prompt_overflow
from servesize.core.sizing.build import kv_link
from servesize.core.sizing.inputs import SizingInputs
from servesize.core.sizing.rank import rank_key
from servesize.core.sizing.result import Plan, Predicted, Rejection, VerificationMode
from servesize.core.sizing.tasks import TaskMap, serial_map
from servesize.core.sizing.tier_a import Screened, residence_s
from servesize.core.slo.evaluate import SloEvaluation, evaluate_result
from servesize.core.traffic import (
    ArrivalProcess,
    Workload,
    open_loop_workload,
    session_workload,
    with_prefixes,
)

__all__ = [
    "CHUNKED_PREFILL_NOTE",
    "FLEET_MAX_REPLICAS",
    "MAX_EXTRA_REPLICAS",
    "MAX_SIMULATED_REQUESTS",
    "MAX_SIMULATED_WORK",
    "SimulationSpent",
    "Verified",
    "VerifyInputs",
    "simulate_seed",
    "verify_ranked",
]

MAX_EXTRA_REPLICAS = 2
FLEET_MAX_REPLICAS = 8
"""Fleets up to this many replicas are simulated whole; larger ones by thinning."""
VERIFY_MIN_MEASURED = 1800
"""Measured requests of a verification run at least (percentiles up to p99 from ~18 tail
requests)."""
VERIFY_RESIDENCES = 10
"""The measured window spans at least this many Tier A mean residences ``W̄``: the simulator
needs ``2 W̄`` to tell a growing queue from one filling up."""
VERIFY_WARMUP_RESIDENCES = 2
VERIFY_WARMUP_FRACTION = 0.1
MAX_SIMULATED_REQUESTS = 36_000
"""Requests simulated by one sizing, all verification runs and their seeds together (a run
costs about 0.1 to 0.5 ms of CPU per request): 12,000 per seed of :data:`MIN_REPLICATIONS`."""
MAX_SIMULATED_WORK = 120_000
"""Scheduler work of one sizing's verification runs, in request-chunks: each request costs
``1 + ceil(prompt / max_num_batched_tokens)`` (its prefill chunks and its decode run)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifyInputs:
    """What verification reads: the sizing's inputs and, by candidate label, what each plan was
    screened on (its compiled replica and Tier A curves)."""

    sizing: SizingInputs
    screened: Mapping[str, Screened]


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulationSpent:
    """Simulation spent by one sizing so far: runs, requests and request-chunks."""

    runs: int = 0
    requests: int = 0
    work: int = 0

    def plus(self, run: _Run) -> SimulationSpent:
        """What is spent once ``run`` has been simulated too."""
        return SimulationSpent(
            runs=self.runs + 1,
            requests=self.requests + run.num_requests,
            work=self.work + run.work,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Verified:
    """The outcome of :func:`verify_ranked`: the plans left, verified first, each group in rank
    order; the plans verification rejected, in the order tried; what it spent."""

    plans: tuple[Plan, ...]
    rejected: tuple[Rejection, ...]
    spent: SimulationSpent


@dataclass(frozen=True, slots=True, kw_only=True)
class _Run:
    """One verification run: what is simulated, at what rate, for how many requests."""

    mode: VerificationMode
    rate_per_s: float
    """Arrival rate of the simulated replicas (the fleet's ``target`` for ``fleet``)."""
    replicas: int
    prefill_replicas: int | None = None
    decode_replicas: int | None = None
    kept_fraction: float
    """Share of the fleet's arrivals the simulated replicas see."""
    residence_s: float
    num_requests: int
    warmup_requests: int
    work: int


def _sub_fleet(x: int, y: int) -> tuple[int, int]:
    """``(p, d)`` with ``p + d <= FLEET_MAX_REPLICAS`` whose ratio is nearest ``x : y`` (in
    log), the smaller on ties.

    >>> _sub_fleet(10, 2), _sub_fleet(9, 9), _sub_fleet(20, 3)  # 20/3 = 6.67: 7/6.67 < 6.67/6
    ((5, 1), (1, 1), (7, 1))
    """
    options = (
        (max(d * x / (p * y), p * y / (d * x)), p + d, p, d)
        for p in range(1, FLEET_MAX_REPLICAS)
        for d in range(1, FLEET_MAX_REPLICAS - p + 1)
    )
    _, _, p, d = min(options)
    return p, d


def _run(ctx: VerifyInputs, plan: Plan, mode: VerificationMode) -> _Run:
    """The run of ``mode``: its rate, replicas and length. The measured window holds at least
    ``VERIFY_RESIDENCES · L`` requests (``L = rate · W̄`` resident, Little), so it spans that
    many mean residences; the warm-up at least two."""
    sizing = ctx.sizing
    screened = ctx.screened[plan.candidate.label]
    target = sizing.target_rate_per_s
    x, y = plan.prefill_replicas, plan.decode_replicas
    p: int | None = None
    d: int | None = None
    if x is None or y is None:
        per = target / plan.replicas
        rate, replicas = (target, plan.replicas) if mode == "fleet" else (per, 1)
        residence = residence_s(sizing, screened, plan, per, per)
    else:
        p, d = (x, y) if mode == "fleet" else _sub_fleet(x, y)
        rate = target * max(p / x, d / y)
        replicas = p + d
        residence = residence_s(sizing, screened, plan, rate / p, rate / d)
    resident = rate * residence
    measured = max(VERIFY_MIN_MEASURED, math.ceil(VERIFY_RESIDENCES * resident))
    warmup = max(
        math.ceil(VERIFY_WARMUP_FRACTION * measured),
        math.ceil(VERIFY_WARMUP_RESIDENCES * resident),
    )
    budget = plan.memory.deployment.max_num_batched_tokens
    chunks = 1 + math.ceil(sizing.input_tokens / max(budget, 1))
    return _Run(
        mode=mode,
        rate_per_s=rate,
        replicas=replicas,
        prefill_replicas=p,
        decode_replicas=d,
        kept_fraction=min(rate / target, 1.0),
        residence_s=residence,
        num_requests=measured + warmup,
        warmup_requests=warmup,
        work=(measured + warmup) * chunks,
    )


def _plan_run(ctx: VerifyInputs, plan: Plan, spent: SimulationSpent) -> _Run | str:
    """The verification run of ``plan`` (see the module docstring), or why there is none: the
    whole fleet when small, else the thinned check; the cheaper one when over the budget. The
    budget must hold the run on :data:`MIN_REPLICATIONS` seeds."""
    small = plan.replicas <= FLEET_MAX_REPLICAS
    thinned: VerificationMode = (
        "one-replica-thinned" if plan.prefill_replicas is None else "sub-fleet-thinned"
    )
    modes: list[VerificationMode] = ["fleet", thinned] if small else [thinned]
    left_requests = MAX_SIMULATED_REQUESTS - spent.requests
    left_work = MAX_SIMULATED_WORK - spent.work
    run = _run(ctx, plan, modes[0])
    for mode in modes:
        run = _run(ctx, plan, mode)
        seeds = MIN_REPLICATIONS
        if run.num_requests * seeds <= left_requests and run.work * seeds <= left_work:
            return run
    return (
        f"not simulated: a conclusive {run.mode} run needs {run.num_requests} requests "
        f"({run.work} request-chunks; W̄ ≈ {run.residence_s:.3g} s) on each of "
        f"{MIN_REPLICATIONS} seeds, more than this sizing's "
        f"budget has left ({max(left_requests, 0)} requests, {max(left_work, 0)} "
        f"request-chunks); Tier A decides"
    )


def _thinned_arrivals(
    process: ArrivalProcess, cv: float, kept: float
) -> tuple[ArrivalProcess, float]:
    """Arrivals of a ``kept`` share of a renewal stream split at random: Poisson stays Poisson;
    otherwise a geometric sum of gaps, of squared CV ``1 + (c² − 1)·kept``, drawn as gamma gaps
    with that CV (the first two moments).

    >>> _thinned_arrivals("constant", 1.0, 0.25)  # c² = 0 → 0.75
    ('gamma', 0.8660254037844386)
    """
    if kept >= 1.0 or process == "poisson":
        return process, cv
    c2 = 0.0 if process == "constant" else cv * cv
    return "gamma", math.sqrt(1.0 + (c2 - 1.0) * kept)


CHUNKED_PREFILL_NOTE = (
    "requests exceed one rank's max_num_batched_tokens: verified with chunked prefill on "
    "(TensorRT-LLM: enable_chunked_prefill: true), which the engine needs to serve them"
)


def _simulate(
    ctx: VerifyInputs, plan: Plan, run: _Run, replication: int = 0
) -> tuple[SimulationResult, SimulationSummary, SloEvaluation, bool]:
    """Simulate ``run`` of ``plan`` on its compiled replica
    (:func:`~servesize.core.replica.simulate_replica`, least-loaded routing); the flag says
    whether chunked prefill had to be turned on (requests longer than one rank's budget under
    an engine that runs prompts whole: compiled with ``chunked_prefill=True``, as TensorRT-LLM's
    ``enable_chunked_prefill`` needs to serve them).

    Raises :class:`~servesize.core.replica.RequestTooLongError` when a drawn request exceeds
    the plan's ``max_model_len`` (only possible for unbounded length distributions)."""
    replica = ctx.screened[plan.candidate.label].replica
    workload = _workload(ctx, run, replication)
    chunked = bool(
        whole_prompt_overflow(
            replica.scheduler.policy,
            workload.prompt_tokens,
            workload.output_tokens,
            replica.rank_budget_tokens,
            replica.scheduler.capacity_policy,
        )
    )
    if chunked:
        hardware = ctx.sizing.hardware[plan.candidate.hardware_id]
        link = kv_link(hardware) if replica.kv_transfer is not None else None
        replica = replica.configured(chunked_prefill=True, kv_link=link)
    pools = (
        DisaggregatedPools(
            prefill_replicas=run.prefill_replicas,
            decode_replicas=run.decode_replicas,
            decode_routing="least_loaded",
        )
        if run.prefill_replicas is not None and run.decode_replicas is not None
        else None
    )
    simulated = simulate_replica(
        replica, workload, replicas=run.replicas, routing="least_loaded", pools=pools
    )
    summary, evaluation = evaluate_result(simulated.result, ctx.sizing.objective)
    return simulated.result, summary, evaluation, chunked


def _workload(ctx: VerifyInputs, run: _Run, replication: int) -> Workload:
    """The requests of ``run``: open-loop arrivals with the traffic's shared prefixes, or the
    forecast's sessions themselves (started at the kept share of their rate, as many as give
    the run's requests at ``E[T]`` turns each; the turns' history is each session's prefix)."""
    traffic = ctx.sizing.traffic
    rng = (
        np.random.default_rng([traffic.seed, replication])
        if replication
        else np.random.default_rng(traffic.seed)
    )
    sessions = traffic.sessions
    if sessions is not None:
        thinned = replace(
            sessions, sessions_per_s=sessions.sessions_per_s * run.rate_per_s / traffic.rate_per_s
        )
        return session_workload(
            thinned,
            num_sessions=max(math.ceil(run.num_requests / sessions.turns.mean_tokens), 1),
            rng=rng,
            timeout_s=traffic.timeout_s,
            warmup_requests=run.warmup_requests,
        )
    process, cv = _thinned_arrivals(traffic.process, traffic.cv, run.kept_fraction)
    workload = open_loop_workload(
        num_requests=run.num_requests,
        rate_per_s=run.rate_per_s,
        input_tokens=traffic.input_tokens,
        output_tokens=traffic.output_tokens,
        rng=rng,
        process=process,
        cv=cv,
        timeout_s=traffic.timeout_s,
        warmup_requests=run.warmup_requests,
    )
    return with_prefixes(workload, traffic.prefix)


MIN_REPLICATIONS = 3
"""Seeds every verification simulates at least (independent sample paths of one plan)."""
MAX_REPLICATIONS = 6
"""Seeds at most: past them an interval that still straddles the SLO is called marginal."""
CONFIDENCE = 0.95
"""Two-sided confidence of the interval on the binding margin."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Replicated:
    """A plan's verification over several seeds: the run of the request's own seed, the
    interval on the mean binding margin over every seed and the verdict it supports."""

    summary: SimulationSummary
    evaluation: SloEvaluation
    chunked: bool
    verdict: str
    """``met`` (interval above 0), ``missed`` (below), ``marginal`` (straddles at
    :data:`MAX_REPLICATIONS`) or ``inconclusive`` (a run the simulator cannot judge)."""
    note: str
    runs: int


def _margin(summary: SimulationSummary, evaluation: SloEvaluation) -> float:
    """The binding relative margin of one run, in ``[−1, 1]``. An unstable run's margin is at
    most its relative throughput shortfall ``X/λ − 1`` (below 0): a run judged unstable by a
    small shortfall counts as a small miss, one that serves half its load as a large one."""
    worst = min((c.relative_margin for c in evaluation.checks), default=1.0)
    worst = -1.0 if math.isnan(worst) else max(min(worst, 1.0), -1.0)
    if evaluation.stable:
        return worst
    offered = getattr(summary, "offered_rate_per_s", math.nan)
    shortfall = evaluation.throughput_requests_per_s / offered - 1.0 if offered > 0 else -1.0
    return max(min(worst, shortfall, -1e-3), -1.0)


def margin_interval(margins: Sequence[float]) -> tuple[float, float, float]:
    """``(mean, half-width, P(mean > 0))`` of the binding margins: Student-t at
    :data:`CONFIDENCE` over ``R`` replications, ``m̄ ± t_{R−1}·s/√R``; the probability is
    the t distribution's ``P(μ > 0 | m̄, s)`` (1 or 0 when every replication agrees exactly).

    >>> m, h, p = margin_interval([0.1, 0.2, 0.3])
    >>> round(m, 3), round(h, 3), round(p, 3)
    (0.2, 0.248, 0.963)
    """
    values = np.asarray(margins, dtype=np.float64)
    r = values.size
    mean = float(values.mean())
    sd = float(values.std(ddof=1)) if r > 1 else 0.0
    if sd <= 1e-12 * max(1.0, abs(mean)):
        return mean, 0.0, 1.0 if mean > 0 else 0.0
    se = sd / math.sqrt(r)
    half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, r - 1)) * se
    return mean, half, float(stats.t.cdf(mean / se, r - 1))


def simulate_seed(
    task: tuple[VerifyInputs, Plan, _Run, int],
) -> tuple[SimulationSummary, SloEvaluation, bool]:
    """One verification simulation as a task: ``(inputs, plan, run, seed index)`` → its
    summary, evaluation and chunked-prefill flag (:func:`_simulate`; a pure function)."""
    ctx, plan, run, replication = task
    _, summary, evaluation, chunked = _simulate(ctx, plan, run, replication)
    return summary, evaluation, chunked


def _replicate(
    ctx: VerifyInputs, plan: Plan, run: _Run, map_tasks: TaskMap = serial_map
) -> Replicated:
    """Simulate ``run`` on :data:`MIN_REPLICATIONS` seeds (one task each, through
    ``map_tasks``), then more while the interval on the binding margin straddles 0, up to
    :data:`MAX_REPLICATIONS` (module docstring)."""
    label = plan.candidate.label
    alone = replace(ctx, screened={label: ctx.screened[label]})  # a task carries its replica
    seeds = [(alone, plan, run, k) for k in range(MIN_REPLICATIONS)]
    runs = map_tasks(simulate_seed, seeds)
    while True:
        if any(_inconclusive(s, e) for s, e, _ in runs):
            summary, evaluation, chunked = next(r for r in runs if _inconclusive(r[0], r[1]))
            return Replicated(
                summary=summary,
                evaluation=evaluation,
                chunked=chunked,
                verdict="inconclusive",
                note="",
                runs=len(runs),
            )
        margins = [_margin(s, e) for s, e, _ in runs]
        mean, half, p_met = margin_interval(margins)
        if mean - half > 0 or mean + half < 0 or len(runs) >= MAX_REPLICATIONS:
            break
        runs.extend(map_tasks(simulate_seed, [(alone, plan, run, len(runs))]))
    verdict = "met" if mean - half > 0 else "missed" if mean + half < 0 else "marginal"
    # The figures are the request's own seed's; the verdict is the interval's.
    summary, evaluation, chunked = runs[0]
    note = (
        f"{len(runs)} seeds: binding relative margin {mean:+.3f} ± {half:.3f} "
        f"({CONFIDENCE:.0%} interval), P(SLO met) ≈ {p_met:.2f}: {verdict}"
    )
    return Replicated(
        summary=summary,
        evaluation=evaluation,
        chunked=chunked,
        verdict=verdict,
        note=note,
        runs=len(runs),
    )


def _simulated(summary: SimulationSummary, evaluation: SloEvaluation, scale: float) -> Predicted:
    """The run's metrics; rates times ``scale`` (fleet rate over simulated rate)."""
    return Predicted(
        source="simulation",
        ttft_p50_s=summary.ttft_s.p50,
        ttft_p95_s=summary.ttft_s.p95,
        ttft_p99_s=summary.ttft_s.p99,
        tpot_p50_s=summary.tpot_s.p50,
        tpot_p95_s=summary.tpot_s.p95,
        e2e_p95_s=summary.e2e_s.p95,
        throughput_requests_per_s=evaluation.throughput_requests_per_s * scale,
        goodput_requests_per_s=evaluation.goodput_requests_per_s * scale,
        feasible=evaluation.feasible,
        binding=evaluation.binding,
        reason=evaluation.reason,
    )


def _inconclusive(summary: SimulationSummary, evaluation: SloEvaluation) -> bool:
    """Every latency and rate check holds and the only objection is a stability verdict the
    simulator itself calls inconclusive (a window too short to tell)."""
    return (
        not evaluation.feasible
        and not summary.stable
        and not summary.stability_conclusive
        and all(check.holds for check in evaluation.checks)
    )


def _one_more(plan: Plan) -> Plan:
    """The plan with one more replica (for P/D, in the busier pool)."""
    if plan.prefill_replicas is None or plan.decode_replicas is None:
        return replace(
            plan,
            replicas=plan.replicas + 1,
            utilization=plan.utilization * plan.replicas / (plan.replicas + 1),
        )
    assert plan.decode_max_rate_per_replica_per_s is not None
    p_util = 1 / (plan.prefill_replicas * plan.max_rate_per_replica_per_s)
    d_util = 1 / (plan.decode_replicas * plan.decode_max_rate_per_replica_per_s)
    if p_util >= d_util:
        return replace(plan, prefill_replicas=plan.prefill_replicas + 1, replicas=plan.replicas + 1)
    return replace(plan, decode_replicas=plan.decode_replicas + 1, replicas=plan.replicas + 1)


def _describe_run(run: _Run) -> str:
    if run.mode == "fleet":
        return f"the whole fleet at {run.rate_per_s:.4g}/s"
    if run.mode == "one-replica-thinned":
        return f"one replica at its share {run.rate_per_s:.4g}/s"
    return f"a {run.prefill_replicas}P+{run.decode_replicas}D sub-fleet at {run.rate_per_s:.4g}/s"


def _verify_one(
    ctx: VerifyInputs, plan: Plan, spent: SimulationSpent, map_tasks: TaskMap = serial_map
) -> tuple[Plan | Rejection, SimulationSpent]:
    """Simulate ``plan``, adding replicas after conclusive misses: the verified plan, the plan
    left to Tier A with a note (inconclusive run, over the budget), or a rejection; and what
    has been spent once it is done."""
    max_gpus = ctx.sizing.max_gpus
    notes = list(plan.notes)
    for extra in range(MAX_EXTRA_REPLICAS + 1):
        if extra and max_gpus is not None and plan.total_gpus > max_gpus:
            notes.append(f"{plan.replicas} replicas would exceed max_gpus {max_gpus}")
            break
        run = _plan_run(ctx, plan, spent)
        if isinstance(run, str):
            # Unverified (with the misses that added replicas, if any): Tier A decides.
            return replace(plan, notes=(*notes, run)), spent
        try:
            rep = _replicate(ctx, plan, run, map_tasks)
        except RequestTooLongError as exc:
            # An unbounded length distribution drew a request the engine would refuse.
            return Rejection(
                candidate=plan.candidate, reason="context-too-short", detail=str(exc)
            ), spent
        for _ in range(rep.runs):
            spent = spent.plus(run)
        summary, evaluation, chunked = rep.summary, rep.evaluation, rep.chunked
        scale = ctx.sizing.target_rate_per_s / run.rate_per_s
        if chunked and CHUNKED_PREFILL_NOTE not in notes:
            notes.append(CHUNKED_PREFILL_NOTE)
        if rep.verdict == "met":
            return replace(
                plan,
                simulation=_simulated(summary, evaluation, scale),
                verified=True,
                verification=run.mode,
                notes=(*notes, f"verified: {rep.note}"),
            ), spent
        if rep.verdict == "inconclusive":
            notes.append(
                f"not verified: the simulation of {_describe_run(run)} with {plan.replicas} "
                f"replicas was inconclusive ({summary.stability_reason}); Tier A decides"
            )
            return replace(plan, verification=run.mode, notes=tuple(notes)), spent
        if rep.verdict == "marginal":
            notes.append(
                f"simulated {_describe_run(run)} with {plan.replicas} replicas: marginal, "
                f"{rep.note}; counted as a miss"
            )
            if extra < MAX_EXTRA_REPLICAS:
                plan = _one_more(plan)
            continue
        notes.append(
            f"simulated {_describe_run(run)} with {plan.replicas} replicas: {evaluation.reason}"
        )
        if extra < MAX_EXTRA_REPLICAS:
            plan = _one_more(plan)
    return Rejection(
        candidate=plan.candidate,
        reason="verification-failed",
        detail="; ".join(notes),
    ), spent


def verify_ranked(
    ctx: VerifyInputs,
    plans: Sequence[Plan],
    verify_top: int,
    progress: Callable[[int], None] | None = None,
    map_tasks: TaskMap = serial_map,
) -> Verified:
    """Simulate in rank order until ``verify_top`` plans pass (see the module docstring);
    ``progress(passed)`` after each plan verified or refused; ``map_tasks`` runs the
    simulations (:mod:`~servesize.core.sizing.tasks`)."""
    ranked = list(plans)
    rejected: list[Rejection] = []
    spent = SimulationSpent()
    passed = 0
    tried = 0
    done: set[str] = set()
    limit = 3 * verify_top + MAX_EXTRA_REPLICAS
    while passed < verify_top and spent.runs < limit * MAX_REPLICATIONS and tried < limit:
        ranked.sort(key=rank_key)
        pending = [i for i, p in enumerate(ranked) if p.candidate.label not in done]
        if not pending:
            break
        i = pending[0]
        done.add(ranked[i].candidate.label)
        outcome, spent = _verify_one(ctx, ranked[i], spent, map_tasks)
        tried += 1
        if isinstance(outcome, Rejection):
            ranked.pop(i)
            rejected.append(outcome)
        else:
            ranked[i] = outcome
            passed += outcome.verified
        if progress is not None:
            progress(passed)
    ranked.sort(key=lambda p: (not p.verified, *rank_key(p)))
    return Verified(plans=tuple(ranked), rejected=tuple(rejected), spent=spent)
