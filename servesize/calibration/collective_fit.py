"""Fit the all-reduce constants of :mod:`servesize.core.steptime.communication` on measured
collective tables (``collectives.csv``: NCCL and TensorRT-LLM custom all-reduce, 2/4/8 GPUs).

Least squares on ``log(predicted / measured)``, so every message size weighs alike:

1. NCCL (ring LL/Simple, NVLS where the node multicasts) on the ``nccl`` all-reduce tables:
   ``nccl_latency_s``, ``nccl_hop_latency_s``, ``nccl_link_efficiency``,
   ``nccl_simple_latency_s``, ``nvls_latency_s``, ``nvls_link_efficiency``;
2. ``one_shot_latency_s`` and ``custom_link_efficiency`` on the ``custom`` rows (TensorRT-LLM's
   AUTO choice) at the sizes where TensorRT-LLM runs its own one-shot or two-shot kernel
   (:func:`~servesize.core.steptime.communication.all_reduce_algorithm`), each priced by that
   kernel's formula; ``two_shot_latency_s = 2·one_shot_latency_s``.

``python -m bench.accuracy`` prints the result next to the defaults.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
from scipy.optimize import least_squares

from servesize.core.steptime.communication import (
    DEFAULT_COLLECTIVE_CONSTANTS,
    CollectiveConstants,
    LinkTopology,
    all_reduce_algorithm,
    nccl_all_reduce_time_s,
    one_shot_all_reduce_time_s,
    two_shot_all_reduce_time_s,
)
from servesize.core.steptime.tables import CollectiveTable

__all__ = ["custom_kernel_rows", "fit_collective_constants"]


def _all_reduce(tables: Sequence[CollectiveTable], implementation: str) -> list[CollectiveTable]:
    return [t for t in tables if t.op == "all_reduce" and t.implementation == implementation]


def custom_kernel_rows(
    custom: CollectiveTable, topology: LinkTopology
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(bytes, seconds, algorithm)`` of the custom rows where TensorRT-LLM runs its own
    kernel."""
    algorithm = all_reduce_algorithm(
        "trtllm", custom.message_bytes, num_gpus=custom.num_gpus, topology=topology
    )
    keep = algorithm != "nccl"
    return custom.message_bytes[keep], custom.latency_s[keep], algorithm[keep]


def fit_collective_constants(
    tables: Sequence[CollectiveTable],
    *,
    link_bandwidth_bytes_per_s: float,
    multicast: bool = True,
) -> CollectiveConstants:
    """Constants fitted on the all-reduce tables (see the module docstring)."""
    topology = LinkTopology(
        link_bandwidth_bytes_per_s=link_bandwidth_bytes_per_s, multicast=multicast, gpus_per_node=8
    )
    base = DEFAULT_COLLECTIVE_CONSTANTS
    nccl = _all_reduce(tables, "nccl")

    def nccl_constants(x: np.ndarray) -> CollectiveConstants:
        v = [float(value) for value in x]
        return replace(
            base,
            nccl_latency_s=v[0] * 1e-6,
            nccl_hop_latency_s=v[1] * 1e-6,
            nccl_link_efficiency=v[2],
            nccl_simple_latency_s=v[3] * 1e-6,
            nvls_latency_s=v[4] * 1e-6,
            nvls_link_efficiency=v[5],
        )

    def nccl_residuals(x: np.ndarray) -> np.ndarray:
        c = nccl_constants(x)
        return np.concatenate(
            [
                np.log(
                    nccl_all_reduce_time_s(
                        t.message_bytes, num_gpus=t.num_gpus, topology=topology, constants=c
                    )
                    / t.latency_s
                )
                for t in nccl
            ]
        )

    fitted = base
    if nccl:
        x0 = np.array([5.0, 1.0, 0.7, 20.0, 40.0, 0.6])
        lower = np.array([0.0, 0.0, 0.05, 0.0, 0.0, 0.05])
        upper = np.array([100.0, 20.0, 1.0, 500.0, 500.0, 1.0])
        fitted = nccl_constants(least_squares(nccl_residuals, x0, bounds=(lower, upper)).x)

    rows = [(t.num_gpus, *custom_kernel_rows(t, topology)) for t in _all_reduce(tables, "custom")]
    rows = [r for r in rows if r[1].size]
    if not rows:
        return fitted

    def custom_residuals(x: np.ndarray) -> np.ndarray:
        c = replace(
            fitted, one_shot_latency_s=float(x[0]) * 1e-6, custom_link_efficiency=float(x[1])
        )
        out = []
        b = link_bandwidth_bytes_per_s
        for gpus, size, seconds, algorithm in rows:
            one = one_shot_all_reduce_time_s(
                size, num_gpus=gpus, link_bandwidth_bytes_per_s=b, constants=c
            )
            two = two_shot_all_reduce_time_s(
                size, num_gpus=gpus, link_bandwidth_bytes_per_s=b, constants=c
            )
            out.append(np.log(np.where(algorithm == "one_shot", one, two) / seconds))
        return np.concatenate(out)

    x = least_squares(custom_residuals, np.array([3.0, 0.6]), bounds=([0.0, 0.05], [50.0, 1.0])).x
    return replace(
        fitted, one_shot_latency_s=float(x[0]) * 1e-6, custom_link_efficiency=float(x[1])
    )
