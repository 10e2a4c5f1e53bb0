"""What one engine iteration computes, for many iterations at once.

A step carries prefill chunks (``t_i`` new tokens after ``o_i`` cached ones, chunked
prefill included) and decode sequences (one new token each, attending to ``c_j`` tokens).
The step-time model needs only these sufficient statistics, each an array over steps:

- ``prefill_tokens`` ``Σ t_i`` and ``prefill_sequences`` (number of chunks);
- ``prefill_cached_tokens`` ``Σ o_i`` (cached context the chunks read);
- ``prefill_attention_pairs`` ``Σ (t_i·o_i + t_i(t_i+1)/2)``: causal (query, key) pairs;
- ``decode_sequences`` and ``decode_context_tokens`` ``Σ c_j``.

Sliding-window layers need ``Σ min(c_j, w)``; the model evaluates it at the mean context
``c̄ = Σc/B`` (exact when all sequences of a step share one length, or all are shorter or all
longer than the window).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from servesize.core.steptime._arrays import ArrayLike, FloatArray, as_float_array

__all__ = ["StepWork", "causal_pairs"]

_FIELDS = (
    "prefill_tokens",
    "prefill_sequences",
    "prefill_cached_tokens",
    "prefill_attention_pairs",
    "decode_sequences",
    "decode_context_tokens",
)


def causal_pairs(new_tokens: ArrayLike, cached_tokens: ArrayLike) -> FloatArray:
    """(query, key) pairs of a causal chunk: ``t·o + t(t+1)/2``.

    >>> causal_pairs([4], [0]).tolist(), causal_pairs([2], [3]).tolist()
    ([10.0], [9.0])
    """
    t = as_float_array(new_tokens)
    o = as_float_array(cached_tokens)
    return np.asarray(t * o + t * (t + 1) / 2, dtype=np.float64)


@dataclass(frozen=True, slots=True, kw_only=True)
class StepWork:
    """Sufficient statistics of ``n`` engine steps (every field has shape ``(n,)``)."""

    prefill_tokens: FloatArray
    prefill_sequences: FloatArray
    prefill_cached_tokens: FloatArray
    prefill_attention_pairs: FloatArray
    decode_sequences: FloatArray
    decode_context_tokens: FloatArray

    def __post_init__(self) -> None:
        shaped = np.broadcast_arrays(*(as_float_array(getattr(self, f)) for f in _FIELDS))
        stacked = np.array(shaped, dtype=np.float64)
        if not np.isfinite(stacked).all() or (stacked < 0).any():
            bad = [f for f, v in zip(_FIELDS, stacked, strict=True) if not (v >= 0).all()]
            raise ValueError(f"{', '.join(bad) or 'work'} must be finite and >= 0")
        for name, value in zip(_FIELDS, stacked, strict=True):
            object.__setattr__(self, name, value)
        tokens, seqs, _, _, dec, ctx = stacked
        if ((tokens > 0) & (seqs <= 0)).any() or ((dec > 0) & (ctx < dec)).any():
            raise ValueError(
                "prefill tokens need prefill_sequences > 0 and each decode sequence attends to "
                "at least itself (decode_context_tokens >= decode_sequences)"
            )

    def __len__(self) -> int:
        return int(self.prefill_tokens.shape[0])

    @property
    def tokens(self) -> FloatArray:
        """Tokens through the linear layers: ``Σt + B``."""
        return self.prefill_tokens + self.decode_sequences

    @property
    def sequences(self) -> FloatArray:
        """Sequences in the step (each needs one row of logits)."""
        return self.prefill_sequences + self.decode_sequences

    def __getitem__(self, index: int | slice | FloatArray) -> StepWork:
        return StepWork(**{name: getattr(self, name)[index] for name in _FIELDS})

    def scaled(self, factor: float) -> StepWork:
        """Each count divided by ``factor`` (one of ``factor`` equal micro-batches)."""
        return StepWork(**{name: getattr(self, name) / factor for name in _FIELDS})

    @classmethod
    def decode(cls, batch_size: ArrayLike, context_tokens: ArrayLike) -> StepWork:
        """Decode-only steps: ``batch_size`` sequences, each attending to ``context_tokens``."""
        b, c = np.broadcast_arrays(as_float_array(batch_size), as_float_array(context_tokens))
        zero = np.zeros_like(b)
        return cls(
            prefill_tokens=zero,
            prefill_sequences=zero,
            prefill_cached_tokens=zero,
            prefill_attention_pairs=zero,
            decode_sequences=b,
            decode_context_tokens=b * c,
        )

    @classmethod
    def prefill(
        cls, prompt_tokens: ArrayLike, *, sequences: ArrayLike = 1, cached_tokens: ArrayLike = 0
    ) -> StepWork:
        """Prefill-only steps: ``sequences`` chunks of ``prompt_tokens`` each after
        ``cached_tokens`` cached ones."""
        t, s, o = np.broadcast_arrays(
            as_float_array(prompt_tokens), as_float_array(sequences), as_float_array(cached_tokens)
        )
        zero = np.zeros_like(t)
        return cls(
            prefill_tokens=s * t,
            prefill_sequences=np.where(t > 0, s, 0.0),
            prefill_cached_tokens=s * o,
            prefill_attention_pairs=s * causal_pairs(t, o),
            decode_sequences=zero,
            decode_context_tokens=zero,
        )

    @classmethod
    def mixed(
        cls,
        *,
        prefill_tokens: ArrayLike,
        prefill_sequences: ArrayLike = 1,
        prefill_cached_tokens: ArrayLike = 0,
        decode_sequences: ArrayLike,
        decode_context_tokens: ArrayLike,
    ) -> StepWork:
        """Steps with ``prefill_sequences`` equal chunks (``prefill_tokens`` each, after
        ``prefill_cached_tokens``) and ``decode_sequences`` decodes of ``decode_context_tokens``
        each."""
        p = cls.prefill(
            prefill_tokens, sequences=prefill_sequences, cached_tokens=prefill_cached_tokens
        )
        d = cls.decode(decode_sequences, decode_context_tokens)
        return p + d

    @classmethod
    def from_batch(
        cls,
        *,
        prefill_chunks: Sequence[tuple[int, int]] = (),
        decode_context_tokens: Sequence[int] = (),
    ) -> StepWork:
        """One step from explicit ``(new_tokens, cached_tokens)`` chunks and decode contexts."""
        t = np.array([c[0] for c in prefill_chunks], dtype=np.float64)
        o = np.array([c[1] for c in prefill_chunks], dtype=np.float64)
        ctx = np.array(decode_context_tokens, dtype=np.float64)
        return cls(
            prefill_tokens=np.array([t.sum()]),
            prefill_sequences=np.array([float(np.count_nonzero(t))]),
            prefill_cached_tokens=np.array([o[t > 0].sum()]),
            prefill_attention_pairs=np.array([causal_pairs(t, o).sum() if t.size else 0.0]),
            decode_sequences=np.array([float(ctx.size)]),
            decode_context_tokens=np.array([ctx.sum()]),
        )

    def __add__(self, other: StepWork) -> StepWork:
        """Both steps' work in one step (element-wise)."""
        return StepWork(**{name: getattr(self, name) + getattr(other, name) for name in _FIELDS})

    @classmethod
    def concatenate(cls, parts: Sequence[StepWork]) -> StepWork:
        """Steps of several ``StepWork`` one after another."""
        return cls(**{name: np.concatenate([getattr(p, name) for p in parts]) for name in _FIELDS})
