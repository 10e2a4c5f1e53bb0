"""Closed-loop estimates kept by their inputs (``servesize.core.steptime.memo``).

The reference is the same computation with nothing kept (``clear_estimates`` first): a kept
estimate must be that answer bit for bit, for its own inputs only, and unaffected by what a
caller does to an answer it was handed.
"""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import pytest

from servesize.core.steptime import StepTimeModel, build_step_model, closed_loop, memo
from servesize.core.steptime.openloop import OpenLoopEstimate, open_loop
from servesize.core.steptime.serving import ServingEstimate
from tests.core.sizing.fixtures import H100, LLAMA_8B


@pytest.fixture(scope="module")
def model() -> StepTimeModel:
    return build_step_model(LLAMA_8B, H100)


def _point(model: StepTimeModel, c: int, policy: str | None = None) -> ServingEstimate:
    return closed_loop(
        model,
        concurrency=c,
        input_tokens=512,
        output_tokens=64,
        kv_capacity_tokens=400_000,
        policy=policy,
    )


def _fresh(model: StepTimeModel, c: int, policy: str | None = None) -> ServingEstimate:
    memo.clear_estimates()
    return _point(model, c, policy)


def _same(a: ServingEstimate, b: ServingEstimate) -> None:
    for f in fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y, err_msg=f.name)
        else:
            assert x == y, f.name


def test_a_kept_estimate_is_the_computed_one_bit_for_bit(model: StepTimeModel) -> None:
    reference = _fresh(model, 8)
    before = memo.memo_stats()["hits"]
    again = _point(model, 8)
    assert memo.memo_stats()["hits"] == before + 1
    _same(again, reference)


def test_each_input_has_its_own_entry(model: StepTimeModel) -> None:
    references = {
        (c, policy): _fresh(model, c, policy) for c in (4, 16) for policy in (None, "sarathi")
    }
    memo.clear_estimates()
    for (c, policy), _ in references.items():
        _point(model, c, policy)
    for (c, policy), reference in references.items():
        _same(_point(model, c, policy), reference)
    # A concurrency of 4 and one of 16 are different steady states (the batch differs).
    assert (
        references[(4, None)].resident_sequences[0] != references[(16, None)].resident_sequences[0]
    )


def test_a_caller_changing_an_answer_does_not_change_the_next(model: StepTimeModel) -> None:
    reference = _fresh(model, 8)
    first = _point(model, 8)
    first.ttft_s[0] = -1.0
    first.sources.clear()  # type: ignore[attr-defined]
    _same(_point(model, 8), reference)


def test_another_model_object_is_not_served_from_this_one(model: StepTimeModel) -> None:
    _fresh(model, 8)
    other = build_step_model(LLAMA_8B, H100, engine="trtllm")
    misses = memo.memo_stats()["misses"]
    _point(other, 8)
    assert memo.memo_stats()["misses"] == misses + 1


def test_the_memo_keeps_its_last_points_only(
    model: StepTimeModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memo, "MEMO_SIZE", 2)
    memo.clear_estimates()
    for c in (2, 3, 4):
        _point(model, c)
    assert memo.memo_stats()["size"] == 2
    misses = memo.memo_stats()["misses"]
    _point(model, 2)  # the oldest, dropped
    assert memo.memo_stats()["misses"] == misses + 1


def test_open_loop_answers_with_kept_grids_are_those_computed_afresh(
    model: StepTimeModel,
) -> None:
    """``open_loop`` keeps its saturation point and first grid (``memo.shared_value``): rates
    asked after others give the bits each rate gives on its own."""
    rates = (2.0, 6.0, 11.0)

    def ask(rate: float) -> OpenLoopEstimate:
        return open_loop(
            model,
            arrival_rate_per_s=rate,
            input_tokens=512,
            output_tokens=64,
            kv_capacity_tokens=400_000,
        )

    alone = []
    for rate in rates:
        memo.clear_estimates()
        alone.append(ask(rate))
    memo.clear_estimates()
    in_turn = [ask(rate) for rate in rates]
    assert in_turn == alone
    # The three rates are three different steady states.
    assert len({e.resident_sequences for e in in_turn}) == 3
