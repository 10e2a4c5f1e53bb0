"""Collectives across nodes worked out by hand: the 2-node hierarchical all-reduce, the
all-to-all of an EP group wider than a node, the pipeline hand-off between nodes, and an NVL72
domain that keeps TP16 on NVLink."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from servesize.core.architecture import Architecture, parse_architecture
from servesize.core.hardware import HardwareSpec, InterNodeLink
from servesize.core.steptime import build_step_model
from servesize.core.steptime.communication import CollectiveConstants, LinkTopology
from servesize.core.steptime.internode import (
    cross_node_all_to_all_time_s,
    hierarchical_all_reduce_time_s,
)
from tests.core.sizing.fixtures import GPUS

MODELS = Path(__file__).resolve().parents[3] / "servesize" / "data" / "models"
H100 = GPUS["h100-sxm"]
GB200 = GPUS["gb200"]


def _arch(name: str) -> Architecture:
    return parse_architecture(json.loads((MODELS / name).read_text()), name=name)


def test_two_node_all_reduce_is_in_node_reduce_scatter_network_all_reduce_all_gather() -> None:
    # 16 GPUs on 2 nodes of 8: n = 2, g = 8. Unit constants: 1 s per in-node ring step, 10 s
    # per network step, 100 s base; B = 8 B/s, B_net = 1 B/s, M = 64 B.
    c = CollectiveConstants(
        nccl_latency_s=1e6,  # LL never wins
        nccl_simple_latency_s=100.0,
        nccl_hop_latency_s=1.0,
        nccl_link_efficiency=1.0,
        network_hop_latency_s=10.0,
        network_link_efficiency=1.0,
    )
    topo = LinkTopology(
        link_bandwidth_bytes_per_s=8.0, gpus_per_node=8, network_bandwidth_bytes_per_s=1.0
    )
    t = hierarchical_all_reduce_time_s([64.0], num_gpus=16, topology=topo, constants=c)
    # 100 + 2·7·1 + 2·1·10 + 2·7/8·64/8 + 2·1/2·64/(8·1) = 100 + 14 + 20 + 14 + 8 = 156 s
    assert t[0] == pytest.approx(156.0)
    # 4 nodes of 8 (32 GPUs): 100 + 14 + 2·3·10 + 14 + 2·3/4·64/8 = 100 + 14 + 60 + 14 + 12
    t4 = hierarchical_all_reduce_time_s([64.0], num_gpus=32, topology=topo, constants=c)
    assert t4[0] == pytest.approx(200.0)


def test_tp16_on_two_h100_nodes_prices_its_all_reduce_over_infiniband() -> None:
    """Llama-3.1-70B TP16 on 2 × 8 H100 (NVLink 450 GB/s, NDR 50 GB/s per GPU, 5 µs)."""
    model = build_step_model(
        _arch("meta-llama--Llama-3.1-70B.json"),
        H100,
        engine="vllm",
        tensor_parallel_size=16,
        calibrated=False,
    )
    m = 4096 * 8192 * 2  # 4096 tokens of hidden 8192 in bf16: 67,108,864 B
    # Simple protocol: 16.83 µs + 2·7·0.78 µs + 2·1·5 µs
    #   + 2·7/8·M/(450e9·0.66) + 2·1/2·M/(8·50e9·0.9)
    # = 16.83 + 10.92 + 10 + 395.43 + 186.41 µs = 619.6 µs (LL, twice the bandwidth terms,
    # is slower)
    expected = 16.83e-6 + 14 * 0.78e-6 + 2 * 5e-6 + 1.75 * m / (450e9 * 0.66) + m / (8 * 50e9 * 0.9)
    assert model.all_reduce_s(np.array([float(m)]))[0] == pytest.approx(expected)
    # A 16 KiB decode message: LL wins, 5.22 + 20.92 µs + twice the bandwidth terms
    small = 16384.0
    ll = 5.22e-6 + 20.92e-6 + 2 * (1.75 * small / (450e9 * 0.66) + small / (8 * 50e9 * 0.9))
    assert model.all_reduce_s(np.array([small]))[0] == pytest.approx(ll)


def test_the_profile_link_sets_the_network_terms() -> None:
    slow = HardwareSpec(
        id="h100-eth",
        vendor="NVIDIA",
        name="H100 SXM",
        memory_bytes=H100.memory_bytes,
        memory_bandwidth_bytes_per_s=H100.memory_bandwidth_bytes_per_s,
        peak_tflop_per_s=H100.peak_tflop_per_s,
        interconnect=H100.interconnect,
        inter_node=InterNodeLink(
            kind="ethernet", bandwidth_bytes_per_s=12_500_000_000, latency_s=2e-5
        ),
    )
    model = build_step_model(
        _arch("meta-llama--Llama-3.1-70B.json"),
        slow,
        engine="vllm",
        tensor_parallel_size=16,
        calibrated=False,
    )
    m = 67_108_864.0
    # 100 Gb/s per GPU, 20 µs: 16.83 + 10.92 + 40 µs + 395.43 µs + M/(8·12.5e9·0.9)
    expected = 16.83e-6 + 10.92e-6 + 4e-5 + 1.75 * m / (450e9 * 0.66) + m / (8 * 12.5e9 * 0.9)
    assert model.all_reduce_s(np.array([m]))[0] == pytest.approx(expected)


def test_pp_hand_off_between_nodes_deepseek_v3_tp8_pp2() -> None:
    model = build_step_model(
        _arch("deepseek-ai--DeepSeek-V3.json"),
        H100,
        engine="vllm",
        tensor_parallel_size=8,
        pipeline_parallel_size=2,
        calibrated=False,
    )
    # 1000 tokens of hidden 7168 in bf16 = 14,336,000 B per tensor; vLLM sends hidden_states
    # and residual, each TP rank 1/8 over its own NDR adapter (50 GB/s at 0.9, 5 µs), then the
    # receiving stage all-gathers over NVLink (6 µs + 7/8 of the bytes at 450 GB/s · 0.8):
    # 5 + 28,672,000/(8·45e9)·1e6 + 6 + 7/8·28,672,000/360e9·1e6 = 5 + 79.64 + 6 + 69.69 µs
    sent = 2 * 1000 * 7168 * 2
    expected = 5e-6 + sent / (8 * 50e9 * 0.9) + 6e-6 + 7 / 8 * sent / (450e9 * 0.8)
    assert model.hand_off_s(np.array([1000.0]))[0] == pytest.approx(expected)  # 160.3 µs
    assert expected == pytest.approx(160.33e-6, rel=1e-3)


def test_ep16_all_to_all_sends_half_of_each_gpus_tokens_over_the_network() -> None:
    # DP16 attention + EP16 experts on 2 nodes: of a GPU's M bytes 7/16 go to its node's 7
    # peers over NVLink, 8/16 to the other node's 8 GPUs over InfiniBand, at the same time.
    model = build_step_model(
        _arch("deepseek-ai--DeepSeek-V3.json"),
        H100,
        engine="vllm",
        data_parallel_size=16,
        expert_parallel_size=16,
        calibrated=False,
    )
    m = 1e8
    on = 7 / 16 * m / (450e9 * 0.8)  # 121.5 µs
    off = 8 / 16 * m / (50e9 * 0.9)  # 1,111.1 µs
    assert model.all_to_all_s(np.array([m]))[0] == pytest.approx(6e-6 + 5e-6 + max(on, off))
    # the same group inside one node (EP8) stays on NVLink: 6 µs + 7/8·M/(450e9·0.8)
    one_node = build_step_model(
        _arch("deepseek-ai--DeepSeek-V3.json"),
        H100,
        engine="vllm",
        data_parallel_size=8,
        expert_parallel_size=8,
        calibrated=False,
    )
    assert one_node.all_to_all_s(np.array([m]))[0] == pytest.approx(
        6e-6 + 7 / 8 * m / (450e9 * 0.8)
    )


def test_cross_node_all_to_all_takes_the_slower_of_the_two_paths() -> None:
    topo = LinkTopology(
        link_bandwidth_bytes_per_s=1.0,
        gpus_per_node=4,
        network_bandwidth_bytes_per_s=100.0,
        network_latency_s=0.0,
    )
    c = CollectiveConstants(network_link_efficiency=1.0)
    # N = 8, g = 4: NVLink share 3/8 · 80 B / (1 · 0.5) = 60 s; network 4/8 · 80 / 100 = 0.4 s
    t = cross_node_all_to_all_time_s(
        [80.0], num_gpus=8, topology=topo, constants=c, latency_s=0.0, link_efficiency=0.5
    )
    assert t[0] == pytest.approx(60.0)


def test_tp16_inside_an_nvl72_domain_stays_on_nvlink() -> None:
    """GB200: trays of 4 GPUs, one NVLink domain of 72; TP16 runs NCCL over NVLink 5
    (900 GB/s): NVLS 53.1 µs + M/(900e9·0.55) beats the ring 16.83 + 30·0.78 µs +
    2·15/16·M/(900e9·0.66)."""
    assert GB200.interconnect is not None
    assert GB200.interconnect.gpus_per_node == 4
    model = build_step_model(
        _arch("meta-llama--Llama-3.1-70B.json"),
        GB200,
        engine="vllm",
        tensor_parallel_size=16,
        calibrated=False,
    )
    m = 67_108_864.0
    nvls = 53.1e-6 + m / (900e9 * 0.55)  # 188.7 µs
    ring = 16.83e-6 + 30 * 0.78e-6 + 2 * 15 / 16 * m / (900e9 * 0.66)  # 252.1 µs
    assert model.all_reduce_s(np.array([m]))[0] == pytest.approx(min(nvls, ring))
