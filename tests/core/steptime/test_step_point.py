"""The one-point paths: fractional step counts in floats and ``closed_loop`` of a single point.

The reference is the vectorised model (``StepTimeModel.step_time``, ``closed_loop`` on arrays),
itself tested against hand-computed rooflines, measured tables and worked closed-loop examples
elsewhere in tests/core/steptime; the float paths reorder sums and use ``math.log``/``exp``, so
they agree to rounding only.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from servesize.calibration import load_measured_profile
from servesize.core.architecture import Architecture, parse_architecture
from servesize.core.hardware import datasheet_spec
from servesize.core.steptime import StepTimeModel, StepWork, build_step_model, closed_loop
from servesize.core.steptime.fast import fast_step_time
from servesize.core.steptime.scalar import ScalarCounts
from servesize.core.steptime.tables import MeasuredProfile

ROOT = Path(__file__).resolve().parents[3]
GPUS = json.loads((ROOT / "servesize" / "data" / "gpus.json").read_text())["gpus"]
H100 = datasheet_spec(next(g for g in GPUS if g["name"] == "H100 SXM"))
RTOL = 1e-12

DEPLOYMENTS: dict[str, tuple[str, bool, dict[str, object]]] = {
    "llama8b-datasheet": ("meta-llama--Llama-3.1-8B", False, {}),
    "llama8b-measured": ("meta-llama--Llama-3.1-8B", True, {}),
    "llama8b-eager": ("meta-llama--Llama-3.1-8B", True, {"cuda_graphs": False}),
    "qwen3-8b-trtllm": ("Qwen--Qwen3-8B", True, {"engine": "trtllm"}),
    "gemma2-window": ("google--gemma-2-9b", True, {}),
    "llama70b-tp4-measured": ("meta-llama--Llama-3.1-70B", True, {"tensor_parallel_size": 4}),
    "qwen3-moe-measured": ("Qwen--Qwen3-30B-A3B", True, {}),
}


def _arch(stem: str) -> Architecture:
    card = json.loads((ROOT / "servesize" / "data" / "models" / f"{stem}.json").read_text())
    return parse_architecture(card, name=stem)


@pytest.fixture(scope="module")
def measured() -> MeasuredProfile:
    return load_measured_profile()


@pytest.fixture(scope="module", params=sorted(DEPLOYMENTS))
def model(request: pytest.FixtureRequest, measured: MeasuredProfile) -> StepTimeModel:
    stem, with_tables, kwargs = DEPLOYMENTS[request.param]
    return build_step_model(
        _arch(stem),
        H100,
        measured=measured if with_tables else None,
        **kwargs,  # type: ignore[arg-type]
    )


def test_scalar_counts_cover_dense_models_without_collectives(measured: MeasuredProfile) -> None:
    dense = build_step_model(_arch("meta-llama--Llama-3.1-8B"), H100, measured=measured)
    tp2 = build_step_model(_arch("meta-llama--Llama-3.1-8B"), H100, tensor_parallel_size=2)
    moe = build_step_model(_arch("Qwen--Qwen3-30B-A3B"), H100)
    assert ScalarCounts.build(dense, "tokens") is not None
    assert ScalarCounts.build(tp2, "tokens") is None  # all-reduces: the vectorised term
    assert ScalarCounts.build(moe, "tokens_prefill") is None  # routed experts: likewise
    # the output head has no collectives or experts: always in floats
    assert ScalarCounts.build(moe, "sequences") is not None


def test_fractional_steps_equal_the_vectorised_model(model: StepTimeModel) -> None:
    """Mean-field steps: fractional decodes, chunks and tokens (as the fixed point makes)."""
    rng = np.random.default_rng(5)
    n = 200
    decodes = rng.uniform(0.0, 600.0, n)
    decodes[::4] = 0.0
    chunks = rng.uniform(0.5, 4.0, n)
    chunk = rng.uniform(0.0, 3000.0, n)
    chunk[1::5] = 0.0
    decodes[chunk == 0] = np.maximum(decodes[chunk == 0], 0.25)
    cached = rng.uniform(0.0, 6000.0, n)
    work = StepWork.mixed(
        prefill_tokens=chunk,
        prefill_sequences=chunks,
        prefill_cached_tokens=cached,
        decode_sequences=decodes,
        decode_context_tokens=rng.uniform(1.0, 9000.0, n),
    )
    exact = model.step_time(work).total_s
    fast = fast_step_time(model)
    got = [
        fast.step_s(
            float(work.prefill_tokens[i]),
            float(work.prefill_sequences[i]),
            float(work.prefill_cached_tokens[i]),
            float(work.prefill_attention_pairs[i]),
            float(work.decode_sequences[i]),
            float(work.decode_context_tokens[i]),
        )
        for i in range(n)
    ]
    np.testing.assert_allclose(got, exact, rtol=RTOL, atol=0.0)


@pytest.mark.parametrize(
    ("clients", "prompt", "output"),
    [(1, 1024, 128), (32, 1024, 128), (48, 3000, 64), (600, 2000, 500), (4, 9000, 1)],
)
def test_one_point_equals_the_array_path(
    model: StepTimeModel, clients: int, prompt: int, output: int
) -> None:
    """``closed_loop`` of one point (floats) against the same point twice (arrays), under a KV
    cache that caps residency at 400 sequences of 2,250 tokens (so 600 clients take the
    mean-field branch with an admission wait, the others the lock-step loop)."""
    kv = 900_000
    if model.engine.name == "trtllm":
        # TensorRT-LLM without chunked prefill runs a prompt whole: keep it within the budget.
        prompt = min(prompt, model.engine.max_num_batched_tokens)
    one = closed_loop(
        model, concurrency=clients, input_tokens=prompt, output_tokens=output, kv_capacity_tokens=kv
    )
    pair = closed_loop(
        model,
        concurrency=np.full(2, float(clients)),
        input_tokens=prompt,
        output_tokens=output,
        kv_capacity_tokens=kv,
    )
    for name in one.__dataclass_fields__:
        a, b = getattr(one, name), getattr(pair, name)
        if name == "sources":
            assert a == b
        elif a.dtype.kind == "U":
            assert a.tolist() == b.tolist()[:1], name
        else:
            assert a.shape == (1,), name
            np.testing.assert_allclose(a, b[:1], rtol=RTOL, atol=0.0, err_msg=name)
