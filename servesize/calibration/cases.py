"""Measured serving rows resolved to catalogue architectures and deployments.

Every aggregated row of ``e2e_serving.csv`` whose model is in the catalogue becomes a
:class:`ServingCase`. Rows are excluded, with the reason recorded, when

- the run was disaggregated: the DeepSeek-R1/V3 pools span two nodes (TP16/EP16), which needs
  an inter-node link the hardware spec does not describe, and the remaining disaggregated rows
  give neither the split of clients between pools nor the KV-transfer path;
- the model is not in the catalogue (Qwen3-32B and MiniMax-M2.5 at the time of writing);
- the concurrency is missing;
- the measured TPOT is below what reading the weights and KV cache of ``C`` sequences takes at
  the datasheet bandwidth: the benchmark did not keep its concurrency resident.

Benchmarked fine-tunes and re-quantizations map to the catalogue architecture they share
(``-Instruct`` suffixes, ``-FP8`` re-quantizations, DeepSeek-R1 → DeepSeek-V3). Weights take the
row's precision (``fp8`` → FP8) unless the catalogue checkpoint is itself quantized (gpt-oss:
MXFP4 experts). The KV cache is bf16, except on TensorRT-LLM rows of precision ``fp8``, which run
an FP8 KV cache: ModelOpt FP8 checkpoints carry ``kv_cache_quant_algo: FP8``, which
TensorRT-LLM applies by default (``tensorrt_llm/_torch/model_config.py``), and the measured TPOT
of those rows needs every client resident, which a bf16 pool of the same memory cannot hold
(e.g. Qwen3-32B FP8 TP1, 4096/128 at 64 clients: ~270k tokens against ~147k in bf16). The KV
capacity per deployment comes from a rough ledger
(:func:`kv_capacity_tokens_estimate`) until the memory ledger is wired in.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from servesize.calibration.serving_rows import ServingMeasurement
from servesize.core.architecture import Architecture
from servesize.core.hardware import HardwareSpec
from servesize.core.steptime import MeasuredProfile, StepTimeModel, StepWork, build_step_model

__all__ = [
    "CATALOGUE_ALIASES",
    "Group",
    "ServingCase",
    "case_step_model",
    "catalogue_id_for",
    "kv_capacity_tokens_estimate",
    "resolve_cases",
    "tpot_lower_bound_s",
]

Group = tuple[str, str, int, int, int, int, str | None, str]
"""A deployment: engine, catalogue id, TP, PP, DP, EP, weight dtype."""

CATALOGUE_ALIASES: dict[str, str] = {
    "deepseek-ai/DeepSeek-R1": "deepseek-ai/DeepSeek-V3",
}
"""Benchmarked models whose architecture is a differently named catalogue model."""

_SUFFIXES = ("-Instruct", "-FP8")

# Fraction of GPU memory each engine manages by default: vLLM gpu_memory_utilization 0.9
# (0.92 from 0.22), SGLang mem_fraction_static about 0.88 on 80 GB parts, TensorRT-LLM
# free_gpu_memory_fraction 0.9 of what the weights leave free.
_MEMORY_FRACTION = {"vllm": 0.9, "sglang": 0.88, "trtllm": 0.9}
# Activations, CUDA graphs, NCCL buffers and the CUDA context, per GPU (rough).
_RUNTIME_RESERVE_BYTES = 4 * 2**30


def catalogue_id_for(model: str, available: Iterable[str]) -> str | None:
    """The catalogue id whose architecture ``model`` shares, or None.

    >>> catalogue_id_for("meta-llama/Llama-3.1-8B-Instruct", ["meta-llama/Llama-3.1-8B"])
    'meta-llama/Llama-3.1-8B'
    >>> catalogue_id_for("Qwen/Qwen3-32B", ["Qwen/Qwen3-8B"]) is None
    True
    """
    ids = set(available)
    name = CATALOGUE_ALIASES.get(model, model)
    candidates = [name]
    for suffix in _SUFFIXES:
        if name.endswith(suffix):
            candidates.append(name[: -len(suffix)])
    for candidate in candidates:
        if candidate in ids:
            return candidate
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingCase:
    """A measured row resolved to a catalogue architecture and a deployment."""

    row: ServingMeasurement
    model_id: str
    tensor_parallel_size: int
    pipeline_parallel_size: int
    data_parallel_size: int
    expert_parallel_size: int
    weight_dtype: str | None
    """None: the checkpoint's own dtypes."""
    kv_dtype: str = "bf16"
    """The KV cache's element type (module docstring)."""

    @property
    def group(self) -> Group:
        return (
            self.row.engine,
            self.model_id,
            self.tensor_parallel_size,
            self.pipeline_parallel_size,
            self.data_parallel_size,
            self.expert_parallel_size,
            self.weight_dtype,
            self.kv_dtype,
        )


def case_step_model(
    case: ServingCase,
    arch: Architecture,
    hardware: HardwareSpec,
    *,
    measured: MeasuredProfile | None = None,
    calibrated: bool = True,
) -> StepTimeModel:
    """The step-time model of the deployment ``case`` measured: its engine, parallelism and
    weight precision on ``hardware``."""
    return build_step_model(
        arch,
        hardware,
        engine=case.row.engine,
        tensor_parallel_size=case.tensor_parallel_size,
        pipeline_parallel_size=case.pipeline_parallel_size,
        data_parallel_size=case.data_parallel_size,
        expert_parallel_size=case.expert_parallel_size,
        weight_dtype=case.weight_dtype,
        expert_weight_dtype=case.weight_dtype,
        kv_dtype=case.kv_dtype,
        measured=measured,
        calibrated=calibrated,
    )


def tpot_lower_bound_s(case: ServingCase, arch: Architecture, hardware: HardwareSpec) -> float:
    """Bytes a decode step of ``C`` resident sequences must read from HBM (touched weights and
    the KV cache at context ``P + n/2``) over the datasheet bandwidth: no engine decodes faster.
    """
    model = case_step_model(case, arch, hardware, calibrated=False)
    row = case.row
    context = row.input_tokens + row.output_tokens / 2
    step = model.step_time(StepWork.decode(row.concurrency or 1, context))
    return float(step.bytes[0] / hardware.memory_bandwidth_bytes_per_s)


def resolve_cases(
    rows: Iterable[ServingMeasurement],
    architectures: Mapping[str, Architecture],
    hardware: HardwareSpec,
) -> tuple[list[ServingCase], list[tuple[ServingMeasurement, str]]]:
    """Split rows into predictable cases and ``(row, reason)`` exclusions."""
    cases: list[ServingCase] = []
    excluded: list[tuple[ServingMeasurement, str]] = []
    for row in rows:
        if row.mode != "agg":
            excluded.append((row, "disaggregated pools (see module docstring)"))
            continue
        model_id = catalogue_id_for(row.model, architectures)
        if model_id is None:
            excluded.append((row, f"{row.model} is not in the catalogue"))
            continue
        if row.concurrency is None:
            excluded.append((row, "no concurrency recorded"))
            continue
        arch = architectures[model_id]
        tp = row.tensor_parallel_size or 1
        dp = max(row.attention_data_parallel_size or 1, 1)
        has_moe = any(layer.mlp.kind == "moe" for layer in arch.layers)
        ep = max(row.expert_parallel_size or 1, 1) if has_moe else 1
        if (tp * dp) % ep:
            excluded.append((row, f"EP {ep} does not divide TP x DP {tp * dp}"))
            continue
        quantized = arch.quantization is not None
        weight = "fp8_e4m3" if row.precision == "fp8" and not quantized else None
        case = ServingCase(
            row=row,
            model_id=model_id,
            tensor_parallel_size=tp,
            pipeline_parallel_size=row.pipeline_parallel_size or 1,
            data_parallel_size=dp,
            expert_parallel_size=ep,
            weight_dtype=weight,
            kv_dtype="fp8" if row.engine == "trtllm" and row.precision == "fp8" else "bf16",
        )
        if row.tpot_s < tpot_lower_bound_s(case, arch, hardware):
            excluded.append(
                (row, "TPOT below the HBM bound for C resident sequences: concurrency not held")
            )
            continue
        cases.append(case)
    return cases, excluded


def kv_capacity_tokens_estimate(
    model: StepTimeModel, arch: Architecture, hardware: HardwareSpec
) -> float:
    """KV-cache tokens one replica holds: ``(f·M − weights − reserve) / kv_bytes_per_token``.

    ``f`` is the engine's default memory fraction, weights include the input embedding shard,
    the reserve is 4 GiB, and only unbounded attention layers count per token (sliding-window
    layers hold at most a window per sequence). A stand-in for the memory ledger.
    """
    inv = model.inventory
    fraction = _MEMORY_FRACTION.get(model.engine.name, 0.9)
    embedding = arch.vocab_size * arch.hidden_size * inv.activation_bytes / inv.tensor_parallel_size
    weights = inv.weight_bytes_per_gpu + embedding / inv.pipeline_parallel_size
    free = fraction * hardware.memory_bytes - weights - _RUNTIME_RESERVE_BYTES
    per_token = (
        sum(op.kv_bytes_per_token * op.layers for op in inv.attention if op.window_tokens is None)
        / inv.pipeline_parallel_size
    )
    if per_token <= 0:
        return math.inf
    return max(free, 0.0) * inv.data_parallel_size / per_token
