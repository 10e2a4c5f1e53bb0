"""Predict measured serving rows and summarise the errors.

Closed-loop TTFT at concurrency ``C`` is the steady-state time from sending a request to its
first token (request overhead + admission wait + the rest of the running step + the wait behind
other prompts + its own prefill steps, :mod:`servesize.core.steptime.serving`), averaged over
requests like the benchmark's mean; TPOT is the mean step time a decoding request sees.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from servesize.calibration.cases import (
    Group,
    ServingCase,
    case_step_model,
    kv_capacity_tokens_estimate,
)
from servesize.calibration.simulated import lockstep_cases
from servesize.core.architecture import Architecture
from servesize.core.hardware import HardwareSpec
from servesize.core.steptime import EngineProfile, MeasuredProfile, StepTimeModel
from servesize.core.steptime.serving import resident_capacity

__all__ = [
    "ErrorPair",
    "ErrorSummary",
    "ServingPredictions",
    "compile_models",
    "evaluate_serving",
    "serving_errors",
    "steady_state_cases",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorSummary:
    """Absolute percentage errors of ``count`` predictions."""

    count: int
    mape: float
    """Mean absolute percentage error, in percent."""
    median: float
    """Median absolute percentage error, in percent."""

    @classmethod
    def of(cls, predicted: np.ndarray, measured: np.ndarray) -> ErrorSummary:
        if predicted.size == 0:
            return cls(count=0, mape=math.nan, median=math.nan)
        ape = 100.0 * np.abs(predicted - measured) / measured
        return cls(count=int(ape.size), mape=float(ape.mean()), median=float(np.median(ape)))


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingPredictions:
    """Predictions for ``cases``, in order."""

    cases: tuple[ServingCase, ...]
    ttft_s: np.ndarray
    tpot_s: np.ndarray
    capacity_limited: np.ndarray
    """True where the KV cache (or ``max_num_seqs``) holds fewer than ``C`` sequences, so
    TTFT is dominated by admission queueing and preemption that a steady-state model does not
    describe (the simulator's job)."""

    def subset(self, mask: np.ndarray) -> ServingPredictions:
        keep = np.flatnonzero(mask)
        return ServingPredictions(
            cases=tuple(self.cases[i] for i in keep),
            ttft_s=self.ttft_s[keep],
            tpot_s=self.tpot_s[keep],
            capacity_limited=self.capacity_limited[keep],
        )


def compile_models(
    cases: Sequence[ServingCase],
    architectures: Mapping[str, Architecture],
    hardware: HardwareSpec,
    *,
    measured: MeasuredProfile | None,
    calibrated: bool = True,
) -> dict[Group, tuple[StepTimeModel, float]]:
    """One compiled model per deployment in ``cases``, with its KV capacity in tokens."""
    models: dict[Group, tuple[StepTimeModel, float]] = {}
    for case in cases:
        if case.group in models:
            continue
        arch = architectures[case.model_id]
        model = case_step_model(case, arch, hardware, measured=measured, calibrated=calibrated)
        models[case.group] = (model, kv_capacity_tokens_estimate(model, arch, hardware))
    return models


def evaluate_serving(
    cases: Sequence[ServingCase],
    models: Mapping[Group, tuple[StepTimeModel, float]],
    profiles: Mapping[str, EngineProfile] | None = None,
) -> ServingPredictions:
    """Predicted TTFT and TPOT of each case; ``profiles`` override the compiled engines.

    Tier A under the deployment and client each row was measured with
    (:func:`servesize.calibration.simulated.lockstep_cases`): the lock-step loop of the
    benchmark's clients, or the mean-field closed loop where their lengths put them out of
    step or the KV cache cannot hold them all."""
    ttft, tpot = lockstep_cases(cases, models, profiles)
    limited = np.zeros(len(cases), dtype=bool)
    for i, case in enumerate(cases):
        model, kv_tokens = models[case.group]
        row = case.row
        cap = resident_capacity(
            model,
            input_tokens=row.input_tokens,
            output_tokens=row.output_tokens,
            kv_capacity_tokens=kv_tokens,
        )
        limited[i] = cap[0] < (row.concurrency or 1)
    return ServingPredictions(
        cases=tuple(cases), ttft_s=ttft, tpot_s=tpot, capacity_limited=limited
    )


def steady_state_cases(
    cases: Sequence[ServingCase], models: Mapping[Group, tuple[StepTimeModel, float]]
) -> list[ServingCase]:
    """The cases whose KV cache (and ``max_num_seqs``) can hold all ``C`` requests: the rows a
    steady-state model describes (the others are dominated by admission queueing)."""
    keep = []
    for case in cases:
        model, kv_tokens = models[case.group]
        row = case.row
        cap = resident_capacity(
            model,
            input_tokens=row.input_tokens,
            output_tokens=row.output_tokens,
            kv_capacity_tokens=kv_tokens,
        )
        if cap[0] >= (row.concurrency or 1):
            keep.append(case)
    return keep


def serving_errors(
    predictions: ServingPredictions, key: Callable[[ServingCase], str]
) -> dict[str, tuple[ErrorSummary, ErrorSummary]]:
    """``{group: (ttft errors, tpot errors)}`` with rows grouped by ``key``; ``"all"`` too."""
    groups: dict[str, list[int]] = defaultdict(list)
    for i, case in enumerate(predictions.cases):
        groups[key(case)].append(i)
        groups["all"].append(i)
    ttft_true = np.array([c.row.ttft_s for c in predictions.cases])
    tpot_true = np.array([c.row.tpot_s for c in predictions.cases])
    return {
        name: (
            ErrorSummary.of(predictions.ttft_s[idx], ttft_true[idx]),
            ErrorSummary.of(predictions.tpot_s[idx], tpot_true[idx]),
        )
        for name, idx in ((n, np.array(i)) for n, i in sorted(groups.items()))
    }


ErrorPair = tuple[ErrorSummary, ErrorSummary]
"""``(TTFT errors, TPOT errors)``."""
