"""Load bench: many concurrent clients against ``servesize serve`` and a bare FastAPI endpoint,
measured in the same run.

``python -m bench.load [--clients 100] [--duration-s 60] [--database-url URL]``

Each phase runs ``clients`` closed-loop clients (each sends its next request when the previous
answer arrives) for ``duration_s`` against one endpoint: the bare endpoint
(:mod:`bench.bare_app`) first, then ``GET /v1/models``, ``POST /v1/memory`` and
``POST /v1/performance`` on ``servesize serve`` (SQLite in a temporary directory unless a URL is
given; the rate limit off, since every client shares one address; the access log on, written to
a file). It prints requests/s, the ratio to the bare endpoint's requests/s, p50 and p99 latency,
and errors (any answer but 200, or a transport error).

The clients run in this process (httpx, asyncio), on the same machine as the servers, so the
figures are ratios of one run, not capacities: the client's own CPU use is in every phase,
and on a shared machine other work moves them. The issue's target is 100 clients × 60 s with
0 errors, ``/v1/memory`` >= 0.5x and ``/v1/performance`` >= 0.3x the bare endpoint.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.servers import Server, start_bare, start_servesize

MODEL = "meta-llama/Llama-3.1-8B"
TARGETS = {"/v1/memory": 0.5, "/v1/performance": 0.3}


@dataclass
class Phase:
    name: str
    method: str
    path: str
    body: dict[str, Any] | None
    latencies_s: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    elapsed_s: float = 0.0

    @property
    def ok(self) -> int:
        return len(self.latencies_s)

    @property
    def rate_per_s(self) -> float:
        return self.ok / self.elapsed_s if self.elapsed_s else 0.0

    def percentile_ms(self, q: float) -> float:
        return (
            float(np.percentile(self.latencies_s, q) * 1000) if self.latencies_s else float("nan")
        )


PHASES = (
    ("bare FastAPI", "POST", "/bare", {"model": MODEL, "hardware": "h100-sxm"}),
    ("GET /v1/models", "GET", "/v1/models", None),
    ("POST /v1/memory", "POST", "/v1/memory", {"model": MODEL, "hardware": "h100-sxm"}),
    (
        "POST /v1/performance",
        "POST",
        "/v1/performance",
        {
            "model": MODEL,
            "hardware": "h100-sxm",
            "workload": {"concurrency": 32, "input_tokens": 1024, "output_tokens": 128},
        },
    ),
)


async def run_phase(base_url: str, phase: Phase, *, clients: int, duration_s: float) -> None:
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    timeout = httpx.Timeout(max(30.0, duration_s))
    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=timeout) as client:
        stop_at = time.perf_counter() + duration_s

        async def one_client() -> None:
            while time.perf_counter() < stop_at:
                started = time.perf_counter()
                try:
                    response = await client.request(phase.method, phase.path, json=phase.body)
                    status = str(response.status_code)
                except httpx.HTTPError as exc:
                    status = type(exc).__name__
                if status == "200":
                    phase.latencies_s.append(time.perf_counter() - started)
                else:
                    phase.errors[status] = phase.errors.get(status, 0) + 1

        started = time.perf_counter()
        await asyncio.gather(*(one_client() for _ in range(clients)))
        phase.elapsed_s = time.perf_counter() - started


async def warm(base_url: str, phase: Phase) -> None:
    async with httpx.AsyncClient(base_url=base_url, timeout=60.0) as client:
        response = await client.request(phase.method, phase.path, json=phase.body)
        if response.status_code != 200:
            raise RuntimeError(f"{phase.path}: {response.status_code} {response.text[:300]}")


def report(phases: list[Phase], *, clients: int, duration_s: float) -> bool:
    bare = phases[0].rate_per_s
    print(f"\nload: {clients} concurrent clients, {duration_s:g} s per endpoint (one run)")
    print(
        f"{'endpoint':<24}{'requests':>10}{'req/s':>10}{'x bare':>8}"
        f"{'p50 ms':>10}{'p99 ms':>10}{'errors':>8}  target"
    )
    met = True
    for p in phases:
        ratio = p.rate_per_s / bare if bare else float("nan")
        errors = sum(p.errors.values())
        target = TARGETS.get(p.path)
        verdict = ""
        if target is not None:
            reached = ratio >= target and errors == 0
            met = met and reached
            verdict = f">= {target:g}x, 0 errors: {'met' if reached else 'NOT met'}"
        elif p.path != "/bare":
            met = met and errors == 0
        print(
            f"{p.name:<24}{p.ok + errors:>10}{p.rate_per_s:>10.1f}{ratio:>8.3f}"
            f"{p.percentile_ms(50):>10.1f}{p.percentile_ms(99):>10.1f}{errors:>8}  {verdict}"
        )
        if p.errors:
            print(f"{'':<24}errors by status: {dict(sorted(p.errors.items()))}")
    return met


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--duration-s", type=float, default=5.0, help="per endpoint")
    parser.add_argument("--database-url", default=None, help="default: SQLite in a temp dir")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        url = args.database_url or f"sqlite:///{Path(tmp) / 'servesize.db'}"
        servers: list[Server] = []
        try:
            bare = start_bare()
            servers.append(bare)
            app = start_servesize(
                url,
                log_path=Path(tmp) / "server.log",
                env={"RATE_LIMIT_PER_MINUTE": "0", "LOG_LEVEL": "INFO"},
            )
            servers.append(app)
            bare.wait_ready("/livez")
            app.wait_ready("/readyz")
            phases = [Phase(*spec) for spec in PHASES]
            for phase in phases:
                base = bare.base_url if phase.path == "/bare" else app.base_url
                asyncio.run(warm(base, phase))
                asyncio.run(
                    run_phase(base, phase, clients=args.clients, duration_s=args.duration_s)
                )
        finally:
            for server in servers:
                server.stop()
    met = report(phases, clients=args.clients, duration_s=args.duration_s)
    print("targets met" if met else "targets NOT met (see the table)")


if __name__ == "__main__":
    main()
