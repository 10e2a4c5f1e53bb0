"""The Typer applications, the console and the helpers every command shares."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.console import Console
from rich.text import Text

from servesize import __version__
from servesize.core.errors import FieldIssue

if TYPE_CHECKING:
    from servesize.catalog import ModelCatalog
    from servesize.core.architecture import Architecture
    from servesize.core.hardware import HardwareSpec

__all__ = [
    "app",
    "architecture_or_exit",
    "catalog",
    "console",
    "datasheet_gpu",
    "db_app",
    "exit_with_issues",
    "keys_app",
    "models_app",
    "refuse",
]

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
PIPED_WIDTH = 1_000_000
"""Console width when the output is not a terminal: no limit in practice, so tables take their
natural width and never shorten or fold an id, and lines are never wrapped."""


def fit_console() -> None:
    """Size the console for this invocation: ``COLUMNS`` when set, else the terminal's width,
    else (piped or redirected) :data:`PIPED_WIDTH`."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        console.width = int(columns)
    elif sys.stdout.isatty():
        console.width = shutil.get_terminal_size().columns
    else:
        console.width = PIPED_WIDTH


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
    fit_console()


def catalog() -> ModelCatalog:
    from servesize.catalog import ModelCatalog
    from servesize.settings import get_settings

    return ModelCatalog(get_settings().models_dir)


def architecture_or_exit(model_id: str) -> Architecture:
    """The catalogue model ``model_id``, or exit with a message."""
    models = catalog()
    if model_id not in models:
        console.print(f"[red]{model_id!r} is not in the catalogue[/]")
        raise typer.Exit(code=1)
    return models.architecture(model_id)


def exit_with_issues(issues: Iterable[FieldIssue]) -> NoReturn:
    for issue in issues:
        console.print(f"[red]{issue.field}[/]: {issue.problem}")
    raise typer.Exit(code=1)


def refuse(message: str, *, code: int) -> NoReturn:
    """Print ``message`` in red (no markup, never wrapped) and exit with ``code``."""
    console.print(Text(message, style="red"), soft_wrap=True)
    raise typer.Exit(code=code)


def datasheet_gpu(gpu: str) -> HardwareSpec:
    """The datasheet profile ``gpu``, or exit naming the known ones."""
    from servesize.core.hardware import datasheet_spec
    from servesize.db.seed import datasheet_entries

    specs = {spec.id: spec for spec in (datasheet_spec(e) for e in datasheet_entries())}
    if gpu not in specs:
        console.print(f"[red]unknown GPU {gpu!r}; choose one of {', '.join(sorted(specs))}[/]")
        raise typer.Exit(code=1)
    return specs[gpu]
