"""AIPerf exports (and GenAI-Perf, whose JSON it mimics): the summary JSON, the per-request
records JSONL and the CSV."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping, Sequence
from typing import Any

from servesize.agent.endpoint import latency_stats as sample_stats
from servesize.agent.ingest.common import (
    OURS,
    PERCENTILES,
    IngestError,
    _dig,
    _is_number,
    _level,
    _maybe,
    _number,
    _one_model,
    _optional_mapping,
    _summary,
)
from servesize.schemas.measurements import EndpointBenchmark, LatencyStats, LoadMode

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
