"""Collectives and expert routing against hand arithmetic."""

from __future__ import annotations

import numpy as np
import pytest

from servesize.core.steptime import (
    CollectiveTable,
    all_reduce_time_s,
    all_to_all_time_s,
    expected_experts_touched,
    point_to_point_time_s,
)


def test_ring_all_reduce_moves_two_p_minus_one_over_p_of_the_message() -> None:
    # 8 GPUs, 64 MB, 450 GB/s, no multicast: NCCL's Simple ring, 16.83 us + 14 steps of
    # 0.78 us + 2·7/8·64e6 / (450e9·0.66) = 404.0 us (LL at half the bandwidth is slower).
    t = all_reduce_time_s([64e6], num_gpus=8, link_bandwidth_bytes_per_s=450e9)
    assert t[0] == pytest.approx(16.83e-6 + 14 * 0.78e-6 + 2 * 7 / 8 * 64e6 / (450e9 * 0.66))


def test_a_single_gpu_or_an_empty_message_costs_nothing() -> None:
    assert all_reduce_time_s([1e6], num_gpus=1, link_bandwidth_bytes_per_s=1e9)[0] == 0.0
    assert all_reduce_time_s([0.0], num_gpus=4, link_bandwidth_bytes_per_s=1e9)[0] == 0.0


def test_all_to_all_keeps_one_share_local() -> None:
    t = all_to_all_time_s(
        [4e6], num_gpus=4, link_bandwidth_bytes_per_s=1e9, latency_s=0.0, link_efficiency=1.0
    )
    assert t[0] == pytest.approx(3e-3)  # 3/4 of 4 MB at 1 GB/s


def test_pipeline_hand_off_is_one_send() -> None:
    t = point_to_point_time_s(
        [1e6], link_bandwidth_bytes_per_s=1e9, latency_s=1e-6, link_efficiency=1.0
    )
    assert t[0] == pytest.approx(1e-3 + 1e-6)


def test_a_measured_table_replaces_the_ring_model() -> None:
    table = CollectiveTable(
        op="all_reduce",
        implementation="custom",
        source="t",
        num_gpus=2,
        message_bytes=np.array([1024.0, 1048576.0]),
        latency_s=np.array([3e-6, 9e-6]),
    )
    t = all_reduce_time_s(
        [1024.0, 1048576.0], num_gpus=2, link_bandwidth_bytes_per_s=1e9, table=table
    )
    assert t.tolist() == [3e-6, 9e-6]


def test_one_token_touches_k_experts_and_many_touch_all() -> None:
    touched = expected_experts_touched([1, 2, 100_000], num_experts=128, experts_per_token=8)
    assert touched[0] == pytest.approx(8.0)
    # Two tokens: 128·(1 − (120/128)^2) = 15.5.
    assert touched[1] == pytest.approx(128 * (1 - (120 / 128) ** 2))
    assert touched[2] == pytest.approx(128.0)


def test_routing_needs_k_at_most_e() -> None:
    with pytest.raises(ValueError, match="experts_per_token"):
        expected_experts_touched([1], num_experts=4, experts_per_token=8)
