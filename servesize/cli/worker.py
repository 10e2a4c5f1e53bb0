"""``servesize worker``: a Celery worker for the jobs the API sends to ``BROKER_URL``."""

from __future__ import annotations

import os
import socket
from typing import Annotated

import typer

from servesize.cli.app import app, refuse


@app.command()
def worker(
    concurrency: Annotated[
        int | None,
        typer.Option(min=1, max=256, help="Pool processes; default: the machine's cores."),
    ] = None,
    name: Annotated[
        str | None, typer.Option(help="Worker name (default servesize-<pid>@<host>).")
    ] = None,
    loglevel: Annotated[str, typer.Option(help="Celery's log level.")] = "INFO",
) -> None:
    """Run sweep combinations, sizings, capacity searches and simulations sent through
    BROKER_URL (queue JOB_QUEUE) until stopped; one task per pool process at a time."""
    from servesize.api.celery_jobs import make_celery
    from servesize.settings import get_settings

    settings = get_settings()
    if not settings.broker_url:
        refuse("BROKER_URL is not set: the embedded pool runs jobs without a worker", code=2)
    hostname = name or f"servesize-{os.getpid()}@{socket.gethostname()}"
    argv = [
        "worker",
        f"--concurrency={concurrency or os.cpu_count() or 1}",
        "--pool=prefork",
        f"--queues={settings.job_queue}",
        f"--hostname={hostname}",
        f"--loglevel={loglevel}",
        "--without-gossip",
        "--without-mingle",
    ]
    make_celery(settings).worker_main(argv)
