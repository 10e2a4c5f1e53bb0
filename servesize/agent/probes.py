"""Devices the agent can time: the ``Probe`` protocol and its CPU and CUDA implementations.

A probe owns *how* a primitive is timed (warm-up, cache flush, fresh inputs, median of
repeats); :mod:`servesize.agent.bench` owns the arithmetic that turns times into rates, so
tests drive it with a fake probe of exact timings.

The timing rules follow these tools:
``triton-lang/triton:python/triton/testing.py`` (``do_bench``: warm-up budget, 256 MB
cache flush before every timed call, CUDA events) and
``stas00/ml-engineering:compute/accelerator/benchmarks/mamf-finder.py`` (fresh random
inputs, median of repeats).
"""

from __future__ import annotations

import importlib
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from servesize.schemas.measurements import GemmDtype

MIB = 1 << 20
GIB = 1 << 30
L2_FLUSH_BYTES = 256 * MIB
"""Zeroed before every timed call: larger than any known last-level cache on a GPU
(mamf-finder sizes it for the AMD MI300X Infinity Cache)."""

LAUNCHES_PER_SAMPLE = 100
"""Back-to-back tiny kernels per launch-overhead sample."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceIdentity:
    """What was measured: the fields of :class:`~servesize.schemas.measurements.Provenance`
    that come from the device (``None`` where the device cannot tell)."""

    device: str
    name: str
    uuid: str | None = None
    memory_bytes: int | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    torch_version: str | None = None
    sm_clock_mhz: float | None = None
    memory_clock_mhz: float | None = None
    power_limit_w: float | None = None
    ecc_enabled: bool | None = None
    mig_mode: bool | None = None
    gpu_count: int = 1
    power_samples_w: tuple[float, ...] = ()
    """NVML board power read while compute-bound GEMMs (M >= :data:`POWER_MIN_M`) ran."""
    idle_power_samples_w: tuple[float, ...] = ()
    """NVML board power read before any probe ran."""


POWER_MIN_M = 1024
"""GEMMs with at least this many rows are compute-bound on every datacenter GPU: the board
power read while they run is the busy power (NVML averages it over up to a second, so only
the longer runs of a shape read their full draw)."""


class Probe(Protocol):
    """A device that times primitives. Every time is the median of repeats, in seconds."""

    def identity(self) -> DeviceIdentity:
        """Identity and conditions; called after the timings so clocks reflect the run."""
        ...

    def gemm_dtypes(self) -> tuple[GemmDtype, ...]:
        """Matmul dtypes this device supports."""
        ...

    def time_gemm_s(self, *, dtype: GemmDtype, m: int, n: int, k: int) -> float | None:
        """One ``(m x k) @ (k x n)`` product; ``None`` when the device rejects the shape."""
        ...

    def time_copy_s(self, *, nbytes: int) -> float:
        """Copy ``nbytes`` between two device buffers (reads and writes ``nbytes`` each)."""
        ...

    def time_launch_s(self) -> float:
        """Time per launch of a tiny kernel issued back to back."""
        ...

    def all_reduce_world_size(self) -> int:
        """Devices an all-reduce spans; 1 means no collective is measured."""
        ...

    def time_all_reduce_s(self, *, message_bytes: Sequence[int]) -> list[float]:
        """One all-reduce per message size across ``all_reduce_world_size()`` devices."""
        ...


def _median_s(samples: Sequence[float]) -> float:
    return float(statistics.median(samples))


# --------------------------------------------------------------------------------------------
# CPU
# --------------------------------------------------------------------------------------------


def cpu_name() -> str:
    """The CPU model from ``/proc/cpuinfo`` (Linux), else what ``platform`` reports."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "Hardware") and value.strip():
                return value.strip()
    return platform.processor() or platform.machine() or "unknown CPU"


def host_memory_bytes() -> int | None:
    """Physical memory of the host, where ``sysconf`` knows it."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


class NumpyCpuProbe:
    """The host CPU through numpy (fp32 only: numpy has no bf16, and its fp16 matmul is not
    a BLAS path). Host clocks (``time.perf_counter``) time single calls.

    Per timed call: a cache-sized buffer is overwritten first, and the activation matrix is
    refilled with fresh ``standard_normal`` values; the weight matrix is drawn once per
    shape, as in a model where weights are fixed.
    """

    def __init__(
        self, *, repeats: int = 7, flush_bytes: int = L2_FLUSH_BYTES, seed: int = 0
    ) -> None:
        if repeats < 1:
            raise ValueError(f"repeats must be >= 1, got {repeats}")
        self._repeats = repeats
        self._flush = np.zeros(max(flush_bytes, 1), dtype=np.uint8)
        self._rng = np.random.default_rng(seed)

    def identity(self) -> DeviceIdentity:
        return DeviceIdentity(
            device="cpu", name=cpu_name()[:255], memory_bytes=host_memory_bytes(), gpu_count=1
        )

    def gemm_dtypes(self) -> tuple[GemmDtype, ...]:
        return ("fp32",)

    def _time_call_s(self, fn: Callable[[], object], refresh: Callable[[], object]) -> float:
        fn()  # warm-up: page faults, BLAS thread pool start
        samples = []
        for _ in range(self._repeats):
            refresh()
            self._flush.fill(1)
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
        return _median_s(samples)

    def time_gemm_s(self, *, dtype: GemmDtype, m: int, n: int, k: int) -> float | None:
        if dtype != "fp32":
            return None
        a = self._rng.standard_normal((m, k), dtype=np.float32)
        b = self._rng.standard_normal((k, n), dtype=np.float32)
        out = np.empty((m, n), dtype=np.float32)

        def refresh() -> None:
            self._rng.standard_normal(dtype=np.float32, out=a)

        return self._time_call_s(lambda: np.matmul(a, b, out=out), refresh)

    def time_copy_s(self, *, nbytes: int) -> float:
        src = np.full(nbytes, 7, dtype=np.uint8)  # copy speed does not depend on the values
        dst = np.empty_like(src)
        return self._time_call_s(lambda: np.copyto(dst, src), lambda: None)

    def time_launch_s(self) -> float:
        one = np.zeros(1, dtype=np.float32)

        def launches() -> None:
            for _ in range(LAUNCHES_PER_SAMPLE):
                np.add(one, 1.0, out=one)

        samples = []
        launches()
        for _ in range(self._repeats):
            start = time.perf_counter()
            launches()
            samples.append((time.perf_counter() - start) / LAUNCHES_PER_SAMPLE)
        return _median_s(samples)

    def all_reduce_world_size(self) -> int:
        return 1

    def time_all_reduce_s(self, *, message_bytes: Sequence[int]) -> list[float]:
        raise NotImplementedError("a single CPU has no all-reduce to measure")


# --------------------------------------------------------------------------------------------
# CUDA (torch and NVML are optional: imported here, never at module import)
# --------------------------------------------------------------------------------------------


def _nvml_value(fn: Callable[[], Any]) -> Any:
    """An NVML query, or ``None`` when the driver does not support it on this device."""
    try:
        return fn()
    except Exception:  # pynvml.NVMLError_* (NotSupported, NoPermission, ...)
        return None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


class TorchCudaProbe:
    """An NVIDIA (or ROCm) GPU through torch, with identity from NVML (``nvidia-ml-py``).

    Timing, after ``do_bench``: one call, a 5-call estimate, then ``warmup_ms`` worth of
    warm-up calls; each of ``repeats`` timed calls is preceded by refilling the inputs with
    fresh ``randn`` values and zeroing a 256 MiB buffer (L2 flush), and is bracketed by CUDA
    events on the current stream. The result is the median of the event times.
    """

    def __init__(
        self,
        device: str = "cuda:0",
        *,
        repeats: int = 10,
        warmup_ms: float = 25.0,
        collectives: bool = True,
    ) -> None:
        # NVML enumerates GPUs by PCI bus; make CUDA agree (only effective before CUDA starts).
        os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("torch reports no CUDA device")
        self._torch = torch
        self._device = torch.device(device)
        if self._device.type != "cuda":
            raise ValueError(f"TorchCudaProbe needs a cuda device, got {device!r}")
        self._index = self._device.index if self._device.index is not None else 0
        torch.cuda.set_device(self._index)
        self._repeats = repeats
        self._warmup_ms = warmup_ms
        self._collectives = collectives
        self._cache = torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device=self._device)
        self._sm_clock_samples_mhz: list[float] = []
        self._power_samples_w: list[float] = []
        self._idle_power_samples_w: list[float] = []
        self._compute_bound = False
        self._nvml: Any = None
        self._handle: Any = None
        try:
            nvml = importlib.import_module("pynvml")
            nvml.nvmlInit()
            self._nvml = nvml
            self._handle = self._nvml_handle()
        except Exception:  # NVML missing (ROCm, nvidia-ml-py not installed): identity from torch
            self._nvml = None
        for _ in range(3):
            self._sample_power(self._idle_power_samples_w)

    def _nvml_handle(self) -> Any:
        nvml = self._nvml
        props = self._torch.cuda.get_device_properties(self._index)
        uuid = getattr(props, "uuid", None)
        if uuid is not None:
            handle = _nvml_value(lambda: nvml.nvmlDeviceGetHandleByUUID(f"GPU-{uuid}"))
            if handle is not None:
                return handle
        return nvml.nvmlDeviceGetHandleByIndex(self._index)  # same order: PCI_BUS_ID

    # -- identity --------------------------------------------------------------------------

    def identity(self) -> DeviceIdentity:
        torch = self._torch
        props = torch.cuda.get_device_properties(self._index)
        nvml, h = self._nvml, self._handle
        name = str(props.name)
        uuid = f"GPU-{props.uuid}" if getattr(props, "uuid", None) is not None else None
        memory_bytes = int(props.total_memory)
        driver = ecc = mig = power_w = max_sm = max_mem = None
        if nvml is not None and h is not None:
            name = _text(_nvml_value(lambda: nvml.nvmlDeviceGetName(h))) or name
            uuid = _text(_nvml_value(lambda: nvml.nvmlDeviceGetUUID(h))) or uuid
            info = _nvml_value(lambda: nvml.nvmlDeviceGetMemoryInfo(h))
            memory_bytes = int(info.total) if info is not None else memory_bytes
            driver = _text(_nvml_value(nvml.nvmlSystemGetDriverVersion))
            limit_mw = _nvml_value(lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(h))
            power_w = float(limit_mw) / 1000 if limit_mw else None
            ecc_mode = _nvml_value(lambda: nvml.nvmlDeviceGetEccMode(h))
            ecc = bool(ecc_mode[0]) if ecc_mode is not None else None
            mig_mode = _nvml_value(lambda: nvml.nvmlDeviceGetMigMode(h))
            mig = bool(mig_mode[0]) if mig_mode is not None else None
            max_sm = _nvml_value(lambda: nvml.nvmlDeviceGetMaxClockInfo(h, nvml.NVML_CLOCK_SM))
            max_mem = _nvml_value(lambda: nvml.nvmlDeviceGetMaxClockInfo(h, nvml.NVML_CLOCK_MEM))
        sm_clock = (
            float(statistics.median(self._sm_clock_samples_mhz))
            if self._sm_clock_samples_mhz
            else (float(max_sm) if max_sm else None)
        )
        cuda_version = torch.version.cuda or getattr(torch.version, "hip", None)
        return DeviceIdentity(
            device=f"cuda:{self._index}",
            name=name[:255],
            uuid=uuid[:128] if uuid else None,
            memory_bytes=memory_bytes,
            driver_version=driver,
            cuda_version=str(cuda_version) if cuda_version else None,
            torch_version=str(torch.__version__),
            sm_clock_mhz=sm_clock or None,
            memory_clock_mhz=float(max_mem) if max_mem else None,
            power_limit_w=power_w,
            ecc_enabled=ecc,
            mig_mode=mig,
            gpu_count=int(torch.cuda.device_count()),
            power_samples_w=tuple(self._power_samples_w),
            idle_power_samples_w=tuple(self._idle_power_samples_w),
        )

    def _sample_sm_clock(self) -> None:
        """Record the SM clock while the timed calls are still running on the GPU."""
        nvml, h = self._nvml, self._handle
        if nvml is None or h is None:
            return
        mhz = _nvml_value(lambda: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM))
        if mhz:
            self._sm_clock_samples_mhz.append(float(mhz))
        if self._compute_bound:
            self._sample_power(self._power_samples_w)

    def _sample_power(self, into: list[float]) -> None:
        """Append the board power (``nvmlDeviceGetPowerUsage``, milliwatts) in watts."""
        nvml, h = self._nvml, self._handle
        if nvml is None or h is None:
            return
        milliwatts = _nvml_value(lambda: nvml.nvmlDeviceGetPowerUsage(h))
        if milliwatts:
            into.append(float(milliwatts) / 1000)

    # -- timing ----------------------------------------------------------------------------

    def _time_s(
        self, fn: Callable[[], object], refresh: Callable[[], object], *, flush: bool = True
    ) -> float:
        torch = self._torch
        fn()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(5):
            fn()
        end.record()
        torch.cuda.synchronize()
        estimate_ms = max(float(start.elapsed_time(end)) / 5, 1e-3)
        for _ in range(max(1, min(1000, int(self._warmup_ms / estimate_ms)))):
            fn()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(self._repeats)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(self._repeats)]
        for s, e in zip(starts, ends, strict=True):
            refresh()
            if flush:
                self._cache.zero_()
            s.record()
            fn()
            e.record()
        self._sample_sm_clock()
        torch.cuda.synchronize()
        return _median_s(
            [float(s.elapsed_time(e)) / 1e3 for s, e in zip(starts, ends, strict=True)]
        )

    def gemm_dtypes(self) -> tuple[GemmDtype, ...]:
        torch = self._torch
        dtypes: list[GemmDtype] = ["fp16"]
        if torch.cuda.is_bf16_supported():
            dtypes.insert(0, "bf16")
        major, minor = torch.cuda.get_device_capability(self._index)
        # fp8 tensor cores: Ada/Hopper (8.9+) on NVIDIA, MI300 (gfx942) on ROCm.
        fp8_hardware = (major, minor) >= (8, 9) or getattr(torch.version, "hip", None) is not None
        if fp8_hardware and hasattr(torch, "_scaled_mm") and hasattr(torch, "float8_e4m3fn"):
            dtypes.append("fp8")
        return tuple(dtypes)

    def time_gemm_s(self, *, dtype: GemmDtype, m: int, n: int, k: int) -> float | None:
        torch = self._torch
        self._compute_bound = m >= POWER_MIN_M
        try:
            if dtype in ("bf16", "fp16"):
                return self._time_mm_s(dtype, m=m, n=n, k=k)
            if dtype == "fp8":
                return self._time_scaled_mm_s(m=m, n=n, k=k)
        except torch.cuda.OutOfMemoryError:  # a prefill shape too big for a small GPU
            torch.cuda.empty_cache()
        finally:
            self._compute_bound = False
        return None

    def _time_mm_s(self, dtype: GemmDtype, *, m: int, n: int, k: int) -> float:
        torch = self._torch
        dev = self._device
        tdtype = torch.bfloat16 if dtype == "bf16" else torch.float16
        a = torch.randn(m, k, dtype=tdtype, device=dev)
        b = torch.randn(k, n, dtype=tdtype, device=dev)
        out = torch.empty(m, n, dtype=tdtype, device=dev)

        def refresh() -> None:
            a.normal_()
            b.normal_()

        return self._time_s(lambda: torch.mm(a, b, out=out), refresh)

    def _time_scaled_mm_s(self, *, m: int, n: int, k: int) -> float | None:
        """fp8 e4m3 inputs (``e4m3fnuz`` on ROCm), unit scales, bf16 output."""
        torch = self._torch
        dev = self._device
        f8 = torch.float8_e4m3fnuz if getattr(torch.version, "hip", None) else torch.float8_e4m3fn
        a_src = torch.randn(m, k, dtype=torch.bfloat16, device=dev)
        b_src = torch.randn(n, k, dtype=torch.bfloat16, device=dev)
        a8 = a_src.to(f8)
        b8 = b_src.to(f8).t()  # _scaled_mm wants the second operand column-major
        scale = torch.ones((), dtype=torch.float32, device=dev)

        def refresh() -> None:
            a_src.normal_()
            b_src.normal_()
            a8.copy_(a_src)
            b8.t().copy_(b_src)

        def mm8() -> object:
            return torch._scaled_mm(a8, b8, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16)

        try:
            return self._time_s(mm8, refresh)
        except RuntimeError as exc:
            if isinstance(exc, torch.cuda.OutOfMemoryError):
                raise
            return None  # a shape cuBLASLt rejects for fp8, e.g. a dimension not a multiple of 16

    def time_copy_s(self, *, nbytes: int) -> float:
        torch = self._torch
        src = torch.empty(nbytes, dtype=torch.uint8, device=self._device).random_(0, 255)
        dst = torch.empty_like(src)
        return self._time_s(lambda: dst.copy_(src), lambda: None, flush=False)

    def time_launch_s(self) -> float:
        torch = self._torch
        one = torch.zeros(1, dtype=torch.float32, device=self._device)

        def launches() -> None:
            for _ in range(LAUNCHES_PER_SAMPLE):
                one.add_(1.0)

        return self._time_s(launches, lambda: None, flush=False) / LAUNCHES_PER_SAMPLE

    def all_reduce_world_size(self) -> int:
        return int(self._torch.cuda.device_count()) if self._collectives else 1

    def time_all_reduce_s(self, *, message_bytes: Sequence[int]) -> list[float]:
        from servesize.agent.collectives import all_reduce_sweep_s

        return all_reduce_sweep_s(
            world_size=self.all_reduce_world_size(),
            message_bytes=message_bytes,
            repeats=self._repeats,
        )
