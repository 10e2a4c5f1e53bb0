"""The ``servesize`` command: serve the API, migrate the database, manage API keys, browse the
catalogue, and plan from the terminal (memory, kv, perf, simulate, size).

=============  ==============================================================================
``app``        the Typer applications and the helpers the commands share
``admin``      ``serve``, ``db``, ``keys`` (server modules imported inside the commands)
``models``     ``models list|show|inspect|pull``
``planning``   ``memory``, ``kv``, ``perf`` through :mod:`servesize.core.replica`
``simulating`` ``simulate``: one replica request by request
``size``       ``size``: the cheapest deployments that meet an SLO
``traces``     ``traces upload``: store a trace file for ``traffic.trace_id``
``exports``    ``--json`` / ``--csv``: the option pair, stdout kept for the data, the writers
``answers``    the REST answers the exports print (the API's renderers) and their CSV rows
``worker``     ``worker``: a Celery worker for jobs sent through ``BROKER_URL``
=============  ==============================================================================
"""

from servesize.cli import admin, models, planning, simulating, size, traces, worker
from servesize.cli.app import app

__all__ = ["app", "main"]

_COMMANDS = (admin, models, planning, simulating, size, traces, worker)
"""The modules whose decorators register the commands on ``app``."""


def main() -> None:
    app()
