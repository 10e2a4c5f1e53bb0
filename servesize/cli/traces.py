"""``servesize traces upload``: store a trace file in the database, for ``/v1/simulate``'s
``traffic.trace_id`` (the server's own database, as ``servesize keys`` uses)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from servesize.cli.app import app, console, refuse
from servesize.core.traffic import TRACE_FORMATS, trace_format_of

traces_app = typer.Typer(help="Stored request traces.", no_args_is_help=True)
app.add_typer(traces_app, name="traces")


@traces_app.command("upload")
def traces_upload(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="The trace file.")],
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format",
            help=f"One of {', '.join(TRACE_FORMATS)}; default from the name (.jsonl, .json "
            "vLLM, else csv).",
        ),
    ] = None,
    name: Annotated[str | None, typer.Option(help="A label for people.")] = None,
) -> None:
    """Store a trace file and print its id and summary (deleting it takes an admin key)."""
    from pydantic import ValidationError

    from servesize.api.exceptions import UnprocessableError
    from servesize.api.trace_views import store_trace
    from servesize.db.connection import create_db_engine, make_sessionmaker, transaction
    from servesize.schemas.traces import TraceUpload
    from servesize.settings import get_settings

    chosen = fmt or trace_format_of(file.name)
    try:
        body = TraceUpload.model_validate(
            {"format": chosen, "file": file.read_text(encoding="utf-8"), "name": name}
        )
    except ValidationError as exc:
        refuse(f"{file}: {exc.errors()[0]['loc'][0]}: {exc.errors()[0]['msg']}", code=1)
    db_engine = create_db_engine(get_settings().database_url)
    try:
        with transaction(make_sessionmaker(db_engine)) as session:
            row = store_trace(session, body, None)
            summary, trace_id = row.summary, row.id
    except UnprocessableError as exc:
        refuse(f"{file}: {exc.detail}", code=1)
    finally:
        db_engine.dispose()
    rate = summary["rate_per_s"]
    console.print(
        f"stored [bold]{trace_id}[/]: {summary['requests']} requests over "
        f"{summary['duration_s']:.1f} s"
        + (f" ({rate:.2f}/s)" if rate is not None else "")
        + f", mean input {summary['input_tokens']['mean']:.0f} and output "
        f"{summary['output_tokens']['mean']:.0f} tokens"
    )
    print(trace_id)
