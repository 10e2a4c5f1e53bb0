"""``vllm bench serve`` result files (``--save-result``, ``--append-result``,
``--save-detailed``)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from servesize.agent.endpoint import latency_stats as sample_stats
from servesize.agent.ingest.common import (
    PERCENTILES,
    IngestError,
    _is_number,
    _level,
    _maybe,
    _number,
    _one_model,
    _summary,
)
from servesize.schemas.measurements import EndpointBenchmark, LatencyStats, LoadMode

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
