"""Power and energy (docs/modeling.md, "Energy and power") against numbers worked out by hand."""

from __future__ import annotations

import json

import numpy as np
import pytest

from servesize.core.energy import (
    IDLE_POWER_FRACTION,
    MEMORY_ACTIVITY,
    PowerProfile,
    energy_at_rate,
    power_profile,
    step_activity,
)
from servesize.core.hardware import HardwareSpec
from servesize.core.steptime import StepTime

PROFILE = PowerProfile(busy_w=700.0, idle_w=80.0, source="test")


def _gpu(tdp_w: float | None) -> HardwareSpec:
    return HardwareSpec(
        id="x",
        vendor="v",
        name="X",
        memory_bytes=80 * 2**30,
        memory_bandwidth_bytes_per_s=2 * 10**12,
        tdp_w=tdp_w,
    )


def test_a_two_gpu_replica_at_a_known_load_matches_the_hand_sum() -> None:
    # 2 GPUs, 700 W busy / 80 W idle; 5 requests/s of 101 output tokens; a prompt takes
    # 20 ms of compute-bound engine time (a = 1); decode steps of 20 sequences take 20 ms at
    # a = 0.5. Per request: decode busy 100 · 0.020 / 20 = 0.1 s, busy 0.12 s, u = 5 · 0.12
    # = 0.6; dynamic energy 2 · 620 · (1 · 0.02 + 0.5 · 0.1) = 86.8 J, static 2 · 80 / 5 =
    # 32 J: 118.8 J per request, 594 W for the replica (297 W per GPU).
    e = energy_at_rate(
        PROFILE,
        gpus=2,
        rate_per_s=5.0,
        output_tokens=101,
        prefill_busy_s=0.020,
        prefill_activity=1.0,
        decode_step_s=0.020,
        decode_batch=20,
        decode_activity=0.5,
    )
    assert e is not None
    assert e.busy_fraction == pytest.approx(0.6)
    assert e.power_per_gpu_w == pytest.approx(297.0)
    assert e.power_w == pytest.approx(594.0)
    assert e.energy_per_request_j == pytest.approx(118.8)
    assert e.energy_per_output_token_j == pytest.approx(118.8 / 101)
    # 1.17624 J per token · 1e6 tokens / 3.6e6 J per kWh
    assert e.energy_per_million_output_tokens_kwh == pytest.approx(118.8 / 101 / 3.6)


def test_an_overloaded_replica_is_busy_all_the_time_and_an_idle_one_pays_static_power() -> None:
    busy = energy_at_rate(
        PROFILE,
        gpus=1,
        rate_per_s=100.0,
        output_tokens=11,
        prefill_busy_s=0.0,
        prefill_activity=0.0,
        decode_step_s=0.01,
        decode_batch=1,
        decode_activity=1.0,
    )
    assert busy is not None
    assert busy.busy_fraction == 1.0
    assert busy.power_per_gpu_w == pytest.approx(700.0)  # compute-bound, always busy: TDP
    # At 0.001 requests/s the busy share is 0.1 ms per second: almost only idle power,
    # 80 W / 0.001 = 80 kJ per request plus 620 · 0.1 J of work.
    idle = energy_at_rate(
        PROFILE,
        gpus=1,
        rate_per_s=0.001,
        output_tokens=11,
        prefill_busy_s=0.0,
        prefill_activity=0.0,
        decode_step_s=0.01,
        decode_batch=1,
        decode_activity=1.0,
    )
    assert idle is not None
    assert idle.energy_per_request_j == pytest.approx(80_000 + 620 * 0.1)


def test_step_activity_weights_memory_time_and_leaves_overhead_idle() -> None:
    # 4 ms compute, 4 ms memory, 2 ms overhead: a = (4 + 0.35 · 4) / 10 = 0.54.
    step = StepTime(
        total_s=np.array([0.010, 0.0]),
        compute_s=np.array([0.004, 0.0]),
        memory_s=np.array([0.004, 0.0]),
        communication_s=np.array([0.0, 0.0]),
        overhead_s=np.array([0.002, 0.0]),
        flops=np.zeros(2),
        bytes=np.zeros(2),
    )
    assert step_activity(step).tolist() == pytest.approx(
        [(0.004 + MEMORY_ACTIVITY * 0.004) / 0.01, 0]
    )


def test_power_profile_prefers_measurements_and_defaults_idle_to_a_share_of_tdp() -> None:
    sheet = power_profile(_gpu(700.0))
    assert sheet is not None
    assert (sheet.busy_w, sheet.source) == (700.0, "datasheet-tdp")
    assert sheet.idle_w == pytest.approx(80.5)  # 0.115 · 700 W
    assert pytest.approx(0.115) == IDLE_POWER_FRACTION
    measured = power_profile(
        _gpu(700.0), measured_busy_w=655.0, measured_idle_w=71.0, measurement="measurement:3"
    )
    assert measured is not None
    assert (measured.busy_w, measured.idle_w, measured.source) == (655.0, 71.0, "measurement:3")
    assert power_profile(_gpu(None)) is None
    with pytest.raises(ValueError, match="idle_w"):
        PowerProfile(busy_w=100.0, idle_w=200.0, source="x")


def test_the_published_energy_point_is_read_and_predicted_within_a_factor_of_three() -> None:
    # Judging only (servesize/data/validation/energy.json, bench.accuracy --energy): the
    # model is not fitted on it; the band only catches a unit slip (J vs kWh, W vs kW).
    from bench.energy import VALIDATION, predicted

    [row] = json.loads(VALIDATION.read_text())["measurements"]
    joules, watts, _ = predicted(row)
    assert row["energy_per_output_token_j"] / 3 < joules < 3 * row["energy_per_output_token_j"]
    assert 0.115 * 700 < watts < 700
