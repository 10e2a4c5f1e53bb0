"""One self-contained HTML file for an answer: the planner page's figures with the request and
the answer inlined, and its styles, its scripts and the chart library inlined too, so that the
file opens anywhere, offline, and fetches nothing.

Used by ``POST /v1/memory|simulate|slo/capacity|sizing`` with ``?format=html`` (or ``Accept:
text/html``) and by ``servesize memory --report FILE``. Stdlib only: the base install writes
reports without the server stack.
"""

from __future__ import annotations

import html
import json
from functools import cache
from pathlib import Path
from typing import Any

STATIC_DIR = Path(__file__).resolve().parent / "api" / "static"
REPORT_KINDS = ("memory", "capacity", "simulate", "sizing")
"""The planner page's sections a report can hold (``capacity``: ``/v1/slo/capacity``)."""
TITLES = {
    "memory": "memory ledger",
    "capacity": "latency vs load",
    "simulate": "simulation run",
    "sizing": "sizing",
}
REPORT_CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src data: blob:; base-uri 'none'; form-action 'none'"
)
"""Served by the API: the inlined scripts run, nothing can be fetched."""
_RESULTS_START = '<div id="results">'
_RESULTS_END = "</main>"


@cache
def _asset(name: str) -> str:
    return (STATIC_DIR / name).read_text(encoding="utf-8")


def _results_markup() -> str:
    """The figure sections of the planner page (``index.html``), one source for both."""
    page = _asset("index.html")
    start = page.index(_RESULTS_START)
    return page[start : page.index(_RESULTS_END, start)]


def _script(source: str) -> str:
    # "</script" inside the code would end the element early; "<\/" is the same in JS strings.
    return "<script>\n" + source.replace("</script", "<\\/script") + "\n</script>"


def _json_script(data: Any) -> str:
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, default=str)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f'<script type="application/json" id="report-data">{text}</script>'


def render_report(kind: str, request: Any, response: Any) -> str:
    """The report for one answer of ``kind`` (one of :data:`REPORT_KINDS`)."""
    if kind not in REPORT_KINDS:
        raise ValueError(f"no report for {kind!r}; one of {', '.join(REPORT_KINDS)}")
    model = response.get("model") if isinstance(response, dict) else None
    title = f"servesize {TITLES[kind]}" + (f": {model}" if isinstance(model, str) else "")
    return "\n".join(
        (
            "<!doctype html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{html.escape(title)}</title>",
            "<style>\n"
            + _asset("planner.css")
            + "\nmain { grid-template-columns: 1fr; }\n</style>",
            "</head>",
            '<body class="report">',
            f"<header><h1>{html.escape(title)}</h1></header>",
            "<main>",
            _results_markup(),
            '<details class="inputs"><summary>Request and answer (JSON)</summary>',
            f"<pre>{html.escape(json.dumps(request, indent=2, default=str))}</pre>",
            f"<pre>{html.escape(json.dumps(response, indent=2, default=str))}</pre>",
            "</details>",
            "</main>",
            _json_script({"kind": kind, "request": request, "response": response}),
            _script(_asset("vendor/chart.umd.min.js")),
            _script(_asset("plannerlib.js")),
            _script(_asset("planner.js")),
            "</body>",
            "</html>",
        )
    )
