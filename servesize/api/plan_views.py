"""Saved plans: storing a sizing answer with its inputs, and what is derived from a stored one
(deployment artifacts, the benchmark job, plan against measured)."""

from __future__ import annotations

import hashlib
import json
import math
import secrets
from typing import Any

from sqlalchemy.orm import Session

import servesize
from servesize.api.errors import (
    ForbiddenError,
    NotFoundError,
    UnauthorizedError,
    UnprocessableError,
)
from servesize.api.simulation_runner import length_distribution
from servesize.api.uncertainty import uncertainty
from servesize.core.architecture import parse_architecture
from servesize.core.deploy import (
    LLMD_CHART,
    LLMD_CHART_VERSION,
    BenchmarkJob,
    PlanCommand,
    PlanDeployment,
    accuracy_summary,
    benchmark_script,
    check_slo,
    compare_metric,
    llmd_values,
    plan_objects,
    vllm_bench_command,
)
from servesize.core.memory import DEFAULT_ENGINE_VERSIONS
from servesize.db.models import ApiKey, HardwareMeasurement, PlanVerification, SavedPlan
from servesize.db.repository import HardwareRepository, PlanRepository
from servesize.db.types import utc_now
from servesize.prices import PriceQuote
from servesize.schemas.manifests import ManifestsOut
from servesize.schemas.measurements import EndpointBenchmark, EndpointLevel
from servesize.schemas.plans import (
    AccuracyGroupOut,
    AccuracyOut,
    MetricAccuracyOut,
    MetricOut,
    PlanInputsOut,
    ProfileInputOut,
    SavedPlanOut,
    SloHeldOut,
    StoredBenchmarkOut,
    TargetCheckOut,
    VerificationsOut,
    VerifyRequest,
    VerifyResponse,
)
from servesize.schemas.sizing import SizingRequest, SizingResponse
from servesize.schemas.uncertainty import PredictionIntervalOut
from servesize.security import Scope, grants

__all__ = [
    "accuracy_report",
    "check_plans_write",
    "load_plan",
    "manifests_for",
    "plan_benchmarks",
    "plan_manifests",
    "plan_verifications",
    "saved_plan_out",
    "store_plan",
    "verify_plan",
]

BENCHMARK_DURATION_S = 300.0


def config_sha256(config: dict[str, Any]) -> str:
    """SHA-256 of the config as canonical JSON (sorted keys, no spaces)."""
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def check_plans_write(key: ApiKey | None) -> ApiKey:
    """Storing needs a key with ``plans:write`` (401 without a key, else 403)."""
    scope = Scope.PLANS_WRITE
    if key is None:
        raise UnauthorizedError(f"saving a plan needs an API key with scope {scope.value!r}")
    if not grants(key.scopes, scope):
        raise ForbiddenError(
            f"the API key {key.name!r} lacks scope {scope.value!r}", required_scope=scope.value
        )
    return key


def _quote_json(quote: PriceQuote) -> dict[str, Any]:
    return {
        "usd_per_gpu_hour": quote.usd_per_gpu_hour,
        "origin": quote.origin,
        "provider": quote.provider,
        "source_url": quote.source_url,
        "as_of": quote.as_of.isoformat() if quote.as_of else None,
    }


def store_plan(
    session: Session,
    *,
    key: ApiKey,
    body: SizingRequest,
    model_id: str,
    config: dict[str, Any],
    fingerprint: list[dict[str, Any]],
    quotes: dict[str, PriceQuote],
    answer: SizingResponse,
) -> SizingResponse:
    """Store the answer with its inputs; the answer returned carries the new ``plan_id``."""
    plan_id = f"pln_{secrets.token_hex(8)}"
    stored = answer.model_copy(update={"plan_id": plan_id, "cached": False})
    PlanRepository(session).add(
        SavedPlan(
            id=plan_id,
            owner_key_id=key.id,
            created_at=utc_now(),
            model_id=model_id,
            model_config_sha256=config_sha256(config),
            service_version=servesize.__version__,
            request=body.model_dump(mode="json"),
            model_config_json=config,
            hardware=fingerprint,
            prices={k: _quote_json(q) for k, q in quotes.items()},
            response=stored.model_dump(mode="json"),
        )
    )
    return stored


def load_plan(session: Session, plan_id: str) -> SavedPlan:
    row = PlanRepository(session).get(plan_id)
    if row is None:
        raise NotFoundError(f"no saved plan {plan_id!r}")
    return row


def saved_plan_out(session: Session, row: SavedPlan) -> SavedPlanOut:
    owner = session.get(ApiKey, row.owner_key_id) if row.owner_key_id is not None else None
    return SavedPlanOut(
        id=row.id,
        created_at=row.created_at,
        owner_key_id=owner.key_id if owner is not None else None,
        inputs=PlanInputsOut(
            model_id=row.model_id,
            model_config_sha256=row.model_config_sha256,
            hardware=[ProfileInputOut.model_validate(h) for h in row.hardware],
            prices=row.prices,
            service_version=row.service_version,
            request=row.request,
        ),
        answer=SizingResponse.model_validate(row.response),
    )


def _plan(row: SavedPlan, rank: int, location: str) -> dict[str, Any]:
    plans: list[dict[str, Any]] = row.response["plans"]
    if not 1 <= rank <= len(plans):
        detail = f"the saved plan has {len(plans)} ranked plans; rank {rank} is not one of them"
        raise UnprocessableError(
            detail,
            slug="unknown-rank",
            errors=[{"location": location, "pointer": "/rank", "detail": detail}],
        )
    return plans[rank - 1]


def _command(args: Any, engine: str) -> list[str] | None:
    """The engine's argv from a plan's ``engine_args`` (a list per engine, or an object with
    ``argv``)."""
    value = args.get(engine) if isinstance(args, dict) else None
    if isinstance(value, dict):
        value = value.get("argv")
    if isinstance(value, list) and value and all(isinstance(a, str) for a in value):
        return list(value)
    return None


def _plan_commands(plan: dict[str, Any]) -> list[PlanCommand]:
    """The plan's ``launch`` commands; for answers stored before ``launch`` existed, the
    ``engine_args`` of each pool."""
    launch = plan.get("launch")
    if isinstance(launch, dict) and launch.get("commands"):
        return [
            PlanCommand(
                role=str(c["role"]),
                argv=tuple(str(a) for a in c["argv"]),
                files=tuple((str(f["path"]), str(f["content"])) for f in c.get("files", [])),
            )
            for c in launch["commands"]
        ]
    engine = plan["engine"]
    if plan["kind"] == "disaggregated":
        pools = [("prefill", plan["engine_args"]), ("decode", plan.get("decode_engine_args"))]
    else:
        pools = [("server", plan["engine_args"])]
    out = []
    for role, args in pools:
        argv = _command(args, engine)
        if argv is not None:
            out.append(PlanCommand(role=role, argv=tuple(argv)))
    return out


def _mean_tokens(spec: Any) -> int:
    from pydantic import TypeAdapter

    from servesize.schemas.simulate import LengthIn

    parsed = TypeAdapter(LengthIn).validate_python(spec)
    return max(1, round(length_distribution(parsed, 2**24).mean_tokens))


def _session_rate(traffic: dict[str, Any]) -> float:
    """Turns per second of a stored ``traffic.sessions`` forecast."""
    from servesize.schemas.sizing import SizingTrafficIn

    return SizingTrafficIn.model_validate(traffic).request_rate_per_s


def _benchmark_job(
    model_id: str, traffic: dict[str, Any], base_url: str, *, gpu_name: str, gpus: int
) -> BenchmarkJob:
    sessions = traffic.get("sessions")
    return BenchmarkJob(
        gpu_name=gpu_name,
        gpus=gpus,
        model=model_id,
        base_url=base_url,
        rate_per_s=float(traffic.get("rate_per_s") or _session_rate(traffic)),
        # Sessions: each turn's new tokens and output (the history is the server's cache).
        input_tokens=_mean_tokens(sessions["new_tokens"] if sessions else traffic["input_tokens"]),
        output_tokens=_mean_tokens((sessions or traffic)["output_tokens"]),
        duration_s=BENCHMARK_DURATION_S,
        cv=float(traffic.get("cv", 1.0)) if traffic.get("process") == "gamma" else 1.0,
        seed=int(traffic.get("seed", 0)),
    )


def manifests_for(
    plan: dict[str, Any],
    *,
    model_id: str,
    traffic: dict[str, Any],
    plan_id: str | None,
    name_suffix: str,
    gpus_per_node: int,
    gpu_name: str,
    namespace: str | None,
    location: str = "query",
) -> ManifestsOut:
    """Every Kubernetes object of one ranked plan (JSON as the API returns it), the llm-d
    values where they fit, and its benchmark job; ``422 not-deployable`` naming the reason."""
    rank = int(plan["rank"])
    engine = plan["engine"]
    deployment = PlanDeployment(
        name=f"{model_id.split('/')[-1]}-{plan['hardware']}-{name_suffix}",
        engine=engine,
        engine_version=DEFAULT_ENGINE_VERSIONS[engine],
        commands=_plan_commands(plan),
        gpus_per_replica=plan["gpus_per_replica"],
        replicas=plan["replicas"],
        prefill_replicas=plan.get("prefill_replicas"),
        decode_replicas=plan.get("decode_replicas"),
        gpus_per_node=gpus_per_node,
        namespace=namespace,
    )
    try:
        objects = plan_objects(deployment)
    except ValueError as exc:
        slug = "no-launch-command" if not deployment.commands else "not-deployable"
        raise UnprocessableError(
            f"plan {rank}: {exc}",
            slug=slug,
            errors=[{"location": location, "pointer": "/rank", "detail": str(exc)}],
        ) from None
    job = _benchmark_job(
        model_id,
        traffic,
        f"http://{objects.entry_service}:{objects.entry_port}",
        gpu_name=gpu_name,
        gpus=plan["total_gpus"],
    )
    ref = f"saved plan {plan_id} rank {rank}" if plan_id else f"plan {rank} of {model_id}"
    notes = list(objects.notes)
    parallel = plan.get("parallelism", {})
    try:
        values: dict[str, Any] | None = llmd_values(
            model=model_id,
            engine=engine,
            engine_version=DEFAULT_ENGINE_VERSIONS[engine],
            commands=[(c.role, c.argv) for c in deployment.commands],
            tensor_parallel=int(parallel.get("tensor_parallel_size", 1)),
            data_parallel=int(parallel.get("data_parallel_size", 1)),
            gpus_per_replica=plan["gpus_per_replica"],
            replicas=plan["replicas"],
            prefill_replicas=plan.get("prefill_replicas"),
            decode_replicas=plan.get("decode_replicas"),
        )
    except ValueError as exc:
        values = None
        notes.append(f"llm-d values not generated: {exc}")
    return ManifestsOut(
        plan_id=plan_id,
        rank=rank,
        kubernetes=objects.kubernetes,
        kserve=objects.kserve,
        llmd_values=values,
        llmd_chart=f"{LLMD_CHART} {LLMD_CHART_VERSION}" if values is not None else None,
        benchmark_command=vllm_bench_command(job),
        benchmark_script=benchmark_script(job, plan_ref=ref),
        notes=notes,
    )


def plan_manifests(
    session: Session, row: SavedPlan, rank: int, *, namespace: str | None
) -> ManifestsOut:
    """:func:`manifests_for` a saved plan's ranked plan, on its hardware profile's nodes."""
    plan = _plan(row, rank, "query")
    profile = HardwareRepository(session).get(plan["hardware"])
    return manifests_for(
        plan,
        model_id=row.model_id,
        traffic=row.request["traffic"],
        plan_id=row.id,
        name_suffix=row.id[-6:],
        gpus_per_node=profile.gpus_per_node if profile is not None else 8,
        gpu_name=profile.name if profile is not None else plan["hardware"],
        namespace=namespace,
    )


def _measurements(session: Session, row: SavedPlan) -> list[HardwareMeasurement]:
    repo = HardwareRepository(session)
    hardware = dict.fromkeys(p["hardware"] for p in row.response["plans"])
    return [m for h in hardware for m in repo.measurements(h, limit=100)]


def plan_benchmarks(session: Session, row: SavedPlan) -> list[StoredBenchmarkOut]:
    """Endpoint benchmarks uploaded for the hardware of the saved plans, newest first."""
    out = []
    for m in _measurements(session, row):
        for i, bench in enumerate(m.payload.get("endpoint_benchmarks", [])):
            out.append(
                StoredBenchmarkOut(
                    measurement_id=m.id,
                    benchmark_index=i,
                    hardware=m.profile_id,
                    measured_at=m.measured_at,
                    model=bench["model"],
                    model_matches=bench["model"] == row.model_id,
                    engine=bench.get("engine"),
                    engine_version=bench.get("engine_version"),
                    source=bench.get("source", "servesize-agent"),
                    levels=len(bench["levels"]),
                )
            )
    return out


def _stored_benchmark(
    session: Session, plan: dict[str, Any], body: VerifyRequest
) -> EndpointBenchmark:
    assert body.measurement_id is not None
    m = HardwareRepository(session).get_measurement(plan["hardware"], body.measurement_id)
    if m is None:
        detail = f"no measurement {body.measurement_id} of hardware {plan['hardware']!r}"
        raise UnprocessableError(
            detail,
            slug="unknown-measurement",
            errors=[{"location": "body", "pointer": "/measurement_id", "detail": detail}],
        )
    benches = m.payload.get("endpoint_benchmarks", [])
    if body.benchmark_index >= len(benches):
        detail = f"measurement {m.id} holds {len(benches)} endpoint benchmarks"
        raise UnprocessableError(
            detail,
            slug="unknown-benchmark",
            errors=[{"location": "body", "pointer": "/benchmark_index", "detail": detail}],
        )
    return EndpointBenchmark.model_validate(benches[body.benchmark_index])


def _level(bench: EndpointBenchmark, body: VerifyRequest, rate: float) -> int:
    pointer = "/benchmark/levels" if body.benchmark is not None else "/level_index"
    if body.level_index is not None:
        if body.level_index >= len(bench.levels):
            detail = f"the benchmark has {len(bench.levels)} levels"
            raise UnprocessableError(
                detail,
                slug="unknown-level",
                errors=[{"location": "body", "pointer": "/level_index", "detail": detail}],
            )
        return body.level_index
    open_levels = [
        (abs(math.log(lv.rate_per_s / rate)), i)
        for i, lv in enumerate(bench.levels)
        if lv.rate_per_s is not None
    ]
    if not open_levels:
        detail = "the benchmark has no open-loop level (request rate) to compare with the plan"
        raise UnprocessableError(
            detail,
            slug="no-open-loop-level",
            errors=[{"location": "body", "pointer": pointer, "detail": detail}],
        )
    return min(open_levels)[1]


def _interval(value: PredictionIntervalOut | None) -> tuple[float, float] | None:
    return (value.low, value.high) if value is not None else None


def _metrics(
    row: SavedPlan, plan: dict[str, Any], predicted: dict[str, Any], level: EndpointLevel
) -> list[MetricOut]:
    arch = parse_architecture(row.model_config_json, name=row.model_id)
    u = uncertainty(plan["engine"], row.model_id, arch)

    def stat(name: str, statistic: str) -> float | None:
        stats = getattr(level, name)
        return None if stats is None else float(getattr(stats, statistic))

    rows: list[tuple[str, float | None, float | None, PredictionIntervalOut | None]] = []
    for metric, statistics in (("ttft_s", ("p50", "p95", "p99")), ("tpot_s", ("p50", "p95"))):
        for s in statistics:
            value = predicted.get(f"{metric[:-2]}_{s}_s")
            band = u.latency(metric, value) if s == "p50" else None
            rows.append((f"{metric}.{s}", value, stat(metric, s), band))
    rows.append(("e2e_s.p95", predicted.get("e2e_p95_s"), stat("e2e_s", "p95"), None))
    rows.append(("itl_s.p50", None, stat("itl_s", "p50"), None))
    thr = predicted.get("throughput_requests_per_s")
    rows.append(("throughput_requests_per_s", thr, level.throughput_requests_per_s, u.rate(thr)))
    out = []
    for name, value, measured, band in rows:
        c = compare_metric(name, value, measured, _interval(band))
        out.append(
            MetricOut(
                name=name,
                predicted=c.predicted,
                measured=c.measured,
                ratio=c.ratio,
                interval=band,
                within_interval=c.within_interval,
            )
        )
    return out


def verify_plan(
    session: Session, row: SavedPlan, body: VerifyRequest, *, key: ApiKey | None = None
) -> VerifyResponse:
    """Predicted against measured for one ranked plan, and the SLO on the measured level;
    the answer is stored (``plan_verification``) for the plan's history and the accuracy
    report."""
    from servesize.schemas.slo import SloIn

    if (body.measurement_id is None) == (body.benchmark is None):
        detail = "give exactly one of measurement_id (a stored benchmark) or benchmark (inline)"
        raise UnprocessableError(
            detail,
            slug="invalid-benchmark-reference",
            errors=[
                {"location": "body", "pointer": "/measurement_id", "detail": detail},
                {"location": "body", "pointer": "/benchmark", "detail": detail},
            ],
        )
    plan = _plan(row, body.rank, "body")
    bench = body.benchmark or _stored_benchmark(session, plan, body)
    index = _level(bench, body, float(row.response["target_rate_per_s"]))
    level = bench.levels[index]
    predicted = plan[plan["decided_by"]] or plan["tier_a"]
    notes = []
    if bench.model != row.model_id:
        notes.append(f"the benchmark measured {bench.model!r}, the plan is for {row.model_id!r}")
    if level.rate_per_s is not None:
        notes.append(
            f"measured at {level.rate_per_s:g} requests/s; the plan was sized for "
            f"{row.request['traffic']['rate_per_s']:g}"
        )
    notes.append("intervals: the held-out bands of the p50 latencies and the throughput")
    checks = check_slo(
        SloIn.model_validate(row.request["slo"]).to_core(),
        {
            m: (getattr(level, m).model_dump() if getattr(level, m) else None)
            for m in ("ttft_s", "itl_s", "tpot_s", "e2e_s")
        },
        requests=level.requests,
        failed=level.failed + level.timed_out,
        throughput_requests_per_s=level.throughput_requests_per_s,
    )
    answer = VerifyResponse(
        plan_id=row.id,
        rank=body.rank,
        benchmark_source="inline" if body.benchmark is not None else "stored",
        measurement_id=body.measurement_id,
        benchmark_index=body.benchmark_index if body.benchmark is None else None,
        level_index=index,
        level=level,
        predicted_by=plan["decided_by"] if plan[plan["decided_by"]] else "tier_a",
        metrics=_metrics(row, plan, predicted, level),
        slo=SloHeldOut(
            held=checks.held,
            checks=[
                TargetCheckOut(name=c.name, limit=c.limit, measured=c.measured, held=c.held)
                for c in checks.checks
            ],
        ),
        notes=notes,
    )
    if key is None or not grants(key.scopes, Scope.PLANS_WRITE):
        # Only a key allowed to write plans adds to their history and the accuracy report.
        return answer
    stored = PlanRepository(session).add_verification(
        PlanVerification(
            plan_id=row.id,
            created_at=utc_now(),
            verifier_key_id=key.id if key is not None else None,
            rank=body.rank,
            engine=plan["engine"],
            hardware=plan["hardware"],
            result=answer.model_dump(mode="json"),
        )
    )
    return answer.model_copy(
        update={"verification_id": stored.id, "verified_at": stored.created_at}
    )


def _stored_answer(v: PlanVerification) -> VerifyResponse:
    return VerifyResponse.model_validate(
        v.result | {"verification_id": v.id, "verified_at": v.created_at}
    )


def plan_verifications(session: Session, row: SavedPlan) -> VerificationsOut:
    """The plan's stored verify answers, oldest first."""
    items = PlanRepository(session).verifications(row.id)
    return VerificationsOut(plan_id=row.id, items=[_stored_answer(v) for v in items])


def _pairs(result: dict[str, Any]) -> dict[str, tuple[float | None, float | None]]:
    return {
        m["name"]: (m.get("predicted"), m.get("measured"))
        for m in result.get("metrics", [])
        if isinstance(m, dict) and "name" in m
    }


def accuracy_report(
    session: Session, *, engine: str | None = None, hardware: str | None = None
) -> AccuracyOut:
    """Median ratio and MAPE of predicted against measured TTFT/TPOT per engine and hardware
    over every stored verification (:func:`servesize.core.deploy.accuracy_summary`)."""
    rows = PlanRepository(session).all_verifications(engine=engine, hardware=hardware)
    groups = accuracy_summary((v.engine, v.hardware, _pairs(v.result)) for v in rows)
    return AccuracyOut(
        items=[
            AccuracyGroupOut(
                engine=g.engine,
                hardware=g.hardware,
                verifications=g.verifications,
                metrics=[
                    MetricAccuracyOut(
                        metric=m.metric,
                        count=m.count,
                        median_ratio=m.median_ratio,
                        mape_percent=m.mape_percent,
                    )
                    for m in g.metrics
                ],
            )
            for g in groups
        ],
        notes=[
            "every stored verification counts once, whatever level or benchmark it used; "
            "repeated verifications of one benchmark weigh it more",
            "read-only: the engine constants are not recalibrated from these figures "
            "(a refit stays the offline `python -m bench.accuracy --fit` step)",
        ],
    )
