"""The fast step-time path: the exact model's numbers, step by step, at a fraction of the cost.

The fast path re-evaluates :meth:`StepTimeModel.step_time` (tabulated token and sequence parts,
attention formulas in Python floats), so the reference here is the exact vectorised model
(itself tested against hand-computed rooflines and the measured tables in tests/core/steptime).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from servesize.calibration import load_measured_profile
from servesize.core.architecture import Architecture, parse_architecture
from servesize.core.hardware import datasheet_spec
from servesize.core.simulation import SchedulerConfig, simulate
from servesize.core.simulation.adapters import (
    MIN_STEP_S,
    FastStepTimeAdapter,
    StepTimeAdapter,
    steptime_adapter,
)
from servesize.core.steptime import StepTimeModel, StepWork, build_step_model
from servesize.core.steptime.fast import TABLE_LIMIT, FastStepTime, fast_step_time
from servesize.core.steptime.tables import MeasuredProfile
from servesize.core.traffic import (
    FixedLength,
    OpenLoopWorkload,
    UniformLength,
    open_loop_workload,
)

ROOT = Path(__file__).resolve().parents[3]
GPUS = json.loads((ROOT / "servesize" / "data" / "gpus.json").read_text())["gpus"]
H100 = datasheet_spec(next(g for g in GPUS if g["name"] == "H100 SXM"))
RTOL = 1e-12  # rounding only: a differently ordered sum, math.exp/log against numpy's


def _arch(stem: str) -> Architecture:
    card = json.loads((ROOT / "servesize" / "data" / "models" / f"{stem}.json").read_text())
    return parse_architecture(card, name=stem)


@pytest.fixture(scope="module")
def measured() -> MeasuredProfile:
    return load_measured_profile()


# Each deployment exercises a different branch of the model: roofline and measured attention
# (exact and transferred head layouts), sliding windows, MLA, linear attention, routed experts
# (tables and roofline), TP all-reduce tables, pipeline hand-offs, attention data parallelism,
# eager launches (no CUDA graphs) and TensorRT-LLM's decode-only graphs.
DEPLOYMENTS: dict[str, tuple[str, bool, dict[str, object]]] = {
    "llama8b-datasheet": ("meta-llama--Llama-3.1-8B", False, {}),
    "llama8b-measured": ("meta-llama--Llama-3.1-8B", True, {}),
    "llama70b-tp4-measured": ("meta-llama--Llama-3.1-70B", True, {"tensor_parallel_size": 4}),
    "llama70b-tp2-pp2-eager": (
        "meta-llama--Llama-3.1-70B",
        False,
        {"tensor_parallel_size": 2, "pipeline_parallel_size": 2, "cuda_graphs": False},
    ),
    "qwen3-8b-trtllm": ("Qwen--Qwen3-8B", True, {"engine": "trtllm"}),
    "gemma2-window": ("google--gemma-2-9b", True, {}),
    "gpt-oss-window-moe": ("openai--gpt-oss-20b", True, {}),
    "qwen3-next-linear": ("Qwen--Qwen3-Next-80B-A3B-Thinking", True, {"tensor_parallel_size": 4}),
    "qwen3-moe-measured": ("Qwen--Qwen3-30B-A3B", True, {}),
    "deepseek-mla-dp-ep": (
        "deepseek-ai--DeepSeek-V3",
        True,
        {"tensor_parallel_size": 1, "data_parallel_size": 8, "expert_parallel_size": 8},
    ),
}


@pytest.fixture(scope="module", params=sorted(DEPLOYMENTS))
def model(request: pytest.FixtureRequest, measured: MeasuredProfile) -> StepTimeModel:
    stem, with_tables, kwargs = DEPLOYMENTS[request.param]
    return build_step_model(
        _arch(stem),
        H100,
        measured=measured if with_tables else None,
        **kwargs,  # type: ignore[arg-type]
    )


def random_steps(n: int, seed: int) -> tuple[np.ndarray, ...]:
    """Mixed, chunked (several chunks with cached context), prefill-only and decode-only steps
    with the simulator's feature definitions, over the range an engine produces."""
    rng = np.random.default_rng(seed)
    chunks = rng.integers(1, 5, n)
    chunk = rng.integers(1, 4096, n)
    chunk[::3] = 0
    cached = rng.integers(0, 12_000, n)
    cached[::5] = 0
    prefill = chunks * chunk
    attention = np.where(chunk > 0, chunks * chunk * (cached + chunk / 2.0), 0.0)
    decodes = rng.integers(0, 1025, n)
    decodes[1::7] = 0
    decodes[chunk == 0] = np.maximum(decodes[chunk == 0], 1)
    context = decodes * rng.integers(1, 20_000, n)
    seqs = decodes + np.where(chunk > 0, chunks, 0)
    return prefill, attention, decodes, context, seqs


def edge_steps(model: StepTimeModel) -> tuple[np.ndarray, ...]:
    """Hand-picked steps: 1 sequence, 1 token, max_num_seqs, table grid points and beyond."""
    rows: list[tuple[float, float, int, int, int]] = [
        (0, 0.0, 1, 1, 1),  # one decode attending to itself only
        (0, 0.0, 1, 131_072, 1),  # one decode, long context
        (0, 0.0, 1024, 1024 * 4096, 1024),  # max_num_seqs decodes
        (0, 0.0, 1024, 1024, 1024),  # ... each with a context of one token
        (1, 0.5, 0, 0, 1),  # one prompt token
        (8192, 8192 * 4096.0, 0, 0, 1),  # pure prefill, one chunk of the whole budget
        (2048, 2048 * (6144 + 1024.0), 0, 0, 1),  # chunked prefill after 6144 cached tokens
        (3 * 100, 3 * 100 * (50 + 50.0), 2, 40, 5),  # three equal chunks + two decodes
        (512, 512 * 256.0, 255, 255 * 3000, 256),  # mixed step
        (0, 0.0, 0, 0, 0),  # empty step
    ]
    lookup = model.decode_lookups[0] if model.decode_lookups else None
    if lookup is not None:
        dp = model.inventory.data_parallel_size
        for batch in lookup.table.batch[[0, -1]].tolist():
            for length in lookup.table.length[[0, len(lookup.table.length) // 2, -1]].tolist():
                # exactly on the table's grid (per data-parallel rank)
                b = int(batch) * dp
                rows.append((0, 0.0, b, int(b * length), b))
    columns = list(zip(*rows, strict=True))
    return tuple(np.array(c) for c in columns)


def test_fast_path_equals_the_exact_model_on_random_steps(model: StepTimeModel) -> None:
    steps = random_steps(400, seed=11)
    fast = steptime_adapter(model)(*steps)
    exact = steptime_adapter(model, exact=True)(*steps)
    np.testing.assert_allclose(fast, exact, rtol=RTOL, atol=0.0)


def test_fast_path_equals_the_exact_model_on_edge_cases(model: StepTimeModel) -> None:
    steps = edge_steps(model)
    fast = steptime_adapter(model)(*steps)
    exact = steptime_adapter(model, exact=True)(*steps)
    np.testing.assert_allclose(fast, exact, rtol=RTOL, atol=0.0)
    assert fast[9] == MIN_STEP_S  # the empty step


def test_fast_path_equals_the_step_time_model_itself() -> None:
    # Independent of the adapter's feature mapping: StepWork fields straight into both paths.
    model = build_step_model(_arch("meta-llama--Llama-3.1-8B"), H100, measured=None)
    work = StepWork.mixed(
        prefill_tokens=[1, 300, 2048],
        prefill_sequences=[1, 3, 2],
        prefill_cached_tokens=[0, 50, 8000],
        decode_sequences=[0, 17, 200],
        decode_context_tokens=[0, 900, 3000],
    )
    want = model.step_time(work).total_s
    fast = fast_step_time(model)
    fields = zip(
        work.prefill_tokens.tolist(),
        work.prefill_sequences.tolist(),
        work.prefill_cached_tokens.tolist(),
        work.prefill_attention_pairs.tolist(),
        work.decode_sequences.tolist(),
        work.decode_context_tokens.tolist(),
        strict=True,
    )
    got = [fast.step_s(*f) for f in fields]
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=0.0)


def test_counts_off_the_table_take_the_vectorised_path(model: StepTimeModel) -> None:
    # Beyond TABLE_LIMIT tokens, and fractional counts (a caller's averages), are not tabulated.
    steps = (
        np.array([TABLE_LIMIT + 3.0, 100.5, 0.0]),
        np.array([(TABLE_LIMIT + 3.0) * 10.0, 100.5 * 60.0, 0.0]),
        np.array([0.0, 2.0, 3.5]),
        np.array([0.0, 80.0, 700.0]),
        np.array([1.0, 3.0, 3.5]),
    )
    fast = steptime_adapter(model)(*steps)
    exact = steptime_adapter(model, exact=True)(*steps)
    np.testing.assert_allclose(fast, exact, rtol=RTOL, atol=0.0)


def test_a_step_does_not_depend_on_the_other_steps_of_a_call(model: StepTimeModel) -> None:
    f = FastStepTimeAdapter(model)
    steps = random_steps(150, seed=3)
    together = f(*steps)
    alone = np.concatenate([f(*(a[i : i + 1] for a in steps)) for i in range(150)])
    np.testing.assert_array_equal(together, alone)
    order = np.random.default_rng(1).permutation(150)
    np.testing.assert_array_equal(f(*(a[order] for a in steps)), together[order])
    scalar = [f.single_step_s(*(a[i].item() for a in steps)) for i in range(150)]
    np.testing.assert_array_equal(np.array(scalar), together)


def test_tables_do_not_depend_on_the_order_they_are_built_in() -> None:
    model = build_step_model(_arch("meta-llama--Llama-3.1-8B"), H100, measured=None)
    counts = [5.0, 9000.0, 40_000.0, 4095.0, 4096.0]
    up, down = FastStepTime(model), FastStepTime(model)
    forward = [up.step_s(c, 1.0, 0.0, c * (c + 1) / 2, 0.0, 0.0) for c in counts]
    backward = [down.step_s(c, 1.0, 0.0, c * (c + 1) / 2, 0.0, 0.0) for c in counts[::-1]]
    assert forward == backward[::-1]


def test_one_evaluator_per_model_and_the_exact_adapter_on_request() -> None:
    model = build_step_model(_arch("meta-llama--Llama-3.1-8B"), H100, measured=None)
    assert fast_step_time(model) is fast_step_time(model)
    assert isinstance(steptime_adapter(model), FastStepTimeAdapter)
    assert isinstance(steptime_adapter(model, exact=True), StepTimeAdapter)


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_invalid_features_are_rejected(bad: float) -> None:
    model = build_step_model(_arch("meta-llama--Llama-3.1-8B"), H100, measured=None)
    f = steptime_adapter(model)
    for position in range(5):
        features = [np.array([1.0]), np.array([0.5]), np.array([1.0]), np.array([5.0])]
        features.append(np.array([2.0]))
        features[position] = np.array([bad])
        with pytest.raises(ValueError, match="finite and >= 0"):
            f(*features)


class _VectorOnly:
    """The fast adapter without its scalar entry point: the engine must call it with arrays."""

    def __init__(self, inner: FastStepTimeAdapter) -> None:
        self.inner = inner

    def __call__(
        self,
        prefill_tokens: np.ndarray,
        prefill_attention_work: np.ndarray,
        decode_seqs: np.ndarray,
        decode_context_tokens: np.ndarray,
        num_seqs: np.ndarray,
        /,
    ) -> np.ndarray:
        return self.inner(
            prefill_tokens, prefill_attention_work, decode_seqs, decode_context_tokens, num_seqs
        )


def _simulation_inputs() -> tuple[StepTimeModel, SchedulerConfig]:
    model = build_step_model(
        _arch("meta-llama--Llama-3.1-8B"), H100, measured=load_measured_profile()
    )
    cfg = SchedulerConfig(
        max_num_batched_tokens=1024, max_num_seqs=32, block_size_tokens=16, num_kv_blocks=2000
    )
    return model, cfg


def _workload(seed: int) -> OpenLoopWorkload:
    return open_loop_workload(
        num_requests=300,
        rate_per_s=25.0,
        input_tokens=UniformLength(low_tokens=50, high_tokens=1500),
        output_tokens=FixedLength(60),
        rng=np.random.default_rng(seed),
    )


def test_simulation_with_the_fast_path_matches_the_exact_model() -> None:
    model, cfg = _simulation_inputs()
    fast = simulate(_workload(5), cfg, steptime_adapter(model))
    exact = simulate(_workload(5), cfg, steptime_adapter(model, exact=True))
    np.testing.assert_array_equal(fast.status, exact.status)
    np.testing.assert_array_equal(fast.num_preemptions, exact.num_preemptions)
    # Step times agree to ~1e-15; the schedule is the same, so times agree to rounding.
    np.testing.assert_allclose(fast.first_token_s, exact.first_token_s, rtol=1e-9)
    np.testing.assert_allclose(fast.finish_s, exact.finish_s, rtol=1e-9)
    assert fast.step_start_s.size == exact.step_start_s.size


def test_single_step_entry_point_changes_nothing() -> None:
    model, cfg = _simulation_inputs()
    adapter = steptime_adapter(model)
    assert isinstance(adapter, FastStepTimeAdapter)
    scalar = simulate(_workload(9), cfg, adapter)
    vector = simulate(_workload(9), cfg, _VectorOnly(adapter))
    np.testing.assert_array_equal(scalar.finish_s, vector.finish_s)
    np.testing.assert_array_equal(scalar.first_token_s, vector.first_token_s)
    np.testing.assert_array_equal(scalar.step_duration_s, vector.step_duration_s)
