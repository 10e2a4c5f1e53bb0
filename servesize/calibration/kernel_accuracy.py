"""Datasheet defaults against the measured kernel tables.

The roofline defaults of :mod:`servesize.core.steptime.rates` are compared with each measured
GEMM, attention and all-reduce table (what a GPU without measurements gets), and the GEMM ratio
transfer used for unmeasured shapes is checked leave-one-shape-out.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace

import numpy as np

from servesize.calibration.evaluation import ErrorSummary
from servesize.core.architecture import AttentionKind
from servesize.core.hardware import HardwareSpec
from servesize.core.steptime import MeasuredProfile, StepWork
from servesize.core.steptime.attention import attention_decode_cost, attention_prefill_cost
from servesize.core.steptime.communication import (
    LinkTopology,
    all_reduce_time_s,
    all_to_all_time_s,
)
from servesize.core.steptime.gemm import gemm_cost, gemm_curve
from servesize.core.steptime.internode import NVLS_MIN_LINK_BYTES_PER_S
from servesize.core.steptime.operators import AttentionOp, GemmOp
from servesize.core.steptime.rates import DEFAULT_GEMM_EFFICIENCY_BY_DTYPE, DeviceRates
from servesize.core.steptime.tables import GemmTable

__all__ = ["KernelErrors", "kernel_accuracy"]


def _rates(hardware: HardwareSpec) -> DeviceRates:
    peaks = {
        d: float(hardware.peak_flop_per_s(d) or 0.0)
        for d in ("bf16", "fp8")
        if hardware.peak_flop_per_s(d)
    }
    return DeviceRates(
        peak_flop_per_s=peaks,
        memory_bandwidth_bytes_per_s=float(hardware.memory_bandwidth_bytes_per_s),
        gemm_efficiency={d: DEFAULT_GEMM_EFFICIENCY_BY_DTYPE[d] for d in peaks},
    )


def _gemm_errors(table: GemmTable, rates: DeviceRates) -> tuple[ErrorSummary, ErrorSummary]:
    """(default roofline vs table, leave-one-shape-out transfer vs table)."""
    wb = 1.0 if table.dtype == "fp8" else 2.0
    roof_pred, roof_true, loo_pred, loo_true = [], [], [], []
    for s, (n, k) in enumerate(zip(table.n, table.k, strict=True)):
        op = GemmOp(
            name="probe",
            n=int(n),
            k=int(k),
            layers=1,
            weight_bytes_per_element=wb,
            compute_dtype=table.dtype,
        )
        cost = gemm_cost(op, table.m, activation_bytes=2.0, rates=rates, curve=None)
        roof_pred.append(cost.time_s)
        roof_true.append(table.latency_s[s])
        keep = np.arange(len(table.n)) != s
        others = replace(table, n=table.n[keep], k=table.k[keep], latency_s=table.latency_s[keep])
        curve = gemm_curve(op, others, activation_bytes=2.0, rates=rates)
        loo_pred.append(curve.latency_s)
        loo_true.append(table.latency_s[s])
    return (
        ErrorSummary.of(np.concatenate(roof_pred), np.concatenate(roof_true)),
        ErrorSummary.of(np.concatenate(loo_pred), np.concatenate(loo_true)),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelErrors:
    """Default-roofline error per kernel table, and the ratio-transfer check."""

    roofline: dict[str, ErrorSummary] = field(default_factory=dict)
    transfer: dict[str, ErrorSummary] = field(default_factory=dict)


def kernel_accuracy(measured: MeasuredProfile, hardware: HardwareSpec) -> KernelErrors:
    """Datasheet-roofline error on each measured table (GEMM, attention, all-reduce) and the
    leave-one-shape-out error of the GEMM ratio transfer."""
    rates = _rates(hardware)
    out = KernelErrors()
    for table in measured.gemm:
        roof, loo = _gemm_errors(table, rates)
        out.roofline[f"gemm {table.engine} {table.dtype}"] = roof
        out.transfer[f"gemm {table.engine} {table.dtype}"] = loo
    by_kind: dict[str, tuple[list[np.ndarray], list[np.ndarray]]] = defaultdict(lambda: ([], []))
    for att in measured.attention:
        kv_b = 1.0 if att.kv_dtype == "fp8" else 2.0
        if att.mechanism == "mla":
            continue
        op = AttentionOp(
            kind=AttentionKind.FULL,
            layers=1,
            num_heads=att.num_heads,
            num_kv_heads=att.num_kv_heads,
            head_dim=att.head_dim,
            window_tokens=None,
            kv_bytes_per_token=2.0 * att.num_kv_heads * att.head_dim * kv_b,
            decode_flops_per_pair=4.0 * att.num_heads * att.head_dim,
            prefill_flops_per_pair=4.0 * att.num_heads * att.head_dim,
        )
        grid_b, grid_l = np.meshgrid(att.batch, att.length, indexing="ij")
        b, length = grid_b.ravel(), grid_l.ravel()
        if att.phase == "decode":
            cost = attention_decode_cost(
                op, b, b * length, activation_bytes=2.0, rates=rates, lookup=None
            )
        else:
            work = StepWork.prefill(length, sequences=b)
            cost = attention_prefill_cost(
                op,
                work.prefill_sequences,
                work.prefill_tokens,
                work.prefill_cached_tokens,
                work.prefill_attention_pairs,
                activation_bytes=2.0,
                rates=rates,
                lookup=None,
            )
        name = f"attention {att.phase} {att.engine}"
        by_kind[name][0].append(cost.time_s)
        by_kind[name][1].append(att.latency_s.ravel())
    for name, (pred, true) in sorted(by_kind.items()):
        out.roofline[name] = ErrorSummary.of(np.concatenate(pred), np.concatenate(true))
    _all_reduce_errors(measured, hardware, out)
    return out


def _all_reduce_errors(
    measured: MeasuredProfile, hardware: HardwareSpec, out: KernelErrors
) -> None:
    """Datasheet all-reduce model vs each measured table: ``nccl`` tables against NCCL's model
    (ring, NVLS where the node multicasts), ``custom`` ones (TensorRT-LLM's AUTO choice)
    against TensorRT-LLM's algorithm choice; per implementation and per number of GPUs; and
    the plain all-to-all model against the NCCL all-to-all tables."""
    link = hardware.interconnect.bandwidth_bytes_per_s if hardware.interconnect else None
    if link is None:
        return
    topology = LinkTopology(
        link_bandwidth_bytes_per_s=float(link),
        multicast=float(link) >= NVLS_MIN_LINK_BYTES_PER_S,
        gpus_per_node=hardware.interconnect.gpus_per_node if hardware.interconnect else None,
    )
    pred: dict[str, list[np.ndarray]] = defaultdict(list)
    true: dict[str, list[np.ndarray]] = defaultdict(list)
    for coll in sorted(measured.collectives, key=lambda t: (t.implementation, t.num_gpus)):
        if coll.op != "all_reduce":
            continue
        t = all_reduce_time_s(
            coll.message_bytes,
            num_gpus=coll.num_gpus,
            link_bandwidth_bytes_per_s=float(link),
            engine="trtllm" if coll.implementation == "custom" else None,
            topology=topology,
        )
        for key in (
            f"all_reduce {coll.implementation}",
            f"all_reduce {coll.implementation} {coll.num_gpus} GPUs",
        ):
            pred[key].append(t)
            true[key].append(coll.latency_s)
    for coll in measured.collectives:
        if coll.op == "all_to_all":
            pred["all_to_all nccl"].append(
                all_to_all_time_s(
                    coll.message_bytes,
                    num_gpus=coll.num_gpus,
                    link_bandwidth_bytes_per_s=float(link),
                )
            )
            true["all_to_all nccl"].append(coll.latency_s)
    for key in pred:
        out.roofline[key] = ErrorSummary.of(np.concatenate(pred[key]), np.concatenate(true[key]))
