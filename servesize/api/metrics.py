"""Prometheus metrics, one registry per app (tests build many apps in one process)."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Histogram

LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass
class HttpMetrics:
    registry: CollectorRegistry = field(
        default_factory=lambda: CollectorRegistry(auto_describe=True)
    )

    def __post_init__(self) -> None:
        self.requests = Counter(
            "servesize_http_requests",
            "HTTP requests by method, route template and status code.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "servesize_http_request_duration_seconds",
            "Time from request start to the end of the response, by route template.",
            ["method", "route"],
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )

    def observe(self, *, method: str, route: str, status: int, duration_s: float) -> None:
        self.requests.labels(method=method, route=route, status=str(status)).inc()
        self.latency.labels(method=method, route=route).observe(duration_s)
