"""The ``servesize`` command: serve the API, migrate the database, manage API keys."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import numpy as np
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from servesize import __version__
from servesize.calibration import load_measured_profile
from servesize.catalog import ModelCatalog, UnknownModelError, filename_for
from servesize.core.architecture import Architecture, parse_architecture, summarize
from servesize.core.errors import FieldIssue, InvalidArchitectureError
from servesize.core.hardware import HardwareSpec, datasheet_spec
from servesize.core.memory import (
    Deployment,
    InvalidDeploymentError,
    MemoryPlan,
    kv_budget,
    plan_memory,
)
from servesize.core.simulation import (
    ClientOverheads,
    SchedulerConfig,
    engine_scheduler,
    whole_prompt_overflow,
)
from servesize.core.simulation import simulate as run_simulation
from servesize.core.simulation.adapters import steptime_adapter
from servesize.core.steptime import (
    StepTimeModel,
    build_step_model,
    closed_loop,
    simulator_constants,
)
from servesize.core.traffic import (
    CLOSED_LOOP_WARNING,
    ClosedLoopWorkload,
    FixedLength,
    OpenLoopWorkload,
    closed_loop_workload,
    open_loop_workload,
    trace_workload,
)
from servesize.core.traffic.traces import TraceError, TraceFormat, parse_trace
from servesize.db import migrate
from servesize.db.engine import make_engine, make_sessionmaker, transaction
from servesize.db.repository import ApiKeyRepository
from servesize.db.seed import datasheet_entries
from servesize.security import Scope
from servesize.settings import get_settings

if TYPE_CHECKING:
    from servesize.core.sizing import Plan, SearchSpace

app = typer.Typer(
    help="servesize: capacity planning for LLM inference serving.", no_args_is_help=True
)
db_app = typer.Typer(help="Database migrations.", no_args_is_help=True)
keys_app = typer.Typer(help="API keys.", no_args_is_help=True)
models_app = typer.Typer(help="The model catalogue.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(keys_app, name="keys")
app.add_typer(models_app, name="models")
console = Console()


def _version(value: bool) -> None:
    if value:
        print(f"servesize {__version__}")
        raise typer.Exit()


@app.callback()
def main_callback(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """servesize: capacity planning for LLM inference serving."""


@app.command()
def serve(
    host: Annotated[str, typer.Option(envvar="HOST", help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(envvar="PORT", help="Port to listen on.")] = 8000,
    no_migrate: Annotated[
        bool, typer.Option("--no-migrate", help="Do not apply pending migrations first.")
    ] = False,
) -> None:
    """Apply pending migrations, then serve the API."""
    import uvicorn

    from servesize.api.app import create_app

    settings = get_settings()
    if not no_migrate:
        migrate.upgrade(settings.database_url)
    uvicorn.run(create_app(settings), host=host, port=port, log_level="warning")


@db_app.command("upgrade")
def db_upgrade(revision: Annotated[str, typer.Argument()] = "head") -> None:
    """Upgrade the database to a revision (default: the newest)."""
    migrate.upgrade(get_settings().database_url, revision)
    db_current()


@db_app.command("downgrade")
def db_downgrade(revision: Annotated[str, typer.Argument(help="Target, e.g. base or -1.")]) -> None:
    """Downgrade the database to a revision."""
    migrate.downgrade(get_settings().database_url, revision)
    db_current()


@db_app.command("current")
def db_current() -> None:
    """Print the database's revision and the newest one."""
    settings = get_settings()
    engine = make_engine(settings.database_url)
    try:
        current = sorted(migrate.current_revisions(engine)) or ["base"]
    finally:
        engine.dispose()
    heads = sorted(migrate.head_revisions(settings.database_url))
    state = "at head" if current == heads else "behind head"
    print(f"current: {', '.join(current)}  head: {', '.join(heads)}  ({state})")


@contextmanager
def _key_repository() -> Iterator[ApiKeyRepository]:
    """An API-key repository inside one committed transaction."""
    settings = get_settings()
    secret = settings.secret_key.get_secret_value().encode() if settings.secret_key else None
    engine = make_engine(settings.database_url)
    try:
        with transaction(make_sessionmaker(engine)) as session:
            yield ApiKeyRepository(session, secret_key=secret)
    finally:
        engine.dispose()


@keys_app.command("create")
def keys_create(
    scope: Annotated[
        list[Scope], typer.Option("--scope", help="Repeat for several scopes.", show_choices=True)
    ],
    name: Annotated[str | None, typer.Option(help="Unique name; default: key-<id>.")] = None,
) -> None:
    """Create an API key and print it once (it cannot be shown again)."""
    with _key_repository() as keys:
        row, new = keys.create(name=name or f"key-{secrets.token_hex(4)}", scopes=scope)
        console.print(f"created key [bold]{row.name}[/] ({row.key_id}) scopes {row.scopes}")
        console.print("store it now; it is not shown again:")
        print(new.token)


@keys_app.command("list")
def keys_list() -> None:
    """List keys (never their secrets)."""
    table = Table("key_id", "name", "scopes", "created_at", "revoked_at")
    with _key_repository() as keys:
        for row in keys.list():
            table.add_row(
                row.key_id,
                row.name,
                ",".join(row.scopes),
                row.created_at.isoformat(),
                row.revoked_at.isoformat() if row.revoked_at else "",
            )
    console.print(table)


@keys_app.command("revoke")
def keys_revoke(key_id: Annotated[str, typer.Argument(help="The key's public id.")]) -> None:
    """Revoke a key; it stops working at once."""
    with _key_repository() as keys:
        row = keys.revoke(key_id)
        if row is None:
            console.print(f"[red]no API key with id {key_id!r}[/]")
            raise typer.Exit(code=1)
        console.print(f"revoked {row.name} ({row.key_id})")


def _catalog() -> ModelCatalog:
    return ModelCatalog(get_settings().models_dir)


def _architecture(model_id: str) -> Architecture:
    """The catalogue model ``model_id``, or exit with a message."""
    catalog = _catalog()
    if model_id not in catalog:
        console.print(f"[red]{model_id!r} is not in the catalogue[/]")
        raise typer.Exit(code=1)
    return catalog.architecture(model_id)


def _exit_with_issues(issues: Iterable[FieldIssue]) -> NoReturn:
    for issue in issues:
        console.print(f"[red]{issue.field}[/]: {issue.problem}")
    raise typer.Exit(code=1)


def _print_summary(arch: Architecture) -> None:
    print(json.dumps(asdict(summarize(arch)), indent=2, default=str))


@models_app.command("list")
def models_list() -> None:
    """List the catalogue with parameter counts."""
    catalog = _catalog()
    table = Table("id", "family", "layers", "parameters", "active")
    for model_id in catalog.ids():
        summary = summarize(catalog.architecture(model_id))
        table.add_row(
            model_id,
            summary.family,
            str(summary.num_layers),
            f"{summary.parameters_total:,}",
            f"{summary.parameters_active:,}",
        )
    console.print(table)


@models_app.command("show")
def models_show(
    model_id: Annotated[str, typer.Argument(help="e.g. meta-llama/Llama-3.1-8B")],
) -> None:
    """Print the derived summary of a catalogue model as JSON."""
    _print_summary(_architecture(model_id))


def _parse_or_exit(config: object, name: str) -> Architecture:
    if not isinstance(config, dict):
        console.print("[red]a config.json must hold a JSON object[/]")
        raise typer.Exit(code=1)
    try:
        return parse_architecture(config, name=name)
    except InvalidArchitectureError as exc:
        _exit_with_issues(exc.issues)


@models_app.command("inspect")
def models_inspect(path: Annotated[Path, typer.Argument(exists=True, dir_okay=False)]) -> None:
    """Summarise a local config.json (nothing is stored)."""
    try:
        config = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        console.print(f"[red]{path} is not valid JSON: {exc}[/]")
        raise typer.Exit(code=1) from None
    _print_summary(_parse_or_exit(config, path.stem))


def download_config(model_id: str, revision: str | None) -> Path:
    """Fetch ``config.json`` of ``model_id`` from the Hugging Face Hub (network needed)."""
    from huggingface_hub import hf_hub_download

    return Path(hf_hub_download(repo_id=model_id, filename="config.json", revision=revision))


@models_app.command("pull")
def models_pull(
    model_id: Annotated[str, typer.Argument(help="Hugging Face id, e.g. Qwen/Qwen3-8B")],
    revision: Annotated[str | None, typer.Option(help="Branch, tag or commit.")] = None,
    to: Annotated[
        Path | None, typer.Option(help="Catalogue directory (default MODELS_DIR).")
    ] = None,
) -> None:
    """Fetch a config.json from the Hub into the catalogue, verbatim, after checking it parses."""
    try:
        target = (to or get_settings().models_dir) / filename_for(model_id)
    except UnknownModelError:
        console.print(f"[red]{model_id!r} is not an org/name model id[/]")
        raise typer.Exit(code=1) from None
    try:
        downloaded = download_config(model_id, revision)
    except Exception as exc:  # network, auth, missing repo: report, never trace back
        console.print(f"[red]could not fetch {model_id}: {type(exc).__name__}: {exc}[/]")
        raise typer.Exit(code=1) from None
    raw = downloaded.read_bytes()
    try:
        config = json.loads(raw)
    except json.JSONDecodeError as exc:
        console.print(f"[red]{model_id}: config.json is not valid JSON: {exc}[/]")
        raise typer.Exit(code=1) from None
    arch = _parse_or_exit(config, model_id)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(raw)
    summary = summarize(arch)
    console.print(f"saved {target} ({summary.family}, {summary.parameters_total:,} parameters)")


def _datasheet_gpu(gpu: str) -> HardwareSpec:
    specs = {spec.id: spec for spec in (datasheet_spec(e) for e in datasheet_entries())}
    if gpu not in specs:
        console.print(f"[red]unknown GPU {gpu!r}; choose one of {', '.join(sorted(specs))}[/]")
        raise typer.Exit(code=1)
    return specs[gpu]


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
) -> None:
    """Print the memory ledger of one GPU, line by line with formulas."""
    arch = _architecture(model)
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
        result = plan_memory(arch, _datasheet_gpu(gpu), deployment)
    except InvalidDeploymentError as exc:
        _exit_with_issues(exc.issues)
    if as_json:
        print(json.dumps(asdict(result), indent=2, default=str))
        return
    table = Table("line", "per GPU", "formula", title=f"{model} on {gpu} ({result.engine})")
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
    arch = _architecture(model) if model else None
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
        _exit_with_issues(exc.issues)
    print(result.formula)


def _engine_for(model: str, gpu: str, deployment: Deployment) -> tuple[MemoryPlan, StepTimeModel]:
    """Memory plan and step-time model of a catalogue model on a datasheet GPU (the shipped
    H100 kernel tables stand in for measurements on ``h100-sxm``); exits on any refusal."""
    arch = _architecture(model)
    hardware = _datasheet_gpu(gpu)
    try:
        plan = plan_memory(arch, hardware, deployment)
    except InvalidDeploymentError as exc:
        _exit_with_issues(exc.issues)
    if not plan.fits:
        console.print("[red]does not fit:[/] " + "; ".join(plan.reasons))
        raise typer.Exit(code=1)
    res = plan.deployment
    step_model = build_step_model(
        arch,
        hardware,
        engine=res.engine,
        tensor_parallel_size=res.tensor_parallel_size,
        pipeline_parallel_size=res.pipeline_parallel_size,
        kv_dtype=res.kv_cache.element_dtype,
        cuda_graphs=not res.enforce_eager,
        measured=load_measured_profile() if gpu == "h100-sxm" else None,
    )
    return plan, step_model


@app.command()
def perf(
    model: Annotated[str, typer.Option(help="Catalogue id, e.g. meta-llama/Llama-3.1-8B.")],
    gpu: Annotated[str, typer.Option(help="Datasheet profile id, e.g. h100-sxm.")],
    concurrency: Annotated[int, typer.Option(min=1)] = 1,
    input_tokens: Annotated[int, typer.Option(min=1)] = 1024,
    output_tokens: Annotated[int, typer.Option(min=1)] = 256,
    tp: Annotated[int, typer.Option("--tp", help="tensor_parallel_size")] = 1,
    engine: Annotated[str, typer.Option(help="vllm, sglang or trtllm")] = "vllm",
    max_model_len: Annotated[int | None, typer.Option()] = None,
) -> None:
    """Step times and the closed-loop steady state (TTFT, TPOT, throughput)."""
    plan, step_model = _engine_for(
        model, gpu, Deployment(tensor_parallel_size=tp, engine=engine, max_model_len=max_model_len)
    )
    est = closed_loop(
        step_model,
        concurrency=concurrency,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        kv_capacity_tokens=plan.kv_capacity_tokens,
    )
    table = Table("metric", "value", title=f"{model} on {gpu}, {concurrency} clients (closed loop)")
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
    ]
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)
    for key, source in est.sources.items():
        console.print(f"  {key}: {source}")


@app.command()
def simulate(
    model: Annotated[str, typer.Option(help="Catalogue id, e.g. meta-llama/Llama-3.1-8B.")],
    gpu: Annotated[str, typer.Option(help="Datasheet profile id, e.g. h100-sxm.")],
    rate: Annotated[
        float | None,
        typer.Option(min=1e-6, max=1e6, help="Open loop: Poisson arrivals per second."),
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option(min=1, max=100_000, help="Closed loop: concurrent clients.")
    ] = None,
    input_tokens: Annotated[int, typer.Option(min=1, max=2**24)] = 1024,
    output_tokens: Annotated[int, typer.Option(min=1, max=2**24)] = 256,
    num_requests: Annotated[int, typer.Option(min=10, max=50_000)] = 2000,
    seed: Annotated[int, typer.Option()] = 0,
    tp: Annotated[int, typer.Option("--tp", help="tensor_parallel_size")] = 1,
    max_model_len: Annotated[int | None, typer.Option()] = None,
    engine_name: Annotated[
        str, typer.Option("--engine", help="vllm, sglang or trtllm (its own scheduler)")
    ] = "vllm",
    trace: Annotated[
        Path | None,
        typer.Option(
            exists=True,
            dir_okay=False,
            help="Replay a trace file: Mooncake JSONL (.jsonl) or CSV with arrival_s/timestamp, "
            "input_tokens, output_tokens.",
        ),
    ] = None,
) -> None:
    """Simulate one engine replica request by request (continuous batching, paged KV)."""
    if (rate is None) + (concurrency is None) + (trace is None) != 2:
        console.print(
            "[red]give exactly one of --rate (open loop), --concurrency (closed) or --trace[/]"
        )
        raise typer.Exit(code=1)
    plan, step_model = _engine_for(
        model,
        gpu,
        Deployment(engine=engine_name, tensor_parallel_size=tp, max_model_len=max_model_len),
    )
    res = plan.deployment
    if trace is None and input_tokens + output_tokens > plan.max_model_len:
        console.print(
            f"[red]--input-tokens + --output-tokens ({input_tokens + output_tokens}) exceed "
            f"max_model_len ({plan.max_model_len}): the engine would refuse every request[/]"
        )
        raise typer.Exit(code=2)
    engine = SchedulerConfig(
        max_num_batched_tokens=res.max_num_batched_tokens,
        max_num_seqs=res.max_num_seqs or plan.kv_blocks,
        block_size_tokens=plan.kv_block_size,
        num_kv_blocks=plan.kv_blocks,
        policy=engine_scheduler(res.engine),
    )
    rng = np.random.default_rng(seed)
    prompt, output = FixedLength(input_tokens), FixedLength(output_tokens)
    warmup = num_requests // 10
    workload: OpenLoopWorkload | ClosedLoopWorkload
    if trace is not None:
        fmt: TraceFormat = "jsonl" if trace.suffix.lower() in (".jsonl", ".json") else "csv"
        try:
            rows = parse_trace(trace.read_text(encoding="utf-8"), fmt, max_rows=50_000)
        except TraceError as exc:
            console.print(f"[red]{trace}: {exc}[/]")
            raise typer.Exit(code=1) from None
        num_requests = rows.size
        workload = trace_workload(
            arrival_s=rows.arrival_s,
            prompt_tokens=rows.input_tokens,
            output_tokens=rows.output_tokens,
            warmup_requests=num_requests // 10,
        )
    elif rate is not None:
        workload = open_loop_workload(
            num_requests=num_requests,
            rate_per_s=rate,
            input_tokens=prompt,
            output_tokens=output,
            rng=rng,
            warmup_requests=warmup,
        )
    else:
        assert concurrency is not None
        workload = closed_loop_workload(
            clients=concurrency,
            num_requests=num_requests,
            input_tokens=prompt,
            output_tokens=output,
            rng=rng,
            warmup_requests=warmup,
        )
        console.print(f"[yellow]{CLOSED_LOOP_WARNING}[/]")
    longest = whole_prompt_overflow(
        engine.policy, workload.prompt_tokens, workload.output_tokens, engine.max_num_batched_tokens
    )
    if longest:
        console.print(
            f"[red]{res.engine} runs prompts whole by default: requests of {longest} tokens "
            f"(prompt and output) exceed its {engine.max_num_batched_tokens}-token budget and "
            "would be refused[/]"
        )
        raise typer.Exit(code=2)
    step_model = step_model.with_engine(simulator_constants(step_model.engine))
    overheads = ClientOverheads(preprocess_s=step_model.engine.request_overhead_s)
    with Progress(
        TextColumn("simulating"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("simulate", total=num_requests)

        def advance(finished: int, total: int) -> None:
            bar.update(task, completed=finished, total=total)

        summary = run_simulation(
            workload,
            engine,
            steptime_adapter(step_model),
            overheads=overheads,
            progress=advance,
        ).summary()
    if summary.stable:
        table = Table("metric", "mean", "p50", "p95", "p99", title=f"{model} on {gpu}")
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


def _size_usage_error(message: str) -> NoReturn:
    """Print ``message`` (no markup, never wrapped) and exit with click's usage-error code."""
    from rich.text import Text

    console.print(Text(message, style="red"), soft_wrap=True)
    raise typer.Exit(code=2)


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
            _ms(predicted.ttft_p95_s) if predicted else "-",
            _ms(predicted.tpot_p95_s) if predicted else "-",
        ]
        if not narrow:
            row += [util, plan.binding]
        rows.append([*row, "sim" if plan.verified else "tier A"])
    names = ["#", "GPUs", "$/hour", "$/M tok", "TTFT p95", "TPOT p95"]
    names += ["by"] if narrow else ["util", "binding", "by"]
    title = f"plans, cheapest first (max_model_len {space.max_model_len[0]})"
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


@app.command("size")
def size_command(
    model: Annotated[str, typer.Option(help="Catalogue id, e.g. meta-llama/Llama-3.1-8B.")],
    rate: Annotated[float, typer.Option(help="Target load: Poisson arrivals per second.")],
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
) -> None:
    """The cheapest deployments that serve --rate within --slo, ranked, from the datasheet GPUs."""
    import shlex
    from collections import Counter

    from servesize.api.routes.sizing import default_max_model_len
    from servesize.core.sizing import (
        SearchSpace,
        SizingTooLargeError,
        SizingTraffic,
        sglang_args,
        size,
        vllm_args,
    )
    from servesize.core.sizing.explain import explain
    from servesize.core.sizing.slo_text import parse_slo

    try:
        objective = parse_slo(slo)
    except ValueError as exc:
        _size_usage_error(f"--slo: {exc}")
    if not rate > 0 or rate == float("inf"):
        _size_usage_error(f"--rate must be a finite number > 0, got {rate:g}")
    if not 0 < headroom <= 1:
        _size_usage_error(f"--headroom must be in (0, 1], got {headroom:g}")
    arch = _architecture(model)
    if gpu:
        hardware = tuple(_datasheet_gpu(g) for g in dict.fromkeys(gpu))
    else:
        hardware = tuple(datasheet_spec(e) for e in datasheet_entries())
    prices = _parse_prices(price or [], (h.id for h in hardware))
    measured = (
        {"h100-sxm": load_measured_profile()} if any(h.id == "h100-sxm" for h in hardware) else {}
    )
    try:
        space = SearchSpace(
            hardware=hardware,
            engines=tuple(dict.fromkeys(engine or ["vllm"])),
            tensor_parallel=tuple(dict.fromkeys(tp or [1, 2, 4, 8])),
            max_model_len=(default_max_model_len(input_tokens, output_tokens),),
            disaggregation=disaggregation,
            max_gpus=max_gpus,
        )
        traffic = SizingTraffic(
            rate_per_s=rate,
            input_tokens=FixedLength(input_tokens),
            output_tokens=FixedLength(output_tokens),
        )
    except ValueError as exc:
        _size_usage_error(str(exc))
    with console.status(f"sizing {model} for {rate:g} requests/s ..."):
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
            )
        except SizingTooLargeError as exc:
            _size_usage_error(str(exc))
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
        res = best.memory.deployment
        if best.prefill_replicas is not None:
            launches = [
                ("prefill", vllm_args(model, res, role="prefill")),
                ("decode", vllm_args(model, res, role="decode")),
            ]
        else:
            launches = [("vllm", vllm_args(model, res)), ("sglang", sglang_args(model, res))]
        for name, args in launches:
            console.print(f"#1 {name}: {shlex.join(args)}", soft_wrap=True, markup=False)
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
    for warning in result.warnings:
        console.print(f"warning: {warning}", style="yellow", soft_wrap=True, markup=False)
    console.print(explain(result), soft_wrap=True, markup=False)
    if not result.plans:
        console.print("[red]no candidate meets the SLO at this rate[/]")
        raise typer.Exit(code=1)


def main() -> None:
    app()
