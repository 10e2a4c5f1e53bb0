"""Exact identities: decode-run skipping ≡ stepping, determinism, conservation, and the coupled
event loop ≡ the independent replica loop."""

import math
from dataclasses import fields, replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from servesize.core.simulation import (
    CapacityPolicy,
    ConstantStepTime,
    LinearStepTime,
    RequestStatus,
    SchedulerConfig,
    SchedulingPolicy,
    SimulationResult,
    StepTimeModel,
    simulate,
)
from servesize.core.traffic import (
    ClosedLoopWorkload,
    GeometricLength,
    OpenLoopWorkload,
    UniformLength,
    closed_loop_workload,
    open_loop_workload,
    trace_workload,
)


def assert_identical(a: SimulationResult, b: SimulationResult) -> None:
    """Every array and scalar equal, NaN matching NaN."""
    for f in fields(SimulationResult):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype, f.name
            assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), f.name
        else:
            assert x == y, f.name


POLICIES: list[SchedulingPolicy] = ["vllm_v1", "sarathi", "no_chunking", "prefill_first"]
CAPACITIES: list[CapacityPolicy] = [
    "incremental",
    "guaranteed_no_evict",
    "max_utilization",
    "new_token_ratio",
]
MODELS: list[StepTimeModel] = [
    ConstantStepTime(0.25),
    LinearStepTime(base_s=0.1, per_token_s=0.01, per_context_token_s=0.001),
]


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[OpenLoopWorkload, SchedulerConfig, StepTimeModel]:
    n = draw(st.integers(1, 25))
    gaps = draw(st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0, 3.0]), min_size=n, max_size=n))
    prompt = draw(st.lists(st.integers(1, 40), min_size=n, max_size=n))
    output = draw(st.lists(st.integers(1, 30), min_size=n, max_size=n))
    timeout = draw(st.sampled_from([math.inf, 4.0, 15.0]))
    policy = draw(st.sampled_from(POLICIES))
    block = draw(st.sampled_from([1, 2, 4, 16]))
    budget = draw(st.integers(8, 64))
    config = SchedulerConfig(
        max_num_batched_tokens=budget,
        max_num_seqs=draw(st.integers(1, 8)),
        block_size_tokens=block,
        num_kv_blocks=draw(st.integers(80 // block + 1, 400 // block + 2)),
        policy=policy,
        watermark_blocks=draw(st.sampled_from([0, 1])),
        admit_full_prompt=draw(st.booleans()),
        max_waiting_requests=draw(st.sampled_from([None, 3])),
        capacity_policy=draw(st.sampled_from(CAPACITIES)),
    )
    model = draw(st.sampled_from(MODELS))
    workload = trace_workload(
        arrival_s=np.cumsum(gaps),
        prompt_tokens=np.array(prompt),
        output_tokens=np.array(output),
        timeout_s=timeout,
    )
    return workload, config, model


@settings(max_examples=120, deadline=None)
@given(scenarios())
def test_decode_run_skipping_matches_stepping_exactly(
    scenario: tuple[OpenLoopWorkload, SchedulerConfig, StepTimeModel],
) -> None:
    workload, config, model = scenario
    skipped = simulate(workload, config, model, skip_decode_runs=True)
    stepped = simulate(workload, config, model, skip_decode_runs=False)
    assert_identical(skipped, stepped)


@settings(max_examples=120, deadline=None)
@given(scenarios())
def test_conservation_and_causality(
    scenario: tuple[OpenLoopWorkload, SchedulerConfig, StepTimeModel],
) -> None:
    workload, config, model = scenario
    r = simulate(workload, config, model)
    # Every request ends in exactly one status and leaves after it arrives.
    assert set(np.unique(r.status)) <= {s.value for s in RequestStatus}
    assert np.all(r.exit_s >= r.arrival_s)
    ok = r.ok
    # Completed requests generated exactly their output and respect causality.
    assert np.array_equal(r.generated_tokens[ok], r.output_tokens[ok])
    assert np.all(r.generated_tokens <= r.output_tokens)
    assert np.all(r.first_scheduled_s[ok] >= r.arrival_s[ok])
    assert np.all(r.first_token_s[ok] > r.first_scheduled_s[ok])
    assert np.all(r.finish_s[ok] >= r.first_token_s[ok])
    # A request has a finish time iff it produced its whole output (a late finish is a timeout).
    assert np.array_equal(~np.isnan(r.finish_s), r.generated_tokens == r.output_tokens)
    rejected = r.status == RequestStatus.REJECTED
    assert np.all(np.isnan(r.first_scheduled_s[rejected]))
    # Token conservation: every emitted token is in some step, and decodes emit one each.
    assert int(r.step_output_tokens.sum()) == int(r.generated_tokens.sum())
    # Capacity limits hold in every step.
    assert np.all(r.step_kv_blocks_used <= config.num_kv_blocks)
    assert np.all(r.step_num_running <= config.max_num_seqs)
    assert np.all(r.step_num_seqs <= r.step_num_running)
    if config.policy != "sarathi":  # Sarathi lets decodes exceed the chunk size.
        assert np.all(r.step_prefill_tokens + r.step_decode_seqs <= config.max_num_batched_tokens)
    # Steps of one replica do not overlap.
    ends = r.step_start_s + r.step_duration_s
    assert np.all(r.step_start_s[1:] >= ends[:-1])
    # Little's law as an identity over the whole run: the engine's own time-weighted count of
    # requests in the system equals the sum of per-request residence times.
    assert math.isclose(
        r.in_system_time_integral_s, float(r.residence_s.sum()), rel_tol=1e-9, abs_tol=1e-9
    )


def _moderate_workload(seed: int, size: int = 2_000) -> OpenLoopWorkload:
    return open_loop_workload(
        num_requests=size,
        rate_per_s=9.0,
        input_tokens=UniformLength(10, 300),
        output_tokens=GeometricLength(40.0),
        rng=np.random.default_rng(seed),
        warmup_requests=size // 10,
    )


_CONFIG = SchedulerConfig(
    max_num_batched_tokens=256, max_num_seqs=16, block_size_tokens=16, num_kv_blocks=400
)
_MODEL = LinearStepTime(base_s=0.01, per_token_s=2e-5, per_context_token_s=1e-6)


def test_same_seed_gives_identical_results() -> None:
    a = simulate(_moderate_workload(3), _CONFIG, _MODEL)
    b = simulate(_moderate_workload(3), _CONFIG, _MODEL)
    assert_identical(a, b)
    assert a.summary() == b.summary()


def test_skipping_matches_stepping_under_kv_pressure() -> None:
    # 100 blocks of 16 tokens at this load force preemptions: the run logic's KV-crossing
    # arithmetic must agree with allocating step by step.
    w = _moderate_workload(5)
    config = replace(_CONFIG, num_kv_blocks=100)
    skipped = simulate(w, config, _MODEL, skip_decode_runs=True)
    stepped = simulate(w, config, _MODEL, skip_decode_runs=False)
    assert skipped.num_preemptions.sum() > 0
    assert_identical(skipped, stepped)
    # One event per preemption, inside the run; the time series bins every one of them.
    assert skipped.preemption_s.size == skipped.num_preemptions.sum()
    assert skipped.horizon_s[0] <= skipped.preemption_s.min()
    assert skipped.preemption_s.max() <= skipped.horizon_s[1]
    assert skipped.time_series(50).preemptions.sum() == skipped.num_preemptions.sum()


def test_skipping_matches_stepping_under_kv_pressure_for_every_capacity_policy() -> None:
    # The same pressure under TensorRT-LLM's and SGLang's admission: no preemption under
    # guaranteed_no_evict, SGLang's ratio decaying through skipped decode runs.
    w = _moderate_workload(5, size=600)
    cases: list[tuple[CapacityPolicy, SchedulingPolicy]] = [
        ("guaranteed_no_evict", "no_chunking"),
        ("new_token_ratio", "prefill_first"),
        ("new_token_ratio", "vllm_v1"),
    ]
    for capacity, policy in cases:
        config = replace(_CONFIG, num_kv_blocks=100, capacity_policy=capacity, policy=policy)
        skipped = simulate(w, config, _MODEL, skip_decode_runs=True)
        stepped = simulate(w, config, _MODEL, skip_decode_runs=False)
        assert_identical(skipped, stepped)
        if capacity == "guaranteed_no_evict":
            assert skipped.num_preemptions.sum() == 0
            assert np.all(skipped.step_kv_blocks_used <= 100)


def test_coupled_loop_with_one_replica_matches_the_plain_loop() -> None:
    # least_loaded routing goes through the conservative multi-replica event loop.
    w = _moderate_workload(7)
    plain = simulate(w, _CONFIG, _MODEL)
    coupled = simulate(w, _CONFIG, _MODEL, replicas=1, routing="least_loaded")
    assert_identical(plain, coupled)


def test_round_robin_replicas_run_like_separate_engines() -> None:
    # Round robin splits an open loop up front: replica k serves requests k, k+2, ...; each
    # must behave exactly like a single engine fed that sub-trace.
    w = _moderate_workload(11, size=600)
    both = simulate(w, _CONFIG, _MODEL, replicas=2, routing="round_robin")
    for k in (0, 1):
        idx = np.arange(k, w.num_requests, 2)
        alone = simulate(
            trace_workload(
                arrival_s=w.arrival_s[idx],
                prompt_tokens=w.prompt_tokens[idx],
                output_tokens=w.output_tokens[idx],
            ),
            _CONFIG,
            _MODEL,
        )
        assert np.array_equal(both.replica[idx], np.full(idx.size, k))
        assert np.array_equal(both.finish_s[idx], alone.finish_s)
        assert np.array_equal(both.first_token_s[idx], alone.first_token_s)


def test_closed_loop_replays_as_its_own_open_loop_trace() -> None:
    # Engine behaviour depends only on when requests arrive: replaying the send times a closed
    # loop produced, as an open-loop trace, reproduces every timestamp (also with two replicas
    # and least-loaded routing, whose decisions depend on the engine state at each send).
    w = closed_loop_workload(
        clients=6,
        num_requests=600,
        input_tokens=GeometricLength(60.0),
        output_tokens=GeometricLength(30.0),
        rng=np.random.default_rng(13),
        think_time_s=0.1,
        think_process="exponential",
    )
    for replicas in (1, 2):
        closed = simulate(w, _CONFIG, _MODEL, replicas=replicas, routing="least_loaded")
        order = np.argsort(closed.arrival_s, kind="stable")
        replay = simulate(
            trace_workload(
                arrival_s=closed.arrival_s,
                prompt_tokens=w.prompt_tokens,
                output_tokens=w.output_tokens,
            ),
            _CONFIG,
            _MODEL,
            replicas=replicas,
            routing="least_loaded",
        )
        assert np.array_equal(replay.finish_s, closed.finish_s[order])
        assert np.array_equal(replay.first_token_s, closed.first_token_s[order])
        assert np.array_equal(replay.replica, closed.replica[order])


@settings(max_examples=40, deadline=None)
@given(scenarios(), st.integers(2, 3))
def test_coupled_replicas_skip_exactly_and_keep_littles_identity(
    scenario: tuple[OpenLoopWorkload, SchedulerConfig, StepTimeModel], replicas: int
) -> None:
    workload, config, model = scenario
    assert_identical(
        simulate(workload, config, model),
        simulate(workload, config, model, routing="least_loaded"),
    )
    skipped = simulate(workload, config, model, replicas=replicas, routing="least_loaded")
    stepped = simulate(
        workload, config, model, replicas=replicas, routing="least_loaded", skip_decode_runs=False
    )
    assert_identical(skipped, stepped)
    assert math.isclose(
        skipped.in_system_time_integral_s,
        float(skipped.residence_s.sum()),
        rel_tol=1e-9,
        abs_tol=1e-9,
    )


@settings(max_examples=40, deadline=None)
@given(scenarios(), st.integers(1, 4), st.sampled_from([0.0, 0.5]))
def test_closed_loop_equals_the_replay_of_its_send_times(
    scenario: tuple[OpenLoopWorkload, SchedulerConfig, StepTimeModel], clients: int, think_s: float
) -> None:
    base, config, model = scenario
    w = ClosedLoopWorkload(
        clients=clients,
        think_time_s=np.full(base.num_requests, think_s),
        prompt_tokens=base.prompt_tokens,
        output_tokens=base.output_tokens,
        timeout_s=base.timeout_s,
    )
    closed = simulate(w, config, model, replicas=2, routing="least_loaded")
    stepped = simulate(w, config, model, replicas=2, routing="least_loaded", skip_decode_runs=False)
    assert_identical(closed, stepped)
    assert int((closed.step_num_waiting + closed.step_num_running).max(initial=0)) <= clients
    order = np.argsort(closed.arrival_s, kind="stable")
    replay = simulate(
        trace_workload(
            arrival_s=closed.arrival_s,
            prompt_tokens=w.prompt_tokens,
            output_tokens=w.output_tokens,
            timeout_s=w.timeout_s,
        ),
        config,
        model,
        replicas=2,
        routing="least_loaded",
    )
    assert np.array_equal(replay.exit_s, closed.exit_s[order])
    assert np.array_equal(replay.status, closed.status[order])
    assert np.array_equal(replay.replica, closed.replica[order])


@settings(max_examples=60, deadline=None)
@given(scenarios(), st.integers(1, 3))
def test_skipping_matches_stepping_with_an_output_delay(
    scenario: tuple[OpenLoopWorkload, SchedulerConfig, StepTimeModel], clients: int
) -> None:
    base, config, model = scenario
    config = replace(config, output_delay_steps=1)
    closed = ClosedLoopWorkload(
        clients=clients,
        think_time_s=np.full(base.num_requests, 0.25),
        prompt_tokens=base.prompt_tokens,
        output_tokens=base.output_tokens,
        timeout_s=base.timeout_s,
    )
    for workload in (base, closed):
        assert_identical(
            simulate(workload, config, model, skip_decode_runs=True),
            simulate(workload, config, model, skip_decode_runs=False),
        )
