"""``--report FILE.html`` on ``memory``, ``simulate`` and ``size``: the answer the command
computed, with the request as the REST API would take it, written as one self-contained HTML
file (:func:`servesize.html_report.render_report`) that opens offline."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from servesize.cli.app import console

if TYPE_CHECKING:
    from pydantic import BaseModel

    from servesize.core.slo import ServiceLevelObjective

__all__ = ["ReportOption", "sizing_request", "write_report"]

ReportOption = Annotated[
    Path | None,
    typer.Option(
        "--report",
        dir_okay=False,
        help="Also write the answer's figures as one self-contained HTML file (opens offline).",
    ),
]


def write_report(path: Path, kind: str, request: Any, answer: BaseModel | dict[str, Any]) -> None:
    """Write the ``kind`` report of ``answer`` to ``path`` and say where (on the console)."""
    from pydantic import BaseModel

    from servesize.html_report import render_report

    if isinstance(request, BaseModel):  # as a client would send it: no defaults spelled out
        request = request.model_dump(mode="json", exclude_none=True)
    if isinstance(answer, BaseModel):  # as the API answers
        answer = answer.model_dump(mode="json")
    path.write_text(render_report(kind, request, answer), encoding="utf-8")
    console.print(f"report: {path}", soft_wrap=True, markup=False)


def sizing_request(
    *,
    model: str,
    rate_per_s: float,
    input_tokens: int,
    output_tokens: int,
    objective: ServiceLevelObjective,
    hardware: Sequence[str],
    engines: Sequence[str],
    tensor_parallel: Sequence[int],
    verify_top: int,
    headroom: float,
    prices: dict[str, float],
    traffic: dict[str, Any] | None = None,
    candidates: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``POST /v1/sizing`` body of a ``servesize size`` run: ``ttft_p95=1s`` becomes
    ``{"ttft_s": {"p95": 1.0}}``. ``traffic`` replaces the open-loop forecast (sessions, a
    shared prefix); ``candidates`` adds feature grids (``speculative``, ``kv_offload``)."""
    slo: dict[str, Any] = {}
    for target in objective.targets:
        slo.setdefault(f"{target.metric}_s", {})[target.statistic] = target.limit_s
    if objective.max_failure_rate:
        slo["max_failure_rate"] = objective.max_failure_rate
    return {
        "model": model,
        "traffic": traffic
        or {
            "rate_per_s": rate_per_s,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
        },
        "slo": slo,
        "candidates": {
            "hardware": list(hardware),
            "engines": list(engines),
            "tensor_parallel": list(tensor_parallel),
            **(candidates or {}),
        },
        "prices": prices,
        "headroom": headroom,
        "verify_top": verify_top,
    }
