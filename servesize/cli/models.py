"""``servesize models``: the model catalogue."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from servesize.cli.app import architecture_or_exit, catalog, console, exit_with_issues, models_app
from servesize.cli.exports import CsvOption, JsonOption, export_format, write_csv, write_json
from servesize.core.architecture import Architecture, parse_architecture, summarize
from servesize.core.errors import InvalidArchitectureError

__all__ = ["download_config"]


def _print_summary(arch: Architecture) -> None:
    print(json.dumps(asdict(summarize(arch)), indent=2, default=str))


@models_app.command("list")
def models_list(as_json: JsonOption = False, as_csv: CsvOption = False) -> None:
    """List the catalogue with parameter counts (--json: as GET /v1/models answers)."""
    export = export_format(as_json, as_csv)
    models = catalog()
    if export is not None:
        from servesize.cli.answers import MODEL_COLUMNS, model_rows, models_page

        page = models_page(models)
        if export == "json":
            write_json(page)
        else:
            write_csv(MODEL_COLUMNS, model_rows(page))
        return
    table = Table("id", "family", "layers", "parameters", "active")
    for model_id in models.ids():
        summary = summarize(models.architecture(model_id))
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
    _print_summary(architecture_or_exit(model_id))


def _parse_or_exit(config: object, name: str) -> Architecture:
    if not isinstance(config, dict):
        console.print("[red]a config.json must hold a JSON object[/]")
        raise typer.Exit(code=1)
    try:
        return parse_architecture(config, name=name)
    except InvalidArchitectureError as exc:
        exit_with_issues(exc.issues)


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
    from servesize.catalog import UnknownModelError, filename_for
    from servesize.settings import get_settings

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
