"""Deployments over several nodes: DeepSeek-V3 FP8 as TP8 × PP2 on two 8-GPU H100 nodes,
its weight ledger per GPU worked out by hand from the config, and which groups may span nodes.

DeepSeek-V3 (../shared/reference/model_configs/DeepSeek-V3.json): hidden 7168, 61 layers (the
first 3 dense, intermediate 18432), 256 routed experts of width 2048 + 1 shared, 128 heads,
q_lora_rank 1536, kv_lora_rank 512, qk_rope 64, qk_nope 128, v_head 128, vocab 129280 (not
tied), fp8 weights in 128 × 128 blocks (a 4 B fp32 scale per block).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from servesize.core.architecture import Architecture, parse_architecture
from servesize.core.hardware import Interconnect, InterNodeLink
from servesize.core.memory import (
    DEFAULT_CONSTANTS,
    Deployment,
    InvalidDeploymentError,
    plan_memory,
    resolve_deployment,
    weight_ledger,
)
from servesize.core.memory.sharding import pp_layer_ranges
from tests.core.sizing.fixtures import GPUS

MODELS = Path(__file__).resolve().parents[3] / "servesize" / "data" / "models"
H100 = GPUS["h100-sxm"]
GB200 = GPUS["gb200"]

# One GPU of TP 8 (16 of the 128 heads), per layer:
ATTENTION = 36_647_776  # MLA projections, fp8 blocks (test_mem_weights derives it term by term)
W_UK_UV = 4096 * 512 * 2  # the dequantized kv_b_proj copy, bf16: 4,194,304
NORMS = 2 * 7168 * 2  # input and post-attention RMSNorm, bf16, replicated: 28,672
# dense MLP (layers 0-2), 18432 / 8 = 2304 wide: gate and up 2304 · 7168 + 4·18·56 each,
# down 7168 · 2304 + 4·56·18: 2·16,519,104 + 16,519,104
DENSE = 3 * (2304 * 7168 + 4 * 18 * 56)  # 49,557,312
# one shared expert 2048 / 8 = 256 wide: 3 · (256 · 7168 + 4·2·56)
SHARED = 3 * (256 * 7168 + 4 * 2 * 56)  # 5,506,368
ROUTER = 256 * 7168 * 2 + 256 * 4  # bf16 gate + fp32 score-correction bias: 3,671,040
ROUTED = 256 * 3 * (256 * 7168 + 4 * 2 * 56)  # every expert 1/8 wide: 1,409,630,208
EMBEDDING = 129_280 // 8 * 7168 * 2  # vocab-parallel rows (129280 = 64 · 2020): 231,669,760
ROPE = 163_840 * 64 * 2  # the YaRN cos/sin cache, 40 · 4096 positions · 64 · 2 B, every GPU


def _arch() -> Architecture:
    path = MODELS / "deepseek-ai--DeepSeek-V3.json"
    return parse_architecture(json.loads(path.read_text()), name="DeepSeek-V3")


def test_deepseek_v3_tp8_pp2_weights_per_gpu_by_stage() -> None:
    # 61 layers over 2 stages as vLLM's get_pp_indices splits them: 30 each, the spare layer
    # to the first stage: layers 0-30 and 31-60.
    assert [(r.start, r.stop) for r in pp_layer_ranges(61, 2)] == [(0, 31), (31, 61)]
    # stage 0: the embedding, 31 layers of attention + norms, 3 dense MLPs, 28 MoE layers
    first = (
        EMBEDDING
        + 31 * (ATTENTION + W_UK_UV + NORMS)
        + 3 * DENSE
        + 28 * (SHARED + ROUTER + ROUTED)
        + ROPE
    )
    # stage 1: 30 MoE layers, the final norm and the lm_head (vocab-parallel like the
    # embedding)
    last = EMBEDDING + 30 * (ATTENTION + W_UK_UV + NORMS + SHARED + ROUTER + ROUTED)
    last += 7168 * 2 + ROPE
    assert first == 41_394_919_776
    assert last == 44_043_006_656
    # ~671e9 fp8 parameters / 16 GPUs = 41.9 GB: the stages hold that within 5 %
    assert (first + last) / 2 == pytest.approx(671e9 / 16, rel=0.05)

    plan = plan_memory(
        _arch(),
        H100,
        Deployment(tensor_parallel_size=8, pipeline_parallel_size=2, max_model_len=8192),
    )
    assert plan.fits
    assert [s.weights_bytes_per_gpu for s in plan.stages] == [first, last]
    assert [(s.first_layer, s.num_layers) for s in plan.stages] == [(0, 31), (31, 30)]
    # the last stage (more weights) limits the KV cache and is the one reported
    assert plan.weights_bytes_per_gpu == last

    res = resolve_deployment(
        _arch(), H100, Deployment(tensor_parallel_size=8, pipeline_parallel_size=2)
    )
    ranges = pp_layer_ranges(61, 2)
    ledger = weight_ledger(_arch(), res, DEFAULT_CONSTANTS, ranges[1], first=False, last=True)
    assert ledger.by_component["lm_head"] == EMBEDDING
    assert "embedding" not in ledger.by_component
    assert ledger.by_component["experts_routed"] == 30 * ROUTED


def test_a_node_without_a_link_to_others_refuses_tp_pp_wider_than_it() -> None:
    pcie = replace(
        H100, interconnect=Interconnect(kind="pcie", bandwidth_bytes_per_s=None), inter_node=None
    )
    with pytest.raises(InvalidDeploymentError) as refused:
        resolve_deployment(
            _arch(), pcie, Deployment(tensor_parallel_size=8, pipeline_parallel_size=2)
        )
    fields = {i.field for i in refused.value.issues}
    assert {"/deployment/tensor_parallel_size", "/deployment/pipeline_parallel_size"} <= fields
    assert any("inter_node" in i.problem for i in refused.value.issues)
    # the same nodes joined by 100 GbE are accepted
    joined = replace(
        pcie,
        inter_node=InterNodeLink(
            kind="ethernet", bandwidth_bytes_per_s=12_500_000_000, latency_s=2e-5
        ),
    )
    res = resolve_deployment(
        _arch(), joined, Deployment(tensor_parallel_size=8, pipeline_parallel_size=2)
    )
    assert res.tensor_parallel_size * res.pipeline_parallel_size == 16


def test_nvl72_groups_may_span_trays_but_not_the_domain() -> None:
    arch = _arch()
    # 16 GPUs over four 4-GPU trays of one NVL72 domain
    res = resolve_deployment(
        arch, GB200, Deployment(tensor_parallel_size=8, pipeline_parallel_size=2)
    )
    assert res.pipeline_parallel_size == 2
    # TP16 x PP8 = 128 GPUs: more than the 72 of the domain
    with pytest.raises(InvalidDeploymentError) as refused:
        resolve_deployment(
            arch, GB200, Deployment(tensor_parallel_size=16, pipeline_parallel_size=8)
        )
    assert any("72-GPU NVLink domain" in i.problem for i in refused.value.issues)


def test_tp16_and_64_gpu_plans_are_accepted_on_h100_nodes() -> None:
    arch = _arch()
    for tp, pp in ((16, 1), (8, 4), (16, 4)):
        res = resolve_deployment(
            arch, H100, Deployment(tensor_parallel_size=tp, pipeline_parallel_size=pp)
        )
        assert res.tensor_parallel_size * res.pipeline_parallel_size == tp * pp
    # wide EP: DP16 attention + EP16 experts, 2 nodes
    res = resolve_deployment(
        arch, H100, Deployment(data_parallel_size=16, enable_expert_parallel=True)
    )
    assert res.data_parallel_size == 16
