"""The ``servesize-agent`` command line: measure, benchmark, convert, upload.

- ``bench``: time matmuls, memory copies, kernel launches and all-reduces on this machine;
- ``endpoint``: load-test a live OpenAI-compatible streaming endpoint;
- ``ingest``: convert vllm bench serve / GuideLLM / AIPerf / inference-perf / llm-d result files;
- ``upload``: send a file saved with ``--out`` (same idempotency key, so never stored twice).
"""

from __future__ import annotations

import asyncio
import os
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from servesize import __version__
from servesize.agent.bench import METHOD_VERSION, measure, parse_peaks, summarize
from servesize.agent.endpoint import (
    ApiKind,
    EndpointTarget,
    LoadLevel,
    RequestRecord,
    Slo,
    benchmark_endpoint,
)
from servesize.agent.ingest import IngestFormat, gaps, ingest_files
from servesize.agent.probes import NumpyCpuProbe, Probe
from servesize.agent.upload import SavedMeasurement, UploadError, upload
from servesize.schemas.measurements import (
    EndpointBenchmark,
    LatencyStats,
    MeasurementUpload,
    Provenance,
)

app = typer.Typer(
    help="Measure this machine or a serving endpoint and upload the results to servesize."
)
console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)


def _info(text: str) -> None:
    """A status line on stdout; rich markup allowed, never hard-wrapped."""
    console.print(text, soft_wrap=True)


def _error(text: str) -> None:
    err_console.print(text, soft_wrap=True)


TOKEN_ENV = "SERVESIZE_TOKEN"
UNKNOWN_GPU = "unknown"

UploadUrl = Annotated[
    str | None,
    typer.Option("--upload", help="servesize server URL to upload to, e.g. http://host:8000."),
]
Token = Annotated[
    str | None,
    typer.Option(envvar=TOKEN_ENV, help="API key with scope profiles:write.", show_default=False),
]
ProfileId = Annotated[
    str | None, typer.Option("--profile", help="Hardware profile id on the server, e.g. h100-sxm.")
]
OutFile = Annotated[
    Path | None,
    typer.Option("--out", help="Save the payload (and its idempotency key) to this JSON file."),
]


def _version(value: bool) -> None:
    if value:
        print(f"servesize-agent {__version__}")
        raise typer.Exit()


@app.callback(invoke_without_command=True)
def main_callback(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """Measure this machine or a serving endpoint and upload the results to servesize."""
    if ctx.invoked_subcommand is None:
        print(ctx.get_help())


# --------------------------------------------------------------------------------------------
# Delivery: save and/or upload
# --------------------------------------------------------------------------------------------


def _send(saved: SavedMeasurement, *, url: str, token: str | None, profile: str | None) -> None:
    if not token:
        raise typer.BadParameter(f"an API key is needed: --token or ${TOKEN_ENV}")

    def on_retry(attempt: int, delay_s: float, reason: str) -> None:
        _error(f"attempt {attempt} failed ({escape(reason)}); retrying in {delay_s:.1f} s")

    try:
        result = upload(saved, url=url, token=token, profile=profile, on_retry=on_retry)
    except UploadError as exc:
        status = f"HTTP {exc.status_code}: " if exc.status_code else ""
        _error(f"[red]upload failed[/red] {status}{escape(exc.detail)}")
        for line in exc.errors:
            _error(f"  - {escape(line)}")
        raise typer.Exit(1) from exc
    replay = " (already stored: idempotent replay)" if result.replayed else ""
    _info(
        f"uploaded: measurement {escape(str(result.measurement_id))} to profile "
        f"{escape(profile or saved.profile or '')}{replay}"
    )


def _deliver(
    payload: MeasurementUpload,
    *,
    out: Path | None,
    url: str | None,
    token: str | None,
    profile: str | None,
) -> None:
    if url is not None and payload.provenance.gpu_name == UNKNOWN_GPU:
        raise typer.BadParameter(
            "--upload needs --gpu-name: the server checks it against the hardware profile"
        )
    saved = SavedMeasurement.new(payload, profile=profile)
    if out is not None:
        saved.save(out)
        _info(f"saved {escape(str(out))} (idempotency key {saved.idempotency_key})")
    if url is None:
        return
    if not profile:
        raise typer.BadParameter("--upload needs --profile (the hardware profile id)")
    try:
        _send(saved, url=url, token=token, profile=profile)
    except typer.Exit:
        if out is None:
            fallback = Path(f"servesize-measurement-{saved.idempotency_key[:8]}.json")
            saved.save(fallback)
            _error(
                f"kept the payload in {fallback}; send it later with "
                f"`servesize-agent upload {fallback} --url {escape(url)}`"
            )
        raise


# --------------------------------------------------------------------------------------------
# bench
# --------------------------------------------------------------------------------------------


def _make_probe(device: str, *, quick: bool, collectives: bool) -> Probe:
    if device == "cpu":
        return NumpyCpuProbe(repeats=5 if quick else 7, flush_bytes=(32 if quick else 256) << 20)
    if device == "auto" or device.startswith("cuda"):
        os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # as NVML numbers GPUs
        try:
            import torch
        except ImportError:
            if device == "auto":
                _info("torch is not installed: measuring the CPU")
                return _make_probe("cpu", quick=quick, collectives=collectives)
            raise typer.BadParameter(
                "the CUDA probe needs torch: pip install 'servesize[cuda]'", param_hint="--device"
            ) from None
        if device == "auto":
            if not torch.cuda.is_available():
                _info("no CUDA device: measuring the CPU")
                return _make_probe("cpu", quick=quick, collectives=collectives)
            device = "cuda:0"
        from servesize.agent.probes import TorchCudaProbe

        return TorchCudaProbe(device, repeats=5 if quick else 10, collectives=collectives)
    raise typer.BadParameter(f"expected cpu, cuda or cuda:N, got {device!r}", param_hint="--device")


@app.command()
def bench(
    device: Annotated[
        str, typer.Option(help="cpu, cuda:N, or auto (cuda:0 when torch sees a GPU).")
    ] = "auto",
    quick: Annotated[
        bool, typer.Option("--quick", help="A reduced suite (about a minute).")
    ] = False,
    collectives: Annotated[
        bool, typer.Option(help="Measure all-reduce across the local GPUs when there are several.")
    ] = True,
    peak_tflop_per_s: Annotated[
        list[str] | None,
        typer.Option(help="Datasheet peak as DTYPE=TFLOPS, e.g. bf16=989 (repeatable)."),
    ] = None,
    peak_memory_bytes_per_s: Annotated[
        float | None, typer.Option(help="Datasheet memory bandwidth, e.g. 3.35e12.")
    ] = None,
    peak_bus_bytes_per_s: Annotated[
        float | None, typer.Option(help="Datasheet per-GPU interconnect bandwidth.")
    ] = None,
    out: OutFile = None,
    upload_url: UploadUrl = None,
    token: Token = None,
    profile: ProfileId = None,
) -> None:
    """Measure matmul throughput, memory bandwidth, launch overhead and all-reduce bandwidth."""
    try:
        peaks = parse_peaks(peak_tflop_per_s or [])
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--peak-tflop-per-s") from exc
    probe = _make_probe(device, quick=quick, collectives=collectives)
    ident = probe.identity()
    _info(
        f"measuring {escape(ident.name)} ({ident.device}), method v{METHOD_VERSION}"
        + (", quick suite" if quick else "")
    )
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    ) as progress:
        task = progress.add_task("starting", total=None)

        def on_step(done: int, total: int, label: str) -> None:
            progress.update(task, completed=done, total=total, description=label)

        payload = measure(probe, quick=quick, on_step=on_step)

    table = Table(title=f"{ident.name} ({ident.device})")
    for column in ("metric", "detail", "achieved", "datasheet", "efficiency"):
        table.add_column(
            column,
            justify="left" if column in ("metric", "detail") else "right",
            no_wrap=column == "metric",
        )
    for row in summarize(
        payload,
        peak_tflop_per_s=peaks,
        peak_memory_bytes_per_s=peak_memory_bytes_per_s,
        peak_bus_bytes_per_s=peak_bus_bytes_per_s,
    ):
        table.add_row(
            row.metric,
            row.detail,
            f"{row.achieved:,.3g} {row.unit}",
            f"{row.peak:,.4g} {row.unit}" if row.peak else "—",
            f"{row.efficiency:.0%}" if row.efficiency is not None else "—",
        )
    console.print(table)
    _deliver(payload, out=out, url=upload_url, token=token, profile=profile)


# --------------------------------------------------------------------------------------------
# endpoint and ingest
# --------------------------------------------------------------------------------------------


def _ms(stats: LatencyStats | None, percentile: Literal["p50", "p99"]) -> str:
    value = getattr(stats, percentile) if stats is not None else None
    return f"{value * 1e3:,.1f}" if value is not None else "—"


def _print_levels(benchmark: EndpointBenchmark) -> None:
    table = Table(title=f"{benchmark.model} ({benchmark.source})")
    columns = (
        "load",
        "ok/fail/timeout",
        "TTFT p50/p99 ms",
        "ITL p50/p99 ms",
        "TPOT p50/p99 ms",
        "E2E p50/p99 ms",
        "req/s",
        "out tok/s",
        "goodput req/s",
    )
    for column in columns:
        table.add_column(column, justify="right")
    for level in benchmark.levels:
        load = (
            f"closed, c={level.concurrency}"
            if level.mode == "closed_loop"
            else f"open, {level.rate_per_s:g}/s"
        )
        table.add_row(
            load,
            f"{level.completed}/{level.failed}/{level.timed_out}",
            f"{_ms(level.ttft_s, 'p50')} / {_ms(level.ttft_s, 'p99')}",
            f"{_ms(level.itl_s, 'p50')} / {_ms(level.itl_s, 'p99')}",
            f"{_ms(level.tpot_s, 'p50')} / {_ms(level.tpot_s, 'p99')}",
            f"{_ms(level.e2e_s, 'p50')} / {_ms(level.e2e_s, 'p99')}",
            f"{level.throughput_requests_per_s:,.2f}",
            f"{level.throughput_output_tokens_per_s:,.1f}",
            f"{level.goodput_requests_per_s:,.2f}"
            if level.goodput_requests_per_s is not None
            else "—",
        )
    console.print(table)


def _endpoint_provenance(*, gpu_name: str, gpu_count: int) -> Provenance:
    """The client side of an endpoint measurement: the GPU is the server's, named by the user."""
    return Provenance(
        agent_version=__version__,
        method_version=METHOD_VERSION,
        host=socket.gethostname()[:255] or "unknown",
        device="endpoint",
        gpu_name=gpu_name,
        gpu_count=gpu_count,
        measured_at=datetime.now(UTC),
    )


def _parse_list(text: str, kind: type[int] | type[float], option: str) -> list[float]:
    try:
        values = [kind(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise typer.BadParameter(f"expected comma-separated numbers, got {text!r}") from None
    if not values or any(v <= 0 for v in values):
        raise typer.BadParameter(f"expected positive numbers, got {text!r}", param_hint=option)
    return [float(v) for v in values]


GpuName = Annotated[
    str,
    typer.Option(
        help="GPU serving the endpoint, as NVML names it (e.g. 'NVIDIA H100 80GB HBM3'); "
        "required with --upload, where the server checks it against the profile."
    ),
]
GpuCount = Annotated[int, typer.Option(min=1, help="GPUs serving the endpoint.")]


@app.command()
def endpoint(
    url: Annotated[str, typer.Option(help="Base URL of the server, e.g. http://127.0.0.1:8000.")],
    model: Annotated[str, typer.Option(help="Model name as the server knows it.")],
    concurrency: Annotated[
        str | None,
        typer.Option(help="Closed loop: concurrent clients per level (default 1,4,16,64)."),
    ] = None,
    rate: Annotated[
        str | None, typer.Option(help="Open loop: Poisson arrival rates per second, e.g. 0.5,1,2.")
    ] = None,
    input_tokens: Annotated[int, typer.Option(min=1, help="Prompt length (approximate).")] = 512,
    output_tokens: Annotated[int, typer.Option(min=1, help="max_tokens per request.")] = 128,
    requests: Annotated[int, typer.Option(min=1, help="Requests per load level.")] = 100,
    warmup: Annotated[
        int, typer.Option(min=0, help="Warm-up requests before each level, not counted.")
    ] = 0,
    timeout: Annotated[float, typer.Option(min=0.001, help="Per-request timeout, seconds.")] = 60.0,
    chat: Annotated[bool, typer.Option("--chat", help="Use /v1/chat/completions.")] = False,
    ignore_eos: Annotated[
        bool, typer.Option(help="Send ignore_eos (vLLM/SGLang) so outputs have full length.")
    ] = True,
    api_key: Annotated[
        str | None,
        typer.Option(envvar="SERVESIZE_ENDPOINT_KEY", help="Bearer key for the endpoint."),
    ] = None,
    slo_ttft_s: Annotated[float | None, typer.Option(help="Goodput SLO on TTFT, seconds.")] = None,
    slo_tpot_s: Annotated[float | None, typer.Option(help="Goodput SLO on TPOT, seconds.")] = None,
    seed: Annotated[int, typer.Option(help="Seed for prompts and arrival times.")] = 0,
    engine: Annotated[str | None, typer.Option(help="Serving engine, e.g. vllm.")] = None,
    engine_version: Annotated[str | None, typer.Option(help="Engine version.")] = None,
    gpu_name: GpuName = UNKNOWN_GPU,
    gpu_count: GpuCount = 1,
    out: OutFile = None,
    upload_url: UploadUrl = None,
    token: Token = None,
    profile: ProfileId = None,
) -> None:
    """Benchmark an OpenAI-compatible streaming endpoint at several load levels."""
    if concurrency is not None and rate is not None:
        raise typer.BadParameter("give --concurrency or --rate, not both")
    if rate is not None:
        levels = [
            LoadLevel(mode="open_loop", rate_per_s=r) for r in _parse_list(rate, float, "--rate")
        ]
        _info("open loop: Poisson arrivals at a fixed rate, independent of the responses")
    else:
        counts = _parse_list(concurrency or "1,4,16,64", int, "--concurrency")
        levels = [LoadLevel(mode="closed_loop", concurrency=int(c)) for c in counts]
        _info(
            "closed loop: each client waits for its response before sending again, so the "
            "offered load drops as the service slows (latency under overload is understated; "
            "use --rate for open-loop load)"
        )
    api: ApiKind = "chat" if chat else "completions"
    target = EndpointTarget(
        url=url,
        model=model,
        api=api,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        timeout_s=timeout,
        ignore_eos=ignore_eos,
        api_key=api_key,
    )
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    ) as progress:
        task = progress.add_task("starting", total=None)

        def on_level(level: LoadLevel, count: int) -> None:
            progress.update(task, description=level.label, completed=0, total=count)

        def on_done(record: RequestRecord) -> None:
            progress.advance(task)

        result = asyncio.run(
            benchmark_endpoint(
                target,
                levels,
                requests=requests,
                warmup_requests=warmup,
                seed=seed,
                slo=Slo(ttft_s=slo_ttft_s, tpot_s=slo_tpot_s),
                engine=engine,
                engine_version=engine_version,
                on_level=on_level,
                on_done=on_done,
            )
        )
    _print_levels(result)
    payload = MeasurementUpload(
        provenance=_endpoint_provenance(gpu_name=gpu_name, gpu_count=gpu_count),
        endpoint_benchmarks=[result],
    )
    _deliver(payload, out=out, url=upload_url, token=token, profile=profile)


@app.command()
def ingest(
    files: Annotated[list[Path], typer.Argument(exists=True, dir_okay=False, help="Result files.")],
    fmt: Annotated[IngestFormat, typer.Option("--format", help="Which tool wrote the files.")],
    model: Annotated[
        str | None, typer.Option(help="Model name, when the files do not say.")
    ] = None,
    gpu_name: GpuName = UNKNOWN_GPU,
    gpu_count: GpuCount = 1,
    out: OutFile = None,
    upload_url: UploadUrl = None,
    token: Token = None,
    profile: ProfileId = None,
) -> None:
    """Convert vllm bench serve, GuideLLM, AIPerf, inference-perf or llm-d results into an
    endpoint benchmark; percentiles a file lacks are stored as absent and listed."""
    try:
        result = ingest_files(files, fmt, model=model)
    except (ValueError, TypeError, OSError) as exc:  # IngestError and pydantic's are ValueErrors
        _error(f"[red]cannot ingest[/red] {escape(str(exc))}")
        raise typer.Exit(1) from exc
    _print_levels(result)
    for line in gaps(result):
        _error(f"[yellow]absent[/yellow] {escape(line)}")
    payload = MeasurementUpload(
        provenance=_endpoint_provenance(gpu_name=gpu_name, gpu_count=gpu_count),
        endpoint_benchmarks=[result],
    )
    _deliver(payload, out=out, url=upload_url, token=token, profile=profile)


@app.command("upload")
def upload_command(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="A file from --out.")],
    url: Annotated[str, typer.Option(help="servesize server URL, e.g. http://host:8000.")],
    token: Token = None,
    profile: Annotated[
        str | None, typer.Option(help="Hardware profile id; defaults to the one in the file.")
    ] = None,
) -> None:
    """Send a saved measurement; its stored idempotency key makes a resend harmless."""
    try:
        saved = SavedMeasurement.load(file)
    except ValueError as exc:
        _error(f"[red]not a saved measurement[/red] {escape(str(exc))}")
        raise typer.Exit(1) from exc
    _send(saved, url=url, token=token, profile=profile)


def main() -> None:
    app()
