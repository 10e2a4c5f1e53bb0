"""Impossible deployments raise InvalidDeploymentError with JSON pointers to the culprits."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from servesize.core.architecture import Architecture, parse_architecture
from servesize.core.hardware import HardwareSpec, Interconnect
from servesize.core.memory import GIB, Deployment, InvalidDeploymentError, plan_memory

MODELS = Path(__file__).resolve().parents[3] / "servesize" / "data" / "models"
H100 = HardwareSpec(
    id="h100-sxm",
    vendor="NVIDIA",
    name="H100 SXM",
    memory_bytes=80 * GIB,
    memory_bandwidth_bytes_per_s=3_350_000_000_000,
    interconnect=Interconnect(kind="nvlink", bandwidth_bytes_per_s=450_000_000_000),
)


def _arch(filename: str, **extra: Any) -> Architecture:
    config: dict[str, Any] = json.loads((MODELS / filename).read_text())
    return parse_architecture({**config, **extra}, name=filename)


def _pointers(arch: Architecture, hardware: HardwareSpec, **fields: Any) -> set[str]:
    with pytest.raises(InvalidDeploymentError) as caught:
        plan_memory(arch, hardware, Deployment(**fields))
    assert isinstance(caught.value, ValueError)
    return {issue.field for issue in caught.value.issues}


def test_tp_not_dividing_heads() -> None:
    # Llama-3.1-8B has 32 heads and 8 KV heads: TP 3 divides neither
    pointers = _pointers(_arch("meta-llama--Llama-3.1-8B.json"), H100, tensor_parallel_size=3)
    assert pointers == {"/deployment/tensor_parallel_size"}


def test_tp_beyond_gpus_per_node_without_a_link_between_nodes() -> None:
    # TP 8 · PP 2 = 16 GPUs > 8 per node, and PCIe nodes have no default inter-node link
    pcie = replace(H100, interconnect=Interconnect(kind="pcie", bandwidth_bytes_per_s=None))
    pointers = _pointers(
        _arch("meta-llama--Llama-3.1-70B.json"),
        pcie,
        tensor_parallel_size=8,
        pipeline_parallel_size=2,
    )
    assert pointers == {"/deployment/tensor_parallel_size", "/deployment/pipeline_parallel_size"}


def test_expert_parallel_without_moe_and_too_many_stages() -> None:
    pointers = _pointers(
        _arch("meta-llama--Llama-3.2-1B-Instruct.json"),
        H100,
        enable_expert_parallel=True,
        pipeline_parallel_size=17,
        tensor_parallel_size=1,
    )
    # 16 layers < 17 stages (and 17 GPUs > 8 per node)
    assert {"/deployment/enable_expert_parallel", "/deployment/pipeline_parallel_size"} <= pointers


def test_max_model_len_beyond_model_limit() -> None:
    # Llama-3.1-8B: max_position_embeddings 131072
    pointers = _pointers(_arch("meta-llama--Llama-3.1-8B.json"), H100, max_model_len=200_000)
    assert pointers == {"/deployment/max_model_len"}


def test_zero_memory_and_bad_fractions() -> None:
    broken = HardwareSpec(
        id="none", vendor="x", name="none", memory_bytes=0, memory_bandwidth_bytes_per_s=1
    )
    pointers = _pointers(
        _arch("meta-llama--Llama-3.1-8B.json"),
        broken,
        gpu_memory_utilization=1.5,
        block_size=0,
        max_num_seqs=-1,
    )
    assert pointers == {
        "/hardware/memory_bytes",
        "/deployment/gpu_memory_utilization",
        "/deployment/block_size",
        "/deployment/max_num_seqs",
    }


def test_unknown_engine_dtype_and_kv_dtype() -> None:
    pointers = _pointers(
        _arch("meta-llama--Llama-3.1-8B.json"),
        H100,
        engine="tgi",
        dtype="int3",
        kv_cache_dtype="fp2",
        engine_version="latest",
    )
    assert pointers == {
        "/deployment/engine",
        "/deployment/dtype",
        "/deployment/kv_cache_dtype",
        "/deployment/engine_version",
    }


def test_quantization_mismatch() -> None:
    # an AWQ request on a bf16 checkpoint; fp8_ds_mla on a non-MLA model
    pointers = _pointers(
        _arch("meta-llama--Llama-3.1-8B.json"),
        H100,
        quantization="awq",
        kv_cache_dtype="fp8_ds_mla",
    )
    assert pointers == {"/deployment/quantization", "/deployment/kv_cache_dtype"}
    # gptq_marlin is a kernel for GPTQ checkpoints, not a different format
    gptq = {"quant_method": "gptq", "bits": 4, "group_size": 128}
    arch = _arch("meta-llama--Llama-3.1-8B.json", quantization_config=gptq)
    plan = plan_memory(arch, H100, Deployment(quantization="gptq_marlin", max_model_len=4096))
    assert plan.deployment.weights.method == "gptq"


def test_expert_width_not_divisible_without_ep() -> None:
    # gpt-oss-20b experts are 2880 wide; at TP 1 · DP 7 the MoE layers would be split 7 ways
    # and 2880 % 7 = 3, while attention (TP 1) is fine
    pointers = _pointers(_arch("openai--gpt-oss-20b.json"), H100, data_parallel_size=7)
    assert pointers == {"/deployment/tensor_parallel_size"}
    # with expert parallelism the experts stay whole: accepted
    plan = plan_memory(
        _arch("openai--gpt-oss-20b.json"),
        H100,
        Deployment(data_parallel_size=7, enable_expert_parallel=True, max_model_len=4096),
    )
    assert plan.deployment.expert_parallel_size == 7


def test_errors_list_every_problem_at_once() -> None:
    with pytest.raises(InvalidDeploymentError) as caught:
        plan_memory(
            _arch("meta-llama--Llama-3.1-8B.json"),
            H100,
            Deployment(tensor_parallel_size=3, max_model_len=10**6),
        )
    message = str(caught.value)
    assert "/deployment/tensor_parallel_size" in message
    assert "/deployment/max_model_len" in message


def test_unknown_checkpoint_quantization_points_at_the_model() -> None:
    arch = _arch("meta-llama--Llama-3.1-8B.json", quantization_config={"quant_method": "hqq"})
    assert _pointers(arch, H100, max_model_len=4096) == {"/model/quantization_config"}


def test_vllm_token_budget_below_the_running_batch() -> None:
    # vLLM's SchedulerConfig refuses max_num_batched_tokens < max_num_seqs at start-up.
    arch = _arch("meta-llama--Llama-3.1-8B.json")
    pointers = _pointers(arch, H100, max_num_seqs=256, max_num_batched_tokens=64)
    assert pointers == {"/deployment/max_num_batched_tokens"}
    plan_memory(arch, H100, Deployment(max_num_seqs=64, max_num_batched_tokens=64))
