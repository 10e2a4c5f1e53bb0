"""Accuracy of the step-time and serving models on measured H100 data.

``python -m bench.accuracy`` prints TTFT and TPOT errors (MAPE and median absolute percentage
error) per engine and per model against ``servesize/data/h100/e2e_serving.csv``, for four
variants: the datasheet roofline before calibration, the same with the measured kernel
tables, the fitted engine constants without the tables, and both (after calibration). It then
prints the errors of the datasheet defaults on each kernel table and which rows were excluded,
and why.
``--fit`` refits the engine constants first and prints them (minutes).
``--offline`` predicts TensorRT-LLM's published offline max-throughput rows (validation only,
:mod:`bench.offline`).
``--simulate`` replays every steady-state calibration row through the simulator as its
benchmark ran (:mod:`servesize.calibration.simulated`) and prints per-engine MAPE side by side:
the steady-state estimate (Tier A) with the simulator's constants (the one set both tiers use)
and with the old steady-state constants, the simulator without calibration, with the
steady-state constants and with its own, then the worst rows, the rows of catalogue models
outside the calibration set (out of sample) and the errors over every replayable row together
(minutes).
It ends with the rows under KV pressure (``clients · (ISL + OSL)`` above the KV cache), under
each engine's capacity policy and the alternatives (:func:`simulated_kv_pressure`).
``--simulate --holdout`` refits the
simulator constants leaving one model out and prints the errors on the model left out (rows
that record their client count only).
``--holdout-steady`` prints the steady-state tier's out-of-sample errors (leave one model out,
catalogue models outside the calibration set, leave one engine out) per engine, model family and
GPU: MAPE, median and 90th percentile of the absolute percentage error (minutes).
``--write-intervals`` writes the held-out rows to ``servesize/data/held_out_residuals.csv`` and
the intervals built from them to ``servesize/data/prediction_intervals.json``, and prints the
coverage the intervals reach on models (and on rows) left out of them (minutes; deterministic:
the date comes from ``SOURCE_DATE_EPOCH`` when set); ``--write-intervals --from-residuals``
rebuilds the intervals from that CSV without refitting (seconds).

Closed-loop TTFT at concurrency ``C`` is predicted by Tier A under the deployment and client
each row was measured with (:func:`servesize.calibration.simulated.lockstep_cases`): the
lock-step loop of the engine's scheduler for clients with fixed lengths, the mean-field steady
state (see :mod:`servesize.core.steptime.serving`) for clients out of step.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np

from servesize.calibration import (
    CALIBRATION_MODELS,
    AccuracyReport,
    ErrorPair,
    accuracy_report,
    compile_models,
    evaluate_serving,
    fit_engine_constants,
    load_measured_profile,
    load_serving_measurements,
    reference_gpu,
    resolve_cases,
    steady_state_cases,
)
from servesize.calibration.cases import Group, ServingCase
from servesize.calibration.collective_fit import fit_collective_constants
from servesize.calibration.fitting import fit_simulator_constants
from servesize.calibration.holdout import (
    HeldOutRow,
    by_model,
    by_row,
    coverage_check,
    interval_data,
    leave_one_engine_out,
    leave_one_model_out,
    outside_models,
    read_residuals,
    summarize,
    write_residuals,
)
from servesize.calibration.simulated import (
    benchmark_client,
    client_concurrency,
    lockstep_cases,
    replayable,
    simulate_cases,
)
from servesize.catalog import ModelCatalog
from servesize.core.architecture import Architecture
from servesize.core.simulation import CapacityPolicy, SchedulerConfig
from servesize.core.steptime import ENGINE_PROFILES, EngineProfile, StepTimeModel
from servesize.core.steptime.communication import DEFAULT_COLLECTIVE_CONSTANTS
from servesize.core.steptime.engines import SIMULATOR_ENGINE_PROFILES

CATALOGUE = Path(__file__).resolve().parent.parent / "servesize" / "data" / "models"
INTERVALS_JSON = CATALOGUE.parent / "prediction_intervals.json"
RESIDUALS_CSV = CATALOGUE.parent / "held_out_residuals.csv"
SPLITS = {
    "model": "leave one calibration model out (constants refitted without it)",
    "outside": "catalogue models outside the calibration set (shipped constants)",
    "engine": "leave one engine out (constants fitted on the other engines)",
}


def architectures(directory: Path = CATALOGUE) -> dict[str, Architecture]:
    """Every catalogue model, parsed."""
    catalog = ModelCatalog(directory)
    return {model_id: catalog.architecture(model_id) for model_id in catalog.ids()}


def report(*, models: tuple[str, ...] | None = None) -> AccuracyReport:
    """The accuracy report on the packaged H100 data (what the CI guard checks)."""
    return accuracy_report(
        load_serving_measurements(),
        architectures(),
        reference_gpu("H100 SXM"),
        load_measured_profile(),
        models=models,
    )


def _row(label: str, pair: ErrorPair) -> str:
    ttft, tpot = pair
    return (
        f"  {label:<48} {ttft.count:>5}  {ttft.mape:>7.1f} {ttft.median:>7.1f}"
        f"  {tpot.mape:>7.1f} {tpot.median:>7.1f}"
    )


def _header(title: str) -> None:
    print(f"\n{title}")
    print(f"  {'':<48} {'rows':>5}  {'TTFT %':>7} {'median':>7}  {'TPOT %':>7} {'median':>7}")


def print_report(result: AccuracyReport) -> None:
    limited = sum(pair[0].count for key, pair in result.capacity_limited.items() if key == "all")
    print(
        f"Serving: {result.predicted_rows} rows predicted ({result.predicted_rows - limited} "
        f"steady state, {limited} capacity-limited), {len(result.excluded)} excluded"
    )
    for variant, groups in result.serving.items():
        _header(f"[{variant}] per engine")
        for key, pair in groups.items():
            if key.startswith("engine") or key == "all":
                print(_row(key.removeprefix("engine "), pair))
    _header("[calibrated] per model")
    for key, pair in result.serving["calibrated"].items():
        if key.startswith("model"):
            print(_row(key.removeprefix("model "), pair))
    if result.capacity_limited:
        _header("[calibrated] rows whose KV cache cannot hold all C requests (not in the above)")
        for key, pair in result.capacity_limited.items():
            print(_row(key, pair))
    print("\nKernel tables: datasheet roofline defaults vs measured (MAPE / median %)")
    for name, summary in result.kernels.roofline.items():
        print(f"  {name:<40} {summary.count:>5}  {summary.mape:>7.1f} {summary.median:>7.1f}")
    fitted = fit_collective_constants(
        load_measured_profile().collectives, link_bandwidth_bytes_per_s=450e9
    )
    print(f"  all-reduce constants refitted on collectives.csv: {fitted}")
    print(f"  (defaults in use: {DEFAULT_COLLECTIVE_CONSTANTS})")
    print("GEMM ratio transfer, leave one shape out (MAPE / median %)")
    for name, summary in result.kernels.transfer.items():
        print(f"  {name:<40} {summary.count:>5}  {summary.mape:>7.1f} {summary.median:>7.1f}")
    print("\nExcluded rows")
    for reason, count in Counter(reason for _, reason in result.excluded).most_common():
        print(f"  {count:>4}  {reason}")


def refit(max_evaluations: int) -> dict[str, EngineProfile]:
    """Refit each engine's constants on the steady-state rows of the calibration models;
    print and return them."""
    archs = {k: v for k, v in architectures().items() if k in CALIBRATION_MODELS}
    gpu = reference_gpu("H100 SXM")
    cases, _ = resolve_cases(load_serving_measurements(), archs, gpu)
    compiled = compile_models(cases, archs, gpu, measured=load_measured_profile())
    cases = steady_state_cases(cases, compiled)
    fitted = dict(ENGINE_PROFILES)
    for engine in sorted({c.row.engine for c in cases}):
        profile, objective = fit_engine_constants(
            cases, compiled, engine=engine, max_evaluations=max_evaluations
        )
        fitted[engine] = profile
        print(f"{engine}: objective {objective:.4f}  {profile}")
    return fitted


def holdout(max_evaluations: int) -> None:
    """Leave one model out: fit each engine's constants on its other calibration models and
    print the errors on the model left out (out-of-sample, unlike the in-sample report)."""
    archs = {k: v for k, v in architectures().items() if k in CALIBRATION_MODELS}
    gpu = reference_gpu("H100 SXM")
    cases, _ = resolve_cases(load_serving_measurements(), archs, gpu)
    compiled = compile_models(cases, archs, gpu, measured=load_measured_profile())
    cases = steady_state_cases(cases, compiled)
    print(f"\n{'engine':<8} {'held-out model':<36} {'rows':>5}  {'TTFT %':>7}  {'TPOT %':>7}")
    for engine in sorted({c.row.engine for c in cases}):
        own = [c for c in cases if c.row.engine == engine]
        for model in sorted({c.row.model for c in own}):
            train = [c for c in own if c.row.model != model]
            test = [c for c in own if c.row.model == model]
            if not train:
                continue
            profile, _ = fit_engine_constants(
                train, compiled, engine=engine, max_evaluations=max_evaluations
            )
            pred = evaluate_serving(test, compiled, {engine: profile})
            ttft = np.array([c.row.ttft_s for c in test])
            tpot = np.array([c.row.tpot_s for c in test])
            ttft_mape = 100 * float(np.mean(np.abs(pred.ttft_s - ttft) / ttft))
            tpot_mape = 100 * float(np.mean(np.abs(pred.tpot_s - tpot) / tpot))
            print(f"{engine:<8} {model:<36} {len(test):>5}  {ttft_mape:>7.1f}  {tpot_mape:>7.1f}")


def _simulation_inputs(
    *, held_out: bool = False
) -> tuple[list[ServingCase], dict[Group, tuple[StepTimeModel, float]]]:
    """Steady-state rows of the calibration models, or (``held_out``) of every other catalogue
    model the data measures, with their compiled step-time models."""
    archs = {k: v for k, v in architectures().items() if (k in CALIBRATION_MODELS) != held_out}
    gpu = reference_gpu("H100 SXM")
    cases, _ = resolve_cases(load_serving_measurements(), archs, gpu)
    compiled = compile_models(cases, archs, gpu, measured=load_measured_profile())
    return steady_state_cases(cases, compiled), compiled


def _ape(pred: np.ndarray, true: np.ndarray) -> np.ndarray:
    out: np.ndarray = 100 * np.abs(pred - true) / true
    return out


Errors = dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]]
"""Per engine: TTFT and TPOT absolute percentage errors of replayable rows, by row set, through
the simulator and then of the steady-state estimate."""


def _row_errors(
    mask: np.ndarray,
    simulator: tuple[np.ndarray, np.ndarray],
    steady: tuple[np.ndarray, np.ndarray],
    ttft: np.ndarray,
    tpot: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One row set's entry of :data:`Errors`: TTFT and TPOT errors of the ``mask`` rows through
    the simulator, then of the steady-state estimate."""
    return (
        _ape(simulator[0][mask], ttft[mask]),
        _ape(simulator[1][mask], tpot[mask]),
        _ape(steady[0][mask], ttft[mask]),
        _ape(steady[1][mask], tpot[mask]),
    )


def simulated(worst: int = 8) -> Errors:
    """TTFT and TPOT of every steady-state calibration row predicted through the simulator
    replaying each row's benchmark (:mod:`servesize.calibration.simulated`), next to the
    steady-state estimate on the same rows: without calibration (plain roofline), with the
    mean-field constants, and with the simulator's own constants (``SIMULATOR_ENGINE_PROFILES``)."""
    archs = {k: v for k, v in architectures().items() if k in CALIBRATION_MODELS}
    gpu = reference_gpu("H100 SXM")
    cases, compiled = _simulation_inputs()
    roofline = compile_models(cases, archs, gpu, measured=load_measured_profile(), calibrated=False)
    ttft = np.array([c.row.ttft_s for c in cases])
    tpot = np.array([c.row.tpot_s for c in cases])
    steady = evaluate_serving(cases, compiled, SIMULATOR_ENGINE_PROFILES)
    tiers: dict[str, tuple[np.ndarray, np.ndarray]] = {
        "steady state": (steady.ttft_s, steady.tpot_s),
        "steady, mean-field constants": lockstep_cases(cases, compiled),
        "sim, roofline": simulate_cases(cases, roofline),
        "sim, mean-field constants": simulate_cases(cases, compiled),
        "sim, simulator constants": simulate_cases(cases, compiled, SIMULATOR_ENGINE_PROFILES),
    }
    engines = sorted({c.row.engine for c in cases})
    kept = np.array([replayable(c) for c in cases])
    for title, rows in (
        ("every steady-state row", np.ones(len(cases), dtype=bool)),
        ("rows that record their client count (simulated.replayable)", kept),
    ):
        print(f"\nMAPE % (TTFT / TPOT), {title}, of {', '.join(CALIBRATION_MODELS)}")
        print(
            f"  {'tier':<28}"
            + "".join(
                f"{e + f' ({sum(rows & np.array([c.row.engine == e for c in cases]))})':>20}"
                for e in engines
            )
        )
        for name, (pred_ttft, pred_tpot) in tiers.items():
            cells = []
            for engine in engines:
                mask = rows & np.array([c.row.engine == engine for c in cases])
                t = float(_ape(pred_ttft[mask], ttft[mask]).mean())
                p = float(_ape(pred_tpot[mask], tpot[mask]).mean())
                cells.append(f"{t:>11.1f} / {p:<6.1f}")
            print(f"  {name:<28}" + "".join(f"{cell:>20}" for cell in cells))
    sim_ttft, sim_tpot = tiers["sim, simulator constants"]
    errors: Errors = {}
    for engine in engines:
        mask = kept & np.array([c.row.engine == engine for c in cases])
        errors.setdefault(engine, []).append(
            _row_errors(mask, (sim_ttft, sim_tpot), (steady.ttft_s, steady.tpot_s), ttft, tpot)
        )
    error = _ape(sim_ttft, ttft) + _ape(sim_tpot, tpot)
    print("\nWorst rows through the simulator (simulator constants), measured vs predicted (ms)")
    for i in np.argsort(-error)[:worst]:
        c = cases[i]
        r = c.row
        print(
            f"  {r.engine:<7} {c.model_id:<28} TP{c.tensor_parallel_size}"
            f" EP{c.expert_parallel_size} {r.input_tokens}/{r.output_tokens} C{r.concurrency}:"
            f" TTFT {1e3 * r.ttft_s:.0f}"
            f" vs {1e3 * sim_ttft[i]:.0f}, TPOT {1e3 * r.tpot_s:.1f} vs {1e3 * sim_tpot[i]:.1f}"
        )
    return errors


def simulated_out_of_sample() -> Errors:
    """Rows of catalogue models outside the calibration set, replayed through the simulator
    with the constants fitted on the calibration models: an out-of-sample check, per engine
    and model, next to the steady-state estimate on the same rows."""
    cases, compiled = _simulation_inputs(held_out=True)
    cases = [c for c in cases if replayable(c)]
    errors: Errors = {}
    if not cases:
        return errors
    steady = evaluate_serving(cases, compiled, SIMULATOR_ENGINE_PROFILES)
    sim_ttft, sim_tpot = simulate_cases(cases, compiled, SIMULATOR_ENGINE_PROFILES)
    ttft = np.array([c.row.ttft_s for c in cases])
    tpot = np.array([c.row.tpot_s for c in cases])
    print("\nOut of sample: models outside the calibration set (constants not fitted on them)")
    print(
        f"  {'engine':<8} {'model':<28} {'rows':>5}  {'steady TTFT / TPOT %':>22}"
        f"  {'simulator TTFT / TPOT %':>24}"
    )
    for engine, model in sorted({(c.row.engine, c.model_id) for c in cases}):
        mask = np.array([(c.row.engine, c.model_id) == (engine, model) for c in cases])
        cells = []
        for pred_ttft, pred_tpot in ((steady.ttft_s, steady.tpot_s), (sim_ttft, sim_tpot)):
            t = float(_ape(pred_ttft[mask], ttft[mask]).mean())
            p = float(_ape(pred_tpot[mask], tpot[mask]).mean())
            cells.append(f"{t:>8.1f} / {p:<6.1f}")
        print(f"  {engine:<8} {model:<28} {int(mask.sum()):>5}  {cells[0]:>22}  {cells[1]:>24}")
        errors.setdefault(engine, []).append(
            _row_errors(mask, (sim_ttft, sim_tpot), (steady.ttft_s, steady.tpot_s), ttft, tpot)
        )
    _vllm_default_budget(cases, compiled)
    return errors


def _vllm_default_budget(
    cases: list[ServingCase], compiled: dict[Group, tuple[StepTimeModel, float]]
) -> None:
    """The aiconfigurator-sweep vLLM rows replayed with vLLM's default 8192-token budget (its
    0.12.0 launch template does not pass the rule's ``C + ISL + 1500``)."""
    rows = [
        c for c in cases if c.row.engine == "vllm" and benchmark_client(c).generated_token_budget
    ]
    if not rows:
        return
    default = ENGINE_PROFILES["vllm"].max_num_batched_tokens

    def default_budget(case: ServingCase, config: SchedulerConfig) -> SchedulerConfig:
        ranks = config.max_num_seqs // max(case.row.concurrency or 1, 1)
        return replace(config, max_num_batched_tokens=default * max(ranks, 1))

    sim_ttft, sim_tpot = simulate_cases(
        rows, compiled, SIMULATOR_ENGINE_PROFILES, configure=default_budget
    )
    ttft = np.array([c.row.ttft_s for c in rows])
    tpot = np.array([c.row.tpot_s for c in rows])
    print(
        f"  vllm rows above with vLLM's default {default}-token budget instead of the rule's:"
        f" TTFT {float(_ape(sim_ttft, ttft).mean()):.1f} % / TPOT"
        f" {float(_ape(sim_tpot, tpot).mean()):.1f} % ({len(rows)} rows)"
    )


def _kv_pressure_cases() -> tuple[list[ServingCase], dict[Group, tuple[StepTimeModel, float]]]:
    """Replayable rows of every catalogue model whose ``clients · (ISL + OSL)`` exceeds the KV
    cache: the rows where admission and eviction decide TTFT (most are outside the steady-state
    rows the tables above use)."""
    archs = architectures()
    gpu = reference_gpu("H100 SXM")
    cases, _ = resolve_cases(load_serving_measurements(), archs, gpu)
    compiled = compile_models(cases, archs, gpu, measured=load_measured_profile())
    rows = []
    for case in cases:
        clients = client_concurrency(case)
        if clients is None:
            continue
        row = case.row
        if clients * (row.input_tokens + row.output_tokens) > compiled[case.group][1]:
            rows.append(case)
    return rows, compiled


def simulated_kv_pressure() -> None:
    """Closed-loop rows under KV pressure through the simulator: each engine's own capacity
    policy (``SchedulerConfig.capacity_policy``), vLLM-style incremental admission everywhere
    (what the simulator did before), and for TensorRT-LLM ``max_utilization`` and a KV cache of
    twice the estimate (FP8 instead of bf16 KV). Per row, predicted / measured TTFT."""
    cases, compiled = _kv_pressure_cases()
    if not cases:
        return
    ttft = np.array([c.row.ttft_s for c in cases])
    tpot = np.array([c.row.tpot_s for c in cases])

    def variant(
        capacity: CapacityPolicy | None, kv_scale: int = 1
    ) -> tuple[np.ndarray, np.ndarray]:
        def configure(case: ServingCase, config: SchedulerConfig) -> SchedulerConfig:
            if capacity is not None and (
                capacity != "max_utilization" or case.row.engine == "trtllm"
            ):
                config = replace(config, capacity_policy=capacity)
            if kv_scale != 1 and case.row.engine == "trtllm":
                config = replace(config, num_kv_blocks=config.num_kv_blocks * kv_scale)
            return config

        return simulate_cases(cases, compiled, SIMULATOR_ENGINE_PROFILES, configure=configure)

    variants = {
        "engine's capacity policy": variant(None),
        "incremental (vLLM) everywhere": variant("incremental"),
        "trtllm max_utilization": variant("max_utilization"),
        "engine's, trtllm KV x2 (FP8)": variant(None, kv_scale=2),
    }
    engines = sorted({c.row.engine for c in cases})
    print(
        "\nRows under KV pressure (clients x (ISL + OSL) > KV cache), every catalogue model:"
        " TTFT / TPOT MAPE %, worst TTFT ratio, rows above 5x"
    )
    print(f"  {'variant':<32}" + "".join(f"{e:>34}" for e in engines))
    for name, (pred_ttft, pred_tpot) in variants.items():
        cells = []
        for engine in engines:
            mask = np.array([c.row.engine == engine for c in cases])
            ratio = pred_ttft[mask] / ttft[mask]
            t = float(_ape(pred_ttft[mask], ttft[mask]).mean())
            p = float(_ape(pred_tpot[mask], tpot[mask]).mean())
            cells.append(
                f"({int(mask.sum())}) {t:6.1f} / {p:4.1f} {ratio.max():5.2f}x"
                f" {int((ratio > 5).sum()):>2}"
            )
        print(f"  {name:<32}" + "".join(f"{cell:>34}" for cell in cells))
    own, before = (
        variants["engine's capacity policy"][0],
        variants["incremental (vLLM) everywhere"][0],
    )
    print("  per row: measured TTFT ms, predicted / measured (engine's policy, incremental)")
    for i, c in enumerate(cases):
        r = c.row
        print(
            f"    {r.engine:<7} {c.model_id:<26} TP{c.tensor_parallel_size}"
            f" {r.input_tokens}/{r.output_tokens} C{r.concurrency}: {1e3 * r.ttft_s:8.0f}"
            f"  {own[i] / ttft[i]:5.2f}x  {before[i] / ttft[i]:5.2f}x"
        )


def print_pooled(*parts: Errors) -> None:
    """MAPE per engine over every replayable row of the catalogue's models (calibration rows
    and out-of-sample rows together), through the simulator and of the steady-state estimate:
    the floor of docs/modeling.md §5.3 is TTFT <= 25 % and TPOT <= 15 % through the simulator."""
    print("\nEvery replayable row of the catalogue's models (calibration and out of sample)")
    print(
        f"  {'engine':<8} {'rows':>5}  {'simulator TTFT / TPOT %':>24}"
        f"  {'steady TTFT / TPOT %':>22}"
    )
    engines = sorted({engine for part in parts for engine in part})
    for engine in engines:
        columns = [
            np.concatenate([errors[k] for part in parts for errors in part.get(engine, [])])
            for k in range(4)
        ]
        sim_ttft, sim_tpot, steady_ttft, steady_tpot = (float(c.mean()) for c in columns)
        print(
            f"  {engine:<8} {columns[0].size:>5}  {sim_ttft:>13.1f} / {sim_tpot:<8.1f}"
            f"  {steady_ttft:>11.1f} / {steady_tpot:<8.1f}"
        )


def simulated_holdout(max_evaluations: int, stride: int) -> None:
    """Leave one model out: refit the simulator constants of each engine that has its own
    (``SIMULATOR_ENGINE_PROFILES`` differs from ``ENGINE_PROFILES``) on every ``stride``-th row
    of its other models and print the simulator's errors on the model left out."""
    cases, compiled = _simulation_inputs()
    cases = [c for c in cases if replayable(c)]
    refitted = {e for e, p in SIMULATOR_ENGINE_PROFILES.items() if p != ENGINE_PROFILES[e]}
    print(f"\n{'engine':<8} {'held-out model':<36} {'rows':>5}  {'TTFT %':>7}  {'TPOT %':>7}")
    for engine in sorted({c.row.engine for c in cases} & refitted):
        own = [c for c in cases if c.row.engine == engine]
        for model in sorted({c.row.model for c in own}):
            train = [c for c in own if c.row.model != model][::stride]
            test = [c for c in own if c.row.model == model]
            if not train:
                continue
            profile, _ = fit_simulator_constants(
                train, compiled, engine=engine, max_evaluations=max_evaluations
            )
            pred_ttft, pred_tpot = simulate_cases(test, compiled, {engine: profile})
            ttft_mape = float(_ape(pred_ttft, np.array([c.row.ttft_s for c in test])).mean())
            tpot_mape = float(_ape(pred_tpot, np.array([c.row.tpot_s for c in test])).mean())
            print(f"{engine:<8} {model:<36} {len(test):>5}  {ttft_mape:>7.1f}  {tpot_mape:>7.1f}")


def _print_summaries(rows: list[HeldOutRow]) -> None:
    """Per split: errors by engine, model family, GPU and engine × model."""
    keys: dict[str, Callable[[HeldOutRow], str]] = {
        "engine": lambda r: r.engine,
        "family": lambda r: r.family,
        "gpu": lambda r: r.gpu,
        "engine x model": lambda r: f"{r.engine} {r.model_id}",
    }
    head = f"  {'':<48} {'rows':>5}  {'TTFT MAPE  med  p90':>20}  {'TPOT MAPE  med  p90':>20}"
    for split, title in SPLITS.items():
        own = [r for r in rows if r.split == split]
        if not own:
            continue
        print(f"\n[{split}] {title}: absolute % error")
        print(head)
        for name, key in keys.items():
            for group, sm in summarize(own, key).items():
                t, p = sm.ttft, sm.tpot
                label = f"{name} {group}"
                print(
                    f"  {label:<48} {sm.rows:>5}  {t[0]:>9.1f} {t[1]:>4.0f} {t[2]:>4.0f}"
                    f"  {p[0]:>9.1f} {p[1]:>4.0f} {p[2]:>4.0f}"
                )


def _print_coverage(rows: list[HeldOutRow]) -> None:
    """Fraction of held-out measurements inside intervals built without them: leaving a whole
    model out (a new model), and leaving one tenth of the rows out (a new workload of known
    models)."""
    for unit, title in ((by_model, "a model"), (by_row, "a tenth of the rows")):
        print(f"\nCoverage, leaving {title} out of the intervals: inside / rows, TTFT TPOT E2E")
        by_engine = coverage_check(rows, key=lambda r: r.engine, unit=unit)
        every = coverage_check(rows, key=lambda r: "all", unit=unit)
        for group, cov in [*by_engine.items(), *every.items()]:
            cells = "  ".join(
                f"{c:.0%}: " + " ".join(f"{cov.inside[m][c] / cov.rows:>4.0%}" for m in cov.inside)
                for c in next(iter(cov.inside.values()))
            )
            print(f"  {group:<8} {cov.rows:>5}  {cells}")


def steady_holdout(
    evaluations: int, *, engines: bool, write: bool, outside_only: bool = False
) -> None:
    """The steady-state tier out of sample (module docstring); ``write``: the held-out rows to
    :data:`RESIDUALS_CSV` and the intervals to :data:`INTERVALS_JSON`. ``outside_only``: only
    the rows of the catalogue models outside the calibration set under the shipped constants,
    no refit (seconds; the refits take hours with the lock-step Tier A)."""
    archs = architectures()
    if outside_only:
        rows = outside_models(archs)
        if write:
            write_residuals(rows, RESIDUALS_CSV)
            print(f"wrote {RESIDUALS_CSV}")
        report_intervals(rows, write=write, command="--outside-only")
        return
    rows = leave_one_model_out(archs, max_evaluations=evaluations, log=print)
    rows += outside_models(archs)
    if engines:
        rows += leave_one_engine_out(archs, max_evaluations=evaluations, log=print)
    if write:
        write_residuals(rows, RESIDUALS_CSV)
        print(f"wrote {RESIDUALS_CSV}")
    report_intervals(rows, write=write, command=f"--holdout-evaluations {evaluations}")


def report_intervals(rows: list[HeldOutRow], *, write: bool, command: str) -> None:
    """Print the errors and coverage of ``rows``; ``write``: the intervals too."""
    _print_summaries(rows)
    _print_coverage(rows)
    if not write:
        return
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    now = (
        datetime.datetime.fromtimestamp(int(epoch), datetime.UTC)
        if epoch
        else datetime.datetime.now(datetime.UTC)
    )
    data = interval_data(
        rows,
        architectures(),
        generated={
            "command": f"python -m bench.accuracy --write-intervals {command}",
            "date": now.date().isoformat(),
        },
        residuals=RESIDUALS_CSV,
    )
    INTERVALS_JSON.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"\nwrote {INTERVALS_JSON}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fit", action="store_true", help="refit the engine constants first")
    parser.add_argument("--evaluations", type=int, default=500)
    parser.add_argument(
        "--holdout", action="store_true", help="leave-one-model-out errors of the fit (minutes)"
    )
    parser.add_argument(
        "--simulate", action="store_true", help="predict the rows through the simulator (minutes)"
    )
    parser.add_argument(
        "--offline",
        action="store_true",
        help="offline max throughput against TensorRT-LLM's published H100 rows (validation)",
    )
    parser.add_argument(
        "--sim-evaluations",
        type=int,
        default=60,
        help="with --simulate --holdout: simulator evaluations per fit",
    )
    parser.add_argument(
        "--stride",
        type=int,
        default=4,
        help="with --simulate --holdout: fit on every n-th training row",
    )
    parser.add_argument(
        "--holdout-steady",
        action="store_true",
        help="steady-state errors out of sample: models, engines left out (minutes)",
    )
    parser.add_argument(
        "--write-intervals",
        action="store_true",
        help=f"write {INTERVALS_JSON.name} from held-out residuals (minutes)",
    )
    parser.add_argument(
        "--holdout-evaluations",
        type=int,
        default=300,
        help="with --holdout-steady / --write-intervals: evaluations per refit",
    )
    parser.add_argument(
        "--outside-only",
        action="store_true",
        help="with --write-intervals: residuals of the models outside the calibration set only, "
        "shipped constants, no refit (seconds)",
    )
    parser.add_argument(
        "--check-intervals",
        action="store_true",
        help="the shipped intervals on out-of-sample rows of the current model (bench.intervals)",
    )
    parser.add_argument(
        "--from-residuals",
        action="store_true",
        help=f"with --write-intervals: reuse {RESIDUALS_CSV.name} instead of refitting (seconds)",
    )
    parser.add_argument(
        "--offload",
        action="store_true",
        help="KV offload against the vLLM offloading-connector blog (bench.offload)",
    )
    parser.add_argument(
        "--energy",
        action="store_true",
        help="energy per output token against published measurements (bench.energy, seconds)",
    )
    args = parser.parse_args()
    if args.offload:
        from bench.offload import print_offload

        print_offload()
    elif args.energy:
        from bench.energy import print_energy

        print_energy()
    elif args.offline:
        from bench.offline import print_offline

        print_offline()
    elif args.check_intervals:
        from bench.intervals import print_check

        print_check()
    elif args.from_residuals:
        report_intervals(
            read_residuals(RESIDUALS_CSV), write=args.write_intervals, command="--from-residuals"
        )
    elif args.holdout_steady or args.write_intervals:
        steady_holdout(
            args.holdout_evaluations,
            engines=args.holdout_steady,
            write=args.write_intervals,
            outside_only=args.outside_only,
        )
    elif args.simulate and args.holdout:
        simulated_holdout(args.sim_evaluations, args.stride)
    elif args.simulate:
        print_pooled(simulated(), simulated_out_of_sample())
        simulated_kv_pressure()
    elif args.holdout:
        holdout(args.evaluations)
    elif args.fit:
        profiles = refit(args.evaluations)
        print_report(
            accuracy_report(
                load_serving_measurements(),
                architectures(),
                reference_gpu("H100 SXM"),
                load_measured_profile(),
                profiles=profiles,
            )
        )
    else:
        print_report(report())


if __name__ == "__main__":
    main()
