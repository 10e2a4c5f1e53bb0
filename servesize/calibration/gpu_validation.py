"""Out-of-sample validation on GPUs other than the H100: TensorRT-LLM's published offline rows.

``servesize/data/validation/trtllm_perf_overview_gpus.csv`` (TensorRT-LLM
``docs/source/performance/perf-overview.md``, the H200, B200, GB200 and RTX 6000 Pro columns;
judging only, nothing is fitted on it) lists ``trtllm-bench throughput`` runs: all requests
queued at once with fixed prompt and output lengths. Each row is compiled on the datasheet spec
of its GPU as the benchmark ran it and predicted with the steady state of as many clients as
the engine keeps resident (:func:`servesize.core.steptime.max_throughput`), under one of two
kernel sources (docs/modeling.md §5.5):

- ``datasheet``: no tables, the roofline over the GPU's datasheet peaks with default
  efficiencies (§2.2);
- ``scaled``: the H100 SXM tables of ``servesize/data/h100`` carried to the GPU by physical
  ratios (:func:`servesize.core.steptime.scale_measured_profile`, §2.11).

Deployment of a row (the page's ``llm_options.yml``): TensorRT-LLM PyTorch backend, ModelOpt
FP8 or NVFP4 weights, FP8 KV cache, ``kv_cache_free_gpu_mem_fraction`` 0.95,
``max_batch_size`` and ``max_num_tokens`` from ``trtllm-bench``'s heuristic
(:func:`servesize.calibration.offline.trtllm_bench_settings`), CUDA graphs on; dense models at TP as
listed, MoE models with attention data-parallel over the GPUs (TP 1 per rank) and experts
over all of them. Rows with pipeline parallelism are skipped: Tier A runs one micro-batch
through every stage (§2.1), so it cannot predict the throughput of a filled pipeline.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from servesize.calibration.kernel_tables import tables_for_gpu
from servesize.calibration.offline import (
    offline_deployment,
    pooled_max_throughput,
    summarise_offline,
)
from servesize.core.architecture import Architecture, QuantizationSpec
from servesize.core.hardware import DEFAULT_BANDWIDTH_EFFICIENCY, HardwareSpec
from servesize.core.memory import Deployment
from servesize.core.replica import compile_replica
from servesize.core.steptime import (
    DEFAULT_GEMM_EFFICIENCY_BY_DTYPE,
    DEFAULT_KERNEL_FLOOR_S,
    MeasuredProfile,
)

__all__ = [
    "GPU_KERNELS_CSV",
    "GPU_OFFLINE_CSV",
    "GPU_PROFILES",
    "KERNEL_SOURCES",
    "GpuOfflinePrediction",
    "GpuOfflineRow",
    "KernelPrediction",
    "load_gpu_offline_rows",
    "predict_gemm_kernels",
    "predict_gpu_offline",
    "scaled_h100_tables",
    "summarise",
]

GPU_OFFLINE_CSV = (
    Path(__file__).resolve().parent.parent / "data" / "validation" / "trtllm_perf_overview_gpus.csv"
)

GPU_KERNELS_CSV = GPU_OFFLINE_CSV.with_name("kernels_gpus.csv")

GPU_PROFILES: dict[str, str] = {
    "H100 SXM 80GB (DGX H100)": "h100-sxm",
    "H200 SXM 141GB (DGX H200)": "h200-sxm",
    "B200 180GB (DGX B200)": "b200",
    "GB200 192GB (GB200 NVL72)": "gb200",
    "RTX 6000 Pro Blackwell Server Edition": "rtx-pro-6000-blackwell-server-edition",
}
"""The page's GPU names and the ``gpus.json`` profile each was measured on."""

MODELS: dict[str, str] = {
    "Llama 3.1 8B": "meta-llama/Llama-3.1-8B",
    "Llama 3.3 70B": "meta-llama/Llama-3.3-70B-Instruct",
    "Llama 3.1 405B": "meta-llama/Llama-3.1-405B",
    "Llama 4 Scout": "meta-llama/Llama-4-Scout-17B-16E-Instruct",
    "Llama 4 Maverick": "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
    "Qwen3-235B-A22B": "Qwen/Qwen3-235B-A22B",
    "Qwen3-30B-A3B": "Qwen/Qwen3-30B-A3B",
}
"""The page's model names and the catalogue architecture each benchmarked checkpoint quantizes."""

KERNEL_SOURCES = ("datasheet", "scaled")
NVFP4_CHECKPOINT = QuantizationSpec(
    method="modelopt",
    weight_dtype="nvfp4",
    weight_bits=4,
    granularity="group",
    group_size=16,
    activation_dtype="nvfp4",
    unquantized_modules=("lm_head",),
)
"""The ModelOpt NVFP4 checkpoints of the FP4 rows (``hf_quant_config.json``: ``quant_algo``
NVFP4, group 16, ``exclude_modules`` lm_head): W4A4, so GEMMs run at the FP4 peak."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuOfflineRow:
    """One published offline benchmark on a non-H100 GPU."""

    model: str
    precision: str
    gpu: str
    num_gpus: int
    tensor_parallel_size: int
    pipeline_parallel_size: int
    input_tokens: int
    output_tokens: int
    output_throughput_tokens_per_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuOfflinePrediction:
    """A row and its predicted output throughput (tokens/s over the whole group)."""

    row: GpuOfflineRow
    source: str
    predicted_tokens_per_s: float
    tpot_s: float

    @property
    def error_percent(self) -> float:
        """``100·(predicted − measured)/measured`` (positive: over-predicted)."""
        measured = self.row.output_throughput_tokens_per_s
        return 100.0 * (self.predicted_tokens_per_s - measured) / measured


def load_gpu_offline_rows(path: Path = GPU_OFFLINE_CSV) -> list[GpuOfflineRow]:
    """The rows of the published table."""
    with path.open(encoding="utf-8", newline="") as handle:
        return [
            GpuOfflineRow(
                model=r["model"],
                precision=r["precision"],
                gpu=r["gpu"],
                num_gpus=int(r["num_gpus"]),
                tensor_parallel_size=int(r["tensor_parallel_size"]),
                pipeline_parallel_size=int(r["pipeline_parallel_size"]),
                input_tokens=int(r["isl_tokens"]),
                output_tokens=int(r["osl_tokens"]),
                output_throughput_tokens_per_s=float(r["output_throughput_tokens_per_s"]),
            )
            for r in csv.DictReader(handle)
        ]


def scaled_h100_tables(target: HardwareSpec) -> MeasuredProfile:
    """The packaged H100 SXM tables carried to ``target`` (the H100's own on the H100)."""
    tables = tables_for_gpu(target)
    assert tables is not None  # scaled=True always yields tables
    return tables


def _checkpoint(row: GpuOfflineRow, arch: Architecture) -> Architecture:
    """The benchmarked checkpoint: the catalogue architecture, NVFP4-quantized for FP4 rows."""
    if row.precision == "FP4" and arch.quantization is None:
        return replace(arch, quantization=NVFP4_CHECKPOINT)
    return arch


def _deployment(row: GpuOfflineRow, arch: Architecture, hardware: HardwareSpec) -> Deployment:
    return offline_deployment(
        row,
        arch,
        device_memory_bytes=hardware.memory_bytes,
        weight_bytes_per_parameter=0.5 if row.precision == "FP4" else 1.0,
    )


def predict_gpu_offline(
    rows: Iterable[GpuOfflineRow],
    architectures: Mapping[str, Architecture],
    hardware: Mapping[str, HardwareSpec],
    *,
    source: str,
) -> list[GpuOfflinePrediction]:
    """Predicted output throughput of every row with a catalogue model, a known GPU and no
    pipeline parallelism, under kernel ``source`` (``datasheet`` or ``scaled``)."""
    if source not in KERNEL_SOURCES:
        raise ValueError(f"source must be one of {KERNEL_SOURCES}, got {source!r}")
    tables: dict[str, MeasuredProfile] = {}
    out: list[GpuOfflinePrediction] = []
    for row in rows:
        model_id = MODELS.get(row.model)
        gpu_id = GPU_PROFILES.get(row.gpu)
        if model_id not in architectures or gpu_id not in hardware:
            continue
        if row.pipeline_parallel_size != 1 or model_id is None or gpu_id is None:
            continue
        spec = hardware[gpu_id]
        measured = None
        if source == "scaled":
            if gpu_id not in tables:
                tables[gpu_id] = scaled_h100_tables(spec)
            measured = tables[gpu_id]
        arch = _checkpoint(row, architectures[model_id])
        replica = compile_replica(arch, spec, _deployment(row, arch, spec), measured)
        est = pooled_max_throughput(replica, row)
        out.append(
            GpuOfflinePrediction(
                row=row,
                source=source,
                predicted_tokens_per_s=float(est.throughput_output_tokens_per_s[0]),
                tpot_s=float(est.tpot_s[0]),
            )
        )
    return out


def summarise(predictions: Sequence[GpuOfflinePrediction]) -> tuple[int, float, float, float]:
    """``(count, MAPE, median APE, mean signed error)`` in percent."""
    s = summarise_offline(predictions)
    return s.count, s.mape, s.median, s.mean_signed


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelPrediction:
    """A published GEMM timing and its predicted time under each kernel source (seconds)."""

    gpu: str
    shape: tuple[int, int, int]
    dtype: str
    measured_s: float
    predicted_s: dict[str, float]


def predict_gemm_kernels(
    hardware: Mapping[str, HardwareSpec], path: Path = GPU_KERNELS_CSV
) -> list[KernelPrediction]:
    """Each published GEMM of ``kernels_gpus.csv`` predicted on its GPU: the datasheet roofline
    ``max(F/(P·η_c), Q/(W·η_m)) + t_floor`` (§2.2) and the scaled H100 table (vLLM's, i.e.
    torch/cuBLAS, curve of the shape; §2.11)."""
    out: list[KernelPrediction] = []
    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    for r in rows:
        spec = hardware.get(r["profile"])
        if spec is None or r["kernel"] != "cublas_gemm":
            continue
        m, n, k = int(r["m"]), int(r["n"]), int(r["k"])
        dtype = r["dtype"]
        flops = 2.0 * m * n * k
        peak = spec.peak_flop_per_s(dtype) or 0.0
        wb = 1.0 if dtype == "fp8" else 2.0
        nbytes = n * k * wb + m * (n + k) * 2.0
        roofline = (
            max(
                flops / (peak * DEFAULT_GEMM_EFFICIENCY_BY_DTYPE.get(dtype, 0.78)),
                nbytes / (spec.memory_bandwidth_bytes_per_s * DEFAULT_BANDWIDTH_EFFICIENCY),
            )
            + DEFAULT_KERNEL_FLOOR_S
        )
        predicted = {"datasheet": roofline}
        table = scaled_h100_tables(spec).gemm_table(dtype, "vllm")
        row = table.shape_index(n, k) if table is not None else None
        if table is not None and row is not None:
            predicted["scaled"] = float(table.latency(np.array([float(m)]), row)[0])
        out.append(
            KernelPrediction(
                gpu=r["gpu"],
                shape=(m, n, k),
                dtype=dtype,
                measured_s=flops / (float(r["tflops"]) * 1e12),
                predicted_s=predicted,
            )
        )
    return out
