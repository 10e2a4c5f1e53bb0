"""/metrics: process, platform and GC collectors, no ``_created`` series, buckets past two
minutes, build info and the planner's own series."""

from __future__ import annotations

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from servesize import __version__
from servesize.api.metrics import HttpMetrics
from servesize.api.sizing_cache import SizingCache
from servesize.schemas.sizing import SizingResponse


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_carry_collectors_build_info_and_long_buckets(client: TestClient) -> None:
    client.get("/v1/models")
    text = client.get("/metrics").text
    assert "_created" not in text
    samples = _samples(text)
    names = {name for name, _ in samples}
    assert {"process_cpu_seconds_total", "process_resident_memory_bytes"} <= names
    assert "python_info" in names
    assert "python_gc_collections_total" in names
    build = [v for (n, labels), v in samples.items() if n == "servesize_build_info"]
    assert build == [1.0]
    assert any(
        n == "servesize_build_info" and ("version", __version__) in labels for n, labels in samples
    )
    les = {
        dict(labels)["le"]
        for n, labels in samples
        if n == "servesize_http_request_duration_seconds_bucket"
    }
    assert {"60.0", "120.0"} <= les


def test_sizing_answers_and_cache_lookups_are_counted() -> None:
    metrics = HttpMetrics()
    cache = SizingCache(metrics=metrics)
    answer = SizingResponse.model_construct(  # only the fields the metrics read
        elapsed_s=42.0, candidates_evaluated=17, simulated_requests=1200, cached=False
    )  # type: ignore[call-arg]
    assert cache.get("k") is None
    cache.put("k", answer)
    assert cache.get("k") is not None

    def value(name: str, **labels: str) -> float | None:
        return metrics.registry.get_sample_value(name, labels)

    assert value("servesize_sizing_cache_requests_total", result="miss") == 1
    assert value("servesize_sizing_cache_requests_total", result="hit") == 1
    assert value("servesize_sizing_duration_seconds_sum") == 42.0
    assert value("servesize_sizing_duration_seconds_bucket", le="30.0") == 0
    assert value("servesize_sizing_duration_seconds_bucket", le="60.0") == 1
    assert value("servesize_sizing_candidates_evaluated_total") == 17
    assert value("servesize_simulated_requests_total", source="sizing") == 1200
