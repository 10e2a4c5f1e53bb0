"""What every format shares: the error, number and mapping helpers, the :class:`LatencyStats`
and :class:`EndpointLevel` builders, and :func:`gaps` (the percentiles a file did not carry)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, TypeGuard

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
