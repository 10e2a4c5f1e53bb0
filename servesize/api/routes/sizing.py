"""Auto-sizing over HTTP: target traffic + SLO + candidates → ranked, costed, verified plans.

The search runs on the heavy gate (:mod:`servesize.api.compute`: a worker thread, a deadline,
no database session while it runs), so it does not block the event loop. Answers
are cached per application, and shared by the API processes through ``STATE_STORE``
(:mod:`servesize.api.sizing_cache`), by a hash of everything they
depend on: the request, the resolved model config, the hardware profiles (figures, prices,
versions) and the ids of the measurements read for them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request, Response, status
from starlette.concurrency import run_in_threadpool

from servesize.api.compute import GatesDep
from servesize.api.deps import LookupsDep, OptionalKeyDep, ReadAccess
from servesize.api.errors import UnprocessableError, json_pointer
from servesize.api.jobs import JobExecutor
from servesize.api.lookups import HardwareEntry, LookupCache
from servesize.api.models_resolver import ResolvedModel
from servesize.api.plan_views import check_plans_write, manifests_for, store_plan
from servesize.api.render.sizing import infeasible_problem, response_out
from servesize.api.render.uncertainty import sizing_bands
from servesize.api.sizing_cache import SizingCache, SizingCacheDep, sizing_key
from servesize.api.sizing_traffic import default_length, feature_grids, sizing_traffic
from servesize.core.energy import PowerProfile
from servesize.core.hardware import HardwareSpec
from servesize.core.sizing import (
    DEFAULT_KV_CACHE_DTYPES,
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    SearchSpace,
    SizingTooLargeError,
    TaskMap,
    serial_map,
    size,
    zero_load_infeasibility,
)
from servesize.core.steptime import MeasuredProfile
from servesize.db.connection import session_scope
from servesize.db.models import ApiKey
from servesize.prices import PriceQuote, reference_prices
from servesize.schemas.manifests import ManifestsOut
from servesize.schemas.sizing import (
    CandidatesIn,
    SizingRequest,
    SizingResponse,
)

router = APIRouter(prefix="/v1", tags=["sizing"], dependencies=[ReadAccess])
MAX_PROFILES = 1000

EXAMPLES: dict[str, dict[str, Any]] = {
    "three_gpus": {
        "summary": "20 requests/s over H100, A100 and L40S at TP 1 or 2, with prices per GPU-hour",
        "value": {
            "model": "meta-llama/Llama-3.1-8B",
            "traffic": {"rate_per_s": 20, "input_tokens": 1024, "output_tokens": 256},
            "slo": {"ttft_s": {"p95": 1.0}, "tpot_s": {"p95": 0.05}},
            "candidates": {
                "hardware": ["h100-sxm", "a100-sxm-80gb", "l40s"],
                "tensor_parallel": [1, 2],
                "max_num_batched_tokens": [8192],
                "kv_cache_dtype": ["auto"],
            },
            "prices": {"h100-sxm": 2.5, "a100-sxm-80gb": 1.6, "l40s": 0.9},
            "verify_top": 1,
        },
    },
    "disaggregated": {
        "summary": "Long prompts on H100s: aggregated and prefill/decode disaggregated plans "
        "ranked together",
        "value": {
            "model": "meta-llama/Llama-3.1-8B",
            "traffic": {"rate_per_s": 10, "input_tokens": 4096, "output_tokens": 256},
            "slo": {"ttft_s": {"p95": 1.0}, "tpot_s": {"p95": 0.03}},
            "candidates": {
                "hardware": ["h100-sxm"],
                "tensor_parallel": [1],
                "max_num_batched_tokens": [8192],
                "kv_cache_dtype": ["auto"],
                "disaggregation": True,
                "max_gpus": 16,
            },
            "prices": {"h100-sxm": 2.5},
            "verify_top": 2,
        },
    },
}


def _unknown_hardware(profile_id: str, pointer: str) -> UnprocessableError:
    return UnprocessableError(
        f"no hardware profile {profile_id!r}",
        slug="unknown-hardware",
        errors=[
            {
                "location": "body",
                "pointer": pointer,
                "detail": f"no hardware profile {profile_id!r}",
            }
        ],
    )


@dataclass(frozen=True, slots=True)
class _Hardware:
    """The searched profiles as the planner sees them, and what identifies that view."""

    specs: list[HardwareSpec]
    prices: dict[str, float]
    """The request's price over the profile's over the reference sheet's, per GPU-hour
    (unpriced profiles absent)."""
    quotes: dict[str, PriceQuote]
    """Where each of ``prices`` came from."""
    measured: dict[str, MeasuredProfile]
    """Kernel tables by profile id (shipped, or from the newest upload with GEMM rows)."""
    fingerprint: list[dict[str, Any]]
    """Per profile: id, version and the ids of the measurements read (newest first)."""
    notes: list[str] = field(default_factory=list)
    """Applied recalibrations the search does not use (named in the answer's warnings)."""
    power: dict[str, PowerProfile] = field(default_factory=dict)
    """Board power by profile id (measured or datasheet TDP; absent: neither)."""


def _hardware(body: SizingRequest, lookups: LookupCache) -> _Hardware:
    """The searched profiles (repeats once), their prices (the request's over the profile's;
    prices of known hardware outside the search are ignored) and measured kernel tables."""
    ids = body.candidates.hardware
    entries: list[HardwareEntry] = []
    if ids is None:
        for profile_id in lookups.hardware_ids()[:MAX_PROFILES]:
            entry = lookups.hardware(profile_id)
            if entry is not None:
                entries.append(entry)
    else:
        seen: set[str] = set()
        for i, profile_id in enumerate(ids):
            if profile_id in seen:
                continue
            seen.add(profile_id)
            entry = lookups.hardware(profile_id)
            if entry is None:
                raise _unknown_hardware(profile_id, f"/candidates/hardware/{i}")
            entries.append(entry)
    searched = {e.spec.id for e in entries}
    for key in body.prices:
        if key not in searched and lookups.hardware(key) is None:
            raise _unknown_hardware(key, json_pointer(["prices", key]))
    hardware = _Hardware(
        specs=[e.spec for e in entries], prices={}, quotes={}, measured={}, fingerprint=[]
    )
    sheet = reference_prices()
    for entry in entries:
        profile_id = entry.spec.id
        quote = _quote(body, entry, sheet)
        if quote is not None:
            hardware.prices[profile_id] = quote.usd_per_gpu_hour
            hardware.quotes[profile_id] = quote
        if entry.measured is not None:
            hardware.measured[profile_id] = entry.measured
        if entry.power is not None:
            hardware.power[profile_id] = entry.power
        hardware.notes.extend(
            f"hardware profile {profile_id} has recalibration {c.id} "
            f"({c.created_at.date().isoformat()}) for {c.engine}; sizing does not apply "
            "recalibrations: its plans use the shipped engine constants"
            for c in entry.calibrations.values()
        )
        hardware.fingerprint.append(
            {
                "id": profile_id,
                "version": entry.version,
                "measurements": list(entry.measurement_ids),
            }
        )
    return hardware


def _quote(
    body: SizingRequest, entry: HardwareEntry, sheet: dict[str, PriceQuote]
) -> PriceQuote | None:
    """The request's price, else the profile's, else the reference sheet's cheapest."""
    profile_id = entry.spec.id
    if profile_id in body.prices:
        return PriceQuote(body.prices[profile_id], origin="request")
    if entry.price_per_gpu_hour is not None:
        return PriceQuote(
            entry.price_per_gpu_hour,
            origin="profile",
            source_url=entry.price_source,
            as_of=entry.price_as_of,
        )
    return sheet.get(profile_id)


def _check_prices(prices: dict[str, float]) -> None:
    bad = [k for k, p in prices.items() if not (p > 0 and math.isfinite(p))]
    if bad:
        raise UnprocessableError(
            "prices must be > 0 per GPU-hour",
            slug="invalid-price",
            errors=[
                {"location": "body", "pointer": f"/prices/{k}", "detail": "must be > 0"}
                for k in bad
            ],
        )


def _invalid(detail: str, pointer: str) -> UnprocessableError:
    return UnprocessableError(
        detail,
        slug="invalid-candidates",
        errors=[{"location": "body", "pointer": pointer, "detail": detail}],
    )


def _check_knobs(cand: CandidatesIn, max_position_embeddings: int | None) -> None:
    """Knob values the engine would refuse at start-up: a token budget below a
    ``max_num_seqs`` searched (vLLM: ``max_num_batched_tokens >= max_num_seqs``), a
    ``max_model_len`` beyond the model's positions."""
    most_seqs = max(cand.max_num_seqs or [0])
    for i, budget in enumerate(cand.max_num_batched_tokens or []):
        if budget < most_seqs:
            raise _invalid(
                f"max_num_batched_tokens {budget} < max_num_seqs {most_seqs}: vLLM refuses a "
                "step token budget below the running-batch limit",
                f"/candidates/max_num_batched_tokens/{i}",
            )
    if max_position_embeddings is not None:
        for i, length in enumerate(cand.max_model_len or []):
            if length > max_position_embeddings:
                raise _invalid(
                    f"max_model_len {length} > the model's max_position_embeddings "
                    f"{max_position_embeddings}",
                    f"/candidates/max_model_len/{i}",
                )


def _grid(values: list[Any] | None, default: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(dict.fromkeys(values)) if values else default


def _space(cand: CandidatesIn, specs: list[HardwareSpec], lengths: list[int]) -> SearchSpace:
    """The candidate grid; a value the core refuses points at its candidate field."""
    speculative, kv_offload = feature_grids(cand)
    try:
        return SearchSpace(
            hardware=tuple(specs),
            engines=_grid(cand.engines, ()),
            tensor_parallel=_grid(cand.tensor_parallel, ()),
            pipeline_parallel=_grid(cand.pipeline_parallel, ()),
            data_parallel=_grid(cand.data_parallel, ()),
            expert_parallel=_grid(cand.expert_parallel, ()),
            max_num_seqs=_grid(cand.max_num_seqs, (None,)),
            max_num_batched_tokens=_grid(
                cand.max_num_batched_tokens, DEFAULT_MAX_NUM_BATCHED_TOKENS
            ),
            gpu_memory_utilization=_grid(cand.gpu_memory_utilization, (None,)),
            kv_cache_dtype=_grid(cand.kv_cache_dtype, DEFAULT_KV_CACHE_DTYPES),
            max_model_len=_grid(lengths, ()),
            speculative=speculative,
            kv_offload=kv_offload,
            disaggregation=cand.disaggregation,
            max_gpus=cand.max_gpus,
        )
    except ValueError as exc:
        name = str(exc).split(":", 1)[0]
        known = name in CandidatesIn.model_fields
        raise _invalid(str(exc), f"/candidates/{name}" if known else "/candidates") from None


def _size(
    body: SizingRequest,
    model: ResolvedModel,
    hardware: _Hardware,
    map_tasks: TaskMap = serial_map,
    report: Callable[[int, int | None], None] | None = None,
) -> SizingResponse:
    """Run the core sizing search (its pieces through ``map_tasks``); its refusals as problems.
    ``report(done, total)`` counts candidates screened plus plans verified against candidates +
    ``verify_top`` (a job's progress; verifications take most of the time)."""
    cand, traffic = body.candidates, body.traffic
    _check_knobs(cand, model.architecture.max_position_embeddings)
    lengths = cand.max_model_len or [default_length(traffic)]
    objective = body.slo.to_core()
    space = _space(cand, hardware.specs, lengths)
    units = space.candidate_count + body.verify_top
    screened = report and (lambda done, _total: report(done, units))
    verified = report and (lambda passed, _top: report(space.candidate_count + passed, units))
    try:
        result = size(
            model.architecture,
            model_name=model.id,
            space=space,
            traffic=sizing_traffic(traffic, max(lengths)),
            objective=objective,
            prices=hardware.prices,
            measured=hardware.measured,
            headroom=body.headroom,
            verify_top=body.verify_top,
            calibrated=body.calibrated,
            power=hardware.power,
            rank_by=body.rank_by,
            progress=screened,
            verify_progress=verified,
            map_tasks=map_tasks,
        )
    except SizingTooLargeError as exc:
        raise UnprocessableError(
            str(exc),
            slug="sizing-too-large",
            errors=[{"location": "body", "pointer": "/candidates", "detail": str(exc)}],
        ) from None
    if report is not None:
        report(units, units)
    best = zero_load_infeasibility(result)
    if best:
        raise infeasible_problem(result, best)
    versions = [p.memory.deployment.engine_version for p in result.plans]
    response = response_out(result, model.id, hardware.quotes)
    if hardware.notes:
        response = response.model_copy(update={"warnings": [*response.warnings, *hardware.notes]})
    return sizing_bands(response, model.architecture, versions)


def _cached_size(
    body: SizingRequest,
    inputs: tuple[ResolvedModel, _Hardware],
    cache: SizingCache,
    pieces: Callable[[], TaskMap] = lambda: serial_map,
) -> SizingResponse:
    """The answer from the cache, else a fresh search on ``pieces()`` (then cached)."""
    model, hardware = inputs
    key = sizing_key(
        body=body.model_dump(mode="json"),
        model=model.id,
        config=model.config,
        hardware=[asdict(s) for s in hardware.specs],
        profiles=hardware.fingerprint,
        prices=hardware.prices,
    )
    answer = cache.get(key)
    if answer is None:
        answer = _size(body, model, hardware, pieces())
        cache.put(key, answer)
    return answer


def _store(
    request: Request,
    owner: ApiKey,
    body: SizingRequest,
    model: ResolvedModel,
    hardware: _Hardware,
    answer: SizingResponse,
) -> SizingResponse:
    """Store the answer with its inputs in a session of its own (committed on return)."""
    with contextmanager(session_scope)(request.app.state.sessionmaker) as session:
        return store_plan(
            session,
            key=owner,
            body=body,
            model_id=model.id,
            config=model.config,
            fingerprint=hardware.fingerprint,
            quotes=hardware.quotes,
            answer=answer,
        )


def _with_manifests(
    answer: SizingResponse, body: SizingRequest, inputs: tuple[ResolvedModel, _Hardware]
) -> SizingResponse:
    """The answer with every ranked plan's manifests (the GET route's generation, on the
    profiles the search used); undeployable plans are named in ``warnings``."""
    model, hardware = inputs
    specs = {s.id: s for s in hardware.specs}
    traffic = body.traffic.model_dump(mode="json")
    out: list[ManifestsOut] = []
    warnings = list(answer.warnings)
    for plan in answer.plans:
        spec = specs.get(plan.hardware)
        link = spec.interconnect if spec is not None else None
        try:
            out.append(
                manifests_for(
                    plan.model_dump(mode="json"),
                    model_id=model.id,
                    traffic=traffic,
                    plan_id=answer.plan_id,
                    name_suffix=answer.plan_id[-6:] if answer.plan_id else f"r{plan.rank}",
                    gpus_per_node=link.gpus_per_node if link is not None else 8,
                    gpu_name=spec.name if spec is not None else plan.hardware,
                    namespace=None,
                )
            )
        except UnprocessableError as exc:
            warnings.append(f"manifests: {exc.detail}")
    return answer.model_copy(update={"manifests": out, "warnings": warnings})


def _sync_pieces(request: Request) -> TaskMap:
    """The embedded job pool's map (``SYNC_POOL``), else this thread's."""
    jobs = getattr(request.app.state, "jobs", None)
    settings = getattr(request.app.state, "settings", None)
    if isinstance(jobs, JobExecutor) and jobs.local_pool and getattr(settings, "sync_pool", False):
        return jobs.task_map()
    return serial_map


def _search(
    request: Request, body: SizingRequest, cache: SizingCache
) -> Callable[[tuple[ResolvedModel, _Hardware]], SizingResponse]:
    """The gate's computation: the cached answer, else a search on :func:`_sync_pieces`."""
    pieces = partial(_sync_pieces, request)
    return lambda found: _cached_size(body, found, cache, pieces)


@router.post(
    "/sizing",
    response_model=SizingResponse,
    responses={201: {"model": SizingResponse, "description": "Stored (``save=true``)"}},
)
async def sizing(
    body: Annotated[SizingRequest, Body(openapi_examples=EXAMPLES)],
    request: Request,
    response: Response,
    lookups: LookupsDep,
    cache: SizingCacheDep,
    gates: GatesDep,
    key: OptionalKeyDep,
    save: Annotated[bool, Query(description="Store the answer (needs plans:write).")] = False,
    manifests: Annotated[
        bool,
        Query(
            description="Also return each ranked plan's Kubernetes objects, llm-d values and "
            "benchmark job (as GET /v1/plans/{id}/manifests)."
        ),
    ] = False,
) -> SizingResponse:
    """The cheapest deployments that serve the traffic within the SLO: ranked, costed, with
    engine arguments, the binding constraint, headroom and every pruned candidate's reason.
    With ``save=true`` the answer is stored with its inputs (201, ``Location``); the database
    is opened only for that write, after the search."""
    owner = check_plans_write(key) if save else None
    _check_prices(body.prices)
    inputs: list[tuple[ResolvedModel, _Hardware]] = []

    def lookup() -> tuple[ResolvedModel, _Hardware]:
        found = (lookups.model(body.model), _hardware(body, lookups))
        inputs.append(found)
        return found

    answer = await gates.heavy.run(request, _search(request, body, cache), lookup)
    if owner is None:
        return _with_manifests(answer, body, inputs[0]) if manifests else answer
    model, hardware = inputs[0]
    stored = await run_in_threadpool(_store, request, owner, body, model, hardware, answer)
    response.status_code = status.HTTP_201_CREATED
    response.headers["Location"] = f"/v1/plans/{stored.plan_id}"
    return _with_manifests(stored, body, inputs[0]) if manifests else stored


__all__ = ["router"]
