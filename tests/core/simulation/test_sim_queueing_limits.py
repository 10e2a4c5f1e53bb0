"""Degenerate configurations against queueing theory (docs/modeling.md §5.2 A and B).

With ``max_num_seqs = 1`` and a constant step time ``τ`` the engine is one FCFS server whose
service time is ``S = O·τ`` (one prefill step that emits the first token, then ``O - 1`` decode
steps). That gives an exact sample-path oracle (the Lindley recursion) and the
Pollaczek–Khinchine means. With ``max_num_seqs = c`` and a step time that does not depend on the
batch, the ``c`` slots are ``c`` servers sharing one FCFS queue (M/G/c, Erlang C in the limit).

Statistical checks use batch means: 20 consecutive batches of the measured requests, a Student-t
99 % interval for the mean, and a stated allowance for the known discretisation (admission happens
at step boundaries, so a request that arrives while a step runs waits up to one step).
"""

import numpy as np
import pytest
from scipy import stats

from servesize.core.queueing import mg1, mmc, service_scv_from_second_moment
from servesize.core.simulation import (
    ConstantStepTime,
    LinearStepTime,
    SchedulerConfig,
    SimulationResult,
    simulate,
)
from servesize.core.traffic import (
    FixedLength,
    GeometricLength,
    UniformLength,
    open_loop_workload,
)

BATCHES = 20


def _config(max_num_seqs: int) -> SchedulerConfig:
    """A replica whose token budget and KV cache never bind."""
    return SchedulerConfig(
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=10_000,
        block_size_tokens=16,
        num_kv_blocks=10**7,
    )


def _ci_halfwidth(samples: np.ndarray) -> float:
    """99 % batch-means half-width of the mean of ``samples`` (in arrival order)."""
    means = np.array([b.mean() for b in np.array_split(samples, BATCHES)])
    t = stats.t.ppf(0.995, BATCHES - 1)
    return float(t * means.std(ddof=1) / np.sqrt(BATCHES))


def _waits(r: SimulationResult) -> np.ndarray:
    return np.asarray(r.queueing_delay_s[r.in_window])


def test_one_at_a_time_engine_follows_the_lindley_recursion_exactly() -> None:
    # S_i = O_i τ; W_{i+1} = max(0, W_i + S_i - A_{i+1}); first token at send + W + τ,
    # finish at send + W + S.
    tau = 0.01
    w = open_loop_workload(
        num_requests=5_000,
        rate_per_s=4.0,
        input_tokens=UniformLength(1, 500),
        output_tokens=GeometricLength(20.0),
        rng=np.random.default_rng(1),
    )
    r = simulate(w, _config(1), ConstantStepTime(tau))
    service = w.output_tokens * tau
    gaps = np.diff(w.arrival_s)
    wait = np.zeros(w.num_requests)
    for i in range(w.num_requests - 1):
        wait[i + 1] = max(0.0, wait[i] + service[i] - gaps[i])
    np.testing.assert_allclose(r.first_scheduled_s - w.arrival_s, wait, rtol=0, atol=1e-9)
    np.testing.assert_allclose(r.first_token_s, w.arrival_s + wait + tau, rtol=0, atol=1e-9)
    np.testing.assert_allclose(r.finish_s, w.arrival_s + wait + service, rtol=0, atol=1e-9)


def test_md1_mean_wait_matches_pollaczek_khinchine() -> None:
    # One output token: every request is one step of τ. ρ = λτ = 0.7.
    # P-K for deterministic service: E[Wq] = ρτ / (2(1 - ρ)) = 0.7 * 0.01 / 0.6 = 0.011667 s.
    tau, rate = 0.01, 70.0
    w = open_loop_workload(
        num_requests=20_000,
        rate_per_s=rate,
        input_tokens=FixedLength(32),
        output_tokens=FixedLength(1),
        rng=np.random.default_rng(2),
        warmup_requests=1_000,
    )
    r = simulate(w, _config(1), ConstantStepTime(tau))
    oracle = mg1(arrival_rate_per_s=rate, service_time_s=tau, service_scv=0.0)
    waits = _waits(r)
    assert abs(waits.mean() - oracle.mean_wait_s) <= _ci_halfwidth(waits)
    assert r.summary().engine_ttft_completed_s.mean == pytest.approx(waits.mean() + tau, rel=1e-9)


def test_geometric_outputs_give_the_mg1_mean_wait_and_littles_law() -> None:
    # S = O τ with O ~ Geometric(p = 1/20): E[S] = 20 τ, E[S²] = τ² (2 - p) / p² (scv = 1 - p,
    # close to M/M/1). ρ = 0.6.
    tau, mean_out = 0.005, 20.0
    service = mean_out * tau
    rate = 0.6 / service
    dist = GeometricLength(mean_out)
    w = open_loop_workload(
        num_requests=12_000,
        rate_per_s=rate,
        input_tokens=FixedLength(8),
        output_tokens=dist,
        rng=np.random.default_rng(3),
        warmup_requests=1_000,
    )
    r = simulate(w, _config(1), ConstantStepTime(tau))
    scv = service_scv_from_second_moment(
        service_time_s=service, second_moment_s2=tau**2 * dist.second_moment_tokens2
    )
    oracle = mg1(arrival_rate_per_s=rate, service_time_s=service, service_scv=scv)
    waits = _waits(r)
    assert abs(waits.mean() - oracle.mean_wait_s) <= _ci_halfwidth(waits)
    # Little's law: the engine's own time-average of requests in the system equals
    # λ_eff · mean residence exactly, and L = λ E[T] from P-K within the statistical error.
    s = r.summary()
    assert s.mean_in_system == pytest.approx(s.littles_law_in_system, rel=1e-9)
    residence = r.residence_s[r.in_window]
    assert abs(residence.mean() - oracle.mean_response_s) <= _ci_halfwidth(residence)


def test_batch_slots_with_a_constant_step_approach_erlang_c() -> None:
    # max_num_seqs = c = 4 and a step time independent of the batch: each slot is a server.
    # Geometric outputs (mean 50, τ = 0.02 s) make S ≈ exponential with mean 1 s; ρ = 0.75.
    # Allowance beyond the CI: an arrival that finds a free slot mid-step waits for the step
    # boundary (at most τ), and scv = 1 - p = 0.98 instead of 1 (under 1 % of E[Wq]).
    tau, mean_out, c, rate = 0.02, 50.0, 4, 3.0
    w = open_loop_workload(
        num_requests=12_000,
        rate_per_s=rate,
        input_tokens=FixedLength(8),
        output_tokens=GeometricLength(mean_out),
        rng=np.random.default_rng(4),
        warmup_requests=1_000,
    )
    r = simulate(w, _config(c), ConstantStepTime(tau))
    oracle = mmc(arrival_rate_per_s=rate, service_time_s=mean_out * tau, servers=c)
    waits = _waits(r)
    allowance = tau + 0.01 * oracle.mean_wait_s
    assert abs(waits.mean() - oracle.mean_wait_s) <= _ci_halfwidth(waits) + allowance


def test_random_routing_splits_into_independent_queues_and_loses_to_pooling() -> None:
    # c = 4 one-at-a-time replicas. Random routing thins the Poisson stream into four
    # independent Poisson(λ/c) streams, so each replica is M/G/1 at λ/c (P-K). Pooling the four
    # servers behind one queue (Erlang C) waits far less; joining the least loaded replica lies
    # in between.
    tau, mean_out, c, rate = 0.005, 20.0, 4, 30.0  # E[S] = 0.1 s, ρ = 0.75 per replica
    dist = GeometricLength(mean_out)
    w = open_loop_workload(
        num_requests=8_000,
        rate_per_s=rate,
        input_tokens=FixedLength(8),
        output_tokens=dist,
        rng=np.random.default_rng(5),
        warmup_requests=1_000,
    )
    config = _config(1)
    model = ConstantStepTime(tau)
    random = simulate(
        w, config, model, replicas=c, routing="random", routing_rng=np.random.default_rng(6)
    )
    service = mean_out * tau
    scv = service_scv_from_second_moment(
        service_time_s=service, second_moment_s2=tau**2 * dist.second_moment_tokens2
    )
    per_replica = mg1(arrival_rate_per_s=rate / c, service_time_s=service, service_scv=scv)
    waits = _waits(random)
    assert abs(waits.mean() - per_replica.mean_wait_s) <= _ci_halfwidth(waits)
    pooled = mmc(arrival_rate_per_s=rate, service_time_s=service, servers=c)
    jsq = simulate(w, config, model, replicas=c, routing="least_loaded")
    assert pooled.mean_wait_s < _waits(jsq).mean() < waits.mean()
    # Every replica got about a quarter of the requests.
    counts = np.bincount(random.replica, minlength=c)
    assert counts.min() > 0.23 * w.num_requests


def test_processor_sharing_limit_is_insensitive_to_the_service_distribution() -> None:
    # A step that takes τ0 per request in the batch serves each of n requests at rate 1/(n τ0):
    # processor sharing. M/G/1-PS: E[T] = E[S] / (1 - ρ) whatever the distribution of S.
    # Allowance: arrivals join at step boundaries (a step lasts n τ0) — a few per cent here.
    tau0, mean_out, rate = 0.002, 25.0, 12.0  # E[S] = 0.05 s, ρ = 0.6, E[T] = 0.125 s
    model = LinearStepTime(base_s=1e-9, per_seq_s=tau0)
    config = _config(1_000)
    expected = mean_out * tau0 / (1 - rate * mean_out * tau0)
    for outputs in (FixedLength(25), GeometricLength(mean_out)):
        w = open_loop_workload(
            num_requests=8_000,
            rate_per_s=rate,
            input_tokens=FixedLength(1),
            output_tokens=outputs,
            rng=np.random.default_rng(7),
            warmup_requests=1_000,
        )
        r = simulate(w, config, model)
        sojourn = r.engine_e2e_s[r.in_window]
        assert abs(sojourn.mean() - expected) <= _ci_halfwidth(sojourn) + 0.05 * expected
