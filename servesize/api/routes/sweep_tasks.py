"""What a sweep job runs: one ``POST /v1/sizing`` per combination, then the table.

``prepare_sweep`` (API process) expands the grid or list into sizing bodies and resolves each
one's model and hardware as the sizing route does; ``size_one`` (a worker) is the route's own
search for one combination, a pure function of its body (seeds included) and those inputs;
``assemble`` turns the answers, in combination order, into the :class:`SweepResponse`. The
embedded pool runs each combination as a piece of its own on any pool worker
(:func:`run_sweep` with the pool's map, :mod:`servesize.api.job_pieces`); with a broker each
combination is a task of its own (:mod:`servesize.api.celery_jobs`). Either way a row is the
synchronous sizing of its body.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from dataclasses import dataclass
from itertools import product
from typing import Any

from servesize.api.errors import ApiError, UnprocessableError
from servesize.api.jobs import problem_of
from servesize.api.lookups import LookupCache
from servesize.api.models_resolver import ResolvedModel
from servesize.api.problems import PROBLEM_TYPE_PREFIX
from servesize.api.routes.sizing import _check_prices, _Hardware, _hardware, _size
from servesize.core.errors import PlanningError
from servesize.core.replica import ReplicaError
from servesize.core.sizing import TaskMap, serial_map
from servesize.schemas.sizing import SizingRequest
from servesize.schemas.sweep import (
    MAX_COMBINATIONS,
    FleetPickOut,
    SweepFleetOut,
    SweepRequest,
    SweepResponse,
    SweepResultOut,
    SweepRowOut,
    SweepSummaryOut,
)

__all__ = [
    "CSV_COLUMNS",
    "SweepInputs",
    "assemble",
    "prepare_sweep",
    "run_sweep",
    "size_one",
    "size_piece",
    "sweep_csv",
]

AXES = ("model", "hardware", "engine", "traffic", "slo")
_AXIS_FIELDS = {"model": "models", "engine": "engines", "slo": "slos"}
"""Combination field → request axis (the rest share their name)."""
NO_PLAN_SLUG = "slo-infeasible"


@dataclass(frozen=True, slots=True)
class SweepInputs:
    """Per combination, in order: its axis indices, its sizing body (JSON) and the resolved
    model and hardware its sizing runs on (picklable)."""

    combinations: list[tuple[int, int, int, int, int]]
    requests: list[dict[str, Any]]
    inputs: list[tuple[ResolvedModel, _Hardware]]


def _invalid(detail: str, pointer: str) -> UnprocessableError:
    return UnprocessableError(
        detail,
        slug="invalid-sweep",
        errors=[{"location": "body", "pointer": pointer, "detail": detail}],
    )


def _combinations(body: SweepRequest) -> list[tuple[int, int, int, int, int]]:
    sizes = (
        len(body.models),
        len(body.hardware),
        len(body.engines),
        len(body.traffic),
        len(body.slos),
    )
    if body.combinations is None:
        count = sizes[0] * sizes[1] * sizes[2] * sizes[3] * sizes[4]
        if count > MAX_COMBINATIONS:
            raise _invalid(
                f"the axes combine into {count} sizings, more than the {MAX_COMBINATIONS} one "
                "sweep runs: narrow an axis or list the combinations",
                "/combinations",
            )
        return [(m, h, e, t, s) for m, h, e, t, s in product(*(range(n) for n in sizes))]
    out: list[tuple[int, int, int, int, int]] = []
    for i, combo in enumerate(body.combinations):
        picked = tuple(getattr(combo, axis) for axis in AXES)
        for axis, index, size in zip(AXES, picked, sizes, strict=True):
            if index >= size:
                field = _AXIS_FIELDS.get(axis, axis)
                raise _invalid(
                    f"{axis} {index} is past the {size} entries of {field}",
                    f"/combinations/{i}/{axis}",
                )
        m, h, e, t, s = picked
        out.append((m, h, e, t, s))
    return out


def combination_request(body: SweepRequest, combo: tuple[int, int, int, int, int]) -> SizingRequest:
    """The ``POST /v1/sizing`` body of one combination."""
    m, h, e, t, s = combo
    candidates = body.candidates.model_dump(mode="json")
    candidates |= {"hardware": [body.hardware[h]], "engines": [body.engines[e]]}
    model = body.models[m]
    return SizingRequest.model_validate(
        {
            "model": model if isinstance(model, str) else model.model_dump(mode="json"),
            "traffic": body.traffic[t].model_dump(mode="json"),
            "slo": body.slos[s].model_dump(mode="json"),
            "candidates": candidates,
            "prices": body.prices,
            "headroom": body.headroom,
            "verify_top": body.verify_top,
            "calibrated": body.calibrated,
        }
    )


def prepare_sweep(body: SweepRequest, lookups: LookupCache) -> SweepInputs:
    """Every combination's body and inputs; unknown models and profiles point at their axis."""
    if body.candidates.hardware is not None:
        raise _invalid("the sweep's hardware axis sets the GPUs", "/candidates/hardware")
    if "engines" in body.candidates.model_fields_set:
        raise _invalid("the sweep's engines axis sets the engines", "/candidates/engines")
    _check_prices(body.prices)
    combos = _combinations(body)
    models = [lookups.model(ref, pointer=f"/models/{i}") for i, ref in enumerate(body.models)]
    for i, profile_id in enumerate(body.hardware):
        if lookups.hardware(profile_id) is None:
            raise UnprocessableError(
                f"no hardware profile {profile_id!r}",
                slug="unknown-hardware",
                errors=[
                    {
                        "location": "body",
                        "pointer": f"/hardware/{i}",
                        "detail": f"no hardware profile {profile_id!r}",
                    }
                ],
            )
    requests: list[dict[str, Any]] = []
    inputs: list[tuple[ResolvedModel, _Hardware]] = []
    for combo in combos:
        sizing = combination_request(body, combo)
        requests.append(sizing.model_dump(mode="json"))
        inputs.append((models[combo[0]], _hardware(sizing, lookups)))
    return SweepInputs(combinations=combos, requests=requests, inputs=inputs)


def size_one(request: dict[str, Any], inputs: tuple[ResolvedModel, _Hardware]) -> dict[str, Any]:
    """One combination's sizing: ``{"sizing": body}`` or ``{"problem": problem}``."""
    model, hardware = inputs
    try:
        answer = _size(SizingRequest.model_validate(request), model, hardware)
    except (ApiError, PlanningError, ReplicaError, ValueError) as exc:
        return {"problem": problem_of(exc)}
    return {"sizing": answer.model_dump(mode="json", by_alias=True)}


def size_piece(piece: tuple[dict[str, Any], tuple[ResolvedModel, _Hardware]]) -> dict[str, Any]:
    """:func:`size_one` as one task of a map: ``(body, inputs)``."""
    return size_one(*piece)


def _row(
    index: int, body: SweepRequest, combo: tuple[int, ...], model: str, outcome: dict[str, Any]
) -> SweepRowOut:
    _, h, e, t, s = combo
    fields: dict[str, Any] = dict.fromkeys(SweepRowOut.model_fields)
    fields |= {
        "index": index,
        "model": model,
        "hardware": body.hardware[h],
        "engine": body.engines[e],
        "traffic": t,
        "rate_per_s": body.traffic[t].request_rate_per_s,
        "slo": s,
    }
    sizing = outcome.get("sizing")
    if sizing is None:
        problem = outcome.get("problem") or {}
        slug = str(problem.get("type", "")).removeprefix(PROBLEM_TYPE_PREFIX)
        status = "no-plan" if slug == NO_PLAN_SLUG else "failed"
        return SweepRowOut.model_validate(
            fields | {"status": status, "reason": str(problem.get("detail", ""))}
        )
    fields["plans_found"] = sizing["plans_found"]
    if not sizing["plans"]:
        return SweepRowOut.model_validate(
            fields | {"status": "no-plan", "reason": sizing["explanation"]}
        )
    best = sizing["plans"][0]
    tp = best["parallelism"].get("tensor_parallel")
    return SweepRowOut.model_validate(
        fields
        | {k: best[k] for k in ("gpus_per_replica", "replicas", "total_gpus", "cost_per_hour")}
        | {k: best[k] for k in ("headroom", "utilization", "binding", "verified")}
        | {
            "status": "planned",
            "tensor_parallel": tp if isinstance(tp, int) and not isinstance(tp, bool) else None,
            "cost_per_million_output_tokens": best["cost_per_million_output_tokens"],
        }
    )


def _pick_key(row: SweepRowOut) -> tuple[bool, float, int, int]:
    cost = row.cost_per_hour
    return (cost is None, cost if cost is not None else 0.0, row.total_gpus or 0, row.index)


def _fleets(
    body: SweepRequest, rows: list[SweepRowOut], combos: list[tuple[int, ...]]
) -> list[SweepFleetOut]:
    """Per (traffic, slo) swept: each model's cheapest planned row, and their sums."""
    scenarios = sorted({(c[3], c[4]) for c in combos})
    models = sorted({c[0] for c in combos})
    fleets: list[SweepFleetOut] = []
    for t, s in scenarios:
        picks: list[FleetPickOut] = []
        unserved: list[str] = []
        for m in models:
            mine = [
                r
                for r, c in zip(rows, combos, strict=True)
                if c[0] == m and (c[3], c[4]) == (t, s) and r.status == "planned"
            ]
            names = [r.model for r, c in zip(rows, combos, strict=True) if c[0] == m]
            if not mine:
                if any((c[0], c[3], c[4]) == (m, t, s) for c in combos):
                    unserved.append(names[0])
                continue
            best = min(mine, key=_pick_key)
            picks.append(
                FleetPickOut(
                    model=best.model,
                    row=best.index,
                    hardware=best.hardware,
                    engine=best.engine,
                    total_gpus=best.total_gpus or 0,
                    cost_per_hour=best.cost_per_hour,
                )
            )
        costs = [p.cost_per_hour for p in picks]
        total = None if any(c is None for c in costs) else sum(c or 0.0 for c in costs)
        fleets.append(
            SweepFleetOut(
                traffic=t,
                slo=s,
                picks=picks,
                unserved=unserved,
                total_gpus=sum(p.total_gpus for p in picks),
                cost_per_hour=total,
                complete=not unserved,
            )
        )
    return fleets


def assemble(
    request: dict[str, Any], inputs: SweepInputs, outcomes: list[dict[str, Any]]
) -> dict[str, Any]:
    """The sweep's answer from its combinations' outcomes (in combination order)."""
    body = SweepRequest.model_validate(request)
    combos = inputs.combinations
    rows = [
        _row(i, body, combo, inputs.inputs[i][0].id, outcome)
        for i, (combo, outcome) in enumerate(zip(combos, outcomes, strict=True))
    ]
    results = [
        SweepResultOut(
            index=i,
            request=inputs.requests[i],
            sizing=outcome.get("sizing"),
            problem=outcome.get("problem"),
        )
        for i, outcome in enumerate(outcomes)
    ]
    summary = SweepSummaryOut(
        combinations=len(rows),
        planned=sum(r.status == "planned" for r in rows),
        no_plan=sum(r.status == "no-plan" for r in rows),
        failed=sum(r.status == "failed" for r in rows),
        fleets=_fleets(body, rows, [tuple(c) for c in combos]),
    )
    answer = SweepResponse(rows=rows, results=results, summary=summary)
    out: dict[str, Any] = answer.model_dump(mode="json", by_alias=True)
    return out


def run_sweep(
    request: dict[str, Any],
    inputs: SweepInputs,
    report: Callable[[int, int | None], None],
    map_tasks: TaskMap = serial_map,
) -> dict[str, Any]:
    """Every combination as one piece of ``map_tasks`` (gathered in combination order),
    reporting (combinations done, total) as they finish."""
    total = len(inputs.requests)
    report(0, total)
    pieces = list(zip(inputs.requests, inputs.inputs, strict=True))
    outcomes = map_tasks(size_piece, pieces, lambda done: report(done, total))
    return assemble(request, inputs, outcomes)


CSV_COLUMNS = tuple(SweepRowOut.model_fields)


def sweep_csv(result: dict[str, Any]) -> str:
    """The table as CSV: a header of :data:`CSV_COLUMNS`, one line per row; nulls empty."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in result["rows"]:
        writer.writerow(["" if row[c] is None else row[c] for c in CSV_COLUMNS])
    return buffer.getvalue()
