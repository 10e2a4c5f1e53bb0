"""Out-of-sample errors of the steady-state tier and the residuals behind the prediction
intervals (docs/modeling.md §5.7).

Three kinds of held-out rows, all steady state (the KV cache holds every client):

- ``model``: leave one calibration model out, refit the engine's constants on its other
  calibration models (:func:`fit_engine_constants`), predict the model left out;
- ``outside``: rows of catalogue models outside the calibration set, predicted with the
  shipped constants (never fitted on them);
- ``engine``: leave one engine out, fit one shared set of constants on the calibration rows of
  the other engines and predict the engine left out with it (the error of an engine or engine
  version nobody calibrated).

The prediction intervals use the ``model`` and ``outside`` rows (the constants of each row's
own engine, fitted without its model).
"""

from __future__ import annotations

import csv
import hashlib
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from servesize.calibration.cases import Group, ServingCase, resolve_cases
from servesize.calibration.evaluation import compile_models, evaluate_serving, steady_state_cases
from servesize.calibration.fitting import _fit, fit_engine_constants
from servesize.calibration.kernel_tables import load_measured_profile
from servesize.calibration.reference import reference_gpu
from servesize.calibration.report import CALIBRATION_MODELS
from servesize.calibration.serving_rows import E2E_SERVING_CSV, load_serving_measurements
from servesize.core.architecture import Architecture
from servesize.core.steptime import EngineProfile, StepTimeModel, engine_profile
from servesize.core.steptime.engines import FITTED_FIELDS, SIMULATOR_ENGINE_PROFILES
from servesize.core.uncertainty import (
    METRICS,
    PredictionIntervals,
    group_key,
    model_family,
    residual_group,
)

__all__ = [
    "COVERAGES",
    "MIN_ROWS",
    "SYSTEM_GPUS",
    "HeldOutRow",
    "band_holds",
    "by_model",
    "by_row",
    "coverage_check",
    "interval_data",
    "leave_one_engine_out",
    "leave_one_model_out",
    "outside_models",
    "read_residuals",
    "summarize",
    "write_residuals",
]

COVERAGES: tuple[float, ...] = (0.8, 0.95)
MIN_ROWS = 20
"""Fewest held-out rows for an engine × family group to get its own quantiles."""
SYSTEM_GPUS: dict[str, str] = {"h100_sxm": "H100 SXM"}
"""``system`` column of ``e2e_serving.csv`` → GPU name in ``gpus.json``."""

Compiled = dict[Group, tuple[StepTimeModel, float]]


@dataclass(frozen=True, slots=True, kw_only=True)
class HeldOutRow:
    """One measured row and its out-of-sample prediction (times in seconds)."""

    split: str
    """``model``, ``outside`` or ``engine`` (module docstring)."""
    engine: str
    engine_version: str
    model_id: str
    family: str
    gpu: str
    input_tokens: int
    output_tokens: int
    concurrency: int
    measured: tuple[float, float]
    """Mean TTFT and TPOT."""
    predicted: tuple[float, float]

    def value(self, metric: str, *, predicted: bool) -> float:
        """``ttft_s``, ``tpot_s`` or ``e2e_s = TTFT + (OSL − 1)·TPOT``."""
        ttft, tpot = self.predicted if predicted else self.measured
        return {"ttft_s": ttft, "tpot_s": tpot}.get(metric, ttft + (self.output_tokens - 1) * tpot)

    def residual(self, metric: str) -> float:
        """``ln(measured / predicted)``."""
        return math.log(self.value(metric, predicted=False) / self.value(metric, predicted=True))


_COLUMNS = (
    "split",
    "engine",
    "engine_version",
    "model_id",
    "family",
    "gpu",
    "input_tokens",
    "output_tokens",
    "concurrency",
    "measured_ttft_s",
    "measured_tpot_s",
    "predicted_ttft_s",
    "predicted_tpot_s",
)


def write_residuals(rows: Sequence[HeldOutRow], path: Path) -> None:
    """The held-out rows as CSV (floats as ``repr``, so reading them back is exact)."""
    with path.open("w", newline="") as handle:
        out = csv.writer(handle, lineterminator="\n")
        out.writerow(_COLUMNS)
        for r in rows:
            out.writerow(
                [
                    r.split,
                    r.engine,
                    r.engine_version,
                    r.model_id,
                    r.family,
                    r.gpu,
                    r.input_tokens,
                    r.output_tokens,
                    r.concurrency,
                    *(repr(x) for x in (*r.measured, *r.predicted)),
                ]
            )


def read_residuals(path: Path) -> list[HeldOutRow]:
    """Rows written by :func:`write_residuals`."""
    with path.open(newline="") as handle:
        return [
            HeldOutRow(
                split=d["split"],
                engine=d["engine"],
                engine_version=d["engine_version"],
                model_id=d["model_id"],
                family=d["family"],
                gpu=d["gpu"],
                input_tokens=int(d["input_tokens"]),
                output_tokens=int(d["output_tokens"]),
                concurrency=int(d["concurrency"]),
                measured=(float(d["measured_ttft_s"]), float(d["measured_tpot_s"])),
                predicted=(float(d["predicted_ttft_s"]), float(d["predicted_tpot_s"])),
            )
            for d in csv.DictReader(handle)
        ]


def _steady(
    archs: Mapping[str, Architecture],
) -> tuple[list[ServingCase], Compiled]:
    gpu = reference_gpu("H100 SXM")
    cases, _ = resolve_cases(load_serving_measurements(), archs, gpu)
    compiled = compile_models(cases, archs, gpu, measured=load_measured_profile())
    return steady_state_cases(cases, compiled), compiled


def _rows(
    split: str,
    cases: Sequence[ServingCase],
    compiled: Compiled,
    archs: Mapping[str, Architecture],
    profiles: Mapping[str, EngineProfile] | None,
) -> list[HeldOutRow]:
    pred = evaluate_serving(cases, compiled, profiles)
    return [
        HeldOutRow(
            split=split,
            engine=c.row.engine,
            engine_version=c.row.engine_version,
            model_id=c.model_id,
            family=model_family(archs[c.model_id]),
            gpu=SYSTEM_GPUS.get(c.row.system, c.row.system),
            input_tokens=c.row.input_tokens,
            output_tokens=c.row.output_tokens,
            concurrency=c.row.concurrency or 1,
            measured=(c.row.ttft_s, c.row.tpot_s),
            predicted=(float(pred.ttft_s[i]), float(pred.tpot_s[i])),
        )
        for i, c in enumerate(cases)
    ]


def _calibration(archs: Mapping[str, Architecture]) -> dict[str, Architecture]:
    return {k: v for k, v in archs.items() if k in CALIBRATION_MODELS}


def leave_one_model_out(
    archs: Mapping[str, Architecture], *, max_evaluations: int, log: Callable[[str], None]
) -> list[HeldOutRow]:
    """Per engine and calibration model: refit on the engine's other calibration models and
    predict the model left out (an engine with one model has nothing to refit on: skipped)."""
    calibration = _calibration(archs)
    cases, compiled = _steady(calibration)
    out: list[HeldOutRow] = []
    for engine in sorted({c.row.engine for c in cases}):
        own = [c for c in cases if c.row.engine == engine]
        for model in sorted({c.model_id for c in own}):
            train = [c for c in own if c.model_id != model]
            test = [c for c in own if c.model_id == model]
            if not train:
                continue
            profile, objective = fit_engine_constants(
                train, compiled, engine=engine, max_evaluations=max_evaluations
            )
            log(f"  {engine} without {model}: objective {objective:.4f}")
            out += _rows("model", test, compiled, calibration, {engine: profile})
    return out


def outside_models(archs: Mapping[str, Architecture]) -> list[HeldOutRow]:
    """Rows of the catalogue models outside :data:`CALIBRATION_MODELS` under the shipped
    constants: :data:`SIMULATOR_ENGINE_PROFILES`, the set both tiers step with."""
    outside = {k: v for k, v in archs.items() if k not in CALIBRATION_MODELS}
    cases, compiled = _steady(outside)
    return _rows("outside", cases, compiled, outside, SIMULATOR_ENGINE_PROFILES)


def _with_constants(target: EngineProfile, source: EngineProfile) -> EngineProfile:
    """``target`` with the :data:`FITTED_FIELDS` of ``source``."""
    fields = {name: float(getattr(source, name)) for name in FITTED_FIELDS}
    return replace(target, calibrated=True, **fields)  # type: ignore[arg-type]


def leave_one_engine_out(
    archs: Mapping[str, Architecture], *, max_evaluations: int, log: Callable[[str], None]
) -> list[HeldOutRow]:
    """Per engine of the calibration rows: one set of :data:`FITTED_FIELDS` fitted on the
    other engines' calibration rows (each keeping its own scheduler and CUDA-graph settings),
    then applied to the engine left out."""
    calibration = _calibration(archs)
    cases, compiled = _steady(calibration)
    engines = sorted({c.row.engine for c in cases})
    out: list[HeldOutRow] = []
    for engine in engines:
        train = [c for c in cases if c.row.engine != engine]
        test = [c for c in cases if c.row.engine == engine]
        others = sorted({c.row.engine for c in train})
        if not train:
            continue

        def predict(
            profile: EngineProfile, train: list[ServingCase] = train, others: list[str] = others
        ) -> tuple[np.ndarray, np.ndarray]:
            shared = {e: _with_constants(engine_profile(e), profile) for e in others}
            pred = evaluate_serving(train, compiled, shared)
            return pred.ttft_s, pred.tpot_s

        fitted, objective = _fit(
            train,
            engine_profile(others[0]),
            FITTED_FIELDS,
            predict,
            simplex_step=0.5,
            max_evaluations=max_evaluations,
            xatol=1e-3,
            fatol=1e-5,
        )
        log(f"  {engine} from {', '.join(others)}: objective {objective:.4f}")
        profile = _with_constants(engine_profile(engine), fitted)
        out += _rows("engine", test, compiled, calibration, {engine: profile})
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Summary:
    rows: int
    ttft: tuple[float, float, float]
    """MAPE, median and 90th percentile of the absolute percentage error, in percent."""
    tpot: tuple[float, float, float]


def _ape(rows: Sequence[HeldOutRow], metric: str) -> tuple[float, float, float]:
    ape = np.array(
        [
            100 * abs(r.value(metric, predicted=True) / r.value(metric, predicted=False) - 1)
            for r in rows
        ]
    )
    return float(ape.mean()), float(np.median(ape)), float(np.quantile(ape, 0.9))


def summarize(rows: Sequence[HeldOutRow], key: Callable[[HeldOutRow], str]) -> dict[str, Summary]:
    """Errors of ``rows`` grouped by ``key``, sorted by group name."""
    groups: dict[str, list[HeldOutRow]] = defaultdict(list)
    for r in rows:
        groups[key(r)].append(r)
    return {
        name: Summary(rows=len(g), ttft=_ape(g, "ttft_s"), tpot=_ape(g, "tpot_s"))
        for name, g in sorted(groups.items())
    }


def _round(x: float) -> float:
    return float(f"{x:.6g}")


def _groups(rows: Sequence[HeldOutRow]) -> dict[str, list[HeldOutRow]]:
    groups: dict[str, list[HeldOutRow]] = defaultdict(list)
    for r in rows:
        for key in (group_key(r.engine, r.family), group_key(r.engine, "*"), "*/*"):
            groups[key].append(r)
    return dict(sorted(groups.items()))


def intervals_of(
    rows: Sequence[HeldOutRow], coverages: Sequence[float] = COVERAGES, min_rows: int = MIN_ROWS
) -> PredictionIntervals:
    """The residual quantiles of ``rows`` by engine × family, engine, and over all."""
    return PredictionIntervals.from_mapping(_interval_groups(rows, coverages, min_rows))


def _interval_groups(
    rows: Sequence[HeldOutRow], coverages: Sequence[float], min_rows: int
) -> dict[str, Any]:
    groups: dict[str, Any] = {}
    for key, members in _groups(rows).items():
        g = residual_group(
            key,
            {m: [r.residual(m) for r in members] for m in METRICS},
            coverages,
            models=sorted({r.model_id for r in members}),
        )
        groups[key] = {
            "rows": g.rows,
            "models": list(g.models),
            "bands": {
                m: {str(c): [_round(lo), _round(hi)] for c, (lo, hi) in by_c.items()}
                for m, by_c in g.bands.items()
            },
        }
    return {"coverages": list(coverages), "min_rows": min_rows, "groups": groups}


def _domain(archs: Mapping[str, Architecture], used: Sequence[HeldOutRow]) -> dict[str, Any]:
    """What the aggregated rows of catalogue models span (every such row, steady or not), and
    per engine the models with held-out rows."""
    cases, _ = resolve_cases(load_serving_measurements(), archs, reference_gpu("H100 SXM"))
    by_engine: dict[str, list[ServingCase]] = defaultdict(list)
    for c in cases:
        by_engine[c.row.engine].append(c)

    def span(values: Iterable[int]) -> list[int]:
        v = list(values)
        return [min(v), max(v)]

    return {
        "gpus": sorted({SYSTEM_GPUS.get(c.row.system, c.row.system) for c in cases}),
        "engines": {
            engine: {
                "versions": sorted({c.row.engine_version for c in own} - {""}),
                "families": sorted({model_family(archs[c.model_id]) for c in own}),
                "input_tokens": span(c.row.input_tokens for c in own),
                "output_tokens": span(c.row.output_tokens for c in own),
                "concurrency": span(c.row.concurrency or 1 for c in own),
                "models": sorted({r.model_id for r in used if r.engine == engine}),
            }
            for engine, own in sorted(by_engine.items())
        },
    }


def interval_data(
    rows: Sequence[HeldOutRow],
    archs: Mapping[str, Architecture],
    *,
    generated: Mapping[str, str],
    coverages: Sequence[float] = COVERAGES,
    min_rows: int = MIN_ROWS,
    residuals: Path | None = None,
) -> dict[str, Any]:
    """The content of ``prediction_intervals.json``: how it was made (with the digests of
    ``e2e_serving.csv`` and of the ``residuals`` file ``rows`` were written to), the residual
    groups of the ``model`` and ``outside`` rows, and the validated domain."""
    used = [r for r in rows if r.split in ("model", "outside")]
    inputs = {
        path.name: f"sha256:{hashlib.sha256(path.read_bytes()).hexdigest()}"
        for path in (Path(E2E_SERVING_CSV), residuals)
        if path is not None
    }
    return {
        "generated": {
            **generated,
            "inputs": inputs,
            "residuals": "ln(measured / predicted) of steady-state rows predicted out of "
            "sample: "
            + (
                "catalogue models outside the calibration set with the shipped constants"
                if all(r.split == "outside" for r in used)
                else "calibration models left out of a refit of their engine's constants, "
                "and catalogue models outside the calibration set with the shipped constants"
            ),
            "quantiles": "Hyndman-Fan type 7 by engine/family, engine/* and */*; a model with "
            "held-out rows takes the most specific group holding it with min_rows rows, any "
            "other model */*",
            "models": sorted({f"{r.engine} {r.model_id} ({r.split})" for r in used}),
        },
        **_interval_groups(used, coverages, min_rows),
        "domain": {
            **_domain(archs, used),
            # Leaving a model out needs residuals of another: with one model, unmeasured.
            "new_model_coverage": {
                str(c): {m: _round(cov.inside[m][c] / cov.rows) for m in METRICS}
                for cov in coverage_check(used, lambda r: "all", coverages, min_rows).values()
                for c in coverages
            }
            if len({r.model_id for r in used}) > 1
            else {},
        },
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class Coverage:
    rows: int
    inside: Mapping[str, Mapping[float, int]]
    """``inside[metric][coverage]``: held-out rows inside their interval."""


def by_model(index: int, row: HeldOutRow) -> str:
    """Held-out unit of :func:`coverage_check`: a new model (all its rows, every engine)."""
    return row.model_id


def by_row(index: int, row: HeldOutRow, folds: int = 10) -> str:
    """Held-out unit of :func:`coverage_check`: a new workload of known models (row ``i`` in
    fold ``i mod 10``)."""
    return str(index % folds)


def band_holds(table: PredictionIntervals, row: HeldOutRow, metric: str, coverage: float) -> bool:
    """Whether ``row``'s measured ``metric`` lies in the band ``table`` gives its prediction."""
    band = table.latency(
        metric,
        row.value(metric, predicted=True),
        engine=row.engine,
        family=row.family,
        coverage=coverage,
        model=row.model_id,
    )
    return band is not None and band.low <= row.value(metric, predicted=False) <= band.high


def coverage_check(
    rows: Sequence[HeldOutRow],
    key: Callable[[HeldOutRow], str],
    coverages: Sequence[float] = COVERAGES,
    min_rows: int = MIN_ROWS,
    unit: Callable[[int, HeldOutRow], str] = by_model,
) -> dict[str, Coverage]:
    """Leave one ``unit`` out of the residuals (default: a model): the intervals built from
    every other unit's residuals, and how many of the left-out unit's measurements fall inside
    them; summed by ``key``."""
    used = [r for r in rows if r.split in ("model", "outside")]
    units = [unit(i, r) for i, r in enumerate(used)]
    counts: dict[str, dict[str, dict[float, int]]] = {}
    totals: dict[str, int] = defaultdict(int)
    for held in sorted(set(units)):
        train = [r for r, u in zip(used, units, strict=True) if u != held]
        table = intervals_of(train, coverages, min_rows)
        for r in (r for r, u in zip(used, units, strict=True) if u == held):
            k = key(r)
            totals[k] += 1
            for metric in METRICS:
                for c in coverages:
                    hit = band_holds(table, r, metric, c)
                    slot = counts.setdefault(k, {}).setdefault(metric, {})
                    slot[c] = slot.get(c, 0) + int(hit)
    return {k: Coverage(rows=totals[k], inside=counts[k]) for k in sorted(totals)}
