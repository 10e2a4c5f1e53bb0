"""Datasheet profiles from the reference GPU table (``gpus.json``), with explicit units.

Units: the table's ``memory_gb`` is the vendor's advertised capacity. For the HBM parts the
advertised figure is binary: an "80 GB" H100 holds 80 GiB (nvidia-smi reports 81,559 MiB of it
usable) and a "141 GB" H200 reports 143,771 MiB, so ``memory_gb`` is read as GiB (2^30 bytes).
Bandwidths are decimal, as vendors quote them: TB/s = 10^12 bytes/s, GB/s = 10^9 bytes/s.
Cache sizes are binary, as NVIDIA's and AMD's "50 MB L2" are: ``l2_cache_mb`` · 2^20 bytes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from servesize.core.hardware.hostlink import NVLINK_C2C_BYTES_PER_S, pcie_host_link_bytes_per_s
from servesize.core.hardware.internode import NVL72_DOMAIN
from servesize.core.hardware.spec import HardwareSpec, Interconnect, InterNodeLink

GIB = 2**30
MIB = 2**20
TB = 10**12
GB = 10**9

_DTYPE_KEYS = {
    "fp32": "fp32",
    "tf32": "tf32",
    "bf16": "bf16",
    "fp16": "fp16",
    "fp8": "fp8",
    "int8_tops": "int8",
    "fp4": "fp4",
}


def profile_id_for(name: str) -> str:
    """Stable id from a datasheet name: ``"A100 SXM 80GB"`` → ``"a100-sxm-80gb"``.

    Parenthesised remarks are dropped (``"GB200 (per Blackwell GPU)"`` → ``"gb200"``).

    >>> profile_id_for("H100 SXM"), profile_id_for("GB200 (per Blackwell GPU)")
    ('h100-sxm', 'gb200')
    """
    bare = re.sub(r"\(.*?\)", "", name)
    return re.sub(r"[^a-z0-9]+", "-", bare.lower()).strip("-")


def _interconnect(entry: Mapping[str, Any]) -> Interconnect | None:
    link = entry.get("interconnect") or {}
    if link.get("nvlink_gb_s_bidirectional"):
        per_direction = int(link["nvlink_gb_s_bidirectional"] * GB) // 2
        # NVL72: compute trays of 4 GPUs; the 72-GPU NVLink domain is the inter-node link.
        gpus = 4 if "nvl72_domain" in link else 8
        return Interconnect(kind="nvlink", bandwidth_bytes_per_s=per_direction, gpus_per_node=gpus)
    if link.get("infinity_fabric_gb_s"):
        # AMD quotes the aggregate peer bandwidth per GPU; treat it as bidirectional.
        per_direction = int(link["infinity_fabric_gb_s"] * GB) // 2
        return Interconnect(kind="infinity_fabric", bandwidth_bytes_per_s=per_direction)
    if link.get("pcie"):
        return Interconnect(kind="pcie", bandwidth_bytes_per_s=None)
    return None


def _inter_node(entry: Mapping[str, Any]) -> InterNodeLink | None:
    """NVL72 parts: their NVLink switch domain; others take the default for their link."""
    return NVL72_DOMAIN if "nvl72_domain" in (entry.get("interconnect") or {}) else None


def _host_link(entry: Mapping[str, Any]) -> int | None:
    """NVL72 parts (Grace-Blackwell): NVLink-C2C; others their PCIe generation's figure."""
    link = entry.get("interconnect") or {}
    if "nvl72_domain" in link:
        return NVLINK_C2C_BYTES_PER_S
    return pcie_host_link_bytes_per_s(link.get("pcie"))


def _watts(value: Any) -> float | None:
    """TDP in watts; a range such as ``"350-400"`` (configurable parts) gives its upper end."""
    if value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    numbers = re.findall(r"\d+(?:\.\d+)?", str(value))
    return max(float(n) for n in numbers) if numbers else None


def datasheet_spec(entry: Mapping[str, Any]) -> HardwareSpec:
    """A :class:`HardwareSpec` from one ``gpus[]`` entry of the reference table."""
    dense = entry.get("dense_tflops") or {}
    peaks = {ours: dense.get(theirs) for theirs, ours in _DTYPE_KEYS.items()}
    return HardwareSpec(
        id=profile_id_for(str(entry["name"])),
        vendor=str(entry["vendor"]).split(" ")[0],
        name=str(entry["name"]),
        memory_bytes=round(float(entry["memory_gb"]) * GIB),
        memory_bandwidth_bytes_per_s=round(float(entry["memory_bandwidth_tb_s"]) * TB),
        peak_tflop_per_s={k: (None if v is None else float(v)) for k, v in peaks.items()},
        interconnect=_interconnect(entry),
        inter_node=_inter_node(entry),
        host_link_bytes_per_s=_host_link(entry),
        memory_type=entry.get("memory_type"),
        tdp_w=_watts(entry.get("tdp_w")),
        sm_count=None if entry.get("sm_count") is None else int(entry["sm_count"]),
        l2_cache_bytes=(
            None if entry.get("l2_cache_mb") is None else round(float(entry["l2_cache_mb"]) * MIB)
        ),
        boost_clock_hz=(
            None if entry.get("boost_clock_mhz") is None else float(entry["boost_clock_mhz"]) * 1e6
        ),
    )
