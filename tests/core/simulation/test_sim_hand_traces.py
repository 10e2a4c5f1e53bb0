"""Small traces with a constant step time, every timestamp worked out by hand.

Conventions used in the comments: steps are written ``[start, end]``; a request's state is
``computed / num_tokens`` (tokens in KV / prompt + generated); with block size ``bs`` a request
holds ``ceil(computed_after_step / bs)`` blocks. A step that brings ``computed`` up to
``num_tokens`` emits one token at the step's end.
"""

import math

import numpy as np
import pytest

from servesize.core.simulation import (
    SLO,
    ClientOverheads,
    ConstantStepTime,
    LinearStepTime,
    RequestStatus,
    SchedulerConfig,
    SchedulingPolicy,
    SimulationResult,
    simulate,
)
from servesize.core.traffic import trace_workload


def _run(
    arrival_s: list[float],
    prompt: list[int],
    output: list[int],
    *,
    budget: int = 100,
    max_seqs: int = 10,
    block_size: int = 2,
    blocks: int = 100,
    policy: SchedulingPolicy = "vllm_v1",
    timeout_s: float | np.ndarray = math.inf,
    max_waiting: int | None = None,
    overheads: ClientOverheads | None = None,
    step_s: float = 1.0,
) -> SimulationResult:
    workload = trace_workload(
        arrival_s=np.array(arrival_s, dtype=float),
        prompt_tokens=np.array(prompt),
        output_tokens=np.array(output),
        timeout_s=timeout_s,
    )
    config = SchedulerConfig(
        max_num_batched_tokens=budget,
        max_num_seqs=max_seqs,
        block_size_tokens=block_size,
        num_kv_blocks=blocks,
        policy=policy,
        max_waiting_requests=max_waiting,
    )
    results = [
        simulate(
            workload, config, ConstantStepTime(step_s), overheads=overheads, skip_decode_runs=s
        )
        for s in (True, False)
    ]
    # Both execution modes must agree on every timestamp in these traces.
    for name in ("first_token_s", "finish_s", "exit_s", "step_start_s", "step_itl_weight"):
        np.testing.assert_array_equal(getattr(results[0], name), getattr(results[1], name))
    return results[0]


def test_single_request_at_zero_load() -> None:
    # P=4, O=3, step 1 s. [0,1] prefill 4 -> token 1 at 1; [1,2] -> token 2; [2,3] -> token 3.
    r = _run([0.0], [4], [3])
    assert r.first_token_s.tolist() == [1.0]
    assert r.finish_s.tolist() == [3.0]
    assert r.ttft_s.tolist() == [1.0]
    assert r.e2e_s.tolist() == [3.0]
    assert r.tpot_s.tolist() == [1.0]  # (3 - 1) / (3 - 1)
    values, weights = r.itl_samples()
    assert np.repeat(values, weights).tolist() == [1.0, 1.0]  # gaps 1->2 and 2->3


def test_client_overheads_add_to_ttft_and_e2e_only() -> None:
    over = ClientOverheads(preprocess_s=0.125, output_processing_s=0.25, network_rtt_s=0.5)
    r = _run([0.0], [4], [3], overheads=over)
    assert r.overhead_s == 0.875
    assert r.ttft_s.tolist() == [1.875]
    assert r.engine_ttft_s.tolist() == [1.0]
    assert r.e2e_s.tolist() == [3.875]
    assert r.tpot_s.tolist() == [1.0]


def test_chunked_prefill_splits_a_long_prompt() -> None:
    # Budget 8. A: P=20, O=2 at 0. B: P=3, O=3 at 0.5 (seen at the next boundary, t=1).
    # [0,1] A chunk 8 (0/20 -> 8)                 attention work 8*(0 + 4)   = 32
    # [1,2] A chunk 8 (8 -> 16), budget used up   attention work 8*(8 + 4)   = 96
    # [2,3] A last 4 (-> 20, token 1 at 3); B admitted with 3 left of the budget
    #       (-> 3, token 1 at 3)                  work 4*(16 + 2) + 3*(0 + 1.5) = 76.5
    # [3,4] A decode (token 2, done at 4), B decode (token 2 at 4)
    # [4,5] B decode (token 3, done at 5)
    r = _run([0.0, 0.5], [20, 3], [2, 3], budget=8)
    assert r.first_scheduled_s.tolist() == [0.0, 2.0]
    assert r.first_token_s.tolist() == [3.0, 3.0]
    assert r.finish_s.tolist() == [4.0, 5.0]
    assert r.ttft_s.tolist() == [3.0, 2.5]
    assert r.e2e_s.tolist() == [4.0, 4.5]
    assert r.tpot_s.tolist() == [1.0, 1.0]  # A: (4-3)/1, B: (4.5-2.5)/2
    assert r.queueing_delay_s.tolist() == [0.0, 1.5]
    assert r.step_prefill_tokens.tolist() == [8, 8, 7, 0, 0]
    assert r.step_prefill_attention_work.tolist() == [32.0, 96.0, 76.5, 0.0, 0.0]
    assert r.step_decode_seqs.tolist() == [0, 0, 0, 2, 1]
    # Decode context: [3,4] A has 20 in KV, B has 3 -> (20+1) + (3+1) = 25; [4,5] B: 4+1.
    assert r.step_decode_context_tokens.tolist() == [0, 0, 0, 25, 5]
    assert r.step_num_waiting.tolist() == [0, 1, 0, 0, 0]
    values, weights = r.itl_samples()
    assert np.repeat(values, weights).tolist() == [1.0, 1.0, 1.0]  # A: 3->4; B: 3->4, 4->5


def test_step_time_features_reach_the_model() -> None:
    # Same trace with t = 1 + 0.125 * (prefill + decode tokens):
    # [0,2]     8 prefill tokens            -> 2.0
    # [2,4]     8 prefill tokens            -> 2.0
    # [4,5.875] 7 prefill tokens            -> 1.875 (A token 1, B token 1 at 5.875)
    # [5.875, 7.125] 2 decodes -> 1.25      (A done, B token 2 at 7.125)
    # [7.125, 8.25]  1 decode  -> 1.125     (B done)
    workload = trace_workload(
        arrival_s=np.array([0.0, 0.5]), prompt_tokens=np.array([20, 3]),
        output_tokens=np.array([2, 3]),
    )  # fmt: skip
    config = SchedulerConfig(
        max_num_batched_tokens=8, max_num_seqs=10, block_size_tokens=2, num_kv_blocks=100
    )
    r = simulate(workload, config, LinearStepTime(base_s=1.0, per_token_s=0.125))
    assert r.step_duration_s.tolist() == [2.0, 2.0, 1.875, 1.25, 1.125]
    assert r.first_token_s.tolist() == [5.875, 5.875]
    assert r.finish_s.tolist() == [7.125, 8.25]
    assert r.first_scheduled_s.tolist() == [0.0, 4.0]


def test_max_num_seqs_blocks_admission() -> None:
    # max_num_seqs = 1. A: P=2, O=3 at 0 runs [0,1] [1,2] [2,3] (tokens at 1, 2, 3).
    # B: P=2, O=2 at 0 waits until A leaves at 3: [3,4] token 1, [4,5] token 2.
    r = _run([0.0, 0.0], [2, 2], [3, 2], max_seqs=1)
    assert r.first_scheduled_s.tolist() == [0.0, 3.0]
    assert r.first_token_s.tolist() == [1.0, 4.0]
    assert r.finish_s.tolist() == [3.0, 5.0]
    assert r.step_num_running.max() == 1
    assert r.step_num_waiting.tolist() == [1, 1, 1, 0, 0]


def test_kv_shortage_preempts_the_newest_request_and_recomputes_it() -> None:
    # bs = 2, 4 blocks. A and B: P=3, O=4, both at 0.
    # [0,1] A 3/3 (2 blocks), B 3/3 (2 blocks): free 0; both emit token 1 at 1.
    # [1,2] decodes write token positions 4: ceil(4/2) = 2 blocks, no new block; tokens at 2.
    # t=2: A needs ceil(5/2) = 3 blocks, free 0 -> preempt the tail, B (frees 2, B back to
    #      computed 0 with 3 + 2 = 5 tokens to recompute). No admission in this step.
    # [2,3] A decode, token 3 at 3.        [3,4] A decode, token 4: A done at 4 (frees 3).
    #       (at t=3 B needs ceil(5/2) = 3 blocks, only 1 free: stays waiting)
    # [4,5] B recomputes 5 tokens (prefill work 5*(0 + 2.5) = 12.5) and emits token 3 at 5.
    # [5,6] B decode, token 4 at 6: done.
    r = _run([0.0, 0.0], [3, 3], [4, 4], blocks=4)
    assert r.num_preemptions.tolist() == [0, 1]
    assert r.preemption_s.tolist() == [2.0]  # evicted while the step from 2 was scheduled
    # Samples at 0, 1, ..., 6 (first send to last exit): the one preemption lands in (1, 2].
    series = r.time_series(7)
    assert series.time_s.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert series.preemptions.tolist() == [0, 0, 1, 0, 0, 0, 0]
    assert r.first_token_s.tolist() == [1.0, 1.0]
    assert r.finish_s.tolist() == [4.0, 6.0]
    assert r.step_kv_blocks_used.tolist() == [4, 4, 3, 3, 3, 3]
    assert r.step_prefill_tokens.tolist() == [6, 0, 0, 0, 5, 0]
    assert r.step_prefill_attention_work.tolist() == [9.0, 0.0, 0.0, 0.0, 12.5, 0.0]
    assert r.step_num_waiting.tolist() == [0, 0, 1, 1, 0, 0]
    assert r.tpot_s.tolist() == [1.0, pytest.approx(5.0 / 3.0)]  # B: (6 - 1) / 3
    # ITL gaps: A 1,1,1; B 1 (1->2), 3 (2->5, across the preemption), 1 (5->6).
    assert r.itl_irregular_s.tolist() == [3.0]
    values, weights = r.itl_samples()
    assert sorted(np.repeat(values, weights).tolist()) == [1.0] * 5 + [3.0]
    assert r.itl().p50 == 1.0
    assert r.itl().mean == pytest.approx(8.0 / 6.0)


def test_timeout_counts_as_failure() -> None:
    # A: P=2, O=5 at 0, timeout 3.5 s. B: P=2, O=2 at 1, no timeout.
    # [0,1] A prefill (token 1).  [1,2] A decode + B prefill (A token 2, B token 1 at 2).
    # [2,3] A token 3, B token 2 (B done at 3).  [3,4] A token 4.
    # At t=4 > 3.5 A's client has given up: A is dropped at 4 and counts as timed out.
    r = _run([0.0, 1.0], [2, 2], [5, 2], timeout_s=np.array([3.5, math.inf]))
    assert r.status.tolist() == [RequestStatus.TIMED_OUT, RequestStatus.OK]
    assert r.exit_s.tolist() == [4.0, 3.0]
    assert math.isnan(r.finish_s[0])
    s = r.summary(SLO(ttft_s=10.0))
    assert (s.completed, s.timed_out, s.failed, s.rejected) == (1, 1, 0, 0)
    # All-requests TTFT: {B: 1.0, A: inf}; p50 interpolates halfway to inf.
    assert s.ttft_s.p50 == math.inf
    assert s.ttft_s.mean == math.inf
    assert s.ttft_completed_s.p50 == 1.0
    assert s.slo_attainment == 0.5
    # The window [0, 1] is too short to judge, so the run counts as unstable and its throughput
    # is the measured completions over the time until the last one finished: B at 3 → 1/3 /s.
    # Goodput is that departure rate times the good share (1 of 2 measured): 1/6 /s.
    assert not s.stable
    assert not s.stability_conclusive
    assert s.throughput_requests_per_s == pytest.approx(1.0 / 3.0)
    assert s.goodput_requests_per_s == pytest.approx(1.0 / 6.0)


def test_a_request_finishing_exactly_at_its_timeout_is_ok() -> None:
    # P=2, O=2: tokens at 1 and 2; E2E 2.0 <= timeout 2.0.
    r = _run([0.0], [2], [2], timeout_s=2.0)
    assert r.status.tolist() == [RequestStatus.OK]


def test_full_queue_rejects_arrivals() -> None:
    # max_num_seqs = 1, at most 1 waiting. A at 0 runs; B and C arrive at 0.5 and are seen at
    # t=1: B takes the only waiting slot, C is rejected at 1.
    r = _run([0.0, 0.5, 0.5], [2, 2, 2], [3, 2, 2], max_seqs=1, max_waiting=1)
    assert r.status.tolist() == [RequestStatus.OK, RequestStatus.OK, RequestStatus.REJECTED]
    assert r.exit_s.tolist() == [3.0, 5.0, 1.0]
    s = r.summary()
    assert s.rejected == 1
    assert s.e2e_s.p99 == math.inf


def test_request_that_can_never_fit_is_rejected() -> None:
    # 3 blocks of 2 tokens = 6 slots; P + O - 1 = 7 tokens would be needed.
    r = _run([0.0], [5], [3], blocks=3)
    assert r.status.tolist() == [RequestStatus.REJECTED]


def test_sarathi_reserves_the_whole_prompt_and_avoids_the_preemption() -> None:
    # bs=2, 4 blocks, budget 4. A: P=6, O=2 at 0. B: P=4, O=2 at 0.
    # vllm_v1:
    #   [0,1] A chunk 4 (2 blocks).
    #   [1,2] A last 2 (3 blocks, token 1 at 2); B chunk 2 (1 block): free 0.
    #   t=2   A decode needs a 4th block -> preempt B. [2,3] A token 2, done (frees 4).
    #   [3,4] B recomputes 4 (token 1 at 4). [4,5] B token 2.
    # sarathi:
    #   [0,1] A admitted with all ceil(6/2) = 3 blocks, chunk 4.
    #   [1,2] A 2 (token 1 at 2); B needs 2 blocks for its prompt, 1 free: not admitted.
    #   [2,3] A decode (4th block), token 2: done.  [3,4] B prefill.  [4,5] B decode.
    vllm = _run([0.0, 0.0], [6, 4], [2, 2], budget=4, blocks=4, policy="vllm_v1")
    sarathi = _run([0.0, 0.0], [6, 4], [2, 2], budget=4, blocks=4, policy="sarathi")
    for r in (vllm, sarathi):
        assert r.first_token_s.tolist() == [2.0, 4.0]
        assert r.finish_s.tolist() == [3.0, 5.0]
    assert vllm.num_preemptions.tolist() == [0, 1]
    assert sarathi.num_preemptions.tolist() == [0, 0]
    assert vllm.step_prefill_tokens.tolist() == [4, 4, 0, 4, 0]
    assert sarathi.step_prefill_tokens.tolist() == [4, 2, 0, 4, 0]
    assert vllm.first_scheduled_s.tolist() == [0.0, 1.0]
    assert sarathi.first_scheduled_s.tolist() == [0.0, 3.0]
    assert sarathi.step_kv_blocks_used.tolist() == [3, 3, 4, 2, 3]


def test_no_chunking_waits_for_room_for_the_whole_prompt() -> None:
    # Budget 8. A: P=6, O=2; B: P=4, O=2; both at 0.
    # no_chunking: [0,1] A 6 (2 left < 4: B waits). [1,2] A decode + B 4 (A done, B token 1).
    #              [2,3] B token 2.
    # vllm_v1 instead gives B a 2-token chunk in [0,1].
    r = _run([0.0, 0.0], [6, 4], [2, 2], budget=8, policy="no_chunking")
    assert r.step_prefill_tokens.tolist() == [6, 4, 0]
    assert r.first_scheduled_s.tolist() == [0.0, 1.0]
    assert r.finish_s.tolist() == [2.0, 3.0]
    chunked = _run([0.0, 0.0], [6, 4], [2, 2], budget=8, policy="vllm_v1")
    assert chunked.step_prefill_tokens.tolist() == [8, 2, 0]
    assert chunked.first_scheduled_s.tolist() == [0.0, 0.0]


def test_prompt_longer_than_the_budget_is_rejected_without_chunking() -> None:
    r = _run([0.0], [9], [1], budget=8, policy="no_chunking")
    assert r.status.tolist() == [RequestStatus.REJECTED]


def test_single_token_output_has_no_tpot() -> None:
    r = _run([0.0, 0.0], [2, 2], [1, 3])
    assert math.isnan(r.tpot_s[0])
    assert r.latency("tpot").count == 1


def test_prefill_first_runs_prefills_alone_and_the_decodes_wait() -> None:
    # Budget 8. A: P=4, O=3 at 0; B: P=4, O=2 at 1.5.
    # prefill_first: [0,1] A prefill (token 1). [1,2] A decode (token 2). At 2 B waits, so
    #   [2,3] is B's prefill alone (B token 1) while A waits. [3,4] A and B decode: A token 3
    #   (done), B token 2 (done).
    # vllm_v1 instead runs A's decode with B's prefill in [2,3]: A is done at 3.
    r = _run([0.0, 1.5], [4, 4], [3, 2], budget=8, policy="prefill_first")
    assert r.step_prefill_tokens.tolist() == [4, 0, 4, 0]
    assert r.first_token_s.tolist() == [1.0, 3.0]
    assert r.finish_s.tolist() == [4.0, 4.0]
    mixed = _run([0.0, 1.5], [4, 4], [3, 2], budget=8, policy="vllm_v1")
    assert mixed.finish_s.tolist() == [3.0, 4.0]


def test_prefill_first_decode_steps_are_not_limited_by_the_budget() -> None:
    # Budget 4; A, B, C: P=2, O=3, all at 0.
    # [0,1] prefills A and B (4 tokens: budget spent). [1,2] C's prefill alone.
    # [2,3] and [3,4] decode all three (3 sequences in a budget of 4 either way; with P=2 the
    # budget never binds a decode step, but a prefill step takes at most 4 prompt tokens).
    r = _run([0.0, 0.0, 0.0], [2, 2, 2], [3, 3, 3], budget=4, policy="prefill_first")
    assert r.step_prefill_tokens.tolist() == [4, 2, 0, 0]
    assert r.first_token_s.tolist() == [1.0, 1.0, 2.0]
    assert r.finish_s.tolist() == [4.0, 4.0, 4.0]


def test_prefill_first_decodes_a_batch_larger_than_the_budget() -> None:
    # Budget 2; A, B, C: P=2, O=2, at 0, 1, 2 (each prefill fills the budget alone).
    # [0,1] A prefill. [1,2] B prefill (A waits). [2,3] C prefill (A, B wait).
    # [3,4] one decode step of all three (3 tokens > budget 2): every request finishes at 4.
    r = _run([0.0, 1.0, 2.0], [2, 2, 2], [2, 2, 2], budget=2, policy="prefill_first")
    assert r.step_prefill_tokens.tolist() == [2, 2, 2, 0]
    assert r.finish_s.tolist() == [4.0, 4.0, 4.0]


def test_prefill_first_chunks_a_prompt_longer_than_the_budget() -> None:
    # Budget 4; A: P=6, O=1 at 0. [0,1] 4 prompt tokens, [1,2] the last 2 and the token.
    r = _run([0.0], [6], [1], budget=4, policy="prefill_first")
    assert r.step_prefill_tokens.tolist() == [4, 2]
    assert r.finish_s.tolist() == [2.0]


def test_prefill_first_preempts_a_decode_on_block_shortage_and_recomputes_it() -> None:
    # Block size 2, 4 blocks, budget 8; A, B: P=2, O=4 at 0 (6 tokens, 3 blocks each at the end).
    # [0,1] prefills A and B (1 block each). [1,2] decodes: 3 tokens in KV -> 2 blocks each
    # (free 0). [2,3] decodes within those blocks. [3,4] each needs a 3rd block: B, the last
    # admitted, is preempted (its 2 blocks freed) and A decodes alone: A's 4th token, A done.
    # [4,5] B recomputes its prompt and 3 generated tokens (5) and emits its 4th token.
    r = _run([0.0, 0.0], [2, 2], [4, 4], budget=8, block_size=2, blocks=4, policy="prefill_first")
    assert r.step_prefill_tokens.tolist() == [4, 0, 0, 0, 5]
    assert r.num_preemptions.tolist() == [0, 1]
    assert r.finish_s.tolist() == [4.0, 5.0]


def test_prefill_first_preempts_a_stalled_prompt_chunk_before_rejecting_anyone() -> None:
    # Block size 1, 20 blocks, budget 4. A: P=2, O=15 at 0; B: P=10, O=1 at 10.5.
    # [0,1] A's prompt; A decodes one token a step until 11 (12 blocks). At 11 B's prompt runs
    # in chunks while A waits: [11,12] and [12,13] take 4 tokens each (free 0). At 13 B's last
    # 2 tokens find no block and A's decode needs one: B, the last admitted, is preempted (its
    # 8 blocks freed) and [13,14] decodes A. [14,15] B's first chunk again (free 3); B's next
    # chunk needs 4 blocks, so A decodes alone [15,18] and finishes at 18 (16 blocks freed);
    # [18,19] and [19,20] finish B's prompt and its one token. Nobody is rejected.
    r = _run(
        [0.0, 10.5], [2, 10], [15, 1], budget=4, block_size=1, blocks=20, policy="prefill_first"
    )
    assert r.status.tolist() == [RequestStatus.OK, RequestStatus.OK]
    assert r.step_prefill_tokens.tolist() == [2] + [0] * 10 + [4, 4, 0, 4, 0, 0, 0, 4, 2]
    assert r.num_preemptions.tolist() == [0, 1]
    assert r.finish_s.tolist() == [18.0, 20.0]
