"""``servesize simulate``: one engine replica simulated request by request from the terminal
(open loop, closed loop, a trace or multi-turn sessions; shared prefixes, a host KV tier and
speculative decoding by flag), through the same replica compiler as the API."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import numpy as np
import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from servesize.cli.app import (
    app,
    catalog,
    console,
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
    kv_offload_body,
    kv_offload_of,
    prefix_body,
    prefix_of,
    sessions_body,
    sessions_of,
    speculative_body,
    speculative_of,
)
from servesize.cli.reports import ReportOption, write_report
from servesize.core.energy import power_profile, run_energy
from servesize.core.memory import Deployment
from servesize.core.replica import (
    Replica,
    ReplicaError,
    ReplicaRun,
    simulate_replica,
)
from servesize.core.simulation import SimulationSummary
from servesize.core.traffic import (
    CLOSED_LOOP_WARNING,
    FixedLength,
    SessionTraffic,
    TraceError,
    TraceFormat,
    Workload,
    closed_loop_workload,
    open_loop_workload,
    parse_trace,
    session_workload,
    trace_format_of,
    trace_workload,
    with_prefixes,
)

if TYPE_CHECKING:
    pass

from servesize.cli.planning import (
    TRACE_MAX_ROWS,
    Budget,
    CapacitySchedulerPolicy,
    Dp,
    ExpertParallel,
    Tp,
    compile_or_exit,
    scheduler_line,
)

__all__ = ["simulate"]


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


def _sessions(sessions: SessionTraffic, num_sessions: int, seed: int) -> Workload:
    """``num_sessions`` sessions on the API's workload stream for ``seed``."""
    from servesize.api.simulation_runner import seed_streams

    rng = np.random.default_rng(seed_streams(seed)[0])
    return session_workload(sessions, num_sessions=num_sessions, rng=rng)


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
    report: ReportOption = None,
) -> None:
    """Simulate one engine replica request by request (continuous batching, paged KV); --json
    prints what POST /v1/simulate answers for the same inputs and seed.

    Exits 2 when the engine could not serve the run as asked (a request over max_model_len or
    over a whole-prompt scheduler's budget, too many prefill steps)."""
    export = export_format(as_json, as_csv)
    if (rate is None) + (concurrency is None) + (trace is None) + (sessions_per_s is None) != 3:
        with data_on_stdout(export):
            console.print(
                "[red]give exactly one of --rate (open loop), --concurrency (closed), --trace "
                "or --sessions-per-s[/]"
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
        kv_offload=kv_offload_of(kv_offload_gib, engine_name),
    )
    with data_on_stdout(export):
        spec = speculative_of(speculative, speculative_tokens, acceptance_rate)
        replica = compile_or_exit(model, gpu, deployment, spec)
        prefix = prefix_of(shared_prefix_tokens, shared_fraction, num_prefixes)
        sessions = sessions_of(
            sessions_per_s,
            turns=turns,
            think_time_s=think_time_s,
            new_tokens=input_tokens,
            output_tokens=output_tokens,
        )
        sessions_n = max(num_requests // turns, 1)
        workload = with_prefixes(
            _workload(
                rate=rate,
                concurrency=concurrency,
                trace=trace,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                num_requests=num_requests,
                seed=seed,
            )
            if sessions is None
            else _sessions(sessions, sessions_n, seed),
            prefix,
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
                extra={
                    "traffic": {
                        "prefix": prefix_body(prefix),
                        "sessions": sessions_body(sessions, sessions_n),
                    },
                    "deployment": {
                        "speculative": speculative_body(spec),
                        "kv_offload": kv_offload_body(deployment.kv_offload),
                    },
                },
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
