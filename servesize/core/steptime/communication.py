"""Collective communication times: each all-reduce algorithm as the engines run it, or a table.

Notation: ``M`` message bytes per GPU, ``N`` GPUs, ``B`` per-direction link bandwidth per GPU
(NVLink 4 on H100: 450 GB/s), ``η`` the achieved fraction of it.

All-reduce algorithms (:class:`CollectiveConstants` holds their constants):

* **one-shot** (engines' custom kernel): every GPU reads the other ``N − 1`` buffers over
  NVLink and reduces locally, ``t = α₁ + (N − 1)·M / (B·η_c)``;
* **two-shot** (custom): reduce-scatter then all-gather through peer buffers, each GPU moving
  ``2(N − 1)/N · M``, ``t = α₂ + 2(N − 1)/N · M / (B·η_c)``, ``α₂ = 2·α₁`` (two
  synchronisation rounds instead of one);
* **NCCL ring**: ``2(N − 1)`` steps, ``t = α + 2(N − 1)·h + 2(N − 1)/N · M / (B·η)``, for
  NCCL's low-latency protocol (LL: half the bandwidth, flags travel with the data) and for
  Simple (full bandwidth, larger base latency); NCCL takes the faster (its tuning model,
  ``NVIDIA/nccl:src/graph/tuning.cc ncclTopoTuneModel``, ``src/enqueue.cc topoGetAlgoInfo``);
* **NVLS** (NVSwitch multicast, Hopper and later): the switch reduces and multicasts, so
  each GPU sends and receives ``M`` once: ``t = α_nvls + M / (B·η_nvls)``. NCCL uses it
  when the node has NVSwitch multicast and it is faster than the ring;
* across nodes (``N`` above ``gpus_per_node``): NCCL only (vLLM and SGLang disable custom
  all-reduce when the group spans nodes). :func:`nccl_all_reduce_time_s` prices a flat ring
  whose edges between nodes set every step; the step-time model uses the hierarchical form of
  ``internode.py`` instead (in-node reduce-scatter, between-node all-reduce of the shard,
  in-node all-gather).

Engine choice per message size (:func:`all_reduce_algorithm`):

* **TensorRT-LLM** 1.x, ``AllReduceStrategy.AUTO`` on Hopper: the lookup table of
  ``NVIDIA/TensorRT-LLM:cpp/tensorrt_llm/common/customAllReduceUtils.h
  selectStrategyLookUpTable`` (``AllReduceBestStrategyTableSM90``, fusion
  ``RESIDUAL_RMS_NORM`` that ``tensorrt_llm/_torch/distributed/ops.py AllReduce`` runs in the
  decoder layers; entries ``AllReduceStrategyType`` 0 NCCL, 4 ONESHOT, 5 TWOSHOT of
  ``cpp/tensorrt_llm/kernels/customAllReduceKernels.h``). Indexed by ``⌊log2 tokens⌋`` and
  hidden size it is, in bytes
  (``tokens·hidden·2``), the same for hidden 4096 and 8192: TP2 one-shot below 16 MiB; TP4
  one-shot below 4 MiB, two-shot below 8 MiB; TP8 one-shot below 1 MiB; NCCL above and for
  other sizes of TP.
* **vLLM**: ``vllm/distributed/device_communicators/custom_all_reduce.py
  CustomAllreduce.should_custom_ar`` (world size 2, 4, 6 or 8; two GPUs or fully
  NVLink-connected; ``M < max_size`` = 8 MiB; one node), kernel choice of
  ``csrc/custom_all_reduce.cuh CustomAllreduce::allreduce`` (one-shot for two GPUs, for
  ``N ≤ 4`` below 512 KiB and ``N ≤ 8`` below 256 KiB, else two-shot); otherwise pynccl.
* **SGLang**: the same rule (``python/sglang/srt/distributed/device_communicators/
  custom_all_reduce.py``, adapted from vLLM, ``_MAX_CAR_SIZE`` 8 MiB, vLLM's kernels).

Defaults fitted on ``collectives.csv`` (aiconfigurator-core 0.12.0, H100 SXM; log-error least
squares, ``servesize/calibration/collective_fit.py``, rounded): NCCL 2.27/2.29 all-reduce on
2/4/8 GPUs for the NCCL constants, the TensorRT-LLM 1.3 custom all-reduce rows at the sizes
where TensorRT-LLM runs its own kernels for ``α₁`` (fit 2.93 µs) and ``η_c`` (0.603);
``α₂ = 2·α₁`` is not fitted (one row, TP4 at 4 MiB, is two-shot). vLLM's and SGLang's kernels
get the same constants (no measurement of theirs). All-to-all keeps the
plain model ``α + (N − 1)/N · M / (B·η_link)``; a pipeline hand-off is
``α + M / (B·η_link)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from servesize.core.steptime._arrays import ArrayLike, FloatArray, StrArray, as_float_array
from servesize.core.steptime.tables import CollectiveTable

__all__ = [
    "ALGORITHMS",
    "DEFAULT_COLLECTIVE_CONSTANTS",
    "DEFAULT_COLLECTIVE_LATENCY_S",
    "DEFAULT_LINK_EFFICIENCY",
    "DEFAULT_NETWORK_BANDWIDTH_BYTES_PER_S",
    "CollectiveConstants",
    "LinkTopology",
    "all_reduce_algorithm",
    "all_reduce_time_s",
    "all_to_all_time_s",
    "nccl_all_reduce_time_s",
    "nvls_all_reduce_time_s",
    "one_shot_all_reduce_time_s",
    "point_to_point_time_s",
    "ring_all_reduce_time_s",
    "two_shot_all_reduce_time_s",
]

DEFAULT_COLLECTIVE_LATENCY_S = 6e-6
"""Per-call latency of an all-to-all or a pipeline hand-off (NCCL all-to-all of ≤ 64 KiB:
6.4 µs on 2 GPUs, 7.8 µs on 4 in ``collectives.csv``)."""
DEFAULT_LINK_EFFICIENCY = 0.8
"""Achieved fraction of the link for all-to-all and hand-offs (a 512 MiB NCCL all-to-all on 2
GPUs takes 0.96 ms: 280 GB/s of 450 per direction is 0.62; on 8 GPUs 7/8·512 MiB in 1.48 ms,
0.71; 0.8 is kept from the original plain model)."""
DEFAULT_NETWORK_BANDWIDTH_BYTES_PER_S = 50e9
"""Network bandwidth per GPU and direction between nodes: one 400 Gb/s InfiniBand NDR
adapter per GPU, as in a DGX H100 (8 ConnectX-7 for 8 GPUs)."""

ALGORITHMS = ("one_shot", "two_shot", "nccl")
"""All-reduce implementations an engine can pick (``nccl`` is NCCL's own ring/NVLS choice)."""

_MIB = 2**20


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveConstants:
    """Latencies and achieved link fractions of each all-reduce algorithm (module docstring)."""

    one_shot_latency_s: float = 3.0e-6
    """``α₁``: launch plus one barrier among the GPUs (TRT-LLM one-shot of 256 B: 2.7–3.2 µs)."""
    custom_link_efficiency: float = 0.60
    """``η_c``: achieved fraction of ``B`` of the custom kernels' peer reads."""
    nccl_latency_s: float = 5.22e-6
    """Base latency of NCCL's LL protocol."""
    nccl_simple_latency_s: float = 16.83e-6
    """Base latency of NCCL's Simple protocol."""
    nccl_hop_latency_s: float = 0.78e-6
    """``h``: latency of one of the ``2(N − 1)`` ring steps over NVLink."""
    nccl_link_efficiency: float = 0.66
    """``η`` of the Simple protocol (LL reaches half of it)."""
    nvls_latency_s: float = 53.1e-6
    """``α_nvls``: base latency of NCCL's NVLS algorithm."""
    nvls_link_efficiency: float = 0.55
    """``η_nvls``: achieved fraction of ``B`` of the multicast path."""
    network_hop_latency_s: float = 5e-6
    """``h_net``: one ring step over the network (InfiniBand; a default, not fitted), where the
    topology gives no inter-node latency."""
    network_link_efficiency: float = 0.9
    """``η_net``: achieved fraction of the inter-node link in the multi-node collectives of
    ``internode.py`` (a default, not fitted: no multi-node rows in ``collectives.csv``)."""

    @property
    def two_shot_latency_s(self) -> float:
        """``α₂ = 2·α₁``: two synchronisation rounds."""
        return 2.0 * self.one_shot_latency_s


DEFAULT_COLLECTIVE_CONSTANTS = CollectiveConstants()


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkTopology:
    """What the GPUs of one collective are connected by."""

    link_bandwidth_bytes_per_s: float
    """``B``: per GPU and direction inside a node."""
    fully_connected: bool = True
    """Every pair of GPUs in a node talks over NVLink (custom all-reduce needs it above 2)."""
    multicast: bool = False
    """NVSwitch with multicast (NVLS): Hopper or later SXM nodes."""
    gpus_per_node: int | None = None
    """GPUs one NVLink domain holds (a node, or an NVL72 rack); a collective on more goes over
    the network."""
    network_bandwidth_bytes_per_s: float = DEFAULT_NETWORK_BANDWIDTH_BYTES_PER_S
    """``B_net``: the inter-node link per GPU and direction."""
    network_latency_s: float | None = None
    """``h_net`` of the inter-node link; None: ``CollectiveConstants.network_hop_latency_s``."""


def _check(num_gpus: int, link_bandwidth_bytes_per_s: float) -> None:
    if num_gpus < 1:
        raise ValueError(f"num_gpus must be >= 1, got {num_gpus}")
    if link_bandwidth_bytes_per_s <= 0:
        raise ValueError(f"link bandwidth must be > 0, got {link_bandwidth_bytes_per_s}")


def one_shot_all_reduce_time_s(
    message_bytes: ArrayLike,
    *,
    num_gpus: int,
    link_bandwidth_bytes_per_s: float,
    constants: CollectiveConstants = DEFAULT_COLLECTIVE_CONSTANTS,
) -> FloatArray:
    """``α₁ + (N − 1)·M / (B·η_c)``.

    >>> c = CollectiveConstants(one_shot_latency_s=1e-6, custom_link_efficiency=0.5)
    >>> one_shot_all_reduce_time_s([1e6], num_gpus=8, link_bandwidth_bytes_per_s=1e9,
    ...                            constants=c).tolist()  # 1 µs + 7 MB at 0.5 GB/s
    [0.014001]
    """
    m = as_float_array(message_bytes)
    b = link_bandwidth_bytes_per_s * constants.custom_link_efficiency
    return np.asarray(constants.one_shot_latency_s + (num_gpus - 1) * m / b, dtype=np.float64)


def two_shot_all_reduce_time_s(
    message_bytes: ArrayLike,
    *,
    num_gpus: int,
    link_bandwidth_bytes_per_s: float,
    constants: CollectiveConstants = DEFAULT_COLLECTIVE_CONSTANTS,
) -> FloatArray:
    """``α₂ + 2(N − 1)/N · M / (B·η_c)``: reduce-scatter then all-gather."""
    m = as_float_array(message_bytes)
    b = link_bandwidth_bytes_per_s * constants.custom_link_efficiency
    share = 2.0 * (num_gpus - 1) / num_gpus
    return np.asarray(constants.two_shot_latency_s + share * m / b, dtype=np.float64)


def ring_all_reduce_time_s(
    message_bytes: ArrayLike,
    *,
    num_gpus: int,
    link_bandwidth_bytes_per_s: float,
    constants: CollectiveConstants = DEFAULT_COLLECTIVE_CONSTANTS,
    hop_latency_s: float | None = None,
) -> FloatArray:
    """NCCL ring, the faster of its LL and Simple protocols:
    ``α_p + 2(N − 1)·h + 2(N − 1)/N · M / (B·η_p)``, ``η_LL = η/2``."""
    m = as_float_array(message_bytes)
    hop = constants.nccl_hop_latency_s if hop_latency_s is None else hop_latency_s
    steps = 2.0 * (num_gpus - 1)
    share = steps / num_gpus
    b = link_bandwidth_bytes_per_s * constants.nccl_link_efficiency
    low_latency = constants.nccl_latency_s + steps * hop + share * m / (b / 2.0)
    simple = constants.nccl_simple_latency_s + steps * hop + share * m / b
    return np.asarray(np.minimum(low_latency, simple), dtype=np.float64)


def nvls_all_reduce_time_s(
    message_bytes: ArrayLike,
    *,
    link_bandwidth_bytes_per_s: float,
    constants: CollectiveConstants = DEFAULT_COLLECTIVE_CONSTANTS,
) -> FloatArray:
    """NVSwitch multicast: ``α_nvls + M / (B·η_nvls)`` whatever the number of GPUs."""
    m = as_float_array(message_bytes)
    b = link_bandwidth_bytes_per_s * constants.nvls_link_efficiency
    return np.asarray(constants.nvls_latency_s + m / b, dtype=np.float64)


def nccl_all_reduce_time_s(
    message_bytes: ArrayLike,
    *,
    num_gpus: int,
    topology: LinkTopology,
    constants: CollectiveConstants = DEFAULT_COLLECTIVE_CONSTANTS,
) -> FloatArray:
    """NCCL's fastest algorithm: ring, or NVLS where the node multicasts. Over the network
    (``N > gpus_per_node``) a ring whose ``2(N − 1)`` steps each wait for the edges that cross
    nodes: network hop latency ``h_net`` and bandwidth ``min(B_net, B)``."""
    m = as_float_array(message_bytes)
    node = topology.gpus_per_node
    if node is not None and num_gpus > node:
        bandwidth = min(topology.network_bandwidth_bytes_per_s, topology.link_bandwidth_bytes_per_s)
        return ring_all_reduce_time_s(
            m,
            num_gpus=num_gpus,
            link_bandwidth_bytes_per_s=bandwidth,
            constants=constants,
            hop_latency_s=constants.network_hop_latency_s,
        )
    ring = ring_all_reduce_time_s(
        m,
        num_gpus=num_gpus,
        link_bandwidth_bytes_per_s=topology.link_bandwidth_bytes_per_s,
        constants=constants,
    )
    if not topology.multicast:
        return ring
    nvls = nvls_all_reduce_time_s(
        m, link_bandwidth_bytes_per_s=topology.link_bandwidth_bytes_per_s, constants=constants
    )
    return np.asarray(np.minimum(ring, nvls), dtype=np.float64)


# TensorRT-LLM 1.x AllReduceBestStrategyTableSM90, fusion RESIDUAL_RMS_NORM, in bytes:
# TP -> (one-shot below, two-shot below); NCCL from the second bound.
_TRTLLM_SM90_BYTES = {2: (16 * _MIB, 16 * _MIB), 4: (4 * _MIB, 8 * _MIB), 8: (1 * _MIB, 1 * _MIB)}
_VLLM_WORLD_SIZES = (2, 4, 6, 8)
_VLLM_MAX_SIZE_BYTES = 8 * _MIB


def all_reduce_algorithm(
    engine: str | None,
    message_bytes: ArrayLike,
    *,
    num_gpus: int,
    topology: LinkTopology,
) -> StrArray:
    """Which of :data:`ALGORITHMS` ``engine`` runs for each message (module docstring).

    >>> t = LinkTopology(link_bandwidth_bytes_per_s=450e9, multicast=True, gpus_per_node=8)
    >>> all_reduce_algorithm("trtllm", [512 * 1024, 2**20], num_gpus=8, topology=t).tolist()
    ['one_shot', 'nccl']
    >>> all_reduce_algorithm("vllm", [2**17, 2**20, 2**23], num_gpus=8, topology=t).tolist()
    ['one_shot', 'two_shot', 'nccl']
    """
    m = as_float_array(message_bytes)
    out: StrArray = np.full(m.shape, "nccl", dtype="<U8")
    node = topology.gpus_per_node
    if engine is None or num_gpus < 2 or (node is not None and num_gpus > node):
        return out
    if engine == "trtllm":
        if num_gpus not in _TRTLLM_SM90_BYTES or not topology.fully_connected:
            return out
        one, two = _TRTLLM_SM90_BYTES[num_gpus]
        out[m < two] = "two_shot"
        out[m < one] = "one_shot"
        return out
    if engine in ("vllm", "sglang"):
        if num_gpus not in _VLLM_WORLD_SIZES or not (num_gpus == 2 or topology.fully_connected):
            return out
        custom = m < _VLLM_MAX_SIZE_BYTES
        if num_gpus == 2:
            one_shot = custom
        else:
            limit = 512 * 1024 if num_gpus <= 4 else 256 * 1024
            one_shot = custom & (m < limit)
        out[custom] = "two_shot"
        out[one_shot] = "one_shot"
        return out
    return out


def all_reduce_time_s(
    message_bytes: ArrayLike,
    *,
    num_gpus: int,
    link_bandwidth_bytes_per_s: float,
    engine: str | None = None,
    topology: LinkTopology | None = None,
    constants: CollectiveConstants = DEFAULT_COLLECTIVE_CONSTANTS,
    table: CollectiveTable | None = None,
) -> FloatArray:
    """One all-reduce of ``message_bytes`` per GPU as ``engine`` runs it (``None``: plain
    NCCL); 0 for a single GPU or an empty message. ``table`` replaces the model.

    ``topology`` defaults to a fully connected node of ``link_bandwidth_bytes_per_s`` links
    without multicast.

    >>> c = CollectiveConstants(nccl_latency_s=0.0, nccl_simple_latency_s=0.0,
    ...                         nccl_hop_latency_s=0.0, nccl_link_efficiency=1.0)
    >>> all_reduce_time_s([1e9], num_gpus=2, link_bandwidth_bytes_per_s=1e9,
    ...                   constants=c).tolist()
    [1.0]
    """
    _check(num_gpus, link_bandwidth_bytes_per_s)
    size = as_float_array(message_bytes)
    if num_gpus == 1:
        return np.zeros_like(size)
    if table is not None:
        t = table.latency(np.maximum(size, 1.0))
        return np.asarray(np.where(size > 0, t, 0.0), dtype=np.float64)
    topo = topology or LinkTopology(link_bandwidth_bytes_per_s=link_bandwidth_bytes_per_s)
    algorithm = all_reduce_algorithm(engine, size, num_gpus=num_gpus, topology=topo)
    b = topo.link_bandwidth_bytes_per_s
    t = nccl_all_reduce_time_s(size, num_gpus=num_gpus, topology=topo, constants=constants)
    if engine is not None:
        one = one_shot_all_reduce_time_s(
            size, num_gpus=num_gpus, link_bandwidth_bytes_per_s=b, constants=constants
        )
        two = two_shot_all_reduce_time_s(
            size, num_gpus=num_gpus, link_bandwidth_bytes_per_s=b, constants=constants
        )
        t = np.where(algorithm == "one_shot", one, np.where(algorithm == "two_shot", two, t))
    return np.asarray(np.where(size > 0, t, 0.0), dtype=np.float64)


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
