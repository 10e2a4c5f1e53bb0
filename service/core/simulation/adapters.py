"""Adapters from step-time back-ends to the simulator's :class:`StepTimeModel` protocol.

:func:`steptime_adapter` wraps the roofline / measured-table model of
:mod:`service.core.steptime` (which takes a :class:`~service.core.steptime.StepWork`). The
simulator describes a step by five features (see :mod:`service.core.simulation.steptime`); they
map onto ``StepWork`` as follows, with ``t_i`` the new tokens of prefill chunk ``i`` and
``o_i`` the tokens of that request already in the KV cache:

==========================  ==================================================================
``StepWork`` field          from the simulator's features
==========================  ==================================================================
``prefill_tokens``          ``T_p = Σ t_i``
``prefill_sequences``       ``n = S - B`` (requests in the step that are not decoding), at
                            least 1 when ``T_p > 0``
``prefill_attention_pairs`` ``Σ (t_i·o_i + t_i(t_i+1)/2) = A_pre + T_p / 2``, since
                            ``A_pre = Σ t_i·(o_i + t_i/2)`` — exact
``prefill_cached_tokens``   ``Σ o_i ≈ n·A_pre / T_p - T_p / 2``: exact for one chunk and for
                            chunks of equal size; never negative (``Σ t_i² >= T_p² / n``)
``decode_sequences``        ``B``
``decode_context_tokens``   ``C_dec = Σ (tokens in KV before the step + 1)``: each decode
                            attends to its cached tokens and itself, as ``StepWork`` expects
==========================  ==================================================================

Every operation is element-wise, so a step's duration does not depend on how many steps are
evaluated together (the simulator's decode-run skipping relies on that).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from service.core.steptime import StepTimeModel as RooflineStepModel
from service.core.steptime import StepWork

__all__ = ["MIN_STEP_S", "StepTimeAdapter", "step_work", "steptime_adapter"]

MIN_STEP_S = 1e-9
"""Floor on a step's duration, so an empty step (no work, uncalibrated model) still takes
positive time as the protocol requires."""


def step_work(
    prefill_tokens: np.ndarray,
    prefill_attention_work: np.ndarray,
    decode_seqs: np.ndarray,
    decode_context_tokens: np.ndarray,
    num_seqs: np.ndarray,
) -> StepWork:
    """The :class:`StepWork` of simulator steps (mapping in the module docstring).

    >>> w = step_work(np.array([4]), np.array([4 * (3 + 2.0)]), np.array([2]), np.array([20]),
    ...               np.array([3]))
    >>> w.prefill_sequences.tolist(), w.prefill_cached_tokens.tolist()
    ([1.0], [3.0])
    >>> w.prefill_attention_pairs.tolist()  # 4·3 + 4·5/2
    [22.0]
    """
    t_p = np.asarray(prefill_tokens, dtype=np.float64)
    a_pre = np.asarray(prefill_attention_work, dtype=np.float64)
    b = np.asarray(decode_seqs, dtype=np.float64)
    ctx = np.asarray(decode_context_tokens, dtype=np.float64)
    s = np.asarray(num_seqs, dtype=np.float64)
    has_prefill = t_p > 0
    chunks = np.where(has_prefill, np.maximum(s - b, 1.0), 0.0)
    safe_t = np.where(has_prefill, t_p, 1.0)
    cached = np.where(has_prefill, np.maximum(chunks * a_pre / safe_t - t_p / 2.0, 0.0), 0.0)
    return StepWork(
        prefill_tokens=t_p,
        prefill_sequences=chunks,
        prefill_cached_tokens=cached,
        prefill_attention_pairs=np.where(has_prefill, a_pre + t_p / 2.0, 0.0),
        decode_sequences=b,
        decode_context_tokens=np.maximum(ctx, b),
    )


@dataclass(frozen=True, slots=True)
class StepTimeAdapter:
    """A :class:`service.core.steptime.StepTimeModel` seen through the simulator's protocol."""

    model: RooflineStepModel

    def __call__(
        self,
        prefill_tokens: np.ndarray,
        prefill_attention_work: np.ndarray,
        decode_seqs: np.ndarray,
        decode_context_tokens: np.ndarray,
        num_seqs: np.ndarray,
        /,
    ) -> np.ndarray:
        """Step durations in seconds (``float64``, ``>= MIN_STEP_S``)."""
        work = step_work(
            prefill_tokens, prefill_attention_work, decode_seqs, decode_context_tokens, num_seqs
        )
        total = self.model.step_time(work).total_s
        return np.maximum(np.asarray(total, dtype=np.float64), MIN_STEP_S)


def steptime_adapter(model: RooflineStepModel) -> StepTimeAdapter:
    """Wrap a step-time model built by :func:`service.core.steptime.build_step_model` so the
    simulator can call it (see the module docstring for the feature mapping)."""
    return StepTimeAdapter(model)
