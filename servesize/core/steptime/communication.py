"""Collective communication times: ring model with per-call latency, or a measured table.

Ring all-reduce on ``p`` GPUs moves ``2(p−1)/p`` of the message over each GPU's link
(reduce-scatter then all-gather), so with per-direction link bandwidth ``B`` and a fixed
per-call latency ``α``

``t_allreduce = α + 2(p−1)/p · bytes / (B·η_link)``

(nccl-tests' "bus bandwidth" convention, NVIDIA/nccl-tests:doc/PERFORMANCE.md). All-to-all
sends ``(p−1)/p`` of each GPU's buffer away: ``t = α + (p−1)/p · bytes / (B·η_link)``. A
pipeline hand-off is one point-to-point send of the activations: ``t = α + bytes / B``.

Defaults, from ``servesize/data/h100/collectives.csv`` (aiconfigurator-core 0.12.0, H100 SXM):

* ``DEFAULT_COLLECTIVE_LATENCY_S = 6 µs``: NCCL all-reduce of ≤ 64 KiB takes 6.2 µs on 2 GPUs
  and 15.5 µs on 8; the engines' own one-shot kernels (TensorRT-LLM custom all-reduce) take
  2.7–3.3 µs; 6 µs sits between, nearer the small-message path the engines use.
* ``DEFAULT_LINK_EFFICIENCY = 0.8``: a 512 MiB NCCL all-reduce reaches a bus bandwidth of
  320 GB/s on 2 GPUs and 425 GB/s on 8, of the 450 GB/s NVLink 4 per direction.
"""

from __future__ import annotations

import numpy as np

from servesize.core.steptime._arrays import ArrayLike, FloatArray, as_float_array
from servesize.core.steptime.tables import CollectiveTable

__all__ = [
    "DEFAULT_COLLECTIVE_LATENCY_S",
    "DEFAULT_LINK_EFFICIENCY",
    "all_reduce_time_s",
    "all_to_all_time_s",
    "point_to_point_time_s",
]

DEFAULT_COLLECTIVE_LATENCY_S = 6e-6
DEFAULT_LINK_EFFICIENCY = 0.8


def _check(num_gpus: int, link_bandwidth_bytes_per_s: float) -> None:
    if num_gpus < 1:
        raise ValueError(f"num_gpus must be >= 1, got {num_gpus}")
    if link_bandwidth_bytes_per_s <= 0:
        raise ValueError(f"link bandwidth must be > 0, got {link_bandwidth_bytes_per_s}")


def all_reduce_time_s(
    message_bytes: ArrayLike,
    *,
    num_gpus: int,
    link_bandwidth_bytes_per_s: float,
    latency_s: float = DEFAULT_COLLECTIVE_LATENCY_S,
    link_efficiency: float = DEFAULT_LINK_EFFICIENCY,
    table: CollectiveTable | None = None,
) -> FloatArray:
    """One all-reduce of ``message_bytes`` per GPU (0 for a single GPU or an empty message).

    >>> all_reduce_time_s([1e9], num_gpus=2, link_bandwidth_bytes_per_s=1e9,
    ...                   latency_s=0.0, link_efficiency=1.0).tolist()
    [1.0]
    """
    _check(num_gpus, link_bandwidth_bytes_per_s)
    size = as_float_array(message_bytes)
    if num_gpus == 1:
        return np.zeros_like(size)
    if table is not None:
        t = table.latency(np.maximum(size, 1.0))
    else:
        bus = 2 * (num_gpus - 1) / num_gpus
        t = latency_s + bus * size / (link_bandwidth_bytes_per_s * link_efficiency)
    return np.where(size > 0, t, 0.0)


def all_to_all_time_s(
    message_bytes: ArrayLike,
    *,
    num_gpus: int,
    link_bandwidth_bytes_per_s: float,
    latency_s: float = DEFAULT_COLLECTIVE_LATENCY_S,
    link_efficiency: float = DEFAULT_LINK_EFFICIENCY,
    table: CollectiveTable | None = None,
) -> FloatArray:
    """One all-to-all where each GPU holds ``message_bytes`` (a ``1/p`` share stays local)."""
    _check(num_gpus, link_bandwidth_bytes_per_s)
    size = as_float_array(message_bytes)
    if num_gpus == 1:
        return np.zeros_like(size)
    if table is not None:
        t = table.latency(np.maximum(size, 1.0))
    else:
        share = (num_gpus - 1) / num_gpus
        t = latency_s + share * size / (link_bandwidth_bytes_per_s * link_efficiency)
    return np.where(size > 0, t, 0.0)


def point_to_point_time_s(
    message_bytes: ArrayLike,
    *,
    link_bandwidth_bytes_per_s: float,
    latency_s: float = DEFAULT_COLLECTIVE_LATENCY_S,
    link_efficiency: float = DEFAULT_LINK_EFFICIENCY,
) -> FloatArray:
    """One send of ``message_bytes`` to the next pipeline stage."""
    _check(1, link_bandwidth_bytes_per_s)
    size = as_float_array(message_bytes)
    t = latency_s + size / (link_bandwidth_bytes_per_s * link_efficiency)
    return np.where(size > 0, t, 0.0)
