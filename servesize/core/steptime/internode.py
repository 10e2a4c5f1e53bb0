"""Collectives that cross nodes: TP all-reduce, MoE all-to-all and pipeline hand-offs.

Notation as in :mod:`.communication`: ``M`` bytes per GPU, ``N`` GPUs in the group, ``g`` of
them per node (``N`` split evenly over ``n = ⌈N / node⌉`` nodes), ``B`` the NVLink per GPU and
direction, ``B_net`` the inter-node link per GPU and direction (the profile's ``inter_node``,
:func:`~servesize.core.hardware.inter_node_link`), ``h_net`` its latency, ``η_net`` its
achieved fraction (``CollectiveConstants.network_link_efficiency``).

* **All-reduce over nodes** (:func:`hierarchical_all_reduce_time_s`): reduce-scatter inside
  each node, an all-reduce of the ``M/g`` shard between the ``n`` nodes (each GPU on its own
  adapter), all-gather inside the node:
  ``t = α_p + 2(g−1)·h + 2(n−1)·h_net + 2(g−1)/g · M/(B·η_p) + 2(n−1)/n · M/(g·B_net·η_net)``,
  the faster of NCCL's LL (half the bandwidth) and Simple protocols. The network term is what
  NCCL's multi-channel ring reaches with one NIC per GPU and channel and its tree algorithms
  approach (``NVIDIA/nccl:src/graph/tuning.cc``: inter-node bandwidth per channel times the
  channels, one per NIC). vLLM and SGLang run NCCL whenever the TP group spans nodes
  (``CustomAllreduce.__init__`` disables the custom kernel "for multi-node case").
* **All-to-all over nodes** (:func:`cross_node_all_to_all_time_s`): with uniform routing a
  share ``(g−1)/N`` of a GPU's ``M`` bytes goes to peers of its node over NVLink and
  ``(N−g)/N`` off node over the network, at the same time:
  ``t = α + h_net + max((g−1)/N · M/(B·η_link), (N−g)/N · M/(B_net·η_net))``.
* **Pipeline hand-off across nodes** (:func:`cross_node_hand_off_time_s`): vLLM V1 sends the
  stage's ``IntermediateTensors`` (``hidden_states`` and ``residual``, ``k = 2`` tensors of
  ``tokens · hidden · bytes``) with ``send_tensor_dict(..., all_gather_group=get_tp_group())``
  (``vllm/v1/worker/gpu_worker.py Worker.execute_model``; ``GroupCoordinator.send_tensor_dict``
  sends each TP rank's ``1/TP`` slice and the next stage all-gathers it):
  ``t = h_net + k·M/(TP·B_net·η_net)`` plus, for ``TP > 1``, the receivers' all-gather
  ``α + (TP−1)/TP · k·M/(B·η_link)``.
"""

from __future__ import annotations

import math

import numpy as np

from servesize.core.hardware import HardwareSpec, inter_node_link, nvlink_domain_gpus
from servesize.core.steptime._arrays import ArrayLike, FloatArray, as_float_array
from servesize.core.steptime.communication import (
    DEFAULT_COLLECTIVE_CONSTANTS,
    DEFAULT_COLLECTIVE_LATENCY_S,
    DEFAULT_LINK_EFFICIENCY,
    DEFAULT_NETWORK_BANDWIDTH_BYTES_PER_S,
    CollectiveConstants,
    LinkTopology,
)

__all__ = [
    "NVLS_MIN_LINK_BYTES_PER_S",
    "PIPELINE_TENSORS",
    "cross_node_all_to_all_time_s",
    "cross_node_hand_off_time_s",
    "group_nodes",
    "hardware_topology",
    "hierarchical_all_reduce_time_s",
    "spans_nodes",
]

PIPELINE_TENSORS = 2
"""Tensors a vLLM stage hands to the next: ``hidden_states`` and ``residual``
(``IntermediateTensors`` of the decoder models, e.g. ``deepseek_v2.py DeepseekV2Model``)."""

NVLS_MIN_LINK_BYTES_PER_S = 450e9
"""NVLink at 450 GB/s or more per direction is NVLink 4 or later on an NVSwitch baseboard (HGX
H100/H200/H20, B200, GB200), whose switches reduce and multicast (NVLS); A100's NVLink 3
(300 GB/s) and the NVLink bridges of PCIe cards do not."""


def hardware_topology(
    hardware: HardwareSpec,
    network_bandwidth_bytes_per_s: float | None,
    *,
    fallback_bytes_per_s: float,
) -> LinkTopology:
    """What joins ``hardware``'s GPUs: NVLink (``fallback_bytes_per_s`` when the profile
    names no bandwidth) inside the NVLink domain (a node, or an NVL72 rack), the inter-node
    link beyond it (``network_bandwidth_bytes_per_s`` overrides its bandwidth)."""
    link = hardware.interconnect
    bandwidth = link.bandwidth_bytes_per_s if link else None
    nvlink = link is not None and link.kind == "nvlink" and bool(bandwidth)
    between = inter_node_link(hardware)
    if network_bandwidth_bytes_per_s is None:
        network_bandwidth_bytes_per_s = float(
            between.bandwidth_bytes_per_s if between else DEFAULT_NETWORK_BANDWIDTH_BYTES_PER_S
        )
    return LinkTopology(
        link_bandwidth_bytes_per_s=float(bandwidth or fallback_bytes_per_s),
        fully_connected=bool(bandwidth),
        multicast=nvlink and float(bandwidth or 0) >= NVLS_MIN_LINK_BYTES_PER_S,
        gpus_per_node=nvlink_domain_gpus(hardware),
        network_bandwidth_bytes_per_s=network_bandwidth_bytes_per_s,
        network_latency_s=between.latency_s if between else None,
    )


def spans_nodes(num_gpus: int, topology: LinkTopology) -> bool:
    """Whether a group of ``num_gpus`` leaves one NVLink domain."""
    node = topology.gpus_per_node
    return node is not None and num_gpus > node


def group_nodes(num_gpus: int, topology: LinkTopology) -> tuple[int, int]:
    """``(n, g)``: nodes a group of ``num_gpus`` fills and its GPUs per node (even split)."""
    node = topology.gpus_per_node or num_gpus
    nodes = math.ceil(num_gpus / node)
    return nodes, math.ceil(num_gpus / nodes)


def _network(topology: LinkTopology, constants: CollectiveConstants) -> tuple[float, float]:
    """``(B_net · η_net, h_net)``."""
    hop = topology.network_latency_s
    return (
        topology.network_bandwidth_bytes_per_s * constants.network_link_efficiency,
        constants.network_hop_latency_s if hop is None else hop,
    )


def hierarchical_all_reduce_time_s(
    message_bytes: ArrayLike,
    *,
    num_gpus: int,
    topology: LinkTopology,
    constants: CollectiveConstants = DEFAULT_COLLECTIVE_CONSTANTS,
) -> FloatArray:
    """One all-reduce of ``message_bytes`` per GPU over ``num_gpus`` on several nodes (module
    docstring).

    >>> c = CollectiveConstants(nccl_latency_s=0.0, nccl_simple_latency_s=0.0,
    ...     nccl_hop_latency_s=0.0, nccl_link_efficiency=1.0, network_hop_latency_s=0.0,
    ...     network_link_efficiency=1.0)
    >>> t = LinkTopology(link_bandwidth_bytes_per_s=8e9, gpus_per_node=8,
    ...     network_bandwidth_bytes_per_s=1e9)
    >>> hierarchical_all_reduce_time_s([8e9], num_gpus=16, topology=t, constants=c).tolist()
    [2.75]
    """
    m = as_float_array(message_bytes)
    n, g = group_nodes(num_gpus, topology)
    net, hop_net = _network(topology, constants)
    b = topology.link_bandwidth_bytes_per_s * constants.nccl_link_efficiency
    hops = 2.0 * (g - 1) * constants.nccl_hop_latency_s + 2.0 * (n - 1) * hop_net
    moved = 2.0 * (g - 1) / g * m / b + 2.0 * (n - 1) / n * m / (g * net)
    simple = constants.nccl_simple_latency_s + hops + moved
    low_latency = constants.nccl_latency_s + hops + 2.0 * moved
    t = np.minimum(simple, low_latency)
    return np.asarray(np.where(m > 0, t, 0.0), dtype=np.float64)


def cross_node_all_to_all_time_s(
    message_bytes: ArrayLike,
    *,
    num_gpus: int,
    topology: LinkTopology,
    constants: CollectiveConstants = DEFAULT_COLLECTIVE_CONSTANTS,
    latency_s: float = DEFAULT_COLLECTIVE_LATENCY_S,
    link_efficiency: float = DEFAULT_LINK_EFFICIENCY,
) -> FloatArray:
    """One all-to-all of ``message_bytes`` per GPU among ``num_gpus`` on several nodes, the
    off-node share at the network bandwidth (module docstring)."""
    m = as_float_array(message_bytes)
    _, g = group_nodes(num_gpus, topology)
    net, hop_net = _network(topology, constants)
    on_node = (g - 1) / num_gpus * m / (topology.link_bandwidth_bytes_per_s * link_efficiency)
    off_node = (num_gpus - g) / num_gpus * m / net
    t = latency_s + hop_net + np.maximum(on_node, off_node)
    return np.asarray(np.where(m > 0, t, 0.0), dtype=np.float64)


def cross_node_hand_off_time_s(
    activation_bytes: ArrayLike,
    *,
    tensor_parallel_size: int,
    topology: LinkTopology,
    constants: CollectiveConstants = DEFAULT_COLLECTIVE_CONSTANTS,
    tensors: int = PIPELINE_TENSORS,
    latency_s: float = DEFAULT_COLLECTIVE_LATENCY_S,
    link_efficiency: float = DEFAULT_LINK_EFFICIENCY,
) -> FloatArray:
    """One hand-off of ``activation_bytes`` (``tokens · hidden · bytes``, one tensor) to a
    stage on another node: each TP rank sends its ``1/TP`` slice of every tensor over its own
    adapter, the receivers all-gather (module docstring)."""
    m = as_float_array(activation_bytes) * tensors
    tp = tensor_parallel_size
    net, hop_net = _network(topology, constants)
    t = hop_net + m / (tp * net)
    if tp > 1:
        inside = topology.link_bandwidth_bytes_per_s * link_efficiency
        gather_b = net if spans_nodes(tp, topology) else inside
        t = t + latency_s + (tp - 1) / tp * m / gather_b
    return np.asarray(np.where(m > 0, t, 0.0), dtype=np.float64)
