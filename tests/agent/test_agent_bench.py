"""``measure`` is arithmetic over a probe: a fake one with exact timings needs no GPU."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servesize.agent.bench import (
    METHOD_VERSION,
    Suite,
    default_suite,
    measure,
    measure_suite,
    parse_peaks,
    step_count,
    summarize,
)
from servesize.agent.cli import app
from servesize.agent.probes import GIB, MIB, DeviceIdentity, NumpyCpuProbe
from servesize.agent.upload import SavedMeasurement
from servesize.schemas.measurements import GemmDtype, MeasurementUpload

PEAK_FLOP_PER_S = {"bf16": 800e12, "fp16": 400e12, "fp8": 1600e12}
LAUNCH_FLOOR_S = 10e-6


class FakeProbe:
    """An 80 GiB, 8-GPU device whose timings follow simple closed forms:

    - matmul: ``max(2·m·n·k / peak, 10 µs)`` with peak 800 (bf16), 400 (fp16) or
      1600 (fp8) TFLOP/s; fp8 rejects M < 16;
    - copy of S bytes: ``S / 1.5e12`` s, so 2·S bytes move at exactly 3 TB/s;
    - launch: 4 µs; all-reduce of S bytes: ``S / 2^28`` ms (256 MiB in exactly 1 ms).
    """

    def __init__(self, *, device: str = "cuda:0") -> None:
        self.device = device
        self.calls: list[str] = []

    def identity(self) -> DeviceIdentity:
        return DeviceIdentity(
            device=self.device,
            name="FakeGPU 80GB",
            uuid="GPU-00000000-0000-0000-0000-000000000000",
            memory_bytes=80 * GIB,
            sm_clock_mhz=1980.0,
            gpu_count=8,
        )

    def gemm_dtypes(self) -> tuple[GemmDtype, ...]:
        return ("bf16", "fp16", "fp8")

    def time_gemm_s(self, *, dtype: GemmDtype, m: int, n: int, k: int) -> float | None:
        self.calls.append(f"gemm {dtype} {m}")
        if dtype == "fp8" and m < 16:
            return None
        return max(2 * m * n * k / PEAK_FLOP_PER_S[dtype], LAUNCH_FLOOR_S)

    def time_copy_s(self, *, nbytes: int) -> float:
        self.calls.append(f"copy {nbytes}")
        return nbytes / 1.5e12

    def time_launch_s(self) -> float:
        return 4e-6

    def all_reduce_world_size(self) -> int:
        return 8

    def time_all_reduce_s(self, *, message_bytes: Sequence[int]) -> list[float]:
        return [nbytes / (256 * MIB) * 1e-3 for nbytes in message_bytes]


SMALL = Suite(
    gemm_m=(1, 16384),
    gemm_nk=((4096, 4096),),
    copy_bytes=(1 * GIB, 64 * GIB),
    all_reduce_bytes=(256 * MIB,),
)


def test_fake_timings_become_exact_rates() -> None:
    upload = measure_suite(FakeProbe(), SMALL)

    by_key = {(g.dtype, g.m): g for g in upload.gemm}
    # M=1: 2·1·4096·4096 = 33,554,432 FLOP, launch-bound at 10 µs → 3.3554432 TFLOP/s
    assert by_key["bf16", 1].latency_s == LAUNCH_FLOOR_S
    assert by_key["bf16", 1].achieved_tflop_per_s == pytest.approx(3.3554432, rel=1e-12)
    # M=16384: 2·16384·4096·4096 = 549,755,813,888 FLOP in 687.19 µs → exactly 800 TFLOP/s
    assert by_key["bf16", 16384].achieved_tflop_per_s == pytest.approx(800.0, rel=1e-12)
    assert by_key["fp16", 16384].achieved_tflop_per_s == pytest.approx(400.0, rel=1e-12)
    assert by_key["fp8", 16384].achieved_tflop_per_s == pytest.approx(1600.0, rel=1e-12)
    assert ("fp8", 1) not in by_key  # the probe rejected the shape: left out, not invented
    # copy of 1 GiB: 2·2^30 bytes moved in 2^30 / 1.5e12 s → 3e12 B/s; the 64 GiB copy needs
    # 128 GiB, more than half of 80 GiB, so it is skipped
    (copy,) = upload.memory_bandwidth
    assert (copy.kind, copy.bytes_moved) == ("copy", 2 * GIB)
    assert copy.achieved_bytes_per_s == pytest.approx(3e12, rel=1e-12)
    # all-reduce of 256 MiB in 1 ms over 8 GPUs: algbw = 268,435,456 B / 1e-3 s
    # = 2.68435456e11 B/s; busbw = algbw · 2·7/8 = 4.69762048e11 B/s
    (allreduce,) = upload.collectives
    assert (allreduce.op, allreduce.num_gpus, allreduce.message_bytes) == (
        "all_reduce",
        8,
        256 * MIB,
    )
    assert allreduce.bus_bandwidth_bytes_per_s == pytest.approx(4.69762048e11, rel=1e-12)
    assert upload.kernel_launch_overhead_s == 4e-6


def test_provenance_records_the_device_and_the_method() -> None:
    provenance = measure_suite(FakeProbe(), SMALL).provenance
    assert provenance.method_version == METHOD_VERSION
    assert provenance.device == "cuda:0"
    assert provenance.gpu_name == "FakeGPU 80GB"
    assert provenance.gpu_memory_bytes == 80 * GIB
    assert provenance.gpu_count == 8
    assert provenance.sm_clock_mhz == 1980.0
    assert provenance.measured_at.tzinfo is not None


def test_progress_reports_every_step() -> None:
    steps: list[tuple[int, int, str]] = []
    measure_suite(
        FakeProbe(), SMALL, on_step=lambda done, total, label: steps.append((done, total, label))
    )
    # 3 dtypes × 2 shapes + 2 copies + launch + one all-reduce sweep
    total = step_count(SMALL, dtypes=3, world_size=8)
    assert total == 10
    assert [s[0] for s in steps] == list(range(1, total + 1))
    assert {s[1] for s in steps} == {total}
    assert "skipped" in steps[7][2]


def test_default_suites_cover_decode_and_prefill_at_model_widths() -> None:
    full = default_suite(accelerator=True, quick=False)
    assert (min(full.gemm_m), max(full.gemm_m)) == (1, 16384)
    assert {(4096, 14336), (28672, 8192)} <= set(full.gemm_nk)
    probe = FakeProbe()
    upload = measure(probe, quick=True)
    quick = default_suite(accelerator=True, quick=True)
    assert len(upload.gemm) == 3 * len(quick.gemm_shapes()) - len(quick.gemm_nk)  # fp8 M=1 out
    assert measure(FakeProbe(device="cpu"), quick=True).gemm[0].n == 1024  # the CPU quick suite


def test_summary_against_datasheet() -> None:
    upload = measure_suite(FakeProbe(), SMALL)
    rows = summarize(
        upload,
        peak_tflop_per_s=parse_peaks(["bf16=989", "fp8=1979"]),
        peak_memory_bytes_per_s=3.35e12,
    )
    by_metric = {row.metric: row for row in rows}
    prefill = by_metric["bf16 matmul, prefill"]
    assert prefill.achieved == pytest.approx(800.0)
    assert prefill.efficiency == pytest.approx(800 / 989)
    assert by_metric["bf16 matmul, decode"].detail.startswith("best of 1: M=1 ")
    assert by_metric["fp16 matmul, prefill"].efficiency is None  # no datasheet peak given
    assert by_metric["memory bandwidth"].efficiency == pytest.approx(3e12 / 3.35e12)
    assert by_metric["all-reduce bus bandwidth"].achieved == pytest.approx(469.762048)
    assert by_metric["launch overhead"].achieved == pytest.approx(4.0)


@pytest.mark.parametrize("bad", ["bf16", "bf17=1", "bf16=fast", "fp8=-1"])
def test_parse_peaks_rejects_bad_values(bad: str) -> None:
    with pytest.raises(ValueError, match=r"bf16|fp8|DTYPE"):
        parse_peaks([bad])


def test_cpu_probe_end_to_end() -> None:
    probe = NumpyCpuProbe(repeats=2, flush_bytes=1 * MIB)
    suite = Suite(gemm_m=(1, 8), gemm_nk=((64, 32),), copy_bytes=(1 * MIB,), all_reduce_bytes=())
    upload = measure_suite(probe, suite)

    valid = MeasurementUpload.model_validate(upload.model_dump(mode="json"))
    assert valid.provenance.device == "cpu"
    assert valid.provenance.gpu_name
    assert [(g.dtype, g.m, g.n, g.k) for g in valid.gemm] == [
        ("fp32", 1, 64, 32),
        ("fp32", 8, 64, 32),
    ]
    assert valid.memory_bandwidth[0].bytes_moved == 2 * MIB
    assert valid.collectives == []
    assert valid.kernel_launch_overhead_s is not None
    assert probe.time_gemm_s(dtype="bf16", m=1, n=8, k=8) is None


def test_cli_bench_cpu_quick_saves_a_valid_payload(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    result = CliRunner().invoke(
        app,
        ["bench", "--device", "cpu", "--quick", "--out", str(out), "--peak-tflop-per-s", "fp32=2"],
    )
    assert result.exit_code == 0, result.output
    assert "fp32 matmul, decode" in result.output
    saved = SavedMeasurement.load(out)
    assert uuid.UUID(saved.idempotency_key).version == 4
    assert saved.profile is None
    assert saved.payload.provenance.device == "cpu"
    assert len(saved.payload.gemm) == 3


def test_cli_bench_cuda_without_torch_is_a_usage_error() -> None:
    pytest.importorskip("numpy")  # always present; torch must not be
    if "torch" in sys.modules or _torch_importable():
        pytest.skip("torch is installed here")
    result = CliRunner().invoke(app, ["bench", "--device", "cuda:0"])
    assert result.exit_code == 2
    assert "servesize[cuda]" in result.output


def test_cli_rejects_an_unknown_device() -> None:
    result = CliRunner().invoke(app, ["bench", "--device", "tpu"])
    assert result.exit_code == 2


def _torch_importable() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None


def test_agent_imports_neither_torch_nor_nvml() -> None:
    code = (
        "import sys, servesize.agent.cli, servesize.agent.probes, servesize.agent.collectives; "
        "sys.exit(bool({'torch', 'pynvml'} & set(sys.modules)))"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


class PoweredProbe(FakeProbe):
    """FakeProbe whose identity carries NVML power read under load and at idle."""

    def __init__(self, busy: tuple[float, ...], idle: tuple[float, ...]) -> None:
        super().__init__()
        self.busy, self.idle = busy, idle

    def identity(self) -> DeviceIdentity:
        return replace(
            super().identity(), power_samples_w=self.busy, idle_power_samples_w=self.idle
        )


def test_power_samples_travel_in_the_upload_and_idle_above_busy_is_dropped() -> None:
    upload = measure_suite(PoweredProbe((650.0, 660.0), (70.0, 71.0)), SMALL)
    assert upload.power_samples_w == [650.0, 660.0]
    assert upload.idle_power_samples_w == [70.0, 71.0]
    # A reading taken while something else ran (idle median 700 W > 660 W) is not idle power:
    # the upload keeps the samples under load only (the API refuses idle above busy).
    odd = measure_suite(PoweredProbe((650.0, 660.0), (700.0,)), SMALL)
    assert odd.power_samples_w == [650.0, 660.0]
    assert odd.idle_power_samples_w == []
    assert measure_suite(FakeProbe(), SMALL).power_samples_w == []
