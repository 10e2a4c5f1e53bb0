"""KV admission and eviction per engine (``SchedulerConfig.capacity_policy``): hand traces with a
constant 1 s step, every timestamp worked out by hand.

Conventions as in ``test_sim_hand_traces.py``: steps ``[start, end]``; a request's state is
``computed / num_tokens``; with block size ``bs`` a request holds ``ceil(computed / bs)`` blocks
(incrementally) or, under ``guaranteed_no_evict``, ``ceil((P + O - 1) / bs)`` from admission (the
most tokens it ever holds in KV: its last output token is never written back).
"""

import numpy as np
import pytest

from servesize.core.simulation import (
    CapacityPolicy,
    ConstantStepTime,
    RequestStatus,
    SchedulerConfig,
    SchedulingPolicy,
    SimulationResult,
    engine_capacity_policy,
    simulate,
    whole_prompt_overflow,
)
from servesize.core.traffic import trace_workload


def _run(
    arrival_s: list[float],
    prompt: list[int],
    output: list[int],
    *,
    capacity: CapacityPolicy,
    policy: SchedulingPolicy = "no_chunking",
    block_size: int = 2,
    blocks: int = 8,
) -> SimulationResult:
    workload = trace_workload(
        arrival_s=np.array(arrival_s, dtype=float),
        prompt_tokens=np.array(prompt),
        output_tokens=np.array(output),
    )
    config = SchedulerConfig(
        max_num_batched_tokens=100,
        max_num_seqs=10,
        block_size_tokens=block_size,
        num_kv_blocks=blocks,
        policy=policy,
        capacity_policy=capacity,
    )
    results = [
        simulate(workload, config, ConstantStepTime(1.0), skip_decode_runs=s) for s in (True, False)
    ]
    for name in ("first_token_s", "finish_s", "num_preemptions", "step_kv_blocks_used"):
        np.testing.assert_array_equal(getattr(results[0], name), getattr(results[1], name))
    return results[0]


def test_guaranteed_no_evict_holds_the_second_request_until_the_first_finishes() -> None:
    # bs = 2, 8 blocks. A and B: P=4, O=6, both at 0. Each holds at most 4 + 6 - 1 = 9 tokens:
    # ceil(9/2) = 5 blocks, reserved at admission; 5 + 5 > 8, so only one runs.
    # [0,1] A prefill (5 blocks, free 3; B needs 5: waits), token 1 at 1.
    # [1,2] ... [5,6] A decodes tokens 2..6: done at 6, frees 5.
    # [6,7] B prefill, token 1 at 7. [7,8] ... [11,12] tokens 2..6: done at 12.
    r = _run([0.0, 0.0], [4, 4], [6, 6], capacity="guaranteed_no_evict")
    assert r.first_token_s.tolist() == [1.0, 7.0]
    assert r.ttft_s.tolist() == [1.0, 7.0]
    assert r.finish_s.tolist() == [6.0, 12.0]
    assert r.num_preemptions.tolist() == [0, 0]
    assert r.step_kv_blocks_used.tolist() == [5] * 12
    assert r.step_num_waiting.tolist() == [1] * 6 + [0] * 6


@pytest.mark.parametrize("capacity", ["max_utilization", "incremental"])
def test_max_utilization_runs_both_until_the_pool_runs_out_then_pauses_the_newest(
    capacity: CapacityPolicy,
) -> None:
    # Same requests, blocks allocated as the sequences grow.
    # [0,1] A 4/4 and B 4/4 (2 blocks each, free 4): tokens 1 at 1.
    # [1,2] both write position 5: 3 blocks each (free 2).  [2,3] position 6: no new block.
    # [3,4] position 7: 4 blocks each (free 0).  [4,5] position 8: no new block; tokens 5 at 5.
    # t=5: A needs a 5th block, none free -> pause the newest started request, B (frees 4; it
    #      keeps its 5 tokens and recomputes 4 + 5 = 9). No admission in that step.
    # [5,6] A token 6: done at 6 (frees 5).  [6,7] B recomputes 9 tokens, emits token 6: done.
    r = _run([0.0, 0.0], [4, 4], [6, 6], capacity=capacity)
    assert r.first_token_s.tolist() == [1.0, 1.0]
    assert r.finish_s.tolist() == [6.0, 7.0]
    assert r.num_preemptions.tolist() == [0, 1]
    assert r.step_prefill_tokens.tolist() == [8, 0, 0, 0, 0, 0, 9]
    assert r.step_kv_blocks_used.tolist() == [4, 6, 6, 8, 8, 5, 5]


def test_guaranteed_no_evict_admits_both_when_both_whole_sequences_fit() -> None:
    # 10 blocks: 5 + 5 fit. Both prefill in [0,1] and decode together: tokens 1..6 at 1..6.
    r = _run([0.0, 0.0], [4, 4], [6, 6], capacity="guaranteed_no_evict", blocks=10)
    assert r.first_token_s.tolist() == [1.0, 1.0]
    assert r.finish_s.tolist() == [6.0, 6.0]
    assert r.step_kv_blocks_used.tolist() == [10] * 6


def test_new_token_ratio_admission_counts_the_newcomer_output_in_full() -> None:
    # SGLang, bs = 1, 12 blocks. A and B: P=4, O=4 at 0 (each holds at most 7 tokens).
    # t=0: room 12; A needs extend 4 + max_new 4 + page 1 = 9 < 12: admitted, room 12 - 8 = 4;
    #      B needs 9 >= 4: refused (admission stops).
    # [0,1] A prefill (4 blocks), token 1 at 1.
    # t=1: room = free 8 - 0.7 * (4 - 1) = 5.9 < 9: B waits; A decodes [1,2] (free 7).
    # t=2: room = 7 - 0.699 * 2 = 5.6; t=3: 6 - 0.698 = 5.3: B still waits. A tokens 2..4 at
    #      2, 3, 4: done at 4 (frees 7).
    # t=4: room 12 > 9: [4,5] B prefill, token 1 at 5; tokens 2..4 at 6, 7, 8.
    r = _run(
        [0.0, 0.0],
        [4, 4],
        [4, 4],
        capacity="new_token_ratio",
        policy="prefill_first",
        block_size=1,
        blocks=12,
    )
    assert r.first_token_s.tolist() == [1.0, 5.0]
    assert r.finish_s.tolist() == [4.0, 8.0]
    assert r.num_preemptions.tolist() == [0, 0]
    # Admitting on the blocks of the prompt alone (vLLM) lets B in at once.
    eager = _run(
        [0.0, 0.0],
        [4, 4],
        [4, 4],
        capacity="incremental",
        policy="prefill_first",
        block_size=1,
        blocks=12,
    )
    assert eager.first_token_s.tolist() == [1.0, 1.0]


def test_new_token_ratio_retracts_the_decode_with_the_fewest_outputs_to_the_back() -> None:
    # SGLang, bs = 1, 25 blocks. A: P=2, O=12 at 0; B: P=2, O=12 at 1 (each holds up to 13).
    # t=0: A needs 2 + 12 + 1 = 15 < 25: admitted. [0,1] A prefill (free 23), token 1 at 1.
    # t=1: room = 23 - 0.7 * (12 - 1) = 15.3 > 15: B admitted (over-commits: 13 + 13 > 25).
    # [1,2] B prefill (prefill-only step: A waits; free 21), B token 1 at 2.
    # [2,3] ... [11,12]: ten decode steps of A and B, two blocks each (free 21 -> 1); tokens
    #       2..11 of both at 3..12.
    # t=12: two blocks wanted, one free: retract. Both have 11 outputs and equal prompts, so
    #       the later in the batch, B, goes (frees 12; to the back of the queue with 13 tokens
    #       to recompute); the ratio becomes min(1, (11 + 20) / 12) = 1.
    # [12,13] A token 12: done at 13 (frees 13). t=13: B needs 13 + (12 - 11) + 1 = 15 < 25.
    # [13,14] B recomputes 13 tokens and emits token 12: done at 14.
    r = _run(
        [0.0, 1.0],
        [2, 2],
        [12, 12],
        capacity="new_token_ratio",
        policy="prefill_first",
        block_size=1,
        blocks=25,
    )
    assert r.first_token_s.tolist() == [1.0, 2.0]
    assert r.finish_s.tolist() == [13.0, 14.0]
    assert r.num_preemptions.tolist() == [0, 1]
    assert r.step_prefill_tokens.tolist() == [2, 2] + [0] * 11 + [13]
    assert r.step_kv_blocks_used.tolist() == [2, 4, *range(6, 25, 2), 13, 13]


def test_new_token_ratio_keeps_a_request_waiting_while_its_estimate_exceeds_the_room() -> None:
    # bs = 1, 20 blocks. A: P=2, O=12 at 0; B: P=6, O=8 at 2.
    # t=0: A needs 15 < 20. [0,1] A prefill (free 18), token 1 at 1. [1,2] A decode (free 17),
    #      token 2 at 2.
    # t=2: room = 17 - 0.699 * 10 = 10.0 < B's 6 + 8 + 1 = 15: B waits. A decodes on; the ratio
    #      decays by 0.602 / 600 a step. At t=k, room = (20 - k - 1) - r_k * (12 - k) with
    #      r_k = 0.7 - 0.001003 (k - 1): at t=6 room = 13 - 0.695 * 6 = 8.8; B waits until A
    #      finishes at 12 (tokens 1..12 at 1..12).
    # t=12: room 20: [12,13] B prefill, token 1 at 13; tokens 2..8 at 14..20.
    r = _run(
        [0.0, 2.0],
        [2, 6],
        [12, 8],
        capacity="new_token_ratio",
        policy="prefill_first",
        block_size=1,
        blocks=20,
    )
    assert r.first_token_s.tolist() == [1.0, 13.0]
    assert r.finish_s.tolist() == [12.0, 20.0]
    assert r.num_preemptions.tolist() == [0, 0]


def test_retraction_takes_the_longest_prompt_among_the_fewest_outputs_not_the_newest() -> None:
    # bs = 1, 27 blocks. A: P=4, O=12 at 0 (holds up to 15); B: P=2, O=12 at 1 (up to 13).
    # t=0: A needs 4 + 12 + 1 = 17 < 27. [0,1] A prefill (free 23), token 1 at 1.
    # t=1: room = 23 - 0.7 * 11 = 15.3 > B's 2 + 12 + 1 = 15: admitted. [1,2] B prefill
    #      (free 21), token 1 at 2.
    # [2,3] ... [11,12]: ten decode steps, two blocks each (free 21 -> 1); tokens 2..11 of both.
    # t=12: shortage. Both have 11 outputs; A has the longer prompt, so A is retracted (frees
    #       14; 4 + 11 = 15 tokens to recompute, at the back of the queue). vLLM would preempt
    #       the newest, B.
    # [12,13] B token 12: done at 13. t=13: A needs 15 + 1 + 1 = 17 < 27.
    # [13,14] A recomputes 15 tokens and emits token 12: done at 14.
    def run(capacity: CapacityPolicy) -> SimulationResult:
        return _run(
            [0.0, 1.0],
            [4, 2],
            [12, 12],
            capacity=capacity,
            policy="prefill_first",
            block_size=1,
            blocks=27,
        )

    sglang = run("new_token_ratio")
    assert sglang.first_token_s.tolist() == [1.0, 2.0]
    assert sglang.finish_s.tolist() == [14.0, 13.0]
    assert sglang.num_preemptions.tolist() == [1, 0]
    assert sglang.preemption_s.tolist() == [12.0]
    assert sglang.step_prefill_tokens.tolist() == [4, 2] + [0] * 11 + [15]
    assert sglang.step_kv_blocks_used.tolist() == [4, 6, *range(8, 27, 2), 13, 15]
    vllm = run("incremental")
    assert vllm.finish_s.tolist() == [13.0, 14.0]
    assert vllm.num_preemptions.tolist() == [0, 1]
    # B, the newest, is evicted at 12 too (same shortage).
    assert vllm.preemption_s.tolist() == [12.0]


def test_engine_capacity_policies_and_validation() -> None:
    assert engine_capacity_policy("trtllm") == "guaranteed_no_evict"
    assert engine_capacity_policy("sglang") == "new_token_ratio"
    assert engine_capacity_policy("vllm") == "incremental"
    with pytest.raises(ValueError, match="capacity_policy"):
        SchedulerConfig(
            max_num_batched_tokens=8,
            max_num_seqs=1,
            block_size_tokens=1,
            num_kv_blocks=8,
            capacity_policy="no_evict",  # type: ignore[arg-type]
        )


def test_without_preemption_only_the_prompt_must_fit_one_step() -> None:
    # Budget 6 without chunking, bs = 2, 8 blocks. A: P=4, O=6 (holds up to 9 tokens, 5 blocks).
    # incremental: a preempted request would recompute 4 + 5 = 9 > 6 tokens in one step, so it
    #   is refused on arrival.
    # guaranteed_no_evict: never preempted, only the 4-token prompt is computed at once:
    #   [0,1] prefill, token 1 at 1; tokens 2..6 at 2..6.
    workload = trace_workload(
        arrival_s=np.array([0.0]), prompt_tokens=np.array([4]), output_tokens=np.array([6])
    )
    for capacity, finish in (("incremental", None), ("guaranteed_no_evict", 6.0)):
        config = SchedulerConfig(
            max_num_batched_tokens=6,
            max_num_seqs=4,
            block_size_tokens=2,
            num_kv_blocks=8,
            policy="no_chunking",
            capacity_policy=capacity,  # type: ignore[arg-type]
        )
        r = simulate(workload, config, ConstantStepTime(1.0))
        if finish is None:
            assert r.status.tolist() == [int(RequestStatus.REJECTED)]
        else:
            assert r.finish_s.tolist() == [finish]
    prompt, output = np.array([4]), np.array([6])
    assert whole_prompt_overflow("no_chunking", prompt, output, 6) == 9
    assert whole_prompt_overflow("no_chunking", prompt, output, 6, "guaranteed_no_evict") == 0
