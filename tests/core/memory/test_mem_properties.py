"""Properties that hold for any input: linearity, monotonicity, ledgers that add up."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from servesize.core.architecture import Architecture, parse_architecture
from servesize.core.hardware import HardwareSpec, Interconnect
from servesize.core.memory import (
    DEFAULT_CONSTANTS,
    GIB,
    USAGE_CATEGORIES,
    Deployment,
    InvalidDeploymentError,
    kv_budget,
    plan_memory,
    resolve_deployment,
    weight_ledger,
)

MODELS = Path(__file__).resolve().parents[3] / "servesize" / "data" / "models"
H200 = HardwareSpec(
    id="h200",
    vendor="NVIDIA",
    name="H200 SXM",
    memory_bytes=141 * GIB,
    memory_bandwidth_bytes_per_s=4_800_000_000_000,
    interconnect=Interconnect(kind="nvlink", bandwidth_bytes_per_s=450_000_000_000),
)
CATALOGUE = sorted(p.name for p in MODELS.glob("*.json"))


@cache
def _arch(filename: str) -> Architecture:
    config: dict[str, Any] = json.loads((MODELS / filename).read_text())
    return parse_architecture(config, name=filename)


@settings(max_examples=60, deadline=None)
@given(
    layers=st.integers(1, 128),
    heads=st.integers(1, 64),
    dim=st.sampled_from([64, 80, 96, 128, 256]),
    element=st.sampled_from([1, 2, 4]),
    batch=st.integers(1, 512),
    tokens=st.integers(1, 200_000),
)
def test_kv_bytes_linear_in_batch_and_tokens(
    layers: int, heads: int, dim: int, element: int, batch: int, tokens: int
) -> None:
    def kv(b: int, t: int) -> int:
        result = kv_budget(
            num_layers=layers,
            num_kv_heads=heads,
            head_dim=dim,
            bytes_per_element=element,
            concurrency=b,
            tokens_per_sequence=t,
        )
        assert result.kv_bytes is not None
        return result.kv_bytes

    base = kv(batch, tokens)
    assert base == 2 * batch * tokens * layers * heads * dim * element
    assert kv(2 * batch, tokens) == 2 * base
    assert kv(batch, 3 * tokens) == 3 * base


@settings(max_examples=40, deadline=None)
@given(filename=st.sampled_from(CATALOGUE), tp_exp=st.integers(0, 2))
def test_more_tp_never_increases_weights_per_gpu(filename: str, tp_exp: int) -> None:
    arch = _arch(filename)
    smaller, larger = 2**tp_exp, 2 ** (tp_exp + 1)
    totals = []
    for tp in (smaller, larger):
        try:
            res = resolve_deployment(
                arch, H200, Deployment(tensor_parallel_size=tp, max_model_len=1024)
            )
        except InvalidDeploymentError:
            return
        ledger = weight_ledger(
            arch, res, DEFAULT_CONSTANTS, range(len(arch.layers)), first=True, last=True
        )
        totals.append(ledger.total_bytes)
    assert totals[1] <= totals[0]


@settings(max_examples=25, deadline=None)
@given(
    filename=st.sampled_from(CATALOGUE),
    engine=st.sampled_from(["vllm", "sglang", "trtllm"]),
    version=st.sampled_from(["0.10.1", "0.21.0"]),
    fraction=st.floats(0.5, 0.97),
    pp=st.sampled_from([1, 2]),
    max_len=st.integers(16, 8192),
)
def test_ledger_parts_sum_to_totals(
    filename: str, engine: str, version: str, fraction: float, pp: int, max_len: int
) -> None:
    deployment = Deployment(
        engine=engine,
        engine_version=version,
        gpu_memory_utilization=fraction,
        pipeline_parallel_size=pp,
        max_model_len=max_len,
    )
    try:
        plan = plan_memory(_arch(filename), H200, deployment)
    except InvalidDeploymentError:
        return
    usage = [i for i in plan.line_items if i.category in USAGE_CATEGORIES]
    assert sum(i.bytes_per_gpu for i in usage) == plan.total_bytes_per_gpu
    weights = sum(i.bytes_per_gpu for i in plan.line_items if i.category == "weights")
    assert weights == plan.weights_bytes_per_gpu
    assert plan.kv_cache_bytes_per_gpu <= max(plan.kv_available_bytes_per_gpu, 0)
    assert plan.kv_cache_bytes_per_gpu == plan.kv_blocks * plan.layout.block_bytes
    if engine == "vllm":
        graphs = plan.cuda_graph_bytes_per_gpu if version == "0.21.0" else 0
        assert plan.budget_bytes == (
            plan.weights_bytes_per_gpu
            + plan.activation_bytes_per_gpu
            + plan.non_torch_bytes_per_gpu
            + graphs
            + plan.kv_available_bytes_per_gpu
        )
    if plan.fits:
        assert plan.kv_available_bytes_per_gpu >= plan.request_kv_bytes
