"""compile_replica's policies, each against a value worked by hand."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from servesize.catalog import ModelCatalog
from servesize.core.errors import InsufficientMemoryError
from servesize.core.hardware import Interconnect
from servesize.core.memory import Deployment, plan_memory
from servesize.core.replica import (
    KVLink,
    MissingInterconnectBandwidthError,
    StepModelCache,
    compile_replica,
    replica_from_plan,
)
from servesize.core.steptime import StepWork, build_step_model, engine_profile, simulator_constants
from servesize.settings import get_settings
from tests.core.sizing.fixtures import GPUS, H100, LLAMA_8B, LLAMA_70B

# Llama-3.1-8B: 2 (K and V) · 32 layers · 8 KV heads · 128 · 2 B = 131,072 B per token.
KV_BYTES_PER_TOKEN = 2 * 32 * 8 * 128 * 2


def test_the_scheduler_pools_the_data_parallel_group() -> None:
    # Two DP ranks of 2048 tokens and 64 sequences each: one simulated engine of 4096 tokens,
    # 128 sequences and both ranks' blocks.
    deployment = Deployment(data_parallel_size=2, max_num_batched_tokens=2048, max_num_seqs=64)
    replica = compile_replica(LLAMA_8B, H100, deployment)
    scheduler = replica.scheduler
    assert scheduler.max_num_batched_tokens == 4096
    assert scheduler.max_num_seqs == 128
    assert scheduler.num_kv_blocks == 2 * replica.memory.kv_blocks
    assert scheduler.block_size_tokens == replica.memory.kv_block_size == 16
    assert scheduler.policy == "vllm_v1"
    assert replica.policy_source == "engine"
    assert replica.rank_budget_tokens == 2048
    assert replica.scheduler_warnings == ()


def test_an_engine_that_sizes_its_batch_from_the_pool_is_bounded_by_blocks() -> None:
    replica = compile_replica(LLAMA_8B, H100, Deployment(engine="sglang"))
    assert replica.deployment.max_num_seqs is None
    assert replica.scheduler.max_num_seqs == replica.memory.kv_blocks
    assert replica.step_model.engine.max_num_seqs == replica.memory.kv_blocks
    assert replica.scheduler.policy == "prefill_first"
    assert "KV blocks only" in replica.scheduler_warnings[0]


def test_the_step_model_carries_the_deployments_scheduler_limits() -> None:
    # The stock vLLM profile says 8192 tokens and 1024 sequences (H100 defaults); the step model
    # of a deployment asking for 2048 and 64 must chunk and cap as that deployment does.
    deployment = Deployment(max_num_batched_tokens=2048, max_num_seqs=64)
    model = compile_replica(LLAMA_8B, H100, deployment).step_model
    assert (model.engine.max_num_batched_tokens, model.engine.max_num_seqs) == (2048, 64)
    # On an A100, vLLM's own defaults are 2048 tokens and 256 sequences (EngineArgs batch
    # defaults below 70 GiB or on A100), not the profile's H100 figures.
    a100 = compile_replica(LLAMA_8B, GPUS["a100-sxm-80gb"], Deployment()).step_model
    assert (a100.engine.max_num_batched_tokens, a100.engine.max_num_seqs) == (2048, 256)


def test_online_fp8_halves_the_weight_bytes() -> None:
    """Regression: sizing built step models in the checkpoint's bf16 for ``--quantization
    fp8``. Every linear layer of the decoder holds 1-byte weights; the output head keeps 2."""
    bf16 = compile_replica(LLAMA_8B, H100, Deployment()).step_model
    fp8 = compile_replica(LLAMA_8B, H100, Deployment(quantization="fp8")).step_model
    assert {g.weight_bytes_per_element for g in bf16.inventory.gemms} == {2.0}
    by_name = {g.name: g.weight_bytes_per_element for g in fp8.inventory.gemms}
    assert by_name.pop("lm_head") == 2.0
    assert set(by_name.values()) == {1.0}
    work = StepWork.decode(np.array([1.0]), np.array([128.0]))
    assert fp8.step_time(work).total_s[0] < bf16.step_time(work).total_s[0]


def test_every_parallel_degree_reaches_the_step_model() -> None:
    """Regression: the CLI built step models without DP and EP."""
    mixtral = ModelCatalog(get_settings().models_dir).architecture("mistralai/Mixtral-8x7B-v0.1")
    deployment = Deployment(
        tensor_parallel_size=2, data_parallel_size=2, enable_expert_parallel=True
    )
    inventory = compile_replica(mixtral, H100, deployment).step_model.inventory
    assert (inventory.tensor_parallel_size, inventory.data_parallel_size) == (2, 2)
    assert inventory.expert_parallel_size == 4  # TP · DP with expert parallelism on


def test_uncalibrated_means_the_neutral_engine_constants() -> None:
    model = compile_replica(LLAMA_8B, H100, Deployment(), calibrated=False).step_model
    assert model.engine.step_overhead_s == 0.0
    assert model.engine.request_overhead_s == 0.0
    given = engine_profile("vllm", calibrated=False)
    assert compile_replica(LLAMA_8B, H100, Deployment(), engine=given).step_model.engine == (
        model.engine
    )


def test_a_plan_that_does_not_fit_is_refused_with_its_reasons() -> None:
    with pytest.raises(InsufficientMemoryError, match="weights"):
        compile_replica(LLAMA_70B, GPUS["l4"], Deployment())


def test_kv_transfer_is_latency_plus_bytes_over_the_interconnect() -> None:
    replica = compile_replica(LLAMA_8B, H100, Deployment(), kv_link=KVLink(latency_s=0.001))
    transfer = replica.kv_transfer
    assert transfer is not None
    assert replica.kv_bandwidth_from_hardware
    # NVLink 4: 900 GB/s bidirectional, 450 GB/s each way; 1000 tokens of 131,072 B.
    assert transfer.bandwidth_bytes_per_s == 450e9
    assert transfer.kv_bytes_per_token == KV_BYTES_PER_TOKEN
    expected = 0.001 + 1000 * KV_BYTES_PER_TOKEN / 450e9
    assert transfer.transfer_time_s(np.array([1000]))[0] == pytest.approx(expected, rel=1e-12)
    given = replica.configured(kv_link=KVLink(latency_s=0.0, bandwidth_bytes_per_s=1e9))
    assert given.kv_transfer is not None
    assert not given.kv_bandwidth_from_hardware
    assert given.kv_transfer.transfer_time_s(np.array([1000]))[0] == pytest.approx(0.131072)


@pytest.mark.parametrize("link", [None, Interconnect(kind="pcie", bandwidth_bytes_per_s=None)])
def test_a_kv_link_of_unknown_bandwidth_is_a_core_error(link: Interconnect | None) -> None:
    """Regression: sizing fell back to 25 GB/s in silence where the API refused; now both get
    one core error, and a caller that means PCIe passes the bandwidth."""
    gpu = replace(H100, id="h100-custom", interconnect=link)
    with pytest.raises(MissingInterconnectBandwidthError) as caught:
        compile_replica(LLAMA_8B, gpu, Deployment(), kv_link=KVLink(latency_s=0.0))
    assert caught.value.field == "/disaggregation/kv_transfer/bandwidth_bytes_per_s"
    assert "h100-custom" in str(caught.value)
    pcie = KVLink(latency_s=0.0, bandwidth_bytes_per_s=25e9)
    assert compile_replica(LLAMA_8B, gpu, Deployment(), kv_link=pcie).kv_transfer is not None
    assert compile_replica(LLAMA_8B, gpu, Deployment()).kv_transfer is None  # no link asked


def test_policy_comes_from_the_caller_the_engine_or_chunked_prefill() -> None:
    trtllm = compile_replica(LLAMA_8B, H100, Deployment(engine="trtllm"))
    assert (trtllm.scheduler.policy, trtllm.policy_source) == ("no_chunking", "engine")
    chunked = trtllm.configured(chunked_prefill=True)
    assert (chunked.scheduler.policy, chunked.policy_source) == ("vllm_v1", "chunked_prefill")
    assert chunked.step_model is trtllm.step_model
    asked = trtllm.configured(policy="sarathi")
    assert (asked.scheduler.policy, asked.policy_source) == ("sarathi", "request")
    # Chunked prefill leaves a chunking scheduler as it is.
    sglang = compile_replica(LLAMA_8B, H100, Deployment(engine="sglang"), chunked_prefill=True)
    assert (sglang.scheduler.policy, sglang.policy_source) == ("prefill_first", "engine")
    with pytest.raises(ValueError, match="contradicts"):
        trtllm.configured(policy="no_chunking", chunked_prefill=True)


def test_the_cache_shares_one_compiled_model_between_scheduler_knobs() -> None:
    cache = StepModelCache()
    small = compile_replica(LLAMA_8B, H100, Deployment(max_num_seqs=32), step_models=cache)
    large = compile_replica(LLAMA_8B, H100, Deployment(max_num_seqs=512), step_models=cache)
    assert len(cache) == 1
    assert small.step_model.gemm_curves is large.step_model.gemm_curves
    assert (small.step_model.engine.max_num_seqs, large.step_model.engine.max_num_seqs) == (32, 512)
    compile_replica(LLAMA_8B, H100, Deployment(kv_cache_dtype="fp8"), step_models=cache)
    assert len(cache) == 2
    # A cached compile gives the same step times as an uncached one.
    work = StepWork.decode(np.array([1.0, 64.0]), np.array([512.0, 4096.0]))
    fresh = compile_replica(LLAMA_8B, H100, Deployment(max_num_seqs=512)).step_model
    np.testing.assert_array_equal(
        large.step_model.step_time(work).total_s, fresh.step_time(work).total_s
    )


def test_the_step_model_is_build_step_model_of_the_resolved_deployment() -> None:
    deployment = Deployment(tensor_parallel_size=2, kv_cache_dtype="fp8", enforce_eager=True)
    plan = plan_memory(LLAMA_8B, H100, deployment)
    replica = replica_from_plan(LLAMA_8B, H100, plan)
    direct = build_step_model(
        LLAMA_8B,
        H100,
        engine="vllm",
        tensor_parallel_size=2,
        kv_dtype="fp8",
        cuda_graphs=False,
    )
    # Both tiers step under the simulator's fitted constants (docs/modeling.md §0).
    direct = direct.with_engine(simulator_constants(direct.engine))
    work = StepWork.decode(np.array([1.0, 32.0]), np.array([256.0, 2048.0]))
    np.testing.assert_array_equal(
        replica.step_model.step_time(work).total_s, direct.step_time(work).total_s
    )
    assert replica.memory is plan
