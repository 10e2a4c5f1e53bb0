"""Kubernetes-side reports: inference-perf lifecycle metrics and the llm-d Benchmark Report v0.2."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from servesize.agent.ingest.common import (
    PERCENTILES,
    IngestError,
    _dig,
    _is_number,
    _level,
    _mapping,
    _maybe,
    _number,
    _one_model,
    _optional_mapping,
    _summary,
)
from servesize.schemas.measurements import EndpointBenchmark, LatencyStats, LoadMode

# --------------------------------------------------------------------------------------------
# inference-perf
# --------------------------------------------------------------------------------------------

INFERENCE_PERF_METRICS = {
    "ttft_s": "time_to_first_token",
    "tpot_s": "time_per_output_token",
    "itl_s": "inter_token_latency",
    "e2e_s": "request_latency",
}


def from_inference_perf(
    reports: Sequence[Mapping[str, Any]], *, model: str | None = None
) -> EndpointBenchmark:
    """inference-perf ``stage_<n>_lifecycle_metrics.json`` (``summarize_requests`` in
    ``kubernetes-sigs/inference-perf:inference_perf/reportgen/base.py``), one level per file:

    - load: ``load_summary.concurrency`` → closed loop at it, else ``requested_rate`` → open
      loop; the summary report pools every stage, has neither and is refused;
    - ``successes.count`` → completed, ``failures.count`` → failed;
    - duration = ``benchmark_time_seconds`` (the tool's ``total_time``, last end − first
      start over every request); files from before that key:
      ``successes.count / successes.throughput.requests_per_sec`` (the same quantity);
    - latencies in seconds: ``mean``, ``median`` → p50, ``p90/p95/p99`` (its default
      percentiles), ``min``, ``max``; TPOT = (last − first token time)/(N − 1);
    - ``throughput.{input,output,total}_tokens_per_sec`` and ``requests_per_sec`` as given;
      mean prompt length from ``successes.prompt_tokens.mean`` (``prompt_len.mean`` in
      older files), mean output length from ``successes.output_len.mean``.
    The file names no model: pass ``--model``.
    """
    levels = []
    for index, report in enumerate(reports):
        where = f"inference-perf report {index}"
        load = _mapping(report, "load_summary", where=where)
        successes = _mapping(report, "successes", where=where)
        if _is_number(load.get("concurrency")):
            mode: LoadMode = "closed_loop"
            concurrency, rate = int(load["concurrency"]), None
        elif _is_number(load.get("requested_rate")):
            mode, concurrency, rate = "open_loop", None, float(load["requested_rate"])
        else:
            raise IngestError(
                f"{where}: load_summary has no requested_rate (a summary report pools every "
                "stage; ingest stage_<n>_lifecycle_metrics.json)"
            )
        completed = int(_number(successes, "count", where=where))
        failed = int(_number(_mapping(report, "failures", where=where), "count", where=where))
        throughput = _mapping(successes, "throughput", where=where)
        request_rate = _number(throughput, "requests_per_sec", where=where)
        if completed == 0 or request_rate <= 0:
            raise IngestError(f"{where}: no successful request, so no duration")
        latency = _mapping(successes, "latency", where=where)
        keys = {
            "mean": ["mean"],
            "p50": ["median", "p50"],
            "p90": ["p90"],
            "p95": ["p95"],
            "p99": ["p99"],
            "min": ["min"],
            "max": ["max"],
        }
        stats = {
            ours: _summary(_optional_mapping(latency, theirs), keys, scale=1.0, where=where)
            for ours, theirs in INFERENCE_PERF_METRICS.items()
        }
        levels.append(
            _level(
                mode=mode,
                concurrency=concurrency,
                rate_per_s=rate,
                completed=completed,
                failed=failed,
                timed_out=0,
                duration_s=_maybe(report, "benchmark_time_seconds") or completed / request_rate,
                stats=stats,
                throughput_requests_per_s=request_rate,
                throughput_output_tokens_per_s=_number(
                    throughput, "output_tokens_per_sec", where=where
                ),
                goodput_requests_per_s=None,
                throughput_input_tokens_per_s=_maybe(throughput, "input_tokens_per_sec"),
                throughput_total_tokens_per_s=_maybe(throughput, "total_tokens_per_sec"),
                mean_input_tokens=_maybe(_optional_mapping(successes, "prompt_tokens"), "mean")
                or _maybe(_optional_mapping(successes, "prompt_len"), "mean"),
                mean_output_tokens=_maybe(_optional_mapping(successes, "output_len"), "mean"),
                where=where,
            )
        )
    return EndpointBenchmark(model=_one_model([], model), source="inference-perf", levels=levels)


# --------------------------------------------------------------------------------------------
# llm-d Benchmark Report v0.2
# --------------------------------------------------------------------------------------------

ISO_DURATION = re.compile(
    r"^P(?:(?P<d>\d+(?:\.\d+)?)D)?(?:T(?:(?P<h>\d+(?:\.\d+)?)H)?(?:(?P<m>\d+(?:\.\d+)?)M)?"
    r"(?:(?P<s>\d+(?:\.\d+)?)S)?)?$"
)
BR_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "s/token": 1.0, "ms/token": 1e-3}


def _iso_duration_s(text: Any, *, where: str) -> float:
    match = ISO_DURATION.match(str(text)) if text is not None else None
    if not match:
        raise IngestError(f"{where}: run.time.duration {text!r} is not an ISO 8601 duration")
    parts = {k: float(v) if v else 0.0 for k, v in match.groupdict().items()}
    return parts["d"] * 86400 + parts["h"] * 3600 + parts["m"] * 60 + parts["s"]


def from_llmd_report(
    reports: Sequence[Mapping[str, Any]], *, model: str | None = None
) -> EndpointBenchmark:
    """llm-d Benchmark Report v0.2 (``llm-d/llm-d-benchmark:llmdbenchmark/analysis/
    benchmark_report/schema_v0_2.py``), YAML or JSON, one level per report:

    - load from ``scenario.load.standardized``: a finite ``concurrency`` → closed loop,
      else ``rate_qps`` → open loop;
    - ``results.request_performance.aggregate.requests``: ``total``, ``failures`` → failed,
      ``incomplete`` → timed_out, completed = total − failures − incomplete;
    - duration from ``run.time.duration`` (ISO 8601, e.g. ``PT49.97S``);
    - latencies ``time_to_first_token``, ``time_per_output_token`` (TPOT),
      ``inter_token_latency``, ``request_latency``: ``Statistics{units, mean, stddev, min,
      p50, p90, p95, p99, max}``, units ``s``/``ms`` (``/token``); absent percentiles stay
      ``None``;
    - throughput ``request_rate``, ``output_token_rate``, ``input_token_rate``,
      ``total_token_rate``: their ``mean``;
    - model: ``scenario.stack[].standardized.model.name``.
    """
    levels = []
    names: set[str] = set()
    for index, report in enumerate(reports):
        where = f"llm-d benchmark report {index}"
        version = str(report.get("version", ""))
        if not version.startswith("0.2"):
            raise IngestError(f"{where}: version {version!r}; only Benchmark Report v0.2 is read")
        for component in _dig(report, "scenario", "stack") or []:
            names.add(str(_dig(component, "standardized", "model", "name") or ""))
        load = _optional_mapping(_dig(report, "scenario", "load"), "standardized")
        concurrency_value = load.get("concurrency")
        if _is_number(concurrency_value):
            mode: LoadMode = "closed_loop"
            concurrency, rate = int(concurrency_value), None
        elif _is_number(load.get("rate_qps")):
            mode, concurrency, rate = "open_loop", None, float(load["rate_qps"])
        else:
            raise IngestError(
                f"{where}: scenario.load.standardized has neither a finite concurrency nor rate_qps"
            )
        aggregate = _dig(report, "results", "request_performance", "aggregate")
        if not isinstance(aggregate, Mapping):
            raise IngestError(f"{where}: no results.request_performance.aggregate")
        requests = _mapping(aggregate, "requests", where=where)
        total = int(_number(requests, "total", where=where))
        failed = int(requests.get("failures") or 0)
        timed_out = int(requests.get("incomplete") or 0)
        duration_s = _iso_duration_s(_dig(report, "run", "time", "duration"), where=where)
        latency = _optional_mapping(aggregate, "latency")
        keys = {
            "mean": ["mean"],
            **{p: [p] for p in PERCENTILES},
            "std": ["stddev"],
            "min": ["min"],
            "max": ["max"],
        }
        stats: dict[str, LatencyStats | None] = {}
        for ours, theirs in INFERENCE_PERF_METRICS.items():
            metric = _optional_mapping(latency, theirs)
            if not metric:
                stats[ours] = None
                continue
            scale = BR_TIME_UNITS.get(str(metric.get("units")))
            if scale is None:
                raise IngestError(f"{where}: {theirs} has units {metric.get('units')!r}")
            stats[ours] = _summary(metric, keys, scale=scale, where=where)
        throughput = _optional_mapping(aggregate, "throughput")
        completed = total - failed - timed_out
        request_rate = _maybe(_optional_mapping(throughput, "request_rate"), "mean")
        output_rate = _maybe(_optional_mapping(throughput, "output_token_rate"), "mean")
        if request_rate is None or output_rate is None:
            raise IngestError(
                f"{where}: throughput.request_rate.mean and throughput.output_token_rate.mean "
                "are required"
            )
        levels.append(
            _level(
                mode=mode,
                concurrency=concurrency,
                rate_per_s=rate,
                completed=completed,
                failed=failed,
                timed_out=timed_out,
                duration_s=duration_s,
                stats=stats,
                throughput_requests_per_s=request_rate,
                throughput_output_tokens_per_s=output_rate,
                goodput_requests_per_s=None,
                throughput_input_tokens_per_s=_maybe(
                    _optional_mapping(throughput, "input_token_rate"), "mean"
                ),
                throughput_total_tokens_per_s=_maybe(
                    _optional_mapping(throughput, "total_token_rate"), "mean"
                ),
                mean_input_tokens=_maybe(_optional_mapping(requests, "input_length"), "mean"),
                mean_output_tokens=_maybe(_optional_mapping(requests, "output_length"), "mean"),
                where=where,
            )
        )
    return EndpointBenchmark(model=_one_model(names, model), source="llm-d", levels=levels)
