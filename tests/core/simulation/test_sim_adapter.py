"""The step-time adapter: element-wise, faithful to the step-time model, always positive."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from servesize.calibration import load_measured_profile
from servesize.core.architecture import parse_architecture
from servesize.core.hardware import datasheet_spec
from servesize.core.simulation import SchedulerConfig, simulate
from servesize.core.simulation.adapters import (
    MIN_STEP_S,
    FastStepTimeAdapter,
    step_work,
    steptime_adapter,
)
from servesize.core.steptime import StepTimeModel, StepWork, build_step_model
from servesize.core.traffic import FixedLength, open_loop_workload

ROOT = Path(__file__).resolve().parents[3]
GPUS = json.loads((ROOT / "servesize" / "data" / "gpus.json").read_text())["gpus"]
H100 = datasheet_spec(next(g for g in GPUS if g["name"] == "H100 SXM"))
LLAMA_8B = parse_architecture(
    json.loads(
        (ROOT / "servesize" / "data" / "models" / "meta-llama--Llama-3.1-8B.json").read_text()
    ),
    name="meta-llama/Llama-3.1-8B",
)


@pytest.fixture(scope="module", params=["datasheet", "measured"])
def model(request: pytest.FixtureRequest) -> StepTimeModel:
    measured = load_measured_profile() if request.param == "measured" else None
    return build_step_model(LLAMA_8B, H100, engine="vllm", measured=measured)


def random_steps(n: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    """Mixed, prefill-only and decode-only steps with the simulator's feature definitions."""
    rng = np.random.default_rng(seed)
    chunk = rng.integers(0, 8192, n)
    chunk[::3] = 0
    cached = rng.integers(0, 4000, n)
    attention = np.where(chunk > 0, chunk * (cached + chunk / 2.0), 0.0)
    decodes = rng.integers(0, 300, n)
    decodes[chunk == 0] = np.maximum(decodes[chunk == 0], 1)
    context = decodes * rng.integers(1, 5000, n)
    seqs = decodes + (chunk > 0)
    return chunk, attention, decodes, context, seqs


def test_steps_evaluated_together_equal_steps_one_by_one(model: StepTimeModel) -> None:
    f = steptime_adapter(model)
    steps = random_steps(200)
    together = f(*steps)
    alone = np.concatenate([f(*(a[i : i + 1] for a in steps)) for i in range(200)])
    np.testing.assert_array_equal(together, alone)
    # ... and a reordering permutes the answer exactly.
    order = np.random.default_rng(1).permutation(200)
    np.testing.assert_array_equal(f(*(a[order] for a in steps)), together[order])


def test_pure_decode_step_equals_the_step_time_model(model: StepTimeModel) -> None:
    batch = np.array([1, 32, 256])
    context_per_seq = np.array([129, 2048, 4000])
    got = steptime_adapter(model)(
        np.zeros(3, np.int64), np.zeros(3), batch, batch * context_per_seq, batch
    )
    want = model.step_time(StepWork.decode(batch, context_per_seq)).total_s
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_pure_prefill_step_equals_the_step_time_model(model: StepTimeModel) -> None:
    # One chunk of t tokens after o cached: A_pre = t·(o + t/2).
    t = np.array([1, 512, 8192, 2048])
    o = np.array([0, 0, 0, 6144])
    got = steptime_adapter(model)(
        t, t * (o + t / 2.0), np.zeros(4, np.int64), np.zeros(4), 1 + 0 * t
    )
    want = model.step_time(StepWork.prefill(t, cached_tokens=o)).total_s
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_mapping_recovers_pairs_and_cached_tokens_for_equal_chunks() -> None:
    # Three chunks of 100 tokens after 50 cached each, plus two decodes of 10 and 30 tokens.
    work = step_work(
        np.array([300]),
        np.array([3 * 100 * (50 + 50.0)]),
        np.array([2]),
        np.array([40]),
        np.array([5]),
    )
    want = StepWork.mixed(
        prefill_tokens=100,
        prefill_sequences=3,
        prefill_cached_tokens=50,
        decode_sequences=2,
        decode_context_tokens=20,
    )
    for name in (
        "prefill_tokens",
        "prefill_sequences",
        "prefill_cached_tokens",
        "prefill_attention_pairs",
        "decode_sequences",
        "decode_context_tokens",
    ):
        np.testing.assert_allclose(getattr(work, name), getattr(want, name), err_msg=name)


def test_durations_are_positive_even_for_an_empty_step() -> None:
    model = build_step_model(LLAMA_8B, H100, engine="vllm", calibrated=False)
    f = steptime_adapter(model)
    steps = random_steps(100, seed=3)
    assert np.all(f(*steps) > 0)
    zero = np.zeros(1, np.int64)
    assert f(zero, zero.astype(float), zero, zero, zero)[0] >= MIN_STEP_S


def test_skipping_decode_runs_is_exact_with_the_adapter(model: StepTimeModel) -> None:
    workload = open_loop_workload(
        num_requests=120,
        rate_per_s=12.0,
        input_tokens=FixedLength(300),
        output_tokens=FixedLength(40),
        rng=np.random.default_rng(7),
    )
    cfg = SchedulerConfig(
        max_num_batched_tokens=512, max_num_seqs=16, block_size_tokens=16, num_kv_blocks=4096
    )
    f = steptime_adapter(model)
    assert isinstance(f, FastStepTimeAdapter)
    single = f.single_step_s

    class StepsOnly:
        """The same model without ``decode_run_s``: runs are costed by the vectorised call."""

        single_step_s = single

        def __call__(self, *features: np.ndarray) -> np.ndarray:
            return f(*features)

    fast = simulate(workload, cfg, f)
    slow = simulate(workload, cfg, f, skip_decode_runs=False)
    np.testing.assert_array_equal(fast.finish_s, slow.finish_s)
    np.testing.assert_array_equal(fast.first_token_s, slow.first_token_s)
    vectorised = simulate(workload, cfg, StepsOnly())
    np.testing.assert_array_equal(fast.finish_s, vectorised.finish_s)
    np.testing.assert_array_equal(fast.step_duration_s, vectorised.step_duration_s)


def test_a_decode_run_costs_each_step_as_a_single_step(model: StepTimeModel) -> None:
    f = steptime_adapter(model)
    assert isinstance(f, FastStepTimeAdapter)
    for batch in (1, 7, 64, 300):
        contexts = batch * np.arange(1, 4000, 37, dtype=np.int64)
        contexts[0] = 0  # below the batch: costed as one token per sequence
        run = f.decode_run_s(batch, contexts)
        one_by_one = [f.single_step_s(0, 0.0, batch, int(c), batch) for c in contexts]
        np.testing.assert_array_equal(run, np.array(one_by_one))


@pytest.mark.parametrize(
    "name",
    ["openai/gpt-oss-120b", "Qwen/Qwen3-Next-80B-A3B-Thinking"],
    ids=["sliding-window", "linear-attention"],
)
def test_a_decode_run_of_other_layer_kinds_costs_each_step_as_a_single_step(name: str) -> None:
    arch = parse_architecture(
        json.loads(
            (ROOT / "servesize" / "data" / "models" / f"{name.replace('/', '--')}.json").read_text()
        ),
        name=name,
    )
    contexts = 16 * np.array([1, 100, 128, 129, 5000, 20000], dtype=np.int64)
    for ranks in (1, 2):
        # Attention data parallelism splits the batch and its context over the ranks.
        model = build_step_model(
            arch, H100, engine="vllm", data_parallel_size=ranks, expert_parallel_size=ranks
        )
        f = steptime_adapter(model)
        assert isinstance(f, FastStepTimeAdapter)
        run = f.decode_run_s(16, contexts)
        np.testing.assert_array_equal(
            run, np.array([f.single_step_s(0, 0.0, 16, int(c), 16) for c in contexts])
        )
    assert isinstance(f, FastStepTimeAdapter)
    with pytest.raises(ValueError, match="finite"):
        f.decode_run_s(16, np.array([-1]))
    with pytest.raises(ValueError, match="finite"):
        f.decode_run_s(-1, np.array([], dtype=np.int64))
