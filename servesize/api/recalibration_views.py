"""Recalibration of an engine's constants on one hardware profile from its stored endpoint
benchmarks: the levels gathered here, the fit in
:func:`servesize.core.steptime.fit_recalibration`, the prediction Tier A's (closed loop at a
level's concurrency, open loop at its rate) on the replica the request describes."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from sqlalchemy.orm import Session

from servesize.api.errors import UnprocessableError
from servesize.api.lookups import LookupCache
from servesize.api.replica_resolver import ReplicaInputs, compile_inputs, lookup_inputs
from servesize.core.errors import UnstableQueueError
from servesize.core.steptime import (
    EngineProfile,
    MeasuredLevel,
    Recalibration,
    RecalibrationError,
    apply_recalibration,
    closed_loop,
    fit_recalibration,
    open_loop,
)
from servesize.db.models import ApiKey, EngineCalibration, HardwareProfile
from servesize.db.repository import CalibrationRepository, HardwareRepository
from servesize.db.types import utc_now
from servesize.schemas.measurements import EndpointBenchmark
from servesize.schemas.memory import DeploymentIn
from servesize.schemas.recalibration import (
    CalibrationOut,
    LevelFitOut,
    MetricErrorsOut,
    RecalibrationOut,
    RecalibrationRequest,
)

__all__ = ["calibration_list", "recalibrate"]

UNSTABLE_S = 3600.0
"""Predicted latency of a level whose rate the constants make unstable: a finite penalty
(an hour) so the least-squares residual stays defined."""

MAX_LEVELS = 256
"""Most levels one fit evaluates (each least-squares step predicts every level)."""

ENGINE_FIELDS = (
    "step_overhead_s",
    "eager_overhead_per_layer_s",
    "request_overhead_s",
    "compute_slowdown",
    "memory_slowdown",
)


@dataclass(frozen=True, slots=True)
class _Level:
    measurement_id: int
    benchmark_index: int
    level_index: int
    concurrency: int | None
    rate_per_s: float | None
    input_tokens: int
    output_tokens: int
    measured: MeasuredLevel


def _problem(detail: str, slug: str, pointer: str) -> UnprocessableError:
    return UnprocessableError(
        detail, slug=slug, errors=[{"location": "body", "pointer": pointer, "detail": detail}]
    )


def _levels(
    session: Session, profile_id: str, body: RecalibrationRequest
) -> tuple[list[_Level], list[str]]:
    repo = HardwareRepository(session)
    levels: list[_Level] = []
    skipped: list[str] = []
    for i, mid in enumerate(body.measurement_ids):
        m = repo.get_measurement(profile_id, mid)
        if m is None:
            raise _problem(
                f"no measurement {mid} of hardware profile {profile_id!r}",
                "unknown-measurement",
                f"/measurement_ids/{i}",
            )
        for b, raw in enumerate(m.payload.get("endpoint_benchmarks", [])):
            bench = EndpointBenchmark.model_validate(raw)
            where = f"measurement {mid} benchmark {b}"
            if bench.model != body.model:
                skipped.append(f"{where}: measured {bench.model!r}, not {body.model!r}")
                continue
            if bench.engine is not None and bench.engine.lower() != body.engine:
                skipped.append(f"{where}: engine {bench.engine!r}, not {body.engine!r}")
                continue
            for j, lv in enumerate(bench.levels):
                p = lv.mean_input_tokens or bench.input_tokens
                n = lv.mean_output_tokens or bench.output_tokens
                ttft = lv.ttft_s.mean if lv.ttft_s is not None else None
                tpot = lv.tpot_s.mean if lv.tpot_s is not None else None
                reason = None
                if p is None or n is None:
                    reason = "no prompt or output length"
                elif lv.concurrency is None and lv.rate_per_s is None:
                    reason = "neither a concurrency nor a request rate"
                elif not ttft and not tpot:
                    reason = "no positive mean TTFT or TPOT"
                if reason is not None or p is None or n is None:
                    skipped.append(f"{where} level {j}: {reason}")
                    continue
                levels.append(
                    _Level(
                        measurement_id=mid,
                        benchmark_index=b,
                        level_index=j,
                        concurrency=lv.concurrency,
                        rate_per_s=lv.rate_per_s if lv.concurrency is None else None,
                        input_tokens=max(1, round(p)),
                        output_tokens=max(1, round(n)),
                        measured=MeasuredLevel(
                            label=f"{mid}/{b}/{j}",
                            ttft_s=ttft or None,
                            tpot_s=tpot or None,
                        ),
                    )
                )
    if len(levels) > MAX_LEVELS:
        raise _problem(
            f"the measurements hold {len(levels)} usable levels; one fit takes at most "
            f"{MAX_LEVELS}: name fewer measurements",
            "too-many-levels",
            "/measurement_ids",
        )
    if not levels:
        raise _problem(
            f"the measurements hold no endpoint-benchmark level of {body.model!r} on "
            f"{body.engine} with lengths and a load"
            + (f" ({'; '.join(skipped)})" if skipped else ""),
            "no-usable-levels",
            "/measurement_ids",
        )
    return levels, skipped


def _predictor(
    inputs: ReplicaInputs, deployment: DeploymentIn, levels: list[_Level]
) -> tuple[EngineProfile, Callable[[Mapping[str, float]], list[tuple[float, float]]]]:
    built = compile_inputs(inputs, deployment)
    base = built.step_model
    kv = built.replica.kv_capacity_tokens
    policy = built.replica.scheduler.policy

    def predict(constants: Mapping[str, float]) -> list[tuple[float, float]]:
        model = base.with_engine(apply_recalibration(base.engine, constants))
        out = []
        for lv in levels:
            if lv.concurrency is not None:
                est = closed_loop(
                    model,
                    concurrency=lv.concurrency,
                    input_tokens=lv.input_tokens,
                    output_tokens=lv.output_tokens,
                    kv_capacity_tokens=kv,
                    policy=policy,
                )
                out.append((float(est.ttft_s[0]), float(est.tpot_s[0])))
            else:
                assert lv.rate_per_s is not None
                try:
                    ol = open_loop(
                        model,
                        arrival_rate_per_s=lv.rate_per_s,
                        input_tokens=lv.input_tokens,
                        output_tokens=lv.output_tokens,
                        kv_capacity_tokens=kv,
                    )
                    out.append((float(ol.ttft_mean_s), float(ol.tpot_s)))
                except UnstableQueueError:
                    out.append((UNSTABLE_S, UNSTABLE_S))
        return out

    return base.engine, predict


def _constants(profile: EngineProfile) -> dict[str, float]:
    return {f: float(getattr(profile, f)) for f in ENGINE_FIELDS}


def _errors(fit: Recalibration, after: bool) -> list[MetricErrorsOut]:
    errors = fit.errors_after if after else fit.errors_before
    return [MetricErrorsOut.model_validate(e, from_attributes=True) for e in errors]


def recalibrate(
    session: Session,
    lookups: LookupCache,
    profile: HardwareProfile,
    body: RecalibrationRequest,
    key: ApiKey | None,
) -> RecalibrationOut:
    """The fit of ``body`` (a preview); with ``apply`` the stored calibration too (the caller
    checked scope and ``If-Match``)."""
    levels, skipped = _levels(session, profile.id, body)
    inputs = lookup_inputs(lookups, model_ref=body.model, hardware_ref=profile.id)
    # The fit starts from, and is reported against, the shipped constants.
    inputs = ReplicaInputs(
        model=inputs.model, hardware=inputs.hardware, measurements=inputs.measurements
    )
    deployment = (body.deployment or DeploymentIn()).model_copy(update={"engine": body.engine})
    base, predict = _predictor(inputs, deployment, levels)
    start = {"request_overhead_s": base.request_overhead_s, "step_time_scale": 1.0}
    try:
        fit = fit_recalibration([lv.measured for lv in levels], predict, start)
    except RecalibrationError as exc:
        raise _problem(str(exc), "too-few-levels", "/measurement_ids") from None
    after = apply_recalibration(base, fit.constants_after)
    calibration_id = None
    created_at = None
    notes = [
        "before: the shipped constants; after: the fit (request overhead and one scale on "
        "step overhead, eager launch and compute/memory slowdowns)",
        "the prediction of each level is Tier A's mean TTFT and TPOT",
    ]
    if body.apply:
        row = CalibrationRepository(session).add(
            EngineCalibration(
                id=f"cal_{secrets.token_hex(8)}",
                profile_id=profile.id,
                engine=body.engine,
                model_id=body.model,
                created_at=utc_now(),
                owner_key_id=key.id if key is not None else None,
                measurement_ids=list(body.measurement_ids),
                fitted=fit.constants_after,
                constants=_constants(after),
                result={
                    "fitted_before": fit.constants_before,
                    "errors_before": [e.model_dump() for e in _errors(fit, False)],
                    "errors_after": [e.model_dump() for e in _errors(fit, True)],
                },
            )
        )
        profile.updated_at = utc_now()  # a new version: the ETag and the lookup stamp change
        session.flush()
        calibration_id, created_at = row.id, row.created_at
        notes.append(
            f"applied: predictions of {body.engine} on {profile.id} now use {row.id} and say so"
        )
    else:
        notes.append("preview only: nothing stored, predictions unchanged")
    return RecalibrationOut(
        profile_id=profile.id,
        engine=body.engine,
        model=body.model,
        applied=body.apply,
        calibration_id=calibration_id,
        created_at=created_at,
        fitted_before=fit.constants_before,
        fitted_after=fit.constants_after,
        constants_before=_constants(base),
        constants_after=_constants(after),
        errors_before=_errors(fit, False),
        errors_after=_errors(fit, True),
        levels=[
            LevelFitOut(
                measurement_id=lv.measurement_id,
                benchmark_index=lv.benchmark_index,
                level_index=lv.level_index,
                load=(
                    f"concurrency={lv.concurrency}"
                    if lv.concurrency is not None
                    else f"rate={lv.rate_per_s:g}/s"
                ),
                input_tokens=lv.input_tokens,
                output_tokens=lv.output_tokens,
                measured_ttft_s=p.measured_ttft_s,
                measured_tpot_s=p.measured_tpot_s,
                before_ttft_s=p.before_ttft_s,
                before_tpot_s=p.before_tpot_s,
                after_ttft_s=p.after_ttft_s,
                after_tpot_s=p.after_tpot_s,
            )
            for lv, p in zip(levels, fit.levels, strict=True)
        ],
        skipped=skipped,
        notes=notes,
    )


def calibration_list(session: Session, profile_id: str) -> list[CalibrationOut]:
    """Every stored calibration of the profile, newest first; the newest per engine active."""
    seen: set[str] = set()
    out = []
    for row in CalibrationRepository(session).for_profile(profile_id):
        out.append(
            CalibrationOut(
                id=row.id,
                profile_id=row.profile_id,
                engine=row.engine,
                model=row.model_id,
                created_at=row.created_at,
                measurement_ids=row.measurement_ids,
                fitted=row.fitted,
                constants=row.constants,
                active=row.engine not in seen,
            )
        )
        seen.add(row.engine)
    return out
