"""Tier B costs steps with the constants fitted through the simulator, and only swaps them in
for a profile that carries its engine's stock steady-state constants."""

from dataclasses import replace

import pytest

from servesize.core.steptime import ENGINE_PROFILES, engine_profile, simulator_constants
from servesize.core.steptime.engines import SIMULATOR_ENGINE_PROFILES


@pytest.mark.parametrize("name", sorted(ENGINE_PROFILES))
def test_stock_profiles_take_the_simulator_constants_and_keep_their_limits(name: str) -> None:
    stock = replace(engine_profile(name), max_num_batched_tokens=2048, max_num_seqs=64)
    swapped = simulator_constants(stock)
    sim = SIMULATOR_ENGINE_PROFILES[name]
    assert swapped.request_overhead_s == sim.request_overhead_s
    assert swapped.step_overhead_s == sim.step_overhead_s
    assert swapped.compute_slowdown == sim.compute_slowdown
    assert swapped.memory_slowdown == sim.memory_slowdown
    assert swapped.eager_overhead_per_layer_s == sim.eager_overhead_per_layer_s
    assert (swapped.max_num_batched_tokens, swapped.max_num_seqs) == (2048, 64)
    assert swapped.name == name


def test_trtllm_simulator_request_overhead_no_longer_absorbs_queueing() -> None:
    # The steady-state fit put 142 ms per request outside the engine; through the simulator,
    # which queues prompts itself, 6 ms.
    assert engine_profile("trtllm").request_overhead_s == pytest.approx(0.1416)
    assert simulator_constants(engine_profile("trtllm")).request_overhead_s == pytest.approx(
        0.00601
    )


@pytest.mark.parametrize("name", sorted(ENGINE_PROFILES))
def test_neutral_and_user_made_profiles_are_left_alone(name: str) -> None:
    neutral = engine_profile(name, calibrated=False)
    assert simulator_constants(neutral) == neutral
    mine = replace(engine_profile(name), request_overhead_s=0.05)
    assert simulator_constants(mine) == mine
