"""``quantization_config`` of real checkpoint formats, normalised to a QuantizationSpec.

The dicts below follow the layouts written by the quantizers (DeepSeek FP8 release,
llm-compressor, AutoAWQ, AutoGPTQ/GPTQModel, OpenAI gpt-oss, NVIDIA ModelOpt) and read by
vLLM's quantization backends.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from servesize.core.architecture import QuantizationSpec, parse_architecture
from servesize.core.errors import InvalidArchitectureError

MODELS = Path(__file__).resolve().parents[3] / "servesize" / "data" / "models"

BASE: dict[str, Any] = json.loads((MODELS / "meta-llama--Llama-3.1-8B.json").read_text())


def _spec(quantization_config: Any) -> QuantizationSpec:
    arch = parse_architecture({**BASE, "quantization_config": quantization_config}, name="q")
    assert arch.quantization is not None
    return arch.quantization


def test_fp8_block_deepseek_v3() -> None:
    config = json.loads((MODELS / "deepseek-ai--DeepSeek-V3.json").read_text())
    spec = parse_architecture(config, name="DeepSeek-V3").quantization
    assert spec == QuantizationSpec(
        method="fp8",
        weight_dtype="fp8_e4m3",
        weight_bits=8,
        granularity="block",
        block_shape=(128, 128),
        symmetric=True,
        activation_dtype="fp8_e4m3",
        activation_scheme="dynamic",
    )


def test_fp8_per_tensor_with_ignored_layers() -> None:
    spec = _spec(
        {"quant_method": "fp8", "activation_scheme": "static", "ignored_layers": ["lm_head"]}
    )
    assert (spec.granularity, spec.block_shape, spec.activation_scheme) == (
        "tensor",
        None,
        "static",
    )
    assert spec.unquantized_modules == ("lm_head",)


def test_mxfp4_gpt_oss() -> None:
    config = json.loads((MODELS / "openai--gpt-oss-120b.json").read_text())
    spec = parse_architecture(config, name="gpt-oss-120b").quantization
    assert spec is not None
    assert (spec.method, spec.weight_dtype, spec.group_size) == ("mxfp4", "mxfp4", 32)
    assert spec.unquantized_modules == (
        "model.layers.*.self_attn",
        "model.layers.*.mlp.router",
        "model.embed_tokens",
        "lm_head",
    )


def test_compressed_tensors_w8a8_int8() -> None:
    spec = _spec(
        {
            "quant_method": "compressed-tensors",
            "format": "int-quantized",
            "config_groups": {
                "group_0": {
                    "targets": ["Linear"],
                    "weights": {
                        "num_bits": 8,
                        "type": "int",
                        "strategy": "channel",
                        "symmetric": True,
                        "dynamic": False,
                    },
                    "input_activations": {
                        "num_bits": 8,
                        "type": "int",
                        "strategy": "token",
                        "symmetric": True,
                        "dynamic": True,
                    },
                }
            },
            "ignore": ["lm_head"],
        }
    )
    assert (spec.weight_dtype, spec.granularity, spec.activation_dtype) == (
        "int8",
        "channel",
        "int8",
    )
    assert spec.activation_scheme == "dynamic"
    assert spec.unquantized_modules == ("lm_head",)


def test_compressed_tensors_fp8_block_with_kv_scheme() -> None:
    spec = _spec(
        {
            "quant_method": "compressed-tensors",
            "format": "float-quantized",
            "config_groups": {
                "group_0": {
                    "targets": ["Linear"],
                    "weights": {
                        "num_bits": 8,
                        "type": "float",
                        "strategy": "block",
                        "block_structure": [128, 128],
                        "symmetric": True,
                    },
                    "input_activations": {"num_bits": 8, "type": "float", "dynamic": True},
                }
            },
            "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor"},
            "ignore": ["lm_head", "re:.*mlp.gate$"],
        }
    )
    assert spec.weight_dtype == "fp8_e4m3"
    assert spec.block_shape == (128, 128)
    assert spec.kv_cache_dtype == "fp8_e4m3"
    assert spec.format == "float-quantized"
    assert spec.unquantized_modules == ("lm_head", "re:.*mlp.gate$")


def test_compressed_tensors_nvfp4() -> None:
    spec = _spec(
        {
            "quant_method": "compressed-tensors",
            "format": "nvfp4-pack-quantized",
            "config_groups": {
                "group_0": {
                    "targets": ["Linear"],
                    "weights": {
                        "num_bits": 4,
                        "type": "float",
                        "strategy": "tensor_group",
                        "group_size": 16,
                        "symmetric": True,
                    },
                    "input_activations": {
                        "num_bits": 4,
                        "type": "float",
                        "group_size": 16,
                        "dynamic": "local",
                    },
                }
            },
            "ignore": ["lm_head"],
        }
    )
    assert (spec.weight_dtype, spec.group_size, spec.activation_dtype) == ("nvfp4", 16, "nvfp4")


def test_awq_int4_asymmetric_with_group_size() -> None:
    spec = _spec(
        {
            "quant_method": "awq",
            "bits": 4,
            "group_size": 128,
            "zero_point": True,
            "version": "gemm",
            "modules_to_not_convert": ["visual"],
        }
    )
    assert spec == QuantizationSpec(
        method="awq",
        weight_dtype="int4",
        weight_bits=4,
        granularity="group",
        group_size=128,
        symmetric=False,
        unquantized_modules=("visual",),
        format="gemm",
    )


def test_gptq_int4_symmetric_and_per_channel() -> None:
    spec = _spec(
        {
            "quant_method": "gptq",
            "bits": 4,
            "group_size": 128,
            "sym": True,
            "desc_act": False,
            "damp_percent": 0.01,
        }
    )
    assert (spec.weight_dtype, spec.group_size, spec.symmetric) == ("int4", 128, True)
    per_channel = _spec({"quant_method": "gptq", "bits": 8, "group_size": -1, "sym": False})
    assert (per_channel.granularity, per_channel.group_size, per_channel.symmetric) == (
        "channel",
        None,
        False,
    )


def test_modelopt_nvfp4() -> None:
    spec = _spec(
        {
            "quant_method": "modelopt",
            "quant_algo": "NVFP4",
            "group_size": 16,
            "kv_cache_quant_algo": "FP8",
            "exclude_modules": ["lm_head", "model.layers.0.mlp"],
        }
    )
    assert (spec.weight_dtype, spec.activation_dtype, spec.group_size) == ("nvfp4", "nvfp4", 16)
    assert spec.kv_cache_dtype == "fp8_e4m3"
    assert spec.unquantized_modules == ("lm_head", "model.layers.0.mlp")


def test_unrecognised_method_is_recorded_not_guessed() -> None:
    arch = parse_architecture(
        {**BASE, "quantization_config": {"quant_method": "hqq", "nbits": 4}}, name="q"
    )
    assert arch.quantization is not None
    assert arch.quantization.weight_dtype is None
    assert any("'hqq' is not recognised" in a for a in arch.assumptions)


@pytest.mark.parametrize(
    ("quantization_config", "field"),
    [
        ("fp8", "/quantization_config"),
        ({"bits": 4}, "/quantization_config/quant_method"),
        ({"quant_method": "awq", "bits": "4"}, "/quantization_config/bits"),
        (
            {"quant_method": "fp8", "weight_block_size": [128]},
            "/quantization_config/weight_block_size",
        ),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"g": {"weights": {"type": "int"}}},
            },
            "/quantization_config/config_groups/g/weights/num_bits",
        ),
    ],
)
def test_malformed_quantization_config(quantization_config: Any, field: str) -> None:
    with pytest.raises(InvalidArchitectureError) as caught:
        parse_architecture({**BASE, "quantization_config": quantization_config}, name="q")
    assert [i.field for i in caught.value.issues] == [field]
