"""Load measured kernel tables (aiconfigurator-core CSV layout) into core table structures.

Each ``load_*`` function reads one CSV of ``servesize/data/h100/`` (or a directory with the
same file names) and returns :mod:`servesize.core.steptime.tables` objects; times become
seconds, sizes become bytes. Rows measured several times (the collectives were timed under
several NCCL versions) are reduced to their median.
"""

from __future__ import annotations

import csv
import statistics
from collections import defaultdict
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

import numpy as np

from servesize.calibration.reference import reference_gpu
from servesize.core.hardware import HardwareSpec
from servesize.core.steptime import (
    AttentionTable,
    CollectiveTable,
    GemmTable,
    MeasuredProfile,
    MoeTable,
    scale_measured_profile,
)

__all__ = [
    "H100_DATA_DIRECTORY",
    "load_attention_tables",
    "load_collective_tables",
    "load_gemm_tables",
    "load_measured_profile",
    "load_mla_tables",
    "load_moe_tables",
    "tables_for_gpu",
]

H100_DATA_DIRECTORY = Path(__file__).resolve().parent.parent / "data" / "h100"
"""The packaged H100 SXM tables (aiconfigurator-core 0.12.0, see its README)."""

_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "fp8": "fp8", "int8": "int8"}
_BYTES = {"bf16": 2, "fp16": 2, "fp8": 1, "int8": 1}
_MS = 1e-3


def _rows(path: Path) -> Iterator[dict[str, str]]:
    with path.open(newline="") as handle:
        yield from csv.DictReader(handle)


def _dtype(name: str) -> str:
    key = name.strip().lower()
    if key not in _DTYPES:
        raise ValueError(f"unknown dtype {name!r} in a measured table")
    return _DTYPES[key]


def _grid(
    cells: dict[tuple[float, float], list[float]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    xs = np.array(sorted({x for x, _ in cells}), dtype=np.float64)
    ys = np.array(sorted({y for _, y in cells}), dtype=np.float64)
    grid = np.full((len(xs), len(ys)), np.nan)
    xi = {x: i for i, x in enumerate(xs)}
    yi = {y: j for j, y in enumerate(ys)}
    for (x, y), values in cells.items():
        grid[xi[x], yi[y]] = statistics.median(values)
    return xs, ys, grid


def load_gemm_tables(path: Path) -> tuple[GemmTable, ...]:
    """``gemm.csv``: one table per (engine, dtype), shapes ``(n, k)`` over the ``m`` grid."""
    groups: dict[tuple[str, str, str], dict[tuple[float, float], dict[float, list[float]]]] = (
        defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    )
    for row in _rows(path):
        key = (row["backend"], row["backend_version"], _dtype(row["gemm_dtype"]))
        shape = (float(row["n"]), float(row["k"]))
        groups[key][shape][float(row["m"])].append(float(row["latency_ms"]) * _MS)
    tables = []
    for (engine, version, dtype), shapes in sorted(groups.items()):
        m = np.array(sorted({mm for per_m in shapes.values() for mm in per_m}), dtype=np.float64)
        ordered = sorted(shapes)
        latency = np.full((len(ordered), len(m)), np.nan)
        for s, shape in enumerate(ordered):
            for j, mm in enumerate(m):
                if mm in shapes[shape]:
                    latency[s, j] = statistics.median(shapes[shape][mm])
        tables.append(
            GemmTable(
                dtype=dtype,
                engine=engine,
                source=f"{path.name} {engine} {version} {dtype}",
                m=m,
                n=np.array([n for n, _ in ordered], dtype=np.float64),
                k=np.array([k for _, k in ordered], dtype=np.float64),
                latency_s=latency,
            )
        )
    return tuple(tables)


def load_attention_tables(path: Path, *, phase: str) -> tuple[AttentionTable, ...]:
    """``decode_attention_gqa.csv`` (``phase="decode"``) or ``context_attention_gqa.csv``.

    Decode length is ``step + 1`` (cached tokens plus the new one); context length is ``isl``.
    Only bf16-activation rows are kept (the fp8-attention rows time a different kernel).
    """
    if phase not in ("decode", "context"):
        raise ValueError(f"phase must be 'decode' or 'context', got {phase!r}")
    groups: dict[tuple[str, str, int, int, int, str], dict[tuple[float, float], list[float]]] = (
        defaultdict(lambda: defaultdict(list))
    )
    versions: dict[str, str] = {}
    for row in _rows(path):
        if _dtype(row["attn_dtype"]) != "bf16":
            continue
        engine = row["backend"]
        versions[engine] = row["backend_version"]
        key = (
            engine,
            row["kernel_source"],
            int(row["num_heads"]),
            int(row["num_key_value_heads"]),
            int(row["head_dim"]),
            _dtype(row["kv_cache_dtype"]),
        )
        size = float(row["step"]) + 1 if phase == "decode" else float(row["isl"])
        groups[key][(float(row["batch_size"]), size)].append(float(row["latency_ms"]) * _MS)
    tables = []
    for (engine, kernel, heads, kv_heads, head_dim, kv_dtype), cells in sorted(groups.items()):
        batch, length, latency = _grid(cells)
        tables.append(
            AttentionTable(
                phase=phase,
                mechanism="gqa",
                engine=engine,
                source=f"{path.name} {engine} {versions[engine]} {kernel}",
                num_heads=heads,
                num_kv_heads=kv_heads,
                head_dim=head_dim,
                kv_dtype=kv_dtype,
                batch=batch,
                length=length,
                latency_s=latency,
            )
        )
    return tuple(tables)


def load_mla_tables(path: Path) -> tuple[AttentionTable, ...]:
    """``mla_deepseek_v3.csv``: MLA context and generation kernels (TensorRT-LLM).

    ``num_heads`` is taken as the query heads on one GPU; the head dim is DeepSeek-V3's
    ``qk_nope + qk_rope = 192``.
    """
    groups: dict[tuple[str, int, str], dict[tuple[float, float], list[float]]] = defaultdict(
        lambda: defaultdict(list)
    )
    version = ""
    for row in _rows(path):
        if _dtype(row["mla_dtype"]) != "bf16":
            continue
        version = row["version"]
        phase = "decode" if row["op_name"] == "mla_generation" else "context"
        key = (phase, int(row["num_heads"]), _dtype(row["kv_cache_dtype"]))
        size = float(row["step"]) + 1 if phase == "decode" else float(row["isl"])
        groups[key][(float(row["batch_size"]), size)].append(float(row["latency_ms"]) * _MS)
    tables = []
    for (phase, heads, kv_dtype), cells in sorted(groups.items()):
        batch, length, latency = _grid(cells)
        tables.append(
            AttentionTable(
                phase=phase,
                mechanism="mla",
                engine="trtllm",
                source=f"{path.name} trtllm {version}",
                num_heads=heads,
                num_kv_heads=1,
                head_dim=192,
                kv_dtype=kv_dtype,
                batch=batch,
                length=length,
                latency_s=latency,
            )
        )
    return tuple(tables)


def load_moe_tables(path: Path) -> tuple[MoeTable, ...]:
    """``moe.csv``: whole MoE layers over tokens, one table per shape/parallelism/dtype."""
    groups: dict[tuple[str, int, int, int, int, int, int, str], dict[float, list[float]]] = (
        defaultdict(lambda: defaultdict(list))
    )
    version = ""
    for row in _rows(path):
        version = row["version"]
        key = (
            _dtype(row["moe_dtype"]),
            int(row["hidden_size"]),
            int(row["inter_size"]),
            int(row["topk"]),
            int(row["num_experts"]),
            int(row["moe_tp_size"]),
            int(row["moe_ep_size"]),
            row["distribution"],
        )
        groups[key][float(row["num_tokens"])].append(float(row["latency_ms"]) * _MS)
    tables = []
    for (dtype, h, inter, topk, experts, tp, ep, dist), cells in sorted(groups.items()):
        tokens = np.array(sorted(cells), dtype=np.float64)
        tables.append(
            MoeTable(
                dtype=dtype,
                engine="trtllm",
                source=f"{path.name} trtllm {version}",
                hidden_size=h,
                intermediate_size=inter,
                experts_per_token=topk,
                num_experts=experts,
                tensor_parallel_size=tp,
                expert_parallel_size=ep,
                distribution=dist,
                tokens=tokens,
                latency_s=np.array([statistics.median(cells[t]) for t in tokens]),
            )
        )
    return tuple(tables)


_OPS = {
    "all_reduce": "all_reduce",
    "all_gather": "all_gather",
    "reduce_scatter": "reduce_scatter",
    "alltoall": "all_to_all",
}


def load_collective_tables(path: Path) -> tuple[CollectiveTable, ...]:
    """``collectives.csv``: 16-bit collectives; message bytes = elements × 2.

    ``kernel_source`` NCCL becomes ``implementation="nccl"``, TRTLLM ``"custom"``.
    """
    groups: dict[tuple[str, str, int], dict[float, list[float]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for row in _rows(path):
        dtype = _dtype(row["nccl_dtype"])
        if _BYTES[dtype] != 2:
            continue
        implementation = "nccl" if row["kernel_source"] == "NCCL" else "custom"
        key = (_OPS[row["op_name"]], implementation, int(row["num_gpus"]))
        size = float(row["message_size_elements"]) * _BYTES[dtype]
        groups[key][size].append(float(row["latency_ms"]) * _MS)
    tables = []
    for (op, implementation, gpus), cells in sorted(groups.items()):
        sizes = np.array(sorted(cells), dtype=np.float64)
        tables.append(
            CollectiveTable(
                op=op,
                implementation=implementation,
                source=f"{path.name} {implementation} {op} on {gpus} GPUs",
                num_gpus=gpus,
                message_bytes=sizes,
                latency_s=np.array([statistics.median(cells[s]) for s in sizes]),
            )
        )
    return tuple(tables)


def load_measured_profile(directory: Path = H100_DATA_DIRECTORY) -> MeasuredProfile:
    """All kernel tables of ``directory`` as one :class:`MeasuredProfile`."""
    return MeasuredProfile(
        name=f"measured H100 SXM ({directory.name})",
        gemm=load_gemm_tables(directory / "gemm.csv"),
        attention=load_attention_tables(directory / "decode_attention_gqa.csv", phase="decode")
        + load_attention_tables(directory / "context_attention_gqa.csv", phase="context")
        + load_mla_tables(directory / "mla_deepseek_v3.csv"),
        moe=load_moe_tables(directory / "moe.csv"),
        collectives=load_collective_tables(directory / "collectives.csv"),
        notes=("aiconfigurator-core 0.12.0 systems/data/h100_sxm, times in seconds",),
    )


def tables_for_gpu(
    target: HardwareSpec, *, scaled: bool = True, directory: Path = H100_DATA_DIRECTORY
) -> MeasuredProfile | None:
    """The kernel tables a GPU without uploads plans with (docs/modeling.md §2.11).

    The H100 SXM gets its own measured tables. Any other GPU gets them carried over by physical
    ratios (:func:`servesize.core.steptime.scale_measured_profile`, the default: on the
    published H200, B200, GB200 and RTX 6000 Pro rows it errs less than the roofline,
    §5.5), or, with ``scaled=False``, None: the datasheet roofline with default efficiencies.
    """
    reference = reference_gpu()
    if target.id == reference.id:
        return _reference_tables(directory)
    if not scaled:
        return None
    return scale_measured_profile(_reference_tables(directory), reference, target)


@lru_cache(maxsize=4)
def _reference_tables(directory: Path) -> MeasuredProfile:
    return load_measured_profile(directory)
