"""Prefix caching through /v1/performance and /v1/simulate: identical prompts prefill only
their last partial block (worked by hand), the per-engine defaults, and the refusals."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

MODEL = "meta-llama/Llama-3.1-8B"


def perf(client: TestClient, workload: dict[str, Any], **body: Any) -> Any:
    payload = {"model": MODEL, "hardware": "h100-sxm", "workload": workload} | body
    return client.post("/v1/performance", json=payload)


def test_identical_prompts_prefill_their_uncached_tail(client: TestClient) -> None:
    """1000-token prompts, all identical, 16-token blocks: a warm request finds
    floor(999/16) = 62 blocks = 992 tokens cached and prefills the 8 left, so its prefill is
    that of an 8-token prompt; the decodes still attend to the whole prompt."""
    point = {"concurrency": 1, "input_tokens": 1000, "output_tokens": 64}
    cached = perf(client, point | {"prefix": {"shared_prefix_tokens": 1000}})
    assert cached.status_code == 200, cached.text
    body = cached.json()
    cache = body["prefix_cache"]
    assert cache["hit_tokens_per_request"] == 992.0
    assert cache["hit_probability"] == 1.0
    assert cache["prefill_tokens_per_request"] == 8
    assert body["input_tokens"] == 1000
    short = perf(client, point | {"input_tokens": 8}).json()
    assert body["prefill_time_s"] == short["prefill_time_s"]
    plain = perf(client, point).json()
    assert plain["prefix_cache"] is None
    assert body["ttft_s"] < plain["ttft_s"]
    # TPOT is the decode step at the whole context, as without a cache (within the lock-step
    # loop's per-step contexts); the suffix-only run alone would be faster.
    assert body["tpot_s"] == pytest.approx(plain["tpot_s"], rel=0.02)
    assert cache["decode_context_s"] > 0


def test_caching_off_ignores_the_prefix(client: TestClient) -> None:
    point = {"concurrency": 4, "input_tokens": 1000, "output_tokens": 64}
    off = perf(
        client,
        point | {"prefix": {"shared_prefix_tokens": 1000}},
        deployment={"enable_prefix_caching": False},
    ).json()
    plain = perf(client, point).json()
    assert off["prefix_cache"] is None
    assert off["ttft_s"] == plain["ttft_s"]
    assert off["tpot_s"] == plain["tpot_s"]


@pytest.mark.parametrize(
    ("deployment", "value"),
    [
        ({"engine": "vllm"}, "true"),
        ({"engine": "vllm", "engine_version": "0.7.3"}, "false"),
        ({"engine": "sglang"}, "true"),
        ({"engine": "trtllm"}, "true"),
    ],
)
def test_engine_defaults_are_reported(
    client: TestClient, deployment: dict[str, str], value: str
) -> None:
    body = perf(
        client, {"concurrency": 1, "input_tokens": 128, "output_tokens": 8}, deployment=deployment
    ).json()
    applied = {d["field"]: d["value"] for d in body["defaults_applied"]}
    assert applied["enable_prefix_caching"] == value


@pytest.mark.parametrize(
    "prefix",
    [
        {"shared_prefix_tokens": 100, "cache_hit_rate": 0.5},
        {},
        {"cache_hit_rate": 0.5, "num_prefixes": 3},
        {"shared_prefix_tokens": 100, "shared_fraction": 0},
    ],
)
def test_bad_prefix_is_a_422_under_workload_prefix(
    client: TestClient, prefix: dict[str, Any]
) -> None:
    response = perf(client, {"input_tokens": 128, "output_tokens": 8, "prefix": prefix})
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    pointers = [e["pointer"] for e in response.json()["errors"]]
    assert all(p.startswith("/workload/prefix") for p in pointers), pointers


@pytest.mark.parametrize(
    ("engine", "cache", "hit"), [("vllm", "free_queue_lru", 496), ("sglang", "radix_lru", 511)]
)
def test_simulated_hit_rate_of_identical_prompts(
    client: TestClient, engine: str, cache: str, hit: int
) -> None:
    """512-token identical prompts at a light load: every measured request (after the first,
    a warm-up) finds its prompt cached but the last token, in whole blocks: vLLM's 16-token
    blocks floor(511/16) · 16 = 496 tokens, SGLang's 1-token pages 511."""
    traffic = {
        "mode": "open_loop",
        "arrival": {"process": "poisson", "rate_per_s": 2.0},
        "input_tokens": 512,
        "output_tokens": 16,
        "num_requests": 60,
        "warmup_requests": 1,
        "seed": 1,
        "prefix": {"shared_prefix_tokens": 512},
    }
    response = client.post(
        "/v1/simulate",
        json={
            "model": MODEL,
            "hardware": "h100-sxm",
            "deployment": {"engine": engine},
            "traffic": traffic,
        },
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["engine_config"]["prefix_caching"] == cache
    assert body["prefix_cache_hit_rate"] == pytest.approx(hit / 512, abs=1e-12)


def test_slo_zero_load_screen_sees_a_warm_cache(client: TestClient) -> None:
    """4096-token identical prompts: a warm request prefills 4096 − floor(4095/16) · 16 = 16
    tokens, so a TTFT target between the zero-load TTFT of 16 and of 4096 prompt tokens is
    refused at zero load without the prefix (naming the 4096-token figure) and screened in with
    it."""
    one = {"concurrency": 1, "output_tokens": 16}
    cold = perf(client, one | {"input_tokens": 4096}).json()["ttft_zero_load_s"]
    warm = perf(client, one | {"input_tokens": 16}).json()["ttft_zero_load_s"]
    assert warm < cold
    traffic = {
        "mode": "open_loop",
        "arrival": {"process": "poisson", "rate_per_s": 1.0},
        "input_tokens": 4096,
        "output_tokens": 16,
        "num_requests": 40,
        "warmup_requests": 5,
        "seed": 2,
    }
    slo = {"ttft_s": {"p95": (warm + cold) / 2}}
    body = {"model": MODEL, "hardware": "h100-sxm", "slo": slo}
    refused = client.post("/v1/slo/evaluate", json=body | {"traffic": traffic})
    assert refused.status_code == 422, refused.text
    assert refused.json()["errors"][0]["zero_load"] == pytest.approx(cold, rel=1e-9)
    shared = traffic | {"prefix": {"shared_prefix_tokens": 4096}}
    screened = client.post("/v1/slo/evaluate", json=body | {"traffic": shared})
    assert screened.status_code == 200, screened.text
