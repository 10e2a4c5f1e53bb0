"""The ``quantization_config`` of a checkpoint, normalised for the memory ledger.

Recognised ``quant_method`` values and where their fields come from:

- ``fp8`` (DeepSeek-V3/R1, FP8 checkpoints): ``fmt``, ``activation_scheme``,
  ``weight_block_size`` (block scaling; per-tensor without it), ``ignored_layers`` /
  ``modules_to_not_convert``.
- ``compressed-tensors`` (llm-compressor): ``config_groups.*.weights`` (``num_bits``, ``type``,
  ``strategy``, ``group_size``, ``block_structure``, ``symmetric``),
  ``config_groups.*.input_activations``, ``ignore``, ``kv_cache_scheme``.
- ``awq`` / ``gptq``: ``bits``, ``group_size`` (``-1`` = per channel), ``zero_point`` (AWQ) /
  ``sym`` (GPTQ), ``modules_to_not_convert``.
- ``mxfp4`` (gpt-oss): 4-bit E2M1 experts with E8M0 scales per 32 values,
  ``modules_to_not_convert``.
- ``modelopt`` (NVIDIA TensorRT Model Optimizer): ``quant_algo`` (``FP8``, ``NVFP4``,
  ``W4A16_NVFP4``, ...), ``group_size``, ``ignore`` / ``exclude_modules``,
  ``kv_cache_quant_algo``.
- ``bitsandbytes``: ``load_in_4bit`` / ``load_in_8bit``, ``bnb_4bit_quant_type``,
  ``llm_int8_skip_modules``.

Field names follow vLLM's readers (``vllm/model_executor/layers/quantization/{fp8,awq,gptq,
mxfp4,modelopt}.py`` and ``compressed_tensors/compressed_tensors.py`` in vllm-project/vllm).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from servesize.core.architecture._reader import ConfigReader

__all__ = ["QuantizationSpec", "parse_quantization"]


@dataclass(frozen=True, slots=True, kw_only=True)
class QuantizationSpec:
    """How a checkpoint's weights (and maybe activations / KV cache) are quantized."""

    method: str
    """``quant_method`` as written in the config (lower-cased)."""
    weight_dtype: str | None
    """Canonical dtype of quantized weights (``fp8_e4m3``, ``int4``, ``mxfp4``, ``nvfp4``, ...);
    None when the method is not recognised."""
    weight_bits: int | None
    granularity: str | None
    """Scale granularity: ``tensor``, ``channel``, ``group`` or ``block``."""
    group_size: int | None = None
    block_shape: tuple[int, int] | None = None
    symmetric: bool | None = None
    """False when the scheme stores zero points (asymmetric)."""
    activation_dtype: str | None = None
    """Dtype activations are quantized to (``fp8_e4m3``, ``int8``, ...); None if weight-only."""
    activation_scheme: str | None = None
    """``dynamic`` or ``static`` activation scales, when stated."""
    unquantized_modules: tuple[str, ...] = ()
    """Module name patterns left in the unquantized dtype (``modules_to_not_convert``,
    ``ignore``, ...), verbatim."""
    kv_cache_dtype: str | None = None
    """KV-cache dtype the checkpoint was calibrated for, when it says so."""
    format: str | None = None
    """Packing format (compressed-tensors ``format``, AWQ ``version``)."""


_FP8_FMT = {"e4m3": "fp8_e4m3", "e5m2": "fp8_e5m2"}


def parse_quantization(reader: ConfigReader) -> QuantizationSpec | None:
    """Read ``quantization_config`` (if any) from ``reader``'s document."""
    section = reader.mapping("quantization_config")
    if section is None:
        return None
    q = reader.child("quantization_config", section)
    method = q.string("quant_method")
    if method is None:
        if not q.has("quant_method"):
            q.issues.add(q.pointer("quant_method"), "required field is missing")
        return None
    method = method.lower()
    parser = _PARSERS.get(method)
    if parser is None:
        q.issues.assume(
            f"quantization method {method!r} is not recognised: its weight bytes are unknown"
        )
        return QuantizationSpec(
            method=method, weight_dtype=None, weight_bits=None, granularity=None
        )
    return parser(q, method)


def _modules(q: ConfigReader, *keys: str) -> tuple[str, ...]:
    out: list[str] = []
    for key in keys:
        out.extend(q.string_list(key) or ())
    return tuple(out)


def _fp8(q: ConfigReader, method: str) -> QuantizationSpec:
    fmt = (q.string("fmt") or "e4m3").lower()
    block = q.integer_list("weight_block_size", minimum=1)
    block_shape: tuple[int, int] | None = None
    if block is not None:
        if len(block) == 2:
            block_shape = (block[0], block[1])
        else:
            q.issues.add(q.pointer("weight_block_size"), "must have exactly two entries")
    return QuantizationSpec(
        method=method,
        weight_dtype=_FP8_FMT.get(fmt, "fp8_e4m3"),
        weight_bits=8,
        granularity="block" if block_shape else "tensor",
        block_shape=block_shape,
        symmetric=True,
        activation_dtype=_FP8_FMT.get(fmt, "fp8_e4m3"),
        activation_scheme=q.string("activation_scheme"),
        unquantized_modules=_modules(q, "ignored_layers", "modules_to_not_convert"),
    )


def _mxfp4(q: ConfigReader, method: str) -> QuantizationSpec:
    return QuantizationSpec(
        method=method,
        weight_dtype="mxfp4",
        weight_bits=4,
        granularity="group",
        group_size=32,
        symmetric=True,
        unquantized_modules=_modules(q, "modules_to_not_convert"),
    )


def _int_weight_only(q: ConfigReader, method: str) -> QuantizationSpec:
    bits = q.integer("bits")
    group = q.integer("group_size", minimum=-1, default=-1)
    if method == "awq":
        symmetric = not q.boolean("zero_point", default=True)
        fmt = q.string("version")
    else:
        symmetric = q.boolean("sym", default=True)
        fmt = q.string("checkpoint_format")
    per_channel = group in (-1, 0)
    return QuantizationSpec(
        method=method,
        weight_dtype={4: "int4", 8: "int8"}.get(bits),
        weight_bits=bits,
        granularity="channel" if per_channel else "group",
        group_size=None if per_channel else group,
        symmetric=symmetric,
        unquantized_modules=_modules(q, "modules_to_not_convert"),
        format=fmt,
    )


def _ct_dtype(kind: str | None, bits: int | None, group_size: int | None) -> str | None:
    if kind == "float":
        if bits == 8:
            return "fp8_e4m3"
        if bits == 4:
            return "nvfp4" if group_size == 16 else "mxfp4" if group_size == 32 else "fp4"
    if kind == "int":
        return {4: "int4", 8: "int8"}.get(bits or 0)
    return None


def _compressed_tensors(q: ConfigReader, method: str) -> QuantizationSpec:
    groups = q.mapping("config_groups")
    weights: Mapping[str, Any] | None = None
    acts: Mapping[str, Any] | None = None
    wr: ConfigReader | None = None
    ar: ConfigReader | None = None
    if groups is None:
        q.issues.add(q.pointer("config_groups"), "required field is missing")
    else:
        gr = q.child("config_groups", groups)
        for name in sorted(groups):
            group = gr.mapping(name)
            if group is None:
                continue
            g = gr.child(name, group)
            weights = g.mapping("weights")
            acts = g.mapping("input_activations")
            if weights is not None:
                wr = g.child("weights", weights)
                ar = None if acts is None else g.child("input_activations", acts)
                break
    bits: int | None = None
    kind: str | None = None
    strategy: str | None = None
    group_size: int | None = None
    block_shape: tuple[int, int] | None = None
    symmetric: bool | None = None
    if wr is not None:
        bits = wr.integer("num_bits")
        kind = wr.string("type")
        strategy = wr.string("strategy")
        group_size = wr.optional_integer("group_size")
        symmetric = wr.boolean("symmetric", default=True)
        block = wr.integer_list("block_structure", minimum=1)
        if block is not None and len(block) == 2:
            block_shape = (block[0], block[1])
    act_dtype = act_scheme = None
    if acts is not None and ar is not None:
        act_dtype = _ct_dtype(
            ar.string("type"), ar.integer("num_bits"), ar.optional_integer("group_size")
        )
        dynamic = ar.raw("dynamic")
        act_scheme = "dynamic" if dynamic is True else "static" if dynamic is False else None
    kv_scheme = q.mapping("kv_cache_scheme")
    kv_dtype = None
    if kv_scheme is not None:
        kr = q.child("kv_cache_scheme", kv_scheme)
        kv_dtype = _ct_dtype(kr.string("type"), kr.integer("num_bits"), None)
    return QuantizationSpec(
        method=method,
        weight_dtype=_ct_dtype(kind, bits, group_size),
        weight_bits=bits,
        granularity=strategy,
        group_size=group_size,
        block_shape=block_shape,
        symmetric=symmetric,
        activation_dtype=act_dtype,
        activation_scheme=act_scheme,
        unquantized_modules=_modules(q, "ignore"),
        kv_cache_dtype=kv_dtype,
        format=q.string("format"),
    )


_MODELOPT_ALGOS: dict[str, tuple[str, int, str | None, int | None]] = {
    # quant_algo: (weight dtype, weight bits, activation dtype, default group size)
    "FP8": ("fp8_e4m3", 8, "fp8_e4m3", None),
    "FP8_PER_CHANNEL_PER_TOKEN": ("fp8_e4m3", 8, "fp8_e4m3", None),
    "FP8_BLOCK_SCALES": ("fp8_e4m3", 8, "fp8_e4m3", None),
    "NVFP4": ("nvfp4", 4, "nvfp4", 16),
    "W4A16_NVFP4": ("nvfp4", 4, None, 16),
    "W4A8_AWQ": ("int4", 4, "fp8_e4m3", 128),
    "W4A16_AWQ": ("int4", 4, None, 128),
}


def _modelopt(q: ConfigReader, method: str) -> QuantizationSpec:
    algo = q.string("quant_algo")
    known = _MODELOPT_ALGOS.get((algo or "").upper())
    if known is None:
        q.issues.assume(
            f"modelopt quant_algo {algo!r} is not recognised: its weight bytes are unknown"
        )
        weight_dtype, bits, act, group = None, None, None, None
    else:
        weight_dtype, bits, act, group = known
    group = q.optional_integer("group_size") or group
    kv_algo = q.string("kv_cache_quant_algo")
    return QuantizationSpec(
        method=method,
        weight_dtype=weight_dtype,
        weight_bits=bits,
        granularity="group" if group else "tensor",
        group_size=group,
        symmetric=True,
        activation_dtype=act,
        unquantized_modules=_modules(q, "ignore", "exclude_modules"),
        kv_cache_dtype="fp8_e4m3" if (kv_algo or "").upper() == "FP8" else None,
    )


def _bitsandbytes(q: ConfigReader, method: str) -> QuantizationSpec:
    four = q.boolean("load_in_4bit", default=False)
    return QuantizationSpec(
        method=method,
        weight_dtype="int4" if four else "int8",
        weight_bits=4 if four else 8,
        granularity="group" if four else "channel",
        group_size=64 if four else None,
        format=q.string("bnb_4bit_quant_type") if four else None,
        unquantized_modules=_modules(q, "llm_int8_skip_modules"),
    )


_PARSERS = {
    "fp8": _fp8,
    "mxfp4": _mxfp4,
    "awq": _int_weight_only,
    "gptq": _int_weight_only,
    "compressed-tensors": _compressed_tensors,
    "modelopt": _modelopt,
    "bitsandbytes": _bitsandbytes,
}
