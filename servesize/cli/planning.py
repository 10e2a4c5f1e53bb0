"""``servesize memory``, ``kv``, ``perf`` and ``simulate``: planning from the terminal, on a
catalogue model and a datasheet GPU, through the same replica compiler as the API
(:mod:`servesize.core.replica`); the shipped H100 kernel tables stand in for measurements on
``h100-sxm`` and, scaled by physical ratios, on every other GPU, as they do in the API."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
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
from servesize.cli.feature_flags import (
    AcceptanceRate,
    KvOffloadGib,
    NumPrefixes,
    SessionsPerS,
    SharedFraction,
    SharedPrefixTokens,
    Speculative,
    SpeculativeTokens,
    ThinkTimeS,
    Turns,
    kv_offload_of,
    point_body,
    prefix_of,
    sessions_of,
    speculative_of,
)
from servesize.cli.reports import ReportOption, write_report
from servesize.core.errors import InsufficientMemoryError
from servesize.core.memory import Deployment, InvalidDeploymentError, kv_budget, plan_memory
from servesize.core.replica import (
    Replica,
    compile_replica,
)
from servesize.core.simulation import SchedulerConfig
from servesize.core.speculative import SpeculativeDecoding

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
    speculative: Speculative = None,
    speculative_tokens: SpeculativeTokens = 3,
    acceptance_rate: AcceptanceRate = 0.8,
    kv_offload_gib: KvOffloadGib = None,
    shared_prefix_tokens: SharedPrefixTokens = None,
    shared_fraction: SharedFraction = 1.0,
    num_prefixes: NumPrefixes = 1,
    sessions_per_s: SessionsPerS = None,
    turns: Turns = 4,
    think_time_s: ThinkTimeS = 5.0,
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
        kv_offload=kv_offload_of(kv_offload_gib, engine),
    )
    with data_on_stdout(export):
        spec = speculative_of(speculative, speculative_tokens, acceptance_rate)
        built = resolved(catalog(), model, compile_or_exit(model, gpu, deployment, spec))
        point = point_body(
            concurrency,
            input_tokens,
            output_tokens,
            prefix_of(shared_prefix_tokens, shared_fraction, num_prefixes),
            sessions_of(
                sessions_per_s,
                turns=turns,
                think_time_s=think_time_s,
                new_tokens=input_tokens,
                output_tokens=output_tokens,
            ),
        )
        try:
            work = WorkloadPoint.model_validate(point)
        except ValueError as exc:
            refuse(str(exc), code=2)
        from servesize.api.session_views import session_point

        work, session_means = session_point(built, work)
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
            if session_means is not None:
                answer = answer.model_copy(update={"sessions": session_means})
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
