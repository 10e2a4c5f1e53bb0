"""The step-time interface the simulator calls, and two closed-form implementations for tests.

One engine step (a forward pass over a batch) is described by five per-step features, passed as
equally long numpy arrays so that a run of steps is evaluated in one call
(docs/modeling.md §3.3, §3.8):

``prefill_tokens`` (int64)
    ``T_p``: prompt tokens computed in the step (chunks of new prompts and recomputes).
``prefill_attention_work`` (float64)
    ``A_pre = Σ_chunks chunk · (ctx + chunk / 2)``, with ``ctx`` the tokens of that request already
    in the KV cache before the chunk: the causal-attention work of the chunks.
``decode_seqs`` (int64)
    ``B``: requests that decode one token in the step.
``decode_context_tokens`` (int64)
    ``C_dec``: the decodes' attention context, ``Σ (tokens in KV before the step + 1)``.
``num_seqs`` (int64)
    Requests in the step (prefill chunks + decodes).

A model returns the step durations in seconds (float64, ``> 0``). Any back-end (roofline,
measured table, fitted regression) is adapted to this signature; the simulator never calls a
model per token.

Two optional fast paths, each a protocol of its own that the simulator checks with
``isinstance``: :class:`SingleStepTime` costs one step from Python numbers (no arrays), and
:class:`DecodeRunStepTime` costs a run of pure-decode steps of one batch. Each must return
exactly what the vectorised call returns for the same steps (the decode-run skipping is exact
only then).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np


class StepTimeModel(Protocol):
    """Vectorised step duration: five arrays of per-step features in, seconds out."""

    __slots__ = ()

    def __call__(
        self,
        prefill_tokens: np.ndarray,
        prefill_attention_work: np.ndarray,
        decode_seqs: np.ndarray,
        decode_context_tokens: np.ndarray,
        num_seqs: np.ndarray,
        /,
    ) -> np.ndarray:
        """Durations in seconds, one per step, ``float64`` and ``> 0``."""
        ...


@runtime_checkable
class SingleStepTime(StepTimeModel, Protocol):
    """A step-time model that also costs a single step without arrays."""

    __slots__ = ()

    def single_step_s(
        self,
        prefill_tokens: float,
        prefill_attention_work: float,
        decode_seqs: float,
        decode_context_tokens: float,
        num_seqs: float,
        /,
    ) -> float:
        """The duration of one step in seconds: element 0 of the vectorised call on those
        features."""
        ...


@runtime_checkable
class DecodeRunStepTime(StepTimeModel, Protocol):
    """A step-time model that also costs a run of pure-decode steps of one batch."""

    __slots__ = ()

    def decode_run_s(self, decode_seqs: int, decode_context_tokens: np.ndarray, /) -> np.ndarray:
        """Durations in seconds of steps ``(0, 0, B, C_k, B)``, one per context ``C_k``: the
        vectorised call on those steps."""
        ...


@dataclass(frozen=True, slots=True)
class ConstantStepTime:
    """Every step takes ``step_s`` seconds, whatever the batch.

    With ``max_num_seqs = 1`` this turns the engine into a single FCFS server with service time
    ``(number of steps) · step_s`` — the degenerate mode the queueing oracles apply to.

    Examples
    --------
    >>> z = np.zeros(2, dtype=np.int64)
    >>> ConstantStepTime(0.01)(z, z.astype(float), z, z, z)
    array([0.01, 0.01])
    """

    step_s: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.step_s) and self.step_s > 0):
            raise ValueError(f"step_s must be finite and > 0, got {self.step_s}")

    def __call__(
        self,
        prefill_tokens: np.ndarray,
        prefill_attention_work: np.ndarray,
        decode_seqs: np.ndarray,
        decode_context_tokens: np.ndarray,
        num_seqs: np.ndarray,
        /,
    ) -> np.ndarray:
        """``step_s`` for every step."""
        return np.full(np.shape(prefill_tokens), self.step_s, dtype=np.float64)


@dataclass(frozen=True, slots=True, kw_only=True)
class LinearStepTime:
    """``t = base_s + per_token_s · (T_p + B) + per_context_token_s · C_dec
    + per_attention_work_s · A_pre + per_seq_s · S``.

    The shape of DistServe's fitted estimator (``LLMServe/DistServe:simdistserve/estimators/
    time_estimator.py``: prefill ``a + b ΣL + c ΣL²``, decode ``a + b Σctx + c·batch``) and of
    WVA's ``α + β n``, with the prefill and decode parts sharing one forward pass. All
    coefficients must be ``>= 0`` and ``base_s > 0``, so every step takes positive time.

    Examples
    --------
    >>> m = LinearStepTime(base_s=0.01, per_token_s=1e-4)
    >>> m(np.array([100]), np.array([5000.0]), np.array([0]), np.array([0]), np.array([1]))
    array([0.02])
    """

    base_s: float
    per_token_s: float = 0.0
    per_context_token_s: float = 0.0
    per_attention_work_s: float = 0.0
    per_seq_s: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.base_s) and self.base_s > 0):
            raise ValueError(f"base_s must be finite and > 0, got {self.base_s}")
        for name in ("per_token_s", "per_context_token_s", "per_attention_work_s", "per_seq_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be finite and >= 0, got {value}")

    def __call__(
        self,
        prefill_tokens: np.ndarray,
        prefill_attention_work: np.ndarray,
        decode_seqs: np.ndarray,
        decode_context_tokens: np.ndarray,
        num_seqs: np.ndarray,
        /,
    ) -> np.ndarray:
        """Evaluate the linear form element-wise (same operation order for every array length,
        so a step's duration does not depend on how many steps are evaluated together)."""
        out = self.base_s + self.per_token_s * (prefill_tokens + decode_seqs)
        if self.per_context_token_s:
            out = out + self.per_context_token_s * decode_context_tokens
        if self.per_attention_work_s:
            out = out + self.per_attention_work_s * prefill_attention_work
        if self.per_seq_s:
            out = out + self.per_seq_s * num_seqs
        return np.asarray(out, dtype=np.float64)
