"""``--json`` and ``--csv`` on ``size``, ``simulate``, ``perf`` and ``models list``: the option
pair, the choice between them, and the writers.

With either option stdout holds only the data (the REST answer's JSON, or CSV rows under a
header), so ``servesize size ... --json | jq`` works; everything else the command prints
(headers, warnings, progress) goes to stderr. What the rows and answers hold is built in
:mod:`servesize.cli.answers`.
"""

from __future__ import annotations

import csv
import math
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from servesize.cli.app import console

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = [
    "CsvOption",
    "ExportFormat",
    "JsonOption",
    "data_on_stdout",
    "export_format",
    "write_csv",
    "write_json",
]

ExportFormat = Literal["json", "csv"]
JsonOption = Annotated[
    bool,
    typer.Option(
        "--json",
        help="Print the answer as the REST API's JSON, nothing else on stdout (messages go "
        "to stderr).",
    ),
]
CsvOption = Annotated[
    bool,
    typer.Option(
        "--csv",
        help="Print CSV rows under a header, nothing else on stdout (messages go to stderr).",
    ),
]


def export_format(as_json: bool, as_csv: bool) -> ExportFormat | None:
    """The export asked for; both at once is a usage error (exit code 2)."""
    if as_json and as_csv:
        typer.echo("Error: --json and --csv cannot be combined: give one of them", err=True)
        raise typer.Exit(code=2)
    if as_json:
        return "json"
    return "csv" if as_csv else None


@contextmanager
def data_on_stdout(export: ExportFormat | None) -> Iterator[None]:
    """While a command exports, the shared console (messages, warnings, progress) writes to
    stderr, leaving stdout to the data."""
    if export is None:
        yield
        return
    previous = console.stderr
    console.stderr = True
    try:
        yield
    finally:
        console.stderr = previous


def write_json(answer: BaseModel) -> None:
    """The answer as its schema serialises it (``model_dump_json``), one document."""
    sys.stdout.write(answer.model_dump_json(indent=2) + "\n")
    sys.stdout.flush()


def _cell(value: object) -> object:
    """A CSV cell: ``true``/``false`` for booleans, empty for null and non-finite numbers."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    return value


def write_csv(columns: Sequence[str], rows: Iterable[Mapping[str, object]]) -> None:
    """A header of ``columns`` and one line per row (stdlib :mod:`csv`; a row may leave columns
    out, never add one)."""
    writer = csv.DictWriter(sys.stdout, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({key: _cell(value) for key, value in row.items()})
    sys.stdout.flush()
