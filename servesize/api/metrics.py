"""Prometheus metrics, one registry per app (tests build many apps in one process).

Besides the HTTP series, each registry carries the process, platform and garbage-collector
collectors and the planner's own series (names in docs/operations.md). ``_created`` samples are
off (:func:`prometheus_client.disable_created_metrics`): they double the series count and carry
no information a scrape's timestamp does not.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass, field

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    multiprocess,
)

from servesize import __version__

disable_created_metrics()  # type: ignore[no-untyped-call]

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def multiprocess_dir() -> str | None:
    """The directory of multiprocess mode, ``None`` when this process reports alone."""
    return os.environ.get(MULTIPROC_ENV) or None


LATENCY_BUCKETS_S = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
)
"""Up to 300 s: a sizing with verification runs for up to about a minute."""


@dataclass
class HttpMetrics:
    registry: CollectorRegistry = field(
        default_factory=lambda: CollectorRegistry(auto_describe=True)
    )

    multiprocess_dir: str | None = field(default_factory=multiprocess_dir)
    """Set: the samples of every process in this directory are summed at a scrape."""

    def __post_init__(self) -> None:
        registry = self.registry
        if self.multiprocess_dir is None:
            ProcessCollector(registry=registry)
            PlatformCollector(registry=registry)
            GCCollector(registry=registry)
        self.requests = Counter(
            "servesize_http_requests",
            "HTTP requests by method, route template and status code.",
            ["method", "route", "status"],
            registry=registry,
        )
        self.latency = Histogram(
            "servesize_http_request_duration_seconds",
            "Time from request start to the end of the response, by route template.",
            ["method", "route"],
            buckets=LATENCY_BUCKETS_S,
            registry=registry,
        )
        self.sizing_duration = Histogram(
            "servesize_sizing_duration_seconds",
            "Time one sizing search took (cache misses only).",
            buckets=LATENCY_BUCKETS_S,
            registry=registry,
        )
        self.candidates_evaluated = Counter(
            "servesize_sizing_candidates_evaluated",
            "Deployment candidates the sizing searches evaluated.",
            registry=registry,
        )
        self.simulated_requests = Counter(
            "servesize_simulated_requests",
            "Requests simulated, by what ran the simulation.",
            ["source"],
            registry=registry,
        )
        self.cache_requests = Counter(
            "servesize_sizing_cache_requests",
            "Sizing answer cache lookups, by result (hit, miss).",
            ["result"],
            registry=registry,
        )
        build = Gauge(
            "servesize_build_info",
            "Always 1; the labels name the running build.",
            ["version", "python_version"],
            registry=registry,
            multiprocess_mode="max",
        )
        build.labels(version=__version__, python_version=platform.python_version()).set(1)

    def scrape_registry(self) -> CollectorRegistry:
        """What ``/metrics`` renders: this app's registry, or in multiprocess mode a registry
        that reads every process's files."""
        if self.multiprocess_dir is None:
            return self.registry
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=self.multiprocess_dir)  # type: ignore[no-untyped-call]
        return registry

    def process_stopped(self) -> None:
        """Multiprocess mode: mark this process's live gauge files dead (a stopping worker)."""
        if self.multiprocess_dir is not None:
            multiprocess.mark_process_dead(os.getpid(), self.multiprocess_dir)  # type: ignore[no-untyped-call]

    def observe(self, *, method: str, route: str, status: int, duration_s: float) -> None:
        self.requests.labels(method=method, route=route, status=str(status)).inc()
        self.latency.labels(method=method, route=route).observe(duration_s)

    def sizing_cache(self, *, hit: bool) -> None:
        self.cache_requests.labels(result="hit" if hit else "miss").inc()

    def sizing_answer(
        self, *, elapsed_s: float, candidates_evaluated: int, simulated_requests: int
    ) -> None:
        """One computed (not cached) sizing answer."""
        self.sizing_duration.observe(elapsed_s)
        self.candidates_evaluated.inc(candidates_evaluated)
        self.simulated_requests.labels(source="sizing").inc(simulated_requests)
