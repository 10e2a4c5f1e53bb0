"""Offline max-throughput validation against TensorRT-LLM's published H100 and H200 figures.

``servesize/data/validation/trtllm_perf_overview.csv`` (TensorRT-LLM
``docs/source/performance/perf-overview.md``; validation only, nothing is fitted on it) lists
``trtllm-bench throughput`` runs on H100 SXM and H200 SXM: all ``num_requests`` queued at once
with fixed prompt and output lengths. Each row is compiled as the benchmark ran it
(:func:`offline_deployment`) and predicted with the steady state of as many clients as the
engine keeps resident (:func:`servesize.core.steptime.max_throughput`): with every request
queued the engine runs full, and a closed loop with concurrency ``num_requests`` has the same
throughput once the residency cap binds.

Deployment of a row (``trtllm-bench`` with the page's ``llm_options.yml``):

- TensorRT-LLM PyTorch backend, FP8 weights (ModelOpt checkpoints) and FP8 KV cache;
- ``kv_cache_free_gpu_mem_fraction`` 0.95 (the page: "we fall back to 0.90 or lower if
  out-of-memory errors are encountered", without saying for which rows);
- ``max_batch_size`` and ``max_num_tokens`` from ``trtllm-bench``'s own heuristic, which the
  page's commands leave in charge (:func:`trtllm_bench_settings`), CUDA graphs on;
- dense models: TP × PP as listed; MoE models: experts over every GPU (``EP = num_gpus``) and one
  of two attention layouts (``MoeLayout``). The page's MoE ``llm_options.yml`` places
  ``enable_attention_dp: true`` inside ``cuda_graph_config``, a ``StrictBaseModel`` that forbids
  unknown fields (``tensorrt_llm/llmapi/llm_args.py``), so the file as printed cannot be what
  ran, and which attention layout ran is not recoverable from the page. Both are predicted:
  ``attention_dp`` (data-parallel attention over ``num_gpus`` ranks, TP 1 per rank) and
  ``tensor_parallel`` (attention TP over the listed ``tensor_parallel_size``).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

import numpy as np

from servesize.core.architecture import Architecture, MultiHeadAttention, count_parameters
from servesize.core.hardware import HardwareSpec
from servesize.core.memory import Deployment
from servesize.core.replica import Replica, compile_replica
from servesize.core.steptime import EngineProfile, MeasuredProfile, ServingEstimate, max_throughput

__all__ = [
    "OFFLINE_CSV",
    "OFFLINE_MODELS",
    "BenchShape",
    "MoeLayout",
    "OfflinePrediction",
    "OfflineRow",
    "OfflineSummary",
    "PublishedRun",
    "ThroughputError",
    "load_offline_rows",
    "offline_deployment",
    "pooled_max_throughput",
    "predict_offline",
    "summarise_offline",
    "trtllm_bench_settings",
]

MoeLayout = Literal["attention_dp", "tensor_parallel"]
"""How a MoE row's attention is laid out (module docstring)."""

OFFLINE_CSV = (
    Path(__file__).resolve().parent.parent / "data" / "validation" / ("trtllm_perf_overview.csv")
)

OFFLINE_MODELS: dict[str, str] = {
    "Llama 3.1 8B": "meta-llama/Llama-3.1-8B",
    "Llama 3.3 70B": "meta-llama/Llama-3.3-70B-Instruct",
    "Llama 3.1 405B": "meta-llama/Llama-3.1-405B",
    "Llama 4 Scout": "meta-llama/Llama-4-Scout-17B-16E-Instruct",
    "Llama 4 Maverick": "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
    "Qwen3-235B-A22B": "Qwen/Qwen3-235B-A22B",
}
"""The page's model names and the catalogue architecture each benchmarked checkpoint quantizes."""

KV_CACHE_FREE_GPU_MEM_FRACTION = 0.95
_GIB = 1024**3


@dataclass(frozen=True, slots=True, kw_only=True)
class OfflineRow:
    """One published offline benchmark."""

    model: str
    gpu: str
    """The GPU as the reference table names it (``H100 SXM``, ``H200 SXM``)."""
    num_gpus: int
    tensor_parallel_size: int
    pipeline_parallel_size: int
    input_tokens: int
    output_tokens: int
    num_requests: int
    output_throughput_tokens_per_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class OfflinePrediction:
    """A row, its compiled layout and the predicted output throughput (tokens/s, all GPUs)."""

    row: OfflineRow
    model_id: str
    moe: bool
    predicted_tokens_per_s: float
    resident_sequences: float
    step_time_s: float

    @property
    def error_percent(self) -> float:
        """``100·(predicted − measured)/measured`` (positive: over-predicted)."""
        measured = self.row.output_throughput_tokens_per_s
        return 100.0 * (self.predicted_tokens_per_s - measured) / measured


@dataclass(frozen=True, slots=True, kw_only=True)
class OfflineSummary:
    """Absolute percentage errors of ``count`` rows."""

    count: int
    mape: float
    median: float
    p90: float
    mean_signed: float
    """Mean signed error in percent (positive: over-prediction on average)."""


def load_offline_rows(path: Path = OFFLINE_CSV) -> list[OfflineRow]:
    """The rows of the published table."""
    with path.open(encoding="utf-8", newline="") as handle:
        return [
            OfflineRow(
                model=r["model"],
                gpu=_gpu_name(r["gpu"]),
                num_gpus=int(r["num_gpus"]),
                tensor_parallel_size=int(r["tensor_parallel_size"]),
                pipeline_parallel_size=int(r["pipeline_parallel_size"]),
                input_tokens=int(r["isl_tokens"]),
                output_tokens=int(r["osl_tokens"]),
                num_requests=int(r["num_requests"]),
                output_throughput_tokens_per_s=float(r["output_throughput_tokens_per_s"]),
            )
            for r in csv.DictReader(handle)
        ]


_GPU_NAMES = {"H100 SXM": "H100 SXM", "H200 SXM": "H200 SXM"}


def _gpu_name(published: str) -> str:
    """``H100 SXM 80GB (DGX H100)`` → ``H100 SXM``: the reference GPU table's name."""
    for prefix, name in _GPU_NAMES.items():
        if published.startswith(prefix):
            return name
    return published


def _is_moe(arch: Architecture) -> bool:
    return any(layer.mlp.kind == "moe" for layer in arch.layers)


def _round_up(value: float, step: int) -> int:
    return step * math.ceil(value / step)


class BenchShape(Protocol):
    """What ``trtllm-bench``'s heuristic reads of a run: its layout and lengths."""

    @property
    def tensor_parallel_size(self) -> int: ...
    @property
    def pipeline_parallel_size(self) -> int: ...
    @property
    def input_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...


def trtllm_bench_settings(
    row: BenchShape,
    arch: Architecture,
    device_memory_bytes: int,
    *,
    weight_bytes_per_parameter: float = 1.0,
) -> tuple[int, int]:
    """``(max_batch_size, max_num_tokens)`` as ``trtllm-bench throughput`` picks them when the
    command gives neither.

    Mirrors ``tensorrt_llm/bench/build/tuning.py: calc_engine_setting`` and
    ``finetune_setting`` and the no-chunking floor of
    ``tensorrt_llm/bench/benchmark/utils/general.py: get_settings``: KV bytes per token
    ``2·L·max(TP, n_kv)·d_head`` at one byte (FP8 KV), engine size ``params ·
    weight_bytes_per_parameter`` (1 for FP8, 0.5 for NVFP4: its ``BYTES_PER_ELEM``),
    ``requests = 0.95·(GPUs·memory − engine) / (bytes_per_token·(ISL + OSL))``;
    ``bs = min(requests, 4096)/PP`` rounded up to 32 (min 64) below 256, to 128 below 1024,
    else to 256; ``tokens = min(bs·(1 + ISL/OSL), 32768)`` rounded up to 256 (min 2048) below
    4096, to 512 below 8192, else to 1024; without chunked prefill at least ``ISL + bs``.
    """
    tp, pp = row.tensor_parallel_size, row.pipeline_parallel_size
    kv_bytes_per_token = sum(
        2 * max(tp, layer.mixer.num_kv_heads) * layer.mixer.head_dim
        for layer in arch.layers
        if isinstance(layer.mixer, MultiHeadAttention)
    )
    engine_bytes = count_parameters(arch).total * weight_bytes_per_parameter
    available_bytes = device_memory_bytes * tp * pp - engine_bytes
    requests = (
        KV_CACHE_FREE_GPU_MEM_FRACTION
        * available_bytes
        / (kv_bytes_per_token * (row.input_tokens + row.output_tokens))
    )
    raw_batch = min(requests, 4096.0) / pp
    raw_tokens = min(raw_batch * (1.0 + row.input_tokens / row.output_tokens), 32768.0)
    if raw_batch < 256:
        batch = max(64, _round_up(raw_batch, 32))
    elif raw_batch < 1024:
        batch = _round_up(raw_batch, 128)
    else:
        batch = _round_up(raw_batch, 256)
    if raw_tokens < 4096:
        tokens = max(2048, _round_up(raw_tokens, 256))
    elif raw_tokens < 8192:
        tokens = _round_up(raw_tokens, 512)
    else:
        tokens = _round_up(raw_tokens, 1024)
    return batch, max(tokens, row.input_tokens + batch)


class PublishedRun(BenchShape, Protocol):
    """A published ``trtllm-bench`` run: its layout, lengths and GPU count."""

    @property
    def num_gpus(self) -> int: ...


class ThroughputError(Protocol):
    """A prediction of a published throughput."""

    @property
    def error_percent(self) -> float: ...


def offline_deployment(
    row: PublishedRun,
    arch: Architecture,
    *,
    device_memory_bytes: int = 80 * 10**9,
    moe_layout: MoeLayout = "attention_dp",
    weight_bytes_per_parameter: float = 1.0,
) -> Deployment:
    """The deployment ``trtllm-bench`` ran for ``row`` on GPUs of ``device_memory_bytes``
    (module docstring); ``weight_bytes_per_parameter`` as :func:`trtllm_bench_settings`."""
    max_batch_size, max_num_tokens = trtllm_bench_settings(
        row, arch, device_memory_bytes, weight_bytes_per_parameter=weight_bytes_per_parameter
    )
    common = {
        "engine": "trtllm",
        "quantization": None if arch.quantization is not None else "fp8",
        "kv_cache_dtype": "fp8",
        "gpu_memory_utilization": KV_CACHE_FREE_GPU_MEM_FRACTION,
        "max_num_seqs": max_batch_size,
        "max_num_batched_tokens": max_num_tokens,
        "max_model_len": row.input_tokens + row.output_tokens,
        "pipeline_parallel_size": row.pipeline_parallel_size,
    }
    if _is_moe(arch) and moe_layout == "tensor_parallel":
        return Deployment(
            tensor_parallel_size=row.tensor_parallel_size,
            enable_expert_parallel=True,
            **common,  # type: ignore[arg-type]
        )
    if _is_moe(arch):
        ranks = row.num_gpus // row.pipeline_parallel_size
        return Deployment(
            tensor_parallel_size=1,
            data_parallel_size=ranks,
            enable_expert_parallel=True,
            **common,  # type: ignore[arg-type]
        )
    return Deployment(tensor_parallel_size=row.tensor_parallel_size, **common)  # type: ignore[arg-type]


def _replica(
    row: OfflineRow,
    arch: Architecture,
    hardware: HardwareSpec,
    measured: MeasuredProfile | None,
    engine: EngineProfile | None,
    moe_layout: MoeLayout,
) -> Replica:
    deployment = offline_deployment(
        row, arch, device_memory_bytes=hardware.memory_bytes, moe_layout=moe_layout
    )
    return compile_replica(arch, hardware, deployment, measured, engine)


def pooled_max_throughput(replica: Replica, row: BenchShape) -> ServingEstimate:
    """``max_throughput`` of ``replica`` at the row's lengths with the KV pool of every
    data-parallel rank (``kv_blocks · block_size · DP``, the pool the group admits into)."""
    memory = replica.memory
    kv_tokens = memory.kv_blocks * memory.kv_block_size * memory.deployment.data_parallel_size
    return max_throughput(
        replica.step_model,
        input_tokens=row.input_tokens,
        output_tokens=row.output_tokens,
        kv_capacity_tokens=kv_tokens,
    )


def predict_offline(
    rows: Iterable[OfflineRow],
    architectures: Mapping[str, Architecture],
    hardware: HardwareSpec,
    *,
    measured: MeasuredProfile | None = None,
    engine: EngineProfile | None = None,
    moe_layout: MoeLayout = "attention_dp",
) -> list[OfflinePrediction]:
    """Predicted output throughput of each row run on ``hardware`` (by name) whose model is in
    ``architectures``; ``measured`` tables should be that GPU's.

    The KV capacity is the memory plan's pool over every data-parallel rank
    (``kv_blocks · block_size · DP``, the pool the scheduler of the group admits into).
    """
    out: list[OfflinePrediction] = []
    for row in rows:
        model_id = OFFLINE_MODELS.get(row.model)
        if row.gpu != hardware.name or model_id is None or model_id not in architectures:
            continue
        arch = architectures[model_id]
        est = pooled_max_throughput(
            _replica(row, arch, hardware, measured, engine, moe_layout), row
        )
        out.append(
            OfflinePrediction(
                row=row,
                model_id=model_id,
                moe=_is_moe(arch),
                predicted_tokens_per_s=float(est.throughput_output_tokens_per_s[0]),
                resident_sequences=float(est.resident_sequences[0]),
                step_time_s=float(est.step_time_s[0]),
            )
        )
    return out


def summarise_offline(predictions: Sequence[ThroughputError]) -> OfflineSummary:
    """MAPE, median and p90 of the absolute percentage errors, and the mean signed error."""
    if not predictions:
        return OfflineSummary(count=0, mape=math.nan, median=math.nan, p90=math.nan,
                              mean_signed=math.nan)  # fmt: skip
    signed = np.array([p.error_percent for p in predictions])
    ape = np.abs(signed)
    return OfflineSummary(
        count=int(ape.size),
        mape=float(ape.mean()),
        median=float(np.median(ape)),
        p90=float(np.percentile(ape, 90)),
        mean_signed=float(signed.mean()),
    )
