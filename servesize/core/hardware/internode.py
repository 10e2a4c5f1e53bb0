"""The link between nodes: its documented defaults and the NVLink domain a collective stays in.

Defaults when a profile gives no ``inter_node`` (:func:`default_inter_node`), by what joins its
GPUs inside a node:

* NVLink at 450 GB/s or more per direction (H100/H200/H20 SXM, B200, B300): InfiniBand NDR,
  one 400 Gb/s adapter per GPU = 50e9 B/s each way, 5 µs. NVIDIA DGX H100 and DGX B200
  datasheets: "8x single-port NVIDIA ConnectX-7 VPI, up to 400 Gb/s InfiniBand/Ethernet" for
  8 GPUs.
* slower NVLink (A100's NVLink 3, the bridges of H100 PCIe/NVL): InfiniBand HDR, 200 Gb/s per
  GPU = 25e9 B/s, 5 µs (DGX A100 datasheet: 8x single-port ConnectX-6 VPI 200 Gb/s HDR).
* AMD Infinity Fabric (MI300X/MI325X/MI355X platforms, one 400 GbE RoCE NIC per GPU):
  Ethernet at 50e9 B/s, 10 µs.
* PCIe only or no interconnect: none; a deployment wider than one node must give one.

GB200/GB300 NVL72 (datasheet profiles): trays of 4 GPUs (``gpus_per_node`` 4) in one NVLink
switch domain of 72 GPUs at NVLink 5 (1.8 TB/s bidirectional, 900e9 B/s each way; NVIDIA
GB200 NVL72 page), kind ``nvlink_domain``: collectives up to 72 GPUs run over NVLink.

Latencies are one message through one switch level (InfiniBand NDR switch port-to-port
~130 ns plus adapter and NCCL proxy time, about 5 µs end to end in nccl-tests' small-message
rows); defaults, not fitted.
"""

from __future__ import annotations

from servesize.core.hardware.spec import (
    INTER_NODE_KINDS,
    HardwareSpec,
    Interconnect,
    InterNodeLink,
)

__all__ = [
    "ETHERNET_400G",
    "INFINIBAND_HDR",
    "INFINIBAND_NDR",
    "INTER_NODE_KINDS",
    "NVL72_DOMAIN",
    "default_inter_node",
    "inter_node_link",
    "inter_node_problem",
    "nvlink_domain_gpus",
]

INFINIBAND_NDR = InterNodeLink(
    kind="infiniband", bandwidth_bytes_per_s=50_000_000_000, latency_s=5e-6
)
"""400 Gb/s NDR per GPU (DGX H100, DGX B200)."""
INFINIBAND_HDR = InterNodeLink(
    kind="infiniband", bandwidth_bytes_per_s=25_000_000_000, latency_s=5e-6
)
"""200 Gb/s HDR per GPU (DGX A100)."""
ETHERNET_400G = InterNodeLink(kind="ethernet", bandwidth_bytes_per_s=50_000_000_000, latency_s=1e-5)
"""400 GbE RoCE per GPU (AMD Instinct platforms)."""
NVL72_DOMAIN = InterNodeLink(
    kind="nvlink_domain", bandwidth_bytes_per_s=900_000_000_000, latency_s=1e-6, domain_gpus=72
)
"""GB200/GB300 NVL72: 72 GPUs on one NVLink 5 switch fabric, 900 GB/s per direction."""

_NVLINK4_BYTES_PER_S = 450_000_000_000


def default_inter_node(interconnect: Interconnect | None) -> InterNodeLink | None:
    """The documented default for a profile without ``inter_node`` (module docstring).

    >>> default_inter_node(Interconnect(kind="nvlink", bandwidth_bytes_per_s=450 * 10**9))
    ... # doctest: +ELLIPSIS
    InterNodeLink(kind='infiniband', bandwidth_bytes_per_s=50000000000, latency_s=5e-06, ...)
    >>> default_inter_node(Interconnect(kind="pcie", bandwidth_bytes_per_s=None)) is None
    True
    """
    if interconnect is None:
        return None
    bandwidth = interconnect.bandwidth_bytes_per_s or 0
    if interconnect.kind == "nvlink" and bandwidth >= _NVLINK4_BYTES_PER_S:
        return INFINIBAND_NDR
    if interconnect.kind == "nvlink" and bandwidth > 0:
        return INFINIBAND_HDR
    if interconnect.kind == "infinity_fabric":
        return ETHERNET_400G
    return None


def inter_node_link(hardware: HardwareSpec) -> InterNodeLink | None:
    """The profile's link between nodes, else its default; None: none known."""
    return hardware.inter_node or default_inter_node(hardware.interconnect)


def nvlink_domain_gpus(hardware: HardwareSpec) -> int | None:
    """GPUs one collective reaches without the inter-node network: the NVLink domain of an
    ``nvlink_domain`` link, else one node; None without an interconnect."""
    link = inter_node_link(hardware)
    if link is not None and link.kind == "nvlink_domain" and link.domain_gpus:
        return link.domain_gpus
    return hardware.interconnect.gpus_per_node if hardware.interconnect else None


def inter_node_problem(link: InterNodeLink) -> str | None:
    """What is wrong with a link given in a request, or None."""
    if link.kind not in INTER_NODE_KINDS:
        return f"kind {link.kind!r} is not one of {', '.join(INTER_NODE_KINDS)}"
    if link.bandwidth_bytes_per_s <= 0 or link.latency_s < 0:
        return "bandwidth must be > 0 and latency >= 0"
    if link.kind == "nvlink_domain" and not link.domain_gpus:
        return "an nvlink_domain link needs domain_gpus (72 for NVL72)"
    if link.kind != "nvlink_domain" and link.domain_gpus is not None:
        return "domain_gpus applies to kind nvlink_domain only"
    return None
