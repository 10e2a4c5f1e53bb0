"""The constant fit starts from the given constants, even those below 1e-4 (a launch time per
layer of a few microseconds), not from a floor."""

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from servesize.calibration.fitting import FITTED_BOUNDS, SIMULATOR_FITTED, _fit
from servesize.core.steptime import EngineProfile, engine_profile


def test_a_fit_without_room_to_move_returns_its_start() -> None:
    base = replace(engine_profile("vllm"), eager_overhead_per_layer_s=4.5e-6)
    own: Any = [SimpleNamespace(row=SimpleNamespace(ttft_s=0.1, tpot_s=0.01))]
    seen: list[EngineProfile] = []

    def predict(profile: EngineProfile) -> tuple[np.ndarray, np.ndarray]:
        seen.append(profile)
        return np.array([0.1]), np.array([0.01])

    fitted, objective = _fit(
        own,
        base,
        SIMULATOR_FITTED,
        predict,
        simplex_step=0.3,
        max_evaluations=1,
        xatol=1e-2,
        fatol=1e-4,
    )
    assert objective == 0.0
    assert seen[0].eager_overhead_per_layer_s == pytest.approx(4.5e-6)
    for name in SIMULATOR_FITTED:
        assert getattr(fitted, name) == pytest.approx(getattr(base, name)), name
        low, high = FITTED_BOUNDS[name]
        assert low <= getattr(fitted, name) <= high
