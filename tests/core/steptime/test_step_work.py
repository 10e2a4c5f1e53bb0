"""Step work statistics: causal pairs, constructors and validation."""

from __future__ import annotations

import numpy as np
import pytest

from servesize.core.steptime import StepWork, causal_pairs


def test_causal_pairs_of_a_fresh_prompt_are_a_triangle() -> None:
    # Token i attends to i tokens (itself included): 1 + 2 + 3 + 4 = 10.
    assert causal_pairs([4], [0]).tolist() == [10.0]


def test_a_chunk_after_cached_tokens_attends_to_them_too() -> None:
    # Two new tokens after three cached: 4 + 5 = 9 = 2·3 + 2·3/2.
    assert causal_pairs([2], [3]).tolist() == [9.0]


def test_from_batch_matches_the_vectorised_constructors() -> None:
    explicit = StepWork.from_batch(
        prefill_chunks=[(100, 0), (100, 0)], decode_context_tokens=[50] * 8
    )
    mixed = StepWork.mixed(
        prefill_tokens=100, prefill_sequences=2, decode_sequences=8, decode_context_tokens=50
    )
    for name in ("prefill_tokens", "prefill_sequences", "prefill_attention_pairs"):
        assert getattr(explicit, name)[0] == getattr(mixed, name)[0]
    assert explicit.tokens[0] == 208.0
    assert explicit.sequences[0] == 10.0
    assert explicit.decode_context_tokens[0] == 400.0


def test_decode_broadcasts_over_batches_and_contexts() -> None:
    work = StepWork.decode([1, 2, 4], 1000)
    assert len(work) == 3
    assert work.decode_context_tokens.tolist() == [1000.0, 2000.0, 4000.0]


def test_scaled_divides_every_count() -> None:
    work = StepWork.decode(8, 100).scaled(4)
    assert work.decode_sequences[0] == 2.0
    assert work.decode_context_tokens[0] == 200.0


def test_concatenate_and_index_round_trip() -> None:
    work = StepWork.concatenate([StepWork.decode(1, 10), StepWork.prefill(64)])
    assert work[1].prefill_tokens.tolist() == [64.0]
    assert work[0].decode_sequences.tolist() == [1.0]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"decode_sequences": -1.0, "decode_context_tokens": 0.0},
        {"decode_sequences": 4.0, "decode_context_tokens": 3.0},
        {"decode_sequences": 1.0, "decode_context_tokens": np.inf},
    ],
)
def test_invalid_decode_work_is_rejected(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=r"decode|>= 0"):
        StepWork(
            prefill_tokens=np.zeros(1),
            prefill_sequences=np.zeros(1),
            prefill_cached_tokens=np.zeros(1),
            prefill_attention_pairs=np.zeros(1),
            decode_sequences=np.array([kwargs["decode_sequences"]]),
            decode_context_tokens=np.array([kwargs["decode_context_tokens"]]),
        )


def test_prefill_tokens_need_a_sequence() -> None:
    with pytest.raises(ValueError, match="prefill_sequences"):
        StepWork(
            prefill_tokens=np.ones(1),
            prefill_sequences=np.zeros(1),
            prefill_cached_tokens=np.zeros(1),
            prefill_attention_pairs=np.zeros(1),
            decode_sequences=np.zeros(1),
            decode_context_tokens=np.zeros(1),
        )
