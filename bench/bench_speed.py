"""Speed of the planning paths, every figure as a ratio against a reference timed in the same run.

``python -m bench`` (or ``python -m bench.bench_speed``) prints four tables; nothing here fails on
a timing (the machines are shared and noisy). Times are the minimum process CPU time over
repeats unless stated, so other work on the machine inflates them less.

1. **Steady-state estimate** (the call behind ``/v1/performance``): Llama-3.1-8B, ISL 1024 /
   OSL 128, 32 clients, on H100 and H200 with the shipped tables (scaled to the H200), as
   ``servesize.api.performance_views.performance_estimate`` calls ``closed_loop``. Reported:
   compilation (``compile_replica``), a compilation kept by ``ReplicaCache`` (what a repeated
   request pays), the first estimate on a fresh replica (it builds the step-time tables of
   :mod:`servesize.core.steptime.fast`), a new workload point on a warm replica (kept points
   cleared: the computation itself), the same point asked again (kept by
   :mod:`servesize.core.steptime.memo`), and the reference: the vectorised array path of
   ``closed_loop`` (the implementation the one-point path replaced, per point of a two-point
   call), with one vectorised ``StepTimeModel.step_time`` call of one step beside it.
2. **Simulator**: 20,000 open-loop Poisson requests (1024 + 128 tokens) at 30, 70 and 90 % of
   Tier A's saturation rate, through the fast step-time adapter as ``/v1/simulate`` runs it,
   against the same simulation with a closed-form linear step time (the simulator alone); also
   requests per second as a multiple of the 20,000 target, CPU microseconds per recorded engine
   step and the share of steps repeating the previous pure-decode batch (what decode runs skip).
3. **README examples** in-process through the application (``TestClient``, a fresh SQLite
   database): the ``/v1/sizing`` and ``/v1/slo/capacity`` requests of the README, process CPU
   time of one cold call each, as a multiple of the 2 s target and of the reference kernel below.
4. **Growth**: the sizing with 1, 2 and 3 GPU types (candidates screened) and the capacity
   search with 500, 1000 and 2000 requests per probe (requests simulated), time per unit.

The reference kernel (``_kernel_s``) is a fixed pure-numpy computation; the figures divided by
it compare runs on different machines or under different load.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from bench.simulate import INPUT_TOKENS, OUTPUT_TOKENS, _replica, _workload
from servesize.calibration import tables_for_gpu
from servesize.catalog import ModelCatalog
from servesize.core.hardware import datasheet_spec
from servesize.core.memory import Deployment
from servesize.core.replica import Replica, ReplicaCache, compile_replica
from servesize.core.simulation import LinearStepTime, simulate
from servesize.core.simulation.adapters import steptime_adapter
from servesize.core.steptime import StepWork, closed_loop, open_loop
from servesize.core.steptime import fast as fast_module
from servesize.core.steptime.memo import clear_estimates
from servesize.db.seed import datasheet_entries
from servesize.settings import get_settings

MODEL = "meta-llama/Llama-3.1-8B"
ESTIMATE = {"concurrency": 32, "input_tokens": 1024, "output_tokens": 128}
SIM_REQUESTS = 20_000
SIM_TARGET_PER_S = 20_000
README_TARGET_S = 2.0
LOADS = (0.3, 0.7, 0.9)
SLO = {"ttft_s": {"p95": 1.0}, "tpot_s": {"p95": 0.05}}
SIZING_HARDWARE = ("h100-sxm", "a100-sxm-80gb", "l40s")
SIZING_PRICES = {"h100-sxm": 2.5, "a100-sxm-80gb": 1.6, "l40s": 0.9}


def _min_cpu_s(run: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.process_time()
        run()
        best = min(best, time.process_time() - started)
    return best


def _kernel_s() -> float:
    """A fixed pure-numpy workload (exp, log, cumulative sum and sort of 2^20 floats)."""
    x = np.random.default_rng(0).uniform(1.0, 2.0, 1 << 20)
    return _min_cpu_s(lambda: np.sort(np.cumsum(np.log(np.exp(x) + x))), 5)


def _estimate(replica: Replica, concurrency: ArrayLike) -> object:
    return closed_loop(
        replica.step_model,
        concurrency=concurrency,
        input_tokens=ESTIMATE["input_tokens"],
        output_tokens=ESTIMATE["output_tokens"],
        kv_capacity_tokens=replica.kv_capacity_tokens,
        policy=replica.scheduler.policy,
    )


def _estimate_times(arch: Any, hardware: Any, tables: Any) -> dict[str, float]:
    """CPU seconds of: compilation, a compiled replica kept by its inputs, the first estimate of
    a fresh replica, the estimate computed on a warm replica (kept estimates cleared), the
    estimate kept by its inputs, the array path per point and one vectorised ``step_time``."""
    compile_s = _min_cpu_s(lambda: compile_replica(arch, hardware, Deployment(), tables), 5)
    replicas = ReplicaCache()
    replicas.compile(arch, hardware, Deployment(), tables)
    kept_replica_s = _min_cpu_s(lambda: replicas.compile(arch, hardware, Deployment(), tables), 50)

    def first() -> None:
        fast_module._cache.clear()
        clear_estimates()
        _estimate(compile_replica(arch, hardware, Deployment(), tables), ESTIMATE["concurrency"])

    first_s = _min_cpu_s(first, 3) - compile_s
    replica = compile_replica(arch, hardware, Deployment(), tables)

    def computed() -> None:
        clear_estimates()
        _estimate(replica, ESTIMATE["concurrency"])

    computed_s = _min_cpu_s(computed, 20)
    kept_s = _min_cpu_s(lambda: _estimate(replica, ESTIMATE["concurrency"]), 200)
    pair = np.full(2, float(ESTIMATE["concurrency"]))
    array_s = _min_cpu_s(lambda: _estimate(replica, pair), 5) / 2
    one = StepWork.decode([32.0], [1088.0])
    step_s = _min_cpu_s(lambda: replica.step_model.step_time(one), 50)
    return {
        "compile": compile_s,
        "kept_replica": kept_replica_s,
        "first": first_s,
        "computed": computed_s,
        "kept": kept_s,
        "array": array_s,
        "step": step_s,
    }


def estimates(kernel_s: float) -> dict[str, dict[str, float]]:
    arch = ModelCatalog(get_settings().models_dir).architecture(MODEL)
    specs = {s.id: s for s in (datasheet_spec(e) for e in datasheet_entries())}
    print(
        "\nsteady-state estimate, Llama-3.1-8B ISL 1024 / OSL 128, C = 32 (min CPU ms; "
        "ratios in the same run)"
    )
    print(
        f"{'GPU':<9} {'compile':>8} {'kept rep':>9} {'first':>7} {'computed':>9} {'kept':>7} "
        f"{'array path':>11} {'array/comp':>11} {'array/kept':>11} {'1 step_time':>12} "
        f"{'kept / kernel':>14}"
    )
    figures: dict[str, dict[str, float]] = {}
    for gpu in ("h100-sxm", "h200-sxm"):
        hardware = specs[gpu]
        t = _estimate_times(arch, hardware, tables_for_gpu(hardware))
        figures[gpu] = t
        print(
            f"{gpu:<9} {t['compile'] * 1e3:8.2f} {t['kept_replica'] * 1e3:9.4f} "
            f"{t['first'] * 1e3:7.2f} {t['computed'] * 1e3:9.3f} {t['kept'] * 1e3:7.4f} "
            f"{t['array'] * 1e3:11.2f} {t['array'] / t['computed']:10.1f}x "
            f"{t['array'] / t['kept']:10.0f}x {t['step'] * 1e3:12.3f} "
            f"{t['kept'] / kernel_s:14.5f}"
        )
    print(
        "compile: compile_replica; kept rep: ReplicaCache.compile of inputs compiled before; "
        "first: the first estimate of a fresh replica (builds the fast step-time tables); "
        "computed: a new workload point on a warm replica (fixed point, lock-step loop, "
        "reported steps); kept: the same point asked again (servesize.core.steptime.memo); "
        "array path: closed_loop's vectorised path per point of a two-point call (target: "
        "<= 1 ms warm, <= 50 ms compile)"
    )
    return figures


def _run_steps(prefill_tokens: np.ndarray, running: np.ndarray) -> int:
    """Pure-decode steps whose recorded running count equals the previous step's (what a decode
    run records for every step after its first)."""
    if prefill_tokens.size < 2:
        return 0
    same = (prefill_tokens[1:] == 0) & (prefill_tokens[:-1] == 0) & (running[1:] == running[:-1])
    return int(np.count_nonzero(same))


def simulator(kernel_s: float) -> None:
    scheduler, model, kv_tokens = _replica()
    saturation = open_loop(
        model,
        arrival_rate_per_s=1.0,
        input_tokens=INPUT_TOKENS,
        output_tokens=OUTPUT_TOKENS,
        kv_capacity_tokens=kv_tokens,
    ).saturation_rate_per_s
    fast = steptime_adapter(model)
    linear = LinearStepTime(base_s=0.004, per_token_s=2.5e-5, per_context_token_s=1e-9)
    print(
        f"\nsimulator, {SIM_REQUESTS:,} open-loop requests, Llama-3.1-8B on H100 (Tier A "
        f"saturation {saturation:.2f}/s; CPU s, one run each)"
    )
    print(
        f"{'load':>5} {'rate/s':>7} {'steps':>8} {'skipped':>8} {'CPU s':>7} {'requests/s':>11} "
        f"{'/ target':>9} {'us / step':>10} {'linear req/s':>13} {'real / linear':>14} "
        f"{'CPU s / kernel':>15}"
    )
    for load in LOADS:
        workload = _workload(SIM_REQUESTS, load * saturation, seed=1)
        started = time.process_time()
        result = simulate(workload, scheduler, fast)
        real_s = time.process_time() - started
        steps = result.step_start_s.size
        # Steps inside decode runs share one start-time cumsum: they are recorded, not decided.
        skipped = _run_steps(result.step_prefill_tokens, result.step_num_running)
        started = time.process_time()
        simulate(workload, scheduler, linear)
        linear_s = time.process_time() - started
        print(
            f"{load:5.2f} {load * saturation:7.2f} {steps:8d} {skipped / steps:8.1%} "
            f"{real_s:7.2f} {SIM_REQUESTS / real_s:11.0f} "
            f"{SIM_REQUESTS / real_s / SIM_TARGET_PER_S:9.2f} {real_s / steps * 1e6:10.1f} "
            f"{SIM_REQUESTS / linear_s:13.0f} {linear_s / real_s:14.2f} {real_s / kernel_s:15.1f}"
        )
    print(
        f"target: >= {SIM_TARGET_PER_S:,} requests/s with the real step-time model at every "
        "load (/ target); skipped: share of engine steps committed inside decode runs (an "
        "estimate: pure-decode steps whose running count matches the previous step's)"
    )


def _client() -> Any:
    from fastapi.testclient import TestClient

    from servesize.api.app import create_app
    from servesize.db import migrate
    from servesize.settings import Settings

    logging.getLogger("servesize.access").setLevel(logging.WARNING)
    url = f"sqlite:///{tempfile.mkdtemp()}/bench.db"
    migrate.upgrade(url)
    client = TestClient(create_app(Settings(database_url=url, rate_limit_per_minute=0)))
    client.__enter__()
    return client


def _timed_post(client: Any, path: str, body: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    """Process CPU seconds of one request (every thread: the handler runs in a worker)."""
    started = time.process_time()
    response = client.post(path, json=body)
    cpu_s = time.process_time() - started
    if response.status_code != 200:
        raise RuntimeError(f"{path}: {response.status_code} {response.text[:300]}")
    return cpu_s, response.json()


def _sizing_body(hardware: tuple[str, ...]) -> dict[str, Any]:
    return {
        "model": MODEL,
        "traffic": {"rate_per_s": 50, "input_tokens": 1024, "output_tokens": 256},
        "slo": SLO,
        "candidates": {"hardware": list(hardware), "disaggregation": True},
        "prices": {h: SIZING_PRICES[h] for h in hardware},
    }


def _capacity_body(requests: int) -> dict[str, Any]:
    return {
        "model": MODEL,
        "hardware": "h100-sxm",
        "traffic": {"input_tokens": 1024, "output_tokens": 256, "num_requests": requests},
        "slo": SLO,
    }


def readme_examples(kernel_s: float) -> dict[str, float]:
    client = _client()
    print("\nREADME examples in-process (CPU s of one cold call, all threads; target <= 2 s each)")
    print(f"{'request':<56} {'CPU s':>7} {'/ target':>9} {'/ kernel':>9}  result")
    rows: list[tuple[str, str, float, str, float]] = []
    for n_hw in (1, 2, 3):
        hardware = SIZING_HARDWARE[:n_hw]
        cpu_s, out = _timed_post(client, "/v1/sizing", _sizing_body(hardware))
        best = out["plans"][0]
        count = float(out["candidates_evaluated"])
        rows.append(
            (
                "sizing",
                f"{n_hw} GPU type(s), {int(count)} candidates, {out['simulations']} sims",
                cpu_s,
                f"{best['hardware']} x{best['replicas']}",
                count,
            )
        )
    for requests in (500, 1000, 2000):
        cpu_s, out = _timed_post(client, "/v1/slo/capacity", _capacity_body(requests))
        simulated = float(out["simulated_requests"])
        rows.append(
            (
                "capacity",
                f"{requests} requests per probe, {int(simulated)} simulated",
                cpu_s,
                f"{out['max_rate_per_s']:.3f}/s",
                simulated,
            )
        )
    readme = {("sizing", 3), ("capacity", 1000)}
    figures: dict[str, float] = {}
    for kind, label, cpu_s, result, _ in rows:
        key = (kind, 3 if "3 GPU" in label else 1000 if label.startswith("1000 ") else 0)
        mark = "README " if key in readme else ""
        if key in readme:
            figures[kind] = cpu_s
        print(
            f"{mark + kind + ': ' + label:<56} {cpu_s:7.2f} {cpu_s / README_TARGET_S:9.2f} "
            f"{cpu_s / kernel_s:9.0f}  {result}"
        )
    print("\ngrowth: time per unit of work (linear or better when the per-unit figure is flat)")
    for kind, label, cpu_s, _, units in rows:
        unit = "candidate" if kind == "sizing" else "simulated request"
        per = cpu_s / units * 1e3 if units else float("nan")
        print(f"{kind + ': ' + label:<56} {per:9.3f} ms per {unit}")
    client.__exit__(None, None, None)
    return figures


def summary(
    kernel_s: float, estimate: dict[str, dict[str, float]], readme: dict[str, float]
) -> None:
    """The four headline figures against their targets and a reference from the same run: the
    estimate against ``closed_loop``'s array path (the implementation the one-point path
    replaced), compilation against one vectorised ``step_time`` call, the README requests
    against the fixed numpy kernel."""
    print("\nsummary (CPU; reference timed in this run)")
    print(
        f"{'figure':<34} {'value':>10} {'target':>8} {'/ target':>9} {'reference':>22} {'ratio':>8}"
    )
    rows: list[tuple[str, float, float, str, float]] = []
    for gpu, t in estimate.items():
        rows.append(
            (f"estimate ms, {gpu}", t["computed"] * 1e3, 1.0, "array path", t["array"] * 1e3)
        )
        rows.append(
            (f"compile ms, {gpu}", t["compile"] * 1e3, 50.0, "1 step_time", t["step"] * 1e3)
        )
    for kind, cpu_s in readme.items():
        rows.append((f"README {kind} s", cpu_s, README_TARGET_S, "numpy kernel", kernel_s))
    for label, value, target, name, reference in rows:
        print(
            f"{label:<34} {value:10.3f} {target:8.1f} {value / target:9.2f} "
            f"{name + f' {reference:.3f}':>22} {value / reference:8.2f}"
        )
    print("ratio: value / reference (estimate: < 1 is faster than the array path)")


def main() -> None:
    kernel_s = _kernel_s()
    print(f"bench_speed: reference kernel {kernel_s * 1e3:.1f} ms CPU (fixed numpy workload)")
    estimate = estimates(kernel_s)
    simulator(kernel_s)
    readme = readme_examples(kernel_s)
    summary(kernel_s, estimate, readme)


if __name__ == "__main__":
    main()
