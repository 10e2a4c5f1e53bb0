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


INTER_NODE_KINDS = ("infiniband", "ethernet", "nvlink_domain")
"""How the nodes of a multi-node replica are joined (:class:`InterNodeLink`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InterNodeLink:
    """The link between nodes, per GPU and per direction.

    ``infiniband`` / ``ethernet``: one network adapter share per GPU (a DGX H100 has one
    400 Gb/s ConnectX-7 per GPU: 50 GB/s each way). ``nvlink_domain``: the nodes (GB200/GB300
    trays of 4 GPUs) share one NVLink switch fabric of ``domain_gpus`` GPUs (72 for NVL72), so
    collectives inside the domain run at ``bandwidth_bytes_per_s`` of NVLink.
    """

    kind: str
    bandwidth_bytes_per_s: int
    latency_s: float
    """One message's latency across the link (InfiniBand NDR through one switch: ~5 µs)."""
    domain_gpus: int | None = None
    """GPUs of one NVLink domain (``nvlink_domain`` only)."""


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
    inter_node: InterNodeLink | None = None
    """The link between nodes as given; None: :func:`~servesize.core.hardware.inter_node_link`
    applies the documented default for the interconnect."""
    memory_type: str | None = None
    tdp_w: float | None = None
    sm_count: int | None = None
    """Streaming multiprocessors (NVIDIA) or compute units (AMD); None when not published."""
    l2_cache_bytes: int | None = None
    boost_clock_hz: float | None = None
    host_link_bytes_per_s: int | None = None
    """GPU-to-host bandwidth per direction (PCIe or NVLink-C2C) a KV offload tier loads at; None:
    :func:`~servesize.core.hardware.host_link_bandwidth` applies the documented default."""
    host_memory_bytes: int | None = None
    """Host memory per GPU (the node's DRAM over its GPUs); None: not known, not checked."""

    def peak_flop_per_s(self, dtype: str) -> float | None:
        """Dense peak of ``dtype`` in FLOP/s (ops/s for int8); ``None`` when unsupported."""
        tflops = self.peak_tflop_per_s.get(dtype)
        return None if tflops is None else tflops * 1e12
