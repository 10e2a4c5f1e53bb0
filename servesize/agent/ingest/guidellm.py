"""GuideLLM ``benchmarks.json`` / ``.yaml`` reports (layouts of 0.3 to 0.8)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from servesize.agent.ingest.common import (
    IngestError,
    _dig,
    _level,
    _mapping,
    _maybe,
    _number,
    _one_model,
    _optional_mapping,
    _summary,
)
from servesize.schemas.measurements import EndpointBenchmark, EndpointLevel, LatencyStats, LoadMode


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
