"""Benchmark a live OpenAI-compatible streaming endpoint (vLLM, SGLang, TGI, ...).

Per request, measured on the client with ``time.perf_counter`` (after ``vllm bench serve``,
``vllm-project/vllm:vllm/benchmarks/lib/endpoint_request_func.py``; ``clock`` replaces it, e.g.
with a virtual event loop's ``loop.time`` in tests):

- TTFT = arrival of the first SSE chunk carrying text − send time (queueing in the server
  included, as the client sees it);
- ITL gaps = times between consecutive text-carrying chunks (a chunk may hold more than one
  token, so these are chunk gaps), pooled over requests;
- E2E = arrival of the *last text-carrying chunk* − send time, as vLLM's
  ``async_request_openai_completions`` sets ``latency = most_recent_timestamp − st`` (the
  usage chunk and ``data: [DONE]`` that follow are not counted); so E2E = TTFT + Σ gaps;
- output tokens N = ``usage.completion_tokens`` of the final chunk when the server reports it
  (``stream_options.include_usage``), else the number of text-carrying chunks; the prompt
  length is ``usage.prompt_tokens`` (the server's count, not the requested length);
- TPOT = (E2E − TTFT) / (N − 1), undefined for N = 1.

Each level can be preceded by warm-up requests at the same load, left out of its figures.

A request is ``ok`` when the stream ends with text and no error, ``timed_out`` when it does not
finish within the timeout, ``failed`` otherwise (non-200 status, error chunk, broken stream).

Load is either *closed loop* (C clients, each sending its next request when the previous one
ends: offered load falls as the service slows, so latency under overload is understated) or
*open loop* (Poisson arrivals at a fixed rate from a seeded ``numpy`` Generator, independent
of the responses).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import httpx2
import numpy as np

from servesize.schemas.measurements import EndpointBenchmark, EndpointLevel, LatencyStats, LoadMode

ApiKind = Literal["completions", "chat"]
RequestStatus = Literal["ok", "failed", "timed_out"]

API_PATHS: dict[ApiKind, str] = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}

Clock = Callable[[], float]
"""Seconds on a monotonic clock; every time of one level is read from the same clock."""

# Common English words; with their leading space most are single tokens in the large BPE
# vocabularies of current models, so a prompt of n words is roughly n tokens.
_VOCABULARY = (
    "time year people way day man thing woman life child world school state family student "
    "group country problem hand part place case week company system program question work "
    "government number night point home water room mother area money story fact month lot "
    "right study book eye job word business issue side kind head house service friend father "
    "power hour game line end member law car city community name president team minute idea"
)
WORDS = tuple(_VOCABULARY.split())


@dataclass(frozen=True, slots=True, kw_only=True)
class EndpointTarget:
    """Where and what to send."""

    url: str
    model: str
    api: ApiKind = "completions"
    input_tokens: int = 512
    output_tokens: int = 128
    timeout_s: float = 60.0
    ignore_eos: bool = True
    api_key: str | None = None

    def __post_init__(self) -> None:
        if self.input_tokens < 1 or self.output_tokens < 1:
            raise ValueError(
                f"input_tokens and output_tokens must be >= 1, "
                f"got {self.input_tokens} and {self.output_tokens}"
            )
        if not self.timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, got {self.timeout_s}")

    @property
    def endpoint_url(self) -> str:
        return self.url.rstrip("/") + API_PATHS[self.api]


@dataclass(frozen=True, slots=True, kw_only=True)
class Slo:
    """Per-request objectives for goodput; ``None`` means no objective on that metric."""

    ttft_s: float | None = None
    tpot_s: float | None = None

    @property
    def is_set(self) -> bool:
        return self.ttft_s is not None or self.tpot_s is not None

    def met_by(self, record: RequestRecord) -> bool:
        """An ``ok`` request within every objective (TPOT is met trivially when N = 1)."""
        if record.status != "ok" or record.ttft_s is None:
            return False
        if self.ttft_s is not None and record.ttft_s > self.ttft_s:
            return False
        tpot = record.tpot_s
        return self.tpot_s is None or tpot is None or tpot <= self.tpot_s


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadLevel:
    """One load level: ``concurrency`` clients (closed loop) or ``rate_per_s`` (open loop)."""

    mode: LoadMode
    concurrency: int | None = None
    rate_per_s: float | None = None

    def __post_init__(self) -> None:
        if self.mode == "closed_loop" and not (self.concurrency or 0) >= 1:
            raise ValueError(f"closed loop needs concurrency >= 1, got {self.concurrency}")
        if self.mode == "open_loop" and not (self.rate_per_s or 0) > 0:
            raise ValueError(f"open loop needs a positive rate, got {self.rate_per_s}")

    @property
    def label(self) -> str:
        if self.mode == "closed_loop":
            return f"concurrency {self.concurrency}"
        return f"rate {self.rate_per_s:g}/s"


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestRecord:
    """One request's outcome; times are seconds since the start of its level."""

    status: RequestStatus
    start_s: float
    end_s: float
    ttft_s: float | None = None
    itl_s: tuple[float, ...] = ()
    output_tokens: int = 0
    input_tokens: int | None = None
    error: str | None = None

    @property
    def e2e_s(self) -> float:
        return self.end_s - self.start_s

    @property
    def tpot_s(self) -> float | None:
        """(E2E − TTFT) / (N − 1); ``None`` for a failed request or a single output token."""
        if self.status != "ok" or self.ttft_s is None or self.output_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)


def make_prompt(*, index: int, input_tokens: int, rng: np.random.Generator) -> str:
    """About ``input_tokens`` tokens of random words behind a unique prefix, so no two
    requests share a cached prefix."""
    words = rng.choice(WORDS, size=max(input_tokens - 2, 1))
    return f"{index}: " + " ".join(str(w) for w in words)


def request_body(target: EndpointTarget, prompt: str) -> dict[str, Any]:
    """The JSON body; ``ignore_eos`` (a vLLM/SGLang extension) makes N equal ``output_tokens``."""
    body: dict[str, Any] = {
        "model": target.model,
        "max_tokens": target.output_tokens,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if target.ignore_eos:
        body["ignore_eos"] = True
    if target.api == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    return body


def _chunk_text(chunk: dict[str, Any], api: ApiKind) -> str:
    choices = chunk.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return ""
    if api == "completions":
        return str(choices[0].get("text") or "")
    delta = choices[0].get("delta") or {}
    # Reasoning deltas count as output, as in vllm bench serve.
    return str(
        delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning") or ""
    )


async def send_request(
    client: httpx2.AsyncClient,
    target: EndpointTarget,
    prompt: str,
    *,
    t0: float,
    clock: Clock = time.perf_counter,
) -> RequestRecord:
    """Stream one request and time it on ``clock`` (``t0`` read from it); never raises for a
    request that goes wrong."""
    headers = {"Authorization": f"Bearer {target.api_key}"} if target.api_key else {}
    start = clock()
    chunk_times: list[float] = []
    usage_tokens: int | None = None
    prompt_tokens: int | None = None

    def record(status: RequestStatus, error: str | None = None) -> RequestRecord:
        end = clock()
        if status == "ok" and not chunk_times:
            status, error = "failed", error or "the stream carried no text"
        if status != "ok":
            return RequestRecord(status=status, start_s=start - t0, end_s=end - t0, error=error)
        gaps = tuple(float(g) for g in np.diff(chunk_times))
        return RequestRecord(
            status="ok",
            start_s=start - t0,
            end_s=chunk_times[-1] - t0,  # the last text chunk, as vLLM's latency
            ttft_s=chunk_times[0] - start,
            itl_s=gaps,
            output_tokens=usage_tokens if usage_tokens is not None else len(chunk_times),
            input_tokens=prompt_tokens,
        )

    try:
        async with asyncio.timeout(target.timeout_s):
            async with client.stream(
                "POST", target.endpoint_url, json=request_body(target, prompt), headers=headers
            ) as response:
                if response.status_code != 200:
                    text = (await response.aread()).decode(errors="replace")[:300]
                    return record("failed", f"HTTP {response.status_code}: {text}")
                async for line in response.aiter_lines():
                    if not line.startswith("data:"):
                        continue  # blank separators, ": ping" comments, event/id fields
                    data = line[len("data:") :].strip()
                    if data == "[DONE]":
                        break
                    chunk = json.loads(data)
                    if not isinstance(chunk, dict):
                        return record("failed", f"unexpected SSE data: {data[:100]}")
                    if chunk.get("error"):
                        return record("failed", f"error chunk: {str(chunk['error'])[:200]}")
                    if _chunk_text(chunk, target.api):
                        chunk_times.append(clock())
                    usage = chunk.get("usage")
                    if isinstance(usage, dict) and usage.get("completion_tokens"):
                        usage_tokens = int(usage["completion_tokens"])
                    if isinstance(usage, dict) and usage.get("prompt_tokens"):
                        prompt_tokens = int(usage["prompt_tokens"])
    except (TimeoutError, httpx2.TimeoutException):
        return record("timed_out", f"no complete response within {target.timeout_s:g} s")
    except (httpx2.HTTPError, ValueError) as exc:  # ValueError covers malformed JSON
        return record("failed", f"{type(exc).__name__}: {exc}"[:300])
    return record("ok")


RequestCallback = Callable[[RequestRecord], None]


def _ignore(record: RequestRecord) -> None:
    del record


async def run_level(
    client: httpx2.AsyncClient,
    target: EndpointTarget,
    level: LoadLevel,
    *,
    requests: int,
    rng: np.random.Generator,
    on_done: RequestCallback = _ignore,
    clock: Clock = time.perf_counter,
) -> tuple[list[RequestRecord], float]:
    """Send ``requests`` requests at one load level; returns the records and the level's
    duration (first send to last completion, failed and timed-out requests included), all read
    from ``clock``."""
    if requests < 1:
        raise ValueError(f"requests must be >= 1, got {requests}")
    offsets_s = (
        arrival_offsets_s(rate_per_s=level.rate_per_s, count=requests, rng=rng)
        if level.rate_per_s is not None
        else []
    )
    prompts = [
        make_prompt(index=i, input_tokens=target.input_tokens, rng=rng) for i in range(requests)
    ]
    records: list[RequestRecord] = []
    t0 = clock()

    async def one(i: int) -> None:
        rec = await send_request(client, target, prompts[i], t0=t0, clock=clock)
        records.append(rec)
        on_done(rec)

    if level.mode == "closed_loop":
        assert level.concurrency is not None
        pending = iter(range(requests))

        async def closed_client() -> None:
            for i in pending:  # shared iterator: each client takes the next unsent request
                await one(i)

        await asyncio.gather(*(closed_client() for _ in range(min(level.concurrency, requests))))
    else:
        tasks = []
        for i, offset_s in enumerate(offsets_s):
            delay_s = t0 + offset_s - clock()
            if delay_s > 0:
                await asyncio.sleep(delay_s)
            tasks.append(asyncio.create_task(one(i)))
        await asyncio.gather(*tasks)
    return records, clock() - t0


def arrival_offsets_s(*, rate_per_s: float, count: int, rng: np.random.Generator) -> list[float]:
    """Poisson arrivals: the first at 0, then exponential gaps of mean ``1 / rate_per_s``."""
    gaps_s = rng.exponential(1.0 / rate_per_s, size=count - 1)
    return [0.0, *(float(t) for t in np.cumsum(gaps_s))]


def latency_stats(values_s: Sequence[float]) -> LatencyStats | None:
    """Mean, population std (``np.std``, as vLLM's ``std_*_ms``), min, max and
    linear-interpolated percentiles (numpy's default method); ``None`` if empty."""
    if not values_s:
        return None
    data = np.asarray(values_s, dtype=np.float64)
    p50, p90, p95, p99 = (float(v) for v in np.percentile(data, [50, 90, 95, 99]))
    return LatencyStats(
        mean=float(data.mean()),
        p50=p50,
        p90=p90,
        p95=p95,
        p99=p99,
        std=float(data.std()),
        min=float(data.min()),
        max=float(data.max()),
    )


def summarize_level(
    records: Sequence[RequestRecord], *, level: LoadLevel, duration_s: float, slo: Slo
) -> EndpointLevel:
    """Aggregate one level. Latency distributions use the ``ok`` requests; every request,
    failed or timed out, counts in ``requests`` and its time stays in ``duration_s``, so
    throughput = completed / duration and goodput = (ok and within SLO) / duration. Input
    tokens/s = Σ ``usage.prompt_tokens`` of ``ok`` requests / duration (``None`` if the server
    reported none); total = (input + output) / duration."""
    ok = [r for r in records if r.status == "ok"]
    tpots = [t for t in (r.tpot_s for r in ok) if t is not None]
    output_tokens = sum(r.output_tokens for r in ok)
    prompts = [r.input_tokens for r in ok if r.input_tokens is not None]
    input_tokens = sum(prompts) if prompts and len(prompts) == len(ok) else None
    return EndpointLevel(
        mode=level.mode,
        concurrency=level.concurrency,
        rate_per_s=level.rate_per_s,
        requests=len(records),
        completed=len(ok),
        failed=sum(r.status == "failed" for r in records),
        timed_out=sum(r.status == "timed_out" for r in records),
        duration_s=duration_s,
        ttft_s=latency_stats([r.ttft_s for r in ok if r.ttft_s is not None]),
        itl_s=latency_stats([g for r in ok for g in r.itl_s]),
        tpot_s=latency_stats(tpots),
        e2e_s=latency_stats([r.e2e_s for r in ok]),
        throughput_requests_per_s=len(ok) / duration_s,
        throughput_output_tokens_per_s=output_tokens / duration_s,
        goodput_requests_per_s=sum(slo.met_by(r) for r in ok) / duration_s if slo.is_set else None,
        throughput_input_tokens_per_s=(
            input_tokens / duration_s if input_tokens is not None else None
        ),
        throughput_total_tokens_per_s=(
            (input_tokens + output_tokens) / duration_s if input_tokens is not None else None
        ),
        mean_input_tokens=input_tokens / len(ok) if input_tokens is not None else None,
        mean_output_tokens=output_tokens / len(ok) if ok else None,
    )


LevelCallback = Callable[[LoadLevel, int], None]
"""Called when a level starts, with the number of requests it will send."""


def _ignore_level(level: LoadLevel, requests: int) -> None:
    del level, requests


async def benchmark_endpoint(
    target: EndpointTarget,
    levels: Sequence[LoadLevel],
    *,
    requests: int,
    warmup_requests: int = 0,
    seed: int = 0,
    slo: Slo = Slo(),
    engine: str | None = None,
    engine_version: str | None = None,
    on_level: LevelCallback = _ignore_level,
    on_done: RequestCallback = _ignore,
) -> EndpointBenchmark:
    """Run every level in order, one ``httpx2.AsyncClient`` for all of them; before each,
    ``warmup_requests`` requests at the same load whose records are dropped."""
    if not levels:
        raise ValueError("give at least one load level")
    if warmup_requests < 0:
        raise ValueError(f"warmup_requests must be >= 0, got {warmup_requests}")
    rng = np.random.default_rng(seed)
    timeout = httpx2.Timeout(target.timeout_s)
    limits = httpx2.Limits(max_connections=None, max_keepalive_connections=None)
    results: list[EndpointLevel] = []
    async with httpx2.AsyncClient(timeout=timeout, limits=limits) as client:
        for level in levels:
            if warmup_requests:
                await run_level(client, target, level, requests=warmup_requests, rng=rng)
            on_level(level, requests)
            records, duration_s = await run_level(
                client, target, level, requests=requests, rng=rng, on_done=on_done
            )
            results.append(summarize_level(records, level=level, duration_s=duration_s, slo=slo))
    return EndpointBenchmark(
        model=target.model,
        engine=engine,
        engine_version=engine_version,
        source="servesize-agent",
        input_tokens=target.input_tokens,
        output_tokens=target.output_tokens,
        warmup_requests=warmup_requests,
        levels=results,
    )
