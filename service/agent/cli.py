"""The ``servesize-agent`` command line (measurements arrive with the hardware-profiles work)."""

from __future__ import annotations

from typing import Annotated

import typer

from service import __version__

app = typer.Typer(help="Measure this GPU and upload a hardware profile to servesize.")


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
    """Measure this GPU and upload a hardware profile to servesize."""
    if ctx.invoked_subcommand is None:
        print(ctx.get_help())


def main() -> None:
    app()
