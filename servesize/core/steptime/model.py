"""The step-time model: one engine iteration, vectorised over many steps.

``t_step = Σ_ops t_op + t_comm + t_overhead``

- ``Σ_ops``: every GEMM (``m`` = tokens of the step: weights are read once per step, shared by
  prefill and decode), attention per layer kind (prefill chunks and decodes), routed experts,
  and element-wise traffic; each costed by :mod:`~servesize.core.steptime.gemm`,
  :mod:`~servesize.core.steptime.attention` and :mod:`~servesize.core.steptime.experts`;
- ``t_comm``: two TP all-reduces of ``tokens·h`` activations per layer (each engine's
  algorithm at that size), EP all-to-alls when attention is data-parallel, and ``PP − 1``
  pipeline hand-offs
  (:mod:`~servesize.core.steptime.communication`);
- ``t_overhead``: the engine's CPU time per step, plus per-layer launch time when the step is
  not replayed from a CUDA graph (:mod:`~servesize.core.steptime.engines`).

Kernels, communication and CPU work are summed, not overlapped: engines run them on one
stream. With pipeline parallelism a step is one micro-batch through every stage (the callers
split the batch into ``PP`` micro-batches, ``docs/modeling.md §2.10``).
Each part of the step is labelled by the resource that bounds it, so ``StepTime.bound`` says
whether the step is compute-, memory-, communication- or overhead-bound, and
``arithmetic_intensity`` = FLOPs / HBM bytes explains why.

Peers: BLIS adds a prefill-phase and a decode-phase ``max(FLOPs/(peak·MFU), bytes/BW)``
(inference-sim/inference-sim:docs/concepts/roofline.md), which reads the weights twice in a
mixed step and takes one bound for a whole phase; here each operator is bounded on its own and
weights are read once per step. AIConfigurator composes measured per-op latencies with
per-engine corrections (ai-dynamo/aiconfigurator:aic-core/src/aiconfigurator_core/sdk/backends/
vllm_backend.py, ``trtllm_backend.py``); Vidur sums profiled operators per layer
(microsoft/vidur). Measured tables enter here the same way, and only where they exist.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from servesize.core.architecture import Architecture, AttentionKind
from servesize.core.dtypes import canonical_dtype
from servesize.core.errors import UnsupportedDeploymentError
from servesize.core.hardware import HardwareSpec
from servesize.core.steptime._arrays import FloatArray, StrArray
from servesize.core.steptime.attention import (
    AttentionLookup,
    attention_decode_cost,
    attention_lookup,
    attention_prefill_cost,
)
from servesize.core.steptime.communication import (
    LinkTopology,
    all_reduce_algorithm,
    all_reduce_time_s,
    all_to_all_time_s,
    point_to_point_time_s,
)
from servesize.core.steptime.engines import EngineProfile, engine_profile
from servesize.core.steptime.experts import MoeLookup, moe_cost, moe_table_for
from servesize.core.steptime.gemm import GemmCurve, gemm_cost, gemm_curve
from servesize.core.steptime.internode import (
    cross_node_all_to_all_time_s,
    cross_node_hand_off_time_s,
    hardware_topology,
    hierarchical_all_reduce_time_s,
    spans_nodes,
)
from servesize.core.steptime.operators import OperatorInventory, operator_inventory
from servesize.core.steptime.rates import DEFAULT_GEMM_EFFICIENCY_BY_DTYPE, DeviceRates, KernelCost
from servesize.core.steptime.tables import CollectiveTable, MeasuredProfile
from servesize.core.steptime.work import StepWork

__all__ = [
    "BOUNDS",
    "PCIE_LINK_BYTES_PER_S",
    "StepTime",
    "StepTimeModel",
    "build_step_model",
    "checkpoint_weight_dtypes",
]

BOUNDS = ("compute", "memory", "communication", "overhead")
"""What can bound a step, in the order of ``StepTime`` components."""

PCIE_LINK_BYTES_PER_S = 25e9
"""GPU-to-GPU bandwidth per direction without NVLink: PCIe Gen4 x16 is 32 GB/s raw, about
25 GB/s achieved (used when the hardware spec names no interconnect bandwidth)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StepTime:
    """Time of ``n`` engine steps split by what bounds it (every field has shape ``(n,)``)."""

    total_s: FloatArray
    compute_s: FloatArray
    """Time in kernels whose roofline compute term exceeds the memory term."""
    memory_s: FloatArray
    """Time in memory-bound kernels (weights, KV cache, activations)."""
    communication_s: FloatArray
    overhead_s: FloatArray
    flops: FloatArray
    """FLOPs per GPU."""
    bytes: FloatArray
    """HBM bytes moved per GPU."""

    @property
    def arithmetic_intensity(self) -> FloatArray:
        """FLOPs per HBM byte; compare with the ridge point ``peak / bandwidth``."""
        return np.asarray(self.flops / np.maximum(self.bytes, 1.0), dtype=np.float64)

    @property
    def bound(self) -> StrArray:
        """The largest of compute, memory, communication and overhead time, per step."""
        parts = np.stack([self.compute_s, self.memory_s, self.communication_s, self.overhead_s])
        names: StrArray = np.array(BOUNDS, dtype=np.str_)
        labels: StrArray = names[np.argmax(parts, axis=0)]
        return labels

    def __getitem__(self, index: int | slice) -> StepTime:
        return StepTime(
            **{
                name: np.atleast_1d(getattr(self, name)[index])
                for name in self.__dataclass_fields__
            }
        )


def checkpoint_weight_dtypes(arch: Architecture) -> tuple[str, str]:
    """``(weight_dtype, expert_weight_dtype)`` as the checkpoint stores them.

    Without quantization both are ``arch.weight_dtype``. A quantized checkpoint stores its
    quantized dtype, except attention when its ``unquantized_modules`` name attention
    (gpt-oss keeps ``self_attn`` in bf16 and quantizes only the experts to MXFP4).

    >>> from servesize.core.architecture import parse_architecture
    >>> checkpoint_weight_dtypes(parse_architecture(
    ...     {"model_type": "llama", "hidden_size": 8, "num_hidden_layers": 1, "head_dim": 2,
    ...      "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 16,
    ...      "vocab_size": 10, "torch_dtype": "bfloat16"}, name="toy"))
    ('bf16', 'bf16')
    """
    base = arch.weight_dtype
    q = arch.quantization
    if q is None or q.weight_dtype is None:
        return base, base
    attention_kept = any("attn" in pattern for pattern in q.unquantized_modules)
    return (base if attention_kept else q.weight_dtype), q.weight_dtype


def _engine_source(profile: EngineProfile) -> str:
    kind = "calibrated" if profile.calibrated else "default"
    return f"{kind}: {profile.name} overheads, {profile.provenance}"


def _resolve_compute_dtype(dtype: str, hardware: HardwareSpec) -> str:
    """The dtype whose peak applies: FP8/FP4 fall back to 16-bit where the GPU lacks them."""
    for candidate in (dtype, "bf16", "fp16", "fp32"):
        if hardware.peak_flop_per_s(candidate):
            return candidate
    raise UnsupportedDeploymentError(
        f"{hardware.name} has no dense peak for {dtype} or any 16/32-bit dtype"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class StepTimeModel:
    """A model and deployment compiled for fast step-time evaluation (see module docstring)."""

    inventory: OperatorInventory
    engine: EngineProfile
    cuda_graphs: bool
    rates: DeviceRates
    link_bandwidth_bytes_per_s: float
    kv_dtype: str
    gemm_curves: tuple[GemmCurve | None, ...]
    decode_lookups: tuple[AttentionLookup | None, ...]
    prefill_lookups: tuple[AttentionLookup | None, ...]
    moe_lookups: tuple[MoeLookup | None, ...]
    all_reduce_table: CollectiveTable | None
    all_to_all_table: CollectiveTable | None
    sources: Mapping[str, str]
    """Per component, where its numbers come from: ``measured: …``, ``default: …``,
    ``datasheet: …`` or ``calibrated: …``."""
    topology: LinkTopology | None = None
    """The links of the deployment (``None``: a fully connected node of
    ``link_bandwidth_bytes_per_s`` links, no multicast)."""
    nccl_all_reduce_table: CollectiveTable | None = None
    """Measured NCCL all-reduce, for the sizes where the engine falls back to NCCL."""

    @property
    def weight_bytes_per_gpu(self) -> float:
        return self.inventory.weight_bytes_per_gpu

    @property
    def ridge_point_flops_per_byte(self) -> float:
        """``P·η_c / (W·η_m)`` of the main compute dtype: steps with a lower arithmetic
        intensity are memory-bound."""
        dtype = self.inventory.gemms[0].compute_dtype
        r = self.rates
        return (r.peak(dtype) * r.gemm_efficiency[dtype]) / (
            r.memory_bandwidth_bytes_per_s * r.bandwidth_efficiency
        )

    def with_engine(self, engine: EngineProfile) -> StepTimeModel:
        """The same compiled model under another engine profile (e.g. refitted constants)."""
        sources = dict(self.sources)
        sources["engine_overheads"] = _engine_source(engine)
        return replace(
            self,
            engine=engine,
            rates=replace(
                self.rates,
                compute_slowdown=engine.compute_slowdown,
                memory_slowdown=engine.memory_slowdown,
            ),
            sources=sources,
        )

    def step_time(self, work: StepWork) -> StepTime:
        """Time of each step in ``work`` (vectorised; see the module docstring)."""
        inv, rates = self.inventory, self.rates
        dp = float(inv.data_parallel_size)
        a_b = inv.activation_bytes
        tokens = work.tokens / dp
        sequences = work.sequences / dp
        n = len(work)
        compute = np.zeros(n)
        memory = np.zeros(n)
        flops = np.zeros(n)
        nbytes = np.zeros(n)

        def add(cost: KernelCost) -> None:
            nonlocal compute, memory, flops, nbytes
            compute = compute + cost.time_s * cost.compute_bound
            memory = memory + cost.time_s * (1.0 - cost.compute_bound)
            flops = flops + cost.flops
            nbytes = nbytes + cost.bytes

        for gemm, curve in zip(inv.gemms, self.gemm_curves, strict=True):
            m = sequences if gemm.per_sequence else tokens
            add(gemm_cost(gemm, m, activation_bytes=a_b, rates=rates, curve=curve))
        for att, dec, pre in zip(
            inv.attention, self.decode_lookups, self.prefill_lookups, strict=True
        ):
            add(
                attention_decode_cost(
                    att,
                    work.decode_sequences / dp,
                    work.decode_context_tokens / dp,
                    activation_bytes=a_b,
                    rates=rates,
                    lookup=dec,
                )
            )
            add(
                attention_prefill_cost(
                    att,
                    work.prefill_sequences / dp,
                    work.prefill_tokens / dp,
                    work.prefill_cached_tokens / dp,
                    work.prefill_attention_pairs / dp,
                    activation_bytes=a_b,
                    rates=rates,
                    lookup=pre,
                )
            )
        for moe_op, lookup in zip(inv.moe, self.moe_lookups, strict=True):
            add(moe_cost(moe_op, work.tokens, activation_bytes=a_b, rates=rates, lookup=lookup))
        elementwise = self.elementwise_bytes(tokens)
        memory = memory + rates.memory_time_s(elementwise)
        nbytes = nbytes + elementwise

        comm = self.communication_s(tokens)
        overhead = self.overhead_s(work.tokens, work.prefill_tokens)
        total = compute + memory + comm + overhead
        return StepTime(
            total_s=total,
            compute_s=compute,
            memory_s=memory,
            communication_s=np.asarray(comm, dtype=np.float64),
            overhead_s=overhead,
            flops=flops,
            bytes=nbytes,
        )

    def communication_s(self, tokens: FloatArray) -> FloatArray:
        """Collective time of steps with ``tokens`` tokens per data-parallel rank: TP
        all-reduces, EP all-to-alls and ``PP − 1`` pipeline hand-offs (:meth:`hand_off_s`)."""
        inv = self.inventory
        comm = inv.all_reduces_per_step * self.all_reduce_s(
            tokens * inv.hidden_size * inv.activation_bytes
        )
        if inv.all_to_alls_per_step:
            comm = comm + inv.all_to_alls_per_step * self.all_to_all_s(
                tokens * inv.all_to_all_bytes_per_token
            )
        if inv.pipeline_parallel_size > 1:
            comm = comm + (inv.pipeline_parallel_size - 1) * self.hand_off_s(tokens)
        return np.asarray(comm, dtype=np.float64)

    def elementwise_bytes(self, tokens: FloatArray) -> FloatArray:
        """HBM bytes of norms, residual adds and activations for ``tokens`` tokens per rank.

        TensorRT-LLM fuses the residual add and RMSNorm into its one-shot and two-shot
        all-reduce kernels (``AllReduceFusionOp.RESIDUAL_RMS_NORM``,
        ``tensorrt_llm/_torch/distributed/ops.py AllReduce``): the reduced sum stays in
        registers instead of being written and read back by a separate norm kernel, which
        saves ``2·M`` bytes per fused all-reduce of ``M`` bytes. After NCCL the separate
        kernel runs as elsewhere.
        """
        inv = self.inventory
        nbytes = tokens * inv.elementwise_bytes_per_token
        if self.engine.name != "trtllm" or inv.tensor_parallel_size == 1:
            return np.asarray(nbytes, dtype=np.float64)
        message = tokens * inv.hidden_size * inv.activation_bytes
        fused = all_reduce_algorithm(
            "trtllm", message, num_gpus=inv.tensor_parallel_size, topology=self._topology()
        )
        saved = np.where(fused != "nccl", inv.all_reduces_per_step * 2.0 * message, 0.0)
        return np.asarray(nbytes - saved, dtype=np.float64)

    def _topology(self) -> LinkTopology:
        return self.topology or LinkTopology(
            link_bandwidth_bytes_per_s=self.link_bandwidth_bytes_per_s
        )

    def all_to_all_s(self, message_bytes: FloatArray) -> FloatArray:
        """One EP all-to-all of ``message_bytes`` per GPU; wider than the NVLink domain, the
        off-node share crosses the inter-node link (``internode.py``; no one-node table)."""
        ep, topo = self.inventory.expert_parallel_size, self._topology()
        if spans_nodes(ep, topo):
            return cross_node_all_to_all_time_s(message_bytes, num_gpus=ep, topology=topo)
        return all_to_all_time_s(
            message_bytes,
            num_gpus=ep,
            link_bandwidth_bytes_per_s=self.link_bandwidth_bytes_per_s,
            table=self.all_to_all_table,
        )

    def all_reduce_s(self, message_bytes: FloatArray) -> FloatArray:
        """One TP all-reduce of ``message_bytes`` as the engine runs it: its algorithm at that
        size (:func:`~servesize.core.steptime.communication.all_reduce_algorithm`), priced by
        the measured table of that implementation where there is one (TensorRT-LLM's
        ``custom`` table is its whole AUTO choice), else by the algorithm's model."""
        inv, topo = self.inventory, self._topology()
        tp, engine = inv.tensor_parallel_size, self.engine.name
        node = topo.gpus_per_node
        if spans_nodes(tp, topo):
            return hierarchical_all_reduce_time_s(message_bytes, num_gpus=tp, topology=topo)
        modelled = all_reduce_time_s(
            message_bytes,
            num_gpus=tp,
            link_bandwidth_bytes_per_s=topo.link_bandwidth_bytes_per_s,
            engine=engine,
            topology=topo,
        )
        custom, nccl = self.all_reduce_table, self.nccl_all_reduce_table
        if tp == 1 or (custom is None and nccl is None) or (node is not None and tp > node):
            return modelled
        b = topo.link_bandwidth_bytes_per_s
        if engine == "trtllm" and custom is not None:
            return all_reduce_time_s(
                message_bytes, num_gpus=tp, link_bandwidth_bytes_per_s=b, table=custom
            )
        algorithm = all_reduce_algorithm(engine, message_bytes, num_gpus=tp, topology=topo)
        on_custom = all_reduce_time_s(
            message_bytes, num_gpus=tp, link_bandwidth_bytes_per_s=b, table=custom or nccl
        )
        on_nccl = all_reduce_time_s(
            message_bytes, num_gpus=tp, link_bandwidth_bytes_per_s=b, table=nccl or custom
        )
        return np.asarray(np.where(algorithm == "nccl", on_nccl, on_custom), dtype=np.float64)

    def hand_off_s(self, tokens: FloatArray) -> FloatArray:
        """One pipeline hand-off of ``tokens`` activations; where a stage boundary crosses
        nodes, every boundary is priced as that one (the slowest paces the pipeline:
        :func:`~servesize.core.steptime.internode.cross_node_hand_off_time_s`)."""
        inv, topo = self.inventory, self._topology()
        link = topo.link_bandwidth_bytes_per_s
        node, tp, pp = topo.gpus_per_node, inv.tensor_parallel_size, inv.pipeline_parallel_size
        if node is not None and any((s * tp - 1) // node != (s * tp) // node for s in range(1, pp)):
            return cross_node_hand_off_time_s(
                tokens * inv.hidden_size * inv.activation_bytes,
                tensor_parallel_size=tp,
                topology=topo,
            )
        return point_to_point_time_s(
            tokens * inv.hidden_size * inv.activation_bytes, link_bandwidth_bytes_per_s=link
        )

    def overhead_s(self, tokens: FloatArray, prefill_tokens: FloatArray) -> FloatArray:
        """The engine's CPU time of steps with ``tokens`` tokens in all (``prefill_tokens`` of
        them prompt tokens): the per-step overhead, plus per-layer launches when the step is
        not replayed from a CUDA graph. Each data-parallel rank captures and replays its own
        graphs, so the graph limit applies to one rank's ``tokens / DP``."""
        eng = self.engine
        per_rank = tokens / self.inventory.data_parallel_size
        eager = np.logical_or(not self.cuda_graphs, per_rank > eng.cuda_graph_max_tokens)
        if eng.cuda_graph_decode_only:
            eager = eager | (prefill_tokens > 0)
        overhead: FloatArray = np.where(tokens > 0, eng.step_overhead_s, 0.0) + np.where(
            eager & (tokens > 0), eng.eager_overhead_per_layer_s * self.inventory.num_layers, 0.0
        )
        return overhead


def build_step_model(
    arch: Architecture,
    hardware: HardwareSpec,
    *,
    engine: str | EngineProfile = "vllm",
    tensor_parallel_size: int = 1,
    pipeline_parallel_size: int = 1,
    data_parallel_size: int = 1,
    expert_parallel_size: int = 1,
    weight_dtype: str | None = None,
    expert_weight_dtype: str | None = None,
    kv_dtype: str = "bf16",
    activation_dtype: str = "bf16",
    cuda_graphs: bool = True,
    measured: MeasuredProfile | None = None,
    calibrated: bool = True,
    moe_distribution: str | None = None,
    network_bandwidth_bytes_per_s: float | None = None,
) -> StepTimeModel:
    """Compile ``arch`` on ``hardware`` under one deployment into a :class:`StepTimeModel`.

    ``weight_dtype``/``expert_weight_dtype`` default to the checkpoint's
    (:func:`checkpoint_weight_dtypes`). ``measured`` tables, when given, replace the roofline
    defaults for every operator they cover; ``calibrated=False`` uses the engine profile with
    its fitted constants neutralised (pure roofline plus scheduler limits). Collectives on
    more GPUs than the NVLink domain (``gpus_per_node``, or an NVL72 domain; TP, EP, or
    pipeline stages on another node) go over the hardware's inter-node link
    (:func:`~servesize.core.hardware.inter_node_link`); ``network_bandwidth_bytes_per_s``
    overrides its bandwidth (None: the link's, else 50 GB/s per GPU).
    """
    profile = (
        engine
        if isinstance(engine, EngineProfile)
        else engine_profile(engine, calibrated=calibrated)
    )
    stored_weights, stored_experts = checkpoint_weight_dtypes(arch)
    w_dtype = canonical_dtype(weight_dtype or stored_weights)
    e_dtype = canonical_dtype(expert_weight_dtype or weight_dtype or stored_experts)
    kv = canonical_dtype(kv_dtype)
    inventory = operator_inventory(
        arch,
        tensor_parallel_size=tensor_parallel_size,
        pipeline_parallel_size=pipeline_parallel_size,
        data_parallel_size=data_parallel_size,
        expert_parallel_size=expert_parallel_size,
        weight_dtype=w_dtype,
        expert_weight_dtype=e_dtype,
        kv_dtype=kv,
        activation_dtype=activation_dtype,
    )
    inventory = replace(
        inventory,
        gemms=tuple(
            replace(g, compute_dtype=_resolve_compute_dtype(g.compute_dtype, hardware))
            for g in inventory.gemms
        ),
        moe=tuple(
            replace(m, compute_dtype=_resolve_compute_dtype(m.compute_dtype, hardware))
            for m in inventory.moe
        ),
    )
    dtypes = {g.compute_dtype for g in inventory.gemms} | {m.compute_dtype for m in inventory.moe}
    dtypes.add(_resolve_compute_dtype("bf16", hardware))
    peaks: dict[str, float] = {}
    for dtype in dtypes:
        peak = hardware.peak_flop_per_s(dtype)
        assert peak is not None  # resolved above
        peaks[dtype] = peak
    if "bf16" not in peaks:
        peaks["bf16"] = peaks[_resolve_compute_dtype("bf16", hardware)]
    rates = DeviceRates(
        peak_flop_per_s=peaks,
        memory_bandwidth_bytes_per_s=float(hardware.memory_bandwidth_bytes_per_s),
        gemm_efficiency={d: DEFAULT_GEMM_EFFICIENCY_BY_DTYPE.get(d, 0.78) for d in peaks},
        compute_slowdown=profile.compute_slowdown,
        memory_slowdown=profile.memory_slowdown,
    )
    link = hardware.interconnect.bandwidth_bytes_per_s if hardware.interconnect else None
    sources: dict[str, str] = {
        "hardware": f"datasheet: {hardware.name} peaks and HBM bandwidth",
        "interconnect": (
            f"datasheet: {hardware.interconnect.kind if hardware.interconnect else 'none'}"
            if link
            else "default: PCIe, 25 GB/s per direction"
        ),
    }
    gemm_curves: list[GemmCurve | None] = []
    exact = transferred = 0
    table_names: set[str] = set()
    for op in inventory.gemms:
        table = (
            measured.gemm_table(op.compute_dtype, profile.name) if measured is not None else None
        )
        if table is None:
            gemm_curves.append(None)
            continue
        curve = gemm_curve(op, table, activation_bytes=inventory.activation_bytes, rates=rates)
        gemm_curves.append(curve)
        exact += curve.exact
        transferred += not curve.exact
        table_names.add(table.source)
    if exact + transferred:
        roofline = len(inventory.gemms) - exact - transferred
        sources["gemm"] = (
            f"measured: {'; '.join(sorted(table_names))} ({exact} shapes measured, "
            f"{transferred} transferred from neighbours, {roofline} roofline)"
        )
    else:
        sources["gemm"] = "default: roofline over datasheet peaks with default efficiencies"

    decode: list[AttentionLookup | None] = []
    prefill: list[AttentionLookup | None] = []
    for att in inventory.attention:
        mechanism = "mla" if att.kind is AttentionKind.MLA else "gqa"
        if measured is None:
            decode.append(None)
            prefill.append(None)
            continue
        for phase, out in (("decode", decode), ("context", prefill)):
            tables = measured.attention_tables(
                phase=phase, mechanism=mechanism, engine=profile.name
            )
            out.append(attention_lookup(att, tables, kv_dtype=kv, phase=phase))
    for phase, lookups in (("attention_decode", decode), ("attention_prefill", prefill)):
        used = [lk for lk in lookups if lk is not None]
        if used:
            kinds = sorted({"exact" if lk.exact else "transferred" for lk in used})
            sources[phase] = f"measured: {used[0].table.source} ({'/'.join(kinds)} head layout)"
        else:
            sources[phase] = "default: roofline (KV bytes / bandwidth, FLOPs / peak)"

    moe_tables = measured.moe if measured else ()
    moe_lookups: list[MoeLookup | None] = [
        moe_table_for(op, moe_tables, prefer=moe_distribution, engine=profile.name)
        if measured else None for op in inventory.moe
    ]  # fmt: skip
    if inventory.moe:
        hit = [t for t in moe_lookups if t is not None]
        sources["moe"] = (
            f"measured: {hit[0].table.source} ({'exact' if hit[0].exact else 'transferred'} shape)"
            if hit
            else "default: roofline over expected touched experts E·(1−(1−k/E)^T)"
        )

    tp = inventory.tensor_parallel_size
    topology = hardware_topology(
        hardware, network_bandwidth_bytes_per_s, fallback_bytes_per_s=PCIE_LINK_BYTES_PER_S
    )
    ar_table = nccl_table = a2a_table = None
    if measured is not None:
        if tp > 1:
            ar_table, nccl_table = (
                next(
                    (
                        t
                        for t in measured.collectives
                        if (t.op, t.num_gpus, t.implementation) == ("all_reduce", tp, impl)
                    ),
                    None,
                )
                for impl in ("custom", "nccl")
            )
        if inventory.all_to_alls_per_step:
            a2a_table = measured.collective("all_to_all", inventory.expert_parallel_size, "nccl")
    if tp > 1:
        timed = [t.source for t in (ar_table, nccl_table) if t is not None]
        sources["all_reduce"] = (
            f"measured: {'; '.join(timed)} (by {profile.name}'s algorithm per message size)"
            if timed
            else f"default: {profile.name}'s one-shot/two-shot/NCCL choice per message size"
            + (", NVLS" if topology.multicast else "")
        )
    if inventory.all_to_alls_per_step:
        sources["all_to_all"] = (
            f"measured: {a2a_table.source}" if a2a_table else "default: bandwidth model"
        )
    sources["engine_overheads"] = _engine_source(profile)
    return StepTimeModel(
        inventory=inventory,
        engine=profile,
        cuda_graphs=cuda_graphs,
        rates=rates,
        link_bandwidth_bytes_per_s=float(link or PCIE_LINK_BYTES_PER_S),
        kv_dtype=kv,
        gemm_curves=tuple(gemm_curves),
        decode_lookups=tuple(decode),
        prefill_lookups=tuple(prefill),
        moe_lookups=tuple(moe_lookups),
        all_reduce_table=ar_table,
        all_to_all_table=a2a_table,
        sources=sources,
        topology=topology,
        nccl_all_reduce_table=nccl_table,
    )
