"""Serving rows replayed through the simulator as their benchmarks ran them.

The benchmark modelling is checked against the published client and deployment settings
(hand-computed); the accuracy guard replays a documented subset of the H100 rows and checks the
errors reached through the simulator (``python -m bench.accuracy --simulate`` prints all rows).
The replays are marked ``slow``: CI runs them once, a local ``make test`` skips them.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

from bench.accuracy import architectures
from servesize.calibration import (
    CALIBRATION_MODELS,
    ServingCase,
    compile_models,
    evaluate_serving,
    load_measured_profile,
    load_serving_measurements,
    reference_gpu,
    resolve_cases,
    steady_state_cases,
)
from servesize.calibration.cases import Group
from servesize.calibration.simulated import (
    AICONFIGURATOR_EVAL,
    INFERENCEMAX,
    benchmark_client,
    benchmark_workload,
    client_concurrency,
    replay_scheduler,
    replayable,
    request_overhead_s,
    scheduler_ranks,
    sglang_mixes_chunks,
    simulate_cases,
)
from servesize.core.simulation import ClientOverheads, simulate
from servesize.core.simulation.adapters import steptime_adapter
from servesize.core.steptime import StepTimeModel
from servesize.core.steptime.engines import SIMULATOR_ENGINE_PROFILES

Compiled = dict[Group, tuple[StepTimeModel, float]]
REPLAY = pytest.mark.slow
"""Replays measured rows through the simulator (seconds to tens of seconds each): CI runs them,
a local ``make test`` does not (``SLOW=1`` or ``--slow`` does)."""


@cache
def steady_rows(*, held_out: bool) -> tuple[tuple[ServingCase, ...], Compiled]:
    """Steady-state rows of the calibration models, or (``held_out``) of the other catalogue
    models, with their compiled step-time models."""
    archs = {k: v for k, v in architectures().items() if (k in CALIBRATION_MODELS) != held_out}
    gpu = reference_gpu("H100 SXM")
    cases, _ = resolve_cases(load_serving_measurements(), archs, gpu)
    compiled = compile_models(cases, archs, gpu, measured=load_measured_profile())
    return tuple(steady_state_cases(cases, compiled)), compiled


def calibration() -> tuple[tuple[ServingCase, ...], Compiled]:
    return steady_rows(held_out=False)


@cache
def replayed(case: ServingCase, *, held_out: bool, tuned: bool = True) -> tuple[float, float]:
    """One row's simulated mean TTFT and TPOT (``tuned``: with SIMULATOR_ENGINE_PROFILES).
    ``simulate_cases`` seeds each row's workload on its own, so a row replays alike alone or
    in any list; caching per row lets the subsets and the whole-data guard share replays."""
    _, compiled = steady_rows(held_out=held_out)
    ttft, tpot = simulate_cases([case], compiled, SIMULATOR_ENGINE_PROFILES if tuned else None)
    return float(ttft[0]), float(tpot[0])


def replay_rows(
    cases: list[ServingCase], *, held_out: bool, tuned: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """``simulate_cases`` over ``cases`` (all from one side of ``steady_rows``), row by row."""
    pairs = [replayed(c, held_out=held_out, tuned=tuned) for c in cases]
    return np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])


def find(engine: str, model: str, tp: int, isl: int, osl: int, concurrency: int) -> ServingCase:
    cases, _ = calibration()
    return next(
        c
        for c in cases
        if c.row.engine == engine
        and c.model_id == model
        and c.tensor_parallel_size == tp
        and (c.row.input_tokens, c.row.output_tokens, c.row.concurrency) == (isl, osl, concurrency)
    )


def test_rows_are_attributed_to_the_sweep_that_measured_them() -> None:
    cases, _ = calibration()
    clients = {(c.row.engine, c.model_id): benchmark_client(c) for c in cases}
    assert clients[("vllm", "meta-llama/Llama-3.1-70B")] is INFERENCEMAX
    assert clients[("vllm", "openai/gpt-oss-120b")] is INFERENCEMAX
    assert clients[("trtllm", "meta-llama/Llama-3.1-8B")] is AICONFIGURATOR_EVAL
    assert clients[("trtllm", "Qwen/Qwen3-235B-A22B")] is AICONFIGURATOR_EVAL


def test_inferencemax_rows_send_ten_requests_per_client_all_measured_lengths_in_range() -> None:
    case = find("vllm", "meta-llama/Llama-3.1-70B", 8, 1024, 1024, 16)
    workload = benchmark_workload(case, INFERENCEMAX, np.random.default_rng(0))
    # --num-prompts 10·C, no request left out of the mean, every client starts at t = 0.
    assert workload.num_requests == 160
    assert workload.clients == 16
    assert workload.warmup_requests == 0
    assert np.all(workload.think_time_s == 0.0)
    # --random-range-ratio 0.8: randint(int(0.8·1024) = 819, 1024 + 1).
    for lengths in (workload.prompt_tokens, workload.output_tokens):
        assert lengths.min() >= 819
        assert lengths.max() <= 1024
        assert len(np.unique(lengths)) > 50


def test_aiconfigurator_rows_measure_ten_requests_per_client_with_fixed_lengths() -> None:
    case = find("trtllm", "meta-llama/Llama-3.1-8B", 4, 4096, 128, 32)
    workload = benchmark_workload(case, AICONFIGURATOR_EVAL, np.random.default_rng(0))
    # --request-count 10·C, measured from a drained server (the warm-up is its own phase).
    assert workload.num_requests == 320
    assert workload.warmup_requests == 0
    assert np.all(workload.think_time_s == 0.0)
    assert np.all(workload.prompt_tokens == 4096)
    assert np.all(workload.output_tokens == 128)


def test_trtllm_deployment_budget_is_batch_plus_prompt_plus_1500_in_whole_blocks() -> None:
    case = find("trtllm", "meta-llama/Llama-3.1-8B", 4, 4096, 128, 32)
    _, compiled = calibration()
    model, kv_tokens = compiled[case.group]
    config = replay_scheduler(case, model, kv_tokens, AICONFIGURATOR_EVAL)
    # 32 + 4096 + 1500 = 5628 tokens -> 176 blocks of 32 = 5632; chunked prefill off.
    assert config.max_num_batched_tokens == 5632
    assert config.policy == "no_chunking"
    # aiconfigurator's agg rule: disable_overlap_scheduler = false -> one step's output delay.
    assert config.output_delay_steps == 1


def test_inferencemax_deployment_keeps_the_8192_token_chunked_budget() -> None:
    case = find("vllm", "meta-llama/Llama-3.1-70B", 8, 1024, 1024, 16)
    _, compiled = calibration()
    model, kv_tokens = compiled[case.group]
    config = replay_scheduler(case, model, kv_tokens, INFERENCEMAX)
    assert config.max_num_batched_tokens == 8192
    assert config.policy == "vllm_v1"
    assert config.output_delay_steps == 0


def test_attention_dp_rows_replay_the_recorded_client_count_over_pooled_ranks() -> None:
    # gpt-oss-120b, TensorRT-LLM 1.3.0rc1, TP4: batch_size 48 per rank, silicon_concurrency=192.
    cases, compiled = calibration()
    case = next(c for c in cases if c.row.row_id.endswith("c192_tp4_epnone_1"))
    assert (case.row.concurrency, client_concurrency(case), scheduler_ranks(case)) == (48, 192, 4)
    workload = benchmark_workload(case, AICONFIGURATOR_EVAL, np.random.default_rng(0))
    assert (workload.clients, workload.num_requests) == (192, 1920)
    model, kv_tokens = compiled[case.group]
    config = replay_scheduler(case, model, kv_tokens, AICONFIGURATOR_EVAL)
    # Per rank 48 + 4000 + 1500 = 5548 tokens -> 174 blocks of 32 = 5568; four ranks pooled.
    assert config.max_num_batched_tokens == 4 * 5568
    assert config.max_num_seqs == 192


def test_rows_without_a_recorded_client_count_are_not_replayed() -> None:
    cases, _ = calibration()
    dropped = [c for c in cases if not replayable(c)]
    # Only the 1.2.0rc6.post1 Qwen3-235B row (batch_size 28, no silicon_concurrency).
    assert [(c.row.engine_version, c.row.concurrency) for c in dropped] == [("1.2.0rc6.post1", 28)]
    one_per_rank = find("trtllm", "meta-llama/Llama-3.1-8B", 4, 4096, 128, 32)
    assert (client_concurrency(one_per_rank), scheduler_ranks(one_per_rank)) == (32, 1)


def test_the_first_wave_queues_behind_its_own_prefills() -> None:
    # vLLM's benchmark releases all C requests at t = 0: eight ~7.4k-token prompts (59k tokens)
    # need about seven 8192-token steps, so the first wave waits through a staircase of
    # prefills, while later requests arrive spread out and wait for about one step.
    case = find("vllm", "meta-llama/Llama-3.1-70B", 8, 8192, 1024, 8)
    _, compiled = calibration()
    model, kv_tokens = compiled[case.group]
    workload = benchmark_workload(case, INFERENCEMAX, np.random.default_rng(0))
    result = simulate(
        workload,
        replay_scheduler(case, model, kv_tokens, INFERENCEMAX),
        steptime_adapter(model),
        overheads=ClientOverheads(preprocess_s=model.engine.request_overhead_s),
    )
    first, rest = result.ttft_s[:8], result.ttft_s[8:]
    assert first.mean() > 2 * rest.mean()
    assert np.argmax(first) > np.argmin(first)


# Guard: every GUARD_STRIDE-th steady-state row of each engine that records its client count
# (``replayable``; the full set takes minutes;
# ``python -m bench.accuracy --simulate`` prints it). MAPE in percent reached on this subset with
# SIMULATOR_ENGINE_PROFILES. vLLM meets the floor of docs/modeling.md §5.3 (TTFT <= 25 %,
# TPOT <= 15 %) and is held to it; TensorRT-LLM (overlap scheduler's output delay on) meets the
# TPOT floor but, over all 308 replayable rows, not yet the TTFT one (26.3 %; 23.4 % on this
# subset), so it is held to what it reached.
GUARD_STRIDE = 3
REACHED = {"trtllm": (23.5, 10.3), "vllm": (20.6, 11.9)}
MARGIN = 1.5
FLOOR = (25.0, 15.0)
MEETS_TTFT_FLOOR = {"trtllm": False, "vllm": True}


def subset(engine: str) -> list[ServingCase]:
    cases, _ = calibration()
    return [c for c in cases if c.row.engine == engine and replayable(c)][::GUARD_STRIDE]


def mape(cases: list[ServingCase], ttft: np.ndarray, tpot: np.ndarray) -> tuple[float, float]:
    measured_ttft = np.array([c.row.ttft_s for c in cases])
    measured_tpot = np.array([c.row.tpot_s for c in cases])
    return (
        100 * float(np.mean(np.abs(ttft - measured_ttft) / measured_ttft)),
        100 * float(np.mean(np.abs(tpot - measured_tpot) / measured_tpot)),
    )


@cache
def guarded(engine: str) -> tuple[float, float]:
    rows = subset(engine)
    return mape(rows, *replay_rows(rows, held_out=False))


@REPLAY
@pytest.mark.parametrize("engine", sorted(REACHED))
def test_simulated_errors_stay_at_the_reached_figures(engine: str) -> None:
    ttft, tpot = guarded(engine)
    reached_ttft, reached_tpot = REACHED[engine]
    assert len(subset(engine)) >= 30
    assert ttft <= reached_ttft + MARGIN
    assert tpot <= min(reached_tpot + MARGIN, FLOOR[1])
    if MEETS_TTFT_FLOOR[engine]:
        assert ttft <= FLOOR[0]


@REPLAY
def test_trtllm_simulator_constants_beat_the_mean_field_ones_through_the_simulator() -> None:
    rows = subset("trtllm")
    mean_field_ttft, _ = mape(rows, *replay_rows(rows, held_out=False, tuned=False))
    ttft, _ = guarded("trtllm")
    assert ttft < mean_field_ttft


# Out of sample: rows of catalogue models outside CALIBRATION_MODELS (Qwen3-32B, from the same
# aiconfigurator sweep as the TensorRT-LLM calibration rows), replayed with the constants fitted
# without them. Every OUT_OF_SAMPLE_STRIDE-th replayable row per engine; MAPE in percent reached
# with SIMULATOR_ENGINE_PROFILES (``python -m bench.accuracy --simulate`` prints every row:
# TensorRT-LLM 22.1 / 6.2 over 164 rows, steady-state estimate 28.0 / 7.8; vLLM 18.7 / 9.0 over
# 87, steady 40.7 / 8.8; SGLang 16.9 / 8.1 over 80, steady 83.1 / 35.6). vLLM and SGLang run on
# vLLM's engine constants with the per-request overhead of Dynamo's front-end, fitted on the
# TensorRT-LLM rows (request_overhead_s); every third vLLM row happens to hold the harder ones.
# Each is held to what it reached.
OUT_OF_SAMPLE_STRIDE = 3
OUT_OF_SAMPLE_REACHED = {"trtllm": (22.1, 5.6), "vllm": (28.3, 7.6), "sglang": (17.7, 7.3)}


def held_out() -> tuple[tuple[ServingCase, ...], Compiled]:
    return steady_rows(held_out=True)


def held_out_subset(engine: str) -> list[ServingCase]:
    cases, _ = held_out()
    return [c for c in cases if c.row.engine == engine and replayable(c)][::OUT_OF_SAMPLE_STRIDE]


def test_aiconfigurator_vllm_rows_chunk_with_the_generated_budget_and_no_output_delay() -> None:
    cases, compiled = held_out()

    def row(engine: str, tp: int) -> ServingCase:
        return next(
            c
            for c in cases
            if c.row.engine == engine
            and c.model_id == "Qwen/Qwen3-32B"
            and c.tensor_parallel_size == tp
            and (c.row.input_tokens, c.row.output_tokens, c.row.concurrency) == (1024, 128, 8)
            and replayable(c)
        )

    vllm, trtllm = row("vllm", 8), row("trtllm", 1)
    assert benchmark_client(vllm) is benchmark_client(trtllm) is AICONFIGURATOR_EVAL
    config = replay_scheduler(vllm, *compiled[vllm.group], AICONFIGURATOR_EVAL)
    # vllm.rule: max_num_tokens = 8 + 1024 + 1500 = 2532 (no block rounding); vLLM v1 chunks.
    assert (config.max_num_batched_tokens, config.max_num_seqs) == (2532, 8)
    assert config.policy == "vllm_v1"
    assert config.output_delay_steps == 0
    config = replay_scheduler(trtllm, *compiled[trtllm.group], AICONFIGURATOR_EVAL)
    # trtllm.rule: 2532 rounded up to 80 blocks of 32 = 2560; whole prompts; overlap scheduler.
    assert config.max_num_batched_tokens == 2560
    assert config.policy == "no_chunking"
    assert config.output_delay_steps == 1


def test_aiconfigurator_sglang_0_5_1_rows_run_prefill_only_steps() -> None:
    cases, compiled = held_out()
    case = next(
        c
        for c in cases
        if c.row.engine == "sglang"
        and c.row.engine_version == "0.5.1.post1"
        and c.tensor_parallel_size == 8
        and (c.row.input_tokens, c.row.output_tokens, c.row.concurrency) == (1024, 128, 16)
        and replayable(c)
    )
    config = replay_scheduler(case, *compiled[case.group], AICONFIGURATOR_EVAL)
    # sglang.rule: max_prefill_tokens = 1024 + 1500 = 2524, max_running_requests = C = 16; the
    # 0.5.1.post1 template never passes --enable-mixed-chunk, so decodes do not share a step.
    assert (config.max_num_batched_tokens, config.max_num_seqs) == (2524, 16)
    assert config.policy == "prefill_first"
    assert config.output_delay_steps == 0
    assert not sglang_mixes_chunks(case.row.engine_version)


@REPLAY
@pytest.mark.parametrize("engine", sorted(OUT_OF_SAMPLE_REACHED))
def test_out_of_sample_errors_stay_at_the_reached_figures(engine: str) -> None:
    rows = held_out_subset(engine)
    assert len(rows) >= 25
    ttft, tpot = mape(rows, *replay_rows(rows, held_out=True))
    reached_ttft, reached_tpot = OUT_OF_SAMPLE_REACHED[engine]
    assert ttft <= reached_ttft + MARGIN
    assert tpot <= reached_tpot + MARGIN


# Tier A on the simulator's constants under each row's deployment and client
# (calibration.simulated.lockstep_cases) is the analytic limit of the same replay: out of
# sample, TTFT / TPOT MAPE sglang 16.9 / 8.0, trtllm 22.1 / 7.4, vllm 18.9 / 8.6 against the
# simulator's 16.9 / 8.1, 22.1 / 6.2, 18.7 / 9.0 (``python -m bench.accuracy --simulate``).
TIER_GAP_POINTS = (2.0, 2.0)


@REPLAY
@pytest.mark.parametrize("engine", ["sglang", "trtllm", "vllm"])
def test_out_of_sample_tier_a_is_the_simulators_limit(engine: str) -> None:
    rows = held_out_subset(engine)
    _, compiled = held_out()
    steady = evaluate_serving(rows, compiled, SIMULATOR_ENGINE_PROFILES)
    sim = mape(rows, *replay_rows(rows, held_out=True))
    steady_errors = mape(rows, steady.ttft_s, steady.tpot_s)
    assert abs(sim[0] - steady_errors[0]) <= TIER_GAP_POINTS[0]
    assert abs(sim[1] - steady_errors[1]) <= TIER_GAP_POINTS[1]
    assert sim[1] <= FLOOR[1]


def test_the_per_request_overhead_is_the_front_end_s() -> None:
    cases, compiled = held_out()
    by_engine = {
        c.row.engine: c
        for c in cases
        if c.model_id == "Qwen/Qwen3-32B"
        and (c.row.input_tokens, c.row.output_tokens, c.row.concurrency) == (1024, 128, 16)
        and replayable(c)
    }
    dynamo = SIMULATOR_ENGINE_PROFILES["trtllm"].request_overhead_s
    assert dynamo < 0.01 < SIMULATOR_ENGINE_PROFILES["vllm"].request_overhead_s
    for engine in ("vllm", "sglang", "trtllm"):
        case = by_engine[engine]
        assert benchmark_client(case).dynamo_frontend
        model = compiled[case.group][0].with_engine(SIMULATOR_ENGINE_PROFILES[engine])
        # aiconfigurator's run.sh puts every engine behind dynamo.frontend: TensorRT-LLM's
        # fitted overhead, whatever the engine.
        assert request_overhead_s(case, model, SIMULATOR_ENGINE_PROFILES) == dynamo
        # Without a front-end profile to borrow, the engine's own.
        assert request_overhead_s(case, model, None) == model.engine.request_overhead_s
    # InferenceMAX ran `vllm serve`: the vLLM profile's own overhead.
    cal_cases, cal_compiled = calibration()
    served = next(c for c in cal_cases if c.row.engine == "vllm" and replayable(c))
    assert not benchmark_client(served).dynamo_frontend
    model = cal_compiled[served.group][0].with_engine(SIMULATOR_ENGINE_PROFILES["vllm"])
    own = SIMULATOR_ENGINE_PROFILES["vllm"].request_overhead_s
    assert request_overhead_s(served, model, SIMULATOR_ENGINE_PROFILES) == own


# The floor of docs/modeling.md §5.3 on the whole measured data: every replayable row of the
# catalogue's models in e2e_serving.csv, calibration and out of sample together, replayed through
# the simulator with SIMULATOR_ENGINE_PROFILES. Reached (``python -m bench.accuracy --simulate``,
# "every replayable row"): TensorRT-LLM 24.6 / 8.1 over 483 rows (its fp8 rows with an FP8 KV
# cache), vLLM 18.0 / 8.4 over 190, SGLang 17.1 / 8.2 over 80 (TTFT / TPOT MAPE, %).
# TensorRT-LLM's calibration rows alone stay at 26.2 / 8.9 (the Llama-3.1-8B rows whose TTFT
# follows no documented mechanism). Tier A on the
# same rows and constants follows the simulator within TIER_GAP_POINTS (with the separately
# fitted steady-state constants and the mean-field loop it was 31.3 / 8.4, 32.2 / 8.3,
# 83.1 / 35.6).
WHOLE_DATA_REACHED = {"trtllm": (24.6, 8.1), "vllm": (18.0, 8.4), "sglang": (17.1, 8.2)}
WHOLE_DATA_ROWS = {"trtllm": 483, "vllm": 190, "sglang": 80}


@cache
def whole_data(engine: str) -> tuple[tuple[float, float], tuple[float, float]]:
    """(simulator, steady-state estimate) TTFT and TPOT MAPE of ``engine`` over every row (one
    engine per call, so the parametrized cases replay in parallel under xdist)."""
    rows: list[ServingCase] = []
    models: Compiled = {}
    ttft: list[np.ndarray] = []
    tpot: list[np.ndarray] = []
    for held in (False, True):
        cases, compiled = steady_rows(held_out=held)
        side = [c for c in cases if c.row.engine == engine and replayable(c)]
        side_ttft, side_tpot = replay_rows(side, held_out=held)
        rows += side
        ttft.append(side_ttft)
        tpot.append(side_tpot)
        models.update(compiled)
    assert len(rows) == WHOLE_DATA_ROWS[engine]
    steady = evaluate_serving(rows, models, SIMULATOR_ENGINE_PROFILES)
    return (
        mape(rows, np.concatenate(ttft), np.concatenate(tpot)),
        mape(rows, steady.ttft_s, steady.tpot_s),
    )


@REPLAY
@pytest.mark.parametrize("engine", sorted(WHOLE_DATA_REACHED))
def test_every_measured_row_meets_the_floor_through_the_simulator(engine: str) -> None:
    (ttft, tpot), (steady_ttft, steady_tpot) = whole_data(engine)
    reached_ttft, reached_tpot = WHOLE_DATA_REACHED[engine]
    assert ttft <= min(reached_ttft + MARGIN, FLOOR[0])
    assert tpot <= min(reached_tpot + MARGIN, FLOOR[1])
    # One model, two tiers: Tier A is the simulator's analytic limit on the same rows.
    assert abs(ttft - steady_ttft) <= TIER_GAP_POINTS[0]
    assert abs(tpot - steady_tpot) <= TIER_GAP_POINTS[1]
