"""Impossible SLOs: targets below what an idle engine achieves (docs/modeling.md §4.6).

Load only adds delay, so each request's latency on an idle engine bounds its latency under any
load from below, and a statistic of the zero-load latencies bounds the same statistic under load:

* TTFT: the request overhead plus the prompt's prefill, chunked by the step budget
  (:func:`~servesize.core.steptime.zero_load_ttft_s`; the simulator reproduces it exactly);
* TPOT and ITL: a decode step of batch 1 at the request's shortest context (``P + 1`` tokens;
  a decode step never gets faster with more context or a larger batch);
* E2E: ``TTFT + (N − 1)·TPOT``;
* attainment: the fraction of requests whose zero-load latencies meet its limits jointly;
* a client timeout below a request's zero-load E2E fails that request whatever the load.

A target below its zero-load figure is reported with that figure instead of being searched for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from servesize.core.simulation import percentile, weighted_percentile
from servesize.core.slo.spec import ServiceLevelObjective, Statistic
from servesize.core.steptime import StepTimeModel, StepWork, zero_load_ttft_s

# Relative slack for rounding: a limit equal to its zero-load figure is attainable.
_ROUNDING = 1e-9


@dataclass(frozen=True, slots=True, kw_only=True)
class ZeroLoadLatencies:
    """Per-request latencies on an idle engine (seconds; TPOT NaN for one output token)."""

    ttft_s: np.ndarray
    tpot_s: np.ndarray
    e2e_s: np.ndarray
    output_tokens: np.ndarray


def zero_load_latencies(
    model: StepTimeModel, *, prompt_tokens: np.ndarray, output_tokens: np.ndarray
) -> ZeroLoadLatencies:
    """Lower bounds on every request's client-observed latencies (module docstring)."""
    p = np.asarray(prompt_tokens, dtype=np.float64)
    n = np.asarray(output_tokens, dtype=np.float64)
    ttft = np.asarray(zero_load_ttft_s(model, p), dtype=np.float64)
    step = np.asarray(model.step_time(StepWork.decode(1.0, p + 1.0)).total_s, dtype=np.float64)
    tpot = np.where(n >= 2, step, np.nan)
    return ZeroLoadLatencies(
        ttft_s=ttft,
        tpot_s=tpot,
        e2e_s=ttft + (n - 1.0) * step,
        output_tokens=np.asarray(output_tokens),
    )


def _statistic(values: np.ndarray, statistic: Statistic) -> float:
    v = values[~np.isnan(values)]
    if v.size == 0:
        return math.nan
    if statistic == "mean":
        return float(v.mean())
    return percentile(v, float(statistic[1:]))


def _weighted_statistic(values: np.ndarray, weights: np.ndarray, statistic: Statistic) -> float:
    keep = ~np.isnan(values)
    v, w = values[keep], weights[keep].astype(np.int64)
    if int(w.sum()) == 0:
        return math.nan
    if statistic == "mean":
        return float(np.dot(v, w) / w.sum())
    return weighted_percentile(v, w, float(statistic[1:]))


@dataclass(frozen=True, slots=True, kw_only=True)
class Infeasibility:
    """A target an idle engine already misses."""

    name: str
    """The check's name: ``"ttft_s.p95"``, ``"attainment"``, ``"failure_rate"``."""
    limit: float
    zero_load: float
    """The same statistic with no load at all."""
    detail: str


def zero_load_violations(
    objective: ServiceLevelObjective,
    zero_load: ZeroLoadLatencies,
    *,
    timeout_s: float | None = None,
) -> tuple[Infeasibility, ...]:
    """Every target that no load, however light, can meet (empty when none)."""
    out: list[Infeasibility] = []
    per_request = {"ttft": zero_load.ttft_s, "tpot": zero_load.tpot_s, "e2e": zero_load.e2e_s}
    for t in objective.targets:
        if t.metric == "itl":
            tokens = np.maximum(zero_load.output_tokens - 1, 0)
            floor = _weighted_statistic(zero_load.tpot_s, tokens, t.statistic)
        else:
            floor = _statistic(per_request[t.metric], t.statistic)
        if math.isfinite(floor) and t.limit_s < floor * (1.0 - _ROUNDING):
            out.append(
                Infeasibility(
                    name=t.name,
                    limit=t.limit_s,
                    zero_load=floor,
                    detail=(
                        f"{t.name} <= {t.limit_s:.4g} s is impossible: with no load at all it is "
                        f"{floor:.4g} s on this deployment"
                    ),
                )
            )
    a = objective.attainment
    if a is not None:
        good = np.ones(zero_load.ttft_s.shape, dtype=bool)
        if a.ttft_s is not None:
            good &= zero_load.ttft_s <= a.ttft_s * (1.0 + _ROUNDING)
        if a.tpot_s is not None:
            good &= (zero_load.output_tokens < 2) | (zero_load.tpot_s <= a.tpot_s * (1 + _ROUNDING))
        if a.e2e_s is not None:
            good &= zero_load.e2e_s <= a.e2e_s * (1.0 + _ROUNDING)
        fraction = float(good.mean()) if good.size else 1.0
        if fraction < a.goal:
            out.append(
                Infeasibility(
                    name="attainment",
                    limit=a.goal,
                    zero_load=fraction,
                    detail=(
                        f"attainment >= {a.goal:.4g} is impossible: with no load at all only "
                        f"{fraction:.4g} of the requests meet its limits"
                    ),
                )
            )
    if timeout_s is not None and zero_load.e2e_s.size:
        doomed = float(np.mean(zero_load.e2e_s > timeout_s))
        if doomed > objective.max_failure_rate:
            out.append(
                Infeasibility(
                    name="failure_rate",
                    limit=objective.max_failure_rate,
                    zero_load=doomed,
                    detail=(
                        f"failure_rate <= {objective.max_failure_rate:.4g} is impossible: "
                        f"{doomed:.4g} of the requests take longer than the {timeout_s:.4g} s "
                        "timeout even with no load"
                    ),
                )
            )
    return tuple(out)
