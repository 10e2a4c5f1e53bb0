"""``servesize size``: the cheapest deployments that serve a rate within an SLO, ranked."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from servesize.cli.app import app, architecture_or_exit, console, datasheet_gpu, refuse
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
    prefix_of,
    report_candidates,
    report_traffic,
    sessions_of,
    speculative_of,
)
from servesize.cli.reports import ReportOption, sizing_request, write_report
from servesize.core.traffic import FixedLength

if TYPE_CHECKING:
    from servesize.core.sizing import Plan, SearchSpace, SizingResult, SizingTraffic
    from servesize.prices import PriceQuote

__all__ = ["SIZE_WIDE_COLUMNS", "size_command"]


def _size_usage_error(message: str) -> NoReturn:
    """Print ``message`` (no markup, never wrapped) and exit with click's usage-error code."""
    refuse(message, code=2)


def _parse_prices(values: list[str], gpus: Iterable[str]) -> dict[str, float]:
    """``GPU=USD`` items (per GPU-hour) for GPUs in the search, each at most once."""
    import math

    known = set(gpus)
    prices: dict[str, float] = {}
    for value in values:
        gpu, sep, text = (part.strip() for part in value.partition("="))
        if not sep or not gpu or not text:
            _size_usage_error(
                f"--price {value!r}: expected GPU=USD per GPU-hour (e.g. h100-sxm=2.5)"
            )
        try:
            price = float(text)
        except ValueError:
            _size_usage_error(f"--price {value!r}: {text!r} is not a number")
        if not (math.isfinite(price) and price > 0):
            _size_usage_error(f"--price {value!r}: the price must be > 0 per GPU-hour")
        if gpu not in known:
            _size_usage_error(
                f"--price {value!r}: {gpu!r} is not among the GPUs searched "
                f"({', '.join(sorted(known))})"
            )
        if gpu in prices:
            _size_usage_error(f"--price: {gpu!r} is given twice")
        prices[gpu] = price
    return prices


def _ms(value: float) -> str:
    ms = value * 1e3
    if ms == float("inf"):
        return "inf"
    return f"{ms:,.0f} ms" if ms >= 100 else f"{ms:.1f} ms"


SIZE_WIDE_COLUMNS = 120
"""Below this terminal width ``servesize size`` prints its compact plan table."""


def _plan_table(plans: Sequence[Plan], space: SearchSpace, *, narrow: bool) -> Table:
    """The ranked plans. Numbers never wrap or shorten (each column is at least as wide as its
    widest entry); at narrow widths the table drops its borders, folds the plan label and puts
    utilization and the binding constraint under it."""
    from rich import box

    multi_engine = len(space.engines) > 1
    rows: list[list[str]] = []
    labels: list[str] = []
    for rank, plan in enumerate(plans, 1):
        predicted = plan.simulation or plan.tier_a
        gpus = (
            f"({plan.prefill_replicas}P+{plan.decode_replicas}D)×{plan.gpus_per_replica}"
            if plan.prefill_replicas is not None
            else f"{plan.replicas}×{plan.gpus_per_replica}"
        )
        cost, per_token = plan.cost_per_hour, plan.cost_per_million_output_tokens
        label = plan.candidate.brief(engine=multi_engine)
        util = f"{plan.utilization:.0%}"
        labels.append(f"{label}\n{util}, {plan.binding}" if narrow else label)
        row = [
            str(rank),
            gpus,
            f"{cost:,.2f}" if cost is not None else "no price",
            f"{per_token:,.3f}" if per_token is not None else "-",
            f"{plan.energy.energy_per_million_output_tokens_kwh:.3f}" if plan.energy else "-",
            _ms(predicted.ttft_p95_s) if predicted else "-",
            _ms(predicted.tpot_p95_s) if predicted else "-",
        ]
        if not narrow:
            row += [util, plan.binding]
        rows.append([*row, "sim" if plan.verified else "tier A"])
    names = ["#", "GPUs", "$/hour", "$/M tok", "kWh/M tok", "TTFT p95", "TPOT p95"]
    names += ["by"] if narrow else ["util", "binding", "by"]
    order = "lowest energy" if plans and plans[0].rank_by == "energy" else "cheapest"
    title = f"plans, {order} first (max_model_len {space.max_model_len[0]})"
    if narrow:
        table = Table(box=box.SIMPLE_HEAD, collapse_padding=True, pad_edge=False, title=title)
    else:
        table = Table(title=title)
    widths = [max(len(name), *(len(row[i]) for row in rows)) for i, name in enumerate(names)]
    for i, (name, width) in enumerate(zip(names, widths, strict=True)):
        if i == 1:
            heading = "plan (util, binding)" if narrow else "plan"
            table.add_column(heading, overflow="fold", min_width=10)
        table.add_column(
            name,
            no_wrap=True,
            min_width=width,
            justify="left" if name in ("#", "binding", "by") else "right",
        )
    for label, row in zip(labels, rows, strict=True):
        table.add_row(row[0], label, *row[1:])
    return table


@contextmanager
def _screen_progress() -> Iterator[Callable[[int, int], None] | None]:
    """A bar of candidates screened out of all, on stderr when it is a terminal (the search's
    ``progress`` callback), then a note that the best plans are being verified; nothing (None)
    when stderr is piped or redirected."""
    err = Console(file=sys.stderr)
    if not err.is_terminal:
        yield None
        return
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as bar:
        task = bar.add_task("screening candidates", total=None)

        def advance(done: int, total: int) -> None:
            # After the last candidate the search verifies the best plans by simulation.
            described = "verifying the best plans" if done == total else "screening candidates"
            bar.update(task, completed=done, total=total, description=described)

        yield advance


def _launches(plan: Plan) -> list[tuple[str, list[str]]]:
    """The plan's launch commands (``Plan.launch``) as ``(role, argv)``; a single server's role
    is ``both``, as the manifests name it."""
    if plan.launch is None:
        return []
    return [("both" if c.role == "server" else c.role, list(c.argv)) for c in plan.launch.commands]


@app.command("size")
def size_command(
    model: Annotated[str, typer.Option(help="Catalogue id, e.g. meta-llama/Llama-3.1-8B.")],
    slo: Annotated[
        str,
        typer.Option(
            help="Targets separated by commas, e.g. ttft_p95=1s,tpot_p95=50ms,"
            "max_failure_rate=0.01: <metric>_<stat>=<duration> with metric ttft, itl, tpot or "
            "e2e, stat mean, p50, p90, p95 or p99, unit s, ms or us."
        ),
    ],
    gpu: Annotated[
        list[str] | None,
        typer.Option("--gpu", help="Datasheet profile to consider; repeat (default: all)."),
    ] = None,
    input_tokens: Annotated[int, typer.Option(min=1)] = 1024,
    output_tokens: Annotated[int, typer.Option(min=1)] = 256,
    price: Annotated[
        list[str] | None,
        typer.Option("--price", help="GPU=USD per GPU-hour, e.g. h100-sxm=2.5; repeat."),
    ] = None,
    headroom: Annotated[
        float, typer.Option(help="Plan each replica at this fraction of its Tier A capacity.")
    ] = 0.85,
    max_gpus: Annotated[
        int | None, typer.Option(min=1, help="Most GPUs a plan may use in total.")
    ] = None,
    disaggregation: Annotated[
        bool, typer.Option("--disaggregation", help="Also size prefill/decode pool pairs.")
    ] = False,
    tp: Annotated[
        list[int] | None,
        typer.Option("--tp", min=1, help="Allowed tensor_parallel_size; repeat (default 1 2 4 8)."),
    ] = None,
    engine: Annotated[
        list[str] | None, typer.Option("--engine", help="vllm, sglang or trtllm; repeat.")
    ] = None,
    verify_top: Annotated[
        int, typer.Option(min=0, help="Plans to verify by simulating every replica.")
    ] = 3,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            file_okay=False,
            help="Write each plan's JSON, launch commands, Kubernetes/KServe manifests and "
            "benchmark script into this directory.",
        ),
    ] = None,
    rank_by: Annotated[
        str,
        typer.Option(
            "--rank-by", help="cost (per hour) or energy (kWh per million output tokens)."
        ),
    ] = "cost",
    rate: Annotated[
        float | None, typer.Option(help="Target load: Poisson arrivals per second.")
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
    """The cheapest deployments that serve --rate (or --sessions-per-s) within --slo, ranked,
    from the datasheet GPUs; --speculative and --kv-offload-gib are offered beside plain
    decoding and no host tier, and chosen where they pay. --json prints what POST /v1/sizing
    answers for the same inputs, --csv one row per plan and per rejected candidate. Exits 1
    when no candidate meets the SLO (after printing)."""
    from servesize.calibration import tables_for_gpu
    from servesize.core.energy import power_profile
    from servesize.core.hardware import datasheet_spec
    from servesize.core.sizing import (
        SearchSpace,
        SizingTooLargeError,
        SizingTraffic,
        default_max_model_len,
        explain,
        parse_slo,
        size,
    )
    from servesize.db.seed import datasheet_entries

    export = export_format(as_json, as_csv)
    with data_on_stdout(export):
        try:
            objective = parse_slo(slo)
        except ValueError as exc:
            _size_usage_error(f"--slo: {exc}")
        if (rate is None) == (sessions_per_s is None):
            _size_usage_error("give exactly one of --rate and --sessions-per-s")
        if rate is not None and (not rate > 0 or rate == float("inf")):
            _size_usage_error(f"--rate must be a finite number > 0, got {rate:g}")
        if sessions_per_s is not None and shared_prefix_tokens is not None:
            _size_usage_error("--shared-prefix-tokens describes open-loop requests, not sessions")
        spec = speculative_of(speculative, speculative_tokens, acceptance_rate)
        if not 0 < headroom <= 1:
            _size_usage_error(f"--headroom must be in (0, 1], got {headroom:g}")
        if rank_by not in ("cost", "energy"):
            _size_usage_error(f"--rank-by must be cost or energy, got {rank_by!r}")
        arch = architecture_or_exit(model)
        if gpu:
            hardware = tuple(datasheet_gpu(g) for g in dict.fromkeys(gpu))
        else:
            hardware = tuple(datasheet_spec(e) for e in datasheet_entries())
        from servesize.prices import PriceQuote, reference_prices

        prices = _parse_prices(price or [], (h.id for h in hardware))
        quotes = {g: PriceQuote(p, origin="request") for g, p in prices.items()}
        sheet = reference_prices()
        for h in hardware:
            if h.id not in prices and h.id in sheet:
                quotes[h.id] = sheet[h.id]
                prices[h.id] = sheet[h.id].usd_per_gpu_hour
        measured = {h.id: t for h in hardware if (t := tables_for_gpu(h)) is not None}
        power = {h.id: p for h in hardware if (p := power_profile(h)) is not None}
        try:
            engines = tuple(dict.fromkeys(engine or ["vllm"]))
            sessions = sessions_of(
                sessions_per_s,
                turns=turns,
                think_time_s=think_time_s,
                new_tokens=input_tokens,
                output_tokens=output_tokens,
            )
            longest = input_tokens + output_tokens
            if sessions is not None:
                longest *= turns
            offloads = (kv_offload_of(kv_offload_gib, e) for e in engines)
            space = SearchSpace(
                hardware=hardware,
                engines=engines,
                tensor_parallel=tuple(dict.fromkeys(tp or [1, 2, 4, 8])),
                max_model_len=(default_max_model_len(longest, 0),),
                speculative=(None, spec) if spec is not None else (None,),
                kv_offload=tuple(dict.fromkeys((None, *offloads))),
                disaggregation=disaggregation,
                max_gpus=max_gpus,
            )
            if sessions is not None:
                traffic = SizingTraffic.of_sessions(sessions, longest_request_tokens=longest)
            else:
                assert rate is not None
                traffic = SizingTraffic(
                    rate_per_s=rate,
                    input_tokens=FixedLength(input_tokens),
                    output_tokens=FixedLength(output_tokens),
                    prefix=prefix_of(shared_prefix_tokens, shared_fraction, num_prefixes),
                )
        except ValueError as exc:
            _size_usage_error(str(exc))
        with _screen_progress() as progress:
            try:
                result = size(
                    arch,
                    model_name=model,
                    space=space,
                    traffic=traffic,
                    objective=objective,
                    prices=prices,
                    measured=measured,
                    headroom=headroom,
                    verify_top=verify_top,
                    progress=progress,
                    power=power,
                    rank_by="energy" if rank_by == "energy" else "cost",
                )
            except SizingTooLargeError as exc:
                _size_usage_error(str(exc))
        if export is None:
            _print_result(result, space, quotes, model=model, traffic=traffic)
        if export is not None or report is not None:
            from servesize.cli.answers import PLAN_COLUMNS, plan_rows, sizing_answer

            answer = sizing_answer(result, model, arch, quotes)
            if export == "json":
                write_json(answer)
            elif export == "csv":
                write_csv(
                    PLAN_COLUMNS, plan_rows(answer, [p.candidate.label for p in result.plans])
                )
            if report is not None:
                request = sizing_request(
                    model=model,
                    rate_per_s=traffic.rate_per_s,
                    input_tokens=input_tokens,
                    output_tokens=output_tokens,
                    objective=objective,
                    hardware=[h.id for h in hardware],
                    engines=space.engines,
                    tensor_parallel=space.tensor_parallel,
                    verify_top=verify_top,
                    headroom=headroom,
                    prices={g: p for g, p in prices.items() if quotes[g].origin == "request"},
                    traffic=report_traffic(traffic, input_tokens, output_tokens),
                    candidates=report_candidates(space),
                )
                write_report(report, "sizing", request, answer)
        if out is not None and result.plans:
            from servesize.cli.size_out import write_plans

            written = write_plans(
                out,
                model=model,
                plans=result.plans,
                launches=[_launches(p) for p in result.plans],
                traffic=traffic,
                gpus_per_node={
                    h.id: h.interconnect.gpus_per_node if h.interconnect else 8 for h in hardware
                },
                gpu_names={h.id: h.name for h in hardware},
                quotes=quotes,
            )
            console.print(f"wrote {len(written)} files to {out}", soft_wrap=True, markup=False)
        for warning in result.warnings:
            console.print(f"warning: {warning}", style="yellow", soft_wrap=True, markup=False)
        console.print(explain(result), soft_wrap=True, markup=False)
        if not result.plans:
            console.print("[red]no candidate meets the SLO at this rate[/]")
            raise typer.Exit(code=1)


def _print_result(
    result: SizingResult,
    space: SearchSpace,
    quotes: dict[str, PriceQuote],
    *,
    model: str,
    traffic: SizingTraffic,
) -> None:
    """The header line, the plan table, the best plan's launch commands and notes, the
    rejected candidates by reason and where the prices came from."""
    from collections import Counter

    from servesize.core.sizing import shell_command

    input_tokens = round(traffic.input_tokens.mean_tokens)
    output_tokens = round(traffic.output_tokens.mean_tokens)
    console.print(
        f"{model} at {result.target_rate_per_s:g} requests/s ({input_tokens} in, "
        f"{output_tokens} out), headroom {result.headroom:g}: {result.plans_found} plans from "
        f"{result.candidates_evaluated} candidates, {result.simulations} simulations, "
        f"{result.elapsed_s:.1f} s",
        soft_wrap=True,
    )
    if result.plans:
        console.print(_plan_table(result.plans, space, narrow=console.width < SIZE_WIDE_COLUMNS))
        best = result.plans[0]
        if best.launch is not None:
            launch = best.launch
            for cmd in launch.commands:
                name = launch.engine if cmd.role == "server" else f"{launch.engine} {cmd.role}"
                console.print(f"#1 {name}: {shell_command(cmd.argv)}", soft_wrap=True, markup=False)
                for path, text in cmd.files:
                    console.print(f"#1 {path}:\n{text}", soft_wrap=True, markup=False)
            for key, meaning in launch.placeholders:
                console.print(f"#1 {key}: {meaning}", soft_wrap=True, markup=False)
            for note in launch.notes:
                console.print(
                    f"#1 launch ({launch.engine} {launch.engine_version}): {note}",
                    soft_wrap=True,
                    markup=False,
                )
        for note in best.notes:
            console.print(f"#1 note: {note}", soft_wrap=True, markup=False)
    if result.rejected:
        console.print(
            f"rejected {len(result.rejected)} of {result.candidates_evaluated} candidates:",
            soft_wrap=True,
        )
        counts = Counter(r.reason for r in result.rejected)
        for reason, count in counts.items():
            example = next(r for r in result.rejected if r.reason == reason)
            console.print(
                f"  {reason}: {count}, e.g. {example.candidate.label}: {example.detail}",
                soft_wrap=True,
                markup=False,
            )
    dated = sorted({q.as_of for q in quotes.values() if q.as_of is not None})
    if dated:
        console.print(
            f"prices: --price, else the reference sheet's cheapest on-demand list price "
            f"(servesize/data/prices.json, as of {dated[0].isoformat()} or later)",
            soft_wrap=True,
            markup=False,
        )
