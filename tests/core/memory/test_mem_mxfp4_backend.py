"""vLLM's MXFP4 expert backends: Marlin's padded allocation, the default per GPU, refusals.

Hand-worked from ``Mxfp4MoEMethod.create_weights`` (vllm/model_executor/layers/quantization/
mxfp4.py, read in the v0.11.0 wheel): under Marlin the local expert width becomes
``round_up(I, 128)`` and the hidden size ``round_up(H, 256)``; ``w13`` is ``2I x H/2`` uint8
(two E2M1 values a byte) with ``2I x H/32`` uint8 scales and ``2I`` bf16 biases, ``w2`` is
``H x I/2`` with ``H x I/32`` scales and ``H`` biases; ``prepare_moe_fp4_layer_for_marlin``
repacks them at the same sizes (scales back to ``float8_e8m0fnu``, biases in bf16).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from servesize.core.architecture import Architecture, parse_architecture
from servesize.core.hardware import HardwareSpec
from servesize.core.memory import GIB, Deployment, InvalidDeploymentError, plan_memory

MODELS = Path(__file__).resolve().parents[3] / "servesize" / "data" / "models"
PADDING = "weights: MXFP4 Marlin padding (vLLM)"
OVERHEAD = "weights: MXFP4 load overhead (vLLM)"


def _gpu(name: str, memory_gib: int, peaks: dict[str, float | None]) -> HardwareSpec:
    return HardwareSpec(
        id=name.lower().replace(" ", "-"),
        vendor="NVIDIA",
        name=name,
        memory_bytes=memory_gib * GIB,
        memory_bandwidth_bytes_per_s=2_000_000_000_000,
        peak_tflop_per_s=peaks,
    )


H100 = _gpu("H100 SXM", 80, {"bf16": 989.0, "fp8": 1979.0})
A100 = _gpu("A100 SXM 80GB", 80, {"bf16": 312.0, "fp8": None})
BARE = _gpu("H100 PCIe", 80, {})


def _arch(filename: str) -> Architecture:
    config: dict[str, Any] = json.loads((MODELS / filename).read_text())
    return parse_architecture(config, name=filename)


GPT_OSS_120B = _arch("openai--gpt-oss-120b.json")


def _items(hardware: HardwareSpec, **fields: Any) -> dict[str, int]:
    plan = plan_memory(GPT_OSS_120B, hardware, Deployment(max_model_len=4096, **fields))
    return {item.name: item.bytes_per_gpu for item in plan.line_items}


def test_marlin_padding_of_gpt_oss_120b_at_tp1() -> None:
    # I = H = 2880 -> 2944 and 3072. Padded expert:
    #   w13 2·2944·1536 = 9,043,968 + scales 2·2944·96 = 565,248 + bias 2·2944·2 = 11,776
    #   w2  3072·1472   = 4,521,984 + scales 3072·92    = 282,624 + bias 3072·2   =  6,144
    #   = 14,431,744 B
    # checkpoint expert: w13 8,294,400 + 518,400 + 11,520; w2 4,147,200 + 259,200 + 5,760
    #   = 13,236,480 B
    # 36 layers · 128 experts · (14,431,744 - 13,236,480 = 1,195,264 B) = 5,507,776,512 B
    items = _items(H100, mxfp4_backend="marlin")
    assert items[PADDING] == 5_507_776_512
    assert OVERHEAD not in items


def test_marlin_padding_of_gpt_oss_120b_at_tp2() -> None:
    # I_local = 1440 -> 1536, H 2880 -> 3072. Padded: w13 2·1536·1536 = 4,718,592 +
    # 2·1536·96 = 294,912 + 6,144; w2 3072·768 = 2,359,296 + 3072·48 = 147,456 + 6,144
    # = 7,532,544 B. Checkpoint shard: w13 2·1440·1440 = 4,147,200 + 2·1440·90 = 259,200 +
    # 5,760; w2 2880·720 = 2,073,600 + 2880·45 = 129,600 + 5,760 = 6,621,120 B.
    # 4608 layer-experts · 911,424 B = 4,199,841,792 B
    items = _items(H100, mxfp4_backend="marlin", tensor_parallel_size=2)
    assert items[PADDING] == 4_199_841_792


def test_marlin_weights_match_the_logged_model_loading() -> None:
    # vllm-project/vllm#23278 (v0.10.1, H100 PCIe, Marlin named in the log):
    # "Model loading took 65.9651 GiB"; nothing of this run was fitted.
    plan = plan_memory(
        GPT_OSS_120B,
        _gpu("H100 PCIe", 80, {"bf16": 756.0, "fp8": 1513.0}),
        Deployment(engine_version="0.10.1", mxfp4_backend="marlin"),
    )
    assert plan.weights_bytes_per_gpu / GIB == pytest.approx(65.9651, rel=0.005)
    # The log's first memory lines: the Marlin warning, then the weights.
    assert plan.engine_log[0].startswith("Your GPU does not have native support for FP4")
    assert plan.engine_log[1].startswith("Model loading took 65.9")
    triton = plan_memory(GPT_OSS_120B, H100, Deployment(engine_version="0.10.1"))
    assert triton.engine_log[0].startswith("Model loading took")


def test_triton_keeps_the_fitted_overhead() -> None:
    items = _items(H100, mxfp4_backend="triton")
    assert PADDING not in items
    assert items[OVERHEAD] > 0


@pytest.mark.parametrize(
    ("hardware", "expected"),
    [(A100, "marlin"), (H100, "triton"), (BARE, "triton")],
    ids=["no-fp8-tensor-cores", "hopper", "peaks-unknown"],
)
def test_default_backend_per_gpu(hardware: HardwareSpec, expected: str) -> None:
    plan = plan_memory(GPT_OSS_120B, hardware, Deployment(max_model_len=4096))
    assert plan.deployment.mxfp4_backend == expected
    applied = {d.field: d.value for d in plan.defaults_applied}
    assert applied["mxfp4_backend"] == expected
    names = {item.name for item in plan.line_items}
    assert (PADDING in names) is (expected == "marlin")


def test_models_without_mxfp4_have_no_backend() -> None:
    plan = plan_memory(_arch("meta-llama--Llama-3.1-8B.json"), A100, Deployment())
    assert plan.deployment.mxfp4_backend is None
    assert "mxfp4_backend" not in {d.field for d in plan.defaults_applied}


@pytest.mark.parametrize(
    ("model", "fields"),
    [
        ("openai--gpt-oss-120b.json", {"mxfp4_backend": "cutlass"}),
        ("openai--gpt-oss-120b.json", {"mxfp4_backend": "marlin", "engine": "sglang"}),
        ("meta-llama--Llama-3.1-8B.json", {"mxfp4_backend": "marlin"}),
    ],
    ids=["unknown-backend", "not-vllm", "not-mxfp4"],
)
def test_refusals_name_the_field(model: str, fields: dict[str, Any]) -> None:
    with pytest.raises(InvalidDeploymentError) as caught:
        plan_memory(_arch(model), H100, Deployment(max_model_len=4096, **fields))
    assert "/deployment/mxfp4_backend" in {issue.field for issue in caught.value.issues}
