"""The REST answers the command line exports (``--json``) and their CSV rows (``--csv``).

The answers are rendered by the API's own functions (``servesize.api.performance_views``,
``simulate_views``, ``render.sizing``, ``render.uncertainty``, ``models_resolver``: none of
them imports the server stack), so ``servesize perf ... --json`` is the body ``POST
/v1/performance`` returns for the same inputs, prediction intervals and warnings included.
The CSV rows are read off those answers: the two exports never disagree.

CSV columns keep the schema's field names and put units in them (``ttft_p95_s``,
``cost_per_hour_usd``); nested figures are flattened with their parent's name first.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from servesize.api.resolved import ResolvedReplica
    from servesize.api.simulation_runner import SimulationRun
    from servesize.catalog import ModelCatalog
    from servesize.core.architecture import Architecture
    from servesize.core.memory import Deployment
    from servesize.core.replica import PrefixedEstimate, Replica
    from servesize.core.sizing import SizingResult
    from servesize.core.traffic import Workload
    from servesize.prices import PriceQuote
    from servesize.schemas.base import Page
    from servesize.schemas.energy import EnergyOut
    from servesize.schemas.models import ModelListItem
    from servesize.schemas.performance import PerformanceResponse, WorkloadPoint
    from servesize.schemas.simulate import LatencyOut, SimulateRequest, SimulateResponse
    from servesize.schemas.sizing import PlanOut, SizingResponse

__all__ = [
    "MODEL_COLUMNS",
    "PERFORMANCE_COLUMNS",
    "PLAN_COLUMNS",
    "SIMULATE_COLUMNS",
    "model_rows",
    "models_page",
    "performance_answer",
    "performance_rows",
    "plan_rows",
    "resolved",
    "simulate_answer",
    "simulate_request",
    "simulate_rows",
    "sizing_answer",
]

Row = Mapping[str, object]

ENERGY_COLUMNS = ("power_w", "energy_per_request_j", "energy_per_million_output_tokens_kwh")
"""The energy figures every CSV row carries (empty where the answer has none)."""


def energy_row(energy: EnergyOut | None) -> dict[str, object]:
    """:data:`ENERGY_COLUMNS` of an answer's ``energy``."""
    return {name: getattr(energy, name) if energy is not None else None for name in ENERGY_COLUMNS}


def resolved(models: ModelCatalog, model_id: str, replica: Replica) -> ResolvedReplica:
    """The catalogue model ``model_id`` and its compiled replica, as the API resolves them."""
    from servesize.api.models_resolver import ResolvedModel
    from servesize.api.resolved import ResolvedReplica
    from servesize.core.energy import power_profile

    model = ResolvedModel(
        id=model_id,
        source="catalogue",
        config=models.config(model_id),
        architecture=models.architecture(model_id),
    )
    return ResolvedReplica(model=model, replica=replica, power=power_profile(replica.hardware))


def performance_answer(
    built: ResolvedReplica, work: WorkloadPoint, estimate: PrefixedEstimate
) -> PerformanceResponse:
    """``POST /v1/performance``'s answer for this estimate."""
    from servesize.api.performance_views import performance_response
    from servesize.api.render.uncertainty import performance_bands

    return performance_bands(built, work, performance_response(built, work, estimate))


def simulate_request(
    *,
    model: str,
    gpu: str,
    deployment: Deployment,
    workload: Workload,
    rate: float | None,
    concurrency: int | None,
    replayed: bool,
    input_tokens: int,
    output_tokens: int,
    seed: int,
    extra: dict[str, dict[str, object]] | None = None,
) -> SimulateRequest:
    """The ``POST /v1/simulate`` body of a ``servesize simulate`` run of ``workload``: one
    replica, the deployment's fields, and the traffic (open loop, closed loop, or the
    ``replayed`` trace inline, as parsed) with the run's warm-up."""
    from servesize.core.traffic import OpenLoopWorkload
    from servesize.schemas.memory import DeploymentIn
    from servesize.schemas.simulate import ArrivalIn, SimulateRequest, TraceIn, TrafficIn

    traffic: dict[str, object] = {"warmup_requests": workload.warmup_requests, "seed": seed}
    if replayed:
        assert isinstance(workload, OpenLoopWorkload)  # a trace is replayed open loop
        traffic["trace"] = TraceIn(
            arrival_s=workload.arrival_s.tolist(),
            input_tokens=workload.prompt_tokens.tolist(),
            output_tokens=workload.output_tokens.tolist(),
        )
    else:
        size = int(workload.prompt_tokens.size)
        traffic |= {"input_tokens": input_tokens, "output_tokens": output_tokens}
        traffic["num_requests"] = size
        if rate is not None:
            traffic["arrival"] = ArrivalIn(process="poisson", rate_per_s=rate)
        elif concurrency is not None:
            traffic |= {"mode": "closed_loop", "concurrency": concurrency}
    fields = (
        "engine",
        "tensor_parallel_size",
        "data_parallel_size",
        "enable_expert_parallel",
        "max_model_len",
        "max_num_batched_tokens",
        "capacity_scheduler_policy",
    )
    # ``extra``: the feature flags' body fields (unset ones None, left out).
    more = {k: {f: v for f, v in d.items() if v is not None} for k, d in (extra or {}).items()}
    if "sessions" in more.get("traffic", {}):
        for key in ("input_tokens", "output_tokens", "num_requests"):
            traffic.pop(key, None)
    return SimulateRequest(
        model=model,
        hardware=gpu,
        deployment=DeploymentIn.model_validate(
            {f: getattr(deployment, f) for f in fields} | more.get("deployment", {})
        ),
        traffic=TrafficIn.model_validate(traffic | more.get("traffic", {})),
    )


def simulate_answer(
    body: SimulateRequest, built: ResolvedReplica, run: SimulationRun
) -> SimulateResponse:
    """``POST /v1/simulate``'s answer for this run of ``body``."""
    from servesize.api.render.uncertainty import simulate_bands
    from servesize.api.simulate_views import simulate_response

    return simulate_bands(body, built, simulate_response(body, built, run))


def sizing_answer(
    result: SizingResult, model: str, arch: Architecture, quotes: dict[str, PriceQuote]
) -> SizingResponse:
    """``POST /v1/sizing``'s answer for this search (not stored, no manifests)."""
    from servesize.api.render.sizing import response_out
    from servesize.api.render.uncertainty import sizing_bands

    versions = [p.memory.deployment.engine_version for p in result.plans]
    return sizing_bands(response_out(result, model, quotes), arch, versions)


def models_page(models: ModelCatalog) -> Page[ModelListItem]:
    """``GET /v1/models`` over the whole catalogue in one page (ids sorted as the API sorts
    them)."""
    from servesize.api.models_resolver import summary_out
    from servesize.schemas.base import Page
    from servesize.schemas.models import ModelListItem

    items = []
    for model_id in models.ids():
        summary, labels = summary_out(models.architecture(model_id))
        items.append(
            ModelListItem(
                id=model_id,
                source="catalogue",
                family=summary.family,
                model_type=summary.model_type,
                tags=labels,
                parameters_total=summary.parameters_total,
                parameters_active=summary.parameters_active,
                num_layers=summary.num_layers,
            )
        )
    items.sort(key=lambda item: item.id.lower())
    return Page[ModelListItem](
        items=items, total=len(items), offset=0, limit=max(1, len(items)), next_offset=None
    )


MODEL_COLUMNS = (
    "id",
    "source",
    "family",
    "model_type",
    "tags",
    "num_layers",
    "parameters_total",
    "parameters_active",
)


def model_rows(page: Page[ModelListItem]) -> Iterator[Row]:
    """One row per model; ``tags`` joined by ``;``."""
    for item in page.items:
        row: dict[str, object] = item.model_dump(include=set(MODEL_COLUMNS))
        row["tags"] = ";".join(item.tags)
        yield row


PERFORMANCE_COLUMNS = (
    "model",
    "hardware",
    "engine",
    "concurrency",
    "input_tokens",
    "output_tokens",
    "prefill_time_s",
    "decode_step_time_s",
    "ttft_zero_load_s",
    "ttft_s",
    "ttft_s_low",
    "ttft_s_high",
    "tpot_s",
    "tpot_s_low",
    "tpot_s_high",
    "e2e_s",
    "e2e_s_low",
    "e2e_s_high",
    "throughput_output_tokens_per_s",
    "throughput_requests_per_s",
    "resident_sequences",
    "admission_wait_s",
    "prefill_bound",
    "decode_bound",
    "kv_capacity_tokens",
    "weights_bytes_per_gpu",
    *ENERGY_COLUMNS,
)


def performance_rows(answer: PerformanceResponse) -> Iterator[Row]:
    """One row: the closed loop's figures, the prediction interval of each latency as
    ``<name>_low`` and ``<name>_high`` (empty without one)."""
    row: dict[str, object] = answer.model_dump(include=set(PERFORMANCE_COLUMNS))
    for name in ("ttft_s", "tpot_s", "e2e_s"):
        band = getattr(answer, f"{name}_interval")
        row[f"{name}_low"] = band.low if band is not None else None
        row[f"{name}_high"] = band.high if band is not None else None
    row["prefill_bound"] = answer.bound.prefill
    row["decode_bound"] = answer.bound.decode
    row.update(energy_row(answer.energy))
    yield row


_LATENCIES = ("ttft", "itl", "tpot", "e2e", "engine_ttft", "engine_e2e", "queueing_delay")
_STATS = ("mean", "p50", "p90", "p95", "p99")
SIMULATE_COLUMNS = (
    "model",
    "hardware",
    "engine",
    "mode",
    "stable",
    "stability_reason",
    "offered_rate_per_s",
    "throughput_requests_per_s",
    "throughput_output_tokens_per_s",
    "goodput_requests_per_s",
    "measured",
    "completed",
    "failed",
    "timed_out",
    "rejected",
    "preemptions",
    "peak_kv_utilization",
    "request_overhead_s",
    "memory_bytes_per_gpu",
    "max_num_seqs",
    "max_num_batched_tokens",
    "kv_blocks",
    *(f"{metric}_{stat}_s" for metric in _LATENCIES for stat in _STATS),
    *ENERGY_COLUMNS,
)


def simulate_rows(answer: SimulateResponse) -> Iterator[Row]:
    """One row per run: its counts and rates, and ``<metric>_<stat>_s`` for every latency
    statistic (empty when the run is unstable and they are withheld, or infinite)."""
    row: dict[str, object] = answer.model_dump(include=set(SIMULATE_COLUMNS))
    config = answer.engine_config
    row |= {
        "max_num_seqs": config.max_num_seqs,
        "max_num_batched_tokens": config.max_num_batched_tokens,
        "kv_blocks": config.kv_blocks,
    }
    for metric in _LATENCIES:
        stats: LatencyOut | None = getattr(answer, f"{metric}_s")
        for stat in _STATS:
            row[f"{metric}_{stat}_s"] = getattr(stats, stat) if stats is not None else None
    row.update(energy_row(answer.energy))
    yield row


_PREDICTED = (
    "ttft_p50_s",
    "ttft_p95_s",
    "ttft_p99_s",
    "tpot_p50_s",
    "tpot_p95_s",
    "e2e_p95_s",
    "throughput_requests_per_s",
    "goodput_requests_per_s",
)
PLAN_COLUMNS = (
    "status",
    "rank",
    "candidate",
    "kind",
    "hardware",
    "engine",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "data_parallel_size",
    "enable_expert_parallel",
    "gpus_per_replica",
    "replicas",
    "prefill_replicas",
    "decode_replicas",
    "total_gpus",
    "max_num_seqs",
    "max_num_batched_tokens",
    "gpu_memory_utilization",
    "kv_cache_dtype",
    "max_model_len",
    "max_rate_per_replica_per_s",
    "utilization",
    "headroom",
    "binding",
    "kv_capacity_tokens",
    "price_per_gpu_hour_usd",
    "cost_per_hour_usd",
    "cost_per_million_output_tokens_usd",
    "predicted_by",
    "verified",
    *_PREDICTED,
    "reason",
    "detail",
    *ENERGY_COLUMNS,
)


def _plan_row(plan: PlanOut, label: str) -> Row:
    predicted = plan.simulation or plan.tier_a
    row: dict[str, object] = {
        "status": "ranked",
        "candidate": label,
        **plan.model_dump(
            include={
                "rank",
                "kind",
                "hardware",
                "engine",
                "gpus_per_replica",
                "replicas",
                "prefill_replicas",
                "decode_replicas",
                "total_gpus",
                "max_rate_per_replica_per_s",
                "utilization",
                "headroom",
                "binding",
                "kv_capacity_tokens",
                "verified",
            }
        ),
        **plan.parallelism,
        **plan.knobs.model_dump(),
        "price_per_gpu_hour_usd": plan.price_per_gpu_hour,
        "cost_per_hour_usd": plan.cost_per_hour,
        "cost_per_million_output_tokens_usd": plan.cost_per_million_output_tokens,
        "predicted_by": predicted.source if predicted is not None else None,
        **energy_row(plan.energy),
    }
    for name in _PREDICTED:
        row[name] = getattr(predicted, name) if predicted is not None else None
    return row


def plan_rows(answer: SizingResponse, labels: Sequence[str]) -> Iterator[Row]:
    """One ``ranked`` row per plan (``labels``: each plan's candidate, in rank order), then one
    ``rejected`` row per rejected candidate with its reason and detail."""
    for plan, label in zip(answer.plans, labels, strict=True):
        yield _plan_row(plan, label)
    for rejected in answer.rejected:
        yield {
            "status": "rejected",
            "candidate": rejected.candidate,
            "reason": rejected.reason,
            "detail": rejected.detail,
        }
