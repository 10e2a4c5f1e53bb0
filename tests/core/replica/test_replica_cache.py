"""ReplicaCache: a deployment compiled once per distinct inputs, a changed input compiled anew.

The reference is ``compile_replica`` of the same inputs: a kept replica must equal it (its memory
plan and scheduler; the step-time model by its step times).
"""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np
import pytest

from servesize.core.errors import InsufficientMemoryError
from servesize.core.memory import Deployment
from servesize.core.replica import ReplicaCache, compile_replica
from servesize.core.steptime import StepWork
from tests.core.sizing.fixtures import H100, LLAMA_8B, LLAMA_70B


def test_the_same_inputs_give_the_replica_compiled_first() -> None:
    cache = ReplicaCache()
    first = cache.compile(LLAMA_8B, H100, Deployment())
    again = cache.compile(LLAMA_8B, H100, Deployment())
    assert again is first
    assert (cache.hits, cache.misses, len(cache)) == (1, 1, 1)
    reference = compile_replica(LLAMA_8B, H100, Deployment())
    assert first.memory == reference.memory
    assert first.scheduler == reference.scheduler
    work = StepWork.decode([1.0, 32.0], [1088.0, 1088.0])
    np.testing.assert_array_equal(
        first.step_model.step_time(work).total_s, reference.step_model.step_time(work).total_s
    )


def test_a_changed_input_compiles_anew() -> None:
    cache = ReplicaCache()
    base = cache.compile(LLAMA_8B, H100, Deployment())
    # Another deployment, another policy, and a reloaded (equal but new) hardware spec.
    other = cache.compile(LLAMA_8B, H100, Deployment(max_num_seqs=64))
    sarathi = cache.compile(LLAMA_8B, H100, Deployment(), policy="sarathi")
    reloaded = cache.compile(LLAMA_8B, copy.deepcopy(H100), Deployment())
    faster = replace(H100, memory_bandwidth_bytes_per_s=2 * H100.memory_bandwidth_bytes_per_s)
    doubled = cache.compile(LLAMA_8B, faster, Deployment())
    assert cache.misses == 5
    assert cache.hits == 0
    assert other.scheduler.max_num_seqs == 64 != base.scheduler.max_num_seqs
    assert sarathi.scheduler.policy == "sarathi"
    assert reloaded is not base
    one = StepWork.decode([1.0], [1088.0])
    # Twice the bandwidth: a memory-bound decode step is faster.
    assert doubled.step_model.step_time(one).total_s[0] < base.step_model.step_time(one).total_s[0]


def test_the_oldest_entry_goes_first_and_a_failure_is_not_kept() -> None:
    cache = ReplicaCache(size=2)
    for seqs in (16, 32, 64):
        cache.compile(LLAMA_8B, H100, Deployment(max_num_seqs=seqs))
    assert len(cache) == 2
    cache.compile(LLAMA_8B, H100, Deployment(max_num_seqs=64))
    assert cache.hits == 1
    cache.compile(LLAMA_8B, H100, Deployment(max_num_seqs=16))
    assert cache.misses == 4
    with pytest.raises(InsufficientMemoryError):
        cache.compile(LLAMA_70B, H100, Deployment())
    with pytest.raises(InsufficientMemoryError):
        cache.compile(LLAMA_70B, H100, Deployment())
    assert cache.misses == 6
    with pytest.raises(ValueError, match="size"):
        ReplicaCache(size=0)
