"""The all-reduce constants fit: it recovers known constants from tables they generated, and the
datasheet defaults stay close to the measured H100 all-reduce tables."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from servesize.calibration import kernel_accuracy, load_measured_profile, reference_gpu
from servesize.calibration.collective_fit import fit_collective_constants
from servesize.core.steptime.communication import (
    DEFAULT_COLLECTIVE_CONSTANTS,
    LinkTopology,
    all_reduce_time_s,
    nccl_all_reduce_time_s,
)
from servesize.core.steptime.tables import CollectiveTable

SIZES = np.asarray(2.0 ** np.arange(9, 30), dtype=np.float64)


def test_the_fit_recovers_the_constants_that_made_the_tables() -> None:
    truth = replace(
        DEFAULT_COLLECTIVE_CONSTANTS,
        nccl_latency_s=4e-6,
        nccl_hop_latency_s=1e-6,
        nccl_link_efficiency=0.7,
        nccl_simple_latency_s=20e-6,
        nvls_latency_s=40e-6,
        nvls_link_efficiency=0.5,
        one_shot_latency_s=2.5e-6,
        custom_link_efficiency=0.65,
    )
    topo = LinkTopology(link_bandwidth_bytes_per_s=450e9, multicast=True)
    tables = []
    for gpus in (2, 4, 8):
        nccl = nccl_all_reduce_time_s(SIZES, num_gpus=gpus, topology=topo, constants=truth)
        engine = all_reduce_time_s(
            SIZES,
            num_gpus=gpus,
            link_bandwidth_bytes_per_s=450e9,
            engine="trtllm",
            topology=topo,
            constants=truth,
        )
        for impl, t in (("nccl", nccl), ("custom", engine)):
            tables.append(
                CollectiveTable(
                    op="all_reduce",
                    implementation=impl,
                    source="synthetic",
                    num_gpus=gpus,
                    message_bytes=SIZES,
                    latency_s=t,
                )
            )
    fitted = fit_collective_constants(tables, link_bandwidth_bytes_per_s=450e9)
    for name in (
        "nccl_latency_s",
        "nccl_hop_latency_s",
        "nccl_link_efficiency",
        "nccl_simple_latency_s",
        "nvls_latency_s",
        "nvls_link_efficiency",
        "one_shot_latency_s",
        "custom_link_efficiency",
    ):
        assert getattr(fitted, name) == pytest.approx(getattr(truth, name), rel=0.02), name


def test_datasheet_all_reduce_defaults_against_the_h100_tables() -> None:
    # Reached: custom (TensorRT-LLM AUTO) 6.2 % MAPE, NCCL 5.0 % (the plain 6 us / 0.8 ring
    # model had 54.2 % and 34.1 %). In-sample: the defaults were fitted on these tables.
    errors = kernel_accuracy(load_measured_profile(), reference_gpu("H100 SXM")).roofline
    assert errors["all_reduce custom"].mape < 8.0
    assert errors["all_reduce nccl"].mape < 7.0
    for gpus in (2, 4, 8):
        assert errors[f"all_reduce nccl {gpus} GPUs"].mape < 8.0
