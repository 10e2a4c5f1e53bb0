"""All-reduce algorithms, each engine's choice and the step model's use of them, by hand.

Each expected number is worked out here from the formulas of
``servesize/core/steptime/communication.py``'s docstring, the engines' thresholds read from their
sources (TensorRT-LLM 1.x ``AllReduceBestStrategyTableSM90``, vLLM ``should_custom_ar`` and
``custom_all_reduce.cuh``) and, where stated, the measured ``collectives.csv``.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from servesize.core.architecture import Architecture, parse_architecture
from servesize.core.hardware import datasheet_spec
from servesize.core.steptime import StepWork, build_step_model
from servesize.core.steptime.communication import (
    CollectiveConstants,
    LinkTopology,
    all_reduce_algorithm,
    all_reduce_time_s,
    nccl_all_reduce_time_s,
    one_shot_all_reduce_time_s,
    ring_all_reduce_time_s,
    two_shot_all_reduce_time_s,
)

ROOT = Path(__file__).resolve().parents[3]
MIB = 2**20
KIB = 2**10
H100 = datasheet_spec(
    {
        "name": "H100 SXM",
        "vendor": "NVIDIA",
        "memory_gb": 80,
        "memory_bandwidth_tb_s": 3.35,
        "dense_tflops": {"bf16": 989, "fp16": 989, "fp8": 1979},
        "interconnect": {"nvlink_gb_s_bidirectional": 900, "nvlink_gen": 4},
    }
)
NODE = LinkTopology(link_bandwidth_bytes_per_s=450e9, multicast=True, gpus_per_node=8)
ZERO = CollectiveConstants(
    one_shot_latency_s=0.0,
    custom_link_efficiency=1.0,
    nccl_latency_s=0.0,
    nccl_simple_latency_s=0.0,
    nccl_hop_latency_s=0.0,
    nccl_link_efficiency=1.0,
    nvls_latency_s=0.0,
    nvls_link_efficiency=1.0,
    network_hop_latency_s=0.0,
)


def test_one_shot_reads_every_peer_buffer() -> None:
    c = replace(ZERO, one_shot_latency_s=1e-6, custom_link_efficiency=0.5)
    t = one_shot_all_reduce_time_s([1e6], num_gpus=8, link_bandwidth_bytes_per_s=1e9, constants=c)
    assert t[0] == pytest.approx(1e-6 + 7 * 1e6 / 0.5e9)  # 14.001 ms


def test_two_shot_moves_two_n_minus_one_over_n_with_two_barriers() -> None:
    c = replace(ZERO, one_shot_latency_s=1e-6)
    t = two_shot_all_reduce_time_s([4e6], num_gpus=4, link_bandwidth_bytes_per_s=1e9, constants=c)
    assert t[0] == pytest.approx(2e-6 + 1.5 * 4e6 / 1e9)  # 6.002 ms


def test_ring_takes_the_faster_protocol() -> None:
    c = replace(ZERO, nccl_latency_s=1e-6, nccl_simple_latency_s=10e-6, nccl_hop_latency_s=0.5e-6)
    t = ring_all_reduce_time_s([1e3, 1e6], num_gpus=4, link_bandwidth_bytes_per_s=1e9, constants=c)
    # 6 steps of 0.5 us; LL at half bandwidth: 1 + 3 + 1.5e3/0.5e9 -> 7 us beats Simple's 14.5 us;
    # 1 MB: Simple 10 + 3 + 1.5 ms beats LL 1 + 3 + 3 ms.
    assert t[0] == pytest.approx(7e-6)
    assert t[1] == pytest.approx(13e-6 + 1.5e-3)


def test_nvls_sends_the_message_once_where_the_switch_multicasts() -> None:
    c = replace(ZERO, nccl_link_efficiency=0.5, nvls_link_efficiency=0.5)
    plain = LinkTopology(link_bandwidth_bytes_per_s=1e9)
    switch = LinkTopology(link_bandwidth_bytes_per_s=1e9, multicast=True)
    ring = nccl_all_reduce_time_s([1e9], num_gpus=8, topology=plain, constants=c)
    nvls = nccl_all_reduce_time_s([1e9], num_gpus=8, topology=switch, constants=c)
    assert ring[0] == pytest.approx(1.75 * 1e9 / 0.5e9)  # 3.5 s
    assert nvls[0] == pytest.approx(1e9 / 0.5e9)  # 2.0 s


def test_across_nodes_the_ring_runs_at_the_network_bandwidth() -> None:
    c = replace(ZERO, network_hop_latency_s=1e-6)
    topo = LinkTopology(
        link_bandwidth_bytes_per_s=450e9,
        multicast=True,
        gpus_per_node=8,
        network_bandwidth_bytes_per_s=50e9,
    )
    t = nccl_all_reduce_time_s([1.6e9], num_gpus=16, topology=topo, constants=c)
    assert t[0] == pytest.approx(30 * 1e-6 + 2 * 15 / 16 * 1.6e9 / 50e9)  # 60.03 ms
    assert all_reduce_algorithm("vllm", [1e3], num_gpus=16, topology=topo).tolist() == ["nccl"]


@pytest.mark.parametrize(
    ("gpus", "sizes", "expected"),
    [
        (2, [15 * MIB, 16 * MIB], ["one_shot", "nccl"]),
        (
            4,
            [4 * MIB - 1, 4 * MIB, 8 * MIB - 1, 8 * MIB],
            ["one_shot", "two_shot", "two_shot", "nccl"],
        ),
        (8, [MIB - 1, MIB, 64 * MIB], ["one_shot", "nccl", "nccl"]),
        (6, [1 * KIB], ["nccl"]),
    ],
)
def test_tensorrt_llm_auto_follows_its_sm90_fused_table(
    gpus: int, sizes: list[int], expected: list[str]
) -> None:
    # TP8, hidden 8192: one-shot for tokens < 64 (64·8192·2 = 1 MiB), NCCL from there.
    got = all_reduce_algorithm("trtllm", sizes, num_gpus=gpus, topology=NODE)
    assert got.tolist() == expected


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
@pytest.mark.parametrize(
    ("gpus", "sizes", "expected"),
    [
        (2, [8 * MIB - 16, 8 * MIB], ["one_shot", "nccl"]),
        (4, [512 * KIB - 16, 512 * KIB, 8 * MIB], ["one_shot", "two_shot", "nccl"]),
        (
            8,
            [256 * KIB - 16, 256 * KIB, 8 * MIB - 16, 8 * MIB],
            ["one_shot", "two_shot", "two_shot", "nccl"],
        ),
    ],
)
def test_vllm_and_sglang_custom_all_reduce_below_8_mib(
    engine: str, gpus: int, sizes: list[int], expected: list[str]
) -> None:
    got = all_reduce_algorithm(engine, sizes, num_gpus=gpus, topology=NODE)
    assert got.tolist() == expected


def test_without_nvlink_only_two_gpus_use_the_custom_kernel() -> None:
    pcie = LinkTopology(link_bandwidth_bytes_per_s=25e9, fully_connected=False)
    assert all_reduce_algorithm("vllm", [1e5], num_gpus=2, topology=pcie).tolist() == ["one_shot"]
    assert all_reduce_algorithm("vllm", [1e5], num_gpus=4, topology=pcie).tolist() == ["nccl"]
    assert all_reduce_algorithm("trtllm", [1e5], num_gpus=2, topology=pcie).tolist() == ["nccl"]
    assert all_reduce_algorithm(None, [1e5], num_gpus=2, topology=NODE).tolist() == ["nccl"]


def test_engine_time_is_the_chosen_algorithm() -> None:
    # Default constants: vLLM TP8 at 2 MiB runs two-shot: 6 us + 1.75·2 MiB / (450e9·0.6).
    t = all_reduce_time_s(
        [2 * MIB], num_gpus=8, link_bandwidth_bytes_per_s=450e9, engine="vllm", topology=NODE
    )
    assert t[0] == pytest.approx(6e-6 + 1.75 * 2 * MIB / (450e9 * 0.6))
    # TensorRT-LLM TP8 at 16 MiB runs NCCL, whose NVLS path is 53.1 us + 16 MiB / (450e9·0.55)
    # = 120.9 us (ring Simple: 16.83 + 14·0.78 + 1.75·16 MiB / (450e9·0.66) = 126.6 us).
    t = all_reduce_time_s(
        [16 * MIB], num_gpus=8, link_bandwidth_bytes_per_s=450e9, engine="trtllm", topology=NODE
    )
    assert t[0] == pytest.approx(53.1e-6 + 16 * MIB / (450e9 * 0.55))
    # collectives.csv: NCCL all-reduce of 8,388,608 half elements on 8 H100s, 122.1 us.
    assert t[0] == pytest.approx(122.1e-6, rel=0.05)


def _llama_70b() -> Architecture:
    config = json.loads(
        (ROOT / "servesize" / "data" / "models" / "meta-llama--Llama-3.1-70B.json").read_text()
    )
    return parse_architecture(config, name="meta-llama/Llama-3.1-70B")


def test_tp8_decode_prices_two_all_reduces_per_layer_by_the_engine_choice() -> None:
    arch = _llama_70b()  # 80 layers, hidden 8192
    model = build_step_model(arch, H100, engine="trtllm", tensor_parallel_size=8, calibrated=False)
    step = model.step_time(StepWork.decode(batch_size=[16, 1024], context_tokens=512))
    # 16 tokens: 256 KiB, one-shot: 3 us + 7·256 KiB / (450e9·0.6) = 9.80 us.
    # 1024 tokens: 16 MiB, NCCL NVLS: 120.9 us.
    one = 3e-6 + 7 * 256 * KIB / (450e9 * 0.6)
    nvls = 53.1e-6 + 16 * MIB / (450e9 * 0.55)
    assert step.communication_s.tolist() == pytest.approx([160 * one, 160 * nvls])


def _toy(layers: int) -> Architecture:
    return parse_architecture(
        {
            "model_type": "llama",
            "hidden_size": 4096,
            "num_hidden_layers": layers,
            "head_dim": 128,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "intermediate_size": 14336,
            "vocab_size": 32000,
            "tie_word_embeddings": True,
        },
        name="toy",
    )


def test_a_micro_batch_through_two_even_stages_costs_the_kernels_of_one_gpu() -> None:
    # Stages of 2 + 2 layers: the pass runs every layer once and adds one hand-off of the
    # micro-batch: 6 us + 64·4096·2 B / (450e9·0.8).
    arch = _toy(4)
    one = build_step_model(arch, H100, engine="vllm", calibrated=False)
    two = build_step_model(arch, H100, engine="vllm", pipeline_parallel_size=2, calibrated=False)
    work = StepWork.decode(batch_size=[64], context_tokens=1000)
    a, b = one.step_time(work), two.step_time(work)
    assert (b.compute_s + b.memory_s)[0] == pytest.approx((a.compute_s + a.memory_s)[0])
    assert b.communication_s[0] == pytest.approx(6e-6 + 64 * 4096 * 2 / (450e9 * 0.8))


def test_stages_on_two_nodes_hand_off_over_the_network() -> None:
    arch = _toy(4)
    model = build_step_model(
        arch,
        H100,
        engine="vllm",
        tensor_parallel_size=8,
        pipeline_parallel_size=2,
        calibrated=False,
        network_bandwidth_bytes_per_s=50e9,
    )
    t = model.hand_off_s(np.array([1000.0]))
    # vLLM sends hidden_states and residual (2 · 8,192,000 B), 1/8 per TP rank over its own
    # 50 GB/s adapter at 0.9 (5 µs, the NDR default), then all-gathers them over NVLink.
    sent = 2 * 1000 * 4096 * 2
    assert t[0] == pytest.approx(
        5e-6 + sent / (8 * 50e9 * 0.9) + 6e-6 + 7 / 8 * sent / (450e9 * 0.8)
    )  # 96.3 µs
    inside = build_step_model(
        arch,
        H100,
        engine="vllm",
        tensor_parallel_size=4,
        pipeline_parallel_size=2,
        calibrated=False,
    )
    assert inside.hand_off_s(np.array([1000.0]))[0] == pytest.approx(
        6e-6 + 1000 * 4096 * 2 / (450e9 * 0.8)
    )


def test_tensorrt_llm_fuses_residual_and_norm_into_its_own_all_reduce_kernels() -> None:
    # Llama-3.1-70B at TP8, per token and GPU: 80 layers of 10·8192·2 B (norms, residual adds)
    # plus 3·(28672/8)·2 B (MLP activation) = 14,827,520 B. A fused one-shot all-reduce keeps
    # the sum in registers: 160 all-reduces × 2 × 8192·2 B = 5,242,880 B less per token, only
    # below 1 MiB (64 tokens); vLLM runs the norm as its own kernel.
    arch = _llama_70b()
    trt = build_step_model(arch, H100, engine="trtllm", tensor_parallel_size=8, calibrated=False)
    vllm = build_step_model(arch, H100, engine="vllm", tensor_parallel_size=8, calibrated=False)
    tokens = np.array([16.0, 1024.0])
    per_token = 80 * (10 * 8192 * 2 + 3 * 3584 * 2)
    assert trt.elementwise_bytes(tokens).tolist() == pytest.approx(
        [16 * (per_token - 160 * 2 * 8192 * 2), 1024 * per_token]
    )
    assert vllm.elementwise_bytes(tokens).tolist() == pytest.approx(tokens * per_token)
