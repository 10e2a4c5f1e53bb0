"""The simulator's seams: the policy registry, the KV block pool and the step-time fast paths."""

from __future__ import annotations

from typing import get_args

import numpy as np
import pytest

from servesize.core.simulation import (
    ConstantStepTime,
    LinearStepTime,
    SchedulerConfig,
    SchedulingPolicy,
)
from servesize.core.simulation.kv_pool import KVBlockPool
from servesize.core.simulation.policies import FORMATIONS, batch_formation
from servesize.core.simulation.policies.prefill_first import PrefillFirst
from servesize.core.simulation.policies.vllm_v1 import VllmV1
from servesize.core.simulation.policies.whole_prompt import WholePrompt
from servesize.core.simulation.steptime import DecodeRunStepTime, SingleStepTime


def _config(policy: SchedulingPolicy) -> SchedulerConfig:
    return SchedulerConfig(
        max_num_batched_tokens=64, max_num_seqs=4, block_size_tokens=4, num_kv_blocks=16,
        policy=policy,
    )  # fmt: skip


def test_every_policy_name_has_one_batch_formation() -> None:
    assert set(FORMATIONS) == set(get_args(SchedulingPolicy))
    for name, formation in FORMATIONS.items():
        assert type(batch_formation(_config(name))) is formation


def test_a_decode_replica_admits_prefill_first_requests_as_vllm_does() -> None:
    config = _config("prefill_first")
    assert isinstance(batch_formation(config), PrefillFirst)
    assert type(batch_formation(config, remote_kv=True)) is VllmV1
    assert type(batch_formation(_config("no_chunking"), remote_kv=True)) is WholePrompt
    assert not WholePrompt.chunks_prompts
    assert VllmV1.chunks_prompts


def test_an_unknown_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown policy"):
        _config("fcfs")  # type: ignore[arg-type]


def _pool(total: int, held: np.ndarray, watermark: int = 0) -> KVBlockPool:
    return KVBlockPool(
        block_size_tokens=4, total_blocks=total, watermark_blocks=watermark, held=held
    )


def test_pool_grows_all_requests_or_none() -> None:
    held = np.array([1, 2, 0], dtype=np.int64)
    pool = _pool(6, held)
    pool.free_blocks = 3
    ids = np.array([0, 1], dtype=np.int64)
    assert pool.grow_to(ids, np.array([9, 8]))  # 3 and 2 blocks: +2, +0
    assert held.tolist() == [3, 2, 0]
    assert pool.free_blocks == 1
    assert not pool.grow_to(ids, np.array([16, 12]))  # +1, +1 > 1 free
    assert held.tolist() == [3, 2, 0]
    assert pool.free_blocks == 1
    pool.release_many(ids)
    assert held.tolist() == [0, 0, 0]
    assert pool.free_blocks == 6


def test_pool_preempts_from_the_tail_until_the_allocation_fits() -> None:
    held = np.array([2, 2, 2], dtype=np.int64)
    computed = np.array([8, 8, 8], dtype=np.int64)
    pool = _pool(6, held)
    pool.free_blocks = 0
    # Request 0 needs 2 more blocks: request 2 (the last admitted) is preempted; 1 needs none.
    assert pool.allocate_or_preempt([0, 1, 2], [8, 0, 1], computed) == (2, [2], False)
    assert held.tolist() == [4, 2, 0]
    assert pool.free_blocks == 0
    held[:] = 2
    # Request 0 needs 2 more blocks (16 tokens): request 2 is preempted; then request 1 needs
    # one (9 tokens) and, last in the running order, preempts itself.
    kept, victims, self_preempted = pool.allocate_or_preempt([0, 1, 2], [8, 1, 1], computed)
    assert (kept, victims, self_preempted) == (1, [2, 1], True)
    assert held.tolist() == [4, 0, 0]
    assert pool.free_blocks == 2
    # A request that cannot fit even alone preempts itself.
    kept, victims, self_preempted = pool.allocate_or_preempt([0], [40], computed)
    assert (kept, victims, self_preempted) == (0, [0], True)
    assert held.tolist() == [0, 0, 0]
    assert pool.free_blocks == 6


def test_pool_admission_keeps_the_watermark_free() -> None:
    pool = _pool(10, np.zeros(1, dtype=np.int64), watermark=2)
    assert pool.admits(8)
    assert not pool.admits(9)
    assert pool.never_fits(np.array([32, 33])).tolist() == [False, True]


def test_fast_paths_are_declared_not_discovered() -> None:
    assert not isinstance(ConstantStepTime(0.1), SingleStepTime)
    assert not isinstance(LinearStepTime(base_s=0.1), DecodeRunStepTime)
