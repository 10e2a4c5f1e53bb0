"""What each job kind runs: the synchronous routes' own lookup and computation, split so the
lookup happens in the API process and the computation in a pool worker
(:mod:`servesize.api.jobs`).

``prepare`` resolves references through the lookup cache and applies the checks the route makes
before computing; ``compute`` is a pure function of the request body (JSON) and those resolved
inputs, returning the response body the synchronous endpoint answers with.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter

from servesize.api.lookups import LookupCache
from servesize.api.models_resolver import ResolvedModel
from servesize.api.replica_resolver import ReplicaInputs, request_inputs
from servesize.api.routes.simulate import _simulate, check_replicas
from servesize.api.routes.sizing import (
    _check_prices,
    _Hardware,
    _hardware,
    _size,
    _with_manifests,
)
from servesize.api.routes.slo import _capacity, search_runs
from servesize.api.routes.sweep_tasks import SweepInputs, prepare_sweep, run_sweep
from servesize.core.sizing import TaskMap, serial_map
from servesize.schemas.base import RequestModel
from servesize.schemas.jobs import JobIn
from servesize.schemas.simulate import SimulateRequest
from servesize.schemas.sizing import SizingRequest
from servesize.schemas.slo import SloCapacityRequest
from servesize.schemas.sweep import SweepRequest

__all__ = ["compute", "prepare", "prepare_stored"]


def prepare(kind: str, body: RequestModel, lookups: LookupCache, *, manifests: bool = False) -> Any:
    """The resolved inputs of a job (picklable), after the route's own pre-checks; a sizing's
    carry whether its answer is to hold the plans' manifests."""
    if kind == "sizing":
        assert isinstance(body, SizingRequest)
        _check_prices(body.prices)
        return (lookups.model(body.model), _hardware(body, lookups), manifests)
    if kind == "simulate":
        assert isinstance(body, SimulateRequest)
        check_replicas(body)
        return request_inputs(body, lookups)
    if kind == "sweep":
        assert isinstance(body, SweepRequest)
        return prepare_sweep(body, lookups)
    assert kind == "capacity"
    assert isinstance(body, SloCapacityRequest)
    return request_inputs(body, lookups)


def compute(
    kind: str,
    request: dict[str, Any],
    inputs: Any,
    report: Callable[[int, int | None], None],
    map_tasks: TaskMap = serial_map,
) -> dict[str, Any]:
    """The synchronous endpoint's response body for ``request`` (in a pool worker, or for a
    sizing or sweep on a driver thread with ``map_tasks`` running its pieces).

    ``report(done, total)``: a capacity search reports each simulation against the most it may
    run (:func:`~servesize.api.routes.slo.search_runs`) and, when it ends, ``(runs, runs)``;
    a sweep its combinations done; a sizing its candidates screened and plans verified out of
    candidates + ``verify_top``, then ``(total, total)``; a simulation reports nothing
    (progress stays null)."""
    if kind == "sweep":
        assert isinstance(inputs, SweepInputs)
        return run_sweep(request, inputs, report, map_tasks)
    if kind == "sizing":
        model, hardware, manifests = inputs
        assert isinstance(model, ResolvedModel)
        assert isinstance(hardware, _Hardware)
        sizing = SizingRequest.model_validate(request)
        answer: Any = _size(sizing, model, hardware, map_tasks, report)
        if manifests:
            answer = _with_manifests(answer, sizing, (model, hardware))
    elif kind == "simulate":
        assert isinstance(inputs, ReplicaInputs)
        answer = _simulate(SimulateRequest.model_validate(request), inputs)
    else:
        assert kind == "capacity"
        assert isinstance(inputs, ReplicaInputs)
        capacity = SloCapacityRequest.model_validate(request)
        most = search_runs(capacity)
        runs: list[int] = [0]

        def on_probe(done: int) -> None:
            runs[0] = done
            report(done, most)

        answer = _capacity(capacity, inputs, on_probe)
        report(runs[0], runs[0])
    out: dict[str, Any] = answer.model_dump(mode="json", by_alias=True)
    return out


def prepare_stored(lookups: LookupCache, kind: str, request: dict[str, Any]) -> Any:
    """:func:`prepare` for a job's stored request (JSON), as when it was submitted: what an
    API process re-attaching to a job left by another needs."""
    if kind == "sweep":  # the stored body has every default; the sweep's axes set these two
        candidates = dict(request.get("candidates") or {})
        for axis in ("hardware", "engines"):
            candidates.pop(axis, None)
        request = request | {"candidates": candidates}
    job = TypeAdapter(JobIn).validate_python({"kind": kind, "request": request})
    return prepare(kind, job.request, lookups)
