"""Turn a probe's timings into a :class:`~servesize.schemas.measurements.MeasurementUpload`.

Pure arithmetic over a :class:`~servesize.agent.probes.Probe`, with the conventions of the
tools cited below:

- matmul ``(M x K) @ (K x N)``: FLOPs = ``2·M·N·K``; TFLOP/s = ``2·M·N·K / t / 1e12``
  (mamf-finder's convention and ``torch.utils.flop_counter``'s ``mm_flop``);
- device copy of ``S`` bytes: ``bytes_moved = 2·S`` (each byte is read once and written once),
  bandwidth = ``2·S / t``;
- all-reduce of ``S`` bytes over ``n`` GPUs: ``algbw = S / t``, bus bandwidth =
  ``algbw · 2(n−1)/n`` (``NVIDIA/nccl-tests:doc/PERFORMANCE.md``).
"""

from __future__ import annotations

import socket
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from servesize import __version__
from servesize.agent.probes import GIB, MIB, DeviceIdentity, Probe
from servesize.schemas.measurements import (
    BandwidthResult,
    CollectiveResult,
    GemmDtype,
    GemmResult,
    MeasurementUpload,
    Provenance,
)

METHOD_VERSION = 1
"""Bumped whenever what is measured, or how, changes (mamf-finder keeps ``benchmark_version``)."""

DECODE_M = (1, 2, 4, 8, 16, 32, 64, 128, 256)
"""Decode-shaped rows: M is the number of sequences in the batch."""
PREFILL_M = (512, 1024, 2048, 4096, 8192, 16384)
"""Prefill-shaped rows: M is the number of prompt tokens in the batch."""
LLAMA_NK = (
    (4096, 4096),  # Llama-3.1-8B: hidden 4096 (attention output projection)
    (14336, 4096),  # Llama-3.1-8B: MLP up/gate, intermediate 14336
    (4096, 14336),  # Llama-3.1-8B: MLP down
    (8192, 8192),  # Llama-3.1-70B: hidden 8192
    (28672, 8192),  # Llama-3.1-70B: MLP up/gate, intermediate 28672
    (8192, 28672),  # Llama-3.1-70B: MLP down
)
"""(N, K) of the linear layers of meta-llama/Llama-3.1-8B and -70B (their ``config.json``)."""

DECODE_MAX_M = max(DECODE_M)


@dataclass(frozen=True, slots=True, kw_only=True)
class Suite:
    """What to measure: fixed shapes and sizes, so two runs of one suite are comparable."""

    gemm_m: tuple[int, ...]
    gemm_nk: tuple[tuple[int, int], ...]
    copy_bytes: tuple[int, ...]
    all_reduce_bytes: tuple[int, ...]
    launch_overhead: bool = True

    def gemm_shapes(self) -> list[tuple[int, int, int]]:
        """Every ``(m, n, k)``, widths outermost."""
        return [(m, n, k) for n, k in self.gemm_nk for m in self.gemm_m]


def default_suite(*, accelerator: bool, quick: bool) -> Suite:
    """The standard suite for a GPU or a CPU; ``quick`` trims it to a minute or less."""
    if accelerator and not quick:
        return Suite(
            gemm_m=DECODE_M + PREFILL_M,
            gemm_nk=LLAMA_NK,
            copy_bytes=(1 * GIB, 4 * GIB),
            all_reduce_bytes=tuple(1 << p for p in range(10, 31, 2)),  # 1 KiB .. 1 GiB
        )
    if accelerator:
        return Suite(
            gemm_m=(1, 16, 128, 1024, 4096),
            gemm_nk=LLAMA_NK[:3],
            copy_bytes=(1 * GIB,),
            all_reduce_bytes=(1 * MIB, 64 * MIB, 256 * MIB),
        )
    if not quick:
        return Suite(
            gemm_m=(1, 16, 64, 256, 1024),
            gemm_nk=LLAMA_NK[:3],
            copy_bytes=(1 * GIB,),
            all_reduce_bytes=(),
        )
    # A smoke test of the method on any machine: small widths, a buffer bigger than most LLCs.
    return Suite(
        gemm_m=(1, 16, 128), gemm_nk=((1024, 1024),), copy_bytes=(64 * MIB,), all_reduce_bytes=()
    )


def step_count(suite: Suite, *, dtypes: int, world_size: int) -> int:
    """How many primitives :func:`measure_suite` times (for progress bars)."""
    collectives = 1 if world_size >= 2 and suite.all_reduce_bytes else 0
    return (
        len(suite.gemm_shapes()) * dtypes
        + len(suite.copy_bytes)
        + int(suite.launch_overhead)
        + collectives
    )


def gemm_tflop_per_s(*, m: int, n: int, k: int, latency_s: float) -> float:
    """``2·m·n·k / latency_s`` in units of 10^12 FLOP/s."""
    return 2 * m * n * k / latency_s / 1e12


def copy_bytes_per_s(*, nbytes: int, latency_s: float) -> float:
    """A copy reads and writes every byte: ``2·nbytes / latency_s``."""
    return 2 * nbytes / latency_s


def all_reduce_bus_bytes_per_s(*, message_bytes: int, num_gpus: int, latency_s: float) -> float:
    """nccl-tests bus bandwidth: ``(message_bytes / latency_s) · 2(n−1)/n``."""
    return message_bytes / latency_s * 2 * (num_gpus - 1) / num_gpus


StepCallback = Callable[[int, int, str], None]
"""Called after each primitive with ``(done, total, label)``."""


def _no_progress(done: int, total: int, label: str) -> None:
    del done, total, label


def measure(
    probe: Probe, *, quick: bool = False, on_step: StepCallback = _no_progress
) -> MeasurementUpload:
    """Run the default suite for the probe's device (a GPU unless it reports ``cpu``)."""
    accelerator = probe.identity().device != "cpu"
    return measure_suite(
        probe, default_suite(accelerator=accelerator, quick=quick), on_step=on_step
    )


def measure_suite(
    probe: Probe, suite: Suite, *, on_step: StepCallback = _no_progress
) -> MeasurementUpload:
    """Time every primitive of ``suite`` on ``probe`` and convert the times to rates.

    Shapes the probe rejects (``None``) are left out; copies that would not fit in half of
    the device memory are skipped.
    """
    measured_at = datetime.now(UTC)
    dtypes = probe.gemm_dtypes()
    world_size = probe.all_reduce_world_size()
    total = step_count(suite, dtypes=len(dtypes), world_size=world_size)
    done = 0

    def step(label: str) -> None:
        nonlocal done
        done += 1
        on_step(done, total, label)

    gemm: list[GemmResult] = []
    for dtype in dtypes:
        for m, n, k in suite.gemm_shapes():
            latency_s = probe.time_gemm_s(dtype=dtype, m=m, n=n, k=k)
            if latency_s is None:
                step(f"{dtype} matmul {m}x{n}x{k} (skipped: rejected by the device)")
                continue
            step(f"{dtype} matmul {m}x{n}x{k}")
            rate = gemm_tflop_per_s(m=m, n=n, k=k, latency_s=latency_s)
            gemm.append(
                GemmResult(
                    dtype=dtype, m=m, n=n, k=k, latency_s=latency_s, achieved_tflop_per_s=rate
                )
            )

    memory_bytes = probe.identity().memory_bytes
    bandwidth: list[BandwidthResult] = []
    for nbytes in suite.copy_bytes:
        if memory_bytes is not None and 2 * nbytes > memory_bytes // 2:
            step(f"copy {nbytes / MIB:g} MiB (skipped: too large for this device)")
            continue
        latency_s = probe.time_copy_s(nbytes=nbytes)
        step(f"copy {nbytes / MIB:g} MiB")
        bandwidth.append(
            BandwidthResult(
                kind="copy",
                bytes_moved=2 * nbytes,
                latency_s=latency_s,
                achieved_bytes_per_s=copy_bytes_per_s(nbytes=nbytes, latency_s=latency_s),
            )
        )

    launch_s: float | None = None
    if suite.launch_overhead:
        launch_s = probe.time_launch_s()
        step("kernel launch overhead")

    collectives: list[CollectiveResult] = []
    if world_size >= 2 and suite.all_reduce_bytes:
        times_s = probe.time_all_reduce_s(message_bytes=suite.all_reduce_bytes)
        step(f"all-reduce over {world_size} GPUs")
        for nbytes, latency_s in zip(suite.all_reduce_bytes, times_s, strict=True):
            collectives.append(
                CollectiveResult(
                    op="all_reduce",
                    num_gpus=world_size,
                    message_bytes=nbytes,
                    latency_s=latency_s,
                    bus_bandwidth_bytes_per_s=all_reduce_bus_bytes_per_s(
                        message_bytes=nbytes, num_gpus=world_size, latency_s=latency_s
                    ),
                )
            )

    ident = probe.identity()
    provenance = Provenance(
        agent_version=__version__,
        method_version=METHOD_VERSION,
        host=socket.gethostname()[:255] or "unknown",
        device=ident.device,
        gpu_name=ident.name,
        gpu_uuid=ident.uuid,
        gpu_memory_bytes=ident.memory_bytes,
        driver_version=ident.driver_version,
        cuda_version=ident.cuda_version,
        torch_version=ident.torch_version,
        sm_clock_mhz=ident.sm_clock_mhz,
        memory_clock_mhz=ident.memory_clock_mhz,
        power_limit_w=ident.power_limit_w,
        ecc_enabled=ident.ecc_enabled,
        mig_mode=ident.mig_mode,
        gpu_count=ident.gpu_count,
        measured_at=measured_at,
    )
    return MeasurementUpload(
        provenance=provenance,
        gemm=gemm,
        memory_bandwidth=bandwidth,
        collectives=collectives,
        kernel_launch_overhead_s=launch_s,
        power_samples_w=list(ident.power_samples_w),
        idle_power_samples_w=_idle_below_busy(ident),
    )


def _idle_below_busy(ident: DeviceIdentity) -> list[float]:
    """The idle samples when the upload also has busy samples and their median is lower
    (the upload refuses idle power without or above the power under load)."""
    busy, idle = ident.power_samples_w, ident.idle_power_samples_w
    if not busy or not idle or statistics.median(idle) > statistics.median(busy):
        return []
    return list(idle)


# --------------------------------------------------------------------------------------------
# Summary: achieved against datasheet
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SummaryRow:
    """One line of the end-of-run table; ``efficiency`` = achieved / peak when a peak is known."""

    metric: str
    detail: str
    achieved: float
    unit: str
    peak: float | None
    efficiency: float | None


def _row(metric: str, detail: str, achieved: float, unit: str, peak: float | None) -> SummaryRow:
    efficiency = achieved / peak if peak else None
    return SummaryRow(
        metric=metric, detail=detail, achieved=achieved, unit=unit, peak=peak, efficiency=efficiency
    )


def summarize(
    upload: MeasurementUpload,
    *,
    peak_tflop_per_s: Mapping[GemmDtype, float],
    peak_memory_bytes_per_s: float | None,
    peak_bus_bytes_per_s: float | None = None,
) -> list[SummaryRow]:
    """Best matmul rate per dtype, separately for decode (M ≤ 256) and prefill (M > 256)
    shapes, the best copy and bus bandwidth, and the launch overhead."""
    rows: list[SummaryRow] = []
    dtypes: list[GemmDtype] = list(dict.fromkeys(g.dtype for g in upload.gemm))
    for dtype in dtypes:
        for phase in ("decode", "prefill"):
            results = [
                g
                for g in upload.gemm
                if g.dtype == dtype and (g.m <= DECODE_MAX_M) == (phase == "decode")
            ]
            if not results:
                continue
            best = max(results, key=lambda g: g.achieved_tflop_per_s)
            rows.append(
                _row(
                    f"{dtype} matmul, {phase}",
                    f"best of {len(results)}: M={best.m} N={best.n} K={best.k}",
                    best.achieved_tflop_per_s,
                    "TFLOP/s",
                    peak_tflop_per_s.get(dtype),
                )
            )
    if upload.memory_bandwidth:
        best_bw = max(upload.memory_bandwidth, key=lambda b: b.achieved_bytes_per_s)
        rows.append(
            _row(
                "memory bandwidth",
                f"{best_bw.kind}, {best_bw.bytes_moved / GIB:g} GiB moved",
                best_bw.achieved_bytes_per_s / 1e9,
                "GB/s",
                peak_memory_bytes_per_s / 1e9 if peak_memory_bytes_per_s else None,
            )
        )
    if upload.collectives:
        best_c = max(upload.collectives, key=lambda c: c.bus_bandwidth_bytes_per_s)
        rows.append(
            _row(
                "all-reduce bus bandwidth",
                f"{best_c.num_gpus} GPUs, {best_c.message_bytes / MIB:g} MiB",
                best_c.bus_bandwidth_bytes_per_s / 1e9,
                "GB/s",
                peak_bus_bytes_per_s / 1e9 if peak_bus_bytes_per_s else None,
            )
        )
    if upload.kernel_launch_overhead_s is not None:
        rows.append(
            _row(
                "launch overhead",
                "tiny kernel, back to back",
                upload.kernel_launch_overhead_s * 1e6,
                "µs",
                None,
            )
        )
    return rows


def parse_peaks(values: Sequence[str]) -> dict[GemmDtype, float]:
    """``["bf16=989", "fp8=1979"]`` → ``{"bf16": 989.0, "fp8": 1979.0}`` (TFLOP/s)."""
    known: tuple[GemmDtype, ...] = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")
    peaks: dict[GemmDtype, float] = {}
    for value in values:
        name, sep, number = value.partition("=")
        dtype = next((d for d in known if d == name.strip().lower()), None)
        if not sep or dtype is None:
            raise ValueError(
                f"expected DTYPE=TFLOPS with DTYPE in {', '.join(known)}, got {value!r}"
            )
        try:
            peak = float(number)
        except ValueError:
            raise ValueError(f"peak in {value!r} is not a number") from None
        if not peak > 0:
            raise ValueError(f"peak in {value!r} must be positive")
        peaks[dtype] = peak
    return peaks
