"""The link between a GPU and its host's memory, which a KV offload tier loads over.

Per direction, achieved (what ``cudaMemcpyAsync`` of pinned host memory reaches), by link:

* PCIe Gen5 x16: 64 GB/s nominal per direction; about 50e9 B/s achieved — the vLLM blog
  (Ozeri & Harnik, "Inside vLLM's New KV Offloading Connector", 2026-01-08, Figures 3–4:
  "for single-direction both can get up to about 50GB/s", H100 80GB HBM3, 2 MB blocks).
* PCIe Gen4 x16: 32 GB/s nominal; 25e9 B/s achieved (the project's PCIe figure,
  :data:`~servesize.core.steptime.PCIE_LINK_BYTES_PER_S`). Gen3: half of it, Gen6: twice Gen5.
* NVLink-C2C (GH200, GB200, GB300: Grace CPU and GPU on one module): 900 GB/s bidirectional,
  450e9 B/s per direction, nominal (NVIDIA Grace Hopper Superchip datasheet); no achieved figure
  is in the repository, so the nominal one is used.

A profile's ``host_link_bytes_per_s`` overrides the default; a profile that gives none and
names no C2C part is taken to be on PCIe Gen4 (the conservative choice).
"""

from __future__ import annotations

import re

from servesize.core.hardware.spec import HardwareSpec

__all__ = [
    "NVLINK_C2C_BYTES_PER_S",
    "PCIE_GEN4_HOST_BYTES_PER_S",
    "PCIE_GEN5_HOST_BYTES_PER_S",
    "host_link_bandwidth",
    "pcie_host_link_bytes_per_s",
]

PCIE_GEN5_HOST_BYTES_PER_S = 50_000_000_000
"""PCIe Gen5 x16, achieved per direction (vLLM blog, 2026-01-08)."""
PCIE_GEN4_HOST_BYTES_PER_S = 25_000_000_000
"""PCIe Gen4 x16, achieved per direction."""
NVLINK_C2C_BYTES_PER_S = 450_000_000_000
"""NVLink-C2C, nominal per direction (900 GB/s bidirectional)."""

_C2C_PARTS = re.compile(r"\bg[hb]\d{3}\b")
"""Grace superchips: GH200, GB200, GB300."""
_PCIE_GENERATION_BYTES_PER_S = {
    3: PCIE_GEN4_HOST_BYTES_PER_S // 2,
    4: PCIE_GEN4_HOST_BYTES_PER_S,
    5: PCIE_GEN5_HOST_BYTES_PER_S,
    6: 2 * PCIE_GEN5_HOST_BYTES_PER_S,
}


def pcie_host_link_bytes_per_s(text: str | None) -> int | None:
    """Achieved per-direction bandwidth of a datasheet's PCIe field (``"Gen5 x16"``).

    >>> pcie_host_link_bytes_per_s("Gen5 x16 (no NVLink)"), pcie_host_link_bytes_per_s(None)
    (50000000000, None)
    """
    match = re.search(r"gen\s*(\d)", text or "", flags=re.IGNORECASE)
    return _PCIE_GENERATION_BYTES_PER_S.get(int(match.group(1))) if match else None


def host_link_bandwidth(hardware: HardwareSpec) -> tuple[int, str]:
    """The GPU-to-host bandwidth per direction and where it comes from (module docstring).

    >>> from servesize.core.hardware.spec import HardwareSpec
    >>> gb200 = HardwareSpec(id="gb200", vendor="NVIDIA", name="GB200 (per Blackwell GPU)",
    ...                      memory_bytes=1, memory_bandwidth_bytes_per_s=1)
    >>> host_link_bandwidth(gb200)[0]
    450000000000
    """
    if hardware.host_link_bytes_per_s:
        return hardware.host_link_bytes_per_s, "the profile's host_link_bytes_per_s"
    if _C2C_PARTS.search(f"{hardware.id} {hardware.name}".lower()):
        return NVLINK_C2C_BYTES_PER_S, "NVLink-C2C, 450 GB/s per direction (nominal)"
    return PCIE_GEN4_HOST_BYTES_PER_S, "default: PCIe Gen4 x16, 25 GB/s per direction achieved"
