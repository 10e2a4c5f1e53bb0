"""``servesize memory``, ``kv``, ``perf`` and ``simulate``: planning from the terminal, on a
catalogue model and a datasheet GPU, through the same replica compiler as the API
(:mod:`servesize.core.replica`); the shipped H100 kernel tables stand in for measurements on
``h100-sxm`` and, scaled by physical ratios, on every other GPU, as they do in the API."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import numpy as np
import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from servesize.cli.app import (
    app,
    architecture_or_exit,
    catalog,
    console,
    datasheet_gpu,
    exit_with_issues,
    refuse,
)
from servesize.cli.exports import (
    CsvOption,
    JsonOption,
    data_on_stdout,
    export_format,
    write_csv,
    write_json,
)
from servesize.cli.reports import ReportOption, write_report
from servesize.core.energy import power_profile, run_energy
from servesize.core.errors import InsufficientMemoryError
from servesize.core.memory import Deployment, InvalidDeploymentError, kv_budget, plan_memory
from servesize.core.replica import (
    Replica,
    ReplicaError,
    ReplicaRun,
    compile_replica,
    simulate_replica,
)
from servesize.core.simulation import SchedulerConfig, SimulationSummary
from servesize.core.speculative import SpeculativeDecoding
from servesize.core.traffic import (
    CLOSED_LOOP_WARNING,
    FixedLength,
    TraceError,
    TraceFormat,
    Workload,
    closed_loop_workload,
    open_loop_workload,
    parse_trace,
    trace_format_of,
    trace_workload,
)

if TYPE_CHECKING:
    from servesize.api.resolved import ResolvedReplica
    from servesize.core.hardware import HardwareSpec
    from servesize.core.steptime import MeasuredProfile, ServingEstimate

__all__ = ["compile_or_exit", "scheduler_line"]

TRACE_MAX_ROWS = 50_000


def _gib(value: float) -> str:
    return f"{value / 2**30:,.2f} GiB"


@app.command()
def memory(
    model: Annotated[str, typer.Option(help="Catalogue id, e.g. meta-llama/Llama-3.1-8B.")],
    gpu: Annotated[str, typer.Option(help="Datasheet profile id, e.g. h100-sxm.")],
    tp: Annotated[int, typer.Option("--tp", help="tensor_parallel_size")] = 1,
    pp: Annotated[int, typer.Option("--pp", help="pipeline_parallel_size")] = 1,
    engine: Annotated[str, typer.Option(help="vllm, sglang or trtllm")] = "vllm",
    engine_version: Annotated[str | None, typer.Option()] = None,
    max_model_len: Annotated[int | None, typer.Option()] = None,
    kv_cache_dtype: Annotated[str, typer.Option()] = "auto",
    gpu_memory_utilization: Annotated[float | None, typer.Option()] = None,
    enforce_eager: Annotated[bool, typer.Option()] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the plan as JSON.")] = False,
    report: ReportOption = None,
) -> None:
    """Print the memory ledger of one GPU, line by line with formulas."""
    arch = architecture_or_exit(model)
    deployment = Deployment(
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        engine=engine,
        engine_version=engine_version,
        max_model_len=max_model_len,
        kv_cache_dtype=kv_cache_dtype,
        gpu_memory_utilization=gpu_memory_utilization,
        enforce_eager=enforce_eager,
    )
    try:
        result = plan_memory(arch, datasheet_gpu(gpu), deployment)
    except InvalidDeploymentError as exc:
        exit_with_issues(exc.issues)
    if report is not None:
        _write_memory_report(report, model, gpu, deployment, result)
    if as_json:
        print(json.dumps(asdict(result), indent=2, default=str))
        return
    title = f"{model} on {gpu} ({result.engine})"
    table = Table("line", "per GPU", "formula", title=title, min_width=len(title))
    for item in result.line_items:
        table.add_row(item.name, _gib(item.bytes_per_gpu), item.formula)
    console.print(table)
    verdict = "[green]fits[/]" if result.fits else "[red]does not fit[/]"
    console.print(
        f"{verdict}: KV cache {_gib(result.kv_cache_bytes_per_gpu)}, "
        f"{result.kv_capacity_tokens:,} tokens, max concurrency {result.max_concurrency:.2f} "
        f"at {result.max_model_len:,} tokens"
    )
    for line in (*result.reasons, *result.warnings):
        console.print(f"- {line}")


def _write_memory_report(
    path: Path, model: str, gpu: str, deployment: Deployment, result: object
) -> None:
    """The page's memory figures, with the request as ``POST /v1/memory`` would take it."""
    from servesize.schemas.memory import MemoryResponse

    answer = MemoryResponse.model_validate(result, from_attributes=True).model_dump(mode="json")
    fields = (
        *("engine", "engine_version", "tensor_parallel_size", "pipeline_parallel_size"),
        *("max_model_len", "kv_cache_dtype", "gpu_memory_utilization", "enforce_eager"),
    )
    request = {
        "model": model,
        "hardware": gpu,
        "deployment": {
            f: getattr(deployment, f) for f in fields if getattr(deployment, f) is not None
        },
    }
    write_report(path, "memory", request, answer)


@app.command()
def kv(
    layers: Annotated[int | None, typer.Option(help="num_layers")] = None,
    kv_heads: Annotated[int | None, typer.Option(help="num_kv_heads")] = None,
    head_dim: Annotated[int | None, typer.Option()] = None,
    bytes_per_element: Annotated[float | None, typer.Option()] = None,
    model: Annotated[str | None, typer.Option(help="Catalogue id instead of the geometry.")] = None,
    concurrency: Annotated[int | None, typer.Option()] = None,
    tokens: Annotated[int | None, typer.Option(help="tokens_per_sequence")] = None,
    memory_gib: Annotated[float | None, typer.Option(help="KV memory budget in GiB.")] = None,
) -> None:
    """KV calculator: give two of --concurrency, --tokens, --memory-gib; get the third."""
    arch = architecture_or_exit(model) if model else None
    try:
        result = kv_budget(
            num_layers=layers,
            num_kv_heads=kv_heads,
            head_dim=head_dim,
            bytes_per_element=bytes_per_element,
            model=arch,
            concurrency=concurrency,
            tokens_per_sequence=tokens,
            memory_bytes=int(memory_gib * 2**30) if memory_gib is not None else None,
        )
    except InvalidDeploymentError as exc:
        exit_with_issues(exc.issues)
    print(result.formula)


def _shipped_tables(hardware: HardwareSpec) -> MeasuredProfile | None:
    """The H100 tables, scaled to ``hardware`` unless it is the H100 (docs/modeling.md §2.11)."""
    from servesize.calibration import tables_for_gpu

    return tables_for_gpu(hardware)


def compile_or_exit(
    model: str, gpu: str, deployment: Deployment, speculative: SpeculativeDecoding | None = None
) -> Replica:
    """The replica of a catalogue model on a datasheet GPU; exits 1 on an invalid deployment or
    one that does not fit."""
    arch = architecture_or_exit(model)
    hardware = datasheet_gpu(gpu)
    try:
        return compile_replica(
            arch, hardware, deployment, _shipped_tables(hardware), speculative=speculative
        )
    except InvalidDeploymentError as exc:
        exit_with_issues(exc.issues)
    except InsufficientMemoryError as exc:
        console.print("[red]does not fit:[/] " + str(exc), markup=True, soft_wrap=True)
        raise typer.Exit(code=1) from None


def scheduler_line(scheduler: SchedulerConfig) -> str:
    """The simulated scheduler in one line (the API's ``engine_config``)."""
    return (
        f"scheduler {scheduler.policy}: max_num_batched_tokens {scheduler.max_num_batched_tokens}, "
        f"max_num_seqs {scheduler.max_num_seqs}, {scheduler.num_kv_blocks} KV blocks of "
        f"{scheduler.block_size_tokens} tokens, KV capacity {scheduler.capacity_policy}"
    )


Tp = Annotated[int, typer.Option("--tp", min=1, help="tensor_parallel_size")]
Dp = Annotated[int, typer.Option("--dp", min=1, help="data_parallel_size")]
ExpertParallel = Annotated[
    bool, typer.Option("--expert-parallel", help="enable_expert_parallel (MoE models)")
]
Budget = Annotated[
    int | None,
    typer.Option(min=1, help="max_num_batched_tokens per rank (default: the engine's)."),
]
CapacitySchedulerPolicy = Annotated[
    str | None,
    typer.Option(
        help="TensorRT-LLM capacity_scheduler_policy: guaranteed_no_evict (default) or "
        "max_utilization."
    ),
]


@app.command()
def perf(
    model: Annotated[str, typer.Option(help="Catalogue id, e.g. meta-llama/Llama-3.1-8B.")],
    gpu: Annotated[str, typer.Option(help="Datasheet profile id, e.g. h100-sxm.")],
    concurrency: Annotated[int, typer.Option(min=1, max=100_000)] = 1,
    input_tokens: Annotated[int, typer.Option(min=1, max=2**24)] = 1024,
    output_tokens: Annotated[int, typer.Option(min=1, max=2**24)] = 256,
    tp: Tp = 1,
    dp: Dp = 1,
    expert_parallel: ExpertParallel = False,
    engine: Annotated[str, typer.Option(help="vllm, sglang or trtllm")] = "vllm",
    max_model_len: Annotated[int | None, typer.Option()] = None,
    max_num_batched_tokens: Budget = None,
    capacity_scheduler_policy: CapacitySchedulerPolicy = None,
    speculative: Annotated[
        str | None, typer.Option(help="Speculative decoding: eagle3, mtp or ngram.")
    ] = None,
    speculative_tokens: Annotated[
        int, typer.Option(min=1, max=16, help="num_speculative_tokens k")
    ] = 3,
    acceptance_rate: Annotated[
        float, typer.Option(min=0.0, max=0.999, help="acceptance rate of each proposed token")
    ] = 0.8,
    as_json: JsonOption = False,
    as_csv: CsvOption = False,
) -> None:
    """Step times and the closed-loop steady state (TTFT, TPOT, throughput); --json prints what
    POST /v1/performance answers for the same inputs.

    Exits 2 when a request of these lengths exceeds max_model_len."""
    from servesize.api.exceptions import UnprocessableError
    from servesize.api.performance_views import performance_estimate
    from servesize.cli.answers import resolved
    from servesize.schemas.performance import WorkloadPoint

    export = export_format(as_json, as_csv)
    deployment = Deployment(
        tensor_parallel_size=tp,
        data_parallel_size=dp,
        enable_expert_parallel=expert_parallel,
        engine=engine,
        max_model_len=max_model_len,
        max_num_batched_tokens=max_num_batched_tokens,
        capacity_scheduler_policy=capacity_scheduler_policy,
    )
    with data_on_stdout(export):
        spec = (
            SpeculativeDecoding.of(
                speculative,  # type: ignore[arg-type]
                speculative_tokens,
                acceptance_rate=acceptance_rate,
            )
            if speculative in ("eagle3", "mtp", "ngram")
            else None
        )
        if speculative is not None and spec is None:
            refuse(f"--speculative must be one of eagle3, mtp, ngram, not {speculative!r}", code=2)
        built = resolved(catalog(), model, compile_or_exit(model, gpu, deployment, spec))
        work = WorkloadPoint(
            concurrency=concurrency, input_tokens=input_tokens, output_tokens=output_tokens
        )
        try:
            prefixed = performance_estimate(built, work)
        except UnprocessableError as exc:
            refuse(exc.detail, code=2)
        est = prefixed.estimate
        if export is not None:
            from servesize.cli.answers import (
                PERFORMANCE_COLUMNS,
                performance_answer,
                performance_rows,
            )

            answer = performance_answer(built, work, prefixed)
            if export == "json":
                write_json(answer)
            else:
                write_csv(PERFORMANCE_COLUMNS, performance_rows(answer))
            return
    title = f"{model} on {gpu}, {concurrency} clients (closed loop)"
    table = Table("metric", "value", title=title, min_width=len(title))
    rows = [
        (
            "prefill, one prompt alone",
            f"{est.prefill_time_s[0] * 1e3:.2f} ms ({est.prefill_bound[0]})",
        ),
        ("decode step", f"{est.decode_step_time_s[0] * 1e3:.2f} ms ({est.decode_bound[0]})"),
        ("TTFT at zero load", f"{est.ttft_zero_load_s[0] * 1e3:.1f} ms"),
        ("TTFT", f"{est.ttft_s[0] * 1e3:.1f} ms"),
        ("TPOT", f"{est.tpot_s[0] * 1e3:.2f} ms"),
        ("output tokens/s", f"{est.throughput_output_tokens_per_s[0]:,.0f}"),
        *energy_rows(built, est),
    ]
    if prefixed.speculative is not None:
        sp = prefixed.speculative
        base_tpot = float(sp.baseline.tpot_s[0])
        rows.append(
            (
                "speculative decoding",
                f"E {sp.expected_tokens_per_step:.3f} tokens/step, TPOT ×"
                f"{base_tpot / float(est.tpot_s[0]):.2f} (stops paying at batch "
                f"{sp.break_even_batch if sp.break_even_batch is not None else '-'})",
            )
        )
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)
    for key, source in est.sources.items():
        console.print(f"  {key}: {source}")


def _workload(
    *,
    rate: float | None,
    concurrency: int | None,
    trace: Path | None,
    input_tokens: int,
    output_tokens: int,
    num_requests: int,
    seed: int,
) -> Workload:
    """The requests of one run; the first tenth are warm-up."""
    if trace is not None:
        fmt: TraceFormat = trace_format_of(trace.name)
        try:
            rows = parse_trace(trace.read_text(encoding="utf-8"), fmt, max_rows=TRACE_MAX_ROWS)
        except TraceError as exc:
            console.print(f"[red]{trace}: {exc}[/]")
            raise typer.Exit(code=1) from None
        return trace_workload(
            arrival_s=rows.arrival_s,
            prompt_tokens=rows.input_tokens,
            output_tokens=rows.output_tokens,
            warmup_requests=rows.size // 10,
        )
    from servesize.api.simulation_runner import seed_streams

    rng = np.random.default_rng(seed_streams(seed)[0])  # the API's stream for this seed
    prompt, output = FixedLength(input_tokens), FixedLength(output_tokens)
    if rate is not None:
        return open_loop_workload(
            num_requests=num_requests,
            rate_per_s=rate,
            input_tokens=prompt,
            output_tokens=output,
            rng=rng,
            warmup_requests=num_requests // 10,
        )
    assert concurrency is not None
    console.print(f"[yellow]{CLOSED_LOOP_WARNING}[/]")
    return closed_loop_workload(
        clients=concurrency,
        num_requests=num_requests,
        input_tokens=prompt,
        output_tokens=output,
        rng=rng,
        warmup_requests=num_requests // 10,
    )


def _print_summary(summary: SimulationSummary, title: str) -> None:
    if summary.stable:
        table = Table("metric", "mean", "p50", "p95", "p99", title=title, min_width=len(title))
        for name, stats in (
            ("TTFT", summary.ttft_s),
            ("TPOT", summary.tpot_s),
            ("ITL", summary.itl_s),
            ("E2E", summary.e2e_s),
        ):
            table.add_row(
                name,
                *(f"{getattr(stats, q) * 1e3:,.1f} ms" for q in ("mean", "p50", "p95", "p99")),
            )
        console.print(table)
    else:
        console.print(
            "[yellow]unstable: latency percentiles depend on the run length and are withheld[/]"
        )
    verdict = "stable" if summary.stable else f"UNSTABLE ({summary.stability_reason})"
    console.print(
        f"{summary.throughput_requests_per_s:.2f} requests/s, "
        f"{summary.throughput_output_tokens_per_s:,.0f} output tokens/s; completed "
        f"{summary.completed}/{summary.measured}, timed out {summary.timed_out}, rejected "
        f"{summary.rejected}, preemptions {summary.preemptions}; {verdict}"
    )


def _finite(value: float | None) -> float | None:
    """Refuse NaN and infinities as a usage error (exit 2), as click refuses other bad numbers."""
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"must be a finite number, got {value}")
    return value


@app.command()
def simulate(
    model: Annotated[str, typer.Option(help="Catalogue id, e.g. meta-llama/Llama-3.1-8B.")],
    gpu: Annotated[str, typer.Option(help="Datasheet profile id, e.g. h100-sxm.")],
    rate: Annotated[
        float | None,
        typer.Option(
            min=1e-6, max=1e6, callback=_finite, help="Open loop: Poisson arrivals per second."
        ),
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option(min=1, max=100_000, help="Closed loop: concurrent clients.")
    ] = None,
    input_tokens: Annotated[int, typer.Option(min=1, max=2**24)] = 1024,
    output_tokens: Annotated[int, typer.Option(min=1, max=2**24)] = 256,
    num_requests: Annotated[int, typer.Option(min=10, max=50_000)] = 2000,
    seed: Annotated[int, typer.Option(min=0, max=2**63 - 1)] = 0,
    tp: Tp = 1,
    dp: Dp = 1,
    expert_parallel: ExpertParallel = False,
    max_model_len: Annotated[int | None, typer.Option()] = None,
    max_num_batched_tokens: Budget = None,
    engine_name: Annotated[
        str, typer.Option("--engine", help="vllm, sglang or trtllm (its own scheduler)")
    ] = "vllm",
    capacity_scheduler_policy: CapacitySchedulerPolicy = None,
    trace: Annotated[
        Path | None,
        typer.Option(
            exists=True,
            dir_okay=False,
            help="Replay a trace file: Mooncake or plain JSONL (.jsonl), a vLLM "
            "--save-detailed result (.json), or CSV (arrival_s/timestamp, input_tokens, "
            "output_tokens; Azure's TIMESTAMP,ContextTokens,GeneratedTokens too).",
        ),
    ] = None,
    as_json: JsonOption = False,
    as_csv: CsvOption = False,
    report: ReportOption = None,
) -> None:
    """Simulate one engine replica request by request (continuous batching, paged KV); --json
    prints what POST /v1/simulate answers for the same inputs and seed.

    Exits 2 when the engine could not serve the run as asked (a request over max_model_len or
    over a whole-prompt scheduler's budget, too many prefill steps)."""
    export = export_format(as_json, as_csv)
    if (rate is None) + (concurrency is None) + (trace is None) != 2:
        with data_on_stdout(export):
            console.print(
                "[red]give exactly one of --rate (open loop), --concurrency (closed) or --trace[/]"
            )
        raise typer.Exit(code=1)
    deployment = Deployment(
        engine=engine_name,
        tensor_parallel_size=tp,
        data_parallel_size=dp,
        enable_expert_parallel=expert_parallel,
        max_model_len=max_model_len,
        max_num_batched_tokens=max_num_batched_tokens,
        capacity_scheduler_policy=capacity_scheduler_policy,
    )
    with data_on_stdout(export):
        replica = compile_or_exit(model, gpu, deployment)
        workload = _workload(
            rate=rate,
            concurrency=concurrency,
            trace=trace,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            num_requests=num_requests,
            seed=seed,
        )
        console.print(scheduler_line(replica.scheduler), soft_wrap=True, markup=False)
        run = _run(replica, workload, seed)
        if export is not None or report is not None:
            from servesize.api.simulation_runner import simulation_run
            from servesize.cli.answers import (
                SIMULATE_COLUMNS,
                resolved,
                simulate_answer,
                simulate_request,
                simulate_rows,
            )

            body = simulate_request(
                model=model,
                gpu=gpu,
                deployment=deployment,
                workload=workload,
                rate=rate,
                concurrency=concurrency,
                replayed=trace is not None,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                seed=seed,
            )
            built = resolved(catalog(), model, replica)
            answer = simulate_answer(body, built, simulation_run(replica, workload, run))
            if report is not None:
                write_report(report, "simulate", body, answer)
            if export == "json":
                write_json(answer)
            elif export == "csv":
                write_csv(SIMULATE_COLUMNS, simulate_rows(answer))
            if export is not None:
                return
    _print_summary(run.result.summary(), f"{model} on {gpu}")
    power = power_profile(replica.hardware)
    energy = None if power is None else run_energy(replica, power, run.result)
    if energy is not None:
        console.print(
            f"energy: {energy.power_w:,.0f} W over {energy.gpus} GPU(s), "
            f"{energy.energy_per_request_j:,.1f} J per request, "
            f"{energy.energy_per_million_output_tokens_kwh:.3f} kWh per million output tokens"
        )


def _run(replica: Replica, workload: Workload, seed: int) -> ReplicaRun:
    """One run of ``workload``, with a progress bar; the router's stream is the API's for
    ``seed``; exits 2 on the core's refusal."""
    from servesize.api.simulation_runner import seed_streams

    with Progress(
        TextColumn("simulating"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("simulate", total=int(workload.prompt_tokens.size))

        def advance(finished: int, total: int) -> None:
            bar.update(task, completed=finished, total=total)

        try:
            return simulate_replica(
                replica,
                workload,
                routing_rng=np.random.default_rng(seed_streams(seed)[1]),
                progress=advance,
            )
        except ReplicaError as exc:
            bar.stop()
            refuse(str(exc), code=2)


def energy_rows(built: ResolvedReplica, est: ServingEstimate) -> list[tuple[str, str]]:
    """The closed loop's power and energy rows of the ``perf`` table (none without a TDP)."""
    from servesize.core.energy import estimate_energy

    energy = None if built.power is None else estimate_energy(built.replica, built.power, est)
    if energy is None:
        return []
    return [
        ("GPU power", f"{energy.power_w:,.0f} W over {energy.gpus} GPU(s) ({energy.power_source})"),
        ("energy per request", f"{energy.energy_per_request_j:,.1f} J"),
        ("energy per M output tokens", f"{energy.energy_per_million_output_tokens_kwh:.3f} kWh"),
    ]
