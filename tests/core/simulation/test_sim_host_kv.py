"""The host KV tier (CPU offload) in the simulator, against hand traces.

Block size 4; a GPU pool of 5 blocks; ``LinearStepTime(base 0.1 s, 0.1 s per token)``, so a
step prefilling ``T`` tokens lasts ``0.1 + 0.1·T`` s. Loading one block from the host takes
0.25 s. Trace: A (prefix 0: 8 tokens = 2 blocks, prompt 9) at 0 s, C (prefix 1: 16 tokens,
prompt 17) at 2 s, E (prefix 0 again, prompt 9) at 4 s; one output token each.

* A: 0.1 + 0.9 = 1.0 s. It leaves 2 cached prefix blocks and 1 private block in the GPU pool
  and stores prefix 0's 2 blocks to the host.
* C needs ``ceil(17/4) = 5`` blocks, the whole pool: prefix 0 is evicted from the GPU
  (0.1 + 1.7 = 1.8 s, until 3.8 s). The host now holds prefix 0 (2) and prefix 1 (4).
* E finds nothing on the GPU. Without a host tier it prefills 9 tokens: TTFT 1.0 s. With one it
  loads ``⌊min(8, 9 − 1)/4⌋ = 2`` blocks (0.5 s) and prefills 1 token (0.2 s): TTFT
  0.2 + 0.5 = 0.7 s when the step waits for the load (vLLM), max(0.2, 0.5) = 0.5 s when the
  load runs under the forward pass (SGLang).
* A host tier of 5 blocks cannot keep both prefixes: storing C's 4 blocks evicts the least
  recent run (prefix 0) from its high end, leaving 1 block. E loads 1 block (0.25 s) and
  prefills 5 tokens (0.6 s): TTFT 0.85 s.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from servesize.core.simulation import (
    HostKVConfig,
    LinearStepTime,
    SchedulerConfig,
    SimulationResult,
    simulate,
)
from servesize.core.traffic import PrefixAssignment, trace_workload

_STEP = LinearStepTime(base_s=0.1, per_token_s=0.1)


def _run(host: HostKVConfig | None, *, caching: str = "free_queue_lru") -> SimulationResult:
    base = trace_workload(
        arrival_s=np.array([0.0, 2.0, 4.0]),
        prompt_tokens=np.array([9, 17, 9]),
        output_tokens=np.array([1, 1, 1]),
        timeout_s=math.inf,
    )
    workload = replace(
        base,
        prefix=PrefixAssignment(
            group=np.array([0, 1, 0], dtype=np.int64),
            shared_tokens=np.array([8, 16, 8], dtype=np.int64),
        ),
    )
    config = SchedulerConfig(
        max_num_batched_tokens=4096,
        max_num_seqs=16,
        block_size_tokens=4,
        num_kv_blocks=5,
        prefix_caching=caching,  # type: ignore[arg-type]
        host_kv=host,
    )
    return simulate(workload, config, _STEP)


def _ttft(result: SimulationResult) -> np.ndarray:
    return np.asarray(result.first_token_s - result.arrival_s)


@pytest.mark.parametrize("caching", ["free_queue_lru", "radix_lru"])
def test_prefix_evicted_from_the_gpu_hits_in_the_host_tier(caching: str) -> None:
    without = _run(None, caching=caching)
    assert _ttft(without) == pytest.approx([1.0, 1.8, 1.0])
    waits = _run(HostKVConfig(blocks=64, block_load_s=0.25), caching=caching)
    assert _ttft(waits) == pytest.approx([1.0, 1.8, 0.7])
    assert waits.host_kv_hit_tokens is not None
    assert waits.host_kv_hit_tokens.tolist() == [0, 0, 8]
    assert waits.host_kv_load_s == pytest.approx(0.5)
    overlapped = _run(HostKVConfig(blocks=64, block_load_s=0.25, overlap=True), caching=caching)
    assert _ttft(overlapped) == pytest.approx([1.0, 1.8, 0.5])


def test_a_small_host_tier_evicts_the_least_recent_run_from_its_end() -> None:
    result = _run(HostKVConfig(blocks=5, block_load_s=0.25))
    assert _ttft(result) == pytest.approx([1.0, 1.8, 0.85])
    assert result.host_kv_hit_tokens is not None
    assert result.host_kv_hit_tokens.tolist() == [0, 0, 4]


def test_host_tier_without_gpu_prefix_caching_still_serves_the_prefix() -> None:
    """vLLM's OffloadingConnector works with GPU prefix caching off (the vLLM blog measured
    it that way): E loads both blocks of prefix 0 from the host."""
    result = _run(HostKVConfig(blocks=64, block_load_s=0.25), caching="off")
    assert _ttft(result) == pytest.approx([1.0, 1.8, 0.7])


def test_no_host_tier_is_bit_for_bit_the_old_path() -> None:
    a = _run(None)
    b = _run(None)
    assert np.array_equal(a.first_token_s, b.first_token_s)
    assert a.host_kv_hit_tokens is None
    assert a.host_kv_load_s == 0.0


def _preempting(host: HostKVConfig | None) -> SimulationResult:
    workload = trace_workload(
        arrival_s=np.array([0.0, 0.0]),
        prompt_tokens=np.array([8, 4]),
        output_tokens=np.array([8, 8]),
        timeout_s=math.inf,
    )
    config = SchedulerConfig(
        max_num_batched_tokens=4096,
        max_num_seqs=16,
        block_size_tokens=4,
        num_kv_blocks=4,
        host_kv=host,
    )
    return simulate(workload, config, _STEP, skip_decode_runs=False)


def test_a_preempted_request_loads_its_blocks_back_instead_of_recomputing() -> None:
    """Pool of 4 blocks of 4. A (prompt 8) and B (prompt 4) prefill together (12 tokens,
    1.3 s), holding 2 + 1 blocks. Both then need a new block and one is free: B, the newest, is
    preempted (vLLM recompute) with 4 tokens in KV and 1 generated; A decodes alone, 7 steps of
    0.2 s, and leaves at 2.7 s. B then recomputes its 5 tokens (0.6 s) and decodes 6 more:
    3.3 + 1.2 = 4.5 s. With a host tier (vLLM 0.14+) its one full block (4 tokens) comes back in
    0.25 s and it prefills 1 token (0.2 s): 2.7 + 0.45 + 1.2 = 4.35 s. A host tier that does
    not reload preempted requests (SGLang) leaves it at 4.5 s."""
    for host in (None, HostKVConfig(blocks=64, block_load_s=0.25, reload_preempted=False)):
        plain = _preempting(host)
        assert plain.num_preemptions.tolist() == [0, 1]
        assert plain.finish_s.tolist() == pytest.approx([2.7, 4.5])
    reloaded = _preempting(HostKVConfig(blocks=64, block_load_s=0.25))
    assert reloaded.num_preemptions.tolist() == [0, 1]
    assert reloaded.finish_s.tolist() == pytest.approx([2.7, 4.35])
    assert reloaded.host_kv_hit_tokens is not None
    assert reloaded.host_kv_hit_tokens.tolist() == [0, 4]
