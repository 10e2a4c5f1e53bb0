"""Overlap-scheduler output delay (``SchedulerConfig.output_delay_steps = 1``): hand-worked traces,
the extra token's KV, closed-loop sends, and exactness of decode-run skipping."""

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servesize.core.simulation import (
    ConstantStepTime,
    LinearStepTime,
    RequestStatus,
    SchedulerConfig,
    SchedulingPolicy,
    SimulationResult,
    StepTimeModel,
    simulate,
)
from servesize.core.simulation.replica_simulator import ReplicaSimulator
from servesize.core.simulation.requests import RequestTable
from servesize.core.traffic import FixedLength, closed_loop_workload, trace_workload
from tests.core.simulation.test_sim_equivalence import assert_identical

PREFILL_STEP_S = 1.0
DECODE_STEP_S = 0.25


def prefill_or_decode(
    prefill_tokens: np.ndarray,
    prefill_attention_work: np.ndarray,
    decode_seqs: np.ndarray,
    decode_context_tokens: np.ndarray,
    num_seqs: np.ndarray,
    /,
) -> np.ndarray:
    """1 s for a step with any prefill, 0.25 s for a pure-decode step."""
    return np.where(np.asarray(prefill_tokens) > 0, PREFILL_STEP_S, DECODE_STEP_S).astype(
        np.float64
    )


CONFIG = SchedulerConfig(
    max_num_batched_tokens=64, max_num_seqs=8, block_size_tokens=4, num_kv_blocks=100
)
DELAYED = replace(CONFIG, output_delay_steps=1)


def lone(config: SchedulerConfig, output: int, *, skip: bool = True) -> SimulationResult:
    w = trace_workload(
        arrival_s=np.array([0.0]), prompt_tokens=np.array([8]), output_tokens=np.array([output])
    )
    return simulate(w, config, prefill_or_decode, skip_decode_runs=skip)


def itl_gaps(r: SimulationResult) -> list[tuple[float, int]]:
    """Pooled ITL as sorted (gap, count) pairs, gaps rounded to 1e-12."""
    values, weights = r.itl_samples()
    counts: dict[float, int] = {}
    for v, w in zip(values.tolist(), weights.tolist(), strict=True):
        if w > 0:
            counts[round(v, 12)] = counts.get(round(v, 12), 0) + int(w)
    return sorted(counts.items())


@pytest.mark.parametrize("skip", [True, False])
def test_lone_request_first_token_one_decode_after_prefill_and_e2e_one_step_later(
    skip: bool,
) -> None:
    # Prompt 8, output 4. Off: prefill [0, 1] emits token 1; decodes end at 1.25, 1.5, 1.75.
    # On: prefill's token is hidden; decodes at 1.25, 1.5, 1.75, 2.0 emit tokens 1..4.
    off, on = lone(CONFIG, 4, skip=skip), lone(DELAYED, 4, skip=skip)
    assert (off.ttft_s[0], off.e2e_s[0]) == pytest.approx((1.0, 1.75))
    assert (on.ttft_s[0], on.e2e_s[0]) == pytest.approx((1.25, 2.0))
    # ITL: three gaps of one decode step each, with or without the delay; TPOT = 0.75 / 3.
    assert itl_gaps(off) == itl_gaps(on) == [(DECODE_STEP_S, 3)]
    assert on.tpot_s[0] == pytest.approx(0.25)
    # One step more, run as a decode; tokens stream in the steps that make them visible.
    assert on.step_duration_s.tolist() == [1.0, 0.25, 0.25, 0.25, 0.25]
    assert on.step_output_tokens.tolist() == [0, 1, 1, 1, 1]
    assert int(on.generated_tokens[0]) == 4
    assert on.status[0] == RequestStatus.OK


def test_single_output_token_arrives_after_the_extra_decode() -> None:
    r = lone(DELAYED, 1)
    assert (r.ttft_s[0], r.e2e_s[0]) == pytest.approx((1.25, 1.25))
    assert itl_gaps(r) == []


def test_the_extra_token_takes_kv() -> None:
    # Block size 1: the request's largest KV is prompt + output - 1 = 11 tokens without the
    # delay and 12 with it (the extra decode appends the last visible token to the cache).
    tight = SchedulerConfig(
        max_num_batched_tokens=64, max_num_seqs=8, block_size_tokens=1, num_kv_blocks=11
    )
    assert lone(tight, 4).status[0] == RequestStatus.OK
    assert int(lone(tight, 4).step_kv_blocks_used.max()) == 11
    assert lone(replace(tight, output_delay_steps=1), 4).status[0] == RequestStatus.REJECTED
    roomy = replace(tight, num_kv_blocks=12, output_delay_steps=1)
    assert int(lone(roomy, 4).step_kv_blocks_used.max()) == 12


@pytest.mark.parametrize("skip", [True, False])
def test_a_prefill_stall_moves_from_itl_into_ttft(skip: bool) -> None:
    # A: t = 0, prompt 8, output 6. B: t = 0.5, prompt 8, output 2.
    # On:  s1 [0, 1] A prefill (hidden); s2 [1, 2] A decode (A's token 1 at 2.0) + B prefill
    #      (hidden); s3 [2, 2.25] A 2, B 1; s4 [2.25, 2.5] A 3, B 2 (B leaves); s5..s7 A 4..6 at
    #      2.75, 3.0, 3.25. TTFT A = 2.0, B = 1.75; E2E A = 3.25, B = 2.0; ITL: six 0.25 gaps.
    # Off: A token 1 at 1.0, 2 at 2.0 (gap 1.0, the stall), then 2.25 .. 3.0; B at 2.0, 2.25.
    w = trace_workload(
        arrival_s=np.array([0.0, 0.5]),
        prompt_tokens=np.array([8, 8]),
        output_tokens=np.array([6, 2]),
    )
    off = simulate(w, CONFIG, prefill_or_decode, skip_decode_runs=skip)
    on = simulate(w, DELAYED, prefill_or_decode, skip_decode_runs=skip)
    assert off.ttft_s.tolist() == pytest.approx([1.0, 1.5])
    assert off.e2e_s.tolist() == pytest.approx([3.0, 1.75])
    assert itl_gaps(off) == [(DECODE_STEP_S, 5), (PREFILL_STEP_S, 1)]
    assert on.ttft_s.tolist() == pytest.approx([2.0, 1.75])
    assert on.e2e_s.tolist() == pytest.approx([3.25, 2.0])
    assert itl_gaps(on) == [(DECODE_STEP_S, 6)]
    assert on.tpot_s.tolist() == pytest.approx([0.25, 0.25])


def test_closed_loop_client_sends_again_when_the_last_token_is_visible() -> None:
    # One client, prompt 8, output 4: each request takes 2.0 s (see the lone trace), so the
    # next one is sent at 2.0 and 4.0 (1.75 and 3.5 without the delay).
    def run(config: SchedulerConfig) -> SimulationResult:
        w = closed_loop_workload(
            clients=1,
            num_requests=3,
            input_tokens=FixedLength(8),
            output_tokens=FixedLength(4),
            rng=np.random.default_rng(0),
        )
        return simulate(w, config, prefill_or_decode)

    assert run(CONFIG).arrival_s.tolist() == pytest.approx([0.0, 1.75, 3.5])
    on = run(DELAYED)
    assert on.arrival_s.tolist() == pytest.approx([0.0, 2.0, 4.0])
    assert on.ttft_s.tolist() == pytest.approx([1.25] * 3)


def test_option_is_zero_or_one() -> None:
    for bad in (2, -1, True):
        with pytest.raises(ValueError, match="output_delay_steps"):
            replace(CONFIG, output_delay_steps=bad)


POLICIES: list[SchedulingPolicy] = ["vllm_v1", "sarathi", "no_chunking", "prefill_first"]
MODELS: list[StepTimeModel] = [
    ConstantStepTime(0.25),
    LinearStepTime(base_s=0.1, per_token_s=0.01, per_context_token_s=0.001),
]


@st.composite
def delayed_scenarios(draw: st.DrawFn) -> tuple[np.ndarray, ...]:
    n = draw(st.integers(1, 20))
    gaps = draw(st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0, 3.0]), min_size=n, max_size=n))
    prompt = draw(st.lists(st.integers(1, 40), min_size=n, max_size=n))
    output = draw(st.lists(st.integers(1, 30), min_size=n, max_size=n))
    return np.cumsum(gaps), np.array(prompt), np.array(output)


@settings(max_examples=80, deadline=None)
@given(
    delayed_scenarios(),
    st.sampled_from(POLICIES),
    st.sampled_from([1, 4, 16]),
    st.integers(8, 64),
    st.integers(1, 8),
    st.sampled_from([math.inf, 4.0, 15.0]),
    st.sampled_from(MODELS),
    st.integers(0, 30),
)
def test_skipping_matches_stepping_and_tokens_are_conserved_with_the_delay(
    arrays: tuple[np.ndarray, ...],
    policy: SchedulingPolicy,
    block: int,
    budget: int,
    seqs: int,
    timeout_s: float,
    model: StepTimeModel,
    spare_blocks: int,
) -> None:
    arrival, prompt, output = arrays
    config = SchedulerConfig(
        max_num_batched_tokens=budget,
        max_num_seqs=seqs,
        block_size_tokens=block,
        num_kv_blocks=80 // block + 1 + spare_blocks,
        policy=policy,
        output_delay_steps=1,
    )
    w = trace_workload(
        arrival_s=arrival, prompt_tokens=prompt, output_tokens=output, timeout_s=timeout_s
    )
    skipped = simulate(w, config, model, skip_decode_runs=True)
    assert_identical(skipped, simulate(w, config, model, skip_decode_runs=False))
    ok = skipped.ok
    assert np.array_equal(skipped.generated_tokens[ok], skipped.output_tokens[ok])
    assert np.all(skipped.generated_tokens <= skipped.output_tokens)
    assert int(skipped.step_output_tokens.sum()) == int(skipped.generated_tokens.sum())
    assert np.all(skipped.step_kv_blocks_used <= config.num_kv_blocks)


def test_closed_loop_skipping_matches_stepping_with_the_delay() -> None:
    w = closed_loop_workload(
        clients=6,
        num_requests=120,
        input_tokens=FixedLength(24),
        output_tokens=FixedLength(40),
        rng=np.random.default_rng(3),
    )
    model = LinearStepTime(base_s=0.01, per_token_s=1e-4, per_context_token_s=1e-6)
    config = replace(CONFIG, output_delay_steps=1)
    assert_identical(
        simulate(w, config, model, skip_decode_runs=True),
        simulate(w, config, model, skip_decode_runs=False),
    )


@pytest.mark.parametrize("role", [{"prefill_only": True}, {"remote_kv": True}])
def test_option_is_refused_on_disaggregated_workers(role: dict[str, bool]) -> None:
    table = RequestTable(
        prompt_tokens=np.array([8]),
        output_tokens=np.array([4]),
        timeout_s=np.array([math.inf]),
        in_window=np.array([True]),
        overhead_s=0.0,
    )
    with pytest.raises(ValueError, match="aggregated"):
        ReplicaSimulator(0, table, DELAYED, ConstantStepTime(0.25), **role)
