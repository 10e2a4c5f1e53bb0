"""Invariants of the step-time model, checked with hypothesis over random steps."""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from servesize.core.architecture import Architecture, parse_architecture
from servesize.core.hardware import HardwareSpec, Interconnect
from servesize.core.steptime import StepTimeModel, StepWork, build_step_model

GPU = HardwareSpec(
    id="gpu",
    vendor="test",
    name="Test GPU",
    memory_bytes=80 * 2**30,
    memory_bandwidth_bytes_per_s=3_000_000_000_000,
    peak_tflop_per_s={"bf16": 1000.0, "fp8": 2000.0},
    interconnect=Interconnect(kind="nvlink", bandwidth_bytes_per_s=400_000_000_000),
)
DENSE: Architecture = parse_architecture(
    {
        "model_type": "llama",
        "hidden_size": 2048,
        "num_hidden_layers": 8,
        "head_dim": 128,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "intermediate_size": 8192,
        "vocab_size": 32000,
        "torch_dtype": "bfloat16",
    },
    name="dense",
)
MOE: Architecture = parse_architecture(
    {
        "model_type": "qwen3_moe",
        "hidden_size": 1024,
        "num_hidden_layers": 4,
        "head_dim": 64,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "intermediate_size": 3072,
        "moe_intermediate_size": 384,
        "num_experts": 64,
        "num_experts_per_tok": 4,
        "vocab_size": 32000,
        "torch_dtype": "bfloat16",
    },
    name="moe",
)
MODELS: dict[str, StepTimeModel] = {
    "dense": build_step_model(DENSE, GPU, engine="vllm"),
    "moe": build_step_model(MOE, GPU, engine="trtllm"),
}
ROOFLINE: dict[str, StepTimeModel] = {
    "dense": build_step_model(DENSE, GPU, engine="vllm", calibrated=False),
    "moe": build_step_model(MOE, GPU, engine="trtllm", calibrated=False),
}

counts = st.integers(min_value=0, max_value=512)
lengths = st.integers(min_value=1, max_value=32_768)
models = st.sampled_from(sorted(MODELS))


def _work(prefill: int, offset: int, decodes: int, context: int) -> StepWork:
    return StepWork.mixed(
        prefill_tokens=prefill,
        prefill_sequences=1 if prefill else 0,
        prefill_cached_tokens=offset if prefill else 0,
        decode_sequences=decodes,
        decode_context_tokens=context,
    )


@settings(max_examples=60, deadline=None)
@given(models, counts, lengths, counts, lengths, st.integers(min_value=1, max_value=256))
def test_more_tokens_never_take_less_time(
    name: str, prefill: int, offset: int, decodes: int, context: int, extra: int
) -> None:
    model = MODELS[name]
    base = model.step_time(_work(prefill, offset, decodes, context)).total_s[0]
    more_prefill = model.step_time(_work(prefill + extra, offset, decodes, context)).total_s[0]
    more_decodes = model.step_time(_work(prefill, offset, decodes + extra, context)).total_s[0]
    longer = model.step_time(_work(prefill, offset, decodes, context + extra)).total_s[0]
    assert more_prefill >= base * (1 - 1e-12)
    assert more_decodes >= base * (1 - 1e-12)
    assert longer >= base * (1 - 1e-12)


@settings(max_examples=40, deadline=None)
@given(models, st.integers(min_value=1, max_value=64), lengths)
def test_doubling_bandwidth_never_slows_a_memory_bound_step(
    name: str, decodes: int, context: int
) -> None:
    model = ROOFLINE[name]
    work = StepWork.decode(decodes, context)
    step = model.step_time(work)
    faster_rates = dataclasses.replace(
        model.rates, memory_bandwidth_bytes_per_s=2 * model.rates.memory_bandwidth_bytes_per_s
    )
    faster = dataclasses.replace(model, rates=faster_rates).step_time(work)
    assert step.bound[0] == "memory"
    assert faster.total_s[0] <= step.total_s[0]
    assert faster.memory_s[0] < step.memory_s[0]


@settings(max_examples=40, deadline=None)
@given(counts, lengths, st.integers(min_value=1, max_value=256))
def test_tensor_parallelism_splits_work_and_adds_communication(
    prefill: int, context: int, decodes: int
) -> None:
    work = _work(prefill, 0, decodes, context)
    one = build_step_model(DENSE, GPU, engine="vllm").step_time(work)
    two = build_step_model(DENSE, GPU, engine="vllm", tensor_parallel_size=2).step_time(work)
    assert two.flops[0] < one.flops[0]
    assert two.bytes[0] < one.bytes[0]
    assert one.communication_s[0] == 0.0
    assert two.communication_s[0] > 0.0


@settings(max_examples=25, deadline=None)
@given(
    models,
    st.lists(st.tuples(counts, lengths, counts, lengths), min_size=1, max_size=12),
)
def test_vectorised_path_equals_the_scalar_loop(
    name: str, steps: list[tuple[int, int, int, int]]
) -> None:
    model = MODELS[name]
    parts = [_work(*s) for s in steps]
    vector = model.step_time(StepWork.concatenate(parts))
    scalar = np.array([model.step_time(p).total_s[0] for p in parts])
    np.testing.assert_allclose(vector.total_s, scalar, rtol=1e-12)


def test_an_empty_step_takes_no_time() -> None:
    for model in MODELS.values():
        assert model.step_time(StepWork.decode(0, 0)).total_s[0] == 0.0
