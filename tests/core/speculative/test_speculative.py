"""Speculative decoding against numbers worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import servesize
from servesize.core.architecture import parse_architecture
from servesize.core.errors import PlanningError
from servesize.core.memory import Deployment, InvalidDeploymentError, plan_memory
from servesize.core.replica import (
    closed_loop_with_speculation,
    compile_replica,
    restore_tokens,
    simulate_replica,
    speculative_workload,
    verification_steps,
)
from servesize.core.simulation import ConstantStepTime
from servesize.core.speculative import (
    SpeculativeDecoding,
    draft_plan,
    expected_tokens_per_step,
    speedup_by_batch,
    verification_work,
)
from servesize.core.steptime import StepWork, closed_loop
from servesize.core.traffic import FixedLength, closed_loop_workload
from tests.core.sizing.fixtures import GPUS

MODELS = Path(servesize.__file__).parent / "data" / "models"
H100 = GPUS["h100-sxm"]


def _arch(name: str):  # type: ignore[no-untyped-def]
    return parse_architecture(json.loads((MODELS / f"{name}.json").read_text()), name=name)


LLAMA = _arch("meta-llama--Llama-3.1-8B")


def test_expected_tokens_by_hand() -> None:
    # α = 0.8, k = 3: 1 + 0.8 + 0.64 + 0.512 = 2.952 = (1 − 0.8⁴)/(1 − 0.8)
    assert expected_tokens_per_step((0.8, 0.8, 0.8)) == pytest.approx(2.952, abs=1e-12)
    # per position: 1 + 0.9 + 0.9·0.5 + 0.9·0.5·0.2 = 2.44
    assert expected_tokens_per_step((0.9, 0.5, 0.2)) == pytest.approx(2.44, abs=1e-12)
    spec = SpeculativeDecoding.of("ngram", 4, acceptance_rate=0.0)
    assert spec.expected_tokens == 1.0
    assert spec.mean_acceptance == 0.0


def test_verification_steps_fractional_credit() -> None:
    # 127 tokens after the first at 2.952 per step: 43 steps give floor(43·2.952) = 126 < 127
    assert verification_steps(np.array([128, 1, 4]), 2.952).tolist() == [44, 0, 2]
    assert 43 * 2.952 < 127 <= 44 * 2.952


def test_verification_is_one_plus_k_rows_reading_kv_once() -> None:
    work = verification_work(np.array([4.0]), np.array([1000.0]), 3)
    assert work.decode_sequences.tolist() == [16.0]  # 4 sequences · (1 + 3) rows
    assert work.decode_context_tokens.tolist() == [4 * 1003.0]  # each KV once, + k new


def test_zero_acceptance_never_pays() -> None:
    """α = 0: E = 1, so the speed-up is τ_dec / (τ_ver + τ_draft) < 1 at every batch."""
    model = compile_replica(LLAMA, H100, Deployment(max_model_len=4096)).step_model
    spec = SpeculativeDecoding.of("eagle3", 3, acceptance_rate=0.0)
    plan = draft_plan(spec, LLAMA, 1)
    table = speedup_by_batch(
        model,
        spec,
        plan.shape,
        context_tokens=1024,
        batch_sizes=[1, 64, 256],
        bytes_per_param=2.0,
        gpus=1,
    )
    for point in table:
        assert point.speedup < 1.0
        assert point.speedup == pytest.approx(
            point.decode_step_s / (point.verification_step_s + point.draft_s), rel=1e-12
        )


def test_ngram_speedup_is_e_times_step_ratio() -> None:
    """n-gram drafts cost nothing on the GPU: speed-up = E · τ_dec(B) / τ_ver(B)."""
    model = compile_replica(LLAMA, H100, Deployment(max_model_len=4096)).step_model
    spec = SpeculativeDecoding.of("ngram", 3, acceptance_rate=0.8)
    plan = draft_plan(spec, LLAMA, 1)
    (point,) = speedup_by_batch(
        model,
        spec,
        plan.shape,
        context_tokens=1024,
        batch_sizes=[8],
        bytes_per_param=2.0,
        gpus=1,
    )
    plain = float(model.step_time(StepWork.decode(8, 1024)).total_s[0])
    assert point.draft_s == 0.0
    assert point.speedup == pytest.approx(2.952 * plain / point.verification_step_s, rel=1e-12)


def test_eagle3_head_size_and_draft_roofline_by_hand() -> None:
    """Llama-3.1-8B EAGLE-3 head: one layer (4096² q, o; 2·4096·1024 k, v; 3·4096·14336 MLP;
    2 norms), QKV again for the 2h input, 3h→h fusion and a 32,000 × 4096 head."""
    layer = 2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096
    qkv = 4096**2 + 2 * 4096 * 1024
    expected = layer + qkv + 3 * 4096**2 + 32_000 * 4096
    plan = draft_plan(SpeculativeDecoding.of("eagle3", 3, acceptance_rate=0.8), LLAMA, 1)
    assert plan.shape.params == expected
    assert plan.weight_bytes_per_gpu == 2 * expected
    # One forward at B = 1 is memory bound: weight bytes + 1024 tokens · 4096 B of KV over
    # the achieved bandwidth, plus 8 kernel floors; k = 3 of them.
    model = compile_replica(LLAMA, H100, Deployment(max_model_len=4096)).step_model
    r = model.rates
    bw = r.memory_bandwidth_bytes_per_s * r.bandwidth_efficiency / r.memory_slowdown
    forward = (2 * expected + 1024 * 4096) / bw + 8 * r.kernel_floor_s
    got = plan.draft_s(model, np.array([1.0]), np.array([1024.0]))[0]
    assert got == pytest.approx(3 * forward, rel=1e-9)


def test_draft_memory_in_the_ledger() -> None:
    base = plan_memory(LLAMA, H100, Deployment(max_model_len=4096))
    replica = compile_replica(
        LLAMA,
        H100,
        Deployment(max_model_len=4096),
        speculative=SpeculativeDecoding.of("eagle3", 3, acceptance_rate=0.8),
    )
    plan = replica.memory
    items = {i.name: i.bytes_per_gpu for i in plan.line_items}
    assert items["speculative draft weights"] == replica.draft.weight_bytes_per_gpu  # type: ignore[union-attr]
    assert (
        plan.weights_bytes_per_gpu
        == base.weights_bytes_per_gpu + items["speculative draft weights"]
    )
    # 33 KV layers instead of 32, and less room: the pool shrinks by more than 1/33
    assert plan.kv_bytes_per_token_per_gpu == base.kv_bytes_per_token_per_gpu * 33 // 32
    assert plan.kv_capacity_tokens < base.kv_capacity_tokens * 32 / 33


def test_refusals_name_the_field() -> None:
    def issues(spec: SpeculativeDecoding, arch=LLAMA) -> set[str]:  # type: ignore[no-untyped-def]
        with pytest.raises(InvalidDeploymentError) as err:
            compile_replica(arch, H100, Deployment(max_model_len=4096), speculative=spec)
        return {i.field for i in err.value.issues}

    assert issues(SpeculativeDecoding.of("mtp", 1, acceptance_rate=0.8)) == {
        "/deployment/speculative/method"
    }
    assert issues(SpeculativeDecoding.of("eagle3", 3, acceptance_rate=1.0)) == {
        "/deployment/speculative/acceptance_rate"
    }
    assert "/deployment/speculative/num_speculative_tokens" in issues(
        SpeculativeDecoding.of("ngram", 0, acceptance_rate=0.5)
    )
    qwen = _arch("Qwen--Qwen3-0.6B")
    assert issues(
        SpeculativeDecoding.of("draft_model", 3, acceptance_rate=0.7, draft_model="q", draft=qwen)
    ) == {"/deployment/speculative/draft_model"}
    assert issubclass(InvalidDeploymentError, PlanningError)


def test_mtp_on_deepseek_reads_touched_experts() -> None:
    ds = _arch("deepseek-ai--DeepSeek-V3")
    plan = draft_plan(SpeculativeDecoding.of("mtp", 1, acceptance_rate=0.85), ds, 8)
    assert plan.shape.layers == 1
    assert plan.shape.routed_params > plan.shape.dense_params  # 256 routed experts


def test_simulator_restores_real_tokens() -> None:
    """Constant steps of 10 ms, one client, 129 output tokens, E = 2.952: the first token after
    one step, then ⌈128/2.952⌉ = 44 verification steps; TPOT = 44 · 10 ms / 128."""
    spec = SpeculativeDecoding.of("ngram", 3, acceptance_rate=0.8)
    w = closed_loop_workload(
        clients=1,
        num_requests=3,
        input_tokens=FixedLength(64),
        output_tokens=FixedLength(129),
        rng=np.random.default_rng(0),
    )
    sw = speculative_workload(w, spec)
    assert sw.output_tokens.tolist() == [45, 45, 45]
    from servesize.core.simulation import SchedulerConfig, simulate

    config = SchedulerConfig(
        max_num_batched_tokens=4096, max_num_seqs=8, block_size_tokens=16, num_kv_blocks=1000
    )
    result = restore_tokens(simulate(sw, config, ConstantStepTime(0.01)), w, spec)
    assert result.output_tokens.tolist() == [129, 129, 129]
    assert result.generated_tokens.tolist() == [129, 129, 129]
    assert np.nanmean(result.tpot_s) == pytest.approx(44 * 0.01 / 128, rel=1e-9)


def test_both_tiers_agree_on_the_gain() -> None:
    deployment = Deployment(max_model_len=4096)
    spec = SpeculativeDecoding.of("eagle3", 3, acceptance_rate=0.8)
    plain = compile_replica(LLAMA, H100, deployment)
    spec_r = compile_replica(LLAMA, H100, deployment, speculative=spec)
    base = closed_loop(
        spec_r.step_model,
        concurrency=1,
        input_tokens=1024,
        output_tokens=256,
        kv_capacity_tokens=spec_r.kv_capacity_tokens,
    )
    tier_a = closed_loop_with_speculation(spec_r, base).estimate
    w = closed_loop_workload(
        clients=1,
        num_requests=6,
        input_tokens=FixedLength(1024),
        output_tokens=FixedLength(256),
        rng=np.random.default_rng(1),
    )
    sim_plain = simulate_replica(plain, w).result.summary()
    sim_spec = simulate_replica(spec_r, w).result.summary()
    assert float(tier_a.tpot_s[0]) == pytest.approx(sim_spec.tpot_s.mean, rel=0.03)
    assert sim_spec.tpot_s.mean < sim_plain.tpot_s.mean / 2
