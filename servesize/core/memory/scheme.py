"""Which weights a checkpoint quantizes, and in which format.

Rules, per vLLM's quantization configs (vllm-project/vllm:
vllm/model_executor/layers/quantization/):

- Only linear layers inside the decoder (attention projections, MLPs, experts, MLA and
  gated-delta-net projections) are quantized. Embeddings, ``lm_head`` (a
  ``VocabParallelEmbedding``, not a ``LinearBase``), norms, router gates (created with
  ``quant_config=None``), biases, convolutions and small per-head vectors keep the model dtype.
- MXFP4 (``mxfp4.py``) quantizes MoE experts only: ``Mxfp4Config.get_quant_method`` falls back
  to ``UnquantizedLinearMethod`` for linear layers.
- Modules named in the config's ``modules_to_not_convert`` / ``ignore`` / ``ignored_layers`` /
  ``exclude_modules`` stay unquantized. Patterns match as compressed-tensors does (``re:``
  prefix = regular expression), as globs (``model.layers.*.self_attn``) and as dotted
  prefixes or substrings (``lm_head``, AWQ's ``any(m in prefix ...)``).
- ``--quantization fp8`` on an unquantized checkpoint quantizes online to fp8 with one
  per-tensor scale per logical matrix (``fp8.py``, ``is_checkpoint_fp8_serialized=False``).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass

from servesize.core.architecture import QuantizationSpec
from servesize.core.memory.formats import FormatKind, WeightFormat, dense_format

__all__ = ["WeightScheme", "is_unquantized_module", "resolve_weight_scheme"]

_KERNEL_ALIASES: dict[str, frozenset[str]] = {
    "awq": frozenset({"awq", "awq_marlin"}),
    "gptq": frozenset({"gptq", "gptq_marlin", "marlin"}),
    "compressed-tensors": frozenset({"compressed-tensors", "compressed_tensors"}),
    "modelopt": frozenset({"modelopt", "modelopt_fp4", "modelopt_fp8"}),
    "fp8": frozenset({"fp8"}),
    "mxfp4": frozenset({"mxfp4"}),
    "bitsandbytes": frozenset({"bitsandbytes"}),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class WeightScheme:
    """The storage plan of a model's weights."""

    method: str
    """``quant_method`` (or ``"none"``, or ``"fp8 (online)"``)."""
    model_dtype: str
    """Dtype of every unquantized tensor."""
    quantized: WeightFormat | None
    """Format of quantized linear layers; None when nothing is quantized."""
    experts_only: bool = False
    unquantized_modules: tuple[str, ...] = ()

    @property
    def dense(self) -> WeightFormat:
        return dense_format(self.model_dtype)

    def format_for(self, module: str, *, linear: bool, expert: bool) -> WeightFormat:
        """Format of the tensor named ``module`` (HF checkpoint name)."""
        if self.quantized is None or not linear:
            return self.dense
        if self.experts_only and not expert:
            return self.dense
        if is_unquantized_module(module, self.unquantized_modules):
            return self.dense
        return self.quantized


def is_unquantized_module(module: str, patterns: tuple[str, ...]) -> bool:
    """Whether ``module`` matches one of the ignore ``patterns``.

    >>> is_unquantized_module("model.layers.3.self_attn.q_proj", ("model.layers.*.self_attn",))
    True
    >>> is_unquantized_module("model.layers.3.mlp.experts", ("re:.*self_attn.*", "lm_head"))
    False
    """
    for pattern in patterns:
        if pattern.startswith("re:"):
            if re.match(pattern[3:], module):
                return True
            continue
        if fnmatch.fnmatchcase(module, pattern) or fnmatch.fnmatchcase(module, pattern + ".*"):
            return True
        if "*" not in pattern and (module == pattern or f".{pattern}." in f".{module}."):
            return True
    return False


def _format_from_spec(spec: QuantizationSpec, model_dtype: str) -> WeightFormat | None:
    dtype, gran = spec.weight_dtype, spec.granularity
    static = spec.activation_scheme == "static"
    if dtype is None:
        return None
    if dtype in ("fp8_e4m3", "fp8_e5m2"):
        if gran == "block" and spec.block_shape is not None:
            bn, bk = spec.block_shape
            return WeightFormat(
                kind=FormatKind.FP8_BLOCK,
                label=f"fp8 block {bn}x{bk}",
                dense_dtype=model_dtype,
                bits=8,
                block_shape=spec.block_shape,
            )
        if gran == "channel":
            return WeightFormat(
                kind=FormatKind.FP8_CHANNEL,
                label="fp8 per-channel",
                dense_dtype=model_dtype,
                bits=8,
                static_input_scale=static,
            )
        return WeightFormat(
            kind=FormatKind.FP8_TENSOR,
            label="fp8 per-tensor",
            dense_dtype=model_dtype,
            bits=8,
            static_input_scale=static,
        )
    if dtype == "mxfp4":
        return WeightFormat(kind=FormatKind.MXFP4, label="MXFP4", dense_dtype=model_dtype, bits=4)
    if dtype == "nvfp4":
        return WeightFormat(kind=FormatKind.NVFP4, label="NVFP4", dense_dtype=model_dtype, bits=4)
    if dtype == "int8" and gran in ("channel", "tensor") and spec.method != "gptq":
        per_tensor = gran == "tensor"
        return WeightFormat(
            kind=FormatKind.FP8_TENSOR if per_tensor else FormatKind.INT8_CHANNEL,
            label="int8 per-tensor" if per_tensor else "int8 per-channel",
            dense_dtype=model_dtype,
            bits=8,
            static_input_scale=static,
        )
    if spec.method == "bitsandbytes" and dtype == "int4":
        return WeightFormat(kind=FormatKind.BNB4, label="bnb nf4", dense_dtype=model_dtype, bits=4)
    if dtype in ("int4", "int8"):
        bits = spec.weight_bits or (4 if dtype == "int4" else 8)
        gptq = spec.method == "gptq"
        group = spec.group_size if gran == "group" else None
        name = {"awq": "AWQ", "gptq": "GPTQ"}.get(spec.method, spec.method)
        return WeightFormat(
            kind=FormatKind.INT_GROUP,
            label=f"{name} int{bits} " + (f"g{group}" if group else "per-channel"),
            dense_dtype=model_dtype,
            bits=bits,
            group_size=group,
            zero_points=gptq or spec.symmetric is False,
            g_idx=gptq,
        )
    return None


def resolve_weight_scheme(
    spec: QuantizationSpec | None, requested: str | None, model_dtype: str
) -> WeightScheme | str:
    """The weight scheme, or a message saying why ``requested`` cannot be served.

    >>> resolve_weight_scheme(None, "fp8", "bf16").quantized.label
    'fp8 per-tensor'
    >>> resolve_weight_scheme(None, "awq", "bf16")[:52]
    "'awq' needs a checkpoint quantized with awq; this mo"
    """
    wanted = requested.lower() if requested else None
    if spec is None:
        if wanted is None:
            return WeightScheme(method="none", model_dtype=model_dtype, quantized=None)
        if wanted == "fp8":
            fmt = WeightFormat(
                kind=FormatKind.FP8_TENSOR,
                label="fp8 per-tensor",
                dense_dtype=model_dtype,
                bits=8,
            )
            return WeightScheme(method="fp8 (online)", model_dtype=model_dtype, quantized=fmt)
        return (
            f"{requested!r} needs a checkpoint quantized with {wanted}; this model's weights "
            f"are {model_dtype} (only 'fp8' quantizes online)"
        )
    if wanted is not None and wanted not in _KERNEL_ALIASES.get(spec.method, {spec.method}):
        return (
            f"{requested!r} does not match the checkpoint's quant_method {spec.method!r}; "
            "vLLM refuses the mismatch"
        )
    spec_format = _format_from_spec(spec, model_dtype)
    if spec_format is None:
        return (
            f"quantization {spec.method!r} ({spec.weight_dtype or 'unknown dtype'}, "
            f"{spec.granularity or 'unknown granularity'}) has no known storage layout"
        )
    return WeightScheme(
        method=spec.method,
        model_dtype=model_dtype,
        quantized=spec_format,
        experts_only=spec_format.kind is FormatKind.MXFP4 and spec.method == "mxfp4",
        unquantized_modules=spec.unquantized_modules,
    )
