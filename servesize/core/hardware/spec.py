"""The hardware value object the planner computes with."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

PEAK_DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")
"""Dtypes with a dense peak. ``int8`` is in tera-operations per second, the rest in TFLOP/s."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Interconnect:
    """The GPU-to-GPU link inside a node.

    ``bandwidth_bytes_per_s`` is per GPU and per direction (NVLink 4 on H100: 900 GB/s
    bidirectional = 450 GB/s each way), the figure nccl-tests' bus bandwidth approaches.
    """

    kind: str
    bandwidth_bytes_per_s: int | None
    gpus_per_node: int = 8


@dataclass(frozen=True, slots=True, kw_only=True)
class HardwareSpec:
    """One accelerator: memory, bandwidth, dense peaks per dtype and its interconnect."""

    id: str
    vendor: str
    name: str
    memory_bytes: int
    memory_bandwidth_bytes_per_s: int
    peak_tflop_per_s: Mapping[str, float | None] = field(default_factory=dict)
    interconnect: Interconnect | None = None
    memory_type: str | None = None
    tdp_w: float | None = None
    sm_count: int | None = None
    """Streaming multiprocessors (NVIDIA) or compute units (AMD); None when not published."""
    l2_cache_bytes: int | None = None
    boost_clock_hz: float | None = None

    def peak_flop_per_s(self, dtype: str) -> float | None:
        """Dense peak of ``dtype`` in FLOP/s (ops/s for int8); ``None`` when unsupported."""
        tflops = self.peak_tflop_per_s.get(dtype)
        return None if tflops is None else tflops * 1e12
