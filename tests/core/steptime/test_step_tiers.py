"""Tier A as the analytic limit of what the simulator does: one regression per disagreement
once found between the tiers, each against a figure worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from servesize.calibration import load_measured_profile
from servesize.catalog import ModelCatalog
from servesize.core.hardware import datasheet_spec
from servesize.core.memory import Deployment
from servesize.core.replica import Replica, compile_replica, simulate_replica
from servesize.core.steptime import StepWork, closed_loop
from servesize.core.steptime.wave import lockstep_loop
from servesize.core.traffic import FixedLength, closed_loop_workload
from servesize.db.seed import datasheet_entries
from servesize.settings import get_settings

H100 = next(s for s in (datasheet_spec(e) for e in datasheet_entries()) if s.id == "h100-sxm")
MEASURED = load_measured_profile()


def _replica(model: str = "meta-llama/Llama-3.1-8B", **deployment: object) -> Replica:
    arch = ModelCatalog(get_settings().models_dir).architecture(model)
    return compile_replica(arch, H100, Deployment(**deployment), MEASURED)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def llama() -> Replica:
    return _replica()


def test_one_client_with_a_long_prompt_has_the_tpot_of_its_decode_steps(llama: Replica) -> None:
    # One client: after its first token nothing else runs, so every gap is a batch-1 decode
    # at contexts P+1 ... P+n−1 (it was 27 ms against a 9.4 ms decode step when the prompt's
    # 30000-token prefill was spread over the steps).
    p, n = 30_000, 64
    model = llama.step_model
    est = closed_loop(model, concurrency=1, input_tokens=p, output_tokens=n)
    steps = model.step_time(StepWork.decode(np.ones(n - 1), p + np.arange(1, n))).total_s
    assert est.tpot_s[0] == pytest.approx(float(np.mean(steps)), rel=1e-9)
    assert est.tpot_s[0] == pytest.approx(est.decode_step_time_s[0], rel=2e-3)
    # Nothing queues: TTFT is the zero-load TTFT (request overhead + chunked prefill).
    assert est.ttft_s[0] == pytest.approx(est.ttft_zero_load_s[0], rel=1e-9)


def test_the_mean_field_branch_gives_one_resident_the_decode_step(llama: Replica) -> None:
    # A KV cache of one sequence against two clients: the mean-field branch (the lock-step
    # loop needs every client resident). Its only resident sees no other prefill, so its
    # decode-phase mixed share (f·N − k)/(N − k) is 0 and TPOT is the decode-only step.
    p, n = 2048, 128
    est = closed_loop(
        llama.step_model, concurrency=2, input_tokens=p, output_tokens=n, kv_capacity_tokens=p + n
    )
    assert est.resident_sequences[0] == pytest.approx(1.0)
    assert est.tpot_s[0] < est.step_time_s[0]
    assert est.tpot_s[0] <= 1.01 * est.decode_step_time_s[0]


def test_three_clients_of_short_prompts_share_one_step(llama: Replica) -> None:
    # Three clients of 100-token prompts and 2 output tokens: one step prefills all three
    # (300 tokens in three chunks), the next decodes the three at context 101; they return
    # together and repeat. TTFT = Z + τ(3 × 100 prefill), TPOT = τ(3 decodes of 101).
    model = llama.step_model
    z = model.engine.request_overhead_s
    loop = lockstep_loop(
        model, clients=3, input_tokens=100, output_tokens=2, policy="chunked", overhead_s=z
    )
    prefill = float(model.step_time(StepWork.prefill(100, sequences=3)).total_s[0])
    decode = float(model.step_time(StepWork.decode(3, 101)).total_s[0])
    assert loop.ttft_s == pytest.approx(z + prefill, rel=1e-9)
    assert loop.tpot_s == pytest.approx(decode, rel=1e-9)
    assert loop.request_rate_per_s == pytest.approx(3 / (prefill + decode + z), rel=1e-9)


def test_whole_prompts_and_prefill_first_follow_their_engine_rules(llama: Replica) -> None:
    # Two clients, 100-token prompts, 3 output tokens, a 150-token budget. Whole prompts
    # (TensorRT-LLM): step 1 prefills A; step 2 decodes A and prefills B (1 + 100 <= 150);
    # step 3 decodes both. Prefill-first (SGLang, chunked): step 1 prefills A and the first 50
    # tokens of B; step 2 only B's last 50 (A's decode waits); then decodes of both.
    model = llama.step_model
    kw = {"clients": 2, "input_tokens": 100, "output_tokens": 3, "overhead_s": 0.0}

    def t(work: StepWork) -> float:
        return float(model.step_time(work).total_s[0])

    pa = t(StepWork.prefill(100))
    mixed = t(StepWork.mixed(prefill_tokens=100, decode_sequences=1, decode_context_tokens=101))
    whole = lockstep_loop(
        model,
        policy="whole_prompt",
        budget_tokens=150,
        requests_per_client=1,
        warmup_per_client=0,
        **kw,  # type: ignore[arg-type]
    )
    assert whole.first_wave_ttft_s == pytest.approx((pa + (pa + mixed)) / 2, rel=1e-9)
    first = lockstep_loop(
        model,
        policy="prefill_first",
        budget_tokens=150,
        requests_per_client=1,
        warmup_per_client=0,
        **kw,  # type: ignore[arg-type]
    )
    # Step 1 as the simulator costs it: 150 tokens in two chunks, attention work
    # a = 100·50 + 50·25 = 6250, cached context read back as 2a/150 − 75 = 8.33 tokens
    # (servesize.core.simulation.adapters), causal pairs a + 75 = 6325.
    one = t(
        StepWork(
            prefill_tokens=np.array([150.0]),
            prefill_sequences=np.array([2.0]),
            prefill_cached_tokens=np.array([2 * 6250 / 150 - 75]),
            prefill_attention_pairs=np.array([6325.0]),
            decode_sequences=np.array([0.0]),
            decode_context_tokens=np.array([0.0]),
        )
    )
    two = t(StepWork.prefill(50, cached_tokens=50))
    assert first.first_wave_ttft_s == pytest.approx((one + (one + two)) / 2, rel=1e-9)


def test_the_lockstep_loop_is_what_the_simulator_does(llama: Replica) -> None:
    # Fixed lengths make the simulated closed loop deterministic; Tier A plays the same rule
    # on the same step costs, so the TTFT of the same requests agrees to rounding.
    c, p, n = 64, 2048, 128
    est = closed_loop(llama.step_model, concurrency=c, input_tokens=p, output_tokens=n)
    workload = closed_loop_workload(
        clients=c,
        num_requests=9 * c,
        input_tokens=FixedLength(p),
        output_tokens=FixedLength(n),
        rng=np.random.default_rng(0),
        warmup_requests=2 * c,
        cooldown_requests=c,
    )
    summary = simulate_replica(llama, workload).result.summary()
    assert est.ttft_s[0] == pytest.approx(summary.ttft_s.mean, rel=0.01)
    assert est.tpot_s[0] == pytest.approx(summary.tpot_s.mean, rel=0.01)


def test_data_parallel_ranks_pool_their_kv_cache_in_both_tiers() -> None:
    # Four attention-DP ranks: the simulated engine holds kv_blocks · 4 blocks, so Tier A's
    # residency cap is four ranks' KV tokens, not one's (it admitted 238 of 512 clients and
    # predicted 12.5 s of TTFT where the simulator's pooled engine holds all of them).
    dp = _replica(
        "Qwen/Qwen3-30B-A3B", data_parallel_size=4, enable_expert_parallel=True, max_model_len=8192
    )
    blocks = dp.scheduler.num_kv_blocks * dp.scheduler.block_size_tokens
    assert dp.kv_capacity_tokens == 4 * dp.memory.kv_capacity_tokens == blocks
    c, p, n = 512, 2048, 512
    est = closed_loop(
        dp.step_model,
        concurrency=c,
        input_tokens=p,
        output_tokens=n,
        kv_capacity_tokens=dp.kv_capacity_tokens,
    )
    assert est.resident_sequences[0] > 500
    workload = closed_loop_workload(
        clients=c,
        num_requests=4 * c,
        input_tokens=FixedLength(p),
        output_tokens=FixedLength(n),
        rng=np.random.default_rng(0),
        warmup_requests=c,
        cooldown_requests=c,
    )
    summary = simulate_replica(dp, workload).result.summary()
    assert est.ttft_s[0] == pytest.approx(summary.ttft_s.mean, rel=0.05)
    assert est.tpot_s[0] == pytest.approx(summary.tpot_s.mean, rel=0.05)
