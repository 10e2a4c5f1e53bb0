"""Adapters from step-time back-ends to the simulator's :class:`StepTimeModel` protocol.

:func:`steptime_adapter` wraps the roofline / measured-table model of
:mod:`servesize.core.steptime` (which takes a :class:`~servesize.core.steptime.StepWork`). The
simulator describes a step by five features (see :mod:`servesize.core.simulation.steptime`); they
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

:func:`steptime_adapter` returns :class:`FastStepTimeAdapter` unless asked for ``exact=True``: it
maps each step's features as above, in Python floats, and costs the step with
:class:`~servesize.core.steptime.fast.FastStepTime` (the same sum, tabulated over token and
sequence counts, with the attention formulas written for scalars), a few microseconds per step
instead of a few hundred. Its durations equal :class:`StepTimeAdapter`'s to ``1e-12`` relative
(rounding only); every step is costed on its own, so the element-wise property holds exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from servesize.core.simulation.steptime import DecodeRunStepTime, SingleStepTime
from servesize.core.steptime import StepTimeModel as RooflineStepModel
from servesize.core.steptime import StepWork
from servesize.core.steptime.fast import FastStepTime, fast_step_time

__all__ = [
    "MIN_STEP_S",
    "FastStepTimeAdapter",
    "StepTimeAdapter",
    "step_work",
    "steptime_adapter",
]

_INF = math.inf
_min = np.minimum.reduce
_max = np.maximum.reduce

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
    """A :class:`servesize.core.steptime.StepTimeModel` seen through the simulator's protocol."""

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


class FastStepTimeAdapter(SingleStepTime, DecodeRunStepTime):
    """:class:`StepTimeAdapter`'s durations, one step at a time in Python floats (see the
    module docstring); it has both fast paths of the simulator's protocol: :meth:`single_step_s`
    costs a single step without building arrays, :meth:`decode_run_s` a run of decode steps."""

    __slots__ = ("fast", "model")

    def __init__(self, model: RooflineStepModel) -> None:
        self.model = model
        self.fast: FastStepTime = fast_step_time(model)

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
        columns: tuple[np.ndarray, ...] = (
            prefill_tokens,
            prefill_attention_work,
            decode_seqs,
            decode_context_tokens,
            num_seqs,
        )
        shape = np.shape(prefill_tokens)
        if any(np.shape(c) != shape for c in columns):
            columns = tuple(np.broadcast_arrays(*columns))
            shape = columns[0].shape
        step = self.single_step_s
        lists = [np.ravel(c).tolist() for c in columns]
        out = [step(*features) for features in zip(*lists, strict=True)]
        return np.array(out, dtype=np.float64).reshape(shape)

    def single_step_s(
        self,
        prefill_tokens: float,
        prefill_attention_work: float,
        decode_seqs: float,
        decode_context_tokens: float,
        num_seqs: float,
    ) -> float:
        """Duration of one step in seconds (``>= MIN_STEP_S``); :func:`step_work` in floats."""
        t_p = float(prefill_tokens)
        a_pre = float(prefill_attention_work)
        b = float(decode_seqs)
        ctx = float(decode_context_tokens)
        s = float(num_seqs)
        if not (0.0 <= t_p < _INF and 0.0 <= a_pre < _INF and 0.0 <= b < _INF):
            raise ValueError(
                f"step features must be finite and >= 0, got prefill_tokens={t_p}, "
                f"prefill_attention_work={a_pre}, decode_seqs={b}"
            )
        if not (0.0 <= ctx < _INF and 0.0 <= s < _INF):
            raise ValueError(
                f"step features must be finite and >= 0, got decode_context_tokens={ctx}, "
                f"num_seqs={s}"
            )
        if t_p > 0:
            chunks = s - b if s - b > 1.0 else 1.0
            cached = chunks * a_pre / t_p - t_p / 2.0
            total = self.fast.step_s(
                t_p,
                chunks,
                cached if cached > 0.0 else 0.0,
                a_pre + t_p / 2.0,
                b,
                ctx if ctx > b else b,
            )
        else:
            total = self.fast.step_s(0.0, 0.0, 0.0, 0.0, b, ctx if ctx > b else b)
        return total if total > MIN_STEP_S else MIN_STEP_S

    def decode_run_s(self, decode_seqs: int, decode_context_tokens: np.ndarray) -> np.ndarray:
        """Durations of pure-decode steps of ``decode_seqs`` sequences, one per context (each
        equal to :meth:`single_step_s` ``(0, 0, B, C, B)``, the batch's terms looked up once)."""
        b = float(decode_seqs)
        # Python floats throughout: the same values as the array round trip (an integer context
        # converts exactly, ``max`` keeps NaN as ``np.maximum`` does), without its numpy calls.
        contexts: list[float] = np.ravel(decode_context_tokens).tolist()
        if not (0.0 <= b < _INF) or not all(0.0 <= c < _INF for c in contexts):
            low, high = (min(contexts), max(contexts)) if contexts else (None, None)
            raise ValueError(
                f"step features must be finite and >= 0, got decode_seqs={b}, "
                f"decode_context_tokens in [{low}, {high}]"
            )
        floor = MIN_STEP_S
        steps = self.fast.decode_steps_s(b, [c if c > b else b for c in map(float, contexts)])
        return np.array([d if d > floor else max(d, floor) for d in steps], dtype=np.float64)


def steptime_adapter(
    model: RooflineStepModel, *, exact: bool = False
) -> FastStepTimeAdapter | StepTimeAdapter:
    """Wrap a step-time model built by :func:`servesize.core.steptime.build_step_model` so the
    simulator can call it (see the module docstring for the feature mapping).

    By default the step times come from :class:`FastStepTimeAdapter` (the same numbers to
    ``1e-12`` relative, about a hundred times faster per step); ``exact=True`` evaluates
    :meth:`~servesize.core.steptime.StepTimeModel.step_time` itself.
    """
    return StepTimeAdapter(model) if exact else FastStepTimeAdapter(model)
