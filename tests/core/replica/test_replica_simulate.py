"""simulate_replica: the checks before a run, and the run itself."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from servesize.core.memory import Deployment
from servesize.core.replica import (
    DisaggregatedPools,
    KVLink,
    RequestTooLongError,
    SimulationTooLargeError,
    WholePromptOverflowError,
    check_workload,
    compile_replica,
    simulate_replica,
    simulator_step_model,
)
from servesize.core.simulation import ClientOverheads, simulate
from servesize.core.simulation.adapters import steptime_adapter
from servesize.core.steptime import engine_profile, simulator_constants
from servesize.core.traffic import FixedLength, Workload, open_loop_workload
from tests.core.sizing.fixtures import H100, LLAMA_8B


def _workload(n: int, prompt: int, output: int, rate_per_s: float = 0.5) -> Workload:
    return open_loop_workload(
        num_requests=n,
        rate_per_s=rate_per_s,
        input_tokens=FixedLength(prompt),
        output_tokens=FixedLength(output),
        rng=np.random.default_rng(0),
    )


TRTLLM = Deployment(engine="trtllm", max_model_len=16384)


def test_a_request_over_a_whole_prompt_budget_is_one_typed_error() -> None:
    """Regression: /v1/simulate refused it, the CLI exited 2 and sizing switched to chunking in
    silence; the core now raises one error and chunking is asked for explicitly."""
    replica = compile_replica(LLAMA_8B, H100, TRTLLM)
    # A 10,000-token prompt over an 8192-token budget (GUARANTEED_NO_EVICT, TensorRT-LLM's
    # default, never preempts: the prompt alone is computed at once).
    with pytest.raises(WholePromptOverflowError) as caught:
        simulate_replica(replica, _workload(20, 10_000, 64))
    error = caught.value
    assert (error.longest_tokens, error.rank_budget_tokens, error.explicit) == (10_000, 8192, False)
    assert error.field == "/deployment/max_num_batched_tokens"
    assert "the engine's default scheduler" in str(error)
    chunked = simulate_replica(replica.configured(chunked_prefill=True), _workload(20, 10_000, 64))
    assert chunked.scheduler.policy == "vllm_v1"
    assert chunked.result.summary().completed == 20
    asked = replica.configured(policy="no_chunking")
    with pytest.raises(WholePromptOverflowError, match="policy 'no_chunking'"):
        check_workload(asked, _workload(20, 10_000, 64))


def test_the_whole_prompt_budget_is_one_ranks() -> None:
    # Two DP ranks pool 16,384 tokens in the simulated engine; each rank still has 8192.
    replica = compile_replica(LLAMA_8B, H100, replace(TRTLLM, data_parallel_size=2))
    assert replica.scheduler.max_num_batched_tokens == 16_384
    with pytest.raises(WholePromptOverflowError, match="8192 per rank"):
        check_workload(replica, _workload(20, 10_000, 64))


def test_prompts_that_need_too_many_steps_are_refused() -> None:
    # 50,000 prompts of 512 tokens at 8 tokens per step: 3.2 million prefill steps.
    tiny = compile_replica(LLAMA_8B, H100, Deployment(max_num_seqs=8, max_num_batched_tokens=8))
    with pytest.raises(SimulationTooLargeError) as caught:
        check_workload(tiny, _workload(50_000, 512, 4, rate_per_s=4.0))
    assert caught.value.steps == pytest.approx(3_200_000)
    assert caught.value.field == "/deployment/max_num_batched_tokens"


def test_requests_over_max_model_len_are_refused() -> None:
    replica = compile_replica(LLAMA_8B, H100, Deployment(max_model_len=2048))
    with pytest.raises(RequestTooLongError) as caught:
        check_workload(replica, _workload(5, 2000, 49))  # 2049 tokens > 2048
    assert (caught.value.count, caught.value.first, caught.value.longest_tokens) == (5, 0, 2049)
    check_workload(replica, _workload(5, 2000, 48))  # exactly 2048 runs


def test_a_run_is_the_simulator_on_the_compiled_replica() -> None:
    replica = compile_replica(LLAMA_8B, H100, Deployment())
    workload = _workload(60, 512, 32, rate_per_s=4.0)
    run = simulate_replica(replica, workload)
    # Without overheads the simulator-fitted request overhead of vLLM is the preprocessing.
    expected = simulator_constants(engine_profile("vllm")).request_overhead_s
    assert run.overheads == ClientOverheads(preprocess_s=expected)
    assert run.overheads_from_profile
    assert simulator_step_model(replica).engine.request_overhead_s == expected
    direct = simulate(
        workload,
        replica.scheduler,
        steptime_adapter(simulator_step_model(replica)),
        overheads=ClientOverheads(preprocess_s=expected),
    )
    np.testing.assert_array_equal(run.result.first_token_s, direct.first_token_s)
    np.testing.assert_array_equal(run.result.finish_s, direct.finish_s)
    assert run.replicas == 1
    assert run.transfer is None
    assert run.warnings == replica.memory.warnings


def test_a_disaggregated_run_uses_the_replicas_kv_link() -> None:
    plain = compile_replica(LLAMA_8B, H100, Deployment())
    workload = _workload(20, 1000, 8, rate_per_s=1.0)
    with pytest.raises(ValueError, match="kv_link"):
        simulate_replica(plain, workload, pools=DisaggregatedPools())
    linked = plain.configured(kv_link=KVLink(latency_s=0.01, bandwidth_bytes_per_s=1e9))
    run = simulate_replica(linked, workload, pools=DisaggregatedPools(decode_replicas=2))
    assert run.replicas == 3
    assert run.transfer is linked.kv_transfer
    r = run.result
    moved = r.in_window & np.isfinite(r.transfer_start_s)
    # 1000 tokens · 131,072 B at 1 GB/s is 0.131072 s, plus 0.01 s.
    np.testing.assert_allclose(r.transfer_end_s[moved] - r.transfer_start_s[moved], 0.141072)
