"""Convert result files of other benchmark tools into an :class:`EndpointBenchmark`.

Their metric names collide with different meanings, so every field is mapped explicitly. Our
definitions (docs/modeling.md §4.2):
``ttft_s``; ``tpot_s`` = per-request (E2E − TTFT)/(N − 1), excluding the first token;
``itl_s`` = gaps between streamed chunks, pooled over requests; ``e2e_s``; all in seconds.

- ttft_s ← vllm ``*_ttft_ms``; GuideLLM ``time_to_first_token_ms``; AIPerf
  ``time_to_first_token`` (``ttft`` in 0.1); inference-perf / llm-d ``time_to_first_token``;
- tpot_s ← vllm ``*_tpot_ms``; GuideLLM ``inter_token_latency_ms``; AIPerf
  ``inter_token_latency``; inference-perf / llm-d ``time_per_output_token``;
- itl_s (chunk gaps) ← vllm ``*_itl_ms``; GuideLLM none; AIPerf ``inter_chunk_latency``;
  inference-perf / llm-d ``inter_token_latency``;
- e2e_s ← vllm ``*_e2el_ms``; GuideLLM ``request_latency`` (s); AIPerf, inference-perf and
  llm-d ``request_latency``.

GuideLLM's ``time_per_output_token_ms`` is E2E / N (it *includes* the first token) and is
deliberately not used; its ``inter_token_latency_ms`` is our TPOT. AIPerf's
``inter_token_latency`` is our TPOT too; its chunk gaps are ``inter_chunk_latency``.
inference-perf's ``inter_token_latency`` pools per-token gaps (tokens of one chunk share the
chunk's arrival time, so intra-chunk gaps are 0): the closest it has to chunk gaps.

A percentile a file does not carry is stored as ``None`` (:attr:`LatencyStats.absent`) and
:func:`gaps` says what the tool would need to produce it; only a file that lacks what every
level needs (counts, duration, any latency) is refused, naming the field.
"""

from __future__ import annotations

import csv
import importlib
import io
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeGuard

from servesize.agent.endpoint import latency_stats as sample_stats
from servesize.schemas.measurements import EndpointBenchmark, EndpointLevel, LatencyStats, LoadMode

IngestFormat = Literal["vllm-bench", "guidellm", "aiperf", "inference-perf", "llm-d"]
PERCENTILES = ("p50", "p90", "p95", "p99")
OURS = ("ttft_s", "tpot_s", "itl_s", "e2e_s")


class IngestError(ValueError):
    """A result file that cannot be mapped without guessing; the message says what is missing."""


def _is_number(value: object) -> TypeGuard[int | float]:
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)


def _number(data: Mapping[str, Any], key: str, *, where: str) -> float:
    value = data.get(key) if isinstance(data, Mapping) else None
    if not _is_number(value):
        raise IngestError(f"{where}: expected a number at {key!r}, got {value!r}")
    return float(value)


def _maybe(data: Any, key: str) -> float | None:
    value = data.get(key) if isinstance(data, Mapping) else None
    return float(value) if _is_number(value) else None


def _mapping(data: Any, key: str, *, where: str) -> Mapping[str, Any]:
    value = data.get(key) if isinstance(data, Mapping) else None
    if not isinstance(value, Mapping):
        raise IngestError(f"{where}: expected an object at {key!r}")
    return value


def _optional_mapping(data: Any, key: str) -> Mapping[str, Any]:
    value = data.get(key) if isinstance(data, Mapping) else None
    return value if isinstance(value, Mapping) else {}


def _dig(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


def _summary(
    data: Mapping[str, Any], keys: Mapping[str, Sequence[str]], *, scale: float, where: str
) -> LatencyStats | None:
    """Build :class:`LatencyStats` from ``data[keys[field]]`` (first key present wins), each
    multiplied by ``scale``; ``None`` when the mean is absent (the metric was not recorded)."""
    values: dict[str, float] = {}
    for field, candidates in keys.items():
        for key in candidates:
            value = _maybe(data, key)
            if value is not None:
                values[field] = value * scale
                break
    if "mean" not in values:
        return None
    try:
        return LatencyStats(**values)
    except ValueError as exc:
        raise IngestError(f"{where}: {exc}") from exc


def _level(
    *,
    mode: LoadMode,
    concurrency: int | None,
    rate_per_s: float | None,
    completed: int,
    failed: int,
    timed_out: int,
    duration_s: float,
    stats: Mapping[str, LatencyStats | None],
    throughput_requests_per_s: float,
    throughput_output_tokens_per_s: float,
    goodput_requests_per_s: float | None,
    where: str,
    throughput_input_tokens_per_s: float | None = None,
    throughput_total_tokens_per_s: float | None = None,
    mean_input_tokens: float | None = None,
    mean_output_tokens: float | None = None,
) -> EndpointLevel:
    if all(stats.get(name) is None for name in OURS):
        raise IngestError(f"{where}: no latency metric (TTFT, TPOT, ITL or E2E) in the result")
    if throughput_total_tokens_per_s is None and throughput_input_tokens_per_s is not None:
        throughput_total_tokens_per_s = (
            throughput_input_tokens_per_s + throughput_output_tokens_per_s
        )
    try:
        return EndpointLevel(
            mode=mode,
            concurrency=concurrency,
            rate_per_s=rate_per_s,
            requests=completed + failed + timed_out,
            completed=completed,
            failed=failed,
            timed_out=timed_out,
            duration_s=duration_s,
            ttft_s=stats.get("ttft_s"),
            itl_s=stats.get("itl_s"),
            tpot_s=stats.get("tpot_s"),
            e2e_s=stats.get("e2e_s"),
            throughput_requests_per_s=throughput_requests_per_s,
            throughput_output_tokens_per_s=throughput_output_tokens_per_s,
            goodput_requests_per_s=goodput_requests_per_s,
            throughput_input_tokens_per_s=throughput_input_tokens_per_s,
            throughput_total_tokens_per_s=throughput_total_tokens_per_s,
            mean_input_tokens=mean_input_tokens,
            mean_output_tokens=mean_output_tokens,
        )
    except ValueError as exc:  # pydantic.ValidationError is a ValueError
        raise IngestError(f"{where}: {exc}") from exc


def _one_model(names: Iterable[str], model: str | None) -> str:
    if model:
        return model
    found = {n for n in names if n}
    if len(found) != 1:
        raise IngestError(
            f"cannot tell the model from the file ({sorted(found) or 'none'}); pass --model"
        )
    return found.pop()


# What each tool would need to record a percentile it left out.
HINTS: dict[str, str] = {
    "vllm-bench": "rerun vllm bench serve with --percentile-metrics ttft,tpot,itl,e2el "
    "--metric-percentiles 50,90,95,99, or with --save-detailed (per-request lists)",
    "guidellm": "GuideLLM reports every percentile; the file was cut",
    "aiperf": "ingest profile_export.jsonl (per-request records) instead",
    "inference-perf": "add 90, 95 and 99 to report.request_lifecycle.percentiles",
    "llm-d": "regenerate the report from the harness's native results",
}
METRIC_NAMES = {"ttft_s": "TTFT", "tpot_s": "TPOT", "itl_s": "ITL", "e2e_s": "E2E"}


def gaps(benchmark: EndpointBenchmark) -> list[str]:
    """One line per level and metric whose percentiles the file did not carry, with what the
    tool would need, e.g. ``level 0: TTFT p90, p95 absent; rerun vllm bench serve with ...``."""
    lines = []
    for index, level in enumerate(benchmark.levels):
        for name in OURS:
            stats: LatencyStats | None = getattr(level, name)
            if stats is None:
                lines.append(f"level {index}: {METRIC_NAMES[name]} absent")
            elif stats.absent:
                lines.append(
                    f"level {index}: {METRIC_NAMES[name]} {', '.join(stats.absent)} absent; "
                    f"{HINTS.get(benchmark.source, '')}"
                )
    return lines


# --------------------------------------------------------------------------------------------
# vllm bench serve
# --------------------------------------------------------------------------------------------

VLLM_METRICS = {"ttft_s": "ttft", "tpot_s": "tpot", "itl_s": "itl", "e2e_s": "e2el"}


def _vllm_stats(record: Mapping[str, Any], metric: str, *, where: str) -> LatencyStats | None:
    """``mean_{m}_ms``, ``p50`` from ``p50_{m}_ms`` or ``median_{m}_ms``, ``p{90,95,99}_{m}_ms``,
    ``std_{m}_ms``, divided by 1000; a percentile not in ``--metric-percentiles`` is ``None``.
    A metric absent altogether (not in ``--percentile-metrics``) is ``None``."""
    keys = {
        "mean": [f"mean_{metric}_ms"],
        "p50": [f"p50_{metric}_ms", f"median_{metric}_ms"],
        **{p: [f"{p}_{metric}_ms"] for p in PERCENTILES[1:]},
        "std": [f"std_{metric}_ms"],
    }
    return _summary(record, keys, scale=1e-3, where=where)


def _vllm_detailed_stats(
    record: Mapping[str, Any], *, where: str
) -> dict[str, LatencyStats | None]:
    """From ``--save-detailed`` lists (``vllm/benchmarks/serve.py`` ``benchmark()``, seconds):
    ``ttfts``, ``itls`` (per request), ``output_lens``, ``errors`` (``""`` for success).
    vLLM saves no per-request latency; as its request functions set
    ``latency = most_recent_timestamp − st`` and ``itl`` holds every gap after the first
    chunk, E2E = TTFT + Σ ITL (``latencies``/``e2els`` are used when a file has them).
    TPOT as vLLM computes it: ``(latency − ttft) / (output_len − 1)`` for ``output_len > 1``;
    successful requests only."""
    try:
        columns = [record["ttfts"], record["itls"], record["output_lens"], record["errors"]]
        latencies = record.get("latencies") or record.get("e2els")
        columns.append(latencies if latencies is not None else [None] * len(columns[0]))
        rows = list(zip(*columns, strict=True))
    except (KeyError, TypeError, ValueError) as exc:
        raise IngestError(
            f"{where}: incomplete --save-detailed lists ttfts/itls/output_lens/errors ({exc})"
        ) from exc
    ok = []
    for ttft, itl, n, err, latency in rows:
        if err:
            continue
        gaps_s = [float(g) for g in itl]
        e2e = float(latency) if latency is not None else float(ttft) + sum(gaps_s)
        ok.append((float(ttft), gaps_s, e2e, int(n)))
    return {
        "ttft_s": sample_stats([t for t, _, _, _ in ok]),
        "itl_s": sample_stats([g for _, gs, _, _ in ok for g in gs]),
        "tpot_s": sample_stats([(e - t) / (n - 1) for t, _, e, n in ok if n > 1]),
        "e2e_s": sample_stats([e for _, _, e, _ in ok]),
    }


def _vllm_rate(value: Any, *, where: str) -> float | None:
    """``request_rate``: a number, or ``"inf"`` (everything sent at once) → ``None``."""
    if value in ("inf", None):
        return None
    try:
        rate = float(value)
    except (TypeError, ValueError):
        raise IngestError(f"{where}: request_rate {value!r} is not a number") from None
    return None if math.isinf(rate) else rate


def from_vllm_bench(
    records: Sequence[Mapping[str, Any]], *, model: str | None = None
) -> EndpointBenchmark:
    """``vllm bench serve --save-result`` (one JSON object; several with ``--append-result``)
    and the older ``benchmarks/benchmark_serving.py``: ``vllm-project/vllm:vllm/benchmarks/
    serve.py`` (``benchmark()`` result dict and ``main`` ``result_json``). One level per object:

    - load: ``request_rate`` finite → ``open_loop`` at that rate (a ``max_concurrency`` cap
      is noted by the tool but not representable); ``"inf"`` with ``max_concurrency`` →
      ``closed_loop`` at ``max_concurrency``; ``"inf"`` without it → ``closed_loop`` at
      ``num_prompts`` (all requests start at once);
    - ``completed``; ``failed`` → failed (the tool does not separate timeouts; files from
      before ``failed`` existed: ``num_prompts − completed``);
    - ``duration`` (s); ``request_throughput`` = completed/duration;
      ``output_throughput`` (tok/s); ``total_token_throughput``; input tokens/s =
      ``total_input_tokens`` / duration (vLLM sums prompt lengths of successful requests);
      ``request_goodput`` (``request_goodput:`` in 2025 files; null unless ``--goodput``);
    - latencies from ``{mean,median,std,p90,p95,p99}_{ttft,tpot,itl,e2el}_ms`` ÷ 1000 — the
      default saves only p99 (and the median), so p90/p95 are ``None`` — unless
      ``--save-detailed`` lists are present, which give every percentile
      (:func:`_vllm_detailed_stats`).
    """
    if not records:
        raise IngestError("no vllm bench serve results in the file")
    levels = []
    names = set()
    for index, record in enumerate(records):
        where = f"vllm-bench result {index}"
        names.add(str(record.get("model_id") or ""))
        rate_per_s = _vllm_rate(record.get("request_rate", "inf"), where=where)
        max_concurrency = record.get("max_concurrency")
        if rate_per_s is not None:
            mode: LoadMode = "open_loop"
            concurrency = None
        else:
            mode = "closed_loop"
            concurrency = int(max_concurrency or _number(record, "num_prompts", where=where))
        stats = {
            ours: _vllm_stats(record, theirs, where=where) for ours, theirs in VLLM_METRICS.items()
        }
        if "ttfts" in record and any(s is None or s.absent for s in stats.values()):
            detailed = _vllm_detailed_stats(record, where=where)
            stats = {k: detailed[k] if (v is None or v.absent) else v for k, v in stats.items()}
        completed = int(_number(record, "completed", where=where))
        if _is_number(record.get("failed")):
            failed = int(record["failed"])
        elif isinstance(record.get("errors"), list):
            failed = sum(1 for e in record["errors"] if e)
        elif _is_number(record.get("num_prompts")):
            failed = max(int(record["num_prompts"]) - completed, 0)
        else:
            raise IngestError(f"{where}: neither 'failed' nor 'num_prompts' to count failures")
        duration_s = _number(record, "duration", where=where)
        goodput = record.get("request_goodput", record.get("request_goodput:"))
        input_tokens = _maybe(record, "total_input_tokens")
        output_tokens = _maybe(record, "total_output_tokens")
        levels.append(
            _level(
                mode=mode,
                concurrency=concurrency,
                rate_per_s=rate_per_s,
                completed=completed,
                failed=failed,
                timed_out=0,
                duration_s=duration_s,
                stats=stats,
                throughput_requests_per_s=_number(record, "request_throughput", where=where),
                throughput_output_tokens_per_s=_number(record, "output_throughput", where=where),
                goodput_requests_per_s=float(goodput) if _is_number(goodput) else None,
                throughput_input_tokens_per_s=(
                    input_tokens / duration_s if input_tokens is not None else None
                ),
                throughput_total_tokens_per_s=_maybe(record, "total_token_throughput"),
                mean_input_tokens=input_tokens / completed if input_tokens and completed else None,
                mean_output_tokens=(
                    output_tokens / completed if output_tokens and completed else None
                ),
                where=where,
            )
        )
    return EndpointBenchmark(
        model=_one_model(names, model), engine=None, source="vllm-bench", levels=levels
    )


# --------------------------------------------------------------------------------------------
# GuideLLM
# --------------------------------------------------------------------------------------------


def _guidellm_stats(
    metrics: Mapping[str, Any], name: str, *, scale: float, where: str
) -> LatencyStats | None:
    """``metrics.<name>.successful`` = ``DistributionSummary{mean, median, std_dev, min, max,
    count, percentiles{p25, p50 (0.4+), p75, p90, p95, p99, ...}}``; p50 from ``median``
    where the 0.3 layout has no ``percentiles.p50``. ``None`` when the metric is absent or
    has no successful samples."""
    ok = _optional_mapping(metrics.get(name), "successful")
    if not ok or not ok.get("count"):
        return None
    flat = {
        **_optional_mapping(ok, "percentiles"),
        **{k: v for k, v in ok.items() if k != "percentiles"},
    }
    keys = {
        "mean": ["mean"],
        "p50": ["p50", "median"],
        "p90": ["p90"],
        "p95": ["p95"],
        "p99": ["p99"],
        "std": ["std_dev"],
        "min": ["min"],
        "max": ["max"],
    }
    return _summary(flat, keys, scale=scale, where=f"{where} {name}")


def _guidellm_load(
    strategy: Mapping[str, Any], total: int, *, where: str
) -> tuple[LoadMode, int | None, float | None]:
    kind = strategy.get("type_")
    if kind == "synchronous":
        return "closed_loop", 1, None
    if kind == "concurrent":
        return "closed_loop", int(_number(strategy, "streams", where=where)), None
    if kind == "throughput":
        return "closed_loop", int(strategy.get("max_concurrency") or total), None
    if kind in ("constant", "poisson", "async_constant", "async_poisson"):
        return "open_loop", None, _number(strategy, "rate", where=where)
    raise IngestError(f"{where}: unknown GuideLLM strategy {kind!r}")


def from_guidellm(
    reports: Sequence[Mapping[str, Any]], *, model: str | None = None
) -> EndpointBenchmark:
    """GuideLLM ``benchmarks.json`` / ``.yaml`` (``GenerativeBenchmarksReport``,
    ``vllm-project/guidellm:src/guidellm/benchmark/``). Three layouts:

    - 0.3 (mid-2025): ``benchmarks[i].args.strategy``, ``benchmarks[i].request_totals``,
      model at ``benchmarks[i].worker.backend_model``, p50 only as ``median``;
    - 0.4–0.7: ``benchmarks[i].config.strategy``, ``metrics.request_totals``, ``args.model``;
    - 0.8 (``metadata.version`` 2): as 0.4 with the model at ``config.backend.model``.

    One level per benchmark:

    - load from the strategy: ``synchronous`` → closed loop at 1; ``concurrent`` → closed
      loop at ``streams``; ``throughput`` → closed loop at ``max_concurrency`` (or all
      requests at once); ``constant``/``poisson`` → open loop at ``rate``;
    - ``request_totals``: ``successful`` → completed, ``errored`` → failed, ``incomplete``
      (cut off when the run's time or request limit ended) → timed_out;
    - ``duration`` (s, measured window);
    - ttft_s ← ``time_to_first_token_ms`` ÷ 1000; tpot_s ← ``inter_token_latency_ms`` ÷ 1000
      (GuideLLM weights it by N − 1 tokens per request); itl_s: none (GuideLLM keeps no chunk
      gaps); e2e_s ← ``request_latency`` (already seconds); all from the ``successful``
      distribution;
    - throughput = completed / duration; output (input) tokens/s =
      ``output_token_count`` (``prompt_token_count``) ``.successful.total_sum`` / duration.
    """
    levels = []
    names: set[str] = set()
    for report in reports:
        benchmarks = report.get("benchmarks")
        if not isinstance(benchmarks, list) or not benchmarks:
            raise IngestError("GuideLLM report: no benchmarks[]")
        names.add(str(_dig(report, "args", "model") or ""))
        names.add(str(_dig(report, "config", "spec", "backend", "model") or ""))
        for index, benchmark in enumerate(benchmarks):
            levels.append(_guidellm_level(benchmark, names, where=f"GuideLLM benchmarks[{index}]"))
    return EndpointBenchmark(model=_one_model(names, model), source="guidellm", levels=levels)


def _guidellm_level(benchmark: Mapping[str, Any], names: set[str], *, where: str) -> EndpointLevel:
    metrics = _mapping(benchmark, "metrics", where=where)
    totals = metrics.get("request_totals") or benchmark.get("request_totals")
    if not isinstance(totals, Mapping):
        raise IngestError(f"{where}: no request_totals (metrics.request_totals in 0.4+)")
    completed = int(_number(totals, "successful", where=where))
    failed = int(_number(totals, "errored", where=where))
    timed_out = int(_number(totals, "incomplete", where=where))
    strategy = _dig(benchmark, "config", "strategy") or _dig(benchmark, "args", "strategy")
    if not isinstance(strategy, Mapping):
        raise IngestError(f"{where}: no config.strategy (args.strategy in 0.3)")
    mode, concurrency, rate = _guidellm_load(strategy, completed + failed + timed_out, where=where)
    names.add(str(_dig(benchmark, "config", "backend", "model") or ""))
    names.add(str(_dig(benchmark, "worker", "backend_model") or ""))
    duration_s = _number(benchmark, "duration", where=where)
    output_tokens = _number(
        _mapping(_mapping(metrics, "output_token_count", where=where), "successful", where=where),
        "total_sum",
        where=where,
    )
    input_tokens = _maybe(_dig(metrics, "prompt_token_count", "successful"), "total_sum")
    stats = {
        "ttft_s": _guidellm_stats(metrics, "time_to_first_token_ms", scale=1e-3, where=where),
        "tpot_s": _guidellm_stats(metrics, "inter_token_latency_ms", scale=1e-3, where=where),
        "itl_s": None,
        "e2e_s": _guidellm_stats(metrics, "request_latency", scale=1.0, where=where),
    }
    return _level(
        mode=mode,
        concurrency=concurrency,
        rate_per_s=rate,
        completed=completed,
        failed=failed,
        timed_out=timed_out,
        duration_s=duration_s,
        stats=stats,
        throughput_requests_per_s=completed / duration_s,
        throughput_output_tokens_per_s=output_tokens / duration_s,
        goodput_requests_per_s=None,
        throughput_input_tokens_per_s=(
            input_tokens / duration_s if input_tokens is not None else None
        ),
        mean_input_tokens=input_tokens / completed if input_tokens and completed else None,
        mean_output_tokens=output_tokens / completed if completed else None,
        where=where,
    )


# --------------------------------------------------------------------------------------------
# AIPerf (and GenAI-Perf, whose JSON it mimics)
# --------------------------------------------------------------------------------------------

TIME_UNITS_S = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "sec": 1.0,
    "seconds": 1.0,
}
# Our metric ← AIPerf tags: current ``JsonExportData`` field names first, then the short tags
# of the 0.1 exports (``records`` wrapper, ``ttft``).
AIPERF_METRICS = {
    "ttft_s": ("time_to_first_token", "ttft"),
    "tpot_s": ("inter_token_latency",),
    "itl_s": ("inter_chunk_latency",),
    "e2e_s": ("request_latency",),
}
AIPERF_TIMEOUT_TYPES = ("timeout",)


def _time_scale(unit: Any, *, name: str, where: str) -> float:
    scale = TIME_UNITS_S.get(str(unit))
    if scale is None:
        raise IngestError(f"{where}: {name} has unit {unit!r}, not a time unit")
    return scale


def _aiperf_metric(export: Mapping[str, Any], names: Sequence[str]) -> Mapping[str, Any] | None:
    for name in names:
        value = export.get(name)
        if isinstance(value, Mapping):
            return value
    return None


def _aiperf_stats(
    export: Mapping[str, Any], names: Sequence[str], *, where: str
) -> LatencyStats | None:
    """``{unit, avg, p50, p90, p95, p99, std, min, max, ...}`` converted by its ``unit``."""
    metric = _aiperf_metric(export, names)
    if metric is None:
        return None
    scale = _time_scale(metric.get("unit", ""), name=names[0], where=where)
    keys = {
        "mean": ["avg"],
        **{p: [p] for p in PERCENTILES},
        "std": ["std"],
        "min": ["min"],
        "max": ["max"],
    }
    return _summary(metric, keys, scale=scale, where=f"{where} {names[0]}")


def _aiperf_value(
    export: Mapping[str, Any], name: str, *, where: str, units: Sequence[str]
) -> float | None:
    metric = export.get(name)
    if metric is None:
        return None
    if not isinstance(metric, Mapping):
        raise IngestError(f"{where}: {name} is not a metric object")
    if metric.get("unit") not in units:
        raise IngestError(
            f"{where}: {name} has unit {metric.get('unit')!r}, expected one of {list(units)}"
        )
    return _number(metric, "avg", where=f"{where} {name}")


def _aiperf_load(
    config: Mapping[str, Any], *, where: str
) -> tuple[LoadMode, int | None, float | None]:
    """``input_config.loadgen.{request_rate, concurrency}`` (0.1–0.7), the profiling entry
    of ``input_config.phases[]`` (0.8+), or GenAI-Perf's flat ``input_config``."""
    loadgen: Mapping[str, Any] = _optional_mapping(config, "loadgen") or config
    phases = config.get("phases")
    if isinstance(phases, list):
        profiling = [p for p in phases if isinstance(p, Mapping) and p.get("name") == "profiling"]
        if profiling:
            loadgen = profiling[0]
    rate = _maybe(loadgen, "request_rate") or _maybe(loadgen, "rate")
    if rate:
        return "open_loop", None, rate
    concurrency = _maybe(loadgen, "concurrency")
    if concurrency:
        return "closed_loop", int(concurrency), None
    raise IngestError(
        f"{where}: input_config has neither a request_rate nor a concurrency "
        "(loadgen in AIPerf 0.1–0.7, phases[] in 0.8+)"
    )


def _aiperf_model(config: Mapping[str, Any]) -> str:
    endpoint = _optional_mapping(config, "endpoint") or config
    names = endpoint.get("model_names") or endpoint.get("model") or []
    if isinstance(names, str):
        names = [names]
    items = _dig(config, "models", "items")
    if not names and isinstance(items, list) and items and isinstance(items[0], Mapping):
        names = [items[0].get("name")]
    return str(names[0]) if names and names[0] else ""


def _aiperf_errors(export: Mapping[str, Any], errors: int, *, where: str) -> int:
    """Timed-out requests among ``error_summary`` (``error_details.type`` naming a timeout)."""
    timed_out = 0
    for entry in export.get("error_summary") or []:
        details = _optional_mapping(entry, "error_details")
        if any(t in str(details.get("type", "")).lower() for t in AIPERF_TIMEOUT_TYPES):
            timed_out += int(_number(entry, "count", where=f"{where} error_summary"))
    return min(timed_out, errors)


def from_aiperf(
    exports: Sequence[Mapping[str, Any]], *, model: str | None = None
) -> EndpointBenchmark:
    """AIPerf ``profile_export_aiperf.json`` (``JsonExportData`` in
    ``ai-dynamo/aiperf:aiperf/common/models/export_models.py``; metric definitions in
    ``aiperf/metrics/types/``), or GenAI-Perf's ``*_genai_perf.json``. The metrics sit at the
    top level (0.2+) or under ``records`` with short tags (``ttft``; 0.1). One level per file:

    - load from :func:`_aiperf_load`; the model from ``input_config.endpoint.model_names[0]``
      (0.8+: ``input_config.models.items[0].name``; GenAI-Perf: ``model``);
    - ``request_count`` (successful requests) → completed; ``error_request_count`` → failed
      (cancelled requests included), except errors in ``error_summary`` whose
      ``error_details.type`` names a timeout, which → timed_out;
    - ``benchmark_duration`` (s); ``request_throughput`` (requests/sec);
      ``output_token_throughput`` (tokens/sec, reasoning tokens included);
      ``total_token_throughput``; input tokens/s = ``total_isl`` / duration; ``goodput``;
    - ttft_s ← ``time_to_first_token``; tpot_s ← ``inter_token_latency`` ((E2E − TTFT)/(N − 1));
      itl_s ← ``inter_chunk_latency`` (pooled chunk gaps); e2e_s ← ``request_latency``; each
      converted from its ``unit`` field, ``avg`` → mean.
    """
    if not exports:
        raise IngestError("no AIPerf exports given")
    levels = []
    names = set()
    for index, raw in enumerate(exports):
        where = f"AIPerf export {index}"
        export: Mapping[str, Any] = {**raw, **_optional_mapping(raw, "records")}
        config = _optional_mapping(export, "input_config")
        names.add(_aiperf_model(config))
        mode, concurrency, rate_per_s = _aiperf_load(config, where=where)
        requests_unit = ("requests",)
        completed = int(
            _aiperf_value(export, "request_count", where=where, units=requests_unit) or 0
        )
        errors = int(
            _aiperf_value(export, "error_request_count", where=where, units=requests_unit) or 0
        )
        timed_out = _aiperf_errors(export, errors, where=where)
        duration_s = _aiperf_value(export, "benchmark_duration", where=where, units=("sec", "s"))
        request_rate = _aiperf_value(
            export, "request_throughput", where=where, units=("requests/sec",)
        )
        token_rate = _aiperf_value(
            export, "output_token_throughput", where=where, units=("tokens/sec",)
        )
        missing = [
            name
            for name, value in (
                ("benchmark_duration", duration_s),
                ("request_throughput", request_rate),
                ("output_token_throughput", token_rate),
            )
            if value is None
        ]
        if duration_s is None or request_rate is None or token_rate is None:
            raise IngestError(f"{where}: {', '.join(missing)} missing")
        goodput = export.get("goodput")
        goodput_per_s = (
            _number(goodput, "avg", where=where)
            if isinstance(goodput, Mapping) and goodput.get("unit") == "requests/sec"
            else None
        )
        total_isl = _aiperf_value(export, "total_isl", where=where, units=("tokens",))
        stats = {
            ours: _aiperf_stats(export, theirs, where=where)
            for ours, theirs in AIPERF_METRICS.items()
        }
        levels.append(
            _level(
                mode=mode,
                concurrency=concurrency,
                rate_per_s=rate_per_s,
                completed=completed,
                failed=errors - timed_out,
                timed_out=timed_out,
                duration_s=duration_s,
                stats=stats,
                throughput_requests_per_s=request_rate,
                throughput_output_tokens_per_s=token_rate,
                goodput_requests_per_s=goodput_per_s,
                throughput_input_tokens_per_s=(
                    total_isl / duration_s if total_isl is not None else None
                ),
                throughput_total_tokens_per_s=_aiperf_value(
                    export, "total_token_throughput", where=where, units=("tokens/sec",)
                ),
                mean_input_tokens=_aiperf_value(
                    export, "input_sequence_length", where=where, units=("tokens",)
                ),
                mean_output_tokens=_aiperf_value(
                    export, "output_sequence_length", where=where, units=("tokens",)
                ),
                where=where,
            )
        )
    return EndpointBenchmark(model=_one_model(names, model), source="aiperf", levels=levels)


def _record_value(metric: Any, *, scale: float = 1.0) -> Any:
    value = metric.get("value") if isinstance(metric, Mapping) else metric
    if isinstance(value, list):
        return [float(v) * scale for v in value]
    return float(value) * scale if _is_number(value) else None


def from_aiperf_records(
    records: Sequence[Mapping[str, Any]],
    *,
    summary: Mapping[str, Any] | None,
    model: str | None = None,
) -> EndpointBenchmark:
    """AIPerf ``profile_export.jsonl``: one record per request (``MetricRecordInfo``:
    ``metadata``, ``metrics{tag: {value, unit}}``, ``error``). Records of the ``warmup``
    credit phase are left out. The file holds no load settings or model name; they come
    from ``summary`` (the ``profile_export_aiperf.json`` beside it).

    - completed = records without ``error``; failed = with one (timeouts → timed_out);
    - duration = max ``max_response_timestamp`` − min ``min_request_timestamp`` (ns) over the
      completed records, as AIPerf's ``benchmark_duration``;
    - ttft, TPOT (``inter_token_latency``), E2E (``request_latency``) per request, ITL =
      every ``inter_chunk_latency`` gap pooled; each by its ``unit``; numpy percentiles;
    - output tokens = Σ ``output_sequence_length``, input = Σ ``input_sequence_length``.
    """
    if summary is None:
        raise IngestError(
            "profile_export.jsonl records no load (concurrency or request rate) or model; "
            "keep profile_export_aiperf.json of the same run beside it"
        )
    where = "AIPerf profile_export.jsonl"
    config = _optional_mapping({**summary}, "input_config")
    mode, concurrency, rate_per_s = _aiperf_load(config, where=where)
    measured = [r for r in records if _dig(r, "metadata", "credit_phase") in (None, "profiling")]
    ok = [r for r in measured if not r.get("error")]
    bad = [r for r in measured if r.get("error")]
    timed_out = sum(
        1
        for r in bad
        if any(t in str(_dig(r, "error", "type") or "").lower() for t in AIPERF_TIMEOUT_TYPES)
    )
    values: dict[str, list[float]] = {name: [] for name in OURS}
    starts, ends, out_tokens, in_tokens = [], [], 0.0, 0.0
    for record in ok:
        metrics = _optional_mapping(record, "metrics")
        for ours, tags in AIPERF_METRICS.items():
            metric = _aiperf_metric(metrics, tags)
            if metric is None:
                continue
            scale = _time_scale(metric.get("unit"), name=tags[0], where=where)
            value = _record_value(metric, scale=scale)
            if isinstance(value, list):
                values[ours].extend(value)
            elif value is not None:
                values[ours].append(value)
        start = _record_value(metrics.get("min_request_timestamp"))
        end = _record_value(metrics.get("max_response_timestamp"))
        if isinstance(start, float) and isinstance(end, float):
            starts.append(start)
            ends.append(end)
        out_tokens += _record_value(metrics.get("output_sequence_length")) or 0.0
        in_tokens += _record_value(metrics.get("input_sequence_length")) or 0.0
    if not starts:
        raise IngestError(
            f"{where}: no completed record with min_request_timestamp/max_response_timestamp"
        )
    duration_s = (max(ends) - min(starts)) * 1e-9
    stats = {name: sample_stats(v) for name, v in values.items()}
    level = _level(
        mode=mode,
        concurrency=concurrency,
        rate_per_s=rate_per_s,
        completed=len(ok),
        failed=len(bad) - timed_out,
        timed_out=timed_out,
        duration_s=duration_s,
        stats=stats,
        throughput_requests_per_s=len(ok) / duration_s,
        throughput_output_tokens_per_s=out_tokens / duration_s,
        goodput_requests_per_s=None,
        throughput_input_tokens_per_s=in_tokens / duration_s,
        mean_input_tokens=in_tokens / len(ok) if ok else None,
        mean_output_tokens=out_tokens / len(ok) if ok else None,
        where=where,
    )
    return EndpointBenchmark(
        model=_one_model([_aiperf_model(config)], model), source="aiperf", levels=[level]
    )


CSV_NAME = re.compile(r"^(?P<header>.*?)\s*\((?P<unit>[^()]*)\)$")
AIPERF_CSV_LATENCY = {
    "ttft_s": "Time to First Token",
    "tpot_s": "Inter Token Latency",
    "itl_s": "Inter Chunk Latency",
    "e2e_s": "Request Latency",
}


def from_aiperf_csv(
    text: str, *, summary: Mapping[str, Any] | None, model: str | None = None
) -> EndpointBenchmark:
    """AIPerf ``profile_export_aiperf.csv`` (``aiperf/exporters/csv_exporter.py``): a table
    ``Metric,avg,min,max,p1,...,p99,std`` of distributions named ``Header (unit)``, a blank
    line, then ``Metric,Value`` scalars; values rounded to two decimals. As the JSONL, it
    carries no load or model: those come from ``summary``. Mapped as :func:`from_aiperf`."""
    if summary is None:
        raise IngestError(
            "profile_export_aiperf.csv records no load (concurrency or request rate) or model; "
            "keep profile_export_aiperf.json of the same run beside it, or ingest that file"
        )
    export: dict[str, Any] = {"input_config": summary.get("input_config") or {}}
    columns: list[str] = []
    for row in csv.reader(io.StringIO(text)):
        if not row:
            continue
        if row[0] == "Metric":
            columns = row
            continue
        match = CSV_NAME.match(row[0])
        header, unit = (match["header"], match["unit"]) if match else (row[0], "requests")
        if len(columns) == 2:
            export[header] = {"unit": unit, "avg": float(row[1])}
        else:
            export[header] = {
                "unit": unit,
                **{
                    ("avg" if c == "avg" else c): float(v)
                    for c, v in zip(columns[1:], row[1:], strict=False)
                    if v
                },
            }
    renamed: dict[str, Any] = {"input_config": export["input_config"]}
    names = {
        "Benchmark Duration": "benchmark_duration",
        "Request Count": "request_count",
        "Error Request Count": "error_request_count",
        "Request Throughput": "request_throughput",
        "Output Token Throughput": "output_token_throughput",
        "Total Token Throughput": "total_token_throughput",
        "Total Input Sequence Length": "total_isl",
        "Input Sequence Length": "input_sequence_length",
        "Output Sequence Length": "output_sequence_length",
        "Goodput": "goodput",
        **{header: AIPERF_METRICS[ours][0] for ours, header in AIPERF_CSV_LATENCY.items()},
    }
    for header, tag in names.items():
        if header in export:
            renamed[tag] = export[header]
    return from_aiperf([renamed], model=model)


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
    - duration = ``successes.count / successes.throughput.requests_per_sec`` (the tool's
      ``total_time``, last end − first start; not stored itself);
    - latencies in seconds: ``mean``, ``median`` → p50, ``p90/p95/p99`` (its default
      percentiles), ``min``, ``max``; TPOT = (last − first token time)/(N − 1);
    - ``throughput.{input,output,total}_tokens_per_sec`` and ``requests_per_sec`` as given.
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
                duration_s=completed / request_rate,
                stats=stats,
                throughput_requests_per_s=request_rate,
                throughput_output_tokens_per_s=_number(
                    throughput, "output_tokens_per_sec", where=where
                ),
                goodput_requests_per_s=None,
                throughput_input_tokens_per_s=_maybe(throughput, "input_tokens_per_sec"),
                throughput_total_tokens_per_s=_maybe(throughput, "total_tokens_per_sec"),
                mean_input_tokens=_maybe(_optional_mapping(successes, "prompt_len"), "mean"),
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


# --------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------


def _load_yaml(text: str, path: Path) -> Any:
    try:
        yaml = importlib.import_module("yaml")
    except ImportError:
        raise IngestError(f"{path}: reading YAML needs PyYAML (pip install pyyaml)") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise IngestError(f"{path}: not valid YAML ({exc})") from exc


def read_json_records(path: Path) -> list[Any]:
    """A JSON document, JSON Lines (one object per line, as ``--append-result`` writes), or
    YAML for ``.yaml``/``.yml`` files."""
    text = path.read_text()
    if path.suffix.lower() in (".yaml", ".yml"):
        data = _load_yaml(text, path)
        return data if isinstance(data, list) else [data]
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        try:
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise IngestError(f"{path}: neither JSON nor JSON Lines ({exc})") from exc
    return data if isinstance(data, list) else [data]


AIPERF_SUMMARY = "profile_export_aiperf.json"


def _aiperf_summary_beside(path: Path) -> Mapping[str, Any] | None:
    """The ``profile_export_aiperf.json`` of the same run (AIPerf writes it into the same
    artifact directory)."""
    candidate = path.with_name(AIPERF_SUMMARY)
    if not candidate.is_file():
        return None
    data = json.loads(candidate.read_text())
    return data if isinstance(data, Mapping) else None


def _is_aiperf_records(path: Path, records: Sequence[Any]) -> bool:
    return path.suffix == ".jsonl" or any(
        isinstance(r, Mapping) and "metrics" in r and "metadata" in r for r in records[:1]
    )


def ingest_files(
    paths: Sequence[Path], fmt: IngestFormat, *, model: str | None = None
) -> EndpointBenchmark:
    """Read one or more result files of one tool into a single benchmark (levels in order).
    AIPerf files may be the summary JSON, the per-record JSONL or the CSV export (one run
    each); the latter two take load and model from the summary JSON beside them."""
    if fmt == "aiperf":
        parts = []
        for path in paths:
            if path.suffix.lower() == ".csv":
                parts.append(
                    from_aiperf_csv(
                        path.read_text(), summary=_aiperf_summary_beside(path), model=model
                    )
                )
                continue
            data = read_json_records(path)
            if _is_aiperf_records(path, data):
                parts.append(
                    from_aiperf_records(data, summary=_aiperf_summary_beside(path), model=model)
                )
            else:
                parts.append(from_aiperf(data, model=model))
        if not parts:
            raise IngestError("no AIPerf files given")
        first = parts[0]
        return first.model_copy(update={"levels": [lv for p in parts for lv in p.levels]})
    records: list[Any] = []
    for path in paths:
        records.extend(read_json_records(path))
    if not all(isinstance(r, Mapping) for r in records):
        raise IngestError("every result must be a JSON object")
    if fmt == "vllm-bench":
        return from_vllm_bench(records, model=model)
    if fmt == "inference-perf":
        return from_inference_perf(records, model=model)
    if fmt == "llm-d":
        return from_llmd_report(records, model=model)
    return from_guidellm(records, model=model)
