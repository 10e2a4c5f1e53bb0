"""Which model-parallel groups may span nodes.

A TP × PP group wider than one node needs a link between nodes
(:func:`~servesize.core.hardware.inter_node_link`: the profile's ``inter_node`` or the
documented default for its interconnect). With one, TP may exceed a node (its all-reduces are
then priced over the network, ``core/steptime/internode.py``) and pipeline stages may sit on
other nodes. An ``nvlink_domain`` link (GB200/GB300 NVL72) joins only the GPUs of its domain, so
the group must stay inside it. Data-parallel ranks may always sit on other nodes (each holds a
whole model copy; MoE all-to-alls across nodes go over the link, or the default network
bandwidth when none is known).
"""

from __future__ import annotations

from servesize.core.hardware import HardwareSpec, inter_node_link, nvlink_domain_gpus

__all__ = ["multi_node_problem", "nodes_spanned"]


def nodes_spanned(hardware: HardwareSpec, gpus: int) -> int:
    """Nodes ``gpus`` GPUs fill (``⌈gpus / gpus_per_node⌉``; 1 without an interconnect)."""
    node = hardware.interconnect.gpus_per_node if hardware.interconnect else gpus
    return -(-gpus // max(node, 1))


def multi_node_problem(hardware: HardwareSpec, *, tp: int, pp: int) -> str | None:
    """Why a TP × PP group cannot be placed on ``hardware``'s nodes, or None.

    >>> from servesize.core.hardware import Interconnect
    >>> pcie = HardwareSpec(id="x", vendor="v", name="L4", memory_bytes=1,
    ...     memory_bandwidth_bytes_per_s=1,
    ...     interconnect=Interconnect(kind="pcie", bandwidth_bytes_per_s=None))
    >>> multi_node_problem(pcie, tp=8, pp=2)[:40]
    'TP·PP = 8·2 = 16 GPUs exceed the 8 GPUs '
    """
    if hardware.interconnect is None:
        return None
    node = hardware.interconnect.gpus_per_node
    group = tp * pp
    if group <= node:
        return None
    link = inter_node_link(hardware)
    if link is None:
        return (
            f"TP·PP = {tp}·{pp} = {group} GPUs exceed the {node} GPUs per node of "
            f"{hardware.name}, and the profile names no link between nodes (give "
            "hardware.inter_node)"
        )
    domain = nvlink_domain_gpus(hardware) or node
    if link.kind == "nvlink_domain" and group > domain:
        return (
            f"TP·PP = {tp}·{pp} = {group} GPUs exceed the {domain}-GPU NVLink domain of "
            f"{hardware.name}"
        )
    return None
