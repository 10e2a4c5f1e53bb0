"""Convert result files of other benchmark tools into an :class:`EndpointBenchmark`.

Their metric names collide with different meanings, so every field is mapped explicitly. Our
definitions (docs/modeling.md §4.2):
``ttft_s``; ``tpot_s`` = per-request (E2E − TTFT)/(N − 1), excluding the first token;
``itl_s`` = gaps between streamed chunks, pooled over requests; ``e2e_s``; all in seconds.

========================  ====================  ==========================  =====================
ours                      vllm bench serve      GuideLLM                    AIPerf / GenAI-Perf
========================  ====================  ==========================  =====================
ttft_s                    ``*_ttft_ms``         ``time_to_first_token_ms``  ``time_to_first_token``
tpot_s                    ``*_tpot_ms``         ``inter_token_latency_ms``  ``inter_token_latency``
itl_s (chunk gaps)        ``*_itl_ms``          (none)                      ``inter_chunk_latency``
e2e_s                     ``*_e2el_ms``         ``request_latency`` (s)     ``request_latency``
========================  ====================  ==========================  =====================

GuideLLM's ``time_per_output_token_ms`` is E2E / N (it *includes* the first token) and is
deliberately not used; its ``inter_token_latency_ms`` is our TPOT. AIPerf's
``inter_token_latency`` is our TPOT too; its chunk gaps are ``inter_chunk_latency``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from servesize.agent.endpoint import latency_stats
from servesize.schemas.measurements import EndpointBenchmark, EndpointLevel, LatencyStats, LoadMode

IngestFormat = Literal["vllm-bench", "guidellm", "aiperf"]
PERCENTILES = ("p50", "p90", "p95", "p99")


class IngestError(ValueError):
    """A result file that cannot be mapped without guessing; the message says what is missing."""


def _number(data: Mapping[str, Any], key: str, *, where: str) -> float:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise IngestError(f"{where}: expected a number at {key!r}, got {value!r}")
    return float(value)


def _mapping(data: Any, key: str, *, where: str) -> Mapping[str, Any]:
    value = data.get(key) if isinstance(data, Mapping) else None
    if not isinstance(value, Mapping):
        raise IngestError(f"{where}: expected an object at {key!r}")
    return value


def _optional_mapping(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = data.get(key)
    return value if isinstance(value, Mapping) else {}


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
) -> EndpointLevel:
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
        )
    except ValueError as exc:  # pydantic.ValidationError is a ValueError
        raise IngestError(f"{where}: {exc}") from exc


# --------------------------------------------------------------------------------------------
# vllm bench serve
# --------------------------------------------------------------------------------------------

VLLM_METRICS = {"ttft_s": "ttft", "tpot_s": "tpot", "itl_s": "itl", "e2e_s": "e2el"}


def _vllm_stats(record: Mapping[str, Any], metric: str, *, where: str) -> LatencyStats | None:
    """``mean_{m}_ms``, ``p50`` from ``p50_{m}_ms`` or ``median_{m}_ms``, ``p{90,95,99}_{m}_ms``,
    divided by 1000. A metric absent altogether (not in ``--percentile-metrics``) is ``None``."""
    keys = {
        "mean": f"mean_{metric}_ms",
        "p50": f"p50_{metric}_ms" if f"p50_{metric}_ms" in record else f"median_{metric}_ms",
        **{p: f"{p}_{metric}_ms" for p in PERCENTILES[1:]},
    }
    present = [k for k in keys.values() if record.get(k) is not None]
    if not present:
        return None
    missing = [k for k in keys.values() if record.get(k) is None]
    if missing:
        raise IngestError(
            f"{where}: {', '.join(missing)} missing; rerun vllm bench serve with "
            "--metric-percentiles 50,90,95,99 (or --save-detailed for per-request data)"
        )
    values = {name: _number(record, key, where=where) / 1000 for name, key in keys.items()}
    return LatencyStats(**values)


def _vllm_detailed_stats(
    record: Mapping[str, Any], *, where: str
) -> dict[str, LatencyStats | None]:
    """From ``--save-detailed`` lists (seconds): ``ttfts``, ``itls`` (per request), ``latencies``,
    ``output_lens``, ``errors`` (empty string for success). TPOT as vLLM computes it:
    ``(latency − ttft) / (output_len − 1)`` for ``output_len > 1``."""
    try:
        rows = list(
            zip(
                record["ttfts"],
                record["itls"],
                record["latencies"],
                record["output_lens"],
                record["errors"],
                strict=True,
            )
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise IngestError(f"{where}: incomplete per-request lists ({exc})") from exc
    ok = [
        (float(t), [float(g) for g in i], float(e), int(n)) for t, i, e, n, err in rows if not err
    ]
    return {
        "ttft_s": latency_stats([t for t, _, _, _ in ok]),
        "itl_s": latency_stats([g for _, gaps, _, _ in ok for g in gaps]),
        "tpot_s": latency_stats([(e - t) / (n - 1) for t, _, e, n in ok if n > 1]),
        "e2e_s": latency_stats([e for _, _, e, _ in ok]),
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
    """``vllm bench serve --save-result`` (one JSON object; several with ``--append-result``),
    ``vllm-project/vllm:vllm/benchmarks/serve.py`` (``benchmark()`` result dict and
    ``main_async`` ``result_json``). One level per object:

    - load: ``request_rate`` finite → ``open_loop`` at that rate (a ``max_concurrency`` cap
      is noted by the tool but not representable); ``"inf"`` with ``max_concurrency`` →
      ``closed_loop`` at ``max_concurrency``; ``"inf"`` without it → ``closed_loop`` at
      ``num_prompts`` (all requests start at once);
    - ``completed``; ``failed`` → failed (the tool does not separate timeouts);
    - ``duration`` (s); ``request_throughput`` = completed/duration;
      ``output_throughput`` (tok/s); ``request_goodput`` (null unless ``--goodput``);
    - latencies from ``{mean,median,p90,p95,p99}_{ttft,tpot,itl,e2el}_ms`` ÷ 1000; if a
      percentile is missing but ``--save-detailed`` lists exist, they are recomputed from
      those lists (successful requests only, as vLLM does).
    """
    if not records:
        raise IngestError("no vllm bench serve results in the file")
    levels = []
    names = set()
    for index, record in enumerate(records):
        where = f"vllm-bench result {index}"
        names.add(str(record.get("model_id") or model or ""))
        rate_per_s = _vllm_rate(record.get("request_rate", "inf"), where=where)
        max_concurrency = record.get("max_concurrency")
        if rate_per_s is not None:
            mode: LoadMode = "open_loop"
            concurrency = None
        else:
            mode = "closed_loop"
            concurrency = int(max_concurrency or _number(record, "num_prompts", where=where))
        try:
            stats = {
                ours: _vllm_stats(record, theirs, where=where)
                for ours, theirs in VLLM_METRICS.items()
            }
        except IngestError:
            if "ttfts" not in record:
                raise
            stats = _vllm_detailed_stats(record, where=where)
        goodput = record.get("request_goodput")
        levels.append(
            _level(
                mode=mode,
                concurrency=concurrency,
                rate_per_s=rate_per_s,
                completed=int(_number(record, "completed", where=where)),
                failed=int(record.get("failed") or 0),
                timed_out=0,
                duration_s=_number(record, "duration", where=where),
                stats=stats,
                throughput_requests_per_s=_number(record, "request_throughput", where=where),
                throughput_output_tokens_per_s=_number(record, "output_throughput", where=where),
                goodput_requests_per_s=float(goodput) if goodput is not None else None,
                where=where,
            )
        )
    return EndpointBenchmark(
        model=_one_model(names, model), engine=None, source="vllm-bench", levels=levels
    )


def _one_model(names: set[str], model: str | None) -> str:
    if model:
        return model
    names.discard("")
    if len(names) != 1:
        raise IngestError(
            f"cannot tell the model from the file ({sorted(names) or 'none'}); pass --model"
        )
    return names.pop()


# --------------------------------------------------------------------------------------------
# GuideLLM
# --------------------------------------------------------------------------------------------


def _guidellm_stats(
    metrics: Mapping[str, Any], name: str, *, scale: float, where: str
) -> LatencyStats | None:
    """``metrics.<name>.successful`` = ``DistributionSummary{mean, count, percentiles{p50..}}``;
    ``None`` when the metric is absent or has no successful samples."""
    summary = metrics.get(name)
    if not isinstance(summary, Mapping) or not isinstance(summary.get("successful"), Mapping):
        return None
    ok = summary["successful"]
    if not ok.get("count"):
        return None
    percentiles = _mapping(ok, "percentiles", where=f"{where} {name}")
    return LatencyStats(
        mean=_number(ok, "mean", where=f"{where} {name}") * scale,
        **{p: _number(percentiles, p, where=f"{where} {name}") * scale for p in PERCENTILES},
    )


def _guidellm_load(
    benchmark: Mapping[str, Any], total: int, *, where: str
) -> tuple[LoadMode, int | None, float | None]:
    strategy = _mapping(_mapping(benchmark, "config", where=where), "strategy", where=where)
    kind = strategy.get("type_")
    if kind == "synchronous":
        return "closed_loop", 1, None
    if kind == "concurrent":
        return "closed_loop", int(_number(strategy, "streams", where=where)), None
    if kind == "throughput":
        return "closed_loop", int(strategy.get("max_concurrency") or total), None
    if kind in ("constant", "poisson"):
        return "open_loop", None, _number(strategy, "rate", where=where)
    raise IngestError(f"{where}: unknown GuideLLM strategy {kind!r}")


def from_guidellm(
    reports: Sequence[Mapping[str, Any]], *, model: str | None = None
) -> EndpointBenchmark:
    """GuideLLM ``benchmarks.json`` (``GenerativeBenchmarksReport``:
    ``vllm-project/guidellm:src/guidellm/benchmark/schemas/generative/{report,benchmark,metrics}.py``,
    ``src/guidellm/schemas/statistics.py``). One level per ``benchmarks[i]`` of each report:

    - load from ``config.strategy``: ``synchronous`` → closed loop at 1; ``concurrent`` →
      closed loop at ``streams``; ``throughput`` → closed loop at ``max_concurrency`` (or all
      requests at once); ``constant``/``poisson`` → open loop at ``rate``;
    - ``metrics.request_totals``: ``successful`` → completed, ``errored`` → failed,
      ``incomplete`` (cut off when the run's time or request limit ended) → timed_out;
    - ``duration`` (s, measured window);
    - ttft_s ← ``time_to_first_token_ms`` ÷ 1000; tpot_s ← ``inter_token_latency_ms`` ÷ 1000
      (GuideLLM weights it by N − 1 tokens per request); itl_s: none (GuideLLM keeps no chunk
      gaps); e2e_s ← ``request_latency`` (already seconds); all from the ``successful``
      distribution, percentiles ``p50/p90/p95/p99``;
    - throughput = completed / duration; output tokens/s =
      ``output_token_count.successful.total_sum`` / duration; goodput: none.
    """
    levels = []
    names = set()
    for report in reports:
        benchmarks = report.get("benchmarks")
        if not isinstance(benchmarks, list) or not benchmarks:
            raise IngestError("GuideLLM report: no benchmarks[]")
        args = report.get("args")
        names.add(str(args.get("model") or "") if isinstance(args, Mapping) else "")
        for index, benchmark in enumerate(benchmarks):
            levels.append(_guidellm_level(benchmark, names, where=f"GuideLLM benchmarks[{index}]"))
    return EndpointBenchmark(model=_one_model(names, model), source="guidellm", levels=levels)


def _guidellm_level(benchmark: Mapping[str, Any], names: set[str], *, where: str) -> EndpointLevel:
    metrics = _mapping(benchmark, "metrics", where=where)
    totals = _mapping(metrics, "request_totals", where=where)
    completed = int(_number(totals, "successful", where=where))
    failed = int(_number(totals, "errored", where=where))
    timed_out = int(_number(totals, "incomplete", where=where))
    mode, concurrency, rate = _guidellm_load(benchmark, completed + failed + timed_out, where=where)
    backend = _mapping(benchmark, "config", where=where).get("backend")
    if isinstance(backend, Mapping):
        names.add(str(backend.get("model") or ""))
    duration_s = _number(benchmark, "duration", where=where)
    output_tokens = _mapping(
        _mapping(metrics, "output_token_count", where=where), "successful", where=where
    )
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
        throughput_output_tokens_per_s=_number(output_tokens, "total_sum", where=where)
        / duration_s,
        goodput_requests_per_s=None,
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


def _aiperf_stats(export: Mapping[str, Any], name: str, *, where: str) -> LatencyStats | None:
    """``{unit, avg, p50, p90, p95, p99, ...}`` converted by its ``unit``; ``None`` if absent."""
    metric = export.get(name)
    if not isinstance(metric, Mapping):
        return None
    unit = str(metric.get("unit", ""))
    scale = TIME_UNITS_S.get(unit)
    if scale is None:
        raise IngestError(f"{where}: {name} has unit {unit!r}, not a time unit")
    return LatencyStats(
        mean=_number(metric, "avg", where=f"{where} {name}") * scale,
        **{p: _number(metric, p, where=f"{where} {name}") * scale for p in PERCENTILES},
    )


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


def from_aiperf(
    exports: Sequence[Mapping[str, Any]], *, model: str | None = None
) -> EndpointBenchmark:
    """AIPerf ``profile_export_aiperf.json`` (``JsonExportData`` in
    ``ai-dynamo/aiperf:src/aiperf/common/models/export_models.py``; metric definitions in
    ``src/aiperf/metrics/types/``), or GenAI-Perf's ``*_genai_perf.json``. One level per file:

    - load from ``input_config.loadgen`` (GenAI-Perf: ``input_config`` itself):
      ``request_rate`` → open loop at that rate, else ``concurrency`` → closed loop; the
      model from ``input_config.endpoint.model_names[0]`` (GenAI-Perf: ``model``);
    - ``request_count`` (successful requests) → completed; ``error_request_count`` → failed,
      except errors in ``error_summary`` whose ``error_details.type`` names a timeout, which
      → timed_out;
    - ``benchmark_duration`` (s); ``request_throughput`` (requests/sec);
      ``output_token_throughput`` (tokens/sec); ``goodput`` (requests/sec, when SLOs were set);
    - ttft_s ← ``time_to_first_token``; tpot_s ← ``inter_token_latency`` ((E2E − TTFT)/(N − 1));
      itl_s ← ``inter_chunk_latency`` (pooled chunk gaps); e2e_s ← ``request_latency``; each
      converted from its ``unit`` field, ``avg`` → mean.
    """
    if not exports:
        raise IngestError("no AIPerf exports given")
    levels = []
    names = set()
    for index, export in enumerate(exports):
        where = f"AIPerf export {index}"
        config = _optional_mapping(export, "input_config")
        # AIPerf nests the load and endpoint settings; GenAI-Perf keeps its arguments flat.
        loadgen = _optional_mapping(config, "loadgen") or config
        endpoint = _optional_mapping(config, "endpoint") or config
        model_names = endpoint.get("model_names") or endpoint.get("model") or []
        if isinstance(model_names, str):
            model_names = [model_names]
        names.add(str(model_names[0]) if model_names else "")
        rate = loadgen.get("request_rate")
        if rate:
            mode: LoadMode = "open_loop"
            concurrency, rate_per_s = None, float(rate)
        elif loadgen.get("concurrency"):
            mode, concurrency, rate_per_s = "closed_loop", int(loadgen["concurrency"]), None
        else:
            raise IngestError(
                f"{where}: input_config.loadgen has neither request_rate nor concurrency"
            )
        requests_unit = ("requests",)
        completed = int(
            _aiperf_value(export, "request_count", where=where, units=requests_unit) or 0
        )
        errors = int(
            _aiperf_value(export, "error_request_count", where=where, units=requests_unit) or 0
        )
        timed_out = 0
        for entry in export.get("error_summary") or []:
            details = (
                _optional_mapping(entry, "error_details") if isinstance(entry, Mapping) else {}
            )
            if "timeout" in str(details.get("type", "")).lower():
                timed_out += int(_number(entry, "count", where=f"{where} error_summary"))
        timed_out = min(timed_out, errors)
        duration_s = _aiperf_value(export, "benchmark_duration", where=where, units=("sec", "s"))
        request_rate = _aiperf_value(
            export, "request_throughput", where=where, units=("requests/sec",)
        )
        token_rate = _aiperf_value(
            export, "output_token_throughput", where=where, units=("tokens/sec",)
        )
        if duration_s is None or request_rate is None or token_rate is None:
            raise IngestError(
                f"{where}: benchmark_duration, request_throughput and "
                "output_token_throughput are required"
            )
        goodput = export.get("goodput")
        goodput_per_s = (
            _number(goodput, "avg", where=where)
            if isinstance(goodput, Mapping) and goodput.get("unit") == "requests/sec"
            else None
        )
        stats = {
            "ttft_s": _aiperf_stats(export, "time_to_first_token", where=where),
            "tpot_s": _aiperf_stats(export, "inter_token_latency", where=where),
            "itl_s": _aiperf_stats(export, "inter_chunk_latency", where=where),
            "e2e_s": _aiperf_stats(export, "request_latency", where=where),
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
                where=where,
            )
        )
    return EndpointBenchmark(model=_one_model(names, model), source="aiperf", levels=levels)


# --------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------


def read_json_records(path: Path) -> list[Any]:
    """A JSON document, or JSON Lines (one object per line, as ``--append-result`` writes)."""
    text = path.read_text()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        try:
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise IngestError(f"{path}: neither JSON nor JSON Lines ({exc})") from exc
    return data if isinstance(data, list) else [data]


def ingest_files(
    paths: Sequence[Path], fmt: IngestFormat, *, model: str | None = None
) -> EndpointBenchmark:
    """Read one or more result files of one tool into a single benchmark (levels in order)."""
    records: list[Any] = []
    for path in paths:
        records.extend(read_json_records(path))
    if not all(isinstance(r, Mapping) for r in records):
        raise IngestError("every result must be a JSON object")
    if fmt == "vllm-bench":
        return from_vllm_bench(records, model=model)
    if fmt == "aiperf":
        return from_aiperf(records, model=model)
    return from_guidellm(records, model=model)
